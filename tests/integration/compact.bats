#!/usr/bin/env bats
# Compaction (lib/store/compact.c): the directories of ended transactions that
# nothing reads any more leave .txbox/tx/, every 64 transactions and in
# txbox gc, so .txbox/tx/ stays bounded. What must hold: the audit log,
# show and diff still have every transaction; ids are never given out again
# (the id floor), even when the seq hint is lost; undo of a retained commit
# works and of an archived one says why not; and the commit records that a
# live, an open multi-command or a held transaction's conflict check needs
# are kept (else it would be a conflict over nothing).

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    new_ws
}

txc() {
    local sub="$1"
    shift
    run --separate-stderr txbox_bin "$sub" -C "$WS" "$@"
}

# ids of the directories in .txbox/tx/, ascending, on one line
tx_dirs() {
    ls "$WS/.txbox/tx" | sort -n | tr '\n' ' '
}

# commit_id CMD: runs CMD (must commit), its id in $ID
commit_id() {
    txj -c "$1"
    assert_status 0 || return 1
    assert_outcome committed || return 1
    ID="$(jget tx)"
}

@test "every 64th transaction archives the ended ones' directories; the log, show, diff and ids stay whole" {
    commit_id 'echo one >c1'
    local c1="$ID"
    txc gc --keep 2 --save
    assert_status 0
    commit_id 'echo two >c2'
    local c2="$ID"
    commit_id 'echo three >c3'
    local c3="$ID"
    tx -c 'echo gone >g; exit 4'
    assert_status 4
    tx -c 'cat README'
    assert_status 0
    # blocked commands (never run) up to id 63: nothing archived yet
    local n
    for ((n = 6; n < 64; n++)); do
        tx -c 'rm -rf /'
        assert_status 122
    done
    [ "$(ls "$WS/.txbox/tx" | wc -l)" = 63 ] || fail "before id 64: $(tx_dirs)"
    tx -c 'rm -rf /'
    assert_status 122
    # id 64 archived every ended one but the two retained commits
    [ "$(tx_dirs)" = "$c2 $c3 " ] || fail "left in .txbox/tx after id 64: $(tx_dirs)"
    [ "$(readlink "$WS/.txbox/floor")" = 64 ] || fail "id floor: $(readlink "$WS/.txbox/floor")"
    txc log --json
    assert_status 0
    [ "$(printf '%s' "$output" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 64 ] ||
        fail "the log lost rows: $(clip "$output")"
    txc show "$c1"
    assert_status 0
    [[ "$output" == *"committed (generation 1)"* ]] || fail "show of an archived commit: $output"
    txc diff "$c1"
    assert_status 0
    [[ "$output" == *"b/c1"* ]] || fail "diff of an archived commit: $output"
    # undo: the archived commit says why not; the newest is undone
    txc undo "$c1"
    assert_status 125
    [[ "$stderr" == *"too old to undo"* ]] || fail "undo of an archived commit: $stderr"
    txc undo "$((c1 + 3))"
    assert_status 125
    [[ "$stderr" == *"was not committed (rolled_back)"* ]] || fail "undo of an archived rollback: $stderr"
    txc undo
    assert_status 0
    [[ "$stderr" == *"undid transaction $c3"* ]] || fail "undo: $stderr"
    [ ! -e "$WS/c3" ] && [ "$(cat "$WS/c2")" = two ] || fail "undo did not give back the state before $c3"
    # the seq hint lost: the next id still comes after every one given out
    rm -f "$WS/.txbox/seq"
    txj -c 'echo four >c4'
    assert_status 0
    [ "$(jget tx)" = 66 ] || fail "id after the seq hint was lost: $(jget tx) (want 66)"
}

@test "txbox gc archives too; an open multi-command transaction's conflict check keeps its records" {
    commit_id 'echo base >base'
    run --separate-stderr txbox_bin begin -C "$WS"
    assert_status 0
    local t_ok="$output"
    run --separate-stderr txbox_bin begin -C "$WS"
    assert_status 0
    local t_clash="$output"
    commit_id 'echo a >later_a'
    commit_id 'echo b >later_b'
    commit_id 'echo c >shared'
    txc gc --keep 0 --json
    assert_status 0
    [ "$(printf '%s' "$output" | python3 -c 'import json,sys; print(json.load(sys.stdin)["archived"])')" -ge 1 ] ||
        fail "gc archived nothing: $output"
    # the first commit (before both begins) went; the three after stayed
    [ ! -e "$WS/.txbox/tx/1" ] || fail "the commit before the open transactions was kept: $(tx_dirs)"
    run --separate-stderr txbox_bin run -C "$WS" --tx "$t_ok" -c 'echo mine >mine'
    assert_status 0
    txc commit --json "$t_ok"
    assert_status 0
    assert_json_field outcome committed
    [ "$(cat "$WS/mine")" = mine ] || fail "not applied"
    run --separate-stderr txbox_bin run -C "$WS" --tx "$t_clash" -c 'echo theirs >shared'
    assert_status 0
    txc commit --json "$t_clash"
    assert_status 123
    assert_json_field outcome conflict
    [ "$(jget conflict_paths)" = shared ] || fail "conflict paths: $(jget conflict_paths)"
}

@test "a live transaction's base (in its lock) keeps the commit records it will check" {
    commit_id 'echo base >base'
    txbox_bin run -C "$WS" -c 'sleep 4; echo late >late' 2>"$BATS_TEST_TMPDIR/bg.err" &
    local bg=$! i
    for ((i = 0; i < 100; i++)); do
        [ -s "$WS/.txbox/active/2" ] && break
        sleep 0.05
    done
    [ "$(cat "$WS/.txbox/active/2")" = 1 ] || fail "the live transaction's lock holds '$(cat "$WS/.txbox/active/2")', not its base 1"
    commit_id 'echo a >other_a'
    commit_id 'echo b >other_b'
    txc gc --keep 0
    assert_status 0
    [ -e "$WS/.txbox/tx/3" ] && [ -e "$WS/.txbox/tx/4" ] || fail "records after the live base were archived: $(tx_dirs)"
    [ ! -e "$WS/.txbox/tx/1" ] || fail "the record before the live base was kept: $(tx_dirs)"
    wait "$bg" || fail "the live transaction failed ($?): $(cat "$BATS_TEST_TMPDIR/bg.err")"
    [ "$(cat "$WS/late")" = late ] || fail "not committed: $(cat "$BATS_TEST_TMPDIR/bg.err")"
}

@test "a held transaction's base keeps the commit records its approval will check" {
    commit_id 'echo base >base'
    txj -c 'mkdir -p .git/hooks && echo "#!/bin/sh" >.git/hooks/pre-commit'
    assert_status 121
    assert_outcome held
    local held
    held="$(jget tx)"
    commit_id 'echo a >other_a'
    commit_id 'echo b >other_b'
    txc gc --keep 0
    assert_status 0
    [ ! -e "$WS/.txbox/tx/1" ] || fail "the record before the held base was kept: $(tx_dirs)"
    [ -e "$WS/.txbox/tx/$held" ] || fail "the held transaction was archived: $(tx_dirs)"
    txc approve --json "$held"
    assert_status 0
    assert_json_field outcome committed
    [ "$(cat "$WS/.git/hooks/pre-commit")" = "#!/bin/sh" ] || fail "not applied"
}

@test "compaction killed at each of its steps: no id given out twice, the log whole, the next pass finishes" {
    commit_id 'echo one >c1'
    txc gc --keep 1 --save
    assert_status 0
    commit_id 'echo two >c2'
    commit_id 'echo three >c3'
    local i
    for i in 4 5 6; do
        tx -c "echo $i >r; exit 1"
        assert_status 1
    done
    local tpl="$BATS_TEST_TMPDIR/tpl" n killed=0
    cp -a "$WS" "$tpl"
    for ((n = 1; n < 60; n++)); do
        rm -rf "$WS"
        cp -a "$tpl" "$WS"
        TXBOX_FAULT="any:$n:kill" txc gc
        [ "$status" = 0 ] && break
        [ "$status" = 137 ] || fail "gc with a kill at fault point $n: status $status: $stderr"
        killed=$((n))
        [ -e "$WS/.txbox/tx/3" ] || fail "point $n: the retained commit was archived: $(tx_dirs)"
        rm -f "$WS/.txbox/seq"
        txj -c 'echo z >z'
        assert_status 0
        [ "$(jget tx)" = 7 ] || fail "point $n: the next id is $(jget tx), not 7: $(tx_dirs)"
        txc log --json
        assert_status 0
        [ "$(printf '%s' "$output" | python3 -c 'import json,sys; print(" ".join(r["tx"] for r in json.load(sys.stdin)))')" = "7 6 5 4 3 2 1" ] ||
            fail "point $n: the log: $(clip "$output")"
        txc gc
        assert_status 0
        [ "$(tx_dirs)" = "7 " ] || fail "point $n: after the next gc: $(tx_dirs)"
        [ "$(cat "$WS/c3")" = three ] && [ "$(cat "$WS/z")" = z ] || fail "point $n: the workspace changed"
    done
    [ "$killed" -ge 4 ] || fail "only $killed fault points were hit (the floor's fsync and a rename each expected)"
    echo "# compaction: $killed fault points killed, then the pass finished" >&3
}

@test "a workspace of state format 1 is upgraded to 2 by its first compaction, not before" {
    commit_id 'echo one >c1'
    [ "$(cat "$WS/.txbox/format")" = "txbox-state 2" ] || fail "a new workspace: $(cat "$WS/.txbox/format")"
    echo "txbox-state 1" >"$WS/.txbox/format"
    txc gc
    assert_status 0
    [ "$(cat "$WS/.txbox/format")" = "txbox-state 1" ] || fail "upgraded with nothing archived: $(cat "$WS/.txbox/format")"
    tx -c 'echo x >r; exit 1'
    assert_status 1
    txc gc --json
    assert_status 0
    [ "$(printf '%s' "$output" | python3 -c 'import json,sys; print(json.load(sys.stdin)["archived"])')" = 1 ] ||
        fail "gc did not archive the rollback: $output"
    [ "$(cat "$WS/.txbox/format")" = "txbox-state 2" ] || fail "not upgraded: $(cat "$WS/.txbox/format")"
    [ "$(readlink "$WS/.txbox/floor")" = 2 ] || fail "id floor: $(readlink "$WS/.txbox/floor")"
}
