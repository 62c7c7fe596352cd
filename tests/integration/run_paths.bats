#!/usr/bin/env bats
# Awkward workspaces: a path with spaces and non-UTF-8 bytes; a large file
# (100 MiB) changed in place. Commit and rollback, both backends, checked by
# whole-tree checksum.

bats_require_minimum_version 1.5.0
load ../lib/common

@test "workspace path with spaces and non-UTF-8 bytes: commit and rollback" {
    WS_SUFFIX="/my work $(printf '\377\376') é/x y"
    check_kind 'echo new >new.txt; echo more >>README; rm -r docs; mkdir -p "n d"; ln -s README l2; mv src src2'
}

@test "workspace path with spaces and non-UTF-8 bytes: the command sees its real path" {
    WS_SUFFIX="/my work $(printf '\377\376') é"
    new_ws
    cd "$WS/src"
    tx -c 'pwd'
    assert_status 0
    [ "$output" = "$WS/src" ] || fail "cwd inside: $(printf '%q' "$output"), want $(printf '%q' "$WS/src")"
}

# A workspace with one 100 MiB file (zeros with marks) and a few small ones.
populate_big() {
    mkdir -p "$1/sub"
    dd if=/dev/zero of="$1/big" bs=1M count=100 status=none
    printf 'HEAD' | dd of="$1/big" conv=notrunc status=none
    echo small >"$1/sub/small"
}

@test "large file (100 MiB) modified in place: commit and rollback" {
    POPULATE=populate_big check_kind \
        'printf CHANGED%.0s 1 2 3 4 5 6 | dd of=big bs=4096 seek=1000 conv=notrunc status=none
printf END | dd of=big bs=1 seek=104857000 conv=notrunc status=none; echo more >>sub/small'
}

@test "large file (100 MiB) extended and truncated: commit and rollback" {
    POPULATE=populate_big check_kind 'printf TAIL >>big; truncate -s 50M sub/small; truncate -s 1M big'
}

@test "a mount inside the workspace: a change there is refused before the commit point, nothing is lost" {
    is_root || skip "mounting needs root; the unprivileged user cannot make such a workspace"
    new_ws
    mkdir -p "$WS/mnt"
    mount -t tmpfs tmpfs "$WS/mnt"
    echo inner >"$WS/mnt/inner"
    run --separate-stderr txbox_bin run -C "$WS" -c 'echo x >mnt/f; echo y >b'
    umount_rc=0
    [ "$status" = 125 ] || { umount "$WS/mnt"; fail "status $status, want 125; stderr: $stderr"; }
    [[ "$stderr" == *"mnt lies on another mount inside the workspace"* ]] || { umount "$WS/mnt"; fail "stderr: $stderr"; }
    [ "$(cat "$WS/mnt/inner")" = inner ] && [ ! -e "$WS/mnt/f" ] && [ ! -e "$WS/b" ] || { umount "$WS/mnt"; fail "the workspace changed"; }
    # nothing is left half-done: the next transaction commits normally
    run --separate-stderr txbox_bin run -C "$WS" -c 'echo z >c'
    umount "$WS/mnt" || umount_rc=$?
    [ "$status" = 0 ] || fail "the next transaction: status $status; stderr: $stderr"
    [ "$(cat "$WS/c")" = z ] || fail "the next transaction's change is missing"
    [ "$umount_rc" = 0 ] || fail "umount failed"
}
