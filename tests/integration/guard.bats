#!/usr/bin/env bats
# The guard cannot be turned off from inside, and nothing planted runs
# later without a person asking (docs/policy.md, "The agent's own guard"
# and "Files other programs run on the host"). Each class: a command
# (txbox run, MCP run) that writes such a file is held, nothing of it
# reaches the workspace; the ordinary work next to it commits. And the
# hook's denials are in the audit log. The lists themselves are tested
# entry by entry in tests/unit/test_guard.c.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    new_ws
    MARK="$BATS_TEST_TMPDIR/planted-ran"
}

# held RULE [TEXT]: the last run was held by RULE (its reason holding
# TEXT), and nothing of it was applied.
assert_held() {
    assert_status 121
    assert_outcome held
    assert_json_field effect_rule "$1"
    [ -z "${2:-}" ] || [[ "$(jget reason)" == *"$2"* ]] || fail "reason lacks $2: $(jget reason)"
}

# held_run RULE SCRIPT: SCRIPT through txbox run is held by RULE and leaves
# the workspace as it was; then the held transaction is rejected.
held_run() {
    local rule="$1" script="$2"
    snap pre "$WS"
    txj -c "$script"
    assert_held "$rule"
    assert_tree pre "$WS"
    run --separate-stderr txbox_bin reject -C "$WS" "$(jget tx)"
    assert_status 0
}

# committed SCRIPT: SCRIPT through txbox run commits.
committed() {
    txj -c "$1"
    assert_status 0
    assert_outcome committed
}

# mcp_run COMMAND: the MCP tool run, in one session of txbox mcp; prints
# the structured result's outcome and effect rule.
mcp_run() {
    python3 - "$TXBOX" "$WS" "$1" <<'EOF'
import json, subprocess, sys
txbox, ws, cmd = sys.argv[1:4]
msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run", "arguments": {"command": cmd}}}]
p = subprocess.run([txbox, "mcp", "-C", ws], input="".join(json.dumps(m) + "\n" for m in msgs),
                   capture_output=True, text=True, timeout=300)
for line in p.stdout.splitlines():
    m = json.loads(line)
    if m.get("id") == 2:
        sc = m["result"].get("structuredContent")
        if sc is None:  # a line for the model, then the result as JSON
            text = m["result"]["content"][0]["text"]
            sc = json.loads(text[text.index("\n{") + 1:])
        print(sc.get("outcome"), sc.get("effect_rule"))
EOF
}

# ---- 1. the agent cannot switch off its own guard ----

@test "agent settings: disableAllHooks, a replaced hook, an MCP server, a Gemini hook are held (txbox run)" {
    held_run agent-settings 'mkdir -p .claude && echo "{\"disableAllHooks\":true}" >.claude/settings.local.json'
    held_run agent-settings 'mkdir -p .claude && echo "{\"hooks\":{\"PreToolUse\":[{\"matcher\":\"*\",\"hooks\":[{\"type\":\"command\",\"command\":\"true\"}]}]}}" >.claude/settings.json'
    held_run agent-settings 'echo "{\"mcpServers\":{\"x\":{\"command\":\"sh\",\"args\":[\"-c\",\"touch '"$MARK"'\"]}}}" >.mcp.json'
    held_run agent-settings 'mkdir -p .gemini && echo "{\"hooks\":{\"BeforeTool\":[]}}" >.gemini/settings.json'
    held_run agent-settings 'mkdir -p .codex && echo "sandbox_mode = \"danger-full-access\"" >.codex/config.toml'
    held_run agent-settings 'mkdir -p .cursor && echo "{\"version\":1,\"hooks\":{}}" >.cursor/hooks.json'
    held_run agent-settings 'echo "{\"permission\":{\"bash\":\"allow\"}}" >opencode.json'
    held_run agent-settings 'mkdir -p .vscode && echo "{\"servers\":{}}" >.vscode/mcp.json'
}

@test "agent settings: deleted, renamed, linked, in another case, through a directory rename, in a subdirectory" {
    # the user's settings, with txbox's hook
    mkdir -p "$WS/.claude" "$WS/app"
    echo '{"hooks":{"PreToolUse":[]}}' >"$WS/.claude/settings.json"
    held_run agent-settings 'rm .claude/settings.json'
    held_run agent-settings 'mv .claude/settings.json .claude/settings.old'
    held_run agent-settings 'mv .claude .claude-off'
    held_run agent-settings 'mkdir -p elsewhere && echo "{\"disableAllHooks\":true}" >elsewhere/s.json && ln -s ../elsewhere/s.json .claude/settings.local.json'
    held_run agent-settings 'mkdir -p cfg && echo "{\"disableAllHooks\":true}" >cfg/settings.local.json && rm -rf .claude && ln -s cfg .claude'
    held_run agent-settings 'mkdir -p staging && echo "{\"disableAllHooks\":true}" >staging/settings.local.json && mv staging app/.claude'
    held_run agent-settings 'mkdir -p .CLAUDE && echo "{\"disableAllHooks\":true}" >.CLAUDE/Settings.Local.JSON'
    held_run agent-settings 'mkdir -p app/.gemini && echo "{}" >app/.gemini/settings.json'
    held_run agent-settings 'mkdir -p a/b && echo "{}" >a/b/.mcp.json'
    # the user's own links at the root make another place an agent's settings
    mkdir -p "$WS/config/claude" && ln -s config/claude "$WS/.cursor"
    echo '{}' >"$WS/config/claude/settings.json"
    ln -s config/claude/settings.json "$WS/.mcp.json"
    held_run agent-settings 'echo "{\"disableAllHooks\":true}" >config/claude/settings.local.json'
    held_run agent-settings 'echo "{\"mcpServers\":{}}" >config/claude/settings.json'
    # the settings are as the user left them
    [ "$(cat "$WS/.claude/settings.json")" = '{"hooks":{"PreToolUse":[]}}' ] || fail "settings changed"
}

@test "agent settings: MCP run is held as txbox run is; ordinary work and documents commit" {
    run mcp_run 'mkdir -p .claude && echo "{\"disableAllHooks\":true}" >.claude/settings.local.json'
    [ "$output" = "held agent-settings" ] || fail "MCP run: $output"
    [ ! -e "$WS/.claude/settings.local.json" ] || fail "applied though held"
    committed 'echo "# notes" >CLAUDE.md && echo "# agents" >AGENTS.md && mkdir -p docs && echo x >docs/claude-setup.md'
    committed 'mkdir -p node_modules/pkg/.claude && echo "{}" >node_modules/pkg/.claude/settings.json'
    # an empty settings directory configures nothing (a copied home's, secrets hidden)
    committed 'mkdir -p copy/.claude copy/.gemini copy/.codex'

}

# The agent's own file tools write on the host, outside txbox: the hook
# sees them (matcher "*") and denies a write that a transaction would have
# held, in the project or in the home directory; the audit log has it.
# file_tool AGENT TOOL PATH [CONTENT]: the hook's answer to TOOL writing
# PATH; status in $status, the reason in $stderr.
file_tool() {
    local event=PreToolUse input
    [ "$1" = gemini-cli ] && event=BeforeTool
    input="$(python3 -c 'import json, sys
ti = {"file_path": sys.argv[3]}
if len(sys.argv) > 4: ti["content"] = sys.argv[4]
else: ti.update(old_string="x", new_string="y")
print(json.dumps({"cwd": sys.argv[1], "hook_event_name": sys.argv[5], "tool_name": sys.argv[2], "tool_input": ti}))' \
        "$WS" "$2" "$3" "${4:-}" "$event")"
    [ $# -ge 4 ] || input="$(python3 -c 'import json, sys; d = json.loads(sys.argv[1]); d["tool_input"].pop("content", None); d["tool_input"].update(old_string="x", new_string="y"); print(json.dumps(d))' "$input")"
    run --separate-stderr "$TXBOX" hook "$1" -C "$WS" <<<"$input"
}

# edit_tool PATH OLD NEW: the hook's answer to Claude Code's Edit.
edit_tool() {
    local input
    input="$(python3 -c 'import json, sys
print(json.dumps({"cwd": sys.argv[1], "hook_event_name": "PreToolUse", "tool_name": "Edit",
                  "tool_input": {"file_path": sys.argv[2], "old_string": sys.argv[3], "new_string": sys.argv[4]}}))' \
        "$WS" "$1" "$2" "$3")"
    run --separate-stderr "$TXBOX" hook claude-code -C "$WS" <<<"$input"
}

@test "the agent's own file tools: its settings, a hook's script, a .pth, the home's settings are denied; other files pass" {
    export HOME="$BATS_TEST_TMPDIR/home"
    mkdir -p "$HOME/.claude" "$WS/.claude" "$WS/scripts" "$WS/src"
    printf '{"hooks": {"PostToolUse": [{"hooks": [{"type": "command", "command": "./scripts/fmt.sh"}]}]}}\n' >"$WS/.claude/settings.json"
    printf 'x\n' >"$WS/scripts/fmt.sh"
    snap pre "$WS"
    file_tool claude-code Write "$WS/.claude/settings.local.json" '{"disableAllHooks": true}'
    [ "$status" = 2 ] && [[ "$stderr" == *"rule agent-settings"* ]] || fail "Write settings: $status $stderr"
    file_tool claude-code Edit .claude/settings.json
    [ "$status" = 2 ] && [[ "$stderr" == *"rule agent-settings"* ]] || fail "Edit settings: $status $stderr"
    file_tool claude-code Edit "$WS/scripts/fmt.sh"
    [ "$status" = 2 ] && [[ "$stderr" == *"rule runner-scripts"* ]] || fail "Edit hook script: $status $stderr"
    file_tool claude-code Write "$WS/.venv/lib/python3.11/site-packages/x.pth" 'import os'
    [ "$status" = 2 ] && [[ "$stderr" == *"rule python-pth"* ]] || fail "Write .pth: $status $stderr"
    file_tool claude-code Write "$HOME/.claude/settings.json" '{}'
    [ "$status" = 2 ] && [[ "$stderr" == *"rule agent-settings"* ]] || fail "Write home settings: $status $stderr"
    file_tool gemini-cli write_file "$WS/.gemini/settings.json" '{}'
    [ "$status" = 2 ] && [[ "$stderr" == *"rule agent-settings"* ]] || fail "Gemini write_file: $status $stderr"
    # a link made at the name, to where the tool would write
    ln -s ../src/cfg.json "$WS/.claude/settings.local.json"
    file_tool claude-code Write "$WS/src/cfg.json" '{"disableAllHooks": true}'
    [ "$status" = 0 ] || fail "a file a link names is not itself the settings: $status $stderr"
    file_tool claude-code Write "$WS/.claude/settings.local.json" '{"disableAllHooks": true}'
    [ "$status" = 2 ] || fail "Write through the link: $status $stderr"
    rm "$WS/.claude/settings.local.json"
    # an edit is judged by the content it leaves: a setting that names a
    # program is denied, another passes
    mkdir -p "$WS/.vscode"
    printf '{\n  "editor.tabSize": 2\n}\n' >"$WS/.vscode/settings.json"
    snap pre "$WS"
    edit_tool "$WS/.vscode/settings.json" '"editor.tabSize": 2' '"editor.tabSize": 4'
    [ "$status" = 0 ] || fail "Edit tabSize: $status $stderr"
    edit_tool "$WS/.vscode/settings.json" '"editor.tabSize": 2' '"go.alternateTools": {"go": "/tmp/x"}'
    [ "$status" = 2 ] && [[ "$stderr" == *"rule editor-autorun"* ]] || fail "Edit go.alternateTools: $status $stderr"
    edit_tool "$WS/.vscode/settings.json" 'not in the file' 'x'
    [ "$status" = 2 ] || fail "an edit whose content is unknown: $status $stderr"
    # ordinary files, in the project and elsewhere, pass without a decision
    file_tool claude-code Write "$WS/src/main.py" 'print(1)'
    [ "$status" = 0 ] && [ -z "$output" ] || fail "Write src: $status $output $stderr"
    file_tool claude-code Edit src/main.py
    [ "$status" = 0 ] || fail "Edit src: $status $stderr"
    file_tool claude-code Write /tmp/helper.py 'print(1)'
    [ "$status" = 0 ] || fail "Write /tmp: $status $stderr"
    assert_tree pre "$WS"
    # the denials are in the audit log
    run --separate-stderr "$TXBOX" log -C "$WS" --json
    assert_status 0
    [ "$(printf '%s' "$output" | python3 -c 'import json, sys; print(sum(1 for r in json.load(sys.stdin) if r.get("outcome") == "blocked" and r.get("rule") in ("agent-settings", "runner-scripts", "python-pth")))')" -ge 5 ] ||
        fail "audit log: $(clip "$output")"
}

# ---- 2. nothing planted runs later without a person asking ----

@test "python: a .pth import line, sitecustomize, usercustomize, a replaced venv interpreter or home are held" {
    committed 'python3 -m venv --without-pip .venv'
    local sp
    sp=$(cd "$WS" && ls -d .venv/lib/python3*/site-packages)
    held_run python-pth "echo 'import os; os.system(\"touch $MARK\")' >$sp/evil.pth"
    held_run python-pth "printf '/src\\rimport os\\n' >$sp/cr.pth"
    held_run python-startup "echo 'open(\"$MARK\", \"w\")' >$sp/sitecustomize.py"
    held_run python-startup "mkdir -p $sp/usercustomize && echo 'open(\"$MARK\", \"w\")' >$sp/usercustomize/__init__.py"
    held_run venv-interpreter "rm .venv/bin/python && printf '#!/bin/sh\\ntouch $MARK\\n' >.venv/bin/python && chmod +x .venv/bin/python"
    held_run venv-interpreter "printf '#!/bin/sh\\ntouch $MARK\\n' >fake && chmod +x fake && ln -sf \"\$PWD/fake\" .venv/bin/python3"
    held_run venv-interpreter "printf '#!/bin/sh\ntouch $MARK\n' >.venv/bin/evil && chmod +x .venv/bin/evil && ln -sf evil .venv/bin/python"
    held_run venv-interpreter "printf '#!/bin/sh\ntouch $MARK\n' >fake && chmod +x fake && ln -sf /proc/self/cwd/fake .venv/bin/python"
    held_run venv-home "mkdir -p fakepy/bin && sed -i \"s|^home = .*|home = \$PWD/fakepy/bin|\" .venv/pyvenv.cfg"
    # the host's next use of the environment runs nothing planted
    (cd "$WS" && .venv/bin/python -c 'pass')
    [ ! -e "$MARK" ] || fail "something planted ran"
    # what pip writes for a src-layout editable install: a path line
    committed "echo '$WS/src' >$sp/__editable__.pkg-0.1.pth && echo 'x = 1' >$sp/pkg_helper.py"
}

@test "git hook runners: husky's script behind core.hooksPath, pre-commit local hooks, lefthook are held" {
    git -C "$WS" init -q
    git -C "$WS" config core.hooksPath .husky/_
    mkdir -p "$WS/.husky/_"
    held_run git-hook-runners "printf 'touch $MARK\\n' >.husky/pre-commit"
    held_run git-hook-runners "printf 'repos:\\n- repo: local\\n  hooks:\\n  - id: x\\n    name: x\\n    entry: touch $MARK\\n    language: system\\n' >.pre-commit-config.yaml"
    held_run git-hook-runners "printf 'pre-commit:\\n  commands:\\n    x:\\n      run: touch $MARK\\n' >lefthook.yml"
    held_run git-hook-runners "mkdir -p .lefthook/pre-commit && printf 'touch $MARK\\n' >.lefthook/pre-commit/x.sh"
}

@test "runner scripts: what a configured pre-commit, lefthook, husky hook or folderOpen task runs is held" {
    mkdir -p "$WS/scripts" "$WS/.husky" "$WS/.vscode"
    for f in check lint hk open other; do printf '#!/bin/sh\nexit 0\n' >"$WS/scripts/$f.sh"; done
    printf 'repos:\n- repo: local\n  hooks:\n  - id: c\n    name: c\n    entry: scripts/check.sh\n    language: script\n' >"$WS/.pre-commit-config.yaml"
    printf 'pre-commit:\n  commands:\n    lint:\n      run: ./scripts/lint.sh {staged_files}\n' >"$WS/lefthook.yml"
    printf '#!/bin/sh\n# checks\nsh scripts/hk.sh && npm test\n' >"$WS/.husky/pre-commit"
    printf '{"version":"2.0.0","tasks":[{"label":"o","type":"shell","command":"${workspaceFolder}/scripts/open.sh","runOptions":{"runOn":"folderOpen"}}]}\n' >"$WS/.vscode/tasks.json"
    local f
    for f in check lint hk open; do
        held_run runner-scripts "echo 'touch $MARK' >>scripts/$f.sh"
    done
    committed "echo 'echo hi' >>scripts/other.sh"
    committed 'rm scripts/check.sh'
}

# An agent CLI runs its hooks, status line, credential helper and MCP
# servers on the host, outside txbox: the scripts its project settings
# name are as much the guard as the settings themselves.
@test "runner scripts: what an agent CLI's hooks, status line, key helper and MCP servers run is held" {
    mkdir -p "$WS/scripts" "$WS/.claude" "$WS/.gemini" "$WS/.cursor" "$WS/mcp"
    local f
    for f in fmt status key gem cur other; do printf '#!/bin/sh\nexit 0\n' >"$WS/scripts/$f.sh"; done
    printf 'x\n' >"$WS/mcp/server.js"
    printf '{"hooks": {"PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "\\"$CLAUDE_PROJECT_DIR\\"/scripts/fmt.sh --fix"}]}]},\n "statusLine": {"type": "command", "command": "bash scripts/status.sh"},\n "apiKeyHelper": "%s/scripts/key.sh"}\n' "$WS" >"$WS/.claude/settings.json"
    printf '{"mcpServers": {"x": {"command": "node", "args": ["mcp/server.js"]}}}\n' >"$WS/.mcp.json"
    printf '{\n  // hooks\n  "hooks": {"BeforeTool": [{"hooks": [{"type": "command", "command": "${GEMINI_PROJECT_DIR}/scripts/gem.sh"}]}]},\n}\n' >"$WS/.gemini/settings.json"
    # (a relative path with the workspace's own path inside it is itself)
    mkdir -p "$WS/tools$WS"
    printf 'x\n' >"$WS/tools$WS/in.sh"
    printf '{"version": 1, "hooks": {"beforeShellExecution": [{"command": "./scripts/cur.sh"}, {"command": "sh tools%s/in.sh"}]}}\n' "$WS" >"$WS/.cursor/hooks.json"
    for f in scripts/fmt.sh scripts/status.sh scripts/key.sh scripts/gem.sh scripts/cur.sh mcp/server.js "tools$WS/in.sh"; do
        held_run runner-scripts "echo 'touch $MARK' >>$f"
    done
    committed "echo 'echo hi' >>scripts/other.sh"
    committed 'mkdir -p tools && echo x >tools/status.sh'
}

@test "VS Code: settings that name programs, however written, and folderOpen tasks are held; others commit" {
    mkdir -p "$WS/.vscode"
    held_run editor-autorun "printf '{\"go.alternateTools\": {\"go\": \"$MARK\"}}' >.vscode/settings.json"
    held_run editor-autorun "printf '{\"python.defaultInterpreter\\\\u0050ath\": \"$MARK\"}' >.vscode/settings.json"
    held_run editor-autorun "printf '// mine\\n{\"python.defaultInterpreterPath\" /* c */ : \"$MARK\",}\\n' >.vscode/settings.json"
    held_run editor-autorun "printf '{\"[python]\": {\"python.defaultInterpreterPath\": \"$MARK\"}}' >.vscode/settings.json"
    held_run editor-autorun "printf '{\"chat.tools.autoApprove\": true}' >.vscode/settings.json"
    held_run editor-autorun "mkdir -p app/.vscode && printf '{\"go.alternateTools\": {\"go\": \"$MARK\"}}' >app/.vscode/settings.json"
    held_run editor-autorun "printf '{\"editor.tabSize\": 4' >.vscode/settings.json"
    held_run editor-autorun "printf '{\"tasks\":[{\"label\":\"x\",\"command\":\"touch $MARK\",\"runOptions\":{\"runOn\":\"folderOpen\"}}]}' >.vscode/tasks.json"
    committed "printf '{\n  // two spaces\n  \"editor.tabSize\": 2,\n  \"files.exclude\": {\"**/.git\": true},\n}\n' >.vscode/settings.json"
    committed "printf '{\"tasks\":[{\"label\":\"build\",\"command\":\"make\"}]}' >.vscode/tasks.json"
}

@test "rust: a toolchain path and cargo's compiler wrapper are held; a channel commits" {
    held_run rust-programs "printf '[toolchain]\\npath = \"./tc\"\\n' >rust-toolchain.toml"
    held_run rust-programs "mkdir -p .cargo && printf '[build]\\nrustc-wrapper = \"./w\"\\n' >.cargo/config.toml"
    committed "printf '[toolchain]\\nchannel = \"1.80\"\\n' >rust-toolchain.toml"
}

@test "home: with the workspace as \$HOME, shell, git, systemd and autostart files are held" {
    export HOME="$WS"
    held_run home-startup "echo 'touch $MARK' >>.bashrc"
    held_run home-startup "echo 'touch $MARK' >.profile"
    held_run home-startup "printf '[core]\\n\\tfsmonitor = touch $MARK\\n' >.gitconfig"
    held_run home-startup "mkdir -p .config/systemd/user && printf '[Service]\\nExecStart=/bin/touch $MARK\\n' >.config/systemd/user/x.service"
    held_run home-startup "mkdir -p .config/autostart && printf '[Desktop Entry]\\nExec=touch $MARK\\n' >.config/autostart/x.desktop"
    held_run home-startup "mkdir -p .local/bin && printf '#!/bin/sh\\n' >.local/bin/git"
    committed 'mkdir -p projects/app && echo "int x;" >projects/app/main.c && echo x >projects/app/.bashrc'
}

@test "home: a workspace inside \$HOME holds the home files in it; a project's own files commit" {
    export HOME="$WS"
    mkdir -p "$WS/.config"
    local outer="$WS"
    WS="$outer/.config"
    held_run home-startup "mkdir -p systemd/user && printf '[Service]\\nExecStart=/bin/touch $MARK\\n' >systemd/user/x.service"
    held_run home-startup "mkdir -p git && printf '[core]\\n\\tpager = touch $MARK\\n' >git/config"
    mkdir -p "$outer/src/app"
    WS="$outer/src/app"
    committed 'echo "alias x=y" >.bashrc && mkdir -p .config/systemd && echo x >.config/systemd/notes'
}

# ---- the hook's denials are in the audit log ----

@test "hook: a denied command is in the audit log as blocked (unsafe, plan mode, a host that cannot rewrite)" {
    local in
    in='{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","cwd":"'"$WS"'","tool_input":{"command":"rm -rf /"}}'
    run --separate-stderr env CLAUDE_PROJECT_DIR="$WS" "$TXBOX" hook claude-code <<<"$in"
    assert_status 0
    [[ "$output" == *'"deny"'* ]] || fail "$output"
    in='{"session_id":"s","hook_event_name":"BeforeTool","tool_name":"run_shell_command","cwd":"'"$WS"'","tool_input":{"command":"rm -rf ~"}}'
    run --separate-stderr env GEMINI_PROJECT_DIR="$WS" "$TXBOX" hook gemini-cli <<<"$in"
    assert_status 0
    in='{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","permission_mode":"plan","cwd":"'"$WS"'","tool_input":{"command":"echo planned >f"}}'
    run --separate-stderr env CLAUDE_PROJECT_DIR="$WS" "$TXBOX" hook claude-code <<<"$in"
    assert_status 0
    in='{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"run_shell_command","cwd":"'"$WS"'","tool_input":{"command":"echo q >g"}}'
    run --separate-stderr env QWEN_PROJECT_DIR="$WS" "$TXBOX" hook qwen-code <<<"$in"
    assert_status 2
    run --separate-stderr txbox_bin log -C "$WS" --json
    assert_status 0
    python3 - "$output" <<'EOF' || fail "log: $output"
import json, sys
rows = json.loads(sys.argv[1])
rows = rows["transactions"] if isinstance(rows, dict) else rows
got = {(r["command"], r["outcome"], r["rule"]) for r in rows}
want = {("rm -rf /", "blocked", "delete-outside-workspace"), ("echo planned >f", "blocked", "hook-plan-mode"),
        ("echo q >g", "blocked", "hook-no-rewrite")}
assert want <= got, got
assert any(c == "rm -rf ~" and o == "blocked" for c, o, _ in got), got
EOF
    # an allowed command is not logged by the hook (its txbox run logs it)
    in='{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","cwd":"'"$WS"'","tool_input":{"command":"echo ok >h"}}'
    run --separate-stderr env CLAUDE_PROJECT_DIR="$WS" "$TXBOX" hook claude-code <<<"$in"
    assert_status 0
    run --separate-stderr txbox_bin log -C "$WS" --json
    [[ "$output" != *'echo ok >h'* ]] || fail "an allowed command logged by the hook: $output"
}
