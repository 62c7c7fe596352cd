#!/usr/bin/env python3
"""Plays the agent CLI around `txbox hook`: sends one hook input, applies
the decision the way the CLI does, and runs what the CLI would run.

    hookhost.py TXBOX AGENT INPUT_JSON [HOOK ARGS...]

Claude Code (PreToolUse): exit 2 or permissionDecision "deny" blocks;
updatedInput replaces the whole tool input; the Bash tool runs
`bash -c COMMAND` in the session's cwd. Gemini CLI (BeforeTool): exit 2 or
decision "deny" blocks; hookSpecificOutput.tool_input is the call from then
on (its dir_path, relative to the project root, is where `bash -c` runs).
qwen-code (PreToolUse, run_shell_command): exit 2 or "deny" blocks;
updatedInput is ignored; `directory` is where the command runs.
Prints one JSON line: {"hook_status", "decision", "blocked", "ran",
"status", "stdout", "stderr"}; exits 0 (the caller checks).
"""
import json
import os
import subprocess
import sys


def main():
    txbox, agent, payload = sys.argv[1], sys.argv[2], sys.argv[3]
    extra = sys.argv[4:]
    inp = json.loads(payload)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_PROJECT_DIR")}
    p = subprocess.run([txbox, "hook", agent] + extra, input=payload.encode(), capture_output=True,
                       timeout=120, env=env)
    out = {"hook_status": p.returncode, "hook_stderr": p.stderr.decode("utf-8", "replace"),
           "blocked": True, "ran": None}
    dec = json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else {}
    out["decision"] = dec
    if p.returncode == 2:
        print(json.dumps(out))
        return
    tinput = inp["tool_input"]
    root = inp.get("cwd") or os.getcwd()
    if agent == "gemini-cli":
        if dec.get("decision") in ("deny", "block"):
            print(json.dumps(out))
            return
        tinput = dec.get("hookSpecificOutput", {}).get("tool_input", tinput)
        d = tinput.get("dir_path") or tinput.get("directory")
    else:
        h = dec.get("hookSpecificOutput", {})
        if h.get("permissionDecision") == "deny":
            print(json.dumps(out))
            return
        if agent == "claude-code" and "updatedInput" in h:
            tinput = h["updatedInput"]
        d = tinput.get("directory") if agent == "qwen-code" else None
    cwd = os.path.join(root, d) if d else root
    out["blocked"] = False
    out["ran"] = tinput["command"]
    r = subprocess.run(["bash", "-c", tinput["command"]], cwd=cwd, capture_output=True, timeout=300)
    out.update(status=r.returncode, stdout=r.stdout.decode("utf-8", "replace"),
               stderr=r.stderr.decode("utf-8", "replace"))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
