#!/usr/bin/env bats
# Transactions on the same workspace at once: commits serialize; disjoint
# changes all commit; a transaction whose base changed under it in the same
# paths is a conflict (123) with its changes kept under .txbox/ — never a
# lost update, never a corrupted tree.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    new_ws
    RES="$BATS_TEST_TMPDIR/res"
    mkdir -p "$RES"
    PIDS=()
}

# wait_all: wait for the transactions started by bg_tx (a bare `wait` would
# also wait for bats' own timeout watchdog).
wait_all() {
    local p
    for p in "${PIDS[@]}"; do
        wait "$p" || true
    done
    PIDS=()
}

# bg_tx ID ARGS...: `txbox run -C $WS --json ARGS...` in the background;
# its output in $RES/ID.out, .err, its status in $RES/ID.rc.
bg_tx() {
    local id="$1"
    shift
    (
        rc=0
        txbox_bin run -C "$WS" --json "$@" >"$RES/$id.out" 2>"$RES/$id.err" </dev/null || rc=$?
        echo "$rc" >"$RES/$id.rc"
    ) &
    PIDS+=($!)
}

rc_of() { cat "$RES/$1.rc"; }
outcome_of() { "$RUNJSON" get outcome <"$RES/$1.out"; }

@test "two transactions touching different files both commit" {
    make_ref "$WS" "$BATS_TEST_TMPDIR/ref" 'echo a >a.txt; echo more >>README; echo b >b.txt; rm docs/a.txt'
    snap ref "$BATS_TEST_TMPDIR/ref"
    bg_tx 1 -c 'sleep 1; echo a >a.txt; echo more >>README'
    bg_tx 2 -c 'sleep 1; echo b >b.txt; rm docs/a.txt'
    wait_all
    [ "$(rc_of 1)" = 0 ] && [ "$(rc_of 2)" = 0 ] ||
        fail "statuses $(rc_of 1) $(rc_of 2)" "$(cat "$RES"/*.err)" "$(cat "$RES"/*.out)"
    assert_tree ref "$WS"
}

@test "four concurrent transactions on disjoint files all commit" {
    local i
    for i in 1 2 3 4; do
        bg_tx "$i" -c "sleep 0.5; mkdir d$i; echo $i >d$i/f; echo $i >f$i"
    done
    wait_all
    for i in 1 2 3 4; do
        [ "$(rc_of $i)" = 0 ] || fail "tx $i: status $(rc_of $i)" "$(cat "$RES/$i.err")"
        [ "$(cat "$WS/f$i")" = "$i" ] && [ "$(cat "$WS/d$i/f")" = "$i" ] || fail "tx $i's changes missing"
    done
}

@test "two transactions on the same file: one commits, the other conflicts or serializes" {
    echo base >"$WS/shared"
    bg_tx 1 -c 'v=$(cat shared); sleep 1; echo "$v+A" >shared'
    bg_tx 2 -c 'v=$(cat shared); sleep 1; echo "$v+B" >shared'
    wait_all
    local r1 r2 got
    r1="$(rc_of 1)" r2="$(rc_of 2)"
    got="$(cat "$WS/shared")"
    case "$r1/$r2" in
    0/123)
        [ "$got" = base+A ] || fail "tx 1 committed, tx 2 conflicted, but shared = $got"
        [ "$(outcome_of 2)" = conflict ] || fail "tx 2 outcome $(outcome_of 2)"
        grep -rqx 'base+B' "$WS/.txbox" || fail "the conflicting change (base+B) is not kept under .txbox/"
        ;;
    123/0)
        [ "$got" = base+B ] || fail "tx 2 committed, tx 1 conflicted, but shared = $got"
        [ "$(outcome_of 1)" = conflict ] || fail "tx 1 outcome $(outcome_of 1)"
        grep -rqx 'base+A' "$WS/.txbox" || fail "the conflicting change (base+A) is not kept under .txbox/"
        ;;
    0/0)
        # Both may commit only if one ran entirely after the other.
        [ "$got" = base+A+B ] || [ "$got" = base+B+A ] || fail "lost update: both committed, shared = $got"
        ;;
    *)
        fail "statuses $r1 and $r2" "$(cat "$RES"/*.err)"
        ;;
    esac
}

@test "concurrent increments of a counter never lose an update" {
    echo 0 >"$WS/counter"
    local i ok=0 conflict=0
    for i in 1 2 3 4 5; do
        bg_tx "$i" -c 'n=$(cat counter); sleep 0.3; echo $((n+1)) >counter; echo "'"$i"'" >>log'
    done
    wait_all
    for i in 1 2 3 4 5; do
        case "$(rc_of $i)" in
        0) ok=$((ok + 1)) ;;
        123) conflict=$((conflict + 1)) ;;
        *) fail "tx $i: status $(rc_of $i)" "$(cat "$RES/$i.err")" ;;
        esac
    done
    [ "$ok" -ge 1 ] || fail "no transaction committed"
    [ "$(cat "$WS/counter")" = "$ok" ] ||
        fail "counter = $(cat "$WS/counter") after $ok commits and $conflict conflicts: lost update"
    [ "$(wc -l <"$WS/log")" = "$ok" ] || fail "log has $(wc -l <"$WS/log") lines after $ok commits"
}

@test "a transaction racing a conflicting one leaves a consistent tree" {
    # One rewrites the whole src/ tree, the other edits a file in it.
    bg_tx 1 -c 'sleep 0.5; rm -rf src; mkdir src; echo new >src/main.c'
    bg_tx 2 -c 'sleep 0.5; echo edit >>src/lib/util.c; echo 2 >two'
    wait_all
    local r1 r2
    r1="$(rc_of 1)" r2="$(rc_of 2)"
    case "$r1/$r2" in
    0/123)
        [ "$(cat "$WS/src/main.c")" = new ] && [ ! -e "$WS/src/lib" ] && [ ! -e "$WS/two" ] ||
            fail "after tx 1 only: tree is not tx 1's"
        ;;
    123/0)
        grep -q edit "$WS/src/lib/util.c" && [ -f "$WS/two" ] && grep -q 'int main' "$WS/src/main.c" ||
            fail "after tx 2 only: tree is not tx 2's"
        ;;
    0/0)
        # serialized either way: tx 1's src/ (util.c gone; an append to it
        # after tx 1 fails) and tx 2's file two
        [ "$(cat "$WS/src/main.c")" = new ] && [ -f "$WS/two" ] && [ ! -e "$WS/src/lib" ] ||
            fail "both committed but the tree is neither order: $(cd "$WS" && find src two | sort)"
        ;;
    *)
        fail "statuses $r1 and $r2" "$(cat "$RES"/*.err)"
        ;;
    esac
}

@test "transactions on different fresh workspaces at once all commit" {
    # Each workspace is new (no .txbox/ yet) and four txbox start together:
    # state initialisation and per-run resources (cgroups) must not collide.
    local i ws=() rc=()
    for i in 1 2 3 4; do
        new_ws "other$i"
        ws+=("$WS")
    done
    for i in 1 2 3 4; do
        WS="${ws[$((i - 1))]}"
        bg_tx "$i" -c "sleep 0.3; echo $i >mine"
    done
    wait_all
    for i in 1 2 3 4; do
        [ "$(rc_of $i)" = 0 ] || fail "workspace $i: status $(rc_of $i)" "$(cat "$RES/$i.err")"
        [ "$(cat "${ws[$((i - 1))]}/mine")" = "$i" ] || fail "workspace $i: change missing"
    done
}

@test "concurrent first transactions on one fresh workspace all succeed" {
    # No .txbox/ yet: eight txbox create it at once, three times over (one
    # of them once read a format file another had created but not yet
    # written: ".txbox/format is unreadable").
    local i round
    for round in 1 2 3; do
        new_ws "fresh$round"
        for i in 1 2 3 4 5 6 7 8; do
            bg_tx "$round.$i" -c "echo $i >first$i"
        done
        wait_all
        for i in 1 2 3 4 5 6 7 8; do
            [ "$(rc_of $round.$i)" = 0 ] || fail "round $round, tx $i: status $(rc_of $round.$i)" "$(cat "$RES/$round.$i.err")"
            [ "$(cat "$WS/first$i")" = "$i" ] || fail "round $round, tx $i's change missing"
        done
    done
}

@test "txboxes in different pid namespaces keep their control groups apart" {
    # As root each run has a control group for its limits, named after
    # txbox's pid and the transaction's id. Two txboxes in pid namespaces of
    # their own (containers, unshare --pid) have the same small pids, and two
    # fresh workspaces the same first id: the second could not make its
    # group, or one swept the other's fresh group as a dead process's.
    [ "$(id -u)" = 0 ] || skip "control groups are made as root only"
    new_ws pidns1
    local ws1="$WS"
    new_ws pidns2
    local ws2="$WS"
    unshare --pid --fork --mount-proc "$TXBOX" run -C "$ws1" -c 'sleep 3; echo a >f' \
        >"$RES/a.out" 2>"$RES/a.err" </dev/null &
    local a=$!
    sleep 1
    run --separate-stderr unshare --pid --fork --mount-proc "$TXBOX" run -C "$ws2" -c 'echo b >f'
    assert_status 0
    wait "$a" || fail "the first run failed: $(cat "$RES/a.err")"
    [ "$(cat "$ws1/f")" = a ] && [ "$(cat "$ws2/f")" = b ] || fail "a change is missing"
}
