#!/usr/bin/env bats
# Compensations for external effects (issue 9, sagas): a policy rule that
# lets a command reach a service declares how to undo what it did there;
# txbox records each effect with its rendered compensation, and runs the
# compensations newest first when the work is undone (abort, rollback past
# the command, a failing command). The service is tests/lib/saga_server.py
# on loopback, which logs every create and delete it gets; the commands
# reach it because their rules say `network: true` and name it in
# `domains:`: through txbox's proxy, as svc.txbox.test, which test builds
# resolve to 127.0.0.1 (TXBOX_TEST_RESOLVE; the proxy refuses loopback
# otherwise). Compensations get the domains of the rule that declared them.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    need_curl
    new_ws
    SRV="$BATS_TEST_TMPDIR/srv"
    mkdir -p "$SRV"
    : >"$SRV/calls"
    python3 "$TESTS_LIB/saga_server.py" "$SRV/calls" "$SRV/port" </dev/null >"$SRV/out" 2>&1 3>&- &
    SRV_PID=$!
    local i
    for i in $(seq 100); do
        [ -s "$SRV/port" ] && break
        sleep 0.05
    done
    [ -s "$SRV/port" ] || fail "the test service did not start: $(cat "$SRV/out")"
    export PORT="$(cat "$SRV/port")"
    URL="http://svc.txbox.test:$PORT"
    export TXBOX_TEST_RESOLVE="svc.txbox.test=127.0.0.1"
    POLICY="$BATS_TEST_TMPDIR/policy.yaml"
    cat >"$POLICY" <<'EOF'
version: 1
rules:
  - id: svc-create
    decision: uncertain
    reason: creates an item on the test service
    network: true
    domains: [svc.txbox.test]
    compensate: 'curl -fsS -X DELETE {1}'
    match:
      program: [curl]
      args_any: [POST]
      operands_any: ['http://svc.txbox.test:*/items/?*']
    examples:
      match: ['curl -fsS -X POST http://svc.txbox.test:1/items/a']
      no_match: ['curl -fsS http://svc.txbox.test:1/items/a']
  - id: svc-create-id
    decision: uncertain
    reason: creates an item with an id the service chooses
    network: true
    domains: [svc.txbox.test]
    capture: '"id": *"([a-z0-9-]+)"'
    compensate: 'curl -fsS -X DELETE http://svc.txbox.test:$PORT/items/{capture.1}'
    match:
      program: [curl]
      args_any: [POST]
      operands_any: ['http://svc.txbox.test:*/items']
    examples:
      match: ['curl -fsS -X POST http://svc.txbox.test:1/items']
      no_match: ['curl -fsS -X POST http://svc.txbox.test:1/items/a']
  - id: svc-create-write
    decision: uncertain
    reason: creates an item (its compensation tries to write the workspace)
    network: true
    domains: [svc.txbox.test]
    compensate: 'echo undone >undone.txt && curl -fsS -X DELETE {1}'
    match:
      program: [wget]
      operands_any: ['http://svc.txbox.test:*/items/?*']
    examples:
      match: ['wget -q -O- --post-data= http://svc.txbox.test:1/items/a']
      no_match: ['wget -q http://svc.txbox.test:1/notify']
  - id: svc-local-create
    decision: uncertain
    reason: creates an item on a service on the host's loopback
    network: true
    compensate: 'curl -fsS -X DELETE {1}'
    match:
      program: [curl]
      args_any: [POST]
      operands_any: ['http://127.0.0.1:*/items/?*']
    examples:
      match: ['curl -fsS -X POST http://127.0.0.1:1/items/a']
      no_match: ['curl -fsS http://127.0.0.1:1/items/a']
  - id: svc-notify
    decision: uncertain
    reason: sends a notification (it cannot be taken back)
    network: true
    domains: [svc.txbox.test]
    external: true
    match:
      program: [curl]
      operands_any: ['http://svc.txbox.test:*/notify']
    examples:
      match: ['curl -fsS -X POST http://svc.txbox.test:1/notify']
      no_match: ['curl -fsS -X POST http://svc.txbox.test:1/items']
EOF
}

teardown() {
    [ -z "${SRV_PID:-}" ] || kill "$SRV_PID" 2>/dev/null || true
}

need_curl() {
    command -v curl >/dev/null || need "curl is not installed"
}

# calls: what the service got, one line each.
calls() { cat "$SRV/calls"; }

assert_calls() {
    local want="$1" got
    got="$(calls)"
    [ "$got" = "$want" ] || fail "the service got:" "$got" "expected:" "$want"
}

begin() {
    run --separate-stderr txbox_bin begin -C "$WS"
    assert_status 0 || return 1
    TID="$output"
}

# in_tx ARGS...: txbox run --json --policy $POLICY --tx $TID ARGS...
in_tx() {
    run --separate-stderr txbox_bin run -C "$WS" --json --policy "$POLICY" --tx "$TID" "$@"
    check_run_json
}

txc() {
    local sub="$1"
    shift
    run --separate-stderr txbox_bin "$sub" -C "$WS" "$@"
}

# eff FIELD: the fields of the effects of the JSON in $output, one a line
# (effects listed in order of record).
eff() {
    printf '%s' "$output" | python3 -c '
import json, sys
o = json.load(sys.stdin)
for e in o.get("effects", []):
    v = e.get(sys.argv[1])
    print("null" if v is None else str(v).lower() if isinstance(v, bool) else v)' "$1"
}

@test "abort: two compensations run in reverse order, each logged with its status and output" {
    snap pre "$WS"
    begin
    in_tx -c "curl -fsS -X POST $URL/items/alpha && echo made >alpha.txt"
    assert_status 0
    assert_outcome staged
    [ "$(eff state)" = pending ] || fail "first effect: $(jget effects)"
    # the second takes its item id from the service's answer (capture)
    in_tx -c "curl -fsS -X POST $URL/items"
    assert_status 0
    assert_outcome staged
    [ "$(eff compensate)" = "curl -fsS -X DELETE http://svc.txbox.test:\$PORT/items/'item-1'" ] ||
        fail "rendered compensation: $(eff compensate)"
    assert_calls $'CREATE alpha\nCREATE item-1'
    txc abort --json "$TID"
    assert_status 0
    assert_calls $'CREATE alpha\nCREATE item-1\nDELETE item-1\nDELETE alpha'
    [ "$(eff state)" = $'compensated\ncompensated' ] || fail "abort: $output"
    [ "$(eff exit_code)" = $'0\n0' ] || fail "abort: $output"
    [ "$(jget needs_attention)" = 0 ] || fail "abort: $output"
    printf '%s' "$(eff stdout)" | grep -q '"deleted": "alpha"' || fail "the compensation's output is not kept: $output"
    # each compensation is a logged transaction of its own (read-only)
    local ctx
    for ctx in $(eff compensation_tx); do
        run --separate-stderr txbox_bin show -C "$WS" --json "$ctx"
        assert_status 0
        [ "$(jget outcome)" = read_only ] || fail "compensation tx $ctx: $output"
    done
    # the aborted transaction's log entry lists its effects
    run --separate-stderr txbox_bin show -C "$WS" "$TID"
    assert_status 0
    [[ "$output" == *"compensated, rule svc-create-id"* && "$output" == *"compensated, rule svc-create"* ]] ||
        fail "show $TID: $output"
    assert_tree pre "$WS"
}

@test "a compensation that fails is reported as needing attention; the others still run" {
    begin
    in_tx -c "curl -fsS -X POST $URL/items/one"
    in_tx -c "curl -fsS -X POST $URL/items/locked-two"
    in_tx -c "curl -fsS -X POST $URL/items/three"
    assert_status 0
    txc abort "$TID"
    assert_status 120
    assert_calls $'CREATE one\nCREATE locked-two\nCREATE three\nDELETE three\nDELETE-REFUSED locked-two\nDELETE one'
    [[ "$stderr" == *"effect 1 (svc-create) failed - NEEDS ATTENTION (exit status 22)"* ]] || fail "abort said: $stderr"
    txc status
    assert_status 0
    [[ "$output" == *"NEEDS ATTENTION: tx $TID effect 1 (svc-create) failed: curl -fsS -X DELETE '$URL/items/locked-two'"* ]] ||
        fail "status: $output"
    txc status --json
    printf '%s' "$output" | python3 -c '
import json, sys
a = json.load(sys.stdin)["attention"]
assert len(a) == 1 and a[0]["state"] == "failed" and a[0]["exit_code"] == 22 and a[0]["tx"] == sys.argv[1], a' "$TID" ||
        fail "status --json: $output"
}

@test "irreversible: an effect without a compensation is marked, and reported when its work is undone" {
    run --separate-stderr txbox_bin run -C "$WS" --json --policy "$POLICY" -c "curl -fsS -X POST $URL/notify"
    check_run_json
    assert_status 0
    assert_outcome committed
    [ "$(jget irreversible)" = true ] || fail "result: $output"
    [ "$(eff irreversible)" = true ] && [ "$(eff state)" = kept ] && [ "$(eff compensate)" = null ] ||
        fail "effects: $(jget effects)"
    # without --json: the status line says so
    run --separate-stderr txbox_bin run -C "$WS" --policy "$POLICY" -c "curl -fsS -X POST $URL/notify"
    assert_status 0
    [[ "$stderr" == *"1 external effect(s) recorded, 1 irreversible"* ]] || fail "status line: $stderr"
    # a command without an external effect has no such fields
    run --separate-stderr txbox_bin run -C "$WS" --json --policy "$POLICY" -c "echo x >x.txt"
    [ "$(jget irreversible 2>/dev/null)" != true ] && [ -z "$(eff state)" ] || fail "plain command: $output"
    # undone: the notification cannot be, and that needs attention
    begin
    in_tx -c "curl -fsS -X POST $URL/notify"
    assert_status 0
    [ "$(eff state)" = irreversible ] || fail "staged: $(jget effects)"
    txc abort --json "$TID"
    assert_status 120
    [ "$(eff state)" = not_undone ] && [ "$(jget needs_attention)" = 1 ] || fail "abort: $output"
    assert_calls $'NOTIFY\nNOTIFY\nNOTIFY'
}

@test "commit keeps the effects: no compensation runs" {
    begin
    in_tx -c "curl -fsS -X POST $URL/items/kept-1"
    in_tx -c "curl -fsS -X POST $URL/items"
    txc commit --json "$TID"
    assert_status 0
    [ "$(eff state)" = $'kept\nkept' ] || fail "commit: $output"
    run --separate-stderr txbox_bin run -C "$WS" --json --policy "$POLICY" -c "curl -fsS -X POST $URL/items/kept-2"
    assert_status 0
    assert_outcome committed
    [ "$(eff state)" = kept ] && [ "$(jget irreversible)" = false ] || fail "single run: $output"
    assert_calls $'CREATE kept-1\nCREATE item-1\nCREATE kept-2'
    txc status --json
    printf '%s' "$output" | python3 -c 'import json, sys; assert json.load(sys.stdin)["attention"] == []' ||
        fail "status: $output"
}

@test "a single run that fails: its compensation runs, and its own changes roll back" {
    snap pre "$WS"
    run --separate-stderr txbox_bin run -C "$WS" --json --policy "$POLICY" \
        -c "curl -fsS -X POST $URL/items/single && echo x >new.txt && exit 3"
    check_run_json
    assert_status 3
    assert_outcome rolled_back
    [ "$(eff state)" = compensated ] && [ "$(eff exit_code)" = 0 ] || fail "effects: $(jget effects)"
    assert_calls $'CREATE single\nDELETE single'
    assert_tree pre "$WS"
    # a failing command inside a transaction: the same, the transaction goes on
    begin
    in_tx -c "curl -fsS -X POST $URL/items/in-tx; exit 4"
    assert_status 4
    assert_outcome rolled_back
    [ "$(eff state)" = compensated ] || fail "effects: $(jget effects)"
    txc commit "$TID"
    assert_status 0
    assert_calls $'CREATE single\nDELETE single\nCREATE in-tx\nDELETE in-tx'
}

@test "rollback to a savepoint compensates the effects after it, not those before" {
    begin
    in_tx -c "curl -fsS -X POST $URL/items/before"
    txc savepoint "$TID" sp1
    assert_status 0
    in_tx -c "curl -fsS -X POST $URL/items/after-1"
    in_tx -c "curl -fsS -X POST $URL/items/after-2"
    txc rollback "$TID" sp1
    assert_status 0
    assert_calls $'CREATE before\nCREATE after-1\nCREATE after-2\nDELETE after-2\nDELETE after-1'
    txc commit "$TID"
    assert_status 0
    assert_calls $'CREATE before\nCREATE after-1\nCREATE after-2\nDELETE after-2\nDELETE after-1'
}

@test "a compensation gets the network its effect had: --net=host reaches the host's loopback" {
    # the proxy refuses loopback, so an effect made with the host's network
    # on a service there can only be undone with the host's network again
    begin
    in_tx --net=host -c "curl -fsS -X POST http://127.0.0.1:$PORT/items/local"
    assert_status 0
    txc abort --json "$TID"
    assert_status 0
    [ "$(eff state)" = compensated ] || fail "state: $(eff state)" "$output"
    assert_calls "CREATE local
DELETE local"
    # a single run that fails: its compensation runs at once, the same way
    run --separate-stderr txbox_bin run -C "$WS" --json --policy "$POLICY" --net=host \
        -c "curl -fsS -X POST http://127.0.0.1:$PORT/items/again && false"
    [ "$(eff state)" = compensated ] || fail "state: $(eff state)" "$output"
}

@test "a compensation cannot write the workspace" {
    command -v wget >/dev/null || need "wget is not installed"
    snap pre "$WS"
    begin
    in_tx -c "wget -q -O- --post-data= $URL/items/w1"
    assert_status 0
    txc abort --json "$TID"
    assert_status 120
    [ "$(eff state)" = failed ] || fail "abort: $output"
    [[ "$(eff stderr)" == *"undone.txt"* ]] || fail "the compensation's error: $(eff stderr)"
    [ ! -e "$WS/undone.txt" ] || fail "the compensation wrote the workspace"
    assert_tree pre "$WS"
}

@test "values are shell-quoted: an operand cannot add shell syntax to the compensation" {
    begin
    # the item's name is q';>pwned;$(>pwned2)' (the command quotes it for its own shell)
    local name="q';>pwned;\$(>pwned2)'"
    in_tx -c "curl -fsS -X POST '$URL/items/q'\\'';>pwned;\$(>pwned2)'\\'''"
    assert_status 0
    assert_calls "CREATE $name"
    [ "$(eff compensate)" = "curl -fsS -X DELETE '$URL/items/q'\\'';>pwned;\$(>pwned2)'\\'''" ] ||
        fail "rendered: $(eff compensate)"
    txc abort "$TID"
    assert_status 0
    assert_calls "CREATE $name"$'\n'"DELETE $name"
    [ ! -e "$WS/pwned" ] && [ ! -e "$WS/pwned2" ] || fail "a substituted value ran as shell code"
}

@test "crash during abort: abort again resumes; no compensation runs twice" {
    begin
    in_tx -c "curl -fsS -X POST $URL/items/c1"
    in_tx -c "curl -fsS -X POST $URL/items/c2"
    in_tx -c "curl -fsS -X POST $URL/items/c3"
    # killed before the mark 'running' of the second compensation is written
    # (each mark: write, fsync, rename, fsync of the effect list)
    TXBOX_FAULT=rename:3:kill txc abort "$TID"
    assert_status 137
    assert_calls $'CREATE c1\nCREATE c2\nCREATE c3\nDELETE c3'
    txc status
    [[ "$output" == *"tx $TID "*"abort cut short"* ]] || fail "status: $output"
    run --separate-stderr txbox_bin run -C "$WS" --tx "$TID" -c "echo more >more.txt"
    [ "$status" = 125 ] && [[ "$stderr" == *"being aborted"* ]] || fail "a command ran in a transaction being aborted: $output"
    txc abort "$TID"
    assert_status 0
    assert_calls $'CREATE c1\nCREATE c2\nCREATE c3\nDELETE c3\nDELETE c2\nDELETE c1'
    txc abort "$TID"
    [ "$status" = 125 ] || fail "a closed transaction was aborted again"
}

@test "crash while a compensation runs: it is marked interrupted, never run again" {
    begin
    in_tx -c "curl -fsS -X POST $URL/items/d1"
    in_tx -c "curl -fsS -X POST $URL/items/d2"
    # killed after the first compensation ran, before its end was recorded
    TXBOX_FAULT=rename:2:kill txc abort "$TID"
    assert_status 137
    assert_calls $'CREATE d1\nCREATE d2\nDELETE d2'
    txc abort --json "$TID"
    assert_status 120
    [ "$(eff state)" = $'compensated\ninterrupted' ] || fail "abort: $output"
    assert_calls $'CREATE d1\nCREATE d2\nDELETE d2\nDELETE d1'
    txc status
    [[ "$output" == *"NEEDS ATTENTION: tx $TID effect 1 (svc-create) interrupted"* ]] || fail "status: $output"
}

@test "resolve: a person marks an effect that needs attention as dealt with; status lists it no more" {
    begin
    in_tx -c "curl -fsS -X POST $URL/items/r1"
    in_tx -c "curl -fsS -X POST $URL/items/locked-r2"
    txc abort "$TID"
    assert_status 120
    txc status
    [[ "$output" == *"NEEDS ATTENTION: tx $TID effect 1 (svc-create) failed"* ]] || fail "status: $output"
    # bad input: no such effect, one that does not need attention, a bad number
    txc resolve "$TID" 7
    assert_status 125
    txc resolve "$TID" 0
    [ "$status" = 125 ] && [[ "$stderr" == *"does not need attention (compensated)"* ]] || fail "resolve 0: $stderr"
    txc resolve "$TID" x
    [ "$status" = 125 ] && [[ "$stderr" == *"'x' is not an effect number"* ]] || fail "resolve x: $stderr"
    txc resolve --json --note "deleted locked-r2 by hand" "$TID" 1
    assert_status 0
    printf '%s' "$output" | python3 -c '
import json, sys
o = json.load(sys.stdin)
r = o["resolved"]
assert o["tx"] == sys.argv[1] and len(r) == 1 and r[0]["state"] == "resolved" and r[0]["resolved_from"] == "failed", o
assert r[0]["note"] == "deleted locked-r2 by hand" and r[0]["resolved_at"] > 0, o' "$TID" || fail "resolve: $output"
    txc status --json
    printf '%s' "$output" | python3 -c 'import json, sys; assert json.load(sys.stdin)["attention"] == []' ||
        fail "status still lists it: $output"
    # durable, in the transaction's effect list; and nothing is left to resolve
    python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))["effects"]; assert [x["state"] for x in e] == ["compensated", "resolved"], e' \
        "$WS/.txbox/tx/$TID/effects" || fail "effects: $(cat "$WS/.txbox/tx/$TID/effects")"
    txc resolve "$TID"
    [ "$status" = 125 ] && [[ "$stderr" == *"no effect of transaction $TID needs attention"* ]] || fail "resolve again: $stderr"
}

@test "a single run killed while its own compensation runs: recovery marks it interrupted, for resolve" {
    # the command fails, so its effect is compensated; txbox is killed after
    # the compensation ran, before its end was recorded
    TXBOX_FAULT=rename:2:kill run --separate-stderr txbox_bin run -C "$WS" --policy "$POLICY" \
        -c "curl -fsS -X POST $URL/items/k1 && exit 3"
    assert_status 137
    assert_calls $'CREATE k1\nDELETE k1'
    # the run's own transaction holds the effect (the compensation is logged
    # as one more)
    local rid
    rid="$(cd "$WS/.txbox/tx" && grep -l '"state":"running"' */effects | cut -d/ -f1)"
    [ -n "$rid" ] || fail "no effect left running: $(cat "$WS"/.txbox/tx/*/effects)"
    # the next txbox command recovers the dead run and marks its effect
    txc status
    assert_status 0
    [[ "$output" == *"NEEDS ATTENTION: tx $rid effect 0 (svc-create) interrupted"* ]] || fail "status: $output"
    assert_calls $'CREATE k1\nDELETE k1'
    txc resolve "$rid" 0
    assert_status 0
    txc status --json
    printf '%s' "$output" | python3 -c 'import json, sys; assert json.load(sys.stdin)["attention"] == []' ||
        fail "status still lists it: $output"
}

@test "policy: compensation templates are checked when the policy loads" {
    local bad="$BATS_TEST_TMPDIR/bad.yaml" body
    for body in "compensate: 'x {capture.1}'" "compensate: 'x {bogus}'" "compensate: 'x {1'" \
        "capture: '(' "$'\n'"    compensate: 'x {capture.1}'" \
        "capture: 'a(b)'"$'\n'"    compensate: 'x {capture.2}'"; do
        cat >"$bad" <<EOF
version: 1
rules:
  - id: bad-comp
    decision: uncertain
    reason: test
    $body
    match: {program: [curl]}
    examples: {match: ['curl x'], no_match: ['ls']}
EOF
        run --separate-stderr txbox_bin check --policy "$bad" -c "curl x"
        [ "$status" = 125 ] && [[ "$stderr" == *"bad.yaml:3: rule bad-comp: "* ]] ||
            fail "policy with [$body] was not refused as expected (status $status): $stderr"
    done
    sed -i 's/decision: uncertain/decision: safe/; s/^    capture.*$//' "$bad"
    sed -i "s/^    compensate: .*$/    compensate: 'x {1}'/" "$bad"
    run --separate-stderr txbox_bin check --policy "$bad" -c "curl x"
    [ "$status" = 125 ] && [[ "$stderr" == *"only uncertain rules can declare external effects"* ]] ||
        fail "a safe rule with a compensation: status $status: $stderr"
}
