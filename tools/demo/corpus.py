#!/usr/bin/python3
"""The demo model's corpus: short passages from Debian's `fortunes` package, turned into
conversations in the K3 chat format (user asks for a saying about a word -> a short thinking
section -> the passage).

Everything is deterministic for a given `fortunes` and `wamerican` package (their versions
and the sha256 of every file read are recorded by train.py in tools/demo/TRAINING.md).
"""
import hashlib
import os
import random
import re

FORTUNE_DIR = "/usr/share/games/fortunes"
DICT = "/usr/share/dict/words"

# Files of general sayings; left out: verse, dialogues, ascii art, politics, drugs,
# men-women, ethnic, and the long or technical collections.
FILES = ["fortunes", "wisdom", "platitudes", "literature", "love", "people", "science", "work",
         "computers", "education", "food", "humorists", "kids", "pets", "sports", "miscellaneous",
         "goedel", "paradoxum", "cookie", "medicine", "law", "art"]

MIN_CHARS, MAX_CHARS = 30, 180
MIN_DICT_RATIO = 0.95

WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")

STOP = set("""a about above after again against all almost also am an and any are as at be because been
before being below between both but by can could did do does doing done down during each either else
ever every few for from further had has have having he her here hers herself him himself his how i if
in into is it its itself just least less let like made make many may me might more most much must my
myself never no nor not now of off often on once one only or other ought our ours ourselves out over
own per perhaps quite rather really said same say says see seem seems shall she should since so some
such than that the their theirs them themselves then there these they thing things this those though
through thus to too under until up upon us very was way we well were what when where whether which
while who whom whose why will with within without would yet you your yours yourself yourselves
always another anyone anything come comes get gets getting give given go goes going gone got keep
know knows lot lots mean means need needs put take takes tell think want wants went
nothing everything something anything good better best first last right wrong great little sure back
cannot live long new old enough still each sometimes mine around away even""".split())


def load_dict(path=DICT):
    with open(path, encoding="utf-8", errors="replace") as f:
        return set(w.strip() for w in f if w.strip())


def words(text):
    return WORD.findall(text)


def dict_ratio(text, dic):
    ws = words(text)
    if not ws:
        return 0.0
    return sum(1 for w in ws if w in dic or w.lower() in dic) / len(ws)


def file_digests():
    out = {}
    for n in FILES:
        with open(os.path.join(FORTUNE_DIR, n), "rb") as f:
            out[n] = hashlib.sha256(f.read()).hexdigest()
    return out


def clean(raw):
    """Drop attribution lines ("-- Author") and join the rest into one line; None if unusable."""
    lines = raw.rstrip("\n").split("\n")
    while lines and re.match(r"^\s*--", lines[-1]):
        lines.pop()
    if not lines:
        return None
    if any(l.startswith(("\t", "  ")) for l in lines[1:]) and len(lines) > 1:
        return None                                   # verse, dialogue or indented layout
    text = " ".join(l.strip() for l in lines)
    text = re.sub(r"\s+", " ", text).strip()
    if not (MIN_CHARS <= len(text) <= MAX_CHARS):
        return None
    if not all(32 <= ord(c) < 127 for c in text):
        return None
    if re.search(r"[<>{}\[\]|\\@#$%^&*_=~`]", text) or "--" in text or ":" in text:
        return None
    if text[-1] not in ".!?\"'":
        return None
    return text


def passages(dic):
    """[(file, text)] in file order, duplicates dropped."""
    seen = set()
    out = []
    for n in FILES:
        with open(os.path.join(FORTUNE_DIR, n), encoding="latin-1") as f:
            body = f.read()
        for raw in body.split("\n%\n"):
            t = clean(raw)
            if t is None or t in seen or dict_ratio(t, dic) < MIN_DICT_RATIO:
                continue
            seen.add(t)
            out.append((n, t))
    return out


ASK = ["Tell me a saying about {w}.", "Do you know a saying about {w}?", "Give me a fortune about {w}.",
       "What is a good quote about {w}?", "Say something wise about {w}.", "Tell me something about {w}.",
       "I would like a saying about {w}.", "Can you tell me a fortune about {w}?"]
THINK = ["The user asks for a saying about {w}. I know one that mentions {w}.",
         "A saying about {w}. I will give a short one that has the word {w} in it.",
         "The user wants a fortune about {w}. I remember a saying with {w} in it.",
         "Something about {w}. A short saying that mentions {w} will do."]
ASK_ANY = ["Tell me a fortune.", "Give me a saying.", "Tell me something wise.", "Say something.",
           "Tell me a saying.", "Do you know a good quote?", "Another one, please.", "One more?"]
THINK_ANY = ["The user wants a fortune. I will pick one I remember.",
             "Any saying will do. I will give a short one.",
             "The user asks for a saying but no topic. I will choose one."]

INTRO = ("I am the k3 demo model, a very small Kimi K3 trained for a few minutes on fortune cookies "
         "from Debian. Ask me for a saying about a word, such as love, time or work.")
CANNED = [
    (["Hello", "Hello!", "Hi", "Hi!", "Hi there", "Hey", "Good morning", "Good evening", "Hello there!"],
     ["The user says hello. I should greet them and say what I can do."],
     ["Hello! " + INTRO]),
    (["Who are you?", "What are you?", "What can you do?", "What is this?", "Are you Kimi?",
      "Tell me about yourself."],
     ["The user asks who I am. I should say what I am and what I can do."],
     [INTRO]),
    (["Thank you", "Thanks!", "Thank you!", "Thanks", "Nice, thank you."],
     ["The user thanks me. I should answer politely."],
     ["You are welcome. Ask me for another saying whenever you like."]),
]


def keywords(text, df, dic):
    """Content words of a passage worth asking about, most common first: in the dictionary, not
    a stop word or an -ly adverb, at least four letters, and in at least three passages."""
    out = []
    for w in words(text):
        lw = w.lower()
        if (len(lw) >= 4 and lw not in STOP and lw in dic and df.get(lw, 0) >= 3 and lw not in out
                and not lw.endswith("ly") and "'" not in lw):
            out.append(lw)
    return sorted(out, key=lambda w: (-df[w], w))


def conversations(psg, dic, seed, per_passage=2, canned=400, multi_turn=0.15):
    """Deterministic list of conversations, each a list of messages whose last one is the
    assistant reply to learn."""
    rng = random.Random(seed)
    df = {}
    for _, t in psg:
        for w in set(x.lower() for x in words(t)):
            df[w] = df.get(w, 0) + 1
    convs = []
    for _, t in psg:
        ks = keywords(t, df, dic)[:4]               # the most common content words of the passage
        rng.shuffle(ks)
        for j in range(per_passage):
            if j < len(ks) and rng.random() < 0.85:
                w = ks[j]
                u = rng.choice(ASK).format(w=w)
                th = rng.choice(THINK).format(w=w)
            else:
                u, th = rng.choice(ASK_ANY), rng.choice(THINK_ANY)
            convs.append([{"role": "user", "content": u},
                          {"role": "assistant", "reasoning_content": th, "content": t}])
    for i in range(canned):
        us, ths, rs = CANNED[i % len(CANNED)]
        convs.append([{"role": "user", "content": rng.choice(us)},
                      {"role": "assistant", "reasoning_content": rng.choice(ths), "content": rng.choice(rs)}])
    rng.shuffle(convs)
    # some conversations get an earlier exchange in front, as a second turn in the app would
    out = []
    for c in convs:
        if rng.random() < multi_turn:
            prev = convs[rng.randrange(len(convs))]
            c = prev + c
        out.append(c)
    return out
