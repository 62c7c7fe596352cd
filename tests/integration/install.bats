#!/usr/bin/env bats
# make install / make uninstall into a DESTDIR, then the README's set-up
# for each agent CLI word for word with the installed binary, and the hooks
# and MCP servers run exactly as the written settings say. Root only: make
# install runs meson install in the build directory (root's).

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    is_root || skip "make install runs meson in the build directory, which is root's"
    BUILD_DIR="$(dirname "$(readlink -f "$TXBOX")")"
    D="$BATS_TEST_TMPDIR/dest"
    P="$BATS_TEST_TMPDIR/proj"
    export HOME="$BATS_TEST_TMPDIR/home"
    mkdir -p "$P" "$HOME"
    unset CODEX_HOME CLAUDE_CONFIG_DIR CLAUDE_PROJECT_DIR GEMINI_PROJECT_DIR
}

make_install() {
    run --separate-stderr make -s -C "$REPO_DIR" install INSTALL_BUILD="$BUILD_DIR" DESTDIR="$D"
    [ "$status" = 0 ] || fail "make install: $stderr"
    BIN="$D/usr/local/bin/txbox"
}

@test "make install: binary, a man page per subcommand, bash completion, docs; make uninstall removes them" {
    make_install
    [ -x "$BIN" ]
    "$BIN" --version
    for sub in txbox $("$BIN" --help | sed -nE 's/^  ([a-z][a-z-]*) .*/txbox-\1/p'); do
        page="$D/usr/local/share/man/man1/$sub.1"
        [ -f "$page" ] || fail "no man page $page"
    done
    run man -l "$D/usr/local/share/man/man1/txbox-setup.1"
    [[ "$output" == *"--dry-run"* ]] || fail "$output"
    [ -f "$D/usr/local/share/bash-completion/completions/txbox" ]
    [ -f "$D/usr/local/share/doc/txbox/docs/agents-setup.md" ]
    # the completion, loaded as bash-completion loads it, completes setup
    run bash --norc -c "PATH='$D/usr/local/bin':\$PATH; source '$D/usr/local/share/bash-completion/completions/txbox'
        COMP_WORDS=(txbox set); COMP_CWORD=1; _txbox; echo \${COMPREPLY[*]}
        COMP_WORDS=(txbox setup q); COMP_CWORD=2; _txbox; echo \${COMPREPLY[*]}"
    [ "$output" = $'setup\nqwen-code' ] || fail "$output"
    run --separate-stderr make -s -C "$REPO_DIR" uninstall INSTALL_BUILD="$BUILD_DIR" DESTDIR="$D"
    [ "$status" = 0 ] || fail "make uninstall: $stderr"
    left=$(find "$D" -type f -o -type l)
    [ -z "$left" ] || fail "left after uninstall: $left"
}

# the sh block under "### Set-up" in README.md
readme_setup() {
    awk '/^### Set-up/{on=1} on&&/^```sh/{code=1; next} code&&/^```/{exit} code' "$REPO_DIR/README.md"
}

# Calls one MCP server as the settings describe it (command, args) with
# tools/list and a run; prints the tool count and the run's outcome.
mcp_call() {
    python3 - "$@" <<'EOF'
import json, subprocess, sys
cmd = json.loads(sys.argv[1])
reqs = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
     "params": {"name": "run", "arguments": {"command": sys.argv[2]}}},
]
p = subprocess.run(cmd, input="".join(json.dumps(r) + "\n" for r in reqs), capture_output=True,
                   text=True, timeout=120)
ans = {m.get("id"): m for m in map(json.loads, p.stdout.splitlines())}
# the answer: a line for the model, then compact JSON
print(len(ans[2]["result"]["tools"]), json.loads(ans[3]["result"]["content"][0]["text"].split("\n", 1)[1])["outcome"])
EOF
}

@test "README set-up, word for word after make install: each CLI's settings name the installed txbox, hooks and servers work" {
    make_install
    [ "$(readme_setup | grep -c '^txbox setup ')" = 5 ] || fail "$(readme_setup)"
    cd "$P"
    while read -r line; do
        run --separate-stderr env PATH="$D/usr/local/bin:$PATH" bash -c "$line"
        [ "$status" = 0 ] || fail "$line: $stderr"
    done < <(readme_setup)
    # the hooks, as each CLI runs them: a destructive command is stopped
    py='import json,sys; d=json.load(open(sys.argv[1])); print(d["hooks"][sys.argv[2]][0]["hooks"][0]["command"])'
    cmd=$(python3 -c "$py" .claude/settings.json PreToolUse)
    [[ "$cmd" == "$BIN hook claude-code || "* ]] || fail "$cmd"
    run --separate-stderr env CLAUDE_PROJECT_DIR="$P" sh -c "$cmd" \
        <<<'{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","cwd":"'"$P"'","tool_input":{"command":"rm -rf ~"}}'
    [ "$status" = 0 ] && [[ "$output" == *'"permissionDecision":"deny"'* ]] || fail "$status $output $stderr"
    cmd=$(python3 -c "$py" .gemini/settings.json BeforeTool)
    run --separate-stderr env GEMINI_PROJECT_DIR="$P" sh -c "$cmd" \
        <<<'{"session_id":"s","hook_event_name":"BeforeTool","tool_name":"run_shell_command","cwd":"'"$P"'","tool_input":{"command":"rm -rf ~"}}'
    [ "$status" = 0 ] && [[ "$output" == *'"decision":"deny"'* ]] || fail "$status $output $stderr"
    cmd=$(python3 -c "$py" .qwen/settings.json PreToolUse)
    [[ "$cmd" == "$BIN hook qwen-code || "* ]] || fail "$cmd"
    run --separate-stderr sh -c "$cmd" \
        <<<'{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"run_shell_command","cwd":"'"$P"'","tool_input":{"command":"rm -rf ~"}}'
    # denied, or blocked (status 2): never let through
    [ "$status" = 2 ] || { [ "$status" = 0 ] && [[ "$output" == *'"deny"'* ]]; } || fail "$status $output $stderr"
    # the MCP servers, as each CLI starts them
    spec='import json,sys; e=json.load(open(sys.argv[1]))["mcpServers"]["txbox"]; print(json.dumps([e["command"]]+e["args"]))'
    n=0
    for f in .mcp.json .gemini/settings.json .qwen/settings.json; do
        argv=$(python3 -c "$spec" "$f")
        [[ "$argv" == "[\"$BIN\", \"mcp\", \"-C\", \"$P\"]" ]] || fail "$f: $argv"
        n=$((n + 1))
        run --separate-stderr mcp_call "$argv" "echo $n > from-mcp-$n"
        [ "$output" = "13 committed" ] || fail "$f: $output $stderr"
        [ "$(cat "from-mcp-$n")" = "$n" ]
    done
    argv=$(python3 -c 'import tomllib,json,sys; e=tomllib.load(open(sys.argv[1],"rb"))["mcp_servers"]["txbox"]; assert e["default_tools_approval_mode"]=="approve" and e["tool_timeout_sec"]==600; print(json.dumps([e["command"]]+e["args"]))' "$HOME/.codex/config.toml")
    [ "$argv" = "[\"$BIN\", \"mcp\"]" ] || fail "$argv"
    run --separate-stderr mcp_call "$argv" "echo codex > from-codex"
    [ "$output" = "13 committed" ] || fail "codex: $output $stderr"
    [ "$(cat from-codex)" = codex ]
    argv=$(python3 -c 'import json,sys; e=json.load(open(sys.argv[1])); assert e["permission"]["bash"]=="deny"; print(json.dumps(e["mcp"]["txbox"]["command"]))' opencode.json)
    [[ "$argv" == "[\"$BIN\", \"mcp\", \"-C\", \"$P\"]" ]] || fail "opencode.json: $argv"
    run --separate-stderr mcp_call "$argv" "echo opencode > from-opencode"
    [ "$output" = "13 committed" ] || fail "opencode: $output $stderr"
    [ "$(cat from-opencode)" = opencode ]
}
