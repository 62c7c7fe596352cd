#!/usr/bin/env bats
# A full disk hides no history and crashes nothing: on btrfs, xfs and ext4
# (loop devices), filled to the last block, `txbox log`, `show`, `diff`,
# `recover` and `gc` end with a status (never a signal such as SIGBUS from
# the audit log's shared-memory index), the log lists every transaction,
# and a row still waiting in log.pending, which the full disk keeps out of
# the log's file, is shown all the same.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    MNT="$BATS_TEST_TMPDIR/mnt"
    mkdir -p "$MNT"
    # (the tests of the floor on the machine's own filesystem run as any user)
    [[ "$BATS_TEST_DESCRIPTION" == *"floor, every commit path"* ]] ||
        is_root || skip "making filesystems on loop devices needs root"
}

teardown() {
    mountpoint -q "$MNT" 2>/dev/null && umount "$MNT"
    return 0
}

# on_full FS SIZE: a workspace on a new FS of SIZE, three commits, then a
# rolled-back run whose row waits in log.pending, then the disk filled.
on_full() {
    local fs="$1" size="$2" img="$BATS_TEST_TMPDIR/$1.img"
    command -v "mkfs.$fs" >/dev/null || need "mkfs.$fs missing"
    truncate -s "$size" "$img"
    case "$fs" in
    btrfs) mkfs.btrfs -q "$img" >/dev/null ;;
    xfs) mkfs.xfs -q "$img" >/dev/null ;;
    ext4) mkfs.ext4 -q -F "$img" >/dev/null ;;
    esac || fail "mkfs.$fs failed"
    mount -o loop "$img" "$MNT" || need "cannot mount a loop device here"
    WS="$MNT/ws"
    mkdir -p "$WS"
    local i
    for i in 1 2 3; do
        tx -c "echo $i > f$i"
        assert_status 0
    done
    # most of the space gone, then a failed run (its row goes to log.pending,
    # no fsync needed), then the rest
    dd if=/dev/zero of="$MNT/filler1" bs=1M count=$(($(df -m --output=avail "$MNT" | tail -1) - 4)) 2>/dev/null || true
    tx -c 'echo x > g; exit 3'
    [ "$status" = 3 ] || fail "the failed run: status $status: $stderr"
    dd if=/dev/zero of="$MNT/filler2" bs=64k 2>/dev/null || true
    dd if=/dev/zero of="$MNT/filler3" bs=4k 2>/dev/null || true
    sync
    [ "$(df --output=avail "$MNT" | tail -1)" -lt 1024 ] || fail "the disk is not full: $(df -h "$MNT" | tail -1)"
    [ -s "$WS/.txbox/log.pending" ] || fail "no row waits in log.pending: the test proves nothing"
    # the shared-memory index must be made anew (a fresh reader)
    rm -f "$WS/.txbox/log.db-shm"
}

# every reader and maintenance command: a status, never a signal; log
# lists transactions 1-4.
check_full() {
    local c
    run --separate-stderr txbox_bin log -C "$WS"
    [ "$status" = 0 ] || fail "[$1] log: status $status: $stderr"
    for i in 1 2 3 4; do
        grep -qE "^$i +" <<<"$output" || fail "[$1] log lacks transaction $i: $output"
    done
    grep -E "^4 " <<<"$output" | grep -q rolled_back || fail "[$1] the pending row is not shown as rolled back: $output"
    run --separate-stderr txbox_bin show -C "$WS" 2
    [ "$status" = 0 ] || fail "[$1] show 2: status $status: $stderr"
    run --separate-stderr txbox_bin show -C "$WS" 4
    [ "$status" = 0 ] || fail "[$1] show 4 (pending): status $status: $stderr"
    run --separate-stderr txbox_bin diff -C "$WS" 2
    [ "$status" = 0 ] || fail "[$1] diff 2: status $status: $stderr"
    for c in recover gc; do
        run --separate-stderr txbox_bin "$c" -C "$WS"
        [ "$status" -lt 128 ] && [ "$status" != 254 ] || fail "[$1] $c died: status $status: $stderr"
        [ "$status" = 0 ] || [ "$(printf '%s\n' "$stderr" | grep -c .)" = 1 ] ||
            fail "[$1] $c failed without one clear line: $stderr"
    done
    # space back: the pending row goes into the log for good
    rm -f "$MNT"/filler*
    run --separate-stderr txbox_bin log -C "$WS"
    [ "$status" = 0 ] && grep -qE "^4 " <<<"$output" || fail "[$1] after freeing space: $output $stderr"
    [ ! -s "$WS/.txbox/log.pending" ] || fail "[$1] the pending row was not moved into the log"
}

@test "full disk, btrfs: no crash, no history hidden, the pending row shown" {
    on_full btrfs 160M
    check_full btrfs
}

@test "full disk, xfs: no crash, no history hidden, the pending row shown" {
    on_full xfs 320M
    check_full xfs
}

@test "full disk, ext4: no crash, no history hidden, the pending row shown" {
    on_full ext4 96M
    check_full ext4
}

# ---------------------------------------------------------------------------
# The free-space floor: no commit that keeps new data leaves the workspace's
# filesystem below it (outcome no_space, status 119, nothing applied), and a
# run's default write budget is half of what is above it.

avail_bytes() { df --output=avail -B1 "$1" | tail -1 | tr -d ' '; }

# Eight commands in a row, each taking (just under) half of what the filesystem has left
# (a command that works out its own size from df): before the floor, the
# filesystem ended full.
@test "eight commands each taking half of what is left end above the floor, not at 100%" {
    local img="$BATS_TEST_TMPDIR/floor.img" i size floor
    truncate -s 256M "$img"
    mkfs.ext4 -q -F "$img" >/dev/null || fail "mkfs.ext4 failed"
    mount -o loop "$img" "$MNT" || need "cannot mount a loop device here"
    WS="$MNT/ws"
    mkdir -p "$WS"
    size=$(($(df --output=size -B1 "$MNT" | tail -1)))
    floor=$((size / 4)) # the default: 256 MiB at least, a quarter of a small filesystem at most
    for i in 1 2 3 4 5 6 7 8; do
        tx -c "fallocate -l \$((\$(df --output=avail -B1 . | tail -1) / 100 * 49)) big$i"
        # committed, or stopped by the write limit (the fallocate refused: its status 1, or 153), or no_space
        case "$status" in 0 | 1 | 153 | 119) ;; *) fail "run $i: status $status; $stderr" ;; esac
    done
    local left
    left="$(avail_bytes "$MNT")"
    [ "$left" -ge "$floor" ] || fail "$left bytes left, below the floor of $floor: $(df -h "$MNT" | tail -1)"
    tx -c 'echo small >small'
    assert_status 0
}

# Every commit path, on the machine's own filesystem with a floor just below
# its free space (TXBOX_MIN_FREE): a commit that would cross it is not
# applied (119, no_space), and what it keeps is what it was: a run's changes
# are gone, a multi-command transaction stays open, a held one stays held.
@test "the free-space floor, every commit path: no_space, status 119, nothing applied" {
    new_ws
    tx -c true
    local errs=() id pre
    # the floor 100 MiB below the free space now (the disk is shared: taken
    # again before each step; a refused change's space comes back at once),
    # and changes of 1 GiB (fallocate: at once)
    floor_below() { export TXBOX_MIN_FREE=$(($(avail_bytes "$WS") - (100 << 20))); }
    pre="$("$TREESUM" "$WS")"
    # run
    floor_below
    txj --max-write 2G -c 'fallocate -l 1G big; echo x >>README'
    [ "$status" = 119 ] && [ "$(jget outcome)" = no_space ] || errs+=("run: status $status; $(clip "$output")")
    [ "$(jget space.floor_bytes)" = "$TXBOX_MIN_FREE" ] || errs+=("run: space: $(jget space)")
    # the status line says so
    floor_below
    tx --max-write 2G -c 'fallocate -l 1G big'
    [ "$status" = 119 ] && [[ "$stderr" == *"not committed"*"below its floor of"*"nothing was changed"* ]] ||
        errs+=("run's line: status $status; $stderr")
    # multi (the floor taken before its data is written: then it is counted)
    floor_below
    id="$("$TXBOX" begin -C "$WS")"
    TXBOX_MIN_FREE=0 "$TXBOX" run -C "$WS" --tx "$id" --max-write 2G -c 'fallocate -l 1G big' >/dev/null 2>&1
    run --separate-stderr txbox_bin commit -C "$WS" --json "$id"
    [ "$status" = 119 ] && [ "$(jget outcome)" = no_space ] || errs+=("multi: status $status; $output $stderr")
    run --separate-stderr txbox_bin status -C "$WS" --json
    [[ "$output" == *"\"tx\":\"$id\""* ]] || errs+=("multi: no longer open: $output")
    "$TXBOX" abort -C "$WS" "$id" >/dev/null 2>&1 || errs+=("multi: abort failed")
    # approve: held by a git hook, then refused by the floor; still held
    floor_below
    id="$(TXBOX_MIN_FREE=0 "$TXBOX" run -C "$WS" --json --max-write 2G -c 'fallocate -l 1G big; mkdir -p .git/hooks; echo c >.git/hooks/pre-rebase' 2>/dev/null | jq -r .tx)"
    run --separate-stderr txbox_bin approve -C "$WS" --json "$id"
    [ "$status" = 119 ] && [ "$(jget outcome)" = no_space ] || errs+=("approve: status $status; $output $stderr")
    run --separate-stderr txbox_bin review -C "$WS" --json
    [[ "$output" == *"\"tx\":\"$id\""* ]] || errs+=("approve: no longer held: $output")
    "$TXBOX" reject -C "$WS" "$id" >/dev/null 2>&1 || errs+=("approve: reject failed")
    [ "$("$TREESUM" "$WS")" = "$pre" ] || errs+=("the workspace changed")
    # a small change still commits; without a floor (0) so does the big one
    floor_below
    tx -c 'echo y >>README'
    [ "$status" = 0 ] || errs+=("a small change: status $status; $stderr")
    TXBOX_MIN_FREE=0 tx --max-write 2G -c 'fallocate -l 1G big'
    [ "$status" = 0 ] || errs+=("TXBOX_MIN_FREE=0: status $status; $stderr")
    # a floor that is not one is refused, by name
    TXBOX_MIN_FREE=lots tx -c 'echo z >z'
    [ "$status" = 125 ] && [[ "$stderr" == *"TXBOX_MIN_FREE"* ]] || errs+=("a bad floor: status $status; $stderr")
    unset TXBOX_MIN_FREE
    rm -f "$WS/big"
    [ "${#errs[@]}" = 0 ] || fail "${errs[@]}"
}
