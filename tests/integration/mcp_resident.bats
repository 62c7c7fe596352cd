#!/usr/bin/env bats
# txbox mcp runs `run` in its own process (src/resident.c): the same
# answers as a child `txbox run` gave, nothing left behind per call, the
# workspace and the policy re-read per call, and a server killed mid-run or
# mid-commit recovered like a killed `txbox run`.

bats_require_minimum_version 1.5.0
load ../lib/common

RESIDENT="$REPO_DIR/tests/mcp/resident.py"

setup() {
    WS="$BATS_TEST_TMPDIR/ws"
    mkdir -p "$WS/src"
    printf 'hello\n' >"$WS/README"
    printf 'int x;\n' >"$WS/src/a.c"
}

resident_case() {
    run --separate-stderr timeout 900 python3 "$RESIDENT" "$TXBOX" "$WS" "$@"
    [ "$status" = 0 ] || fail "$stderr" "$output"
    [ -z "$output" ] || echo "# $output" >&3
}

@test "mcp resident: every answer is the one a child txbox run gave (--spawn)" { resident_case same; }
@test "mcp resident: 200 runs leave no descriptor, thread, child or mount behind" { resident_case leak 200; }
@test "mcp resident: undo, run and a removed .txbox between calls are seen; policy edits are read" {
    resident_case state
}
@test "mcp resident: progress carries the output of a run in the server's process" { resident_case progress; }
@test "mcp resident: a run while another runs in the process is not queued behind it" {
    resident_case concurrent
}

# the requests of one session that runs $1 (as JSON lines)
session() {
    python3 -c '
import json, sys
print(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
      "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
print(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
      "params": {"name": "run", "arguments": {"command": sys.argv[1]}}}))' "$1"
}

@test "mcp resident: SIGKILL to the server mid-command leaves no process; the next open rolls back" {
    snap pre "$WS"
    local r="$RANDOM$RANDOM" # a nap of its own: the other mode may run this test now
    mcp_running "^sleep 318[.]$r\$" "$(session "echo x > partial.txt; sleep 318.$r")"
    kill -KILL "$SRV"
    wait "$SRV" || true
    exec 7>&-
    for _ in $(seq 1 50); do
        pgrep -f "partial.txt; sleep 318[.]$r|^sleep 318[.]$r\$" >/dev/null || break
        sleep 0.1
    done
    ! pgrep -f "partial.txt; sleep 318[.]$r|^sleep 318[.]$r\$" >/dev/null || fail "the command outlived the server"
    run --separate-stderr "$TXBOX" recover -C "$WS"
    [ "$status" = 0 ] || fail "recover: $stderr"
    assert_tree pre "$WS"
}

@test "mcp resident: a server killed at each step of a commit leaves the pre- or the post-state" {
    change='for i in 1 2 3 4; do echo new$i > f$i; done; rm f5; mkdir nd; echo n > nd/x'
    for i in 1 2 3 4 5; do echo "old$i" >"$WS/f$i"; done
    make_ref "$WS" "$BATS_TEST_TMPDIR/ref" "$change"
    pre="$("$TREESUM" "$WS")"
    post="$("$TREESUM" "$BATS_TEST_TMPDIR/ref")"
    session "$change" >"$BATS_TEST_TMPDIR/req"
    errs=() kills=0
    for n in $(seq 1 2 60); do
        w="$BATS_TEST_TMPDIR/w"
        rm -rf "$w"
        cp -a "$WS" "$w"
        run --separate-stderr env TXBOX_FAULT="any:$n:kill" timeout 120 "$TXBOX" mcp -C "$w" <"$BATS_TEST_TMPDIR/req"
        [ "$status" = 0 ] && break
        [ "$status" = 137 ] || { errs+=("any:$n:kill: server status $status: $(clip "$stderr")"); continue; }
        kills=$((kills + 1))
        run --separate-stderr "$TXBOX" recover -C "$w"
        [ "$status" = 0 ] || { errs+=("any:$n:kill: recover: status $status: $(clip "$stderr")"); continue; }
        now="$("$TREESUM" "$w")"
        [ "$now" = "$pre" ] || [ "$now" = "$post" ] || errs+=("any:$n:kill: neither the pre- nor the post-state")
        run --separate-stderr "$TXBOX" run -C "$w" -c 'echo next > f1'
        [ "$status" = 0 ] && [ "$(cat "$w/f1")" = next ] ||
            errs+=("any:$n:kill: the next run: status $status: $(clip "$stderr")")
    done
    echo "# the server was killed at $kills fault points" >&3
    [ "${#errs[@]}" = 0 ] || fail "${errs[@]}"
    [ "$kills" -ge 5 ] || fail "only $kills fault points were reached"
}
