#!/usr/bin/python3
"""Two more tasks for the task model (`train.py --tasks`): summarising a text and writing a Go
function with a table-driven test. They exist so that `k3 bench spec` can measure speculative
decoding on replies of the kinds its prompts ask for; the demo model itself does not learn them.

Summaries are extractive, the classic lead baseline: a text of five to eight sentences (from
fortunes passages) gets a reply that keeps its first two sentences word for word. Code replies
come from a dozen function families (sums, counts, reversals, parsing lists of numbers, ...),
each written in the same plain style, with the function name, parameter names and test cases
varied and the name copied from the request. The pairs the bench asks about (a comma-separated
list of integers summed; the bench's summarise text) are held out: `held_out_check` refuses a
training set that contains them.
"""
import random
import re

SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")

SUM_ASK = ["Summarise this text in a few sentences.", "Summarise this text.", "Give me a short summary of this text.",
           "Please summarise the following text.", "What is this text about? Summarise it briefly.",
           "Can you summarise this for me?"]
SUM_THINK = ["The user asks for a summary. I will keep the first two sentences, which say what the text is about.",
             "A summary of the text. Its first two sentences give the main point, so I will use them.",
             "The user wants a short summary. The opening of the text says the most; I will give it."]


def sentences(psg):
    """Sentences of 25-200 characters from the passages, in order, duplicates dropped."""
    seen, out = set(), []
    for _, t in psg:
        for s in SPLIT.split(t):
            s = s.strip()
            if 25 <= len(s) <= 200 and s[-1] in ".!?" and s not in seen:
                seen.add(s)
                out.append(s)
    return out


def summaries(sents, n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(5, 8)
        text = rng.sample(sents, k)
        ask = rng.choice(SUM_ASK)
        user = ask + "\n\n" + " ".join(text)
        out.append([{"role": "user", "content": user},
                    {"role": "assistant", "reasoning_content": rng.choice(SUM_THINK), "content": " ".join(text[:2])}])
    return out


# ---------------------------------------------------------------------------------------------
# Code

VERBS = ["Sum", "Count", "Total", "Compute", "Find", "Parse", "Get", "Calc", "Make", "Collect"]
NOUNS = ["Values", "Items", "Numbers", "List", "Words", "Fields", "Scores", "Parts", "Input", "Data",
         "Line", "Text", "Entries", "Tokens", "Counts", "Ints", "Digits", "Row"]
WORDS = ["apple", "river", "stone", "cloud", "lamp", "tiger", "bread", "chair", "ocean", "maple",
         "pencil", "garden", "window", "silver", "winter", "candle", "forest", "rocket", "mirror", "ladder"]
SEPS = {"spaces": (" ", "strings.Fields(s)"), "semicolons": (";", 'strings.Split(s, ";")'),
        "colons": (":", 'strings.Split(s, ":")'), "commas": (",", 'strings.Split(s, ",")')}


def go_name(rng, base):
    return rng.choice([base, rng.choice(VERBS) + rng.choice(NOUNS), base + rng.choice(NOUNS)])


def table(cases, fields):
    """The test table's rows; cases are dicts of field -> Go literal."""
    rows = []
    for c in cases:
        rows.append("\t\t{" + ", ".join(f"{k}: {c[k]}" for k in fields if k in c) + "},\n")
    return "".join(rows)


def test_func(pkg, name, struct, rows, call, check):
    return (f"```go\npackage {pkg}\n\nimport \"testing\"\n\nfunc Test{name}(t *testing.T) {{\n\ttests := []struct {{\n"
            f"{struct}\t}}{{\n{rows}\t}}\n\tfor _, tt := range tests {{\n\t\tt.Run(tt.name, func(t *testing.T) {{\n"
            f"{call}{check}\t\t}})\n\t}}\n}}\n```")


def fam_list_ints(rng, name, sep, agg):
    """parses a list of integers separated by sep and returns agg of them (with an error)."""
    ch, split = SEPS[sep]
    spaced = sep != "spaces" and rng.random() < 0.5
    desc = f"parses a list of integers separated by {sep}{' (spaces allowed)' if spaced else ''} and returns their {agg}"
    if sep == "commas":
        desc = f"parses a comma-separated list of integers{' (spaces allowed)' if spaced else ''} and returns their {agg}"
    init, step = {"sum": ("0", "acc += n"), "product": ("1", "acc *= n"),
                  "count of even numbers": ("0", "if n%2 == 0 {\n\t\t\tacc++\n\t\t}"),
                  "largest value": ("math.MinInt", "if n > acc {\n\t\t\tacc = n\n\t\t}")}[agg]
    var_ = {"sum": "sum", "product": "product", "count of even numbers": "count", "largest value": "largest"}[agg]
    step = step.replace("acc", var_)
    init_ = init
    imports = ['"fmt"', '"strconv"', '"strings"'] + (['"math"'] if "math." in init else [])
    imports.sort()
    field = "strings.TrimSpace(field)" if spaced else "field"
    code = (f"func {name}(s string) (int, error) {{\n\tif strings.TrimSpace(s) == \"\" {{\n\t\treturn {init_ if agg != 'largest value' else '0'}, nil\n\t}}\n"
            f"\t{var_} := {init_}\n\tfor i, field := range {split} {{\n\t\tn, err := strconv.Atoi({field})\n\t\tif err != nil {{\n"
            f"\t\t\treturn 0, fmt.Errorf(\"field %d: %w\", i+1, err)\n\t\t}}\n\t\t{step}\n\t}}\n\treturn {var_}, nil\n}}\n")
    nums = [rng.randint(-5, 12) for _ in range(3)]
    j = ch if not spaced else ch + " "

    def val(xs):
        if agg == "sum":
            return sum(xs)
        if agg == "product":
            p = 1
            for x in xs:
                p *= x
            return p
        if agg == "count of even numbers":
            return sum(1 for x in xs if x % 2 == 0)
        return max(xs)
    one = rng.randint(1, 9)
    cases = [{"name": '"empty"', "input": '""', "want": init_ if agg != "largest value" else "0"},
             {"name": '"single"', "input": f'"{one}"', "want": str(val([one]))},
             {"name": '"several"', "input": '"' + j.join(map(str, nums)) + '"', "want": str(val(nums))},
             {"name": '"not a number"', "input": f'"1{ch}x{ch}3"', "wantErr": "true"}]
    if spaced:
        cases.insert(3, {"name": '"spaces"', "input": f'" 2{ch} 4 {ch}6 "', "want": str(val([2, 4, 6]))})
    doc = f"// {name} {desc}.\n"
    explain = (f"{name} {'trims each field before parsing it, so spaces around the numbers are allowed, and it ' if spaced else ''}"
               f"reports the position of the first field that is not an integer. An empty input gives {cases[0]['want']}.")
    return desc, imports, doc + code, cases, "int", True, explain


def fam_simple(rng, name, kind):
    """Functions of one string or slice argument without errors."""
    p = rng.choice(["s", "text", "input"])
    if kind == "reverse":
        desc = "reverses a string"
        code = (f"func {name}({p} string) string {{\n\tr := []rune({p})\n\tfor i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {{\n"
                f"\t\tr[i], r[j] = r[j], r[i]\n\t}}\n\treturn string(r)\n}}\n")
        w = rng.sample(WORDS, 2)
        cases = [{"name": '"empty"', "input": '""', "want": '""'}, {"name": '"one letter"', "input": '"a"', "want": '"a"'},
                 {"name": '"word"', "input": f'"{w[0]}"', "want": f'"{w[0][::-1]}"'},
                 {"name": '"two words"', "input": f'"{w[0]} {w[1]}"', "want": f'"{(w[0] + " " + w[1])[::-1]}"'}]
        return desc, [], code, cases, "string", False, f"{name} works on runes, so letters outside ASCII stay whole."
    if kind == "words":
        desc = "counts the words in a string"
        code = f"func {name}({p} string) int {{\n\treturn len(strings.Fields({p}))\n}}\n"
        w = rng.sample(WORDS, 3)
        cases = [{"name": '"empty"', "input": '""', "want": "0"}, {"name": '"one word"', "input": f'"{w[0]}"', "want": "1"},
                 {"name": '"several"', "input": f'"{w[0]} {w[1]} {w[2]}"', "want": "3"},
                 {"name": '"extra spaces"', "input": f'"  {w[1]}   {w[2]} "', "want": "2"}]
        return desc, ['"strings"'], code, cases, "int", False, f"{name} splits on any run of white space, so extra spaces do not count as words."
    if kind == "vowels":
        desc = "counts the vowels in a string"
        code = (f"func {name}({p} string) int {{\n\tcount := 0\n\tfor _, r := range strings.ToLower({p}) {{\n"
                f"\t\tif strings.ContainsRune(\"aeiou\", r) {{\n\t\t\tcount++\n\t\t}}\n\t}}\n\treturn count\n}}\n")
        w = rng.sample(WORDS, 2)
        cnt = lambda x: sum(1 for c in x.lower() if c in "aeiou")
        cases = [{"name": '"empty"', "input": '""', "want": "0"}, {"name": '"no vowels"', "input": '"rhythm"', "want": "0"},
                 {"name": '"word"', "input": f'"{w[0]}"', "want": str(cnt(w[0]))},
                 {"name": '"capitals"', "input": f'"{w[1].upper()}"', "want": str(cnt(w[1]))}]
        return desc, ['"strings"'], code, cases, "int", False, f"{name} lowers the letters first, so capital vowels count too."
    if kind == "palindrome":
        desc = "reports whether a string reads the same backwards"
        code = (f"func {name}({p} string) bool {{\n\tr := []rune({p})\n\tfor i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {{\n"
                f"\t\tif r[i] != r[j] {{\n\t\t\treturn false\n\t\t}}\n\t}}\n\treturn true\n}}\n")
        w = rng.choice(WORDS)
        cases = [{"name": '"empty"', "input": '""', "want": "true"}, {"name": '"palindrome"', "input": '"level"', "want": "true"},
                 {"name": '"word"', "input": f'"{w}"', "want": "false"}, {"name": '"odd length"', "input": '"racecar"', "want": "true"}]
        return desc, [], code, cases, "bool", False, f"{name} compares runes from both ends and stops at the first pair that differs."
    raise ValueError(kind)


def fam_slice(rng, name, agg):
    p = rng.choice(["nums", "values", "xs"])
    if agg == "sum":
        desc = "returns the sum of a slice of integers"
        code = f"func {name}({p} []int) int {{\n\tsum := 0\n\tfor _, n := range {p} {{\n\t\tsum += n\n\t}}\n\treturn sum\n}}\n"
        f = sum
        empty = "0"
        explain = f"{name} returns 0 for an empty slice."
    else:
        desc = "returns the largest value in a slice of integers"
        code = (f"func {name}({p} []int) int {{\n\tif len({p}) == 0 {{\n\t\treturn 0\n\t}}\n\tlargest := {p}[0]\n"
                f"\tfor _, n := range {p}[1:] {{\n\t\tif n > largest {{\n\t\t\tlargest = n\n\t\t}}\n\t}}\n\treturn largest\n}}\n")
        f = max
        empty = "0"
        explain = f"{name} returns 0 for an empty slice, since it has no largest value."
    nums = [rng.randint(-9, 20) for _ in range(rng.randint(3, 5))]
    one = rng.randint(1, 9)
    cases = [{"name": '"empty"', "input": "nil", "want": empty}, {"name": '"single"', "input": f"[]int{{{one}}}", "want": str(one)},
             {"name": '"several"', "input": "[]int{" + ", ".join(map(str, nums)) + "}", "want": str(f(nums))},
             {"name": '"negative"', "input": "[]int{-4, -2}", "want": str(f([-4, -2]))}]
    return desc, [], code, cases, "int", False, explain, "[]int"


CODE_ASK = ["Write a Go function {name} that {desc}, with a table-driven test.",
            "Write a Go function {name} that {desc}, and a table-driven test for it.",
            "Please write {name} in Go: it {desc}. Add a table-driven test."]
CODE_THINK = ["The user wants a Go function {name} and a table-driven test. I will write the function, then the test.",
              "A Go function {name} with a table-driven test. The function first, the test after it."]

# the (separator, total) pairs of the list-of-integers family; commas with sum is the bench's
LIST_PAIRS = [(s, a) for s in SEPS for a in ("sum", "product", "count of even numbers", "largest value")
              if (s, a) != ("commas", "sum")]


def code_reply(rng):
    k = rng.randrange(4)
    if k < 2:
        sep, agg = rng.choice(LIST_PAIRS)
        base = {"sum": "Sum", "product": "Product", "count of even numbers": "CountEven", "largest value": "Max"}[agg]
        base += {"spaces": "Fields", "semicolons": "List", "colons": "Parts", "commas": "CSV"}[sep]
        name = go_name(rng, base)
        desc, imports, code, cases, typ, errs, explain = fam_list_ints(rng, name, sep, agg)
        in_t = "string"
    elif k == 2:
        kind = rng.choice(["reverse", "words", "vowels", "palindrome"])
        base = {"reverse": "Reverse", "words": "WordCount", "vowels": "CountVowels", "palindrome": "IsPalindrome"}[kind]
        name = go_name(rng, base)
        desc, imports, code, cases, typ, errs, explain = fam_simple(rng, name, kind)
        in_t = "string"
    else:
        agg = rng.choice(["sum", "max"])
        name = go_name(rng, {"sum": "SumInts", "max": "MaxInt"}[agg])
        desc, imports, code, cases, typ, errs, explain, in_t = fam_slice(rng, name, agg)
    pkg = name.lower()
    if imports:
        imp = "import (\n" + "".join(f"\t{i}\n" for i in imports) + ")\n\n" if len(imports) > 1 else f"import {imports[0]}\n\n"
    else:
        imp = ""
    if not code.startswith("//"):
        code = f"// {name} {desc}.\n" + code
    fn = f"```go\npackage {pkg}\n\n{imp}{code}```"
    fields = ["name", "input", "want"] + (["wantErr"] if errs else [])
    width = max(len(f) for f in fields)
    types = {"name": "string", "input": in_t, "want": typ, "wantErr": "bool"}
    struct = "".join(f"\t\t{f.ljust(width)} {types[f]}\n" for f in fields)
    rows = table(cases, fields)
    verb = "%q" if in_t == "string" else "%v"
    wverb = {"int": "%d", "string": "%q", "bool": "%v"}[typ]
    if errs:
        call = (f"\t\t\tgot, err := {name}(tt.input)\n\t\t\tif (err != nil) != tt.wantErr {{\n"
                f"\t\t\t\tt.Fatalf(\"{name}({verb}) error = %v, wantErr %v\", tt.input, err, tt.wantErr)\n\t\t\t}}\n")
    else:
        call = f"\t\t\tgot := {name}(tt.input)\n"
    check = f"\t\t\tif got != tt.want {{\n\t\t\t\tt.Errorf(\"{name}({verb}) = {wverb}, want {wverb}\", tt.input, got, tt.want)\n\t\t\t}}\n"
    test = test_func(pkg, name, struct, rows, call, check)
    user = rng.choice(CODE_ASK).format(name=name, desc=desc)
    think = rng.choice(CODE_THINK).format(name=name)
    return [{"role": "user", "content": user},
            {"role": "assistant", "reasoning_content": think, "content": fn + "\n\n" + test + "\n\n" + explain}]


def code_conversations(n, seed):
    rng = random.Random(seed)
    return [code_reply(rng) for _ in range(n)]


def held_out_check(convs, bench_texts):
    """Refuse a training set that holds a bench prompt's task: a user message containing one of
    bench_texts, or the comma-separated integer sum."""
    for c in convs:
        for m in c:
            if m["role"] != "user":
                continue
            for t in bench_texts:
                if t in m["content"]:
                    raise SystemExit(f"a training conversation holds a bench prompt: {t[:60]!r}")
            if "comma-separated list of integers" in m["content"] and "their sum" in m["content"]:
                raise SystemExit("a training conversation asks for the bench's code task")
