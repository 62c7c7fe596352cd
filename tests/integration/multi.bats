#!/usr/bin/env bats
# Multi-command transactions (issue 9): begin, run --tx, savepoint,
# rollback, commit (with --verify), abort, status. Nothing reaches the
# workspace before the commit; each command sees the earlier ones; a failing
# command rolls back only itself; the commit is one crash-safe commit with
# first-committer-wins conflict detection.

bats_require_minimum_version 1.5.0
load ../lib/common

# The 500-command test runs 500 sandboxed commands (about 0.3 s each with
# the sanitizers): more than the default 300 s per test.
BATS_TEST_TIMEOUT=$((${BATS_TEST_TIMEOUT:-300} > 1200 ? BATS_TEST_TIMEOUT : 1200))

setup() {
    new_ws
}

# begin [ARGS]: opens a transaction, its id in $TID.
begin() {
    run --separate-stderr txbox_bin begin -C "$WS" "$@"
    assert_status 0 || return 1
    [[ "$output" =~ ^[0-9]+$ ]] || fail "begin printed '$output', not an id"
    TID="$output"
}

# in_tx ARGS...: txbox run -C $WS --json --tx $TID ARGS...
in_tx() {
    run --separate-stderr txbox_bin run -C "$WS" --json --tx "$TID" "$@"
    check_run_json
}

# txc SUBCOMMAND ARGS...: txbox SUBCOMMAND -C $WS ARGS...
txc() {
    local sub="$1"
    shift
    run --separate-stderr txbox_bin "$sub" -C "$WS" "$@"
}

@test "three commands: a failing middle one rolls back only itself; commit applies the rest at once" {
    snap pre "$WS" --mtime
    local c1='rm -rf dir_to_file; echo f >dir_to_file; rm file_to_dir; mkdir file_to_dir; echo n >file_to_dir/n; echo more >>README; rm docs/a.txt'
    local c2='echo junk >junk; rm -rf src; echo broken >>README; exit 3'
    local c3='test "$(cat dir_to_file)" = f && test -f file_to_dir/n && ! test -e junk && test -d src; chmod 600 exec.sh; rm -rf deep/a/b; echo c3 >file_to_dir/m; mkdir docs/new; echo x >docs/new/x; rm -rf docs/sub'
    make_ref "$WS" "$BATS_TEST_TMPDIR/ref" "$c1; $c3"
    snap ref "$BATS_TEST_TMPDIR/ref"
    begin --name three
    in_tx -c "$c1"
    assert_status 0
    assert_outcome staged
    [ "$(jget changes.modified changes.deleted)" = "$(printf 'file_to_dir/\nREADME\ndir_to_file\ndocs/a.txt')" ] ||
        fail "the first command's changes: $(jget changes)"
    txc savepoint "$TID" after-one
    assert_status 0
    in_tx -c "$c2"
    assert_status 3
    assert_outcome rolled_back
    in_tx -c "$c3"
    assert_status 0
    assert_outcome staged
    # nothing of it is in the workspace yet
    assert_tree pre "$WS" --mtime
    # options after the id, as undo's and show's (`commit ID --json`)
    run --separate-stderr txbox_bin commit "$TID" -C "$WS" --json
    assert_status 0
    assert_json_field outcome committed
    assert_json_field commands 2
    assert_tree ref "$WS"
    # closed: no more commands in it
    run --separate-stderr txbox_bin run -C "$WS" --json --tx "$TID" -c true
    assert_txbox_error json
}

@test "rollback to a savepoint keeps it, drops the later ones; rollback without a name returns to the start" {
    begin
    in_tx -c 'echo 1 >one'
    txc savepoint "$TID" s1
    assert_status 0
    in_tx -c 'echo 2 >two; rm README'
    txc savepoint "$TID" s2
    in_tx -c 'echo 3 >three'
    txc rollback "$TID" s1
    assert_status 0
    in_tx -c 'test -f one && ! test -e two && ! test -e three && test -f README'
    assert_status 0 || fail "the view after rollback to s1 is wrong: $stderr"
    txc rollback "$TID" s2
    assert_txbox_error # dropped: it was made after s1
    txc status --json
    assert_status 0
    [ "$(jget transactions.0.savepoints)" = s1 ] || fail "savepoints after the rollback: $output"
    in_tx -c 'echo 4 >four'
    txc rollback "$TID"
    assert_status 0
    in_tx -c '! test -e one && ! test -e four'
    assert_status 0 || fail "rollback to the start left changes in the view"
    in_tx -c 'echo 5 >five'
    snap pre "$WS"
    make_ref "$WS" "$BATS_TEST_TMPDIR/ref" 'echo 5 >five'
    snap ref "$BATS_TEST_TMPDIR/ref"
    txc commit "$TID"
    assert_status 0
    assert_tree ref "$WS"
}

@test "abort drops the transaction; nothing is applied and it is no longer open" {
    snap pre "$WS" --mtime
    begin
    in_tx -c 'echo a >a; rm -rf src'
    txc abort --json "$TID"
    assert_status 0
    printf '%s' "$output" | "$RUNJSON" check-object
    assert_json_field outcome aborted
    assert_tree pre "$WS" --mtime
    txc status --json
    [ "$(jget transactions)" = "" ] || fail "still listed as open: $output"
    txc commit "$TID"
    assert_txbox_error
    [ ! -e "$WS/.txbox/tx/$TID/layer" ] || fail "the aborted layer is still there"
}

@test "conflict: a single run committed the same path since begin (first committer wins); disjoint ones commit" {
    begin
    in_tx -c 'echo tx >README; echo mine >mine'
    # a concurrent single transaction changes README and commits first
    tx -c 'echo single >README'
    assert_status 0
    txc commit --json "$TID"
    assert_status 123
    assert_json_field outcome conflict
    [ "$(jget conflict_paths)" = README ] || fail "conflict paths: $(jget conflict_paths)"
    [ "$(cat "$WS/README")" = single ] || fail "the first committer's change was lost"
    [ ! -e "$WS/mine" ] || fail "part of the conflicting transaction was applied"
    [ "$(cat "$WS/.txbox/tx/$TID/upper/mine")" = mine ] || fail "its changes are not kept aside in upper/"
    # disjoint: both commit
    begin
    in_tx -c 'echo t >t.txt'
    tx -c 'echo s >s.txt'
    assert_status 0
    txc commit "$TID"
    assert_status 0
    [ "$(cat "$WS/t.txt")" = t ] && [ "$(cat "$WS/s.txt")" = s ] || fail "a disjoint change is missing"
}

@test "commit --verify: a failing check keeps the transaction open and unapplied; a passing one commits" {
    snap pre "$WS" --mtime
    begin
    in_tx -c 'echo 1 >version'
    txc commit --json --verify 'echo checking; test "$(cat version)" = 2' "$TID"
    assert_status 1
    assert_json_field outcome verify_failed
    assert_json_field verify.stdout checking
    assert_tree pre "$WS" --mtime
    in_tx -c 'echo 2 >version'
    # the verify command's own writes never reach the workspace
    txc commit --json --verify 'test "$(cat version)" = 2 && echo ok && echo junk >verify-junk' "$TID"
    assert_status 0
    assert_json_field outcome committed
    assert_json_field verify.stdout ok
    [ "$(cat "$WS/version")" = 2 ] || fail "not committed"
    [ ! -e "$WS/verify-junk" ] || fail "the verify command's write was committed"
    # its output is in the audit log too
    run --separate-stderr txbox_bin log -C "$WS" --json -n 3
    [[ "$output" == *'echo junk >verify-junk'* ]] || fail "the verify run is not in the log: $output"
}

@test "status lists the open transactions with their names and counts" {
    begin --name first
    local t1="$TID"
    in_tx -c 'echo a >a'
    begin
    txc status --json
    assert_status 0
    [ "$(jget transactions.0.tx transactions.0.name transactions.0.commands transactions.1.tx)" = "$(printf '%s\nfirst\n1\n%s' "$t1" "$TID")" ] ||
        fail "status: $output"
    txc status
    [[ "$output" == *"tx $t1  first"* ]] || fail "status (text): $output"
    txc commit "$t1"
    txc abort "$TID"
    txc status --json
    [ "$(jget transactions)" = "" ] || fail "closed transactions listed: $output"
}

@test "bad input: unknown transaction, bad names, a closed one, --tx with the copy backend" {
    txc commit 999
    assert_txbox_error
    txc rollback --json nope
    assert_txbox_error json
    begin --name 'bad/name' || true
    assert_txbox_error
    begin
    txc savepoint "$TID" '../x'
    assert_txbox_error
    run --separate-stderr txbox_bin run -C "$WS" --tx "$TID" --backend copy -c true
    assert_txbox_error
}

# (the cost of a long transaction's commit is measured in bench/, not here)
@test "a 200-command transaction commits the same state as a 1-command one with the same changes" {
    local n=200 i script=
    begin --name long
    local long="$TID"
    for ((i = 0; i < n; i++)); do
        txbox_bin run -C "$WS" --tx "$long" -c "mkdir -p many/d$((i % 10)); echo $i >many/d$((i % 10))/f$((i % 50))" \
            2>"$BATS_TEST_TMPDIR/err" || fail "command $i: status $?" "$(cat "$BATS_TEST_TMPDIR/err")"
    done
    for ((i = n - 50; i < n; i++)); do
        script+="mkdir -p many2/d$((i % 10)); echo $i >many2/d$((i % 10))/f$((i % 50)); "
    done
    begin --name short
    local short="$TID"
    in_tx -c "$script"
    assert_status 0
    txc status --json
    txc commit --json "$long"
    assert_status 0
    local long_ms
    long_ms="$(jget commit_ms)"
    txc commit --json "$short"
    assert_status 0
    local short_ms
    short_ms="$(jget commit_ms)"
    diff -r "$WS/many" "$WS/many2" || fail "the $n commands did not end in the same state"
    [ "$(find "$WS/many" -type f | wc -l)" = 50 ] || fail "expected 50 files"
    echo "# commit of a $n-command transaction: $long_ms ms; of a 1-command one with the same changes: $short_ms ms" >&3
}
