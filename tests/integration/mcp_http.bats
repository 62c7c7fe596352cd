#!/usr/bin/env bats
# txbox mcp --listen: MCP over Streamable HTTP. The stdio conformance suite
# again through the official SDK's HTTP client (tests/mcp/conformance.mjs
# --http); what HTTP adds, case by case (tests/mcp/http.mjs): the bearer
# token, sessions and DELETE, named workspaces, resumption, Origin, caps,
# idle expiry, a stop, TLS with a certificate made here; what the server
# refuses to start with; 50 clients at once (tests/mcp/load.mjs); and
# `txbox log --follow --json`, the audit log as a stream of JSON lines.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    WS="$BATS_TEST_TMPDIR/ws"
    mkdir -p "$WS/src"
    printf 'hello\n' >"$WS/README"
    printf 'int x;\n' >"$WS/src/a.c"
    command -v node >/dev/null || need "node is not installed"
    [ -f "$REPO_DIR/node_modules/@modelcontextprotocol/sdk/package.json" ] ||
        fail "@modelcontextprotocol/sdk is missing: run npm ci --ignore-scripts (make deps)"
}

http_case() {
    run timeout 600 node "$REPO_DIR/tests/mcp/http.mjs" "$TXBOX" "$WS" "$@"
    printf '%s\n' "$output"
    [ "$status" = 0 ] || fail "http case $1 failed (status $status)"
    [[ "$output" == *" passed, 0 failed"* ]] || fail "no summary line"
}

@test "mcp http: the conformance suite through the SDK's Streamable HTTP client" {
    run timeout 600 node "$REPO_DIR/tests/mcp/conformance.mjs" "$TXBOX" "$WS" --http
    printf '%s\n' "$output"
    [ "$status" = 0 ] || fail "conformance failures (status $status)"
    [[ "$output" == *" passed, 0 failed"* ]] || fail "no summary line"
}

@test "mcp http: a wrong or missing token is refused (401, Bearer challenge); a new token file takes over" {
    http_case auth
}
@test "mcp http: sessions: DELETE ends one and aborts its open transaction; its id then gets 404" {
    http_case sessions
}
@test "mcp http: DELETE while a command runs cancels it, which rolls back" { http_case delete_running; }
@test "mcp http: two named workspaces, each its own; a session does not cross" {
    mkdir -p "$BATS_TEST_TMPDIR/ws2"
    http_case workspaces "$BATS_TEST_TMPDIR/ws2"
}
@test "mcp http: one MCP session is one txbox session, not shared with another; DELETE ends it" {
    run timeout 600 node "$REPO_DIR/tests/mcp/session.mjs" "$TXBOX" "$WS" http
    printf '%s\n' "$output"
    [ "$status" = 0 ] || fail "session failures (status $status)"
    [[ "$output" == *" passed, 0 failed"* ]] || fail "no summary line"
}
@test "mcp http: a broken stream resumes with GET and Last-Event-ID" { http_case resume; }
@test "mcp http: the SDK's client resumes a stream cut under it and gets its answer" { http_case resume_sdk; }
@test "mcp http: an Origin not allowed gets 403; an allowed one gets CORS" { http_case origin; }
@test "mcp http: caps: body, headers, media types, versions, batches, sessions, calls per session" {
    http_case limits
}
@test "mcp http: an idle session ends and its transaction is aborted" { http_case idle; }
@test "mcp http: SIGTERM answers the running call (rolled back) and exits 0" { http_case stop; }

@test "mcp http: TLS with a self-signed certificate made here" {
    command -v openssl >/dev/null || need "openssl is not installed"
    local d="$BATS_TEST_TMPDIR/tls"
    mkdir -p "$d"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/key.pem" \
        -out "$d/cert.pem" -days 1 -subj /CN=localhost \
        -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null || fail "openssl could not make a certificate"
    NODE_EXTRA_CA_CERTS="$d/cert.pem" http_case tls "$d/cert.pem" "$d/key.pem"
    # the same client without the certificate's authority refuses the server
    run timeout 120 node "$REPO_DIR/tests/mcp/http.mjs" "$TXBOX" "$WS" tls "$d/cert.pem" "$d/key.pem"
    [ "$status" != 0 ] || fail "a client that does not trust the certificate went on: $output"
}

# start_refused OPTION...: the server refuses to start: status 125, one
# line on stderr (set in $stderr), nothing on stdout
start_refused() {
    run --separate-stderr timeout 30 "$TXBOX" mcp "$@"
    [ "$status" = 125 ] || fail "status $status, not 125: $stderr" "$output"
    [ -z "$output" ] || fail "something on stdout: $output"
    [ "$(printf '%s\n' "$stderr" | wc -l)" = 1 ] || fail "not one line: $stderr"
}

@test "mcp http: refused at start: plain HTTP off loopback, no token, a short token, lone options" {
    local tok="$BATS_TEST_TMPDIR/token"
    printf 'abcdefghijklmnopqrstuvwxyz0123456789\n' >"$tok"
    start_refused --listen 0.0.0.0:0 --token-file "$tok" -C "$WS"
    [[ "$stderr" == *"not a loopback address"*"--tls-cert"*"--allow-plain-http"* ]] || fail "$stderr"
    start_refused --listen 127.0.0.1:0 -C "$WS"
    [[ "$stderr" == *"--token-file"* ]] || fail "$stderr"
    printf 'short\n' >"$BATS_TEST_TMPDIR/short"
    start_refused --listen 127.0.0.1:0 --token-file "$BATS_TEST_TMPDIR/short" -C "$WS"
    [[ "$stderr" == *"no valid bearer token"* ]] || fail "$stderr"
    start_refused --listen 127.0.0.1:0 --token-file "$BATS_TEST_TMPDIR/missing" -C "$WS"
    start_refused --token-file "$tok" -C "$WS"
    [[ "$stderr" == *"need --listen"* ]] || fail "$stderr"
    start_refused --workspace a="$WS"
    start_refused --listen 127.0.0.1:0 --token-file "$tok" --workspace "../x=$WS"
    start_refused --listen 127.0.0.1:0 --token-file "$tok" --workspace "a=$WS" --workspace "a=$WS"
    start_refused --listen 127.0.0.1:0 --token-file "$tok" -C "$WS" --tls-cert "$tok"
    [[ "$stderr" == *"go together"* ]] || fail "$stderr"
    start_refused --listen 127.0.0.1:0 --token-file "$tok" -C "$WS" --tls-cert "$tok" --tls-key "$tok"
    [[ "$stderr" == *"not PEM"* ]] || fail "$stderr"
    start_refused --listen 127.0.0.1 --token-file "$tok" -C "$WS"
    start_refused --listen '[::1:0' --token-file "$tok" -C "$WS"
    start_refused --listen 127.0.0.1:0 --token-file "$tok" -C "$WS" --max-sessions 0
}

@test "mcp http: --allow-plain-http serves a non-loopback address, and says where" {
    local tok="$BATS_TEST_TMPDIR/token"
    printf 'abcdefghijklmnopqrstuvwxyz0123456789\n' >"$tok"
    "$TXBOX" mcp --listen 0.0.0.0:0 --token-file "$tok" --allow-plain-http -C "$WS" \
        >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" &
    local pid=$!
    local i
    for i in $(seq 100); do
        [ -s "$BATS_TEST_TMPDIR/out" ] && break
        sleep 0.1
    done
    kill -TERM "$pid"
    wait "$pid" || fail "exit status $?" "$(cat "$BATS_TEST_TMPDIR/err")"
    grep -q '"event":"listening","address":"0.0.0.0:[0-9]*","scheme":"http"' "$BATS_TEST_TMPDIR/out" ||
        fail "$(cat "$BATS_TEST_TMPDIR/out")"
}

@test "mcp http: 50 clients at once on one workspace: nothing lost, memory bounded, nothing left behind" {
    run timeout 1200 node "$REPO_DIR/tests/mcp/load.mjs" "$TXBOX" "$WS" 50 3
    printf '%s\n' "$output" | grep -v '^txbox mcp: '
    [ "$status" = 0 ] || fail "load failures (status $status)"
    [[ "$output" == *" passed, 0 failed"* ]] || fail "no summary line"
    printf '%s\n' "$output" | grep '^# load:' >&3
}

@test "log --follow --json: rows as JSON lines as they are written, out of order ones too" {
    "$TXBOX" run -C "$WS" -c 'echo one > one.txt' 2>/dev/null
    "$TXBOX" log --follow --json -C "$WS" >"$BATS_TEST_TMPDIR/follow" 2>"$BATS_TEST_TMPDIR/follow.err" &
    local pid=$!
    # a long command takes its id first and ends last
    "$TXBOX" run -C "$WS" -c 'sleep 2; echo two > two.txt' 2>/dev/null &
    local slow=$!
    sleep 0.5
    "$TXBOX" run -C "$WS" -c 'echo three > three.txt' 2>/dev/null
    "$TXBOX" run -C "$WS" -c 'echo x > x.txt; exit 4' 2>/dev/null || true
    wait "$slow"
    local i
    for i in $(seq 100); do
        [ "$(wc -l <"$BATS_TEST_TMPDIR/follow")" -ge 4 ] && break
        sleep 0.1
    done
    kill -TERM "$pid"
    wait "$pid" || fail "log --follow exited $? on SIGTERM" "$(cat "$BATS_TEST_TMPDIR/follow.err")"
    run python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(" ".join(r["tx"] + ":" + r["outcome"] for r in rows))
' "$BATS_TEST_TMPDIR/follow"
    [ "$status" = 0 ] || fail "not JSON lines: $(cat "$BATS_TEST_TMPDIR/follow")"
    [ "$output" = "1:committed 3:committed 4:rolled_back 2:committed" ] || fail "rows: $output"
    [ ! -s "$BATS_TEST_TMPDIR/follow.err" ] || fail "on stderr: $(cat "$BATS_TEST_TMPDIR/follow.err")"
}

@test "log --follow: waits for a workspace without a log, --since and -n pick the first rows" {
    local empty="$BATS_TEST_TMPDIR/empty"
    mkdir -p "$empty"
    "$TXBOX" log --follow --json -C "$empty" >"$BATS_TEST_TMPDIR/f1" 2>>"$BATS_TEST_TMPDIR/ferr" &
    local pid=$!
    sleep 1
    "$TXBOX" run -C "$empty" -c 'echo a > a.txt' 2>/dev/null
    local i
    for i in $(seq 100); do
        grep -q '"tx":"1"' "$BATS_TEST_TMPDIR/f1" && break
        sleep 0.1
    done
    kill -TERM "$pid"
    wait "$pid" || true
    grep -q '"tx":"1".*"outcome":"committed"' "$BATS_TEST_TMPDIR/f1" || fail "$(cat "$BATS_TEST_TMPDIR/f1")"
    "$TXBOX" run -C "$empty" -c 'echo b > b.txt' 2>/dev/null
    "$TXBOX" log --follow -n 1 --json -C "$empty" >"$BATS_TEST_TMPDIR/f2" 2>>"$BATS_TEST_TMPDIR/ferr" &
    pid=$!
    sleep 1
    kill -TERM "$pid"
    wait "$pid" || true
    [ "$(wc -l <"$BATS_TEST_TMPDIR/f2")" = 1 ] && grep -q '"tx":"2"' "$BATS_TEST_TMPDIR/f2" ||
        fail "-n 1: $(cat "$BATS_TEST_TMPDIR/f2")"
    "$TXBOX" log --follow --since 4102444800 -C "$empty" >"$BATS_TEST_TMPDIR/f3" 2>>"$BATS_TEST_TMPDIR/ferr" &
    pid=$!
    sleep 0.7
    "$TXBOX" run -C "$empty" -c 'echo c > c.txt' 2>/dev/null
    for i in $(seq 100); do
        grep -q 'c.txt' "$BATS_TEST_TMPDIR/f3" && break
        sleep 0.1
    done
    kill -TERM "$pid"
    wait "$pid" || true
    [ "$(wc -l <"$BATS_TEST_TMPDIR/f3")" = 1 ] && grep -q '^3 .*committed .*echo c > c.txt' "$BATS_TEST_TMPDIR/f3" ||
        fail "--since in the future, then a new row (text): $(cat "$BATS_TEST_TMPDIR/f3")"
    [ ! -s "$BATS_TEST_TMPDIR/ferr" ] || fail "on stderr: $(cat "$BATS_TEST_TMPDIR/ferr")"
}
