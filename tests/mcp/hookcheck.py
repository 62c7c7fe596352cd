#!/usr/bin/env python3
"""Replays one recorded pre-tool-use payload into `txbox hook` and checks
the decision exactly.

    hookcheck.py TXBOX WS AGENT NAME [HOOK ARGS...]

Payload: tests/mcp/payloads/AGENT/NAME.json (@WS@ stands for WS).
Expected: NAME.expected next to it: the exact decision JSON (exit status 0;
an empty file means no output at all), where @RULE@, @REASON@ and
@SUGGESTION@ stand for what `txbox check --json` says about the command,
and @TXBOX@/@WS@ for the resolved binary and workspace. Without an
.expected file the hook must fail closed: exit status 2, nothing on
stdout, one line "txbox hook: ..." on stderr (what the agent CLI shows the
model). The environment's CLAUDE_PROJECT_DIR/GEMINI_PROJECT_DIR are
removed unless HOOK_PROJECT_DIR is set (then both are set to it).
On success prints the decision (for the caller) and exits 0.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(msg, p=None):
    print("FAIL: " + msg, file=sys.stderr)
    if p is not None:
        print(f"exit status {p.returncode}\nstdout: {p.stdout[:2000]!r}\nstderr: {p.stderr[:2000]!r}", file=sys.stderr)
    sys.exit(1)


def subst(v, table):
    if isinstance(v, str):
        for k, r in table.items():
            v = v.replace(k, r)
        return v
    if isinstance(v, list):
        return [subst(x, table) for x in v]
    if isinstance(v, dict):
        return {k: subst(x, table) for k, x in v.items()}
    return v


def main():
    txbox, ws, agent, name = sys.argv[1:5]
    extra = sys.argv[5:]
    txbox, ws = os.path.realpath(txbox), os.path.realpath(ws)
    base = os.path.join(HERE, "payloads", agent, name)
    with open(base + ".json", "rb") as f:
        payload = f.read().replace(b"@WS@", ws.encode())
    env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR")}
    if os.environ.get("HOOK_PROJECT_DIR"):
        env["CLAUDE_PROJECT_DIR"] = env["GEMINI_PROJECT_DIR"] = os.environ["HOOK_PROJECT_DIR"]
    p = subprocess.run([txbox, "hook", agent] + extra, input=payload, capture_output=True, timeout=60, env=env)
    if b"AddressSanitizer" in p.stderr or b"runtime error" in p.stderr:
        fail("crash report on stderr", p)
    if not os.path.exists(base + ".expected") or os.environ.get("HOOK_EXPECT_BLOCK"):
        if p.returncode != 2:
            fail("want exit status 2 (fail closed: the agent CLI blocks the call)", p)
        if p.stdout:
            fail("want nothing on stdout when failing closed", p)
        lines = p.stderr.decode("utf-8", "replace").splitlines()
        if len(lines) != 1 or not lines[0].startswith("txbox hook: "):
            fail("want exactly one 'txbox hook: ...' line on stderr", p)
        print(lines[0])
        return
    if p.returncode != 0:
        fail("want exit status 0 with a decision", p)
    with open(base + ".expected") as f:
        want_text = f.read()
    if not want_text.strip():
        if p.stdout:
            fail("want no output (no decision: the CLI's own rules apply)", p)
        return
    table = {"@TXBOX@": txbox, "@WS@": ws}
    cmd = json.loads(payload)["tool_input"].get("command")
    if cmd is not None:
        chk = subprocess.run([txbox, "check", "--json", "-C", ws, "-c", cmd], capture_output=True, timeout=60)
        v = json.loads(chk.stdout)
        table.update({"@RULE@": v["rule"], "@REASON@": v["reason"], "@SUGGESTION@": v.get("suggestion", "")})
    want = subst(json.loads(want_text), table)
    if not p.stdout.endswith(b"\n") or p.stdout.count(b"\n") != 1:
        fail("want exactly one line of JSON on stdout", p)
    try:
        got = json.loads(p.stdout)
    except ValueError:
        fail("stdout is not JSON", p)
    if got != want:
        fail(f"decision differs:\n got: {json.dumps(got)}\nwant: {json.dumps(want)}", p)
    sys.stdout.write(p.stdout.decode())


if __name__ == "__main__":
    main()
