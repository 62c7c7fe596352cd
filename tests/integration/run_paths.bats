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
