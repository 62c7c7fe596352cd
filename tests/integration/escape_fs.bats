#!/usr/bin/env bats
# Escape attempts, file system: writing, deleting, renaming or chmod-ing
# outside the workspace by every route: absolute paths, `..`, symlinks made
# before and during the command, hard links, bind mounts, /proc/self/root,
# /proc/<pid>/cwd, fd-relative calls (openat, openat2, O_PATH, O_TMPFILE,
# file handles, io_uring) and file descriptors handed in by the caller.
#
# Every attempt ends with `exit 3`: it must roll back, no call in it may
# succeed (OK lines), and the host and the workspace must be unchanged
# (see tests/lib/escape_helpers.bash). Attempts that involve the workspace
# (its files, links, view, state directory) run on both backends; those
# that only aim outside run on the default one. Attempts marked "control"
# are also run without txbox, to show the checks see the change when
# nothing stops it.

bats_require_minimum_version 1.5.0
load ../lib/common
load ../lib/escape_helpers

@test "absolute paths: overwrite, append, truncate and create in a sibling directory (control)" {
    each_backend <<'EOF'
O="$ESC_OUT"
try overwrite sh -c 'echo pwned >"$ESC_OUT/a.txt"'
try append sh -c 'echo pwned >>"$ESC_OUT/b.txt"'
try truncate truncate -s 0 "$O/sub/c.txt"
try create sh -c 'echo pwned >"$ESC_OUT/$ESC_MARK"'
try create-deep sh -c 'echo pwned >"$ESC_OUT/sub/deeper/$ESC_MARK"'
try mkdir mkdir "$O/$ESC_MARK.d"
try write-read-only-file sh -c 'echo pwned >"$ESC_OUT/ro.txt"'
try cp-over cp /etc/hostname "$O/keep/k.txt"
try dd-notrunc dd if=/dev/zero of="$O/a.txt" bs=1 count=1 conv=notrunc
try python-append python3 -c 'import os; open(os.environ["ESC_OUT"] + "/a.txt", "a").write("x")'
try write-via-symlink-there sh -c 'echo pwned >"$ESC_OUT/link"'
try create-in-box sh -c 'echo pwned >"$ESC_BOX/$ESC_MARK"'
try append-home-file sh -c 'echo pwned >>"$ESC_HOME/notes.txt"'
try create-in-home sh -c 'echo pwned >"$ESC_HOME/$ESC_MARK"'
cd "$O" && try relative-after-cd sh -c 'echo pwned >a.txt'
exit 3
EOF
    esc_done_controlled "absolute writes"
}

@test "absolute paths: writes to the host's system directories and files" {
    ESC_BACKENDS=overlay each_backend <<'EOF'
try create-root sh -c 'echo pwned >"/$ESC_MARK"'
try create-etc sh -c 'echo pwned >"/etc/$ESC_MARK"'
try append-etc-passwd sh -c 'echo "pwned:x:0:0::/:/bin/sh" >>/etc/passwd'
try overwrite-etc-hosts sh -c 'cat /etc/hosts >/etc/hosts'
try create-usr-bin sh -c 'echo pwned >"/usr/bin/$ESC_MARK"'
try create-usr-local-bin sh -c 'echo pwned >"/usr/local/bin/$ESC_MARK"'
# /var/tmp is private (a tmpfs of the sandbox's): the write works there and
# the host check looks for the file in the host's /var/tmp
echo pwned >"/var/tmp/$ESC_MARK" 2>/dev/null
try create-base sh -c 'echo pwned >"$ESC_BASE/$ESC_MARK"'
try dotdot-to-etc sh -c 'echo pwned >"src/../../../../../../../../../etc/$ESC_MARK"'
try delete-etc-hostname rm -f /etc/hostname
try rename-etc-shells mv /etc/shells /etc/shells.old
try chmod-etc-passwd chmod 0666 /etc/passwd
try touch-etc-profile touch /etc/profile
try chmod-root-dir chmod 0777 /
try chmod-usr-bin chmod 0777 /usr/bin
# the real HOME may lie under /tmp, private inside: only the host check counts
echo pwned >"$ESC_REAL_HOME/$ESC_MARK" 2>/dev/null
echo pwned >>"$ESC_REAL_HOME/.txbox-escape-sentinel" 2>/dev/null
exit 3
EOF
    esc_done
}

@test "absolute paths: delete, rmdir, rename and move files of a sibling directory (control)" {
    each_backend <<'EOF'
O="$ESC_OUT"
try rm rm -f "$O/a.txt"
try unlink-python python3 -c 'import os; os.unlink(os.environ["ESC_OUT"] + "/b.txt")'
try rm-symlink rm -f "$O/link"
try rmdir-empty rmdir "$O/sub/deeper" "$O/sub"
try rm-rf rm -rf "$O/keep"
try rename-in-place mv "$O/ro.txt" "$O/ro.moved"
try rename-dir mv "$O/sub" "$O/sub.moved"
try move-out-into-ws mv "$O/exec.sh" ./exec-taken.sh
try move-ws-file-out mv README "$O/README.from-ws"
try move-ws-dir-out mv docs "$O/docs.from-ws"
try python-rename python3 -c 'import os; os.rename(os.environ["ESC_OUT"] + "/a.txt", os.environ["ESC_OUT"] + "/a.moved")'
exit 3
EOF
    esc_done_controlled "absolute deletes and renames"
}

@test "absolute paths: chmod, chown, touch, xattrs and file flags outside (control)" {
    ESC_BACKENDS=overlay each_backend <<'EOF'
O="$ESC_OUT"
try chmod chmod 0777 "$O/a.txt"
try chmod-dir chmod 0700 "$O/sub"
try chmod-setuid chmod u+s "$O/exec.sh"
try chown-same sh -c 'chown "$(id -u):$(id -g)" "$ESC_OUT/b.txt"'
try chgrp-same sh -c 'chgrp "$(id -g)" "$ESC_OUT/b.txt"'
try chown-root chown 0:0 "$O/keep/k.txt"
try touch-existing touch "$O/sub/c.txt"
try touch-date touch -d 2001-01-01 "$O/ro.txt"
try setfattr setfattr -n user.pwned -v 1 "$O/a.txt"
try removexattr setfattr -x user.keep "$O/a.txt"
try chattr-immutable chattr +i "$O/b.txt"
try chattr-append chattr +a "$O/b.txt"
try chmod-home chmod 0777 "$ESC_HOME"
exit 3
EOF
    esc_done_controlled "metadata changes"
}

@test "\`..\`: writes, deletes and renames through relative paths out of the workspace (control)" {
    ESC_BACKENDS=overlay each_backend <<'EOF'
try dotdot-append sh -c 'echo pwned >>../outside/a.txt'
try dotdot-create sh -c 'echo pwned >"../outside/$ESC_MARK"'
try dotdot-box sh -c 'echo pwned >"../$ESC_MARK"'
try deep-dotdot sh -c 'echo pwned >>src/lib/../../../outside/b.txt'
try dot-dotdot-mix sh -c 'echo pwned >>./src/./../.././outside/sub/c.txt'
try dotdot-from-subdir sh -c 'cd deep/a/b/c/d && echo pwned >>../../../../../../outside/a.txt'
try dotdot-rm rm -f ../outside/b.txt
try dotdot-rmdir rm -rf ../outside/keep
try dotdot-rename mv ../outside/a.txt ../outside/a.moved
try dotdot-chmod chmod 0777 ../outside/sub/c.txt
try dotdot-mkdir mkdir "../outside/$ESC_MARK.d"
try dotdot-home sh -c 'echo pwned >>../home/notes.txt'
try python-dotdot python3 -c 'open("src/../../outside/a.txt", "a").write("x")'
exit 3
EOF
    esc_done_controlled "relative paths"
}

@test "symlinks made before the command: write, delete, rename and chmod through them (control)" {
    ln -s "$OUT" "$WS/to_out"
    ln -s "$OUT/a.txt" "$WS/to_out_file"
    ln -s ../outside "$WS/to_out_rel"
    ln -s "$FHOME/notes.txt" "$WS/to_home_file"
    ln -s "$OUT/sub/deeper" "$WS/src/to_deeper"
    esc_snap pre
    each_backend <<'EOF'
try append-through-dir-link sh -c 'echo pwned >>to_out/a.txt'
try create-through-dir-link sh -c 'echo pwned >"to_out/$ESC_MARK"'
try append-through-file-link sh -c 'echo pwned >>to_out_file'
try overwrite-through-file-link sh -c 'echo pwned >to_out_file'
try truncate-through-file-link truncate -s 0 to_out_file
try relative-link sh -c 'echo pwned >>to_out_rel/b.txt'
try home-link sh -c 'echo pwned >>to_home_file'
try nested-link sh -c 'echo pwned >>src/to_deeper/d.txt'
try populate-link-up sh -c 'echo pwned >>link_up/outside/a.txt'
try rm-through-link rm -f to_out/b.txt
try rm-rf-through-link rm -rf to_out/keep/
try rename-through-link mv to_out/ro.txt to_out/ro.moved
try chmod-follows-link chmod 0777 to_out_file
try chmod-through-dir-link chmod 0700 to_out/sub
try touch-through-link touch to_out_file
try cp-through-link cp README to_out/a.txt
try python-through-link python3 -c 'open("to_out/a.txt", "w").write("x")'
exit 3
EOF
    esc_done_controlled "pre-existing symlinks"
}

@test "symlinks made during the command: write, delete, rename and chmod through them (control)" {
    each_backend <<'EOF'
ln -s "$ESC_OUT" new_out
ln -s "$ESC_OUT/a.txt" new_out_file
ln -s ../outside new_rel
mkdir -p sub && ln -s ../../outside/sub sub/up
try append-through-new-dir-link sh -c 'echo pwned >>new_out/a.txt'
try create-through-new-dir-link sh -c 'echo pwned >"new_out/$ESC_MARK"'
try overwrite-through-new-file-link sh -c 'echo pwned >new_out_file'
try relative-new-link sh -c 'echo pwned >>new_rel/b.txt'
try nested-new-link sh -c 'echo pwned >>sub/up/c.txt'
try rm-through-new-link rm -f new_out/b.txt
try rename-through-new-link mv new_rel/ro.txt new_rel/ro.moved
try chmod-through-new-link chmod 0777 new_out_file
try chain sh -c 'ln -s new_out chain1 && ln -s chain1 chain2 && echo pwned >>chain2/a.txt'
try replace-dir-by-link sh -c 'rm -rf docs && ln -s "$ESC_OUT" docs && echo pwned >>docs/a.txt'
try replace-file-by-link sh -c 'rm -f README && ln -s "$ESC_OUT/b.txt" README && echo pwned >>README'
try python-symlink python3 -c 'import os; os.symlink(os.environ["ESC_OUT"], "py_out"); open("py_out/a.txt", "a").write("x")'
exit 3
EOF
    esc_done_controlled "symlinks made during the command"
}

@test "symlink race: a directory swapped with a symlink to the outside while another process writes" {
    ESC_BACKENDS=overlay each_backend <<'EOF'
mkdir -p race
( i=0; while [ $i -lt 150 ]; do
    rm -rf race; ln -s "$ESC_OUT" race; rm -f race; mkdir race; i=$((i + 1)); done ) &
swapper=$!
hits=0
i=0
while [ $i -lt 150 ]; do
    if echo pwned 2>/dev/null >>race/a.txt; then hits=$((hits + 1)); fi
    i=$((i + 1))
done
wait $swapper
echo "INFO writes that went through: $hits"
exit 3
EOF
    esc_done
}

@test "symlinks to the outside made during the command and committed: the commit follows none" {
    local b s
    s='ln -s "$ESC_OUT" out; ln -s "$ESC_OUT/a.txt" afile; ln -s ../outside rel
rm -r docs; ln -s "$ESC_OUT" docs
mkdir moved; echo mine >moved/f; mv moved moved2; ln -s "$ESC_OUT/sub" moved
rm README; ln -s "$ESC_OUT/b.txt" README
rm -r src/lib; ln -s ../../outside/sub src/lib'
    for b in overlay copy; do
        rm -rf "$WS" # the workspace of this box, afresh
        populate "$WS"
        make_ref "$WS" "$BOX/ref.$b" "$s"
        snap ref "$BOX/ref.$b"
        rm -rf "$BOX/ref.$b"
        esc_snap pre
        attempt --backend "$b" <<EOF
$s
EOF
        esc_check "$b" --status 0 --outcome committed
        # the workspace is now the reference, not the pre-state
        esc_drop_ws_errors
        assert_tree ref "$WS" || ESC_ERRS+=("[$b] the commit differs from the same script run by plain sh")
    done
    esc_done
}

@test "a hard link into the workspace made before the command: writes through it stay inside (control)" {
    local b
    for b in overlay copy; do
        ln -f "$OUT/a.txt" "$WS/hardlink"
        ln -f "$FHOME/notes.txt" "$WS/hardlink_home"
        esc_snap pre
        attempt --backend "$b" <<'EOF'
echo pwned >>hardlink
echo pwned >>hardlink_home
chmod 0777 hardlink
setfattr -n user.pwned -v 1 hardlink
touch -d 2001-01-01 hardlink
truncate -s 1 hardlink_home
exit 3
EOF
        esc_check "$b"
    done
    esc_done || return 1
    # the control: the same script without txbox changes the outside files
    control_run
    ! esc_host_diff >/dev/null || fail "control run without txbox: the checks saw no change through the hard links"
}

@test "a hard link into the workspace made before the command, changed and committed: the outside file keeps its content" {
    local b
    # the commit renames the workspace's name of the file (keeping the old
    # version for undo): the inode's ctime may change, nothing else
    ESC_STAT_LOOSE="a.txt"
    for b in overlay copy; do
        rm -f "$WS/hardlink"
        ln "$OUT/a.txt" "$WS/hardlink"
        esc_snap pre
        attempt --backend "$b" <<'EOF'
echo pwned >>hardlink
chmod 0600 hardlink
EOF
        esc_check "$b" --status 0 --outcome committed
        # the workspace's hardlink is expected to change; the outside file not
        esc_drop_ws_errors
        [ "$(tail -n1 "$WS/hardlink")" = pwned ] || ESC_ERRS+=("[$b] the change to the workspace's hardlink was not committed")
        [ "$(cat "$OUT/a.txt")" = "outside a" ] || ESC_ERRS+=("[$b] ESCAPE: the outside file now reads: $(cat "$OUT/a.txt")")
    done
    esc_done
}

@test "hard links to outside files made during the command, then written and committed" {
    local b
    for b in overlay copy; do
        attempt --backend "$b" <<'EOF'
try ln-outside-file ln "$ESC_OUT/a.txt" hl1
try ln-etc-passwd ln /etc/passwd hl2
try ln-home-file ln "$ESC_HOME/notes.txt" hl3
try ln-through-link-up ln link_up/outside/b.txt hl4
try python-link python3 -c 'import os; os.link(os.environ["ESC_OUT"] + "/sub/c.txt", "hl5")'
try cp-link cp -l "$ESC_OUT/ro.txt" hl6
for f in hl1 hl2 hl3 hl4 hl5 hl6; do [ -e $f ] && echo pwned >>$f; done
exit 0
EOF
        esc_check "$b" --status 0 --outcome committed
        esc_drop_ws_errors
    done
    esc_done
}

@test "bind mounts made by the command: mounting the outside into the workspace" {
    ESC_BACKENDS=overlay each_backend <<'EOF'
mkdir -p m m2
try mount-bind-and-write sh -c 'mount --bind "$ESC_OUT" m && echo pwned >>m/a.txt'
try mount-rbind-and-write sh -c 'mount --rbind / m2 && echo pwned >>m2/etc/passwd'
try mount-bind-file-and-write sh -c ': >f && mount --bind "$ESC_OUT/b.txt" f && echo pwned >>f'
try unshare-then-bind unshare -m sh -c 'mount --bind "$ESC_OUT" m && echo pwned >>m/a.txt'
try unshare-user-then-bind unshare -Urm sh -c 'mount --bind "$ESC_OUT" m && echo pwned >>m/a.txt'
try mount-remount-rw mount -o remount,rw,bind "$ESC_OUT"
exit 3
EOF
    esc_done
}

@test "a bind mount of an outside directory inside the workspace (made on the host): writes below it stay inside" {
    root_only "only root can make the host bind mount"
    mkdir -p "$WS/bound"
    mount --bind "$OUT" "$WS/bound" || fail "cannot bind-mount $OUT on $WS/bound"
    esc_snap pre
    # Inside, the view shows the directory under the mount point (overlayfs
    # and a non-recursive clone do not cross mounts). (The copy backend's
    # rollback cannot restore a mount point: not an escape, reported apart.)
    attempt --backend overlay <<'EOF'
try see-bound-files test -e bound/a.txt
try append-bound sh -c 'echo pwned >>bound/a.txt && grep -q "outside a" bound/a.txt'
try rm-bound sh -c 'test -e bound/b.txt && rm bound/b.txt'
try chmod-bound sh -c 'test -d bound/sub && chmod 0777 bound/sub'
echo mine >bound/new-inside-view 2>/dev/null
exit 3
EOF
    esc_check overlay
    esc_done
    umount "$WS/bound"
}

@test "/proc/self/root and its relatives: writes, deletes and chmods outside (control)" {
    ESC_BACKENDS=overlay each_backend <<'EOF'
R=/proc/self/root
try self-root-append sh -c 'echo pwned >>"/proc/self/root$ESC_OUT/a.txt"'
try self-root-create sh -c 'echo pwned >"/proc/self/root$ESC_OUT/$ESC_MARK"'
try thread-self-root sh -c 'echo pwned >>"/proc/thread-self/root$ESC_OUT/b.txt"'
try pid-root sh -c 'echo pwned >>"/proc/$$/root$ESC_OUT/a.txt"'
try self-root-rm rm -f "$R$ESC_OUT/b.txt"
try self-root-mv mv "$R$ESC_OUT/ro.txt" "$R$ESC_OUT/ro.moved"
try self-root-chmod chmod 0777 "$R$ESC_OUT/sub/c.txt"
try self-root-home sh -c 'echo pwned >>"/proc/self/root$ESC_HOME/notes.txt"'
try self-root-root-root sh -c 'echo pwned >>"/proc/self/root/proc/self/root$ESC_OUT/a.txt"'
try self-cwd-dotdot sh -c 'echo pwned >>/proc/self/cwd/../outside/a.txt'
try dev-fd-dir sh -c 'exec 7<"$ESC_OUT"; echo pwned >>/dev/fd/7/a.txt'
exit 3
EOF
    esc_done_controlled "/proc/self/root"
}

@test "/proc/<pid>/cwd: through a process of the command, the sandbox's init and a host process's pid (control)" {
    ESC_BACKENDS=overlay each_backend <<'EOF'
( cd "$ESC_OUT" && exec sleep 10 ) &
p=$!
sleep 0.2
try cwd-of-own-process sh -c "echo pwned >>/proc/$p/cwd/a.txt"
try cwd-of-own-process-create sh -c "echo pwned >/proc/$p/cwd/\$ESC_MARK"
try cwd-of-own-process-rm rm -f "/proc/$p/cwd/b.txt"
try cwd-of-own-process-chmod chmod 0777 "/proc/$p/cwd/sub"
[ -n "${ESC_CONTROL:-}" ] || try cwd-of-init sh -c 'echo pwned >"/proc/1/cwd/$ESC_MARK"'
try root-of-init sh -c 'echo pwned >>"/proc/1/root$ESC_OUT/a.txt"'
try cwd-of-host-sentinel-pid sh -c 'echo pwned >>"/proc/$SENT_PID/cwd/a.txt"'
try root-of-host-sentinel-pid sh -c 'echo pwned >>"/proc/$SENT_PID/root$ESC_OUT/a.txt"'
kill $p
exit 3
EOF
    esc_done
    # without txbox the host sentinel's cwd is $OUT: the write lands there
    control_run
    expect_detected "/proc/<pid>/cwd"
}

@test "the real workspace behind the view: txbox started inside it, writes through /proc/1/cwd, /proc/1/root, the overlay's layer paths" {
    # The sandbox's init inherits txbox's working directory: here the real
    # workspace, which the view covers. Every route must end in the view
    # (rolled back) or fail; the real workspace must not change.
    cd "$WS"
    each_backend <<'EOF'
try init-cwd-write sh -c 'echo pwned >>/proc/1/cwd/README'
try init-cwd-create sh -c 'echo pwned >"/proc/1/cwd/$ESC_MARK"'
try init-cwd-rm rm -f /proc/1/cwd/docs/a.txt
try init-root-write sh -c 'echo pwned >>"/proc/1/root$ESC_WS/README"'
try init-fd sh -c 'for f in /proc/1/fd/*; do echo pwned >>"$f/README" && exit 0; done; exit 1'
grep -o 'lowerdir=[^,]*\|upperdir=[^,]*' /proc/self/mountinfo | sed 's/^/INFO /'
for d in $(grep -o 'lowerdir=[^,]*' /proc/self/mountinfo | cut -d= -f2); do
    try "lowerdir-write-$d" sh -c "echo pwned >>'$d/README'"
done
exit 3
EOF
    cd "$BATS_TEST_TMPDIR"
    esc_done
}

@test "the state directory .txbox through other routes: ./.txbox, src/../.txbox, a symlink, /proc/self/root, /proc/1/cwd" {
    cd "$WS"
    txbox_bin run -C "$WS" -- true >/dev/null 2>&1 # .txbox exists
    cd "$BATS_TEST_TMPDIR"
    local before
    before="$(find "$WS/.txbox" -path '*/tx/*' -prune -o -print | LC_ALL=C sort | md5sum)"
    cd "$WS"
    each_backend <<'EOF'
for p in ./.txbox src/../.txbox "$ESC_WS/.txbox" "/proc/self/root$ESC_WS/.txbox" /proc/1/cwd/.txbox; do
    try "list-$p" sh -c "ls -A '$p' | grep -q ."
    try "create-$p" sh -c "echo pwned >'$p/$ESC_MARK'"
done
ln -s .txbox state_link 2>/dev/null
try list-via-symlink sh -c 'ls -A state_link/ | grep -q .'
try create-via-symlink sh -c 'echo pwned >"state_link/$ESC_MARK"'
try rm-state rm -r .txbox/tx
exit 3
EOF
    cd "$BATS_TEST_TMPDIR"
    [ -z "$(find "$WS/.txbox" -name "*$ESC_MARK*")" ] || ESC_ERRS+=("ESCAPE: a file appeared in the real .txbox")
    [ "$(find "$WS/.txbox" -path '*/tx/*' -prune -o -print | LC_ALL=C sort | md5sum)" = "$before" ] ||
        ESC_ERRS+=("ESCAPE: the state directory's layout changed")
    esc_done
}

@test "openat tricks: fd-relative .., openat2, O_PATH reopen, O_TMPFILE, linkat, file handles, io_uring (control)" {
    each_backend <<'EOF'
"$PROBE" openat "$ESC_WS" "$ESC_OUT"
exit 3
EOF
    esc_done_controlled "openat tricks"
}

@test "file descriptors the caller leaves open (a directory outside, an outside file, a secret directory) give no way out" {
    each_backend 7<"$OUT" 8<"$OUT/b.txt" 9<"$FHOME/.ssh" 6>>"$OUT/sub/c.txt" <<'EOF'
ls -l /proc/self/fd/ | sed 's/^/INFO /'
"$PROBE" fdops 7 8 9
try write-inherited-write-fd sh -c 'echo pwned >&6'
try read-secret-via-fd sh -c 'cat /proc/self/fd/9/secret | grep -q TXBOX-SECRET'
exit 3
EOF
    esc_done
}

@test "stdin from a host file: the command can read it but not change the file" {
    # txbox relays a stdin that is not a pipe or socket through a pipe of its
    # own: metadata calls on that pipe touch no host file (the host tree
    # check decides), so only they are dropped from the escape list.
    local b first
    first="$(head -n 1 "$OUT/a.txt")"
    for b in ${ESC_BACKENDS:-overlay copy}; do
        ESC_STDIN="$OUT/a.txt" attempt --backend "$b" <<'EOF'
if [ -p /dev/stdin ]; then
    echo "INFO fd 0 is a pipe"
    "$PROBE" fdops 0 | grep -v -E '^OK (fchmod|fchown-same-owner|futimens|fsetxattr)-0$'
    IFS= read -r line && echo "READ $line"
else
    "$PROBE" fdops 0
fi
exit 3
EOF
        grep -qxF "READ $first" <<<"$ATT_OUT" || grep -q '^INFO fd 0 is a file' <<<"$ATT_OUT" ||
            ESC_ERRS+=("[$b] the command could not read its stdin (want 'READ $first'): $(clip "$ATT_OUT")")
        esc_check "$b"
    done
    esc_done
}

@test "/var/tmp is private like /tmp: the host's files there are not seen, the command's stay inside" {
    local host="/var/tmp/txbox-vt-$$-$RANDOM"
    printf 'TXBOX-SECRET-var-tmp\n' >"$host"
    chmod 0644 "$host"
    export ESC_VT="$host"
    esc_snap pre
    attempt <<'EOF'
cat "$ESC_VT" 2>/dev/null
ls -a /var/tmp | sed 's/^/LISTED /'
echo mine >/var/tmp/own && grep -q mine /var/tmp/own && echo VAR-TMP-WRITABLE
exit 3
EOF
    rm -f "$host"
    ! grep -q TXBOX-SECRET-var-tmp <<<"$ATT_OUT" || ESC_ERRS+=("ESCAPE: the host's /var/tmp is shared: the command read $host")
    ! grep -q "^LISTED txbox-vt-" <<<"$ATT_OUT" || ESC_ERRS+=("the host's /var/tmp is listed inside")
    grep -q '^VAR-TMP-WRITABLE$' <<<"$ATT_OUT" || ESC_ERRS+=("the private /var/tmp is not writable: $(clip "$ATT_ERR")")
    [ ! -e /var/tmp/own ] || ESC_ERRS+=("ESCAPE: the command's /var/tmp/own reached the host")
    [ "$(jget protections.private_var_tmp 2>/dev/null)" = true ] || ESC_ERRS+=("protections.private_var_tmp is not true")
    esc_check
    esc_done
}

# A workspace of its own inside $WS, with a command in its history whose
# output names $2.
inner_ws() {
    mkdir -p "$1"
    txbox_bin run -C "$1" -c "echo $2" >/dev/null 2>&1 || fail "cannot make the inner workspace $1"
}

@test "nested workspaces: an inner .txbox at any depth is hidden from the outer's commands and no commit changes it (both backends)" {
    local b s h="" in1="$WS/sub" in2="$WS/deep/er/inner" sums
    # one inner workspace made before the outer (found by the outer's first
    # walk), one after (it records itself in the outer)
    inner_ws "$in1" TXBOX-SECRET-inner-one
    txbox_bin run -C "$WS" -- true >/dev/null 2>&1
    inner_ws "$in2" TXBOX-SECRET-inner-two
    esc_snap pre
    for b in overlay copy; do
        sums="$("$TREESUM" "$in1/.txbox/"; "$TREESUM" "$in2/.txbox/")"
        attempt --backend "$b" <<'EOF'
for d in sub deep/er/inner; do
    cat "$d/.txbox/log.db" "$d/.txbox/log.db-wal" 2>/dev/null | strings | grep TXBOX-SECRET
    ls -A "$d/.txbox" 2>/dev/null | sed "s|^|LISTED $d/.txbox/|"
    cat "$ESC_WS/$d/.txbox/format" "/proc/self/root$ESC_WS/$d/.txbox/format" 2>/dev/null | sed "s|^|READ $d |"
    rm -rf "$d/.txbox" 2>/dev/null
    mkdir -p "$d/.txbox" 2>/dev/null && echo planted >"$d/.txbox/planted" 2>/dev/null
    echo planted >"$d/.txbox/log.db" 2>/dev/null
done
mkdir -p newdir/.txbox && echo 2 >newdir/.txbox/format
rm -rf deep 2>/dev/null
mv sub sub-moved 2>/dev/null
exit 0
EOF
        [ "$b" = copy ] || h="$(jget protections.state_hidden 2>/dev/null)"
        s="$(printf '%s\n' "$ATT_OUT" | grep -e TXBOX-SECRET -e '^LISTED ' -e '^READ ')" &&
            ESC_ERRS+=("[$b] ESCAPE: the inner state is visible: $s")
        [ "$ATT_OUTCOME" = committed ] || ESC_ERRS+=("[$b] outcome '$ATT_OUTCOME', want committed: $(clip "$ATT_ERR")")
        [ "$("$TREESUM" "$in1/.txbox/"; "$TREESUM" "$in2/.txbox/")" = "$sums" ] ||
            ESC_ERRS+=("[$b] ESCAPE: a commit changed an inner .txbox")
        [ ! -e "$WS/newdir/.txbox" ] || ESC_ERRS+=("[$b] a commit made a state directory newdir/.txbox")
        for s in "$in1" "$in2"; do
            run --separate-stderr txbox_bin log -C "$s"
            [ "$status" = 0 ] || ESC_ERRS+=("[$b] txbox log of $s fails ($status) after the outer's command: $stderr")
        done
        # back to the start for the other backend
        rm -rf "$WS/newdir" "$WS/sub-moved"
        [ -d "$in1" ] || ESC_ERRS+=("[$b] the inner workspace sub is gone")
    done
    grep -qxF "$in2/.txbox" <<<"$h" && grep -qxF "$in1/.txbox" <<<"$h" ||
        ESC_ERRS+=("protections.state_hidden does not name the inner workspaces' .txbox: $h")
    esc_done
}

@test "the workspace through a second mount (a bind mount of a parent): its .txbox is hidden there too, and a nested one's" {
    root_only "a bind mount on the host needs root"
    local alias="$BOX/alias"
    inner_ws "$WS/sub" TXBOX-SECRET-inner-alias
    txbox_bin run -C "$WS" -c 'echo TXBOX-SECRET-outer-log' >/dev/null 2>&1
    mkdir -p "$alias" "$BOX/statebind"
    mount --bind "$BOX" "$alias"
    mount --bind "$WS/.txbox" "$BOX/statebind"
    export ESC_ALIAS="$alias/ws" ESC_STATEBIND="$BOX/statebind"
    attempt <<'EOF'
cat "$ESC_ALIAS/.txbox/log.db" "$ESC_ALIAS/.txbox/log.db-wal" "$ESC_ALIAS/sub/.txbox/log.db" "$ESC_ALIAS/sub/.txbox/log.db-wal" 2>/dev/null | strings | grep TXBOX-SECRET
cat "$ESC_STATEBIND/log.db" "$ESC_STATEBIND/log.db-wal" 2>/dev/null | strings | grep TXBOX-SECRET
ls -A "$ESC_ALIAS/.txbox" 2>/dev/null | sed 's/^/LISTED /'
ls -A "$ESC_STATEBIND" 2>/dev/null | sed 's/^/LISTED /'
grep -q . "$ESC_ALIAS/README" 2>/dev/null && echo ALIAS-READABLE
exit 3
EOF
    umount "$BOX/statebind" "$alias"
    ! grep -e TXBOX-SECRET -e '^LISTED ' <<<"$ATT_OUT" >/dev/null ||
        ESC_ERRS+=("ESCAPE: the state is readable through another mount: $(grep -e TXBOX-SECRET -e '^LISTED ' <<<"$ATT_OUT" | head -5)")
    local h
    h="$(jget protections.state_hidden 2>/dev/null)"
    grep -qxF "$alias/ws/.txbox" <<<"$h" && grep -qxF "$BOX/statebind" <<<"$h" ||
        ESC_ERRS+=("protections.state_hidden does not name the alias paths: $h")
    esc_done
}

@test "the audit log and the state directory are readable by their owner only" {
    txbox_bin run -C "$WS" -c 'echo hello >made' >/dev/null 2>&1
    [ -e "$WS/.txbox/log.db" ] || fail "no audit log after a commit"
    chmod 0755 "$WS/.txbox"
    chmod 0644 "$WS/.txbox/log.db"
    txbox_bin run -C "$WS" -c 'echo again' >/dev/null 2>&1
    local f m bad=""
    for f in "$WS/.txbox" "$WS/.txbox"/log.db*; do
        [ -e "$f" ] || continue
        m="$(stat -c %a "$f")"
        [ $((8#$m & 8#077)) = 0 ] || bad+=" $f=$m"
    done
    [ -z "$bad" ] || fail "readable by others:$bad"
}
