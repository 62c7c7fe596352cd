#!/usr/bin/env bats
# txbox setup AGENT: the hook and MCP entries merged into each agent CLI's
# settings (keeping what is there, with a backup), --dry-run, --remove, both
# ways idempotent; project files are workspace content (no symlink followed,
# no fifo read); the hook written into the settings is run as the CLI would.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    P="$BATS_TEST_TMPDIR/proj"
    H="$BATS_TEST_TMPDIR/home"
    mkdir -p "$P" "$H"
    export HOME="$H"
    unset CODEX_HOME CLAUDE_CONFIG_DIR
    BIN="$(readlink -f "$TXBOX")"
}

# the tail every hook command carries: any failure of txbox denies
FC=' || { s=$?; [ \"$s\" -eq 2 ] || echo \"txbox hook: txbox could not run (exit status $s), so this tool call is denied; is txbox still installed?\" >&2; exit 2; }'

setup_ok() {
    run --separate-stderr txbox_bin setup "$@"
    [ "$status" = 0 ] || fail "setup $* -> $status" "$stderr" "$output"
}

# jq-like checks in python: jget FILE EXPR (EXPR in python on d)
jget() {
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(eval(sys.argv[2]), sort_keys=True))' "$1" "$2"
}

@test "setup claude-code: hook and MCP entries merged into existing settings, with a backup" {
    mkdir -p "$P/.claude"
    cat >"$P/.claude/settings.json" <<'EOF'
{"permissions": {"allow": ["Bash(ls)"]},
 "hooks": {"PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "echo mine"}]}]}}
EOF
    cp "$P/.claude/settings.json" "$BATS_TEST_TMPDIR/orig"
    cd "$P"
    setup_ok claude-code
    [ "$(jget .claude/settings.json 'd["permissions"]')" = '{"allow": ["Bash(ls)"]}' ]
    [ "$(jget .claude/settings.json 'd["hooks"]["PreToolUse"][0]["hooks"][0]["command"]')" = '"echo mine"' ]
    [ "$(jget .claude/settings.json 'd["hooks"]["PreToolUse"][1]')" = \
      "{\"hooks\": [{\"command\": \"$BIN hook claude-code$FC\", \"timeout\": 30, \"type\": \"command\"}], \"matcher\": \"*\"}" ]
    [ "$(jget .claude/settings.json 'd["enabledMcpjsonServers"]')" = '["txbox"]' ]
    [ "$(jget .mcp.json 'd["mcpServers"]["txbox"]')" = \
      "{\"args\": [\"mcp\", \"-C\", \"$P\"], \"command\": \"$BIN\"}" ]
    cmp .claude/settings.json.txbox-bak "$BATS_TEST_TMPDIR/orig"
}

@test "setup: a second run changes nothing; --remove restores the settings; a second --remove changes nothing" {
    cd "$P"
    mkdir -p .gemini
    printf '{"theme": "dark", "mcpServers": {"other": {"command": "x"}}}\n' >.gemini/settings.json
    for a in claude-code gemini-cli qwen-code; do setup_ok "$a"; done
    setup_ok codex --project "$P"
    snap=$(cat .claude/settings.json .mcp.json .gemini/settings.json .qwen/settings.json .codex/config.toml | sha256sum)
    for a in claude-code gemini-cli qwen-code; do
        setup_ok "$a"
        [[ "$output" == *"already set up"* ]] || fail "$output"
    done
    setup_ok codex --project "$P"
    [ "$snap" = "$(cat .claude/settings.json .mcp.json .gemini/settings.json .qwen/settings.json .codex/config.toml | sha256sum)" ]
    for a in claude-code gemini-cli qwen-code; do setup_ok "$a" --remove; done
    setup_ok codex --project "$P" --remove
    [ "$(jget .gemini/settings.json d)" = '{"mcpServers": {"other": {"command": "x"}}, "theme": "dark"}' ]
    # files that held only txbox's entries are gone (their backups stay)
    [ ! -e .claude/settings.json ] && [ ! -e .mcp.json ] && [ ! -e .qwen/settings.json ] && [ ! -e .codex/config.toml ]
    for a in claude-code gemini-cli qwen-code; do
        setup_ok "$a" --remove
        [[ "$output" == *"nothing of txbox's"* ]] || fail "$output"
    done
    [ "$(jget .gemini/settings.json d)" = '{"mcpServers": {"other": {"command": "x"}}, "theme": "dark"}' ]
}

@test "setup gemini-cli and qwen-code: hook on the shell tool, MCP server with a timeout in ms" {
    cd "$P"
    setup_ok gemini-cli
    [ "$(jget .gemini/settings.json 'd["hooks"]["BeforeTool"]')" = \
      "[{\"hooks\": [{\"command\": \"$BIN hook gemini-cli$FC\", \"name\": \"txbox\", \"timeout\": 30000, \"type\": \"command\"}], \"matcher\": \".*\"}]" ]
    [ "$(jget .gemini/settings.json 'd["mcpServers"]["txbox"]["timeout"]')" = 600000 ]
    setup_ok qwen-code
    [ "$(jget .qwen/settings.json 'd["hooks"]["PreToolUse"][0]["matcher"]')" = '"*"' ]
    [ "$(jget .qwen/settings.json 'd["hooks"]["PreToolUse"][0]["hooks"][0]["command"]')" = "\"$BIN hook qwen-code$FC\"" ]
    [ "$(jget .qwen/settings.json 'd["mcpServers"]["txbox"]["args"]')" = "[\"mcp\", \"-C\", \"$P\"]" ]
}

@test "setup codex: [mcp_servers.txbox] in ~/.codex/config.toml with the approval mode and tool timeout, the rest kept" {
    mkdir -p "$H/.codex"
    cat >"$H/.codex/config.toml" <<'EOF'
model = "o3" # mine
notes = """
[mcp_servers.txbox]
"""
[mcp_servers.other]
command = "x"
args = [
  "[y]", # a comment
]

[profiles.p]
model = "o4"
EOF
    cp "$H/.codex/config.toml" "$BATS_TEST_TMPDIR/orig"
    cd "$P"
    setup_ok codex
    python3 - "$H/.codex/config.toml" "$BIN" <<'EOF'
import sys, tomllib
d = tomllib.load(open(sys.argv[1], "rb"))
assert d["model"] == "o3" and d["notes"] == "[mcp_servers.txbox]\n", d
assert d["mcp_servers"]["other"] == {"command": "x", "args": ["[y]"]}, d
assert d["profiles"] == {"p": {"model": "o4"}}, d
assert d["mcp_servers"]["txbox"] == {"command": sys.argv[2], "args": ["mcp"], "tool_timeout_sec": 600,
                                     "default_tools_approval_mode": "approve", "required": True}, d
EOF
    cmp "$H/.codex/config.toml.txbox-bak" "$BATS_TEST_TMPDIR/orig"
    setup_ok codex --remove
    cmp "$H/.codex/config.toml" "$BATS_TEST_TMPDIR/orig"
    # CODEX_HOME moves the file, as it moves Codex's
    export CODEX_HOME="$BATS_TEST_TMPDIR/ch"
    mkdir "$CODEX_HOME"
    setup_ok codex
    grep -qx 'default_tools_approval_mode = "approve"' "$CODEX_HOME/config.toml"
}

@test "setup codex: mcp_servers.txbox in a form the editor does not touch, or text it cannot read, is refused and kept" {
    mkdir -p "$H/.codex"
    for text in 'mcp_servers.txbox.command = "x"' $'[mcp_servers]\ntxbox = { command = "x" }' \
        'mcp_servers = { txbox = { command = "x" } }' $'[[mcp_servers]]\nname = "txbox"' \
        'a = "no end' $'a = [\n1,' '[mcp_servers.txbox'; do
        printf '%s\n' "$text" >"$H/.codex/config.toml"
        run --separate-stderr txbox_bin setup codex
        [ "$status" = 125 ] || fail "accepted: $text" "$output"
        [[ "$stderr" == "txbox: setup: "*config.toml*": "* ]] || fail "$stderr"
        [ "$(wc -l <<<"$stderr")" = 1 ] || fail "$stderr"
        [ "$(cat "$H/.codex/config.toml")" = "$text" ] || fail "changed: $text"
        [ ! -e "$H/.codex/config.toml.txbox-bak" ]
    done
}

@test "setup --dry-run: prints the diff and writes nothing" {
    cd "$P"
    mkdir -p .gemini
    printf '{"theme": "dark"}\n' >.gemini/settings.json
    run --separate-stderr txbox_bin setup gemini-cli --dry-run
    [ "$status" = 0 ] || fail "$stderr"
    [[ "$output" == *"--- $P/.gemini/settings.json"* ]] || fail "$output"
    [[ "$output" == *"+        \"matcher\": \".*\","* ]] || fail "$output"
    [[ "$output" == *"dry run: 1 file would change"* ]] || fail "$output"
    [ "$(cat .gemini/settings.json)" = '{"theme": "dark"}' ]
    run --separate-stderr txbox_bin setup claude-code --dry-run
    [ "$status" = 0 ] || fail "$stderr"
    [ ! -e .claude ] && [ ! -e .mcp.json ]
}

@test "setup: project settings that are symlinks, fifos or not plain JSON are refused, nothing written" {
    cd "$P"
    printf 'secret\n' >"$BATS_TEST_TMPDIR/target"
    mkdir .claude
    ln -s "$BATS_TEST_TMPDIR/target" .claude/settings.json
    run --separate-stderr txbox_bin setup claude-code
    [ "$status" = 125 ] || fail "$output"
    [[ "$stderr" == *"symlink"* ]] || fail "$stderr"
    [ "$(cat "$BATS_TEST_TMPDIR/target")" = secret ]
    rm .claude/settings.json && rmdir .claude
    ln -s "$BATS_TEST_TMPDIR" .gemini
    run --separate-stderr txbox_bin setup gemini-cli
    [ "$status" = 125 ] || fail "$output"
    [ ! -e "$BATS_TEST_TMPDIR/settings.json" ]
    rm .gemini && mkdir .qwen && mkfifo .qwen/settings.json
    run --separate-stderr timeout 20 "$TXBOX" setup qwen-code
    [ "$status" = 125 ] || fail "$status $stderr"
    [[ "$stderr" == *"not a regular file"* ]] || fail "$stderr"
    rm .qwen/settings.json
    printf '{\n  // a comment\n  "a": 1\n}\n' >.qwen/settings.json
    run --separate-stderr txbox_bin setup qwen-code
    [ "$status" = 125 ] || fail "$output"
    [[ "$stderr" == *"not plain JSON (line 2"* ]] || fail "$stderr"
    [ "$(sed -n 2p .qwen/settings.json)" = '  // a comment' ]
    printf '{"hooks": []}\n' >.qwen/settings.json
    run --separate-stderr txbox_bin setup qwen-code
    [ "$status" = 125 ] || fail "$output"
    [[ "$stderr" == *"unexpected type"* ]] || fail "$stderr"
}

@test "setup --user: the user's files; bad arguments are one-line errors with status 125" {
    setup_ok claude-code --user --policy "$REPO_DIR/policy/default.yaml"
    [ "$(jget "$H/.claude/settings.json" 'd["hooks"]["PreToolUse"][0]["hooks"][0]["command"]')" = \
      "\"$BIN hook claude-code --policy $REPO_DIR/policy/default.yaml$FC\"" ]
    [ "$(jget "$H/.claude.json" 'd["mcpServers"]["txbox"]["args"]')" = "[\"mcp\", \"--policy\", \"$REPO_DIR/policy/default.yaml\"]" ]
    for args in "" "nosuch" "codex --user --project /" "gemini-cli --project /nonexistent" "codex --bogus" "gemini-cli extra"; do
        run --separate-stderr txbox_bin setup $args
        [ "$status" = 125 ] || fail "setup $args -> $status"
        [[ "$stderr" == "txbox: setup: "* ]] && [ "$(wc -l <<<"$stderr")" = 1 ] || fail "setup $args: $stderr"
    done
}

@test "setup: the hook command written into the settings runs and judges a command as the CLI would" {
    cd "$P"
    setup_ok claude-code
    cmd=$(python3 -c 'import json; print(json.load(open(".claude/settings.json"))["hooks"]["PreToolUse"][0]["hooks"][0]["command"])')
    input='{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","cwd":"'"$P"'","tool_input":{"command":"rm -rf /"}}'
    run --separate-stderr env CLAUDE_PROJECT_DIR="$P" sh -c "$cmd" <<<"$input"
    [ "$status" = 0 ] || fail "$stderr"
    [[ "$output" == *'"permissionDecision":"deny"'* ]] || fail "$output"
    setup_ok gemini-cli
    cmd=$(python3 -c 'import json; print(json.load(open(".gemini/settings.json"))["hooks"]["BeforeTool"][0]["hooks"][0]["command"])')
    input='{"session_id":"s","hook_event_name":"BeforeTool","tool_name":"run_shell_command","cwd":"'"$P"'","tool_input":{"command":"echo hi > f"}}'
    run --separate-stderr env GEMINI_PROJECT_DIR="$P" sh -c "$cmd" <<<"$input"
    [ "$status" = 0 ] || fail "$stderr"
    [[ "$output" == *'"decision":"allow"'* && "$output" == *" run --session 'gemini-cli-s' -C "* ]] || fail "$output"
}

@test "setup grants txbox's tools in each CLI's headless mode; --remove takes the grants out" {
    cd "$P"
    printf '{"permissions": {"allow": ["Bash(ls)"]}}\n' >"$BATS_TEST_TMPDIR/local"
    mkdir -p .claude && cp "$BATS_TEST_TMPDIR/local" .claude/settings.local.json
    for a in claude-code gemini-cli qwen-code opencode; do setup_ok "$a"; done
    # Claude Code reads permission rules from the user's own local settings
    [ "$(jget .claude/settings.local.json 'd["permissions"]["allow"]')" = '["Bash(ls)", "mcp__txbox"]' ]
    [ "$(jget .claude/settings.json 'd.get("permissions")')" = null ]
    [ "$(jget .gemini/settings.json 'd["mcpServers"]["txbox"]["trust"]')" = true ]
    [ "$(jget .qwen/settings.json 'd["mcpServers"]["txbox"]["trust"]')" = true ]
    # opencode: the server, and its own shell tool off (no hook can reroute it)
    [ "$(jget opencode.json 'd["mcp"]["txbox"]')" = \
      "{\"command\": [\"$BIN\", \"mcp\", \"-C\", \"$P\"], \"enabled\": true, \"type\": \"local\"}" ]
    [ "$(jget opencode.json 'd["permission"]')" = '{"bash": "deny"}' ]
    setup_ok claude-code --user
    [ "$(jget "$H/.claude/settings.json" 'd["permissions"]["allow"]')" = '["mcp__txbox"]' ]
    for a in claude-code gemini-cli qwen-code opencode; do setup_ok "$a" --remove; done
    setup_ok claude-code --user --remove
    [ "$(jget .claude/settings.local.json d)" = "$(jget "$BATS_TEST_TMPDIR/local" d)" ]
    [ ! -e opencode.json ] && [ ! -e .gemini/settings.json ] && [ ! -e "$H/.claude/settings.json" ]
}

# what each CLI's hook runner does with the hook command (sh -c for Claude
# Code, bash -c for Gemini CLI and qwen-code), with the binary gone, not
# executable, or failing: exit status 2 (the status all three read as
# "block this call", Gemini CLI with a reason on stderr), never 0 or 127
@test "setup: the hook fails closed when txbox is removed, cannot run, or fails" {
    cd "$P"
    local agent file event sh copy input tool
    for agent in claude-code gemini-cli qwen-code; do
        case $agent in
        claude-code) file=.claude/settings.json event=PreToolUse sh=sh tool=Bash ;;
        gemini-cli) file=.gemini/settings.json event=BeforeTool sh=bash tool=run_shell_command ;;
        qwen-code) file=.qwen/settings.json event=PreToolUse sh=bash tool=run_shell_command ;;
        esac
        copy="$BATS_TEST_TMPDIR/bin-$agent/txbox"
        mkdir -p "$(dirname "$copy")"
        cp "$BIN" "$copy"
        setup_ok "$agent" --txbox "$copy"
        cmd=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hooks"][sys.argv[2]][0]["hooks"][0]["command"])' "$file" "$event")
        input='{"session_id":"s","hook_event_name":"'$event'","tool_name":"'$tool'","cwd":"'"$P"'","tool_input":{"command":"echo hi > f"}}'
        # in place: it judges (0, a decision)
        run --separate-stderr env CLAUDE_PROJECT_DIR="$P" GEMINI_PROJECT_DIR="$P" "$sh" -c "$cmd" <<<"$input"
        [ "$status" = 0 ] || [ "$agent" = qwen-code -a "$status" = 2 ] || fail "$agent in place -> $status: $stderr"
        # removed (make uninstall): 127 from the shell, turned into 2
        rm -f "$copy"
        run --separate-stderr env CLAUDE_PROJECT_DIR="$P" GEMINI_PROJECT_DIR="$P" "$sh" -c "$cmd" <<<"$input"
        [ "$status" = 2 ] || fail "$agent without its binary -> $status (must be 2): $stderr"
        [ -z "$output" ] || fail "$agent without its binary printed a decision: $output"
        [[ "$stderr" == *"txbox could not run (exit status 127)"* ]] || fail "$agent: $stderr"
        # not executable (126), and a binary that fails (crashes, exits 1)
        printf '#!/bin/sh\nexit 1\n' >"$copy"
        run --separate-stderr "$sh" -c "$cmd" <<<"$input"
        [ "$status" = 2 ] || fail "$agent: no permission to run -> $status"
        chmod +x "$copy"
        run --separate-stderr "$sh" -c "$cmd" <<<"$input"
        [ "$status" = 2 ] || fail "$agent: a failing binary -> $status"
        printf '#!/bin/sh\nkill -SEGV $$\n' >"$copy"
        run --separate-stderr "$sh" -c "$cmd" <<<"$input"
        [ "$status" = 2 ] || fail "$agent: a crashing binary -> $status"
        # txbox's own denial (2) passes as it is, without a second line
        printf '#!/bin/sh\necho "txbox hook: no" >&2; exit 2\n' >"$copy"
        run --separate-stderr "$sh" -c "$cmd" <<<"$input"
        [ "$status" = 2 ] && [ "$stderr" = "txbox hook: no" ] || fail "$agent: own denial -> $status: $stderr"
    done
}

@test "setup codex: the MCP server is required, so Codex does not start without txbox" {
    setup_ok codex
    grep -qx 'required = true' "$H/.codex/config.toml" || fail "$(cat "$H/.codex/config.toml")"
}

@test "setup registers the hook for SessionEnd too, and that entry ends the CLI's txbox session" {
    cd "$P"
    setup_ok claude-code
    [ "$(jget .claude/settings.json 'd["hooks"]["SessionEnd"]')" = \
      "[{\"hooks\": [{\"command\": \"$BIN hook claude-code$FC\", \"timeout\": 30, \"type\": \"command\"}]}]" ] ||
        fail "$(jget .claude/settings.json 'd["hooks"]')"
    setup_ok gemini-cli
    [ "$(jget .gemini/settings.json 'd["hooks"]["SessionEnd"]')" = \
      "[{\"hooks\": [{\"command\": \"$BIN hook gemini-cli$FC\", \"name\": \"txbox\", \"timeout\": 30000, \"type\": \"command\"}]}]" ] ||
        fail "$(jget .gemini/settings.json 'd["hooks"]')"
    # the entry, run as the CLI runs it when its session ends
    run --separate-stderr txbox_bin session start -C "$P" --id claude-code-s2
    [ "$status" = 0 ] || fail "$stderr"
    cmd=$(python3 -c 'import json; print(json.load(open(".claude/settings.json"))["hooks"]["SessionEnd"][0]["hooks"][0]["command"])')
    run --separate-stderr env CLAUDE_PROJECT_DIR="$P" sh -c "$cmd" <<<'{"session_id":"s2","hook_event_name":"SessionEnd","cwd":"'"$P"'","reason":"exit"}'
    [ "$status" = 0 ] || fail "$stderr"
    run --separate-stderr txbox_bin session list -C "$P"
    [[ "$output" != *claude-code-s2* ]] || fail "the session still runs: $output"
    # --remove takes both entries out
    setup_ok claude-code --remove
    setup_ok gemini-cli --remove
    [ ! -e .claude/settings.json ] && [ ! -e .gemini/settings.json ] || fail "entries left"
}
