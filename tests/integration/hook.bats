#!/usr/bin/env bats
# txbox hook claude-code / gemini-cli: recorded pre-tool-use payloads
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
    run --separate-stderr env -u CLAUDE_PROJECT_DIR "$TXBOX" hook claude-code -C "$other" <<<"$payload"
    [[ "$output" == *"run -C '$other' -c"* ]] || fail "-C not used: $output $stderr"
    run --separate-stderr env CLAUDE_PROJECT_DIR="$other" "$TXBOX" hook claude-code <<<"$payload"
    [[ "$output" == *"run -C '$other' -c"* ]] || fail "CLAUDE_PROJECT_DIR not used: $output $stderr"
    run --separate-stderr env -u CLAUDE_PROJECT_DIR "$TXBOX" hook claude-code <<<"$payload"
    [[ "$output" == *"run -C '$ws' -c"* ]] || fail "the input's cwd not used: $output $stderr"
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
