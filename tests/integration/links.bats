#!/usr/bin/env bats
# Hard links in the workspace: a commit keeps a link group whole, as a plain
# run does (every name sees the change, one inode, the same link count);
# undo and rollback give the old group back; a link to a file outside the
# workspace is never written through, and the result says the group was
# split. Also: a change to a device node already in the workspace is refused
# in words that say so.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    WS="$BATS_TEST_TMPDIR/ws"
    mkdir -p "$WS/sub/deep" "$WS/other"
    echo one >"$WS/a"
    ln "$WS/a" "$WS/b"
    ln "$WS/a" "$WS/sub/deep/c"
    chmod 0644 "$WS/a"
    echo solo >"$WS/other/solo"
}

# group_is CONTENT MODE NLINK: a, b and sub/deep/c are one inode with that
# content, mode and link count.
group_is() {
    local f
    for f in a b sub/deep/c; do
        [ "$(cat "$WS/$f")" = "$1" ] || fail "$f holds '$(cat "$WS/$f")', want '$1'"
        [ "$(stat -c %a "$WS/$f")" = "$2" ] || fail "$f has mode $(stat -c %a "$WS/$f"), want $2"
        [ "$(stat -c %h "$WS/$f")" = "$3" ] || fail "$f has $(stat -c %h "$WS/$f") links, want $3"
    done
    [ "$(stat -c %i "$WS/a" "$WS/b" "$WS/sub/deep/c" | sort -u | wc -l)" = 1 ] ||
        fail "the names are no longer one inode: $(stat -c '%i %n' "$WS/a" "$WS/b" "$WS/sub/deep/c")"
}

@test "links: an append to one name reaches every name of the group, as a plain run" {
    txj -c 'echo two >> a'
    assert_status 0
    assert_outcome committed
    group_is "$(printf 'one\ntwo')" 644 3
    # every name is reported as modified, as the plain run changed them all
    for f in a b sub/deep/c; do
        jget changes.modified | grep -qx "$f" || fail "changes.modified lacks $f: $(jget changes.modified)"
    done
    [ -z "$(jget changes.hard_links_split 2>/dev/null)" ] || fail "reported as split: $output"
}

@test "links: a change through a name in a subdirectory, and a chmod, keep the group" {
    tx -c 'echo deep >> sub/deep/c'
    assert_status 0
    group_is "$(printf 'one\ndeep')" 644 3
    tx -c 'chmod 600 b'
    assert_status 0
    group_is "$(printf 'one\ndeep')" 600 3
}

@test "links: one name removed and another changed: the rest stay one group" {
    tx -c 'rm b; echo x >> a'
    assert_status 0
    [ ! -e "$WS/b" ] || fail "b is back"
    [ "$(cat "$WS/sub/deep/c")" = "$(printf 'one\nx')" ] || fail "c: $(cat "$WS/sub/deep/c")"
    [ "$(stat -c %i "$WS/a")" = "$(stat -c %i "$WS/sub/deep/c")" ] || fail "a and c split"
    [ "$(stat -c %h "$WS/a")" = 2 ] || fail "a has $(stat -c %h "$WS/a") links, want 2"
}

@test "links: undo gives the old group back, one inode with the old content" {
    tx -c 'echo two >> a'
    assert_status 0
    tx -c 'chmod 600 a'
    assert_status 0
    run --separate-stderr txbox_bin undo -C "$WS"
    assert_status 0
    run --separate-stderr txbox_bin undo -C "$WS"
    assert_status 0
    group_is one 644 3
}

@test "links: a failed command leaves the group untouched" {
    local ino
    ino="$(stat -c %i "$WS/a")"
    tx -c 'echo two >> b; exit 1'
    assert_status 1
    group_is one 644 3
    [ "$(stat -c %i "$WS/a")" = "$ino" ] || fail "the inode changed"
}

@test "links: a link to a file outside the workspace is not written through; the split is reported" {
    local out="$BATS_TEST_TMPDIR/outside.txt"
    echo host >"$out"
    chmod 0644 "$out"
    ln "$out" "$WS/inlink"
    txj -c 'echo agent >> inlink; chmod 600 inlink'
    assert_status 0
    assert_outcome committed
    [ "$(cat "$out")" = host ] || fail "the outside file changed: $(cat "$out")"
    [ "$(stat -c %a "$out")" = 644 ] || fail "the outside file's mode changed"
    [ "$(cat "$WS/inlink")" = "$(printf 'host\nagent')" ] || fail "inlink: $(cat "$WS/inlink")"
    [ "$(jget changes.hard_links_split)" = inlink ] || fail "not reported: $output"
    # (the commit made inlink a file of its own: link it again)
    rm "$WS/inlink"
    ln "$out" "$WS/inlink"
    tx -c 'echo again >> inlink'
    assert_status 0
    [ "$(cat "$out")" = host ] || fail "the outside file changed: $(cat "$out")"
    [[ "$stderr" == *"inlink has a hard link outside the workspace"* ]] || fail "status line: $stderr"
}

@test "a chmod of a device node already in the workspace is refused, and said so (not 'created')" {
    is_root || skip "only root makes device nodes on the host"
    mknod "$WS/null" c 1 3
    chmod 0644 "$WS/null"
    tx -c 'chmod 600 null'
    [ "$status" = 125 ] || fail "status $status: $stderr"
    [[ "$stderr" == *"changed the device node null"* ]] || fail "message: $stderr"
    [ "$(stat -c %a "$WS/null")" = 644 ] || fail "the node's mode changed"
}
