#!/usr/bin/env bats
# Retention of the pre-images by age and size: a working week of them, a
# month for a commit that destroyed work (with the later ones its undo
# merges with), the size bound spent on destroyed work first; what gc
# pruned is said by undo and restore; gc never prunes under an undo.
# Time is moved by ageing the log's rows (their end), as a week passing
# would.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    new_ws
    printf 'one\ntwo\nthree\nfour\nfive\nsix\nseven\n' >"$WS/notes.txt"
    head -c 5000 /dev/zero >"$WS/big.bin"
}

# sq SQL: the audit log's rows, '|'-separated, after the pending rows are
# moved in (as every txbox command that opens the log does); a statement
# that changes it is committed.
sq() {
    "$TXBOX" log -C "$WS" -n 1 >/dev/null 2>&1 || true
    python3 - "$WS/.txbox/log.db" "$1" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for r in c.execute(sys.argv[2]):
    print("|".join("" if v is None else str(v) for v in r))
c.commit()
EOF
}

# age DAYS ID...: those transactions ended DAYS days earlier than they did
# (and the cached count, which knows when a prune is due, is dropped).
age() {
    local days="$1"
    shift
    sq "UPDATE tx SET started=started-$days*86400, finished=finished-$days*86400 WHERE id IN ($(IFS=,; echo "$*"))"
    rm -f "$WS/.txbox/log.retained"
}

# destroyed ID...: the log says those commits destroyed work (their row's
# losses and, in a log that has the column, lost_bytes, as the loss
# measurement records them).
destroyed() {
    local ids
    ids="$(IFS=,; echo "$*")"
    sq "UPDATE tx SET info=json_set(info, '\$.losses', json('{\"count\":1,\"bytes\":6,\"truncated\":false,\"items\":[]}')) WHERE id IN ($ids)"
    if [ -n "$(sq "SELECT name FROM pragma_table_info('tx') WHERE name='lost_bytes'")" ]; then
        sq "UPDATE tx SET lost_bytes=6 WHERE id IN ($ids)"
    fi
}

retained() { sq "SELECT group_concat(id, ' ') FROM (SELECT id FROM tx WHERE outcome='committed' AND retained_bytes IS NOT NULL AND pruned IS NULL ORDER BY id)"; }

@test "a working week of pre-images is kept, however many commits; older ones are pruned after a commit" {
    local i
    for i in $(seq 1 115); do
        commit "printf '$i\\n' >>notes.txt"
    done
    [ "$(sq "SELECT count(*) FROM tx WHERE retained_bytes IS NOT NULL AND pruned IS NULL")" = 115 ] ||
        fail "not every commit of the week kept: $(retained)"
    age 8 1 2 3
    age 6 4 5
    commit 'printf "x\n" >>notes.txt'
    [ ! -e "$WS/.txbox/tx/1/undo" ] && [ ! -e "$WS/.txbox/tx/3/undo" ] && [ -d "$WS/.txbox/tx/4/undo" ] ||
        fail "not pruned by age after the commit: $(retained)"
    [ "$(sq "SELECT count(*) FROM tx WHERE pruned IS NOT NULL")" = 3 ] || fail "$(retained)"
    h undo 2
    assert_txbox_error
    [[ "$stderr" == *"pre-images of transaction 2 were pruned by 'txbox gc'"* ]] || fail "$stderr"
}

@test "a commit that destroyed work keeps its pre-images a month, and the later ones its undo merges with" {
    commit 'sed -i "s/^one$/ONE/" notes.txt'
    commit 'printf "x\n" >unrelated.txt'
    commit 'sed -i "s/^seven$/SEVEN/" notes.txt'
    destroyed 1
    age 8 1 2 3
    h gc --json
    assert_status 0
    [ "$(pj '[(p["tx"], p["why"]) for p in d["pruned"]]')" = "[('2', 'older than the bound')]" ] || fail "$output"
    [ "$(pj '(d["kept"]["destroyed_work"], d["kept"]["pinned"], d["limits"]["max_age"], d["limits"]["loss_age"])')" = \
        "(1, 1, 604800, 2592000)" ] || fail "$output"
    h undo 1
    assert_status 0
    [ "$(head -1 "$WS/notes.txt")" = one ] && [ "$(tail -1 "$WS/notes.txt")" = SEVEN ] || fail "$(cat "$WS/notes.txt")"
    age 23 1 3
    h gc --dry-run --json
    [ "$(pj '[p["tx"] for p in d["pruned"]]')" = "['1', '3']" ] || fail "$output"
}

@test "the size bound keeps destroyed work first; an undo whose merge base was pruned says so" {
    commit 'sed -i "s/^one$/ONE/" notes.txt'
    commit 'sed -i "s/^seven$/SEVEN/" notes.txt'
    commit 'head -c 6000 /dev/zero >big.bin'
    destroyed 1
    local b1
    b1="$(sq "SELECT retained_bytes FROM tx WHERE id=1")"
    h gc --max-bytes "$b1"
    assert_status 0
    [ "$(retained)" = 1 ] || fail "$(retained)"
    [[ "$output" == *"pruned tx 2: pre-images, "*" bytes (over the size bound)"* ]] || fail "$output"
    h undo 1 --json
    assert_status 123
    [ "$(pj '[(c["path"], c["why"]) for c in d["conflicts"]]')" = \
        "[('notes.txt', 'changed since by transaction 2, whose pre-images were pruned')]" ] || fail "$output"
    h restore 2 -- notes.txt
    assert_txbox_error
    [[ "$stderr" == *"the pre-images of transaction 2 were pruned by 'txbox gc': it can no longer be restored from"* ]] ||
        fail "$stderr"
}

@test "under the size bound a large commit (a build's outputs) goes before a week of small edits" {
    commit 'sed -i "s/^one$/ONE/" notes.txt'
    commit 'head -c 6000 /dev/zero >big.bin'
    local b2
    b2="$(sq "SELECT retained_bytes FROM tx WHERE id=2")"
    [ "$b2" -ge 5000 ] || fail "tx 2 kept $b2 bytes"
    h gc --max-bytes "$b2" --json
    assert_status 0
    [ "$(pj '[(p["tx"], p["why"]) for p in d["pruned"]]')" = "[('2', 'over the size bound')]" ] || fail "$output"
}

@test "gc --save keeps the bounds; bad bounds are one clear line" {
    commit 'printf "x\n" >>notes.txt'
    h gc --max-age 2d --loss-age 3w --max-bytes 1G --keep 50 --save --json
    assert_status 0
    h gc --json
    [ "$(pj '(d["limits"]["max_age"], d["limits"]["loss_age"], d["limits"]["max_bytes"], d["limits"]["keep"])')" = \
        "(172800, 1814400, 1073741824, 50)" ] || fail "$output"
    h gc --keep all --save
    assert_status 0
    [[ "$output" == *"bounds: age 2d, 3w for destroyed work, 1073741824 bytes, transactions: no bound;"* ]] || fail "$output"
    for bad in "--max-age 1x" "--max-age -1" "--loss-age 200y" "--loss-age" "--keep -2" "--keep 1K"; do
        # shellcheck disable=SC2086
        h gc $bad
        assert_txbox_error || fail "gc $bad"
    done
}

@test "gc never prunes what an undo in progress reads: it waits for the undo" {
    commit 'sed -i "s/^one$/ONE/" notes.txt'
    commit 'sed -i "s/^seven$/SEVEN/" notes.txt'
    # the undo stops once it has planned, before its commit point
    TXBOX_FAULT=mkdir:1:stop "$TXBOX" undo -C "$WS" 1 2>"$BATS_TEST_TMPDIR/undo.err" &
    local upid=$! i
    for i in $(seq 1 100); do
        [ "$(cut -d' ' -f3 "/proc/$upid/stat" 2>/dev/null)" = T ] && break
        sleep 0.1
    done
    [ "$(cut -d' ' -f3 "/proc/$upid/stat")" = T ] || fail "the undo did not stop: $(cat "$BATS_TEST_TMPDIR/undo.err")"
    "$TXBOX" gc -C "$WS" --max-age 0 >"$BATS_TEST_TMPDIR/gc.out" 2>&1 &
    local gpid=$!
    sleep 1
    kill -0 "$gpid" || fail "gc did not wait for the undo: $(cat "$BATS_TEST_TMPDIR/gc.out")"
    [ -d "$WS/.txbox/tx/2/undo" ] || fail "gc pruned under the undo"
    kill -CONT "$upid"
    wait "$upid" || fail "the undo failed: $(cat "$BATS_TEST_TMPDIR/undo.err")"
    wait "$gpid" || fail "gc failed: $(cat "$BATS_TEST_TMPDIR/gc.out")"
    [ "$(head -1 "$WS/notes.txt")" = one ] && [ "$(tail -1 "$WS/notes.txt")" = SEVEN ] || fail "$(cat "$WS/notes.txt")"
    [ "$(retained)" = "" ] || fail "gc did not prune afterwards: $(retained)"
}
