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
    is_root || skip "making filesystems on loop devices needs root"
    MNT="$BATS_TEST_TMPDIR/mnt"
    mkdir -p "$MNT"
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
