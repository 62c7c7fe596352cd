#!/usr/bin/env bats
# Never half-applied, never wedged (issue 22): what the filesystem refuses
# in the middle of an apply is found before the commit point, what still
# fails after it is rolled back from the pre-images, and a journal damaged
# after a crash is rolled back from its copy. Every case ends exactly in the
# pre-state or the post-state, with a status and a message that say which.

load ../lib/common

setup() {
    CHANGE='for i in 1 2 3 4 5 6 7 8; do echo new$i >f$i; done; rm f9; mkdir nd; echo n >nd/x; echo m >>sub/s; chmod 700 sub'
}

teardown() {
    # immutable or append-only leftovers would keep bats from cleaning up
    if is_root; then
        for d in "${WS:-}" "$BATS_TEST_TMPDIR/w"; do
            [ -n "$d" ] && [ -d "$d" ] && { chattr -R -i -a "$d" 2>/dev/null || true; }
        done
    fi
    wipe "$BATS_TEST_TMPDIR/w"
    wipe "$BATS_TEST_TMPDIR/last"
}

populate_faults() {
    mkdir -p "$1/sub"
    (
        cd "$1" || exit 1
        for i in 1 2 3 4 5 6 7 8 9; do echo old$i >f$i; done
        echo s >sub/s
        touch -d '2021-02-03 04:05:06' f1 sub sub/s .
    ) || fail "populate_faults failed"
}

# digest DIR: the tree's digest, mtimes included (the pre-state is restored
# exactly); pdigest DIR: without them (the post-state's new entries have the
# times they were written).
digest() { "$TREESUM" --mtime "$1"; }
pdigest() { "$TREESUM" "$1"; }

# removes a copy (overlay's work directory has a mode-000 directory)
wipe() {
    [ -e "$1" ] || return 0
    chmod -R u+rwX "$1" 2>/dev/null
    rm -rf "$1"
}

# a workspace with its state directory made (which changes the root's mtime)
faults_ws() {
    POPULATE=populate_faults new_ws "$@"
    "$TXBOX" run -C "$WS" -c true >/dev/null 2>&1 || fail "txbox run true failed"
}

@test "append-only and immutable entries (the file, its directory) are refused before the commit point" {
    is_root || skip "chattr +a/+i needs CAP_LINUX_IMMUTABLE (root)"
    faults_ws
    pre="$(digest "$WS")"
    chattr +a "$WS/f2" || need "chattr +a not supported here"
    # appending is what an append-only file allows, in the sandbox as plainly
    run --separate-stderr txbox_bin run -C "$WS" -c 'echo y >>f1; echo m >>f2; echo z >f3'
    chattr -a "$WS/f2"
    [ "$status" = 125 ] || fail "append-only file: status $status; stderr: $stderr"
    [[ "$stderr" == *"f2 is append-only"*"nothing was changed"* ]] || fail "stderr: $stderr"
    [ "$(digest "$WS")" = "$pre" ] || fail "append-only file: the workspace changed"

    chattr +i "$WS/sub"
    run --separate-stderr txbox_bin run -C "$WS" -c 'echo y >f1; echo z >>sub/s'
    chattr -i "$WS/sub"
    [ "$status" = 125 ] || fail "immutable directory: status $status; stderr: $stderr"
    [[ "$stderr" == *"sub is immutable"* ]] || fail "stderr: $stderr"
    [ "$(digest "$WS")" = "$pre" ] || fail "immutable directory: the workspace changed"

    chattr +a "$WS/sub"
    run --separate-stderr txbox_bin run -C "$WS" -c 'echo y >f1; rm sub/s'
    chattr -a "$WS/sub"
    [ "$status" -ne 0 ] || fail "append-only directory: committed"
    [ "$(digest "$WS")" = "$pre" ] || fail "append-only directory: the workspace changed"

    # nothing left behind: the next transaction commits
    tx -c 'echo next >f1'
    [ "$status" = 0 ] || fail "next run: status $status; stderr: $stderr"
    [ "$(cat "$WS/f1")" = next ] && [ -z "$(ls "$WS/.txbox/journal")" ] || fail "next run did not commit"
}

@test "an immutable or append-only state directory is refused before the commit point: 125 is true" {
    is_root || skip "chattr +a/+i needs CAP_LINUX_IMMUTABLE (root)"
    faults_ws
    tx -c true
    pre="$(digest "$WS")"
    for d in .txbox .txbox/commits .txbox/journal .txbox/tx; do
        for a in +i +a; do
            chattr "$a" "$WS/$d"
            run --separate-stderr txbox_bin run -C "$WS" -c "$CHANGE"
            chattr "${a/+/-}" "$WS/$d"
            [ "$status" = 125 ] || fail "$a $d: status $status; stderr: $stderr"
            [[ "$stderr" == *"nothing was changed"* || "$stderr" == *"Operation not permitted"* ]] ||
                fail "$a $d: stderr: $stderr"
            [ "$(digest "$WS")" = "$pre" ] || fail "$a $d: exit 125 but the workspace changed"
        done
    done
    tx -c "$CHANGE"
    [ "$status" = 0 ] || fail "afterwards: status $status; stderr: $stderr"
}

# ---------------------------------------------------------------------------
# Every way into a commit, as data: commit_via CALLER sets the workspace up so
# that one txbox command commits $CHANGE that way, and prints that command
# (its arguments after the binary), one a line; commit_post CALLER is the
# tree that command gives. The callers: run, multi (a multi-command
# transaction's commit), approve (a held transaction's), undo (of $CHANGE's
# commit). The matrices below take each.
CALLERS="run multi approve undo"
HOOK='mkdir -p .git/hooks; echo c >.git/hooks/pre-rebase'

commit_via() {
    local id
    case "$1" in
    run) printf '%s\n' run -C "$WS" -c "$CHANGE" ;;
    multi)
        id="$("$TXBOX" begin -C "$WS")" || return 1
        "$TXBOX" run -C "$WS" --tx "$id" -c "$CHANGE" >/dev/null 2>&1 || return 1
        printf '%s\n' commit -C "$WS" "$id"
        ;;
    approve) # a hook: held by the default rule git-hooks
        id="$("$TXBOX" run -C "$WS" --json -c "$CHANGE; $HOOK" 2>/dev/null | jq -r .tx)" || return 1
        [ -d "$WS/.txbox/tx/$id/upper" ] || return 1
        printf '%s\n' approve -C "$WS" "$id"
        ;;
    undo)
        "$TXBOX" run -C "$WS" -c "$CHANGE" >/dev/null 2>&1 || return 1
        printf '%s\n' undo -C "$WS"
        ;;
    esac
}

# commit_post CALLER PRE_DIR: the tree (pdigest) the caller's command gives
# from the workspace PRE_DIR was before commit_via.
commit_post() {
    case "$1" in
    undo) pdigest "$2" ;;
    approve) make_ref "$2" "$BATS_TEST_TMPDIR/ref.$1" "$CHANGE; $HOOK" && pdigest "$BATS_TEST_TMPDIR/ref.$1" ;;
    *) make_ref "$2" "$BATS_TEST_TMPDIR/ref.$1" "$CHANGE" && pdigest "$BATS_TEST_TMPDIR/ref.$1" ;;
    esac
}

# What the filesystem refuses is refused before the commit point whoever
# commits: an immutable or append-only directory the commit writes into, for
# every caller. Nothing is applied, no journal is left, the status is 125 and
# the message names the entry; with the attribute gone the same command then
# commits (the transaction was left as it was: open, held, undoable).
@test "an immutable or append-only directory is refused before the commit point by every commit path" {
    is_root || skip "chattr +a/+i needs CAP_LINUX_IMMUTABLE (root)"
    local caller attr errs=() cmd pre post before
    # (no chmod of sub: a run's command meets the attribute in the sandbox)
    CHANGE='for i in 1 2 3; do echo new$i >f$i; done; rm f9; mkdir nd; echo n >nd/x; echo m >>sub/s'
    for caller in $CALLERS; do
        for attr in +i +a; do
            POPULATE=populate_faults new_ws "ws.$caller$attr"
            "$TXBOX" run -C "$WS" -c true >/dev/null 2>&1 || fail "txbox run true failed"
            before="$BATS_TEST_TMPDIR/before.$caller$attr"
            cp -a "$WS" "$before"
            mapfile -t cmd < <(commit_via "$caller") || fail "[$caller] set-up failed"
            [ "${#cmd[@]}" -gt 2 ] || { errs+=("[$caller] set-up failed"); continue; }
            post="$(commit_post "$caller" "$before")"
            pre="$(digest "$WS")"
            chattr "$attr" "$WS/sub" || need "chattr $attr not supported here"
            run --separate-stderr txbox_bin "${cmd[@]}"
            chattr "${attr/+/-}" "$WS/sub"
            local what="immutable"
            [ "$attr" = +a ] && what="append-only"
            [ "$status" = 125 ] || errs+=("[$caller $attr] status $status, not 125; stderr: $(clip "$stderr")")
            [[ "$stderr" == *"sub is $what"*"nothing was changed"* ]] ||
                errs+=("[$caller $attr] stderr: $(clip "$stderr")")
            [ "$(digest "$WS")" = "$pre" ] || errs+=("[$caller $attr] the workspace changed")
            [ -z "$(ls "$WS/.txbox/journal")" ] || errs+=("[$caller $attr] a journal was left: $(ls "$WS/.txbox/journal")")
            # nothing for recovery to roll forward later
            "$TXBOX" recover -C "$WS" >/dev/null 2>&1
            [ "$(digest "$WS")" = "$pre" ] || errs+=("[$caller $attr] recovery changed the workspace afterwards")
            # the same command commits once the attribute is gone
            run --separate-stderr txbox_bin "${cmd[@]}"
            [ "$status" = 0 ] && [ "$(pdigest "$WS")" = "$post" ] ||
                errs+=("[$caller $attr] afterwards: status $status, $([ "$(pdigest "$WS")" = "$post" ] && echo post || echo "not the post-state"); stderr: $(clip "$stderr")")
            wipe "$before"
        done
    done
    [ "${#errs[@]}" = 0 ] || fail "${errs[@]}"
}

# Every fault point of the commit (any file operation, counted from the
# lock), failed with ENOSPC or EIO: the run either commits (status 0,
# the post-state) or fails with the pre-state, and leaves nothing for
# recovery to do; the next run commits.
@test "a failure at any step of the commit ends exactly before (125) or after (0), never wedged" {
    faults_ws base
    make_ref "$WS" "$BATS_TEST_TMPDIR/ref" "$CHANGE"
    pre="$(digest "$WS")"
    post="$(pdigest "$BATS_TEST_TMPDIR/ref")"
    errs=()
    local before=0 after=0 rolled=0
    # ENOSPC at every other point, EIO (another errno, the same paths) at
    # every third, from another start: together most points, in a minute or two
    for act in ENOSPC EIO; do
        ok_in_row=0
        first=1 step=2
        [ "$act" = EIO ] && first=2 step=3
        for n in $(seq "$first" "$step" 80); do
            wipe "$BATS_TEST_TMPDIR/w"
            cp -a "$WS" "$BATS_TEST_TMPDIR/w"
            run --separate-stderr env TXBOX_FAULT="any:$n:$act" "$TXBOX" run -C "$BATS_TEST_TMPDIR/w" -c "$CHANGE"
            now="$(digest "$BATS_TEST_TMPDIR/w")"
            if [ "$status" = 0 ] && [ "$(pdigest "$BATS_TEST_TMPDIR/w")" = "$post" ]; then
                after=$((after + 1))
                ok_in_row=$((ok_in_row + 1))
                [ "$ok_in_row" -ge 3 ] && break
                continue
            fi
            ok_in_row=0
            if [ "$status" != 125 ] || [ "$now" != "$pre" ]; then
                errs+=("any:$n:$act: status $status, state $([ "$(pdigest "$BATS_TEST_TMPDIR/w")" = "$post" ] && echo post || echo mixed); stderr: $(clip "$stderr")")
                continue
            fi
            before=$((before + 1))
            [[ "$stderr" == *"rolled back"* ]] && rolled=$((rolled + 1))
            [ -z "$(ls "$BATS_TEST_TMPDIR/w/.txbox/journal")" ] || errs+=("any:$n:$act: a journal was left")
            run --separate-stderr "$TXBOX" run -C "$BATS_TEST_TMPDIR/w" -c "$CHANGE"
            [ "$status" = 0 ] && [ "$(pdigest "$BATS_TEST_TMPDIR/w")" = "$post" ] ||
                errs+=("any:$n:$act: the next run: status $status; stderr: $(clip "$stderr")")
        done
    done
    echo "# before $before, after $after, rolled back past the commit point $rolled" >&3
    [ "${#errs[@]}" = 0 ] || fail "${errs[@]}"
    [ "$rolled" -ge 8 ] || fail "only $rolled failures past the commit point were rolled back"
}

# Killed at every step of the apply, then the journal damaged: recovery
# rolls back from the journal's copy and the pre-images.
@test "a journal damaged after a kill mid-apply: recovery rolls back from the pre-images" {
    faults_ws base
    make_ref "$WS" "$BATS_TEST_TMPDIR/ref" "$CHANGE"
    pre="$(digest "$WS")"
    post="$(pdigest "$BATS_TEST_TMPDIR/ref")"
    errs=()
    local damaged=0
    for n in $(seq 1 2 80); do
        w="$BATS_TEST_TMPDIR/w"
        wipe "$w"
        cp -a "$WS" "$w"
        run --separate-stderr env TXBOX_FAULT="any:$n:kill" "$TXBOX" run -C "$w" -c "$CHANGE"
        [ "$status" = 0 ] && break
        [ "$status" = 137 ] || { errs+=("any:$n:kill: status $status"); continue; }
        j="$(ls "$w/.txbox/journal" | grep -E '^[0-9]+$' || true)"
        if [ -n "$j" ]; then
            printf 'XXXXXXXX' | dd of="$w/.txbox/journal/$j" bs=1 seek=60 conv=notrunc status=none
            damaged=$((damaged + 1))
        fi
        run --separate-stderr "$TXBOX" recover -C "$w"
        [ "$status" = 0 ] || { errs+=("any:$n:kill: recover: status $status; stderr: $(clip "$stderr")"); continue; }
        now="$(digest "$w")"
        if [ -n "$j" ] && [ "$now" != "$pre" ]; then
            errs+=("any:$n:kill: damaged journal, state after recovery is not the pre-state")
        elif [ "$now" != "$pre" ] && [ "$(pdigest "$w")" != "$post" ]; then
            errs+=("any:$n:kill: mixed state after recovery")
        fi
        # not wedged: the next run commits
        run --separate-stderr "$TXBOX" run -C "$w" -c 'echo next >f1'
        [ "$status" = 0 ] && [ "$(cat "$w/f1")" = next ] ||
            errs+=("any:$n:kill: the next run: status $status; stderr: $(clip "$stderr")")
    done
    echo "# $damaged journals damaged and rolled back" >&3
    [ "${#errs[@]}" = 0 ] || fail "${errs[@]}"
    [ "$damaged" -ge 5 ] || fail "only $damaged kills past the commit point"
}

@test "a journal and its copy both damaged: recovery says what to do and nothing commits on top" {
    faults_ws
    pre="$(digest "$WS")"
    for n in $(seq 4 40); do
        w="$BATS_TEST_TMPDIR/w"
        wipe "$w"
        cp -a "$WS" "$w"
        run env TXBOX_FAULT="any:$n:kill" "$TXBOX" run -C "$w" -c "$CHANGE"
        j="$(ls "$w/.txbox/journal" | grep -E '^[0-9]+$' || true)"
        [ -n "$j" ] && break
    done
    [ -n "$j" ] || fail "no kill left a journal"
    printf 'XXXXXXXX' | dd of="$w/.txbox/journal/$j" bs=1 seek=60 conv=notrunc status=none
    printf 'XXXXXXXX' | dd of="$w/.txbox/tx/$j/intent" bs=1 seek=60 conv=notrunc status=none
    mixed="$(digest "$w")"
    run --separate-stderr "$TXBOX" recover -C "$w"
    [ "$status" -ne 0 ] || fail "recover succeeded on an unrecoverable journal"
    [[ "$stderr" == *"bad checksum"*".txbox/tx/$j/undo"*"remove .txbox/journal/$j"* ]] || fail "stderr: $stderr"
    run --separate-stderr "$TXBOX" run -C "$w" -c 'echo on-top >f1'
    [ "$status" -ne 0 ] || fail "a run committed on top of a mixed workspace"
    [ "$(digest "$w")" = "$mixed" ] || fail "the workspace changed"
}

# Killed past the commit point, then a directory it changes made immutable:
# the journal can be neither finished nor rolled back. It holds its paths
# (a run that writes one gets a conflict naming it), every other run goes
# on, gc leaves what it needs, and once the attribute is gone `txbox
# recover` finishes it, numbered after the runs that committed meanwhile.
# At every kill point of the apply where that happens.
@test "a transaction neither finished nor rolled back holds only its paths; recover finishes it later" {
    is_root || skip "chattr +i needs CAP_LINUX_IMMUTABLE (root)"
    faults_ws base
    tx -c 'mkdir other; echo o >other/o'
    [ "$status" = 0 ] || fail "setup: status $status; stderr: $stderr"
    make_ref "$WS" "$BATS_TEST_TMPDIR/ref" "$CHANGE; echo z >other/o"
    post="$(pdigest "$BATS_TEST_TMPDIR/ref")"
    make_ref "$WS" "$BATS_TEST_TMPDIR/ref" "echo z >other/o"
    mid="$(pdigest "$BATS_TEST_TMPDIR/ref")"
    gen_of() { "$TXBOX" log -C "$w" --json | jq -r --arg t "$1" '.[] | select(.tx == $t) | .gen'; }
    w="$BATS_TEST_TMPDIR/w"
    local held=0 j t
    errs=()
    for n in $(seq 4 2 80); do
        wipe "$w"
        cp -a "$WS" "$w"
        run env TXBOX_FAULT="any:$n:kill" "$TXBOX" run -C "$w" -c "$CHANGE"
        [ "$status" = 0 ] && break
        j="$(ls "$w/.txbox/journal" | grep -E '^[0-9]+$' || true)"
        [ -n "$j" ] || continue
        chattr +i "$w/sub" || need "chattr +i not supported here"
        run --separate-stderr "$TXBOX" recover -C "$w"
        if [ "$status" = 0 ]; then # rolled forward or back: not this case
            chattr -i "$w/sub"
            continue
        fi
        held=$((held + 1))
        [[ "$stderr" == *"transaction $j: it can neither be finished"*"chattr"*"holds its paths"* ]] ||
            errs+=("$n: recover: stderr: $stderr")
        # every command's own recovery leaves it alone
        run --separate-stderr "$TXBOX" log -C "$w"
        [ "$status" = 0 ] || errs+=("$n: log: status $status; stderr: $stderr")
        # a path it does not touch: committed
        run --separate-stderr "$TXBOX" run -C "$w" --json -c 'echo z >other/o'
        [ "$status" = 0 ] && [ "$(cat "$w/other/o")" = z ] ||
            errs+=("$n: an unrelated path: status $status; stderr: $stderr")
        t="$(jq -r .tx <<<"$output")"
        # one it touches: a conflict that names it; nothing applied
        for cmd in 'echo q >f1' 'rm f9' 'mkdir -p nd; echo q >nd/y'; do
            run --separate-stderr "$TXBOX" run -C "$w" --json -c "$cmd"
            [ "$status" = 123 ] && [ "$(jq -r .outcome <<<"$output")" = conflict ] &&
                [ "$(jq -r .held_by <<<"$output")" = "$j" ] ||
                errs+=("$n: $cmd: status $status; stdout: $(clip "$output"); stderr: $stderr")
        done
        run --separate-stderr "$TXBOX" run -C "$w" -c 'echo q >f2'
        [ "$status" = 123 ] && [[ "$stderr" == *"f2 is held by transaction $j"*"txbox recover"* ]] ||
            errs+=("$n: the conflict's message: status $status; stderr: $stderr")
        if [ "$held" = 1 ]; then # txbox status lists it, with what to fix
            run --separate-stderr "$TXBOX" status -C "$w" --json
            [ "$status" = 0 ] && [ "$(jq -r '.stuck[0].tx' <<<"$output")" = "$j" ] &&
                [[ "$(jq -r '.stuck[0].error' <<<"$output")" == *"neither be finished"*"chattr"* ]] ||
                errs+=("$n: status --json: $status; $output; $stderr")
            run --separate-stderr "$TXBOX" status -C "$w"
            [[ "$output" == *"STUCK: tx $j "*"txbox recover"* ]] || errs+=("$n: status: $output")
        fi
        if [ "$held" = 1 ]; then # a multi-command transaction: the same
            m="$("$TXBOX" begin -C "$w")" || errs+=("$n: begin failed")
            "$TXBOX" run -C "$w" --tx "$m" -c 'echo q >f3' >/dev/null 2>&1 || errs+=("$n: run --tx failed")
            run --separate-stderr "$TXBOX" commit -C "$w" --json "$m"
            [ "$status" = 123 ] && [ "$(jq -r .held_by <<<"$output")" = "$j" ] &&
                [ "$(jq -r '.conflict_paths[0]' <<<"$output")" = f3 ] ||
                errs+=("$n: commit of a multi-command transaction: status $status; $output; $stderr")
        fi
        # gc prunes kept-aside changes, never what the held one still needs
        run --separate-stderr "$TXBOX" gc -C "$w" --keep 0
        [ "$status" = 0 ] || errs+=("$n: gc: status $status; stderr: $stderr")
        chattr -i "$w/sub"
        run --separate-stderr "$TXBOX" recover -C "$w"
        [ "$status" = 0 ] || { errs+=("$n: recover after chattr -i: status $status; stderr: $stderr"); continue; }
        [ "$(pdigest "$w")" = "$post" ] || errs+=("$n: after recovery: not the post-state")
        # numbered after the one committed while it was held
        [ "$(gen_of "$j")" = $(($(gen_of "$t") + 1)) ] ||
            errs+=("$n: generations: held $j: $(gen_of "$j"), meanwhile $t: $(gen_of "$t")")
        wipe "$BATS_TEST_TMPDIR/last"
        cp -a "$w" "$BATS_TEST_TMPDIR/last"
    done
    echo "# $held kill points left a transaction that could be neither finished nor rolled back" >&3
    [ "${#errs[@]}" = 0 ] || fail "${errs[@]}"
    [ "$held" -ge 3 ] || fail "only $held kill points left a stuck transaction"
    # the last one: undo takes back the finished one (its pre-images came
    # after that gc); then the rest works as ever
    w="$BATS_TEST_TMPDIR/last"
    run --separate-stderr "$TXBOX" undo -C "$w"
    [ "$status" = 0 ] || fail "undo of the finished one: status $status; stderr: $stderr"
    [ "$(pdigest "$w")" = "$mid" ] || fail "after the first undo: not the state before it"
    run --separate-stderr "$TXBOX" run -C "$w" -c 'echo next >f1'
    [ "$status" = 0 ] && [ "$(cat "$w/f1")" = next ] || fail "next run: status $status; stderr: $stderr"
}

# The workspace is a directory of another user that the caller may write
# into (root's, mode 1777, as /tmp): the view's copy of it is the caller's,
# which is no change of owner, and the caller may set neither its owner nor
# its times. Unprivileged, the first commit used to fail, and its rollback.
@test "a workspace in another user's shared (1777) directory commits, rolls back and undoes" {
    [ -n "${TXBOX_SHARED_DIR:-}" ] || skip "needs tests/run-integration's shared directory"
    local w="$TXBOX_SHARED_DIR"
    [ "$(stat -c %u:%a "$w")" = 0:1777 ] || fail "test bug: $w is $(stat -c %u:%a "$w")"
    run --separate-stderr "$TXBOX" run -C "$w" --json -c 'echo hi >f; mkdir d; echo y >d/y'
    [ "$status" = 0 ] && [ "$(cat "$w/f")" = hi ] || fail "commit: status $status; $stderr"
    [ "$(jq -c '.changes | [(.added | sort), .modified]' <<<"$output")" = '[["d/","d/y","f"],[]]' ] ||
        fail "changes: $(jq -c .changes <<<"$output")"
    run --separate-stderr "$TXBOX" run -C "$w" -c 'echo x >g; echo more >>f; exit 3'
    [ "$status" = 3 ] && [ ! -e "$w/g" ] && [ "$(cat "$w/f")" = hi ] ||
        fail "rollback: status $status; $stderr"
    run --separate-stderr "$TXBOX" run -C "$w" -c 'echo more >>f'
    [ "$status" = 0 ] || fail "second commit: status $status; $stderr"
    run --separate-stderr "$TXBOX" undo -C "$w"
    [ "$status" = 0 ] && [ "$(cat "$w/f")" = hi ] || fail "undo: status $status; $stderr"
    run --separate-stderr "$TXBOX" undo -C "$w"
    [ "$status" = 0 ] && [ ! -e "$w/f" ] && [ ! -e "$w/d" ] || fail "undo: status $status; $stderr"
    [ -z "$(ls "$w/.txbox/journal")" ] || fail "a journal was left: $(ls "$w/.txbox/journal")"
    [ "$(stat -c %u:%a "$w")" = 0:1777 ] || fail "the directory is now $(stat -c %u:%a "$w")"
}

@test "a command stopped by the write limit is never committed, even when it exits 0" {
    faults_ws
    pre="$(digest "$WS")"
    run --separate-stderr txbox_bin run -C "$WS" --json --max-write 10M -c \
        'dd if=/dev/zero of=big bs=1M count=50 2>/dev/null; echo x >>f1; exit 0'
    # stopped by the file size limit (153, 128+SIGXFSZ), or killed whole by
    # the budget's watch (137) when it saw the writes first
    [ "$status" = 153 ] || [ "$status" = 137 ] || fail "status $status, want 153 or 137; stderr: $stderr"
    [ "$(jget outcome)" = rolled_back ] || fail "outcome: $output"
    [ "$(jget stopped_by)" = "write limit" ] || fail "stopped_by: $output"
    [ "$(digest "$WS")" = "$pre" ] || fail "the workspace changed"
    # the status line says so too
    run --separate-stderr txbox_bin run -C "$WS" --max-write 10M -c \
        'head -c 20000000 /dev/zero >big; echo x >>f1'
    # killed by the budget (137) or stopped by the file size limit (153)
    [ "$status" = 153 ] || [ "$status" = 137 ] || fail "status $status; stderr: $stderr"
    [[ "$stderr" == *"stopped by the write limit and rolled back"* ]] || fail "stderr: $stderr"
    [ "$(digest "$WS")" = "$pre" ] || fail "the workspace changed"
    # no file at the limit: a truncate past it fails (the process that got
    # SIGXFSZ, reaped by the shell, not by txbox), an empty file is left,
    # and the command says success
    run --separate-stderr txbox_bin run -C "$WS" --json --max-write 10M -c \
        'truncate -s 100G sparse; echo x >>f1; exit 0'
    [ "$status" = 153 ] || fail "sparse: status $status, want 153; stderr: $stderr"
    [ "$(jget outcome)" = rolled_back ] && [ "$(jget stopped_by)" = "write limit" ] || fail "sparse: $output"
    [ "$(digest "$WS")" = "$pre" ] || fail "sparse: the workspace changed"
    # the same in a process still running when the command ends (it caught
    # the error and went on)
    run --separate-stderr txbox_bin run -C "$WS" --json --max-write 10M -c \
        'python3 -c "
import os, time
f = os.open(\"sparse\", os.O_WRONLY | os.O_CREAT)
try: os.ftruncate(f, 100 << 30)
except OSError: pass
time.sleep(5)" & sleep 1; echo x >>f1; exit 0'
    # (or killed whole by the budget's watch, 137, when the shared disk's
    # free space fell by the budget meanwhile)
    [ "$status" = 153 ] || [ "$status" = 137 ] || fail "background: status $status; $output"
    [ "$(jget stopped_by)" = "write limit" ] || fail "background: $output"
    [ "$(digest "$WS")" = "$pre" ] || fail "background: the workspace changed"
    # and in a multi-command transaction: the command is not staged
    local id
    id="$("$TXBOX" begin -C "$WS")"
    run --separate-stderr txbox_bin run -C "$WS" --json --tx "$id" --max-write 10M -c \
        'truncate -s 100G sparse; echo x >>f1; exit 0'
    [ "$status" = 153 ] && [ "$(jget outcome)" = rolled_back ] || fail "multi: status $status; $output"
    run --separate-stderr txbox_bin commit -C "$WS" "$id"
    [ "$status" = 0 ] && [ "$(digest "$WS")" = "$pre" ] || fail "multi: its commit applied something: $status"
}

@test "a btrfs subvolume inside the workspace is refused before the commit point, like a mount, by every commit path" {
    is_root || skip "making a btrfs filesystem needs root; the unprivileged user cannot make such a workspace"
    command -v mkfs.btrfs >/dev/null || need "mkfs.btrfs missing (btrfs-progs)"
    grep -qw btrfs /proc/filesystems || modprobe btrfs 2>/dev/null || need "no btrfs in this kernel"
    img="$BATS_TEST_TMPDIR/btrfs.img"
    mnt="$BATS_TEST_TMPDIR/btrfs"
    truncate -s 128M "$img"
    mkfs.btrfs -q "$img" >/dev/null || fail "mkfs.btrfs failed"
    mkdir -p "$mnt"
    mount -o loop "$img" "$mnt" || need "cannot mount a loop device here"
    local errs=() caller cmd pre
    for caller in $CALLERS; do
        WS="$mnt/ws.$caller"
        mkdir -p "$WS"
        echo a >"$WS/a"
        if [ "$caller" = undo ]; then
            # its commit wrote vol/inner; vol is a subvolume since
            mkdir "$WS/vol"
            "$TXBOX" run -C "$WS" -c 'echo inner >vol/inner; echo y >a' >/dev/null 2>&1
            mv "$WS/vol" "$WS/vol.old"
            btrfs subvolume create "$WS/vol" >/dev/null
            cp -a "$WS/vol.old/inner" "$WS/vol/inner"
            rm -rf "$WS/vol.old"
            cmd=(undo -C "$WS")
        else
            btrfs subvolume create "$WS/vol" >/dev/null
            echo inner >"$WS/vol/inner"
            "$TXBOX" run -C "$WS" -c true >/dev/null 2>&1
            CHANGE='echo x >>vol/inner; echo y >a'
            mapfile -t cmd < <(commit_via "$caller")
        fi
        pre="$(digest "$WS")"
        run --separate-stderr txbox_bin "${cmd[@]}"
        [ "$status" = 125 ] || errs+=("[$caller] status $status; stderr: $stderr")
        [[ "$stderr" == *"vol lies on another filesystem or subvolume"*"nothing was changed"* ]] ||
            errs+=("[$caller] stderr: $stderr")
        [ "$(digest "$WS")" = "$pre" ] || errs+=("[$caller] the workspace changed")
        [ -z "$(ls "$WS/.txbox/journal")" ] || errs+=("[$caller] a journal was left")
    done
    # removing the subvolume is refused too; the next run commits
    WS="$mnt/ws.run"
    run --separate-stderr txbox_bin run -C "$WS" -c 'rm -rf vol; echo y >a'
    local st2=$status err2=$stderr
    run --separate-stderr txbox_bin run -C "$WS" -c 'echo z >a'
    local st3=$status content
    content="$(cat "$WS/a")"
    umount "$mnt"
    [ "$st2" = 125 ] || errs+=("removing the subvolume: status $st2; stderr: $err2")
    [ "$st3" = 0 ] && [ "$content" = z ] || errs+=("the next run did not commit (status $st3)")
    [ "${#errs[@]}" = 0 ] || fail "${errs[@]}"
}

@test "a workspace on a filesystem overlay cannot use (overlayfs) is refused by name, with the option that works, and nothing is left there" {
    is_root || skip "mounting an overlayfs workspace needs root"
    local o="$BATS_TEST_TMPDIR/ovl"
    mkdir -p "$o/l" "$o/u" "$o/w" "$o/m"
    mount -t overlay overlay -o "lowerdir=$o/l,upperdir=$o/u,workdir=$o/w" "$o/m" || need "cannot mount overlayfs here"
    echo a >"$o/m/a"
    run --separate-stderr txbox_bin run -C "$o/m" -c 'echo b >a'
    local st=$status err=$stderr
    local left=no
    [ -e "$o/m/.txbox" ] && left=yes
    run --separate-stderr txbox_bin run -C "$o/m" --json -c 'echo b >a'
    local jst=$status jout=$output
    # a read-only command needs no overlay: it runs as anywhere
    run --separate-stderr txbox_bin run -C "$o/m" -c 'cat a'
    local rst=$status rout=$output
    run --separate-stderr txbox_bin run -C "$o/m" --backend copy -c 'echo c >a'
    local cst=$status content
    content="$(cat "$o/m/a")"
    umount "$o/m"
    [ "$st" = 125 ] || fail "status $st; stderr: $err"
    [[ "$err" == "txbox: the workspace $o/m is on overlayfs"*"--backend copy"* ]] || fail "stderr: $err"
    [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || fail "more than one line: $err"
    [ "$left" = no ] || fail "a .txbox was left behind"
    [ "$jst" = 125 ] && [[ "$jout" == '{"error":'*overlayfs* ]] || fail "--json: status $jst, $jout"
    [ "$rst" = 0 ] && [ "$rout" = a ] || fail "a read-only command was refused too: status $rst, $rout"
    [ "$cst" = 0 ] && [ "$content" = c ] || fail "--backend copy did not commit (status $cst, a: $content)"
}

@test "a command that hit the process limit and exited 0 is rolled back, stopped_by 'process limit'" {
    # Forks refused at --pids are counted by the transaction's cgroup (root);
    # an unprivileged run's RLIMIT_NPROC leaves no such count.
    is_root || skip "the process limit is a cgroup only as root"
    WS="$BATS_TEST_TMPDIR/pl"
    populate_faults "$WS"
    pre="$(digest "$WS")"
    txj --pids 24 -c 'for i in $(seq 60); do (sleep 2 &) 2>/dev/null; done 2>/dev/null; echo done > f; exit 0'
    [ "$(jget outcome)" = rolled_back ] || fail "outcome $(jget outcome); stopped_by $(jget stopped_by)"
    [ "$(jget stopped_by)" = "process limit" ] || fail "stopped_by: $(jget stopped_by)"
    [ "$status" != 0 ] || fail "status 0"
    [ "$(digest "$WS")" = "$pre" ] || fail "the workspace changed"
    tx --pids 24 -c 'echo fine > g'
    assert_status 0
    [ -e "$WS/g" ] || fail "a run under the limit did not commit"
}

@test "as an unprivileged user, moving a root-owned file fails inside (EOVERFLOW) and the result says why" {
    # root sets the scene; the run is the unprivileged test user's
    is_root || skip "only root can give the workspace a root-owned file"
    local u="${TXBOX_TEST_USER:-txbox-test}" d
    id "$u" >/dev/null 2>&1 || need "no test user $u"
    # (a directory the user can reach: bats' own is root's)
    d="$(mktemp -d "${TXBOX_ESCAPE_DIR:-/var/tmp}/txbox-eoverflow.XXXXXX")"
    mkdir -p "$d/ws"
    echo mine >"$d/ws/mine"
    echo root >"$d/ws/rootfile"
    chown -R "$u:$u" "$d"
    chown root:root "$d/ws/rootfile"
    cp "$TXBOX" "$d/txbox" # (the checkout may be out of the user's reach)
    chmod 0755 "$d" "$d/txbox"
    run --separate-stderr runuser -u "$u" -- "$d/txbox" run -C "$d/ws" --json -c 'mv rootfile moved'
    local kept=no
    [ -e "$d/ws/rootfile" ] && [ ! -e "$d/ws/moved" ] && kept=yes
    rm -rf "$d"
    [ "$status" != 0 ] || fail "the move committed? $output"
    [ "$kept" = yes ] || fail "the workspace changed"
    [[ "$(jget hint)" == *"owned by another user"*EOVERFLOW* ]] || fail "no hint: $output"
}

@test "the state directory removed during the apply: the error says what happened and what is lost; later runs work" {
    faults_ws
    TXBOX_FAULT=rename:4:stop "$TXBOX" run -C "$WS" -c "$CHANGE" >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" &
    local pid=$! i st=
    for i in $(seq 300); do
        st="$(awk '/^State:/ {print $2}' /proc/$pid/status 2>/dev/null)"
        [ "$st" = T ] && break
        sleep 0.05
    done
    [ "$st" = T ] || { kill -CONT "$pid" 2>/dev/null; wait "$pid"; fail "txbox never stopped at the fault point: $(cat "$BATS_TEST_TMPDIR/err")"; }
    # (as a user, overlay's work/work has mode 000: wipe gives it back)
    wipe "$WS/.txbox"
    local gone=yes
    [ -e "$WS/.txbox" ] && gone=no
    kill -CONT "$pid"
    local rc=0
    wait "$pid" || rc=$?
    [ "$gone" = yes ] || fail "the test could not remove .txbox"
    [ "$rc" = 125 ] || fail "status $rc: $(cat "$BATS_TEST_TMPDIR/err")"
    grep -qE "state directory .txbox was removed while transaction [0-9]+ was being applied" "$BATS_TEST_TMPDIR/err" ||
        fail "stderr: $(cat "$BATS_TEST_TMPDIR/err")"
    [ "$(wc -l <"$BATS_TEST_TMPDIR/err")" = 1 ] || fail "more than one line: $(cat "$BATS_TEST_TMPDIR/err")"
    tx -c 'echo later > later'
    assert_status 0
    [ "$(cat "$WS/later")" = later ] || fail "the next run did not commit"
}

# stopped_at FAULT ARGS...: txbox ARGS... started with TXBOX_FAULT=FAULT (a
# stop) in the background, in $STOPPED once it stopped there (SIGSTOP).
stopped_at() {
    local fault="$1" i st=
    shift
    TXBOX_FAULT="$fault" "$TXBOX" "$@" >"$BATS_TEST_TMPDIR/stopped.out" 2>"$BATS_TEST_TMPDIR/stopped.err" &
    STOPPED=$!
    for i in $(seq 300); do
        st="$(awk '/^State:/ {print $2}' /proc/$STOPPED/status 2>/dev/null)"
        [ "$st" = T ] && return 0
        sleep 0.05
    done
    kill -CONT "$STOPPED" 2>/dev/null
    wait "$STOPPED"
    fail "txbox $* never stopped at $fault: $(cat "$BATS_TEST_TMPDIR/stopped.err")"
}

# A committer stopped while it holds the workspace lock (SIGSTOP, a
# debugger): a later commit waits for it, says who holds it, gives up at the
# bound (TXBOX_LOCK_WAIT) with 125 and nothing changed, and a Ctrl-C or
# SIGTERM ends the wait at once.
@test "waiting for a lock held by a stopped committer: it is named, the wait has a bound, Ctrl-C ends it" {
    faults_ws
    # stopped after its commit point, the lock held
    stopped_at rename:2:stop run -C "$WS" -c 'echo held >held.txt'
    local t0=$SECONDS
    run --separate-stderr env TXBOX_LOCK_WAIT=3 timeout -k 5 60 "$TXBOX" run -C "$WS" -c 'echo y >other.txt'
    local took=$((SECONDS - t0)) st=$status err=$stderr
    local after=no
    [ -e "$WS/other.txt" ] && after=yes
    # Ctrl-C (SIGINT) and SIGTERM end a wait at once
    local sig results=()
    for sig in INT TERM; do
        env TXBOX_LOCK_WAIT=60 "$TXBOX" run -C "$WS" -c 'echo z >third.txt' 2>"$BATS_TEST_TMPDIR/w.err" &
        local w=$! i
        for i in $(seq 100); do grep -q "waiting for the workspace lock" "$BATS_TEST_TMPDIR/w.err" && break; sleep 0.1; done
        local t1=$SECONDS
        kill -"$sig" "$w"
        local wst=0
        timeout 10 tail --pid="$w" -f /dev/null || { kill -KILL "$w"; results+=("$sig: still waiting 10 s later"); }
        wait "$w" || wst=$?
        [ "$wst" = 125 ] && [ $((SECONDS - t1)) -le 3 ] &&
            grep -q "cancelled while waiting for the workspace lock, held by pid $STOPPED" "$BATS_TEST_TMPDIR/w.err" ||
            results+=("$sig: status $wst after $((SECONDS - t1)) s: $(cat "$BATS_TEST_TMPDIR/w.err")")
    done
    kill -CONT "$STOPPED"
    wait "$STOPPED"
    local held_st=$?
    [ "$st" = 125 ] || fail "status $st, not 125 (after $took s); stderr: $err"
    [ "$took" -le 20 ] || fail "the bound of 3 s took $took s"
    [[ "$err" == *"waiting for the workspace lock, held by pid $STOPPED ("*"txbox run"*"), stopped"* ]] ||
        fail "the wait did not say who holds the lock: $err"
    [[ "$err" == *"the workspace lock is held by pid $STOPPED"*"stopped: gave up after 3 s; nothing was done"* ]] ||
        fail "the bound's message: $err"
    [ "$after" = no ] || fail "the waiting run committed"
    [ "${#results[@]}" = 0 ] || fail "${results[@]}"
    [ "$held_st" = 0 ] && [ "$(cat "$WS/held.txt")" = held ] || fail "the stopped commit did not finish: $held_st"
}

# Readers (log, show, diff) do not recover; while a commit or a recovery
# applies a journal (the workspace lock held), they wait for it (bounded)
# and show what it leaves, instead of failing or showing the state before.
@test "txbox log waits while a commit or a recovery applies a journal, then shows it" {
    faults_ws
    local what
    for what in commit recover; do
        if [ "$what" = commit ]; then
            stopped_at rename:2:stop run -C "$WS" -c "echo $what >$what.txt"
        else
            # a commit killed after its commit point, then its recovery stopped mid-way
            run env TXBOX_FAULT=rename:2:kill "$TXBOX" run -C "$WS" -c "echo $what >$what.txt"
            [ "$status" = 137 ] || fail "the commit was not killed: $status"
            stopped_at rename:1:stop recover -C "$WS"
        fi
        local id
        id="$(ls "$WS/.txbox/journal")"
        "$TXBOX" log -C "$WS" --json >"$BATS_TEST_TMPDIR/log.out" 2>"$BATS_TEST_TMPDIR/log.err" &
        local r=$!
        sleep 1.5
        local still=no
        kill -0 "$r" 2>/dev/null && still=yes
        kill -CONT "$STOPPED"
        wait "$STOPPED" || fail "[$what] the stopped txbox failed: $(cat "$BATS_TEST_TMPDIR/stopped.err")"
        local rst=0
        wait "$r" || rst=$?
        [ "$still" = yes ] || fail "[$what] log did not wait: status $rst, $(cat "$BATS_TEST_TMPDIR/log.err")"
        [ "$rst" = 0 ] || fail "[$what] log: status $rst: $(cat "$BATS_TEST_TMPDIR/log.err")"
        [ "$(jq -r --arg t "$id" '.[] | select(.tx == $t) | .outcome' "$BATS_TEST_TMPDIR/log.out")" = committed ] ||
            fail "[$what] log does not show $id committed: $(cat "$BATS_TEST_TMPDIR/log.out")"
    done
}

# The state directory is trusted (its journals are applied, its pre-images
# moved back): one another user owns, and can change, is refused by name,
# whatever the command, and nothing is touched. As root above all.
@test "a .txbox owned by another user is refused, not used" {
    is_root || skip "only root can give the state directory to another user"
    local u="${TXBOX_TEST_USER:-txbox-test}" c errs=()
    id "$u" >/dev/null 2>&1 || need "no test user $u"
    faults_ws
    tx -c 'echo one >f1'
    assert_status 0
    # a journal the other user could have planted: it must not be applied
    run env TXBOX_FAULT=rename:2:kill "$TXBOX" run -C "$WS" -c 'echo two >f2'
    [ "$status" = 137 ] || fail "no journal left: $status"
    chown -R "$u" "$WS/.txbox"
    local pre
    pre="$(digest "$WS")"
    for c in "run -c true" "run -c 'echo x >f3'" "recover" "log" "undo" "status"; do
        eval "run --separate-stderr txbox_bin $c -C \"\$WS\""
        [ "$status" = 125 ] || errs+=("$c: status $status; $stderr")
        [[ "$stderr" == *"$WS/.txbox belongs to $u (uid $(id -u "$u")), not to this user (uid 0)"* ]] ||
            errs+=("$c: stderr: $stderr")
        [ "$(digest "$WS")" = "$pre" ] || errs+=("$c: the workspace changed")
    done
    chown -R 0 "$WS/.txbox"
    tx -c 'echo x >f3'
    [ "$status" = 0 ] && [ "$(cat "$WS/f2")" = two ] || errs+=("given back: status $status; $stderr")
    [ "${#errs[@]}" = 0 ] || fail "${errs[@]}"
}

# A workspace that takes no writes (a read-only mount; as a user, a
# directory without write permission): .txbox cannot be made there. A
# read-only run works all the same, recorded nowhere (and says so); any
# other is refused by name, with the option that works. Nothing is created.
@test "a read-only workspace: --read-only runs there, unrecorded; a change is refused naming --read-only" {
    local ro="$BATS_TEST_TMPDIR/ro" src="$BATS_TEST_TMPDIR/rosrc" mounted=no
    mkdir -p "$src"
    echo a >"$src/a"
    if is_root; then # root writes any directory: a read-only mount
        mkdir -p "$ro"
        mount --bind "$src" "$ro" && mount -o remount,bind,ro "$ro" || need "cannot make a read-only bind mount"
        mounted=yes
    else
        ro="$src"
        chmod 0555 "$ro"
    fi
    run --separate-stderr txbox_bin run -C "$ro" --json --read-only -c 'cat a; echo x >b 2>/dev/null; true'
    local st1=$status out1=$output err1=$stderr
    run --separate-stderr txbox_bin run -C "$ro" -c 'echo b >b'
    local st2=$status err2=$stderr
    local left
    left="$(ls -A "$ro")"
    [ "$mounted" = yes ] && umount "$ro"
    chmod 0755 "$src"
    [ "$st1" = 0 ] || fail "--read-only: status $st1; $err1"
    output="$out1"
    [ "$(jget outcome)" = read_only ] && [ "$(jget stdout)" = a ] || fail "--read-only: $out1"
    [[ "$(jget log_error)" == "not recorded"* ]] || fail "--read-only: not said to be unrecorded: $out1"
    [ "$st2" = 125 ] || fail "a change: status $st2; $err2"
    [[ "$err2" == *"cannot create .txbox"*"--read-only"* ]] || fail "a change: not refused naming --read-only: $err2"
    [ "$left" = a ] || fail "something was created: $left"
}

# The change list names at most 10,000 paths (truncated: true); the counts
# are every path's: the status line, the JSON's changes.counts, the log's
# column and a multi-command commit's line say 10,006, not 10,000.
@test "the status line and the log count every changed file, past the change list's cap" {
    faults_ws
    local make='mkdir d; for i in $(seq 10005); do : >d/f$i; done'
    local make_e='mkdir e; for i in $(seq 10005); do : >e/f$i; done'
    tx -c "$make"
    [ "$status" = 0 ] && [[ "$stderr" == *"committed (10006 added, 0 modified, 0 deleted"* ]] ||
        fail "status $status; line: $stderr"
    run --separate-stderr txbox_bin log -C "$WS" --json -n 1
    [ "$(jq -r '.[0].n_added' <<<"$output")" = 10006 ] || fail "log: $(jq -c '.[0] | {n_added}' <<<"$output")"
    local id
    id="$("$TXBOX" begin -C "$WS")"
    "$TXBOX" run -C "$WS" --tx "$id" -c "$make_e" >/dev/null 2>&1 || fail "run --tx failed"
    run --separate-stderr txbox_bin commit -C "$WS" "$id"
    [ "$status" = 0 ] && [[ "$stderr" == *"(1 commands; 10006 added, 0 modified, 0 deleted)"* ]] ||
        fail "multi: status $status; line: $stderr"
}

@test "a multi-command commit cut short after its journal closed: recover leaves no copy of its layer, nor a link" {
    faults_ws
    local id
    id="$("$TXBOX" begin -C "$WS")"
    "$TXBOX" run -C "$WS" --tx "$id" -c 'echo n >new; echo m >>f1' >/dev/null 2>&1 || fail "run --tx failed"
    "$TXBOX" commit -C "$WS" "$id" >/dev/null 2>&1 || fail "commit failed"
    local post t="$WS/.txbox/tx/$id"
    post="$(pdigest "$WS")"
    [ -e "$t/journal" ] || fail "no commit record in $t"
    # What a power loss after the journal closed can leave (the removals
    # not yet durable): the layer's copy and a savepoint as hard links of
    # the committed files, the owner's lock, no outcome.
    mkdir -p "$t/layer.keep" "$t/sp/1.a"
    ln "$WS/new" "$t/layer.keep/new"
    ln "$WS/f1" "$t/sp/1.a/f1"
    : >"$WS/.txbox/active/$id"
    rm -f "$t/outcome"
    [ "$(stat -c %h "$WS/new")" = 2 ] || fail "setup: no second link"
    run --separate-stderr txbox_bin recover -C "$WS"
    [ "$status" = 0 ] || fail "recover: status $status: $stderr"
    [ ! -e "$t/layer.keep" ] && [ ! -e "$t/sp" ] || fail "left: $(ls "$t")"
    [ "$(stat -c %h "$WS/new")" = 1 ] && [ "$(stat -c %h "$WS/f1")" = 1 ] ||
        fail "links: new $(stat -c %h "$WS/new"), f1 $(stat -c %h "$WS/f1")"
    [[ "$(cat "$t/outcome")" == committed* ]] || fail "outcome: $(cat "$t/outcome" 2>&1)"
    [ "$(pdigest "$WS")" = "$post" ] || fail "the workspace changed"
    # and with no owner's lock left (a version that left them): the same
    mkdir -p "$t/layer.keep"
    ln "$WS/new" "$t/layer.keep/new"
    run --separate-stderr txbox_bin recover -C "$WS"
    [ "$status" = 0 ] && [ ! -e "$t/layer.keep" ] && [ "$(stat -c %h "$WS/new")" = 1 ] ||
        fail "status $status: $stderr; left: $(ls "$t")"
}
