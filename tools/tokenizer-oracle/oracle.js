#!/usr/bin/env node
// Parity oracle for the k3 Go tokenizer (package k3/tokenizer).
//
// The real Kimi K3 tiktoken.model is not available, so this script builds a
// stand-in vocabulary in the same file format from the cl100k_base ranks that
// ship with the npm `tiktoken` package, and runs OpenAI's tiktoken (the Rust
// crate compiled to WASM — the engine Moonshot's TikTokenTokenizer uses)
// configured with the Kimi K3 pat_str and the 256 K3 special tokens.
//
// Outputs (all deterministic; re-running gives byte-identical files):
//   tokenizer/testdata/parity/tiktoken.model         trimmed stand-in vocab
//   tokenizer/testdata/parity/tokenizer_config.json  K3 specials for it
//   tokenizer/testdata/parity/expected.json.gz       corpus + expected pieces/ids
//
// Trimming: the stand-in keeps the 256 single bytes plus every cl100k token
// whose bytes occur somewhere in the corpus, renumbered densely in cl100k
// rank order. Rank-ordered BPE on a piece only ever looks up substrings of
// that piece, so on this corpus the trimmed vocab gives exactly the
// segmentation of the full cl100k vocab; the script checks that claim by
// encoding every case with the full vocab as well and mapping the ids.
//
// Pieces: tiktoken does not expose its pre-tokenizer, so pieces come from an
// equivalent JavaScript regex (`v` flag for class intersection). Every piece
// list is cross-checked against tiktoken: encoding the pieces one by one must
// give tiktoken's ids for the whole text.
//
// Usage: cd tools/tokenizer-oracle && npm ci && node oracle.js
"use strict";

const fs = require("fs");
const path = require("path");
const zlib = require("zlib");
const crypto = require("crypto");
const { Tiktoken } = require("tiktoken/lite");
const cl100k = require("tiktoken/encoders/cl100k_base.json");

const ROOT = path.resolve(__dirname, "..", "..");
const OUT = path.join(ROOT, "tokenizer", "testdata", "parity");
const K3_CONTROL = JSON.parse(
  fs.readFileSync(path.join(ROOT, "testdata", "kimi-k3", "control_tokens.json"), "utf8"),
);

// The Kimi K3 pre-tokenizer, in tiktoken's (fancy-regex) syntax, verbatim
// from tokenization_kimi.py as documented in the project's reference notes.
const C = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
const KIMI_PAT = [
  String.raw`[\p{Han}]+`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+` + C + "?",
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*` + C + "?",
  String.raw`\p{N}{1,3}`,
  String.raw` ?[^\s\p{L}\p{N}]+[\r\n]*`,
  String.raw`\s*[\r\n]+`,
  String.raw`\s+(?!\S)`,
  String.raw`\s+`,
].join("|");

// The same pattern for V8 (`v` flag). Differences are spelling only:
// \p{Han} is written \p{sc=Han} (Rust's \p{Han} is the Script property),
// \s is written \p{White_Space} (Rust's \s is Unicode White_Space; JS's \s
// differs on U+0085 and U+FEFF), and the case-insensitive group is written
// out with the simple case folds of its letters (s also folds from U+017F).
const WS = String.raw`\p{White_Space}`;
const JC = String.raw`(?:'(?:[sSſ]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))`;
const UPPERISH = String.raw`[[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]--\p{sc=Han}]`;
const LOWERISH = String.raw`[[\p{Ll}\p{Lm}\p{Lo}\p{M}]--\p{sc=Han}]`;
const PRE = String.raw`[^\r\n\p{L}\p{N}]`;
const JS_PAT = new RegExp(
  [
    String.raw`\p{sc=Han}+`,
    `${PRE}?${UPPERISH}*${LOWERISH}+${JC}?`,
    `${PRE}?${UPPERISH}+${LOWERISH}*${JC}?`,
    String.raw`\p{N}{1,3}`,
    ` ?[^${WS}\\p{L}\\p{N}]+[\\r\\n]*`,
    `${WS}*[\\r\\n]+`,
    `${WS}+(?![^${WS}])`,
    `${WS}+`,
  ].join("|"),
  "gv",
);

// ---------------------------------------------------------------- PRNG
let rngState = 0x9e3779b9 >>> 0;
function rnd() {
  // xorshift32
  let x = rngState;
  x ^= x << 13;
  x >>>= 0;
  x ^= x >>> 17;
  x ^= x << 5;
  x >>>= 0;
  rngState = x;
  return x;
}
function pick(a) {
  return a[rnd() % a.length];
}

// ---------------------------------------------------------------- corpus
const FRAGMENTS = [
  // English, contractions (incl. uppercase and the long s that folds to s)
  "I'm sure you're right, but they'll say we've done what he'd do.",
  "IT'S DONE. He'S here. DON'T PANIC! We'RE fine, THEY'LL see, I'D go, you'VE won, I'M in.",
  "Let'ſ try the long s: it'ſ odd. O'Neil's dog's bone isn't 'quoted'.",
  "'s 't 're 've 'm 'll 'd ' s''s",
  "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX.",
  "HelloWorld XMLHttpRequest iPhone eBay ABCdef abcDEF camelCaseName snake_case_name SCREAMING_CASE",
  "ǅemal ǈubljana ǋ ᾈ ᾉ Titlecase: ǲ",
  // Han, Japanese, Korean
  "中文汉字测试，这是一个句子。我们在北京。",
  "東京都に住んでいます。カタカナとひらがなとテスト漢字テスト、々〇〆ヶ。",
  "ラーメンを食べたい！ｶﾀｶﾅ半角。ー〜",
  "안녕하세요, 세계! 한국어 텍스트입니다. 감사합니다.",
  "⺀⺁⼀⼁ 㐀㐁 𠀀𠀁 𪜀 汉字abc漢字ABC漢字123",
  // Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai
  "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю.",
  "ПРИВЕТ Мир Ёлка ёлка",
  "Γειά σου Κόσμε! ΑΒΓΔ αβγδ Ωμέγα.",
  "مرحبا بالعالم، هذا نص عربي. بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ ١٢٣٤٥",
  "שָׁלוֹם עוֹלָם! זהו טקסט בעברית.",
  "नमस्ते दुनिया, यह हिंदी है। क्षत्रिय ज्ञान १२३",
  "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ ๑๒๓",
  // emoji
  "emoji 👨‍👩‍👧‍👦 and 👍🏽 done 🏳️‍🌈 ❤️ 🇯🇵🇺🇸 😀😃 🤷🏾‍♀️",
  "👍🏻👍🏼👍🏽👍🏾👍🏿 ✋🏽 🧑‍💻",
  // combining marks
  "e\u0301 a\u0308\u0323 \u0301abc x\u20dd \u0301\u0302 Z\u0351\u0352\u0353algo",
  "café naïve résumé Ångström ñ n\u0303",
  "\u0301", "  \u0301x", "a\u0301\u0301b",
  // digits
  "1234567890 12 123 1234 12345 007 3.14159 1,000,000 ½ ² ① ⅻ Ⅻ １２３ ٣٤٥٦ ๑๒๓",
  "v1.2.3-rc4 0x1F 1e-9 -42 +7 3/4",
  // whitespace mixes
  "line one\nline two\r\nline three\r\rfour\n\n\r\n  \n\tc",
  "a\u00a0b\u3000c\u2028d\u2029e\u0085f\u200bg\ufeffh\u000bi\u000cj",
  "x\u001cy\u001dz\u001e \u001f end",
  "tabs\t\tand\t \t spaces   \n\n   \t\n",
  "  leading and trailing  ",
  "a                                        b",
  // code
  "func main() {\n\tfmt.Println(\"hello\")\n\tfor i := 0; i < 10; i++ {\n\t\tx[i] = i * 2\n\t}\n}\n",
  "def f(x):\n    return x ** 2  # square\n\nprint(f(3))\r\n",
  "const re = /\\p{L}+/gu; let s = `${a}+${b}`; if (a !== b && c >= 0) { return null; }",
  "<html><body class=\"x\">Hi &amp; bye</body></html>",
  "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
  "SELECT * FROM users WHERE id = 42 AND name LIKE '%o''brien%';",
  // literal control markers
  "<|open|>message role=\"user\"<|sep|>",
  "<|close|>message<|sep|><|end_of_msg|><|open|>message role=\"system\"<|sep|>",
  "[BOS]hi[EOS] [PAD][UNK] <|media_pad|><osagent_mode> [EOT]",
  "<|open|<|open|>|> <|sep <|sep|>x",
  // punctuation runs
  "!!! ??? ... --- ___ *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} ||| \\\\ /// ~~~",
  "« » “quoted” ‘single’ — – … • · ¿Qué? ¡Hola!",
];

// Code point ranges (Unicode <= 13, all stable in Go's Unicode 15 tables)
// drawn from for random "noise" text.
const RANGES = [
  [0x20, 0x7e], [0xa0, 0x24f], [0x250, 0x2ff], [0x300, 0x36f], [0x370, 0x3ff],
  [0x400, 0x4ff], [0x531, 0x58a], [0x591, 0x5f4], [0x600, 0x6ff], [0x900, 0x97f],
  [0xe01, 0xe5b], [0x1100, 0x11ff], [0x2000, 0x206f], [0x20a0, 0x20bf],
  [0x2190, 0x22ff], [0x2e80, 0x2ef3], [0x3000, 0x303f], [0x3041, 0x309f],
  [0x30a0, 0x30ff], [0x4e00, 0x9fa5], [0xac00, 0xd7a3], [0xff01, 0xff60],
  [0x1f300, 0x1f64f], [0x1f900, 0x1f9ff], [0x20000, 0x2a6d6], [0x1d400, 0x1d7ff],
  [0x9, 0xd], [0x1c, 0x1f],
];
const ASSIGNED = /^\p{Assigned}$/v;
function randomChar() {
  for (;;) {
    const [lo, hi] = pick(RANGES);
    const cp = lo + (rnd() % (hi - lo + 1));
    const ch = String.fromCodePoint(cp);
    if (ASSIGNED.test(ch)) return ch;
  }
}

const SEPS = ["", " ", " ", " ", "\n", "\r\n", "\t", "  ", ". ", ", ", "\n\n", " \n", "'", "-"];

// Real multilingual text found on the development machine (Vim's tutor in
// 30 languages, CPython's CJK codec test texts, the Go spec). Only the first
// EXTERNAL_CHARS code points of each file are used, cut into cases of about
// 1,500 code points at line ends. The texts are stored in expected.json.gz,
// so the Go test does not need these files; a machine without them produces
// a smaller corpus (and a different expected file).
const EXTERNAL_CHARS = 9000;
function externalTexts() {
  const files = [];
  const vim = "/usr/share/vim/vim90/tutor";
  if (fs.existsSync(vim))
    for (const f of fs.readdirSync(vim).sort()) if (f.endsWith(".utf-8")) files.push(path.join(vim, f));
  const cjk = "/root/.pyenv/versions/3.13.0/lib/python3.13/test/cjkencodings";
  if (fs.existsSync(cjk))
    for (const f of fs.readdirSync(cjk).sort()) if (f.endsWith("-utf8.txt")) files.push(path.join(cjk, f));
  if (fs.existsSync("/usr/local/go/doc/go_spec.html")) files.push("/usr/local/go/doc/go_spec.html");
  const out = [];
  for (const f of files) {
    const cps = Array.from(fs.readFileSync(f, "utf8")).slice(0, EXTERNAL_CHARS);
    const lines = cps.join("").split(/(?<=\n)/);
    let cur = "";
    for (const l of lines) {
      cur += l;
      if (Array.from(cur).length >= 1500) {
        out.push(cur);
        cur = "";
      }
    }
    if (cur) out.push(cur);
  }
  return { files, out };
}

function buildCorpus() {
  const cases = [];
  const ext = externalTexts();
  console.error(`external files: ${ext.files.length}, cases: ${ext.out.length}`);
  for (const t of ext.out) cases.push({ text: t });
  for (const f of FRAGMENTS) cases.push({ text: f });
  // Pin texts from Moonshot's tokenizer (pretokenize_pins.json).
  const pins = JSON.parse(
    fs.readFileSync(path.join(ROOT, "testdata", "kimi-k3", "pretokenize_pins.json"), "utf8"),
  );
  for (const p of pins) cases.push({ text: p.text });
  // Random mixes of fragments.
  for (let i = 0; i < 1500; i++) {
    const n = 1 + (rnd() % 6);
    let s = "";
    for (let k = 0; k < n; k++) {
      let f = pick(FRAGMENTS);
      if (rnd() % 3 === 0) {
        // a random slice, by code points, to start and end anywhere
        const cps = Array.from(f);
        const a = rnd() % cps.length;
        const b = a + 1 + (rnd() % (cps.length - a));
        f = cps.slice(a, b).join("");
      }
      s += f + pick(SEPS);
    }
    cases.push({ text: s });
  }
  // Random code point noise.
  for (let i = 0; i < 600; i++) {
    const n = 1 + (rnd() % 40);
    let s = "";
    for (let k = 0; k < n; k++) s += rnd() % 4 === 0 ? pick(SEPS) : randomChar();
    cases.push({ text: s });
  }
  // Long inputs, generated from a rule both sides implement:
  // text = prefix + unit*count + suffix.
  const gens = [
    { prefix: "x", unit: "a", count: 30000, suffix: " end" },
    { prefix: "word", unit: " ", count: 30000, suffix: "x" },
    { prefix: "", unit: " ", count: 25001, suffix: "" },
    { prefix: "", unit: "é", count: 26000, suffix: " ok" },
    { prefix: "", unit: "<|open|>", count: 4000, suffix: "" },
    { prefix: "", unit: "\u001c", count: 26000, suffix: "y" },
    { prefix: "", unit: "\n", count: 25010, suffix: "z" },
    { prefix: "", unit: "Hello wörld 漢字 123 it's\n", count: 16700, suffix: "" },
    { prefix: "", unit: "ab", count: 200001, suffix: "" },
  ];
  for (const g of gens) cases.push({ gen: g });
  return cases;
}

function caseText(c) {
  if (c.text !== undefined) return c.text;
  return c.gen.prefix + c.gen.unit.repeat(c.gen.count) + c.gen.suffix;
}

// ---------------------------------------------------------------- long-input rules
// Mirrors TikTokenTokenizer.encode: 400,000-code-point windows, then
// _split_whitespaces_or_nonwhitespaces(window, 25000) with Python's
// str.isspace (Unicode White_Space plus U+001C..U+001F).
const PY_SPACE = /^[\p{White_Space}\u001c-\u001f]$/v;
function pyChunks(text) {
  const cps = Array.from(text);
  const out = [];
  for (let i = 0; i < cps.length || (i === 0 && cps.length === 0); i += 400000) {
    const w = cps.slice(i, i + 400000);
    let curLen = 0;
    let curSpace = w.length > 0 ? PY_SPACE.test(w[0]) : false;
    let start = 0;
    for (let k = 0; k < w.length; k++) {
      const sp = PY_SPACE.test(w[k]);
      if (curSpace !== sp) {
        curLen = 1;
        curSpace = sp;
      } else {
        curLen++;
        if (curLen > 25000) {
          out.push(w.slice(start, k).join(""));
          start = k;
          curLen = 1;
        }
      }
    }
    out.push(w.slice(start).join(""));
    if (cps.length === 0) break;
  }
  return out;
}

// ---------------------------------------------------------------- vocab
function cl100kTokens() {
  const parts = cl100k.bpe_ranks.split(" ");
  if (parts[0] !== "!" || parts[1] !== "0") throw new Error("unexpected cl100k format");
  return parts.slice(2).map((b64) => Buffer.from(b64, "base64"));
}

function trimmedVocab(all, texts) {
  const byKey = new Map();
  let maxLen = 0;
  all.forEach((tok, rank) => {
    byKey.set(tok.toString("latin1"), rank);
    if (tok.length > maxLen) maxLen = tok.length;
  });
  const keep = new Set();
  for (const tok of all) if (tok.length === 1) keep.add(byKey.get(tok.toString("latin1")));
  for (const t of texts) {
    const s = Buffer.from(t, "utf8").toString("latin1");
    for (let i = 0; i < s.length; i++) {
      for (let l = 2; l <= maxLen && i + l <= s.length; l++) {
        const r = byKey.get(s.substr(i, l));
        if (r !== undefined) keep.add(r);
      }
    }
  }
  return [...keep].sort((a, b) => a - b); // original ranks, in rank order
}

function specialsFor(numBase) {
  const sp = {};
  const named = {};
  for (let off = 0; off < 256; off++) {
    const k3name = K3_CONTROL.names[String(163584 + off)];
    const id = numBase + off;
    if (!k3name.startsWith("<|reserved_token_")) {
      sp[k3name] = id;
      named[String(id)] = { content: k3name, special: true };
    } else {
      sp[`<|reserved_token_${id}|>`] = id;
    }
  }
  return { sp, named };
}

function sha256(s) {
  return crypto.createHash("sha256").update(s).digest("hex");
}

// ---------------------------------------------------------------- main
function main() {
  const cases = buildCorpus();
  const texts = cases.map(caseText);
  const all = cl100kTokens();
  // For generated cases a few repetitions of the unit contain every substring
  // short enough to be a token.
  const scan = cases.map((c, i) =>
    c.text !== undefined ? texts[i]
      : c.gen.prefix + c.gen.unit.repeat(Math.min(c.gen.count, 300)) + c.gen.suffix);
  const kept = trimmedVocab(all, scan);
  const newRank = new Map(kept.map((r, i) => [r, i]));
  const numBase = kept.length;
  const model = kept.map((r, i) => all[r].toString("base64") + " " + i).join("\n") + "\n";
  const { sp, named } = specialsFor(numBase);
  const config = JSON.stringify({ added_tokens_decoder: named, model_max_length: 1048576 }, null, 1) + "\n";

  const enc = new Tiktoken(model, sp, KIMI_PAT);
  const fullModel = all.map((t, i) => t.toString("base64") + " " + i).join("\n") + "\n";
  const fullSp = {};
  for (const [k, v] of Object.entries(sp)) fullSp[k] = all.length + 1 + (v - numBase);
  const full = new Tiktoken(fullModel, fullSp, KIMI_PAT);
  const fullToTrim = (id) => (id >= all.length ? numBase + (id - all.length - 1) : newRank.get(id));

  let nPieces = 0, nIds = 0, nSpecialIds = 0, nPieceChecks = 0, nPieceSkips = 0, nChars = 0, nBytes = 0;
  const out = [];
  for (let ci = 0; ci < cases.length; ci++) {
    const c = cases[ci];
    const text = texts[ci];
    nChars += Array.from(text).length;
    nBytes += Buffer.byteLength(text, "utf8");
    const chunks = pyChunks(text);
    const ids = [];
    const sids = [];
    const pieceEnds = []; // byte offsets where pieces end, ordinary mode
    let base = 0;
    for (const ch of chunks) {
      const o = Array.from(enc.encode_ordinary(ch));
      const s = Array.from(enc.encode(ch, "all"));
      const fo = Array.from(full.encode_ordinary(ch)).map(fullToTrim);
      const fs_ = Array.from(full.encode(ch, "all")).map(fullToTrim);
      if (JSON.stringify(o) !== JSON.stringify(fo) || JSON.stringify(s) !== JSON.stringify(fs_))
        throw new Error(`case ${ci}: trimmed vocab differs from full cl100k`);
      // pieces by the JS regex, cross-checked against tiktoken
      const pieceIds = [];
      for (const m of ch.matchAll(JS_PAT)) {
        const piece = m[0];
        const alone = [...piece.matchAll(JS_PAT)].map((x) => x[0]);
        if (alone.length === 1 && alone[0] === piece) {
          for (const id of enc.encode_ordinary(piece)) pieceIds.push(id);
          nPieceChecks++;
        } else {
          pieceIds.push(null);
          nPieceSkips++;
        }
        base += Buffer.byteLength(piece, "utf8");
        pieceEnds.push(base);
      }
      if (!pieceIds.includes(null) && JSON.stringify(pieceIds) !== JSON.stringify(o))
        throw new Error(`case ${ci}: JS pieces disagree with tiktoken ids`);
      for (const id of o) ids.push(id);
      for (const id of s) sids.push(id);
    }
    if (base !== Buffer.byteLength(text, "utf8")) throw new Error(`case ${ci}: pieces do not cover text`);
    nPieces += pieceEnds.length;
    nIds += ids.length;
    nSpecialIds += sids.length;
    const rec = {};
    if (c.text !== undefined) {
      rec.text = c.text;
      rec.piece_ends = pieceEnds;
      rec.ids = ids;
      if (JSON.stringify(sids) !== JSON.stringify(ids)) rec.special_ids = sids;
    } else {
      rec.gen = c.gen;
      rec.n_pieces = pieceEnds.length;
      rec.pieces_sha256 = sha256(pieceEnds.join(","));
      rec.n_ids = ids.length;
      rec.ids_sha256 = sha256(ids.join(","));
      rec.n_special_ids = sids.length;
      rec.special_ids_sha256 = sha256(sids.join(","));
    }
    out.push(rec);
  }
  enc.free();
  full.free();

  const summary = {
    cases: cases.length, chars: nChars, bytes: nBytes, pieces: nPieces, ids: nIds,
    special_ids: nSpecialIds, piece_checks: nPieceChecks, piece_checks_skipped: nPieceSkips,
    num_base: numBase,
  };
  const expected = {
    comment: "Generated by tools/tokenizer-oracle/oracle.js (npm tiktoken " +
      JSON.parse(fs.readFileSync(path.join(__dirname, "node_modules", "tiktoken", "package.json"), "utf8")).version + ", Kimi K3 pat_str). Do not edit.",
    tiktoken_model_sha256: sha256(model),
    summary,
    cases: out,
  };
  fs.mkdirSync(OUT, { recursive: true });
  fs.writeFileSync(path.join(OUT, "tiktoken.model"), model);
  fs.writeFileSync(path.join(OUT, "tokenizer_config.json"), config);
  const json = JSON.stringify(expected) + "\n";
  fs.writeFileSync(path.join(OUT, "expected.json.gz"), zlib.gzipSync(json, { level: 9, mtime: 0 }));
  console.log(JSON.stringify(summary));
}

main();
