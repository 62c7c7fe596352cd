#!/usr/bin/env python3
"""`txbox mcp` running `run` in its own process (src/resident.c).

    resident.py TXBOX WORKSPACE CASE [ARG]

Cases:
  same       the same calls on two copies of WORKSPACE, one server with
             --spawn (a child `txbox run` per call, as before), one without:
             every answer must be the same but for times and durations
  leak N     N committing runs on one server: its descriptors, threads,
             children, mounts and process state (umask, cwd, signal mask
             and dispositions, no_new_privs, seccomp, capabilities, limits,
             mount namespace) after them must be those after the first few;
             its memory may not grow by more than 8 MiB
  state      the workspace changed between calls by the CLI (undo, run,
             .txbox removed) and the policy edited between calls: each call
             must see it
  concurrent a run while another runs in the server's process: not queued
  progress   a slow run with a progress token gets notifications/progress
             with its output (the tee of a run in the server's process)

Exit status 0 when all holds, 1 with a message otherwise.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

TXBOX, WS, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
ARG = sys.argv[4] if len(sys.argv) > 4 else None


def fail(msg):
    print(f"resident.py {CASE}: {msg}", file=sys.stderr)
    sys.exit(1)


class Server:
    def __init__(self, ws, *opts, env=None):
        self.p = subprocess.Popen([TXBOX, "mcp", "-C", ws, "--structured", *opts], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.n = 0
        self.notes = []
        self.call_raw("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                     "clientInfo": {"name": "resident", "version": "1"}})

    def call_raw(self, method, params):
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line:
                fail(f"the server closed stdout; stderr: {self.p.stderr.read().decode()[-2000:]}")
            o = json.loads(line)
            if "id" not in o:
                self.notes.append(o)
                continue
            if o["id"] == self.n:
                return o

    def tool(self, name, args, meta=None):
        params = {"name": name, "arguments": args}
        if meta:
            params["_meta"] = meta
        o = self.call_raw("tools/call", params)
        if "result" not in o:
            fail(f"{name} {args}: {o}")
        return o["result"]

    def close(self):
        self.p.stdin.close()
        rc = self.p.wait(timeout=120)
        err = self.p.stderr.read().decode()
        if rc != 0:
            fail(f"server exit status {rc}: {err[-3000:]}")
        return err


# times, the write budget (half the free space when the run starts), and
# the session (each server's own)
VARYING = re.compile(r"(_ms|^started|^finished|^time|^date|^duration|^ended|^write_bytes|^session$)")


def scrub(v):
    if isinstance(v, dict):
        return {k: ("*" if VARYING.search(k) else scrub(x)) for k, x in v.items()}
    if isinstance(v, list):
        return [scrub(x) for x in v]
    return v


def normal(result):
    r = dict(result)
    r["content"] = [dict(c) for c in r.get("content", [])]
    for c in r["content"]:
        t = c.get("text", "")
        try:
            c["text"] = scrub(json.loads(t))
        except ValueError:
            c["text"] = re.sub(r"[0-9.]+ ms", "N ms", t)
    if "structuredContent" in r:
        r["structuredContent"] = scrub(r["structuredContent"])
    return r


def case_same():
    calls = [
        ("run", {"command": "echo one >> README"}),
        ("run", {"command": "mkdir -p d && echo two > d/f && echo out && echo err >&2"}),
        ("run", {"command": "cat README"}),
        ("run", {"command": "echo x > gone.txt; exit 3"}),
        ("run", {"command": "rm -rf /"}),
        ("run", {"command": "sleep 5", "timeout": 0.5}),
        ("run", {"command": "pwd; echo here > h", "cwd": "src"}),
        ("run", {"command": "echo net", "network": False}),
        ("run", {"command": "echo staged > t", "tx": "99999"}),
        ("begin", {"name": "work"}),
        ("run", {"command": "echo in-tx > t", "tx": "@tx"}),
        ("run", {"command": "false", "tx": "@tx"}),
        ("commit", {"tx": "@tx"}),
        ("run", {"command": "printf '\\377\\376 not utf-8\\n'"}),
        # what the command inherits: signal mask and dispositions, umask, limits
        ("run", {"command": "grep -E '^(Sig(Blk|Ign)|NoNewPrivs|Seccomp):' /proc/self/status; umask; ulimit -a | grep -v '^file size'; "
                            "echo x > inherit"}),
        ("run", {"command": "head -c 100000 /dev/zero | tr '\\0' a"}),
        ("log", {}),
        ("undo", {}),
    ]
    answers = []
    for opts in (["--spawn"], []):
        ws = f"{WS}.same"  # one path for both: paths are in the answers
        shutil.rmtree(ws, ignore_errors=True)
        shutil.copytree(WS, ws, symlinks=True)
        s = Server(ws, *opts)
        got, tx = [], None
        for name, args in calls:
            args = {k: (tx if v == "@tx" else v) for k, v in args.items()}
            r = s.tool(name, args)
            if name == "begin":
                tx = r["structuredContent"]["tx"]
            got.append((name, args, normal(r)))
        s.close()
        shutil.rmtree(ws)
        answers.append(got)
    for (name, args, a), (_, _, b) in zip(*answers):
        if a != b:
            fail(f"{name} {args}: answers differ\n--spawn: {json.dumps(a)[:3000]}\nresident: "
                 f"{json.dumps(b)[:3000]}")


def census(pid):
    fds = sorted(os.listdir(f"/proc/{pid}/fd"))
    targets = sorted(os.readlink(f"/proc/{pid}/fd/{f}") for f in fds)
    tasks = os.listdir(f"/proc/{pid}/task")
    children = []
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/children") as f:
                children += f.read().split()
        except FileNotFoundError:
            pass
    with open(f"/proc/{pid}/mountinfo") as f:  # its own (others' tests mount elsewhere)
        mounts = [m for m in f.read().splitlines() if WS in m]
    with open(f"/proc/{pid}/status") as f:
        status = f.read()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
    # what one transaction could leave changed in the server for the next
    state = re.findall(r"^(?:Umask|NoNewPrivs|Seccomp|SigBlk|Cap(?:Eff|Prm|Bnd)):.*$", status, re.M)
    # ignored and caught signals, less glibc's own (32 and 33: glibc sets up
    # their handlers with the first thread, over an ignored disposition the
    # server may have inherited, as under CI's shell)
    for k in ("SigIgn", "SigCgt"):
        v = int(re.search(r"^%s:\s*([0-9a-f]+)$" % k, status, re.M).group(1), 16)
        state.append(f"{k}: {v & ~(3 << 31):x}")
    with open(f"/proc/{pid}/limits") as f:
        state.append(f.read())
    state.append(os.readlink(f"/proc/{pid}/cwd"))
    state.append(os.readlink(f"/proc/{pid}/ns/mnt"))
    return {"fds": targets, "threads": len(tasks), "children": children, "mounts": mounts, "state": state}, rss


def case_leak():
    n = int(ARG or "100")
    s = Server(WS)
    pid = s.p.pid
    fresh, _ = census(pid)  # before any run: its state must be this after them
    for i in range(5):
        s.tool("run", {"command": f"echo {i} >> README"})
    before, rss0 = census(pid)
    with open(f"/proc/{pid}/maps") as f:  # AddressSanitizer keeps freed memory (its quarantine)
        asan = "libasan" in f.read()
    for i in range(n):
        r = s.tool("run", {"command": f"echo {i} >> counter"})
        if r["structuredContent"]["outcome"] != "committed":
            fail(f"call {i}: {r}")
        if i % 10 == 0:  # a failing one and a blocked one too
            s.tool("run", {"command": "echo x > y; exit 1"})
            s.tool("run", {"command": "rm -rf /"})
    after, rss1 = census(pid)
    s.close()
    if fresh["state"] != after["state"]:
        fail(f"the server's state changed:\nbefore the first run {fresh['state']}\nafter {after['state']}")
    if before != after:
        fail(f"after {n} calls:\nbefore {before}\nafter  {after}")
    print(f"{n} calls: {len(after['fds'])} descriptors, {after['threads']} thread(s) before and after; "
          f"RSS {rss0} -> {rss1} KiB")
    if rss1 - rss0 > 8192 and not asan:
        fail(f"RSS grew from {rss0} to {rss1} KiB over {n} calls")


def cli(*args):
    r = subprocess.run([TXBOX, *args, "-C", WS] if args[0] in ("undo",) else [TXBOX, args[0], "-C", WS,
                       *args[1:]], capture_output=True, text=True)
    return r


def case_state():
    pf = os.path.join(os.path.dirname(WS), "policy.yaml")
    with open(pf, "w") as f:
        f.write("version: 1\n")
    s = Server(WS, "--policy", pf)
    r = s.tool("run", {"command": "echo a >> f"})
    if r["structuredContent"]["outcome"] != "committed":
        fail(f"first run: {r}")
    # the CLI undoes it between two calls: the next call sees the file gone
    u = subprocess.run([TXBOX, "undo", "-C", WS], capture_output=True, text=True)
    if u.returncode != 0:
        fail(f"txbox undo: {u.stderr}")
    r = s.tool("run", {"command": "cat f 2>/dev/null || echo absent"})
    if r["structuredContent"]["stdout"] != "absent\n":
        fail(f"the undo was not seen: {r['structuredContent']}")
    # the CLI commits between two calls: ids go on, the file is seen
    c = subprocess.run([TXBOX, "run", "--json", "-C", WS, "-c", "echo cli > g"], capture_output=True, text=True)
    cli_tx = int(json.loads(c.stdout)["tx"])
    r = s.tool("run", {"command": "cat g && echo b >> g"})
    sc = r["structuredContent"]
    if sc["outcome"] != "committed" or sc["stdout"] != "cli\n" or int(sc["tx"]) <= cli_tx:
        fail(f"the CLI's commit was not seen (its tx {cli_tx}): {sc}")
    # the state directory removed between calls: made again, as the CLI would
    # (the session's steward may still be closing the last commit's journal
    # for a moment after the answer: docs/sessions.md; on a loaded machine
    # the moment can be long: first the journal's close, 10 s at most)
    jd = os.path.join(WS, ".txbox", "journal")
    for attempt in range(500):
        if not os.listdir(jd):
            break
        time.sleep(0.02)
    why = None
    for attempt in range(100):
        try:
            shutil.rmtree(os.path.join(WS, ".txbox"))
            break
        except OSError as e:  # an entry it removed or added meanwhile
            why = e
            time.sleep(0.02)
    if os.path.exists(os.path.join(WS, ".txbox")):
        left = [os.path.join(d, n) for d, ds, fs in os.walk(os.path.join(WS, ".txbox")) for n in ds + fs]
        fail(f"cannot remove .txbox: {why}; left: {left[:20]}")
    r = s.tool("run", {"command": "echo c >> g"})
    if r["structuredContent"]["outcome"] != "committed":
        fail(f"after .txbox was removed: {r}")
    lg = subprocess.run([TXBOX, "log", "--json", "-C", WS], capture_output=True, text=True)
    if r["structuredContent"]["tx"] not in lg.stdout:
        fail(f"the run after .txbox was removed is not in the log: {lg.stdout}")
    # the user's policy edited between calls: the next call obeys it
    with open(pf, "w") as f:
        f.write("version: 1\nrules:\n  - id: no-deploys\n    decision: unsafe\n    reason: deploys are for "
                "people\n    suggestion: ask the user\n    match: {program: deploy}\n    examples: {match: "
                "[deploy], no_match: [ls]}\n")
    r = s.tool("run", {"command": "deploy prod"})
    if r["structuredContent"].get("rule") != "no-deploys" or r["structuredContent"]["outcome"] != "blocked":
        fail(f"the edited policy was not read: {r['structuredContent']}")
    # the same edit, back, within the same second and of the same size
    with open(pf, "w") as f:
        f.write("version: 1\n")
    r = s.tool("run", {"command": "deploy prod"})
    if r["structuredContent"].get("rule") == "no-deploys":
        fail(f"the policy edited back was not read: {r['structuredContent']}")
    # the workspace's own policy, tightened outside any transaction
    with open(os.path.join(WS, ".txbox-policy.yaml"), "w") as f:
        f.write("version: 1\nrules:\n  - id: no-make\n    decision: unsafe\n    reason: not here\n"
                "    suggestion: ask\n    match: {program: make}\n    examples: {match: [make], no_match: [ls]}\n")
    r = s.tool("run", {"command": "make all"})
    if r["structuredContent"].get("rule") != "no-make":
        fail(f"the workspace's new policy was not read: {r['structuredContent']}")
    s.close()


def case_concurrent():
    """A second run while one runs in the server's process goes to a child
    txbox and answers first."""
    s = Server(WS)
    for i, cmd in ((101, "sleep 3; echo a > a"), (102, "echo b > b")):
        msg = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
               "params": {"name": "run", "arguments": {"command": cmd}}}
        s.p.stdin.write((json.dumps(msg) + "\n").encode())
        s.p.stdin.flush()
        time.sleep(0.5)
    order = []
    while len(order) < 2:
        o = json.loads(s.p.stdout.readline())
        if "id" in o:
            if o["result"]["structuredContent"]["outcome"] != "committed":
                fail(f"{o}")
            order.append(o["id"])
    if order != [102, 101]:
        fail(f"answers in the order {order}: the second run waited for the first")
    s.close()


def case_progress():
    s = Server(WS)
    r = s.tool("run", {"command": "for i in 1 2 3; do echo line$i; sleep 0.8; done; echo done > p"},
               meta={"progressToken": "p1"})
    if r["structuredContent"]["outcome"] != "committed":
        fail(f"{r}")
    msgs = [n["params"].get("message", "") for n in s.notes if n.get("method") == "notifications/progress"]
    if not msgs or not any("line" in m for m in msgs):
        fail(f"no progress with the command's output: {s.notes}")
    s.close()


{"same": case_same, "leak": case_leak, "state": case_state, "progress": case_progress,
 "concurrent": case_concurrent}[CASE]()
