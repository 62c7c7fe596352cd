#!/usr/bin/env bats
# txbox mcp: conformance with the official MCP TypeScript SDK client
# (tests/mcp/conformance.mjs) and protocol robustness with raw bytes
# (tests/mcp/rawclient.py). Every raw-byte session must leave the
# workspace exactly as it was.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    WS="$BATS_TEST_TMPDIR/ws"
    mkdir -p "$WS/src"
    printf 'hello\n' >"$WS/README"
    printf 'int x;\n' >"$WS/src/a.c"
}

@test "mcp: conformance with the official TypeScript SDK client" {
    command -v node >/dev/null || need "node is not installed"
    [ -f "$REPO_DIR/node_modules/@modelcontextprotocol/sdk/package.json" ] ||
        fail "@modelcontextprotocol/sdk is missing: run npm ci --ignore-scripts (make deps)"
    run timeout 600 node "$REPO_DIR/tests/mcp/conformance.mjs" "$TXBOX" "$WS"
    printf '%s\n' "$output"
    [ "$status" = 0 ] || fail "conformance failures (status $status)"
    [[ "$output" == *" passed, 0 failed"* ]] || fail "no summary line"
}

@test "mcp: what the model is shown: a line first, then compact JSON; no structuredContent" {
    command -v node >/dev/null || need "node is not installed"
    run timeout 600 node "$REPO_DIR/tests/mcp/answers.mjs" "$TXBOX" "$WS"
    printf '%s\n' "$output"
    [ "$status" = 0 ] || fail "answer failures (status $status)"
    [[ "$output" == *" passed, 0 failed"* ]] || fail "no summary line"
}

@test "mcp: one connection is one session: /tmp, the background, late writes carry over; its end kills what it left" {
    command -v node >/dev/null || need "node is not installed"
    run timeout 600 node "$REPO_DIR/tests/mcp/session.mjs" "$TXBOX" "$WS" stdio
    printf '%s\n' "$output"
    [ "$status" = 0 ] || fail "session failures (status $status)"
    [[ "$output" == *" passed, 0 failed"* ]] || fail "no summary line"
}

raw_case() {
    snap pre "$WS"
    run --separate-stderr timeout 300 python3 "$REPO_DIR/tests/mcp/rawclient.py" "$TXBOX" "$WS" "$1"
    [ "$status" = 0 ] || fail "$stderr"
    assert_tree pre "$WS"
}

@test "mcp raw: invalid JSON gets -32700 and the session goes on" { raw_case invalid_json; }
@test "mcp raw: a batch gets -32600 (batching is not in MCP 2025-06-18+)" { raw_case batch; }
@test "mcp raw: a 10 MB line gets -32600 without being buffered, then a ping works" { raw_case long_line; }
@test "mcp raw: binary garbage gets only id-null errors" { raw_case binary_garbage; }
@test "mcp raw: an unknown method gets -32601" { raw_case unknown_method; }
@test "mcp raw: requests before initialize get -32600 (ping is allowed)" { raw_case before_initialize; }
@test "mcp raw: EOF in the middle of a message: -32700, clean exit" { raw_case eof_mid_message; }
@test "mcp raw: null, object and boolean ids, wrong jsonrpc version" { raw_case bad_ids; }
@test "mcp raw: invalid params get -32602, a second initialize -32600" { raw_case invalid_params; }
@test "mcp raw: version negotiation keeps 2024-11-05" { raw_case versions; }
@test "mcp raw: an unknown version is answered with 2025-11-25" { raw_case unknown_version; }
@test "mcp raw: before 2025-11-25, bad tool arguments are -32602" { raw_case old_revision_invalid_args; }
@test "mcp raw: empty input: no output, exit 0" { raw_case empty_input; }

@test "mcp: SIGTERM to the server cancels a running command, which rolls back" {
    snap pre "$WS"
    # the sandboxed shell has started its sleep: the transaction is open
    # (a nap of its own: the other mode's run of this test may be running)
    local r="$RANDOM$RANDOM" nap
    nap="317.$r"
    mcp_running "^sleep 317[.]$r\$" \
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' \
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"command":"echo x > partial.txt; sleep '"$nap"'"}}}'
    kill -TERM "$SRV"
    wait "$SRV"
    rc=$?
    exec 7>&-
    [ "$rc" = 0 ] || fail "server exit status $rc" "$(cat "$BATS_TEST_TMPDIR/err")"
    assert_tree pre "$WS"
    run "$TXBOX" log --json -C "$WS"
    [[ "$output" == *'"outcome":"rolled_back"'* ]] || fail "not logged as rolled back: $output"
    ! pgrep -f "partial.txt; sleep 317[.]$r|^sleep 317[.]$r\$" >/dev/null || fail "the command is still running"
}

# session_tx HOW [OPTION...]: a session that begins a transaction, stages a
# command and ends by HOW (eof, sigterm) without committing; sets SESSION_TX.
session_tx() {
    run --separate-stderr timeout 120 python3 "$REPO_DIR/tests/mcp/txsession.py" "$TXBOX" "$WS" "$@"
    [ "$status" = 0 ] || fail "session failed (status $status)" "$output" "$stderr"
    SESSION_TX="$(printf '%s' "$output" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tx"])')"
    [ "$(printf '%s' "$output" | python3 -c 'import json,sys; print(json.load(sys.stdin)["server_status"])')" = 0 ] ||
        fail "server exit status not 0: $output"
}

@test "mcp: a transaction begun in the session and left open is aborted when the client disconnects" {
    snap pre "$WS"
    session_tx eof
    [[ "$output" == *"transaction $SESSION_TX begun in this session and never committed: aborted"* ]] ||
        fail "not reported: $output"
    run --separate-stderr "$TXBOX" status -C "$WS"
    [ "$output" = "no open transactions" ] || fail "still open: $output"
    assert_tree pre "$WS"
}

@test "mcp: without --structured too, the transaction left open is aborted at the end" {
    snap pre "$WS"
    session_tx eof --plain
    [[ "$output" == *"transaction $SESSION_TX begun in this session and never committed: aborted"* ]] ||
        fail "not reported: $output"
    run --separate-stderr "$TXBOX" status -C "$WS"
    [ "$output" = "no open transactions" ] || fail "still open: $output"
    assert_tree pre "$WS"
}

@test "mcp: SIGTERM to the server also aborts the session's open transaction" {
    snap pre "$WS"
    session_tx sigterm
    run --separate-stderr "$TXBOX" status -C "$WS"
    [ "$output" = "no open transactions" ] || fail "still open: $output"
    assert_tree pre "$WS"
}

@test "mcp: --keep-transactions leaves it open for txbox commit" {
    snap pre "$WS"
    session_tx eof --keep-transactions
    [[ "$output" == *"left open (--keep-transactions)"* ]] || fail "not reported: $output"
    assert_tree pre "$WS"
    run --separate-stderr "$TXBOX" status --json -C "$WS"
    [[ "$output" == *"\"tx\":\"$SESSION_TX\""* ]] || fail "not open: $output"
    run --separate-stderr "$TXBOX" commit -C "$WS" "$SESSION_TX"
    assert_status 0
    [ "$(cat "$WS/staged.txt")" = staged ] || fail "the staged command was not committed"
}

front_case() {
    command -v node >/dev/null || need "node is not installed"
    run timeout 300 node "$REPO_DIR/tests/mcp/front.mjs" "$TXBOX" "$WS" "$1"
    printf '%s\n' "$output"
    [ "$status" = 0 ] || fail "front case $1 failed"
}

@test "mcp: every structured result is also a TextContent block of JSON, after the summary" { front_case textjson; }
@test "mcp: tool annotations: run/commit/undo/rollback destructive, the readers read-only" { front_case annotations; }
@test "mcp: notifications/progress with recent output keep a resetTimeoutOnProgress client alive" { front_case progress; }
@test "mcp: run runs bash, as the policy reads it" { front_case bash; }
