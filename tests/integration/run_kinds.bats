#!/usr/bin/env bats
# Every kind of change a command can make commits exactly (the workspace ends
# identical, by whole-tree checksum, to the same script run by a plain shell
# on a copy) and rolls back exactly (script then `exit 1`: the workspace,
# file mtimes included, is unchanged). Each test covers both backends.

bats_require_minimum_version 1.5.0
load ../lib/common

@test "new files" {
    check_kind 'echo new >new.txt; printf "n2\n" >src/lib/new.c; : >empty_new; printf "\0\1\2" >deep/a/b/c/d/bin'
}

@test "modified files: append, overwrite, truncate, sed -i, in-place write" {
    check_kind 'echo more >>README; printf x >src/main.c; : >docs/a.txt; sed -i s/util/UTIL/ src/lib/util.c
printf Q | dd of=medium.bin bs=1 seek=1000 conv=notrunc 2>/dev/null'
}

@test "deleted files" {
    check_kind 'rm README src/lib/util.h "sp ace.txt" "$(printf "bad\377name")" empty.txt medium.bin'
}

@test "new directories with files" {
    check_kind 'mkdir -p newdir/x/y emptynew; echo 1 >newdir/x/y/f; echo 2 >newdir/g; mkdir src/lib/sub; echo 3 >src/lib/sub/h'
}

@test "removed directories" {
    check_kind 'rm -r docs deep; rmdir empty_dir'
}

@test "directory replaced wholesale" {
    check_kind 'rm -rf src; mkdir -p src/lib; echo other >src/lib/other.c; echo again >src/main.c'
}

@test "directory replaced by a file, file replaced by a directory" {
    check_kind 'rm -r dir_to_file; echo nowfile >dir_to_file; rm file_to_dir; mkdir file_to_dir; echo in >file_to_dir/x; mkdir file_to_dir/sub'
}

@test "renames: files, directories, over an existing file, a swap" {
    check_kind 'mv README README.md; mv docs documentation; mv src/main.c src/lib/main.c
mv exec.sh ro.txt; mv secret t; mv empty.txt secret; mv t empty.txt; mv deep/a deep_a'
}

@test "symlinks: new, retargeted, replaced, removed" {
    check_kind 'ln -s src/lib newlink; ln -s /etc/passwd abslink; ln -s nowhere2 dang2
rm link_rel; ln -sfn docs link_dir; rm link_dangling; echo real >link_dangling
rm secret; ln -s README secret; rm link_up; mkdir link_up; ln -s ../.. link_up/up2'
}

# (A setuid bit is not committed: commit_meta.bats. A directory's setgid bit is.)
@test "permission changes on files, directories and the workspace root" {
    check_kind 'chmod 0640 README; chmod 0755 ro.txt; chmod 0700 src; chmod 0750 exec.sh
chmod g+s src/lib; chmod 1777 empty_dir; chmod 0444 docs/a.txt; chmod 0700 .'
}

@test "owner changes (root)" {
    is_root || skip "chown to other ids needs root"
    check_kind 'chown 1234:5678 README; chown -h 42:43 link_rel; chown 0:0 owned.txt; chown 7:8 docs; chown 9 src/lib/util.c'
}

@test "timestamp changes" {
    check_kind 'touch -d "2001-02-03 04:05:06" README src/lib/util.c; touch -m -d "1999-12-31 23:59:59" docs/a.txt
touch -d "2010-01-01 00:00:00" newfile_t; touch -d "2011-01-01 00:00:00" fifo' --mtime
}

@test "untouched files keep their mtimes through a commit" {
    check_kind 'rm docs/sub/b.txt; mkdir newd; chmod 0700 src; rm -r deep/a/b' --mtime
}

@test "user xattrs: added, changed, removed, on files and directories" {
    check_kind 'setfattr -n user.new -v 1 README; setfattr -n user.a -v changed xattr.txt
setfattr -x user.b xattr.txt; setfattr -n user.e -v dd src; setfattr -x user.d docs
echo n >newx; setfattr -n user.z -v zz newx'
}

@test "trusted xattrs (root): existing ones survive a commit of the file and its directory" {
    is_root || skip "trusted.* xattrs need root"
    check_kind 'echo more >>xattr.txt; chmod 0600 xattr.txt; touch newfile_in_root'
}

@test "trusted xattrs (root): the command cannot set or remove them (they need CAP_SYS_ADMIN, which would unlock its mounts)" {
    is_root || skip "trusted.* xattrs need root"
    new_ws tx
    getfattr -n trusted.t "$WS/xattr.txt" >/dev/null || fail "the template has no trusted.t on xattr.txt"
    run --separate-stderr txbox_bin run -C "$WS" --json -c 'setfattr -n trusted.x -v 1 README || echo refused-set; setfattr -x trusted.t xattr.txt || echo refused-remove'
    [ "$status" = 0 ] || fail "status $status; stderr: $stderr"
    [[ "$output" == *refused-set*refused-remove* ]] || fail "trusted.* xattrs changed inside the sandbox: $output"
    ! getfattr -n trusted.x "$WS/README" 2>/dev/null || fail "trusted.x reached the workspace"
    getfattr -n trusted.t "$WS/xattr.txt" >/dev/null || fail "trusted.t was removed from the workspace"
}

@test "FIFOs: new, removed, replaced by a file" {
    check_kind 'mkfifo newfifo docs/fifo2; rm fifo; mkfifo fifo2; rm fifo2; echo f >fifo2'
}

@test "file names with spaces, newlines, leading dashes and non-UTF-8 bytes" {
    check_kind 'echo a >"new file"; echo b >"$(printf "nl\nin")"; echo c >./-dash; mkdir "$(printf "d\351r")"
echo d >"$(printf "d\351r/f\376")"; mv "sp ace.txt" "sp  ace2.txt"'
}

@test "a mix of every kind at once" {
    local s='echo new >new.txt; echo more >>README; rm src/lib/util.h; mkdir -p nd/x; echo 1 >nd/x/f
rm -r docs; rm -r dir_to_file; echo f >dir_to_file; rm file_to_dir; mkdir file_to_dir; ln -s README l2
chmod 0700 src; setfattr -n user.m -v m README; mkfifo f2; mv exec.sh exec2.sh; touch -d "2001-01-01" new.txt'
    if is_root; then s="$s; chown 3:4 new.txt"; fi
    check_kind "$s"
}

@test "the command leaves the workspace fully deleted: commit and rollback" {
    check_kind 'find . -mindepth 1 -maxdepth 1 -exec rm -rf {} +'
}

@test "a device node in the upper aborts the commit with the workspace untouched" {
    is_root || skip "mknod needs root"
    local s='echo x >new.txt; mknod dev c 1 3 && echo MADE >&2; exit 0'
    for backend in overlay copy; do
        new_ws "$backend"
        snap pre "$WS" --mtime
        tx --json --backend "$backend" -c "$s"
        check_any_json
        if [[ "$stderr" == *MADE* ]]; then
            # mknod worked inside: the commit must refuse the whole change set
            [ "$status" != 0 ] || fail "[$backend] device node committed (status 0)"
            assert_tree pre "$WS" --mtime || fail "[$backend] workspace changed"
        else
            # refused inside: the rest commits, without any device
            assert_status 0
            [ -f "$WS/new.txt" ] || fail "[$backend] new.txt not committed"
        fi
        [ ! -e "$WS/dev" ] || fail "[$backend] a device node reached the workspace"
    done
}

# inodes NAME...: "NAME inode links" for each entry of $WS.
inodes() {
    local f
    for f in "$@"; do
        stat -c '%n %i %h' "$WS/$f" | sed "s|^$WS/||"
    done
}

@test "the state directory is not in the view: not listed, nothing in the way of removing everything, a .txbox of its own discarded" {
    local backend
    for backend in overlay copy; do
        new_ws "$backend"
        txbox_bin run -C "$WS" -- true >/dev/null 2>&1 # .txbox exists
        txj --backend "$backend" -c 'ls -A; mkdir .txbox && echo mine >.txbox/mine && echo MADE'
        assert_status 0 && assert_outcome committed || fail "[$backend] the command failed"
        ! grep -qx '.txbox' <<<"$(jget stdout)" || fail "[$backend] the command lists .txbox: $(jget stdout)"
        grep -qx 'MADE' <<<"$(jget stdout)" || fail "[$backend] the command could not make a .txbox of its own: $(clip "$output")"
        [ ! -e "$WS/.txbox/mine" ] || fail "[$backend] the command's .txbox reached the real one"
        [[ "$(jget changes)" != *'.txbox'* ]] || fail "[$backend] .txbox in the changes: $(jget changes)"
    done
}

@test "hard links inside the workspace: kept through a rollback and through a commit that does not touch them" {
    local backend
    for backend in overlay copy; do
        new_ws "$backend"
        ln "$WS/README" "$WS/hl_readme"
        ln "$WS/src/main.c" "$WS/docs/main_link"
        inodes README hl_readme src/main.c docs/main_link >"$BATS_TEST_TMPDIR/ino.pre"
        snap pre "$WS" --mtime
        tx --backend "$backend" -c 'echo more >>hl_readme; echo more >>docs/main_link; exit 1'
        [ "$status" = 1 ] || fail "[$backend] rollback: status $status: $stderr"
        assert_tree pre "$WS" --mtime || fail "[$backend] the rollback changed the workspace"
        diff "$BATS_TEST_TMPDIR/ino.pre" <(inodes README hl_readme src/main.c docs/main_link) ||
            fail "[$backend] the rollback broke the links (name inode links before and after above)"
        tx --backend "$backend" -c 'echo new >new.txt; echo more >>src/lib/util.c'
        [ "$status" = 0 ] || fail "[$backend] commit: status $status: $stderr"
        diff "$BATS_TEST_TMPDIR/ino.pre" <(inodes README hl_readme src/main.c docs/main_link) ||
            fail "[$backend] the commit broke links it did not touch (name inode links before and after above)"
    done
}

# (The overlay backend breaks a link when it copies one name up; see README,
# Limits.)
@test "copy backend: a write through one name of a hard link shows through the other, in the command and after the commit" {
    new_ws copy
    ln "$WS/README" "$WS/hl_readme"
    txj --backend copy -c 'echo more >>hl_readme; tail -n1 README'
    assert_status 0 && assert_outcome committed || return 1
    [ "$(jget stdout)" = more ] || fail "the command did not see its write through the other name: $(jget stdout)"
    [ "$(stat -c %i "$WS/README")" = "$(stat -c %i "$WS/hl_readme")" ] || fail "the commit broke the link"
    [ "$(tail -n1 "$WS/README")" = more ] || fail "README lacks the write"
}

@test "untouched entries keep their inode through a commit, and a hard link to a file outside the workspace stays one" {
    local backend names=(README src src/main.c docs/a.txt exec.sh link_rel fifo keep_link)
    mkdir -p "$BATS_TEST_TMPDIR/outside"
    for backend in overlay copy; do
        new_ws "$backend"
        printf 'outside\n' >"$BATS_TEST_TMPDIR/outside/o.$backend"
        ln "$BATS_TEST_TMPDIR/outside/o.$backend" "$WS/keep_link"
        inodes "${names[@]}" >"$BATS_TEST_TMPDIR/ino.pre"
        tx --backend "$backend" -c 'echo new >new.txt; echo more >>src/lib/util.c; rm docs/sub/b.txt'
        [ "$status" = 0 ] || fail "[$backend] commit: status $status: $stderr"
        diff "$BATS_TEST_TMPDIR/ino.pre" <(inodes "${names[@]}") ||
            fail "[$backend] untouched entries changed inode or link count (name inode links before and after above)"
        [ "$(cat "$BATS_TEST_TMPDIR/outside/o.$backend")" = outside ] || fail "[$backend] the outside file changed"
    done
}

@test "copy backend: mounts inside the workspace: a change on them is refused before the commit, nothing reaches what is mounted" {
    is_root || skip "mounting needs root; the unprivileged user cannot make such a workspace"
    local o="$BATS_TEST_TMPDIR/outside" s errs=()
    new_ws copy
    mkdir -p "$o/dir" "$WS/bound"
    echo inner >"$o/dir/inner"
    echo outside >"$o/file"
    mount --bind "$o/dir" "$WS/bound" || fail "cannot bind-mount a directory"
    mount --bind "$o/file" "$WS/README" || { umount "$WS/bound"; fail "cannot bind-mount a file"; }
    snap pre "$o" --mtime
    for s in 'echo x >bound/new' 'rm -rf bound' 'echo x >>README' 'rm README' 'mv README R2' 'chmod 0700 bound'; do
        tx --backend copy -c "$s; echo y >b"
        [ "$status" = 125 ] || errs+=("'$s': status $status, want 125 (stderr: $stderr)")
        [[ "$stderr" == *"lies on another mount inside the workspace"* ]] || errs+=("'$s': stderr: $stderr")
        [ ! -e "$WS/b" ] || errs+=("'$s': the rest of the change was committed")
        assert_tree pre "$o" --mtime || errs+=("'$s': what is mounted changed")
    done
    tx --backend copy -c 'echo z >c; cat README; ls bound'
    [ "$status" = 0 ] && [ "$(cat "$WS/c")" = z ] || errs+=("an unrelated change: status $status (stderr: $stderr)")
    assert_tree pre "$o" --mtime || errs+=("an unrelated change: what is mounted changed")
    umount "$WS/README" "$WS/bound" || errs+=("umount failed")
    [ "${#errs[@]}" = 0 ] || fail "${errs[@]}"
}
