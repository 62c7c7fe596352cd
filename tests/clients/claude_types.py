#!/usr/bin/env python3
"""claude_types.py SDK_DIR WORKSPACE HOOK_COMMAND: Claude Code's PreToolUse
hook protocol replayed from the types its Agent SDK publishes (sdk.d.ts,
sdk-tools.d.ts), since Claude Code itself cannot run offline.

The hook input carries exactly the fields BaseHookInput & PreToolUseHookInput
declare (every required one, with permission_mode), tool_input a BashInput;
the answer must use only SyncHookJSONOutput's fields, hookSpecificOutput
only PreToolUseHookSpecificOutput's, permissionDecision one of
HookPermissionDecision's values, updatedInput a BashInput. Then the command
runs as the Bash tool would run it (bash -c, in the workspace): a committing
one commits through txbox, a destructive one is denied, a failing one
leaves nothing. Exit status 0 when all holds.
"""
import json, os, re, subprocess, sys

sdk, ws, hook = sys.argv[1:4]
dts = open(os.path.join(sdk, "sdk.d.ts"), encoding="utf-8").read()
tools_dts = open(os.path.join(sdk, "sdk-tools.d.ts"), encoding="utf-8").read()
problems = []


def block(text, head):
    """The {...} body after head, comments dropped."""
    i = text.index(head)
    j = text.index("{", i)
    depth, k = 0, j
    while True:
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                break
        k += 1
    body = re.sub(r"/\*.*?\*/", "", text[j + 1:k], flags=re.S)
    return body


def fields(body):
    """{name: required} of the top-level members of a type body."""
    out, depth = {}, 0
    for line in body.splitlines():
        if depth == 0:
            m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)(\??):", line)
            if m:
                out[m.group(1)] = m.group(2) != "?"
        depth += line.count("{") - line.count("}")
    return out


base = fields(block(dts, "export declare type BaseHookInput ="))
pre = fields(block(dts, "export declare type PreToolUseHookInput ="))
pre_out = fields(block(dts, "export declare type PreToolUseHookSpecificOutput ="))
sync_out = fields(block(dts, "export declare type SyncHookJSONOutput ="))
bash_in = fields(block(tools_dts, "export interface BashInput"))
decisions = re.findall(r"'([a-z]+)'", re.search(r"export declare type HookPermissionDecision =([^;]*);", dts).group(1))
assert {"session_id", "cwd"} <= set(base) and {"tool_name", "tool_input"} <= set(pre), (base, pre)


def hook_input(command):
    vals = {"session_id": "s-1", "transcript_path": "/nonexistent/transcript.jsonl", "cwd": ws,
            "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_use_id": "toolu_1",
            "tool_input": {"command": command, "description": "the test's command", "timeout": 120000}}
    inp = {}
    for name, required in list(base.items()) + list(pre.items()):
        if name in vals:
            inp[name] = vals[name]
        elif required:
            problems.append(f"BaseHookInput/PreToolUseHookInput requires {name}, which this replay does not know")
    assert set(inp["tool_input"]) <= set(bash_in), (inp["tool_input"], bash_in)
    return inp


def ask(command):
    p = subprocess.run(["sh", "-c", hook], input=json.dumps(hook_input(command)), capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, CLAUDE_PROJECT_DIR=ws), cwd=ws)
    if p.returncode != 0:
        problems.append(f"{command}: hook exit {p.returncode}: {p.stderr.strip()}")
        return None
    out = json.loads(p.stdout)
    extra = set(out) - set(sync_out)
    if extra:
        problems.append(f"{command}: fields not in SyncHookJSONOutput: {sorted(extra)}")
    hs = out.get("hookSpecificOutput") or {}
    extra = set(hs) - set(pre_out)
    if extra:
        problems.append(f"{command}: fields not in PreToolUseHookSpecificOutput: {sorted(extra)}")
    if hs.get("hookEventName") != "PreToolUse":
        problems.append(f"{command}: hookEventName {hs.get('hookEventName')!r}")
    if hs.get("permissionDecision") not in decisions:
        problems.append(f"{command}: permissionDecision {hs.get('permissionDecision')!r} not in {decisions}")
    upd = hs.get("updatedInput")
    if upd is not None:
        if set(upd) - set(bash_in) or not all(k in upd for k, req in bash_in.items() if req):
            problems.append(f"{command}: updatedInput is not a BashInput: {upd}")
    return hs


def run_as_bash_tool(hs, command):
    cmd = (hs.get("updatedInput") or {}).get("command", command)
    return subprocess.run(["bash", "-c", cmd], cwd=ws, capture_output=True, text=True, timeout=300)


hs = ask("echo hi > hello.txt")
if hs and hs.get("permissionDecision") == "allow":
    if "updatedInput" not in hs:
        problems.append("a command that writes was allowed without being rerouted through txbox run")
    r = run_as_bash_tool(hs, "echo hi > hello.txt")
    if r.returncode != 0:
        problems.append(f"rewritten command failed: {r.stderr}")
hs = ask("rm -rf ~")
if hs and hs.get("permissionDecision") != "deny":
    problems.append(f"rm -rf ~ was not denied: {hs}")
hs = ask("echo partial > partial.txt && rm base.txt && false")
if hs and hs.get("permissionDecision") == "allow":
    r = run_as_bash_tool(hs, "")
    if r.returncode == 0:
        problems.append("the failing command succeeded")
for p in problems:
    print("FAIL", p)
print(f"claude hook protocol: {len(problems)} problem(s); input fields {sorted(set(base) | set(pre))}")
sys.exit(1 if problems else 0)
