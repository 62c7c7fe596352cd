#!/usr/bin/env bats
# txbox hook claude-code / gemini-cli / qwen-code: recorded pre-tool-use payloads
# (tests/mcp/payloads) replayed into the hook; the exact decision JSON and
# exit status each CLI expects (tests/mcp/hookcheck.py does the comparing).

bats_require_minimum_version 1.5.0
load ../lib/common

HOOKCHECK="$REPO_DIR/tests/mcp/hookcheck.py"

setup() {
    WS="$BATS_TEST_TMPDIR/ws"
    mkdir -p "$WS/src"
    printf 'hello\n' >"$WS/README"
    printf 'int x;\n' >"$WS/src/a.c"
}

# the sessions the rewritten commands started (from the inputs' session_id)
# end with the test: nothing of theirs is left running
teardown() {
    [ -d "$WS/.txbox" ] || return 0
    local id
    for id in $("$TXBOX" session list -C "$WS" 2>/dev/null | awk -F'\t' '$2 == "running" { print $1 }'); do
        "$TXBOX" session end -C "$WS" "$id" >/dev/null 2>&1 || true
    done
}

hook_case() {
    run --separate-stderr python3 "$HOOKCHECK" "$TXBOX" "$WS" "$@"
    [ "$status" = 0 ] || fail "$stderr"
}

@test "hook claude-code: a safe Bash command is allowed as it is" {
    hook_case claude-code bash-safe
}

@test "hook claude-code: an unsafe Bash command is denied with the reason and suggestion" {
    hook_case claude-code bash-unsafe
    [[ "$output" == *'"permissionDecision":"deny"'* ]] || fail "$output"
}

@test "hook claude-code: an uncertain Bash command is rewritten to run through txbox run" {
    snap pre "$WS"
    hook_case claude-code bash-uncertain
    assert_tree pre "$WS" # deciding changes nothing
    # Run the rewritten command the way the Bash tool would: it commits.
    cmd="$(printf '%s' "$output" | python3 -c 'import json,sys; print(json.load(sys.stdin)["hookSpecificOutput"]["updatedInput"]["command"])')"
    run --separate-stderr bash -c "cd '$WS' && $cmd"
    [ "$status" = 0 ] || fail "rewritten command failed: $stderr"
    [ -f "$WS/new.txt" ] || fail "new.txt was not committed"
    [ "$(cat "$WS/done.txt")" = "it's done" ] || fail "done.txt: $(cat "$WS/done.txt")"
    run "$TXBOX" log --json -C "$WS"
    [[ "$output" == *'"outcome":"committed"'* ]] || fail "no committed transaction in the log: $output"
}

@test "hook claude-code: an unparseable command is never allowed as safe" {
    hook_case claude-code bash-unparseable
    [[ "$output" == *'"updatedInput"'* ]] || fail "not routed through txbox run: $output"
}

@test "hook claude-code: other tools pass without a decision" {
    hook_case claude-code write
}

@test "hook claude-code: malformed JSON fails closed (exit 2)" {
    hook_case claude-code malformed
}

@test "hook claude-code: input without tool_input fails closed" {
    hook_case claude-code no-tool-input
}

@test "hook claude-code: a policy that does not load fails closed" {
    printf 'version: 1\nrules: [ {id: broken\n' >"$BATS_TEST_TMPDIR/bad.yaml"
    HOOK_EXPECT_BLOCK=1 hook_case claude-code bash-safe --policy "$BATS_TEST_TMPDIR/bad.yaml"
    [[ "$output" == *policy* ]] || fail "$output"
    HOOK_EXPECT_BLOCK=1 hook_case claude-code bash-safe --policy "$BATS_TEST_TMPDIR/missing.yaml"
}

@test "hook claude-code: the workspace comes from -C, then CLAUDE_PROJECT_DIR, then the input's cwd" {
    other="$(cd "$BATS_TEST_TMPDIR" && mkdir -p other && cd other && pwd -P)"
    ws="$(cd "$WS" && pwd -P)"
    payload="$(sed "s|@WS@|$ws|g" "$REPO_DIR/tests/mcp/payloads/claude-code/bash-uncertain.json")"
    # the command runs in the input's cwd, which must lie in the workspace
    inother="$(sed "s|@WS@|$other|g" "$REPO_DIR/tests/mcp/payloads/claude-code/bash-uncertain.json")"
    run --separate-stderr env -u CLAUDE_PROJECT_DIR "$TXBOX" hook claude-code -C "$other" <<<"$inother"
    [[ "$output" == *" run --session "*" -C '$other' --shell bash -c"* ]] || fail "-C not used: $output $stderr"
    run --separate-stderr env CLAUDE_PROJECT_DIR="$other" "$TXBOX" hook claude-code <<<"$inother"
    [[ "$output" == *" run --session "*" -C '$other' --shell bash -c"* ]] || fail "CLAUDE_PROJECT_DIR not used: $output $stderr"
    run --separate-stderr env -u CLAUDE_PROJECT_DIR "$TXBOX" hook claude-code <<<"$payload"
    [[ "$output" == *" run --session "*" -C '$ws' --shell bash -c"* ]] || fail "the input's cwd not used: $output $stderr"
    run --separate-stderr env CLAUDE_PROJECT_DIR="$BATS_TEST_TMPDIR/nonexistent" "$TXBOX" hook claude-code <<<"$payload"
    [ "$status" = 2 ] && [ -z "$output" ] || fail "a missing workspace must fail closed: $status $output $stderr"
}

@test "hook: wrong event, PowerShell, unknown agent and bad options all fail closed" {
    run --separate-stderr "$TXBOX" hook claude-code <<<'{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}'
    [ "$status" = 2 ] && [ -z "$output" ] && [[ "$stderr" == "txbox hook: "* ]] || fail "wrong event: $status $output $stderr"
    run --separate-stderr "$TXBOX" hook claude-code <<<'{"hook_event_name":"PreToolUse","tool_name":"PowerShell","tool_input":{"command":"Remove-Item -Recurse C:\\"}}'
    [ "$status" = 2 ] && [ -z "$output" ] || fail "PowerShell: $status $output $stderr"
    run --separate-stderr "$TXBOX" hook codex <<<'{}'
    [ "$status" = 2 ] && [[ "$stderr" == "txbox hook: "* ]] || fail "unknown agent: $status $stderr"
    run --separate-stderr "$TXBOX" hook claude-code --bogus <<<'{}'
    [ "$status" = 2 ] || fail "bad option: $status $stderr"
    run --separate-stderr "$TXBOX" hook claude-code </dev/null
    [ "$status" = 2 ] || fail "empty input: $status $stderr"
    run --separate-stderr "$TXBOX" hook claude-code <<<'{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls\u0000rm -rf ~"}}'
    [ "$status" = 2 ] || fail "NUL in command: $status $output $stderr"
}

@test "hook gemini-cli: safe shell command allowed" {
    hook_case gemini-cli shell-safe
}

@test "hook gemini-cli: unsafe shell command denied" {
    hook_case gemini-cli shell-unsafe
}

@test "hook gemini-cli: uncertain shell command rewritten through txbox run" {
    hook_case gemini-cli shell-uncertain
    cmd="$(printf '%s' "$output" | python3 -c 'import json,sys; print(json.load(sys.stdin)["hookSpecificOutput"]["tool_input"]["command"])')"
    run --separate-stderr bash -c "cd '$WS' && $cmd"
    [ "$status" = 0 ] && [ -f "$WS/new.txt" ] || fail "rewritten command: $status $stderr"
}

@test "hook gemini-cli: other tools pass ({})" {
    hook_case gemini-cli read-file
}

@test "hook gemini-cli: malformed JSON fails closed (exit 2)" {
    hook_case gemini-cli malformed
}

# ---- the host around the hook (tests/mcp/hookhost.py): what the CLI runs ----

HOOKHOST="$REPO_DIR/tests/mcp/hookhost.py"

# host AGENT TOOL TOOL_INPUT_JSON [EXTRA_TOP_LEVEL_JSON_FIELDS] -- [HOOK ARGS]
host() {
    local agent="$1" tool="$2" tin="$3" more="${4:-}"
    shift 4 || shift $#
    local event=PreToolUse
    [ "$agent" = gemini-cli ] && event=BeforeTool
    local ws
    ws="$(cd "$WS" && pwd -P)"
    local payload="{\"cwd\":\"$ws\",\"hook_event_name\":\"$event\",\"tool_name\":\"$tool\",\"tool_input\":$tin${more:+,$more}}"
    run --separate-stderr python3 "$HOOKHOST" "$TXBOX" "$agent" "$payload" "$@"
    [ "$status" = 0 ] || fail "hookhost: $stderr"
    HOST="$output"
}
hf() { printf '%s' "$HOST" | python3 -c "import json,sys; v=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

@test "hook: a safe command runs in the sandbox by default: secrets hidden, environment scrubbed" {
    export AWS_SECRET_ACCESS_KEY=s3cr3t-value
    echo hello >"$WS/notes.txt"
    host claude-code Bash '{"command":"cat notes.txt"}' ''
    [ "$(hf 'v["blocked"]')" = False ] || fail "$HOST"
    [[ "$(hf 'v["ran"]')" == *" run -C "*"--read-only"* ]] || fail "not routed through txbox run: $HOST"
    [ "$(hf 'v["stdout"]')" = "hello" ] || fail "$HOST"
    # a read of the environment is not safe (a secret read), and it runs
    # in the sandbox too, where the variable is gone
    host claude-code Bash '{"command":"echo \"key=$AWS_SECRET_ACCESS_KEY\""}' ''
    [[ "$(hf 'v["ran"]')" == *" run -C "* ]] || fail "not routed through txbox run: $HOST"
    [ "$(hf 'v["stdout"]')" = "key=" ] || fail "the secret reached the command: $HOST"
    host gemini-cli run_shell_command '{"command":"echo \"key=$AWS_SECRET_ACCESS_KEY\""}' ''
    [ "$(hf 'v["stdout"]')" = "key=" ] || fail "gemini: the secret reached the command: $HOST"
}

@test "hook: --trust-safe keeps the native allow for a safe command only" {
    host claude-code Bash '{"command":"ls"}' '' --trust-safe
    [ "$(hf 'v["ran"]')" = ls ] || fail "$HOST"
    [[ "$(hf 'v["decision"]["hookSpecificOutput"]["permissionDecisionReason"]')" == *trust-safe* ]] || fail "$HOST"
    host claude-code Bash '{"command":"touch t.txt"}' '' --trust-safe
    [[ "$(hf 'v["ran"]')" == *" run -C "* ]] || fail "an uncertain command ran natively: $HOST"
}

@test "hook: rewritten commands run under bash, as the policy read them" {
    host claude-code Bash '{"command":"echo {1..3} > f && [[ -f f ]] && cat <(cat f) > g"}' ''
    [ "$(hf 'v["status"]')" = 0 ] || fail "$HOST"
    [ "$(cat "$WS/f")" = "1 2 3" ] && [ "$(cat "$WS/g")" = "1 2 3" ] || fail "f: $(cat "$WS/f" 2>&1)"
    host gemini-cli run_shell_command '{"command":"echo {a,b} > h"}' ''
    [ "$(cat "$WS/h")" = "a b" ] || fail "gemini: $HOST"
}

@test "hook gemini-cli: the whole tool_input comes back and dir_path is the command's directory" {
    mkdir -p "$WS/sub"
    host gemini-cli run_shell_command '{"command":"echo d > d.txt","dir_path":"sub","description":"write d"}' ''
    [ "$(hf 'v["status"]')" = 0 ] || fail "$HOST"
    [ -f "$WS/sub/d.txt" ] && [ ! -e "$WS/d.txt" ] || fail "d.txt not in sub/: $(find "$WS" -name d.txt)"
    [ "$(hf 'v["decision"]["hookSpecificOutput"]["tool_input"]["description"]')" = "write d" ] || fail "$HOST"
    [ "$(hf 'v["decision"]["hookSpecificOutput"]["tool_input"]["dir_path"]')" = sub ] || fail "$HOST"
    # qwen-code and older Gemini CLI call it directory
    host gemini-cli run_shell_command '{"command":"echo e > e.txt","directory":"sub"}' ''
    [ -f "$WS/sub/e.txt" ] || fail "$HOST"
}

@test "hook: a command directory outside the workspace fails closed" {
    for d in /tmp .. sub/../.. .txbox; do
        mkdir -p "$WS/.txbox"
        host gemini-cli run_shell_command "{\"command\":\"touch x\",\"dir_path\":\"$d\"}" ''
        [ "$(hf 'v["hook_status"]')" = 2 ] || fail "dir_path $d: $HOST"
    done
    # Claude Code's shell has moved out of the workspace: its cwd
    ws="$(cd "$WS" && pwd -P)"
    run --separate-stderr env CLAUDE_PROJECT_DIR="$ws" "$TXBOX" hook claude-code \
        <<<'{"cwd":"/tmp","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf *"}}'
    [ "$status" = 2 ] && [ -z "$output" ] || fail "cwd outside: $status $output $stderr"
}

@test "hook qwen-code: nothing runs unjudged; what needs a rewrite is denied, pointing to MCP run" {
    hook_case qwen-code shell-unsafe
    HOOK_EXPECT_BLOCK=1 hook_case qwen-code shell-uncertain
    [[ "$output" == *"MCP tool \`run\`"* ]] || fail "$output"
    HOOK_EXPECT_BLOCK=1 hook_case qwen-code shell-safe
    hook_case qwen-code shell-safe --trust-safe
    # qwen-code's run_shell_command sent to the claude-code hook: judged, not passed
    host claude-code run_shell_command '{"command":"rm -rf ~","is_background":false}' ''
    [ "$(hf 'v["hook_status"]')" = 2 ] && [ "$(hf 'v["blocked"]')" = True ] || fail "$HOST"
    host claude-code run_shell_command '{"command":"touch q.txt","is_background":false}' ''
    [ "$(hf 'v["blocked"]')" = True ] && [ ! -e "$WS/q.txt" ] || fail "$HOST"
}

@test "hook: an unknown tool carrying a command fails closed; txbox's MCP tools and --pass-tool pass" {
    host claude-code mcp__other__exec '{"command":"rm -rf ~"}' ''
    [ "$(hf 'v["hook_status"]')" = 2 ] || fail "$HOST"
    host gemini-cli some_exec '{"cmd":"touch x"}' ''
    [ "$(hf 'v["hook_status"]')" = 2 ] || fail "$HOST"
    host claude-code mcp__txbox__run '{"command":"touch x"}' ''
    [ "$(hf 'v["hook_status"]')" = 0 ] && [ "$(hf 'v["decision"]')" = "{}" ] || fail "$HOST"
    host claude-code mcp__other__exec '{"command":"x"}' '' --pass-tool 'mcp__other__*'
    [ "$(hf 'v["hook_status"]')" = 0 ] || fail "$HOST"
}

@test "hook: plan mode runs nothing that may change state" {
    host claude-code Bash '{"command":"touch p.txt"}' '"permission_mode":"plan"'
    [ "$(hf 'v["blocked"]')" = True ] && [ ! -e "$WS/p.txt" ] || fail "$HOST"
    [[ "$(hf 'v["decision"]["hookSpecificOutput"]["permissionDecisionReason"]')" == *"plan mode"* ]] || fail "$HOST"
    host claude-code Bash '{"command":"cat README"}' '"permission_mode":"plan"'
    [ "$(hf 'v["stdout"]')" = hello ] && [[ "$(hf 'v["ran"]')" == *--read-only* ]] || fail "$HOST"
    host claude-code Bash '{"command":"rm -rf ~"}' '"permission_mode":"plan"'
    [ "$(hf 'v["blocked"]')" = True ] || fail "$HOST"
}

# ---- the CLI's session is a txbox session ----

HOOKSESSION="$REPO_DIR/tests/mcp/hooksession.py"

# hook_session AGENT SESSION_ID COMMAND...: one CLI session's calls
# (tests/mcp/hooksession.py); CALLS holds one JSON line per call
hook_session() {
    run --separate-stderr timeout 600 python3 "$HOOKSESSION" "$TXBOX" "$@"
    [ "$status" = 0 ] || fail "hooksession: $stderr"
    CALLS="$output"
}
# call N EXPR: EXPR (python, over v) of the Nth call (from 1)
call() {
    printf '%s\n' "$CALLS" | python3 -c "import json,sys; v=json.loads(sys.stdin.read().splitlines()[int(sys.argv[1])-1]); print(eval(sys.argv[2]))" "$1" "$2"
}

@test "hook claude-code: one CLI session is one txbox session: /tmp, the background, cd carry over" {
    local m="m$$x$RANDOM" ws
    ws="$(cd "$WS" && pwd -P)"
    hook_session claude-code "$WS" "sess-$m" \
        "printf 'print(6*7)\\n' >/tmp/helper-$m.py" \
        "python3 /tmp/helper-$m.py" \
        "python3 -m http.server 18082 --bind 127.0.0.1 >/dev/null 2>&1 &" \
        "for i in \$(seq 100); do curl -sf http://127.0.0.1:18082/README && exit 0; sleep 0.1; done; exit 7" \
        "mkdir -p sub && cd sub" \
        "echo made >here.txt && pwd"
    [ "$(call 2 'v["status"]')" = 0 ] && [ "$(call 2 'v["stdout"]')" = 42 ] ||
        fail "the helper written to /tmp by one command is not there for the next: $(call 2 'v')"
    [ "$(call 4 'v["status"]')" = 0 ] && [ "$(call 4 'v["stdout"]')" = hello ] ||
        fail "the server started in the background is not reached by the next command: $(call 4 'v')"
    [ "$(call 5 'v["cwd"]')" = "$ws/sub" ] || fail "the shell did not follow cd: $(call 5 'v')"
    [ "$(call 6 'v["stdout"]')" = "$ws/sub" ] && [ -f "$WS/sub/here.txt" ] ||
        fail "the next command did not run in sub: $(call 6 'v')"
    [[ "$(call 1 'v["ran"]')" == *" run --session 'claude-code-sess-$m' --cwd-file "* ]] || fail "$CALLS"
    # the session runs on, with the server; ending it kills the server and
    # says what its /tmp held
    run --separate-stderr "$TXBOX" session end -C "$WS" "claude-code-sess-$m"
    assert_status 0
    [[ "$stderr" == *"1 background process killed"* ]] || fail "$stderr"
    [[ "$stderr" == *"discarded: 1 file written outside the workspace: /tmp/helper-$m.py"* ]] || fail "$stderr"
}

@test "hook claude-code: the shell follows cd only within the workspace, and a failing command keeps its status" {
    local m="m$$x$RANDOM" ws
    ws="$(cd "$WS" && pwd -P)"
    hook_session claude-code "$WS" "sess-$m" "cd /tmp" "cd src && exit 3" "cd src"
    [ "$(call 1 'v["cwd"]')" = "$ws" ] || fail "followed cd out of the workspace: $(call 1 'v')"
    [ "$(call 2 'v["status"]')" = 3 ] && [ "$(call 2 'v["cwd"]')" = "$ws" ] || fail "$(call 2 'v')"
    [ "$(call 3 'v["status"]')" = 0 ] && [ "$(call 3 'v["cwd"]')" = "$ws/src" ] || fail "$(call 3 'v')"
}

@test "hook gemini-cli: one CLI session is one txbox session: a helper in /tmp runs in the next command" {
    local m="m$$x$RANDOM"
    hook_session gemini-cli "$WS" "gem-$m" "printf 'print(6*7)\\n' >/tmp/helper-$m.py" "python3 /tmp/helper-$m.py"
    [[ "$(call 1 'v["ran"]')" == *" run --session 'gemini-cli-gem-$m' -C "* ]] || fail "$CALLS"
    [ "$(call 2 'v["status"]')" = 0 ] && [ "$(call 2 'v["stdout"]')" = 42 ] || fail "$(call 2 'v')"
}

@test "hook: a CLI session id that is no valid txbox session id is hashed into one" {
    local ws long
    ws="$(cd "$WS" && pwd -P)"
    long="$(printf 'x%.0s' $(seq 1 300))"
    for sid in '../../etc/passwd' "a b;\$(id)" "$long" 'é'; do
        in="$(python3 -c 'import json,sys; print(json.dumps({"session_id": sys.argv[1], "cwd": sys.argv[2], "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "touch x"}}))' "$sid" "$ws")"
        run --separate-stderr env CLAUDE_PROJECT_DIR="$ws" "$TXBOX" hook claude-code <<<"$in"
        assert_status 0
        [[ "$output" =~ \ run\ --session\ \'claude-code-h[0-9a-f]{32}\'\  ]] || fail "session id for '$sid': $output"
    done
    # distinct ids, distinct sessions
    a="$(python3 -c 'import json,sys; print(json.dumps({"session_id": "a/b", "cwd": sys.argv[1], "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "touch x"}}))' "$ws")"
    b="${a/a\/b/a\/c}"
    run -0 env CLAUDE_PROJECT_DIR="$ws" "$TXBOX" hook claude-code <<<"$a"
    oa="$output"
    run -0 env CLAUDE_PROJECT_DIR="$ws" "$TXBOX" hook claude-code <<<"$b"
    [ "$output" != "$oa" ] || fail "two ids, one session: $output"
}

@test "hook: SessionEnd ends the CLI's txbox session: what it left running is killed" {
    local m="m$$x$RANDOM" nap=$((3000000 + RANDOM)) ws agent event
    ws="$(cd "$WS" && pwd -P)"
    napping() { ps -eo args | grep -qx "sleep $nap"; }
    for agent in claude-code gemini-cli; do
        hook_session "$agent" "$WS" "end-$m" "sleep $nap >/dev/null 2>&1 &"
        [ "$(call 1 'v["status"]')" = 0 ] && napping || fail "nothing left running: $CALLS"
        in="$(python3 -c 'import json,sys; print(json.dumps({"session_id": sys.argv[1], "cwd": sys.argv[2], "hook_event_name": "SessionEnd", "reason": "exit"}))' "end-$m" "$ws")"
        run --separate-stderr env CLAUDE_PROJECT_DIR="$ws" GEMINI_PROJECT_DIR="$ws" "$TXBOX" hook "$agent" <<<"$in"
        assert_status 0
        if [ "$agent" = gemini-cli ]; then [ "$output" = '{}' ] || fail "$output"; else [ -z "$output" ] || fail "$output"; fi
        [[ "$stderr" == *"session $agent-end-$m ended"* ]] || fail "$stderr"
        for _ in $(seq 50); do napping || break; sleep 0.1; done
        ! napping || fail "$agent: the session's background process outlived SessionEnd"
        run "$TXBOX" session list -C "$WS"
        [[ "$output" != *"$agent-end-$m"*running* ]] || fail "$output"
    done
    # a session that never ran: nothing to end, exit 0
    in='{"session_id":"never","cwd":"'"$ws"'","hook_event_name":"SessionEnd"}'
    run --separate-stderr env CLAUDE_PROJECT_DIR="$ws" "$TXBOX" hook claude-code <<<"$in"
    assert_status 0
}
