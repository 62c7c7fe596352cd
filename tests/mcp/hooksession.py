#!/usr/bin/env python3
"""Plays an agent CLI's session around `txbox hook`: several shell tool
calls of one CLI session (one session_id), each sent to the hook and run
the way the CLI runs it, in the directory the CLI's shell is in.

    hooksession.py TXBOX AGENT WORKSPACE SESSION_ID COMMAND...

Claude Code (PreToolUse, Bash): updatedInput replaces the input; the shell
runs `eval CMD < /dev/null && pwd -P >| FILE` and the next call starts in
the directory FILE names (its shell follows `cd`, within the project).
Gemini CLI (BeforeTool, run_shell_command): hookSpecificOutput.tool_input
is the call; each runs `bash -c` in its dir_path (the project root here).
Prints one JSON line per call: {"command", "hook_status", "decision",
"ran", "status", "stdout", "stderr", "cwd"} (cwd: where the next call
starts). Exits 0 (the caller checks).
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile


def main():
    txbox, agent, ws, sid, *commands = sys.argv[1:]
    ws = os.path.realpath(ws)
    cwd = ws
    env = {k: v for k, v in os.environ.items() if not k.endswith("_PROJECT_DIR")}
    for cmd in commands:
        if agent == "gemini-cli":
            payload = {"session_id": sid, "cwd": ws, "hook_event_name": "BeforeTool",
                       "tool_name": "run_shell_command", "tool_input": {"command": cmd}}
        else:
            payload = {"session_id": sid, "cwd": cwd, "permission_mode": "default",
                       "hook_event_name": "PreToolUse", "tool_name": "Bash",
                       "tool_input": {"command": cmd, "description": "a step"}}
        p = subprocess.run([txbox, "hook", agent], input=json.dumps(payload).encode(), capture_output=True,
                           timeout=120, env=dict(env, **({"CLAUDE_PROJECT_DIR": ws} if agent == "claude-code"
                                                        else {"GEMINI_PROJECT_DIR": ws})))
        out = {"command": cmd, "hook_status": p.returncode, "hook_stderr": p.stderr.decode("utf-8", "replace"),
               "ran": None, "cwd": cwd}
        dec = json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else {}
        out["decision"] = dec
        if p.returncode == 2:
            print(json.dumps(out), flush=True)
            continue
        if agent == "gemini-cli":
            if dec.get("decision") in ("deny", "block"):
                print(json.dumps(out), flush=True)
                continue
            tinput = dec.get("hookSpecificOutput", {}).get("tool_input", payload["tool_input"])
            d = tinput.get("dir_path") or tinput.get("directory")
            run_cwd = os.path.join(ws, d) if d else ws
            r = subprocess.run(["bash", "-c", tinput["command"]], cwd=run_cwd, capture_output=True, timeout=300)
        else:
            h = dec.get("hookSpecificOutput", {})
            if h.get("permissionDecision") == "deny":
                print(json.dumps(out), flush=True)
                continue
            tinput = h.get("updatedInput", payload["tool_input"])
            fd, cwdfile = tempfile.mkstemp(prefix="hooksession-cwd-")
            os.close(fd)
            wrapped = f"eval {shlex.quote(tinput['command'])} < /dev/null && pwd -P >| {shlex.quote(cwdfile)}"
            r = subprocess.run(["bash", "-c", wrapped], cwd=cwd, capture_output=True, timeout=300)
            with open(cwdfile) as f:
                new = f.read().strip()
            os.unlink(cwdfile)
            # the shell follows a cd within the project, as Claude Code's does
            if new and (new == ws or new.startswith(ws + "/")) and os.path.isdir(new):
                cwd = new
        out.update(ran=tinput["command"], status=r.returncode, stdout=r.stdout.decode("utf-8", "replace"),
                   stderr=r.stderr.decode("utf-8", "replace"), cwd=cwd)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
