#!/usr/bin/env bats
# History you can trust: the audit log (log/show/diff), undo (round trips,
# conflicts, --force, redo), gc, and bad input (unknown or malformed ids, a
# damaged or newer audit log, a newer state directory, a journal with a bad
# checksum): a clear error and nothing changed.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    new_ws
    DB="$WS/.txbox/log.db"
}

# sq SQL: rows of a query on the audit log, one line each, columns '|'
# (the rows waiting in log.pending moved in first, as every txbox command
# that opens the log does).
sq() {
    if [ -s "$WS/.txbox/log.pending" ]; then
        "$TXBOX" log -C "$WS" -n 1 >/dev/null 2>&1 || true
    fi
    python3 - "$DB" "$1" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for r in c.execute(sys.argv[2]):
    print("|".join("" if v is None else (v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)) for v in r))
EOF
}

# A change set with every kind of change.
MIXED='printf "more\n" >>README; rm docs/a.txt; rm -r docs/sub; mkdir newdir; printf "n\n" >newdir/f;
rm -r dir_to_file; printf "now a file\n" >dir_to_file; rm file_to_dir; mkdir file_to_dir;
printf "in\n" >file_to_dir/x; chmod 0700 src; chmod 0644 exec.sh; rm link_rel; ln -s README link_rel;
printf "\000\001\002" >bin.dat; setfattr -n user.new -v v xattr.txt; rm fifo'

@test "a commit's row waits in log.pending until a command opens the log; past 256 KiB a commit writes to the log itself" {
    local P="$WS/.txbox/log.pending"
    # (the first commit counts the retained commits in the log: there is
    # no count cached yet)
    commit 'printf "zero\n" >>README'
    [ -s "$WS/.txbox/log.retained" ] || fail "no retention count cached"
    commit 'printf "one\n" >>README; printf x >"$(printf "n\377")"'
    grep -q '"id":2,"outcome":"committed"' "$P" || fail "the row did not wait in log.pending: $(cat "$P" 2>&1)"
    [ "$(python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM tx").fetchone()[0])' "$DB")" = 1 ] ||
        fail "the commit wrote to the log"
    h log --json
    assert_status 0
    [ "$(pj 'd[0]["outcome"]')" = committed ] || fail "$output"
    [ ! -s "$P" ] || fail "not moved into the log: $(cat "$P")"
    h show 2 --json
    assert_status 0
    [ "$(pj 'd["gen"]')" = 2 ] || fail "$output"
    [ "$(pj '" ".join(sorted(w["path"] + ":" + w["kind"] for w in d["write_set"]))')" = 'README:modified n\xff:added' ] || fail "$output"
    [ "$(pj '[w["hash_after"] for w in d["write_set"] if w["path"] == "README"][0]')" = "$(sha256sum <"$WS/README" | cut -d' ' -f1)" ] || fail "$output"
    # 300 KB waiting (one junk line, skipped): the next commit opens the
    # log before its commit point and moves them in
    python3 -c 'import sys; sys.stdout.write("x" * 300000 + "\n")' >"$P"
    commit 'printf "two\n" >>README'
    [ ! -s "$P" ] || fail "a commit past 256 KiB left $(stat -c %s "$P") bytes waiting"
    [ "$(sq "SELECT count(*) FROM tx WHERE outcome='committed'")" = 3 ] || fail "$(sq 'SELECT id, outcome FROM tx')"
}

@test "log, show and diff record a commit: command, cwd, outcome, write set with hashes" {
    snap pre "$WS"
    mkdir -p "$WS/src"
    tx -c "$MIXED"
    assert_status 0
    h log --json
    assert_status 0
    [ "$(pj 'len(d)')" = 1 ] || fail "log: $output"
    [ "$(pj 'd[0]["tx"]')" = 1 ]
    [ "$(pj 'd[0]["outcome"]')" = committed ]
    [ "$(pj 'd[0]["command"][:10]')" = 'printf "mo' ]
    h log
    assert_status 0
    [[ "${lines[0]}" == 1\ *committed* ]] || fail "log line: ${lines[0]}"
    h show 1 --json
    assert_status 0
    [ "$(pj 'd["cwd"]')" = . ] || fail "cwd: $(pj 'd["cwd"]')"
    [ "$(pj 'd["verdict"] is not None and d["protections"] is not None')" = True ]
    [ "$(pj 'd["exit_code"]')" = 0 ]
    [ "$(pj 'd["duration_ms"] > 0 and d["overhead_ms"] >= 0')" = True ]
    # the write set: each path with its kind, and hashes that are the files'
    [ "$(pj '[r["kind"] for r in d["write_set"] if r["path"]=="README"]')" = "['modified']" ]
    [ "$(pj '[r["kind"] for r in d["write_set"] if r["path"]=="docs/sub/b.txt"]')" = "['deleted']" ]
    [ "$(pj '[r["kind"] for r in d["write_set"] if r["path"]=="newdir/f"]')" = "['added']" ]
    [ "$(pj 'sorted(r["kind"] for r in d["write_set"] if r["path"]=="dir_to_file")')" = "['added', 'deleted']" ]
    [ "$(pj '[r["kind"] for r in d["write_set"] if r["path"]=="dir_to_file/inner/y"]')" = "['deleted']" ]
    [ "$(pj '[(r["mode_before"], r["mode_after"]) for r in d["write_set"] if r["path"]=="exec.sh"]')" = "[(493, 420)]" ]
    want="$(sha256sum <"$WS/README" | cut -d' ' -f1)"
    [ "$(pj '[r["hash_after"] for r in d["write_set"] if r["path"]=="README"][0]')" = "$want" ]
    want="$(printf 'hello\nworld\n' | sha256sum | cut -d' ' -f1)"
    [ "$(pj '[r["hash_before"] for r in d["write_set"] if r["path"]=="README"][0]')" = "$want" ]
    [ "$(pj '[r["size_after"] for r in d["write_set"] if r["path"]=="bin.dat"][0]')" = 3 ]
    h show 1
    assert_status 0
    [[ "$output" == *"write set ("* ]] && [[ "$output" == *"newdir/f"* ]] || fail "$output"
    h diff 1
    assert_status 0
    [[ "$output" == *$'\n+more'* ]] || fail "no +more in: $output"
    [[ "$output" == *$'--- a/docs/a.txt\n+++ /dev/null'* ]] || fail "deleted file not diffed: $output"
    [[ "$output" == *"binary bin.dat: 0 -> 3 bytes"* ]] || fail "binary summary missing: $output"
    [[ "$output" == *"old mode 0755"* ]] || fail "mode change missing: $output"
}

@test "every outcome is logged, with its command, cwd and exit status" {
    tx -c 'echo x >a; exit 3'
    assert_status 3
    tx --timeout 0.5 -c 'echo y >b; sleep 30'
    assert_status 124
    tx -c 'true'
    assert_status 0
    tx -c 'rm -rf /'
    assert_status 122
    (cd "$WS/src" && txbox_bin run -C "$WS" -c 'printf "x\n" >here') || fail "run in src failed"
    h log --json
    [ "$(pj '[(e["tx"], e["outcome"]) for e in d]')" = "[('5', 'committed'), ('4', 'blocked'), ('3', 'read_only'), ('2', 'timed_out'), ('1', 'rolled_back')]" ] ||
        fail "$output"
    [ "$(pj 'd[0]["cwd"]')" = src ] || fail "cwd: $output"
    [ -f "$WS/src/here" ]
    h show 1 --json
    [ "$(pj 'd["exit_code"]')" = 3 ]
    [ "$(pj 'd["command"]')" = 'echo x >a; exit 3' ]
    h diff 1
    assert_status 0
    [[ "$output" == *"rolled_back; it applied no change"* ]] || fail "$output"
    (cd "$WS/src" && txbox_bin run -C "$WS" -c 'rm -rf /') && fail "rm -rf / was not blocked"
    h show 6 --json
    [ "$(pj 'd["outcome"]')" = blocked ] || fail "$output"
    [ "$(pj 'd["command"]')" = 'rm -rf /' ] || fail "blocked command logged without its text: $output"
    [ "$(pj 'd["cwd"]')" = src ] || fail "blocked command logged without its cwd: $output"
}

@test "undo round trip: N transactions undone one by one in reverse give back the first state exactly" {
    snap first "$WS" --mtime
    commit "$MIXED"
    commit 'printf "again\n" >>README; rm -r newdir; mkdir -p deep/x/y; printf "z\n" >deep/x/y/z; chmod 0750 docs'
    commit 'printf "third\n" >>README; mv src/main.c src/main2.c; rm link_dir; mkdir link_dir; rm dir_to_file'
    commit 'rm -r deep; printf "new\n" >file_to_dir/x; printf "q\n" >"sp ace.txt"'
    commit 'rm README; mkdir README; touch README/inside'
    snap last "$WS" --mtime
    for i in 1 2 3 4 5; do
        h undo
        assert_status 0
    done
    assert_tree first "$WS" --mtime
    h undo
    assert_status 125
    [[ "${stderr_lines[0]}" == "txbox: nothing to undo"* ]] || fail "$stderr"
    # the undos are logged as transactions of their own
    h log --json
    [ "$(pj '[e["undo_of"] for e in d[:5]]')" = "['1', '2', '3', '4', '5']" ] || fail "$output"
    [ "$(pj '[e["undone_by"] for e in d[5:]]')" = "['6', '7', '8', '9', '10']" ] || fail "$output"
    # and redone: undo the undos, newest first
    for t in 10 9 8 7 6; do
        h undo "$t"
        assert_status 0
    done
    assert_tree last "$WS" --mtime
}

@test "undo in the middle without a later conflicting transaction" {
    commit 'printf "one\n" >>README'
    commit 'printf "two\n" >>docs/a.txt; mkdir t2; printf "t\n" >t2/f'
    commit 'printf "three\n" >>src/main.c'
    make_ref "$WS" "$BATS_TEST_TMPDIR/ref" 'printf "a\n" >docs/a.txt; rm -r t2'
    snap ref "$BATS_TEST_TMPDIR/ref"
    h undo 2
    assert_status 0
    assert_tree ref "$WS"
    h show 2 --json
    [ "$(pj 'd["undone_by"]')" = 4 ]
}

@test "undo in the middle with a later conflicting transaction refuses and names it; --force undoes" {
    commit 'printf "one\n" >>README; printf "x\n" >other'
    commit 'printf "two\n" >>README'
    snap before "$WS" --mtime
    h undo 1
    assert_status 123
    [[ "$stderr" == *"README (tx 2: changed since on the same lines)"* ]] ||
        fail "the conflict does not name README and tx 2: $stderr"
    [[ "$stderr" == "txbox: cannot undo transaction 1"* ]] || fail "$stderr"
    assert_tree before "$WS" --mtime
    # the refusal is recorded
    h log --json
    [ "$(pj 'd[0]["outcome"]')" = conflict ]
    h undo 1 --force
    assert_status 0
    [ "$(cat "$WS/README")" = "$(printf 'hello\nworld')" ]
    [ ! -e "$WS/other" ]
    # the forced undo is itself undoable (a redo)
    h undo 4
    assert_status 0
    assert_tree before "$WS" --mtime
}

@test "undo refuses what cannot be undone: twice, a rollback, nothing changed" {
    commit 'printf "one\n" >>README'
    h undo 1
    assert_status 0
    snap s "$WS"
    h undo 1
    assert_status 125
    [[ "$stderr" == *"undone already"* ]] || fail "$stderr"
    tx -c 'echo x >y; exit 1'
    h undo 3
    assert_status 125
    [[ "$stderr" == *"was not committed"* ]] || fail "$stderr"
    assert_tree s "$WS"
}

@test "bad ids for undo, show and diff: a clear error, nothing changed" {
    commit 'printf "one\n" >>README'
    snap s "$WS" --mtime
    for id in 999 abc -1 1x 0 '' 99999999999999999999999 ' 1' '../1'; do
        for cmd in undo show diff; do
            h "$cmd" -- "$id"
            assert_txbox_error || fail "$cmd '$id'"
        done
        h show --json -- "$id"
        assert_txbox_error json || fail "show --json '$id'"
    done
    assert_tree s "$WS" --mtime
    h undo 1 2
    assert_txbox_error
}

@test "a damaged audit log (garbage, truncated, emptied): a clear error, nothing changed, not even by run" {
    commit 'printf "one\n" >>README'
    commit 'printf "two\n" >>README'
    snap s "$WS" --mtime
    sq 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null # everything in the main file
    [ "$(stat -c %s "$DB")" -gt 20000 ] || fail "the log is too small to damage: $(stat -c %s "$DB")"
    cp "$DB" "$BATS_TEST_TMPDIR/good.db"
    for damage in garbage truncated empty; do
        cp "$BATS_TEST_TMPDIR/good.db" "$DB"
        rm -f "$DB-wal" "$DB-shm"
        if [ $damage = garbage ]; then
            head -c 20000 /dev/urandom >"$DB"
        elif [ $damage = empty ]; then
            : >"$DB" # a new log would silently drop the history
        else
            truncate -s 9000 "$DB"
        fi
        for cmd in log "show 1" "diff 1" "undo" "gc"; do
            h $cmd
            assert_txbox_error || fail "[$damage] $cmd"
            [[ "$stderr" == *"audit log"* ]] || fail "[$damage] $cmd: $stderr"
        done
        tx -c 'printf "three\n" >>README'
        assert_txbox_error || fail "[$damage] run"
        [[ "$stderr" == *"commit refused"* ]] || fail "[$damage] run: $stderr"
        assert_tree s "$WS" --mtime
    done
}

@test "a log another process is making (empty for a moment) is waited for, not called truncated" {
    commit 'printf "one\n" >>README'
    h log --json
    assert_status 0
    sq 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null
    cp "$DB" "$BATS_TEST_TMPDIR/good.db"
    rm -f "$DB-wal" "$DB-shm"
    : >"$DB" # its first open made the file; its schema comes a moment later
    (
        sleep 0.3
        cp "$BATS_TEST_TMPDIR/good.db" "$DB"
    ) </dev/null >/dev/null 2>&1 3>&- &
    local maker=$!
    h log --json
    wait "$maker"
    assert_status 0
    [ "$(pj 'd[0]["outcome"]')" = committed ] || fail "$output $stderr"
}

@test "an audit log from a newer txbox: a clear error, nothing changed" {
    commit 'printf "one\n" >>README'
    snap s "$WS" --mtime
    sq 'PRAGMA user_version=99' >/dev/null
    h log
    assert_txbox_error
    [[ "$stderr" == *"schema version 99"*"newer txbox"* ]] || fail "$stderr"
    tx -c 'printf "two\n" >>README'
    assert_txbox_error
    h undo
    assert_txbox_error
    assert_tree s "$WS" --mtime
}

@test "an older audit log is migrated in place, its rows kept" {
    commit 'printf "one\n" >>README'
    # make it a schema-1 database, as the first txbox wrote it
    sq 'DROP TABLE setting' >/dev/null
    sq 'DROP TABLE gc_run' >/dev/null
    sq 'DROP INDEX tx_undo_of' >/dev/null
    sq 'DROP INDEX tx_retained' >/dev/null
    sq 'DROP INDEX change_path_tx' >/dev/null
    sq 'CREATE INDEX change_path ON change(path)' >/dev/null
    sq 'ALTER TABLE tx DROP COLUMN pruned' >/dev/null
    sq 'ALTER TABLE tx DROP COLUMN pruned_bytes' >/dev/null
    sq 'ALTER TABLE tx DROP COLUMN lost_bytes' >/dev/null
    sq 'PRAGMA user_version=1' >/dev/null
    [ "$(sq 'PRAGMA user_version')" = 1 ]
    h log --json
    assert_status 0
    [ "$(pj 'd[0]["command"]')" = 'printf "one\n" >>README' ] || fail "$output"
    [ "$(sq 'PRAGMA user_version')" = 5 ]
    [ "$(sq "SELECT count(*) FROM sqlite_master WHERE name='tx_retained'")" = 1 ]
    [ "$(sq "SELECT group_concat(name) FROM sqlite_master WHERE tbl_name='change' AND type='index'")" = \
        sqlite_autoindex_change_1,change_path_tx ] || fail "change's indexes after the migration"
    [ "$(sq "SELECT count(*) FROM pragma_table_info('tx') WHERE name='pruned'")" = 1 ]
    [ "$(sq "SELECT count(*) FROM pragma_table_info('tx') WHERE name='lost_bytes'")" = 1 ]
    h gc --keep 0
    assert_status 0
}

@test "a .txbox/ from a newer state format: a clear error, nothing changed" {
    commit 'printf "one\n" >>README'
    snap s "$WS" --mtime
    echo "txbox-state 9" >"$WS/.txbox/format"
    for cmd in log "show 1" "diff 1" undo gc; do
        h $cmd
        assert_txbox_error || fail "$cmd"
        [[ "$stderr" == *newer* ]] || fail "$cmd: $stderr"
    done
    assert_tree s "$WS" --mtime
}

@test "a set-up of .txbox/ cut short (no format file yet) is finished by the next txbox, never an error" {
    # What a crash between the mkdir of .txbox and the link of its format
    # file leaves (the crash matrix's SIGKILL at 0.05 s hit this once).
    mkdir -p "$WS/.txbox/tx" "$WS/.txbox/active"
    printf '*\n' >"$WS/.txbox/.gitignore"
    : >"$WS/.txbox/format.99999"
    snap s "$WS" --mtime
    h recover
    assert_status 0
    grep -qx 'txbox-state [0-9]*' "$WS/.txbox/format" || fail "no format file: $(ls -A "$WS/.txbox")"
    h log
    assert_status 0
    # Anything more than an unfinished set-up is not guessed at.
    rm "$WS/.txbox/format"
    echo x >"$WS/.txbox/tx/stray"
    h recover
    assert_txbox_error
    [[ "$stderr" == *"not a txbox state directory"* ]] || fail "$stderr"
    assert_tree s "$WS" --mtime
}

@test "trash: an ended transaction's scratch is removed while a later command runs, never under another cleaner's lock" {
    commit 'printf "one\n" >>README'
    # another process cleaning (it holds the trash's lock): nothing removed,
    # neither by the run's detached cleaner nor by the next run's
    exec 9<"$WS/.txbox/trash"
    flock 9
    commit 'printf "two\n" >>README'
    [ -d "$WS/.txbox/trash/2.upper" ] && [ -d "$WS/.txbox/trash/2.work" ] || fail "trash: $(ls -A "$WS/.txbox/trash")"
    [ ! -e "$WS/.txbox/tx/2/upper" ] || fail "the upper is still in tx/2"
    mkdir "$WS/.txbox/trash/not-ours"
    snap s "$WS" --mtime
    tx -c 'sleep 0.3'
    assert_status 0
    [ -d "$WS/.txbox/trash/2.upper" ] || fail "removed under another cleaner's lock"
    exec 9<&-
    tx -c 'sleep 0.3'
    assert_status 0
    [ ! -e "$WS/.txbox/trash/2.upper" ] && [ ! -e "$WS/.txbox/trash/2.work" ] ||
        fail "not removed while the command ran: $(ls -A "$WS/.txbox/trash")"
    [ -d "$WS/.txbox/trash/not-ours" ] || fail "removed an entry that is not txbox's"
    assert_tree s "$WS" --mtime
    # a rolled-back upper with a directory its command made unwritable:
    # still removable by the workspace's owner (so is overlay's mode-000
    # work/work)
    exec 9<"$WS/.txbox/trash"
    flock 9
    tx -c 'mkdir -p locked/in && touch locked/in/f && chmod 000 locked/in locked; exit 1'
    assert_status 1
    [ -d "$WS/.txbox/trash/5.upper/locked" ] || fail "trash: $(ls -A "$WS/.txbox/trash")"
    cp -a "$WS/.txbox/trash/5.work" "$BATS_TEST_TMPDIR/work-copy" || fail "overlay's work scratch is unreadable"
    exec 9<&-
    h gc
    assert_status 0
    [ -z "$(ls "$WS/.txbox/trash" | grep -v not-ours)" ] || fail "gc left: $(ls -A "$WS/.txbox/trash")"
    rm -rf "$WS/.txbox/trash" || fail "the trash cannot be removed by its owner"
}

@test "trash: a rolled-back command's upper is removed after txbox exits, by a detached process" {
    snap s "$WS" --mtime
    tx -c 'mkdir -p d && for i in $(seq 300); do echo $i >d/$i; done; exit 1'
    assert_status 1
    # no later command: the run's own detached cleaner removes it
    local i
    for i in $(seq 100); do
        [ -z "$(ls -A "$WS/.txbox/trash")" ] && break
        sleep 0.1
    done
    [ -z "$(ls -A "$WS/.txbox/trash")" ] || fail "still in the trash: $(ls -A "$WS/.txbox/trash")"
    assert_tree s "$WS" --mtime
}

@test "trash: a committed run starts no detached cleaner; a rolled-back one does" {
    # After a commit the trash holds only the emptied upper and the work
    # directory: the detached cleaner's two forks (about 0.5 ms a run)
    # would cost more than the next command's own cleaner does. A big tree
    # already in the trash keeps a cleaner, if one was started, busy long
    # enough to be seen.
    mkdir -p "$WS/.txbox/trash/999.upper"
    (cd "$WS/.txbox/trash/999.upper" && seq 20000 | xargs touch)
    tx -c 'echo x > f'
    assert_status 0
    local p
    for p in $(pgrep -f 'txbox: emptying the trash'); do
        if ls -l "/proc/$p/fd" 2>/dev/null | grep -qF "$WS/.txbox/trash"; then
            fail "a committed run started a detached cleaner ($p)"
        fi
    done
    # the control: a rolled-back run's cleaner is seen the same way
    tx -c 'echo y > g; exit 1'
    assert_status 1
    local seen=
    for p in $(pgrep -f 'txbox: emptying the trash'); do
        ls -l "/proc/$p/fd" 2>/dev/null | grep -qF "$WS/.txbox/trash" && seen=1
    done
    [ -n "$seen" ] || [ ! -e "$WS/.txbox/trash/999.upper" ] ||
        fail "the control: no detached cleaner seen after a rollback, and the big tree is still there"
}

@test "trash: never more than 16 entries after a run, the oldest removed first" {
    for i in $(seq 100 129); do
        mkdir -p "$WS/.txbox/trash/$i.upper/d" && printf 'x\n' >"$WS/.txbox/trash/$i.upper/d/f"
    done
    exec 9<"$WS/.txbox/trash"
    flock 9
    tx -c true
    assert_status 0
    [ "$(ls "$WS/.txbox/trash" | wc -l)" = 30 ] || fail "cleaned under another cleaner's lock"
    exec 9<&-
    # a run that trashes its own scratch enforces the bound at its end
    # (whatever its cleaner got done while the command ran)
    txj -c 'printf "x\n" >>README'
    assert_status 0
    local left own
    own="$(jget tx)"
    # (its own scratch, of a lower id than the entries made up here, came last)
    left="$(ls "$WS/.txbox/trash" | grep -v "^$own\." | sort -n | tr '\n' ' ')"
    [ "$(ls "$WS/.txbox/trash" | wc -l)" -le 16 ] || fail "more than 16 left: $left"
    [ -z "$left" ] || [ "${left%%.*}" -ge 114 ] || fail "not the oldest first: $left"
}

@test "a journal with a bad checksum is never applied: not by undo, not by recovery" {
    commit 'printf "one\n" >>README'
    snap s "$WS" --mtime
    j="$WS/.txbox/tx/1/journal"
    python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[len(b)//2]^=1; open(p,'wb').write(b)" "$j"
    h undo 1
    assert_txbox_error
    [[ "$stderr" == *"bad checksum"* ]] || fail "$stderr"
    assert_tree s "$WS" --mtime
    # A commit killed right after its commit point (before the first apply
    # rename), its journal then damaged: never applied; recovery rolls it
    # back from the journal's copy (issue 22), the workspace stays as it was.
    run --separate-stderr env TXBOX_FAULT=rename:2:kill "$TXBOX" run -C "$WS" -c 'printf "two\n" >>README; rm secret'
    [ "$status" = 137 ] || fail "the fault did not kill txbox: $status $stderr"
    n="$(ls "$WS/.txbox/journal")"
    [ -n "$n" ] || fail "no journal left"
    python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[40]^=0x10; open(p,'wb').write(b)" "$WS/.txbox/journal/$n"
    h recover
    assert_status 0
    [[ "$output" == *"1 unfinished transaction(s) rolled back"* ]] || fail "$output"
    assert_tree s "$WS" --mtime
    [ -z "$(ls "$WS/.txbox/journal")" ] || fail "the journal was left"
}

@test "gc prunes pre-images oldest first, says what it freed; a pruned transaction cannot be undone" {
    for i in 1 2 3 4; do
        commit "head -c 1000 /dev/zero >>README; printf '$i\n' >f$i"
    done
    h gc --dry-run --keep 2 --json
    assert_status 0
    [ "$(pj '[p["tx"] for p in d["pruned"]]')" = "['1', '2']" ] || fail "$output"
    [ -d "$WS/.txbox/tx/1/undo" ]
    h gc --keep 2
    assert_status 0
    [[ "${lines[0]}" == "pruned tx 1: pre-images, "*" bytes (over the count bound)" ]] || fail "$output"
    [[ "$output" == *"freed 2, "* ]] || fail "$output"
    [ ! -e "$WS/.txbox/tx/1/undo" ] && [ ! -e "$WS/.txbox/tx/2/undo" ] && [ -d "$WS/.txbox/tx/3/undo" ]
    h undo 1
    assert_txbox_error
    [[ "$stderr" == *"pruned"* ]] || fail "$stderr"
    h show 1 --json
    [ "$(pj 'd["pruned"] is not None and d["pruned_bytes"] > 0')" = True ]
    h undo 4
    assert_status 0
    # bytes bound; saved bounds are applied after every commit
    h gc --keep 100 --max-bytes 1 --save --json
    assert_status 0
    [ "$(pj 'd["kept"]["transactions"]')" = 0 ] || fail "$output"
    commit 'printf "5\n" >>README'
    last="$(sq 'SELECT max(id) FROM tx')"
    [ ! -e "$WS/.txbox/tx/$last/undo" ] || fail "the saved bound was not applied after commit $last"
    [ -n "$(sq "SELECT pruned FROM tx WHERE id=$last")" ] || fail "not recorded as pruned" 
    h gc --max-bytes 1x
    assert_txbox_error
}

@test "after a commit, retention prunes once the count bound is exceeded by a tenth, back to the bound" {
    local i unpruned="SELECT count(*) FROM tx WHERE outcome='committed' AND retained_bytes IS NOT NULL AND pruned IS NULL"
    commit "printf '1\\n' >>README"
    h gc --keep 10 --save
    assert_status 0
    for i in $(seq 2 11); do
        commit "printf '$i\\n' >>README"
    done
    # 11 retained: within the tenth (10 + 1), nothing pruned yet
    [ "$(sq "$unpruned")" = 11 ] || fail "pruned too early: $(sq "$unpruned") retained"
    [ -d "$WS/.txbox/tx/1/undo" ] || fail "tx 1's pre-images are gone after 11 commits"
    commit "printf '12\\n' >>README"
    # 12 > 11: pruned back to 10, oldest first
    [ "$(sq "$unpruned")" = 10 ] || fail "not pruned back to 10: $(sq "$unpruned") retained"
    [ ! -e "$WS/.txbox/tx/1/undo" ] && [ ! -e "$WS/.txbox/tx/2/undo" ] && [ -d "$WS/.txbox/tx/3/undo" ] ||
        fail "the oldest two were not the ones pruned"
}

@test "undo crash-safety: killed at any point, recovery leaves it not done or done, never half" {
    commit "$MIXED"
    snap post "$WS" --mtime
    cp -a "$WS" "$BATS_TEST_TMPDIR/t0"
    h undo
    assert_status 0
    snap undone "$WS" --mtime
    local n seen=""
    for n in $(seq 1 200); do
        rm -rf "$WS"
        cp -a "$BATS_TEST_TMPDIR/t0" "$WS"
        run --separate-stderr env TXBOX_FAULT="any:$n:kill" "$TXBOX" undo -C "$WS"
        [ "$status" = 0 ] && break
        [ "$status" = 137 ] || fail "fault point $n: not killed: $status $stderr"
        h recover
        assert_status 0
        if same_tree post "$(snap now "$WS" --mtime && echo now)" 2>/dev/null; then
            seen="$seen pre"
            h undo
            assert_status 0
            assert_tree undone "$WS" --mtime
        else
            same_tree undone now || fail "fault point $n: neither before nor after the undo"
            seen="$seen post"
        fi
        [ -z "$(ls "$WS/.txbox/journal")" ] || fail "fault point $n: a journal was left"
    done
    [ "$status" = 0 ] || fail "the undo never finished"
    [[ "$seen" == *pre* && "$seen" == *post* ]] || fail "not killed both before and after the commit point:$seen"
}

@test "log --since T: the transactions that started or ended at or after T; a bad T is a clean error" {
    commit 'echo a >since_a'
    commit 'echo b >since_b'
    # T: between the two, from the log's own times
    h log --json
    assert_status 0 || return 1
    T=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("%.6f" % ((r[1]["finished"] + r[0]["started"]) / 2))' "$output")
    h log --json --since "$T"
    assert_status 0 || return 1
    [ "$(python3 -c 'import json,sys; print(" ".join(r["tx"] + ":" + r["command"] for r in json.loads(sys.argv[1])))' "$output")" = "2:echo b >since_b" ] ||
        fail "--since $T: $output"
    h log --since "$T"
    assert_status 0 || return 1
    [ "${#lines[@]}" = 1 ] && [[ "${lines[0]}" == "2 "*"echo b >since_b" ]] || fail "$output"
    h log --json --since 0
    [ "$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$output")" = 2 ] || fail "$output"
    for bad in x -1 1e9 1.5.2 "" 1. 9999999999999; do
        h log --since "$bad"
        assert_txbox_error || fail "--since '$bad'"
    done
}

@test "the audit row's hashes are sha256sum's: an empty file, a small one, a link" {
    txj -c ': >empty; printf x >small; ln -s small link; mkdir -p d/e && : >d/empty2 && printf abc >d/e/f && ln -s e/f d/l2'
    assert_status 0
    local id
    id="$(jget tx)"
    h show "$id" --json
    assert_status 0
    local f want got
    want="$(printf e/f | sha256sum | cut -d' ' -f1)"
    [ "$(pj "[w['hash_after'] for w in d['write_set'] if w['path'] == 'd/l2'][0]")" = "$want" ] || fail "d/l2: $output"
    for f in empty small d/empty2 d/e/f; do
        want="$(sha256sum <"$WS/$f" | cut -d' ' -f1)"
        got="$(pj "[w['hash_after'] for w in d['write_set'] if w['path'] == '$f'][0]")"
        [ "$got" = "$want" ] || fail "$f: $got, sha256sum says $want"
    done
    want="$(printf small | sha256sum | cut -d' ' -f1)"
    [ "$(pj "[w['hash_after'] for w in d['write_set'] if w['path'] == 'link'][0]")" = "$want" ] || fail "link: $output"
}
