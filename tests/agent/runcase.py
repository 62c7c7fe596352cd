#!/usr/bin/env python3
"""Run agent case files against a txbox binary and a scripted server.

usage: runcase.py --txbox BIN [--tmp DIR] [--keep] CASE...

Each case: a fresh workspace (its `setup` run there), a scripted server on
127.0.0.1:<ephemeral> serving the case's replies, then
    txbox agent --json -C WS --endpoint http://127.0.0.1:PORT/v1 --model test-model ARGS
bounded by the case's timeout, then the `verify` lines. Exit status 0 when
every case passed, 1 when one failed, 77 when a case's requirement is
missing (e.g. the policy engine is not wired into `txbox run`), unless
TXBOX_MUST_WORK=1: then a missing requirement fails too.

Verify lines:  TARGET OP [VALUE]
  TARGET  exit | stdout | stderr | extra | summary.PATH | request[N].PATH |
          transcript.PATH | file(REL) ; PATH is dotted names and [i] indices
          (negative from the end); a final .length gives the length;
          request[N].workspace is the workspace when request N came: sorted
          "path: content" strings (files outside .txbox, 200 bytes each)
  OP      == != (VALUE is a JSON literal)   ~ !~ (VALUE is a JSON string
          holding a Python regex, searched)   contains !contains (a list
          member or a substring; VALUE JSON)   >= <= > < (numbers)
          exists  missing  (no VALUE)
Checks made for every case besides its own: no request after the replies
ran out; every request is a POST of JSON to /v1/chat/completions naming
the model; a value of an env variable whose name holds KEY appears nowhere
in txbox's output, the transcript, the request bodies or the workspace; the transcript's
summary matches the printed one.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import casefile  # noqa: E402
import server  # noqa: E402

MISSING = object()
LINE = re.compile(r"^(\S+)\s+(==|!=|!~|~|!contains|contains|>=|<=|>|<|exists|missing)(?:\s+(.*))?$")
STEP = re.compile(r"\.([A-Za-z_][\w-]*)|\[(-?\d+)\]")


def resolve(ctx, target):
    m = re.match(r"^([A-Za-z_]\w*)(?:\(([^)]*)\))?", target)
    if not m:
        raise ValueError(f"bad target {target!r}")
    name, arg = m.group(1), m.group(2)
    if name == "file":
        p = os.path.join(ctx["ws"], arg)
        if os.path.isfile(p):
            with open(p, "rb") as f:
                v = f.read().decode("utf-8", "replace")
        else:
            v = MISSING
    elif name in ctx:
        v = ctx[name]
    else:
        raise ValueError(f"unknown target root {name!r}")
    rest = target[m.end():]
    pos = 0
    while pos < len(rest):
        s = STEP.match(rest, pos)
        if not s:
            raise ValueError(f"bad path {target!r}")
        pos = s.end()
        if v is MISSING:
            continue
        if s.group(1) is not None:
            key = s.group(1)
            if key == "length" and pos == len(rest) and isinstance(v, (list, str, dict)):
                v = len(v)
            elif isinstance(v, dict) and key in v:
                v = v[key]
            else:
                v = MISSING
        else:
            i = int(s.group(2))
            v = v[i] if isinstance(v, list) and -len(v) <= i < len(v) else MISSING
    return v


def check(ctx, line):
    m = LINE.match(line.strip())
    if not m:
        return f"bad verify line: {line}"
    target, op, raw = m.groups()
    try:
        got = resolve(ctx, target)
    except ValueError as e:
        return str(e)
    if op == "exists":
        return None if got is not MISSING else f"{target} is missing"
    if op == "missing":
        return None if got is MISSING else f"{target} exists: {short(got)}"
    if raw is None:
        return f"{op} needs a value: {line}"
    try:
        want = json.loads(raw)
    except json.JSONDecodeError as e:
        return f"bad JSON value in verify line {line!r}: {e}"
    if got is MISSING:
        return f"{target} is missing (wanted {op} {raw})"
    ok = False
    if op == "==":
        ok = got == want
    elif op == "!=":
        ok = got != want
    elif op in ("~", "!~"):
        s = got if isinstance(got, str) else json.dumps(got)
        found = re.search(want, s) is not None
        ok = found if op == "~" else not found
    elif op in ("contains", "!contains"):
        found = want in got if isinstance(got, (list, str)) else False
        ok = found if op == "contains" else not found
    else:
        if not isinstance(got, (int, float)):
            return f"{target} is not a number: {short(got)}"
        ok = {">=": got >= want, "<=": got <= want, ">": got > want, "<": got < want}[op]
    return None if ok else f"{target} {op} {raw} failed; got: {short(got)}"


def short(v, n=1500):
    s = v if isinstance(v, str) else json.dumps(v)
    return s if len(s) <= n else s[:n] + f"...[{len(s)} chars]"


def probe_blocked(txbox, tmp, cmd):
    ws = os.path.join(tmp, "probe")
    os.makedirs(ws, exist_ok=True)
    p = subprocess.run([txbox, "run", "--json", "-C", ws, "-c", cmd], capture_output=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    try:
        return json.loads(p.stdout).get("outcome") == "blocked"
    except Exception:
        return False


def has_command(txbox, tmp, name):
    ws = os.path.join(tmp, "probe")
    os.makedirs(ws, exist_ok=True)
    p = subprocess.run([txbox, name, "--help"], capture_output=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    return b"unknown command" not in p.stderr


def ws_state(ws):
    """The workspace as the model's request found it: sorted "path: content"
    for every file outside .txbox (content cut at 200 bytes)."""
    out = []
    for root, dirs, files in os.walk(ws):
        dirs[:] = sorted(d for d in dirs if not (root == ws and d == ".txbox"))
        for fn in files:
            fp = os.path.join(root, fn)
            rel = os.path.relpath(fp, ws)
            try:
                with open(fp, "rb") as f:
                    out.append(f"{rel}: {f.read(200).decode('utf-8', 'replace')}")
            except OSError:
                out.append(f"{rel}: ?")
    return sorted(out)


def missing(name, why):
    """A case's requirement is missing: a skip (77), or under
    TXBOX_MUST_WORK=1 (CI) a failure, as for every other test."""
    if os.environ.get("TXBOX_MUST_WORK") == "1":
        print(f"FAIL {name}: {why} (TXBOX_MUST_WORK=1)")
        return 1
    print(f"skip {name}: {why}")
    return 77


def run_case(txbox, path, tmpbase, keep):
    case = casefile.load(path)
    tmp = tempfile.mkdtemp(prefix="agentcase.", dir=tmpbase)
    ws = os.path.join(tmp, "ws")
    os.makedirs(ws)
    name = os.path.basename(path)
    try:
        for req in case.requires:
            kind, _, arg = req.partition(":")
            if kind.strip() == "blocked" and not probe_blocked(txbox, tmp, arg.strip()):
                return missing(name, f"`txbox run` does not block {arg.strip()!r} "
                                     f"(the policy engine is not wired into run)")
            if kind.strip() in ("command", "no-command"):
                have = has_command(txbox, tmp, arg.strip())
                if have != (kind.strip() == "command"):
                    return missing(name, f"`txbox {arg.strip()}` {'is missing' if not have else 'exists'}")
        if case.setup:
            subprocess.run(["sh", "-ec", case.setup], cwd=ws, check=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        srv, script = server.start(case.replies)
        script.on_request = lambda: ws_state(ws)  # request[N].workspace: the files when it came
        if case.hook:
            hook_env = dict(os.environ, TXBOX=txbox)
            script.on_hook = lambda: subprocess.run(["sh", "-ec", case.hook], cwd=ws, check=True, timeout=120,
                                                    stdin=subprocess.DEVNULL, env=hook_env)
        url = f"http://127.0.0.1:{srv.port}/v1"
        args = [a.replace("%WS", ws).replace("%TMP", tmp).replace("%URL", url) for a in case.args]
        cmd = [txbox, "agent", "--json", "-C", ws, "--endpoint", url, "--model", "test-model"] + args
        env = {k: v for k, v in os.environ.items()
               if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
        env.update(case.env)
        try:
            p = subprocess.run(cmd, capture_output=True, timeout=case.timeout, env=env,
                               stdin=subprocess.DEVNULL)
            timed_out = False
        except subprocess.TimeoutExpired as e:
            p, timed_out = e, True
        finally:
            server.stop(srv)
        stdout = (p.stdout or b"").decode("utf-8", "replace")
        stderr = (p.stderr or b"").decode("utf-8", "replace")
        errors = []
        if timed_out:
            errors.append(f"txbox agent still running after {case.timeout}s; killed")
        try:
            summary = json.loads(stdout)
        except json.JSONDecodeError:
            summary = MISSING
        transcript, transcript_text = MISSING, ""
        if isinstance(summary, dict) and isinstance(summary.get("run_id"), str):
            tp = os.path.join(ws, ".txbox", "agent", summary["run_id"] + ".json")
            if os.path.isfile(tp):
                with open(tp, encoding="utf-8") as f:
                    transcript_text = f.read()
                transcript = json.loads(transcript_text)
        ctx = {"ws": ws, "exit": None if timed_out else p.returncode, "stdout": stdout,
               "stderr": stderr, "summary": summary, "request": script.requests,
               "transcript": transcript, "extra": script.extra}
        # Checks every case gets.
        if script.extra and not any(l.startswith("extra") for l in case.verify):
            errors.append(f"{script.extra} request(s) after the canned replies ran out")
        for i, r in enumerate(script.requests):
            b = r["body"]
            if r["method"] != "POST" or r["path"] != "/v1/chat/completions":
                errors.append(f"request[{i}] is {r['method']} {r['path']}")
            if not r["headers"].get("content-type", "").startswith("application/json"):
                errors.append(f"request[{i}] Content-Type is {r['headers'].get('content-type')}")
            if not isinstance(b, dict) or b.get("model") != "test-model" or \
                    not isinstance(b.get("messages"), list):
                errors.append(f"request[{i}] body is not a chat completion request: {short(r['raw'], 300)}")
        for k, v in case.env.items():
            if "KEY" in k and v:
                bodies = "".join(r["raw"] for r in script.requests)
                for where, text in (("stdout", stdout), ("stderr", stderr), ("transcript", transcript_text),
                                    ("a request body", bodies)):
                    if v in text:
                        errors.append(f"the value of {k} appears in {where}")
                for root, _, files in os.walk(ws):
                    for fn in files:
                        fp = os.path.join(root, fn)
                        if os.path.islink(fp) or not os.path.isfile(fp):
                            continue
                        with open(fp, "rb") as f:
                            if v.encode() in f.read():
                                errors.append(f"the value of {k} appears in {fp}")
        if isinstance(summary, dict) and transcript is not MISSING:
            ts = transcript.get("summary", {})
            if ts.get("status") != summary.get("status") or ts.get("steps") != summary.get("steps"):
                errors.append("the transcript's summary differs from the printed one")
            if transcript.get("complete") is not True:
                errors.append("the transcript is not marked complete")
        for line in case.verify:
            e = check(ctx, line)
            if e:
                errors.append(e)
        if errors:
            print(f"FAIL {name}: {case.info}")
            for e in errors:
                print(f"  - {e}")
            print(f"  exit: {ctx['exit']}\n  stdout: {short(stdout)}\n  stderr: {short(stderr)}")
            print(f"  requests: {len(script.requests)}; workspace: {ws}")
            keep = True
            return 1
        print(f"ok   {name}: {case.info}")
        return 0
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def main():
    argv = sys.argv[1:]
    txbox, tmpbase, keep, cases = None, None, False, []
    while argv:
        a = argv.pop(0)
        if a == "--txbox":
            txbox = argv.pop(0)
        elif a == "--tmp":
            tmpbase = argv.pop(0)
        elif a == "--keep":
            keep = True
        else:
            cases.append(a)
    if not txbox or not cases:
        print(__doc__, file=sys.stderr)
        return 2
    worst = 0
    for c in cases:
        r = run_case(os.path.abspath(txbox), c, tmpbase, keep)
        if r == 1 or (r == 77 and worst == 0):
            worst = r
    return worst


if __name__ == "__main__":
    sys.exit(main())
