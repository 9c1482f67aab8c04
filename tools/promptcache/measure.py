#!/usr/bin/env python3
"""Measure the prompt cache of k3 serve with an agent-sized prompt.

Runs `k3 serve` on the demo (loopback), sends an agent's requests (a system
prompt with tool declarations of several thousand positions), and reports
for each request the prompt positions, cached_tokens and seconds:

  1. the first main request (nothing cached yet)
  2. a side request in between (a title request, no tools)
  3. the second main request (the first's messages, the reply, a tool result)
  4. a shorter replay (the first request with a shorter user message)
  5. a restart of the server (same cache folder), then request 3 again
and then 3 and 4 on a server with --prompt-cache off, whose replies must
be the same.

usage: measure.py K3_BINARY DEMO_DIR WORK_DIR
"""
import json, subprocess, sys, time, urllib.request, os, socket

k3, demo, work = sys.argv[1], sys.argv[2], sys.argv[3]
cache = os.path.join(work, "cache")

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def serve(cache_arg):
    port = free_port()
    p = subprocess.Popen([k3, "serve", demo, "--addr", f"127.0.0.1:{port}", "--prompt-cache", cache_arg, "--quiet",
                          "--context", "16384", "--max-tokens", "8", "--model-id", "k3-demo"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout:
        if line.startswith("serving"):
            break
    return p, f"http://127.0.0.1:{port}/v1/chat/completions"

def stop(p):
    p.terminate(); p.wait()

TOOLS = []
for i, name in enumerate(["read_file", "write_file", "edit_file", "list_dir", "grep", "glob", "bash", "web_fetch",
                          "todo_write", "task", "notebook_edit", "ask_user"]):
    TOOLS.append({"type": "function", "function": {"name": name,
        "description": (f"Tool {name}: " + "Use it carefully; read the file before you change it, keep changes small, "
                        "quote paths exactly, and report what you did in plain words. ") * 6,
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "the path of the file or folder, relative to the project"},
            "content": {"type": "string", "description": "the text to write or the pattern to find"},
            "limit": {"type": "integer", "description": "the most lines or results to return"}},
            "required": ["path"]}}})
SYSTEM = ("You are a coding agent working in the user's project. Follow the project's conventions, "
          "run the tests after each change, and never invent file contents. ") * 20

def main_req(*turns):
    msgs = [{"role": "system", "content": SYSTEM}]
    for i, t in enumerate(turns):
        msgs.append(t if isinstance(t, dict) else {"role": "user" if i % 2 == 0 else "assistant", "content": t})
    return {"model": "k3-demo", "messages": msgs, "tools": TOOLS, "max_tokens": 8, "temperature": 0, "reasoning_effort": "none"}

def ask(url, body):
    t0 = time.time()
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    r = json.load(urllib.request.urlopen(req, timeout=3600))
    dt = time.time() - t0
    u = r["usage"]
    return {"prompt": u["prompt_tokens"], "cached": u["prompt_tokens_details"]["cached_tokens"], "seconds": round(dt, 2),
            "reply": r["choices"][0]["message"]}

first = main_req("Find where the server reads its flags and list them.")
side = {"model": "k3-demo", "messages": [{"role": "user", "content": "Write a five-word title for: find where the server reads its flags"}],
        "max_tokens": 8, "temperature": 0, "reasoning_effort": "none"}
second = main_req("Find where the server reads its flags and list them.", "I will grep for the flag set.",
                  "The grep found ui/cli/serve.go with 14 flags; read it and summarise them.")
shorter = main_req("Find the flags.")

rows = []
procs = []
def serve_(c):
    p, url = serve(c); procs.append(p); return p, url
import atexit
atexit.register(lambda: [q.terminate() for q in procs if q.poll() is None])
p, url = serve_(cache)
r1 = ask(url, first); rows.append(("1 first main request", r1, 0))
r2 = ask(url, side); rows.append(("2 side request (title)", r2, 0))
r3 = ask(url, second); rows.append(("3 second main request", r3, r1["prompt"] - 1))
r4 = ask(url, shorter); rows.append(("4 shorter replay", r4, None))
stop(p)
p, url = serve_(cache)
r5 = ask(url, second); rows.append(("5 after a restart: request 3 again", r5, r3["prompt"] - 1))
stop(p)
p, url = serve_("off")
o3 = ask(url, second); o4 = ask(url, shorter)
rows.append(("3 with the cache off", o3, None)); rows.append(("4 with the cache off", o4, None))
stop(p)

print(f"{'request':40} {'prompt':>7} {'cached':>7} {'read':>6} {'shared':>7} {'cached/shared':>13} {'seconds':>8}")
for name, r, shared in rows:
    frac = f"{r['cached']/shared:.3f}" if shared else "-"
    print(f"{name:40} {r['prompt']:7d} {r['cached']:7d} {r['prompt']-r['cached']:6d} {shared or '-':>7} {frac:>13} {r['seconds']:8.2f}")
print("reply 3 identical with the cache off:", r3["reply"] == o3["reply"], "and after the restart:", r5["reply"] == r3["reply"])
print("reply 4 identical with the cache off:", r4["reply"] == o4["reply"])
