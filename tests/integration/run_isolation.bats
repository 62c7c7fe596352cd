#!/usr/bin/env bats
# What the command can and cannot reach: .txbox/ hidden, host root
# read-only, private /tmp, own pid/net/uts namespaces, and symlinks that
# point out of the workspace (to /etc, to ..) never carry a write outside,
# neither inside the command nor at commit.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    # $BATS_TEST_TMPDIR/box/{ws,outside}: a sibling directory that must never change
    mkdir -p "$BATS_TEST_TMPDIR/box"
    WS_SUFFIX=""
    new_ws box/ws
    OUT="$BATS_TEST_TMPDIR/box/outside"
    mkdir -p "$OUT/sub"
    echo a >"$OUT/a.txt"
    echo b >"$OUT/sub/b.txt"
    echo r >"$OUT/README"
    ETC_FILES=(/etc/passwd /etc/group /etc/hosts /etc/hostname /etc/os-release)
    snap_host pre
}

# The things outside the workspace a command might try to change.
snap_host() {
    snap "$1.out" "$OUT" --mtime
    ls -A "$BATS_TEST_TMPDIR/box" >"$BATS_TEST_TMPDIR/$1.box"
    ls -A /etc >"$BATS_TEST_TMPDIR/$1.etcnames"
    sha256sum "${ETC_FILES[@]}" >"$BATS_TEST_TMPDIR/$1.etcfiles" 2>&1
}

assert_host_unchanged() {
    snap_host post
    same_tree pre.out post.out || fail "the sibling directory outside the workspace changed"
    diff -u "$BATS_TEST_TMPDIR/pre.box" "$BATS_TEST_TMPDIR/post.box" >&2 ||
        fail "the workspace's parent directory changed"
    # /etc as a whole may change under us (other users install packages);
    # only names that look like ours count
    diff "$BATS_TEST_TMPDIR/pre.etcnames" "$BATS_TEST_TMPDIR/post.etcnames" | grep -i 'txbox\|probe\|^> e$\|pwned' >&2 &&
        fail "new names in /etc"
    diff -u "$BATS_TEST_TMPDIR/pre.etcfiles" "$BATS_TEST_TMPDIR/post.etcfiles" >&2 ||
        fail "files in /etc changed"
}

@test ".txbox/ cannot be seen, read or written from inside" {
    tx -c true
    assert_status 0
    [ -d "$WS/.txbox" ] || fail "no .txbox/ after a run"
    snap txpre "$WS/.txbox" --include-txbox
    # The name may show (masked by an empty directory); its contents may not.
    tx -c 'ls -A .txbox 2>/dev/null | sed "s/^/IN: /"; cat .txbox/* .txbox/*/* 2>/dev/null | head -c 100 | sed "s/^/DATA: /"
find . -path "*/.txbox/*" | sed "s/^/FOUND: /"'
    assert_status 0
    ! grep -q '^IN: \|^DATA: \|^FOUND: ' <<<"$output" || fail ".txbox contents visible inside: $output"
    tx -c 'mkdir -p .txbox/x; echo evil >.txbox/evil; echo evil >.txbox/x/evil; ln -s .txbox tl; echo evil >tl/evil2; exit 0'
    # (its own upper, with what it wrote at that name, may lie in the trash,
    # .txbox/trash/ID.upper, until a later run removes it: not the real one)
    [ -z "$(find "$WS/.txbox" -path "$WS/.txbox/trash/*.upper" -prune -o -name 'evil*' -print)" ] ||
        fail "the command wrote into the real .txbox/: $(find "$WS/.txbox" -name 'evil*')"
    tx -c 'rm -rf .txbox; mv .txbox gone 2>/dev/null; exit 0'
    [ -d "$WS/.txbox" ] || fail "the command removed the real .txbox/"
    [ ! -e "$WS/gone" ] || fail "the command moved .txbox/ into the workspace"
    tx -c 'echo still works >ok'
    assert_status 0
    [ -f "$WS/ok" ] || fail "txbox broken after the command attacked .txbox/"
}

@test "the host root is read-only inside" {
    local p
    p="$(probe_name root)"
    tx -c "touch /$p; echo rc=\$?; touch /etc/$p; echo rc=\$?; touch /usr/$p; echo rc=\$?
touch '$OUT/$p'; echo rc=\$?; echo x >>'$OUT/a.txt'; echo rc=\$?; exit 0"
    assert_status 0
    [ "$(grep -c '^rc=0$' <<<"$output")" = 0 ] || fail "a write outside the workspace succeeded inside: $output"
    [ ! -e "/$p" ] && [ ! -e "/etc/$p" ] && [ ! -e "/usr/$p" ] || fail "probe reached the host root"
    assert_host_unchanged
}

@test "/tmp is private" {
    local p
    p="$(probe_name tmp)"
    echo host >"/tmp/$p.host"
    tx -c "test -e /tmp/$p.host && echo SEEN; echo inside >/tmp/$p.in && echo WROTE"
    rm -f "/tmp/$p.host"
    assert_status 0
    [[ "$output" != *SEEN* ]] || fail "the host's /tmp is visible inside"
    [[ "$output" == *WROTE* ]] || fail "/tmp is not writable inside: $output $stderr"
    [ ! -e "/tmp/$p.in" ] || { rm -f "/tmp/$p.in"; fail "a write to /tmp inside reached the host"; }
}

@test "own pid namespace: host processes are invisible" {
    tx -c "test -e /proc/$$ && echo HOSTPID; ls /proc | grep -c '^[0-9]'"
    assert_status 0
    [[ "$output" != *HOSTPID* ]] || fail "the host's processes are visible (pid $$)"
    [ "$(tail -n1 <<<"$output")" -lt 10 ] || fail "too many processes visible inside: $output"
}

@test "own network namespace: only loopback, also with --net (the proxy) and a network rule" {
    local opt
    for opt in --timeout=60 --net --net=proxy; do
        tx "$opt" -c 'grep -c : /proc/net/dev; grep -v "^ *lo:" /proc/net/dev | grep : || true'
        assert_status 0
        [ "$(head -n1 <<<"$output")" = 1 ] || fail "$opt: interfaces other than lo inside: $output"
    done
    tx -c 'grep -c : /proc/net/dev; exit 0; npm install'
    assert_status 0
    [ "$(head -n1 <<<"$output")" = 1 ] || fail "npm install: interfaces other than lo inside: $output"
}

@test "--net=host gives the host's network" {
    [ "$(grep -c : /proc/net/dev)" -gt 1 ] || skip "the host has only loopback"
    tx --net=host -c 'grep -c : /proc/net/dev'
    assert_status 0
    [ "$output" = "$(grep -c : /proc/net/dev)" ] || fail "--net=host: $output interfaces, host has $(grep -c : /proc/net/dev)"
}

@test "own mount, pid, ipc, uts and net namespaces (and user namespace when unprivileged)" {
    local n want="mnt pid ipc uts net"
    is_root || want="$want user"
    tx -c 'for n in mnt pid ipc uts net user; do echo "$n $(readlink /proc/self/ns/$n)"; done'
    assert_status 0
    for n in $want; do
        local inside
        inside="$(grep "^$n " <<<"$output" | cut -d' ' -f2)"
        [ -n "$inside" ] || fail "no $n namespace id inside: $output"
        [ "$inside" != "$(readlink /proc/self/ns/$n)" ] || fail "the command shares the host's $n namespace ($inside)"
    done
}

@test "the command and its init run on the caller's CPUs, not on the one txbox starts the sandbox from" {
    # txbox makes the sandbox on another CPU than its own when one is idle
    # (sandbox.c, launch_init; so in most of these runs); init must hand
    # the caller's set on, whole or narrowed
    local mine last i
    mine="$(grep Cpus_allowed_list /proc/self/status)"
    for i in 1 2 3; do
        tx -c 'grep Cpus_allowed_list /proc/self/status /proc/1/status'
        assert_status 0
        [ "$output" = "/proc/self/status:$mine"$'\n'"/proc/1/status:$mine" ] ||
            fail "caller's $mine; inside: $output"
    done
    last=$(($(nproc) - 1))
    for cpus in "0,$last" "$last"; do
        run --separate-stderr pinned "$cpus" run -C "$WS" -c 'grep Cpus_allowed_list /proc/self/status'
        assert_status 0
        [ "$output" = "$(taskset -c "$cpus" grep Cpus_allowed_list /proc/self/status)" ] ||
            fail "started on CPUs $cpus; inside: $output"
    done
}

# pinned CPUS ARGS...: txbox_bin ARGS... from a shell restricted to CPUS
pinned() {
    taskset -pc "$1" "$BASHPID" >/dev/null || return 125
    shift
    txbox_bin "$@"
}

@test "hostname changes, if allowed inside, stay inside" {
    local host
    host="$(uname -n)"
    tx -c 'hostname txbox-probe-host 2>/dev/null; uname -n'
    assert_status 0
    [ "$(uname -n)" = "$host" ] || fail "the host's hostname changed to $(uname -n)"
}

# --- symlinks out of the workspace, for both backends ---

@test "a symlink to /etc created and written through: the write fails, nothing outside changes" {
    local b p
    p="$(probe_name etc)"
    for b in overlay copy; do
        new_ws "box/ws"
        snap ws.pre "$WS" --mtime
        tx --backend "$b" -c "ln -s /etc e && echo pwned >>e/passwd"
        [ "$status" != 0 ] || fail "[$b] writing through e -> /etc succeeded"
        assert_tree ws.pre "$WS" --mtime || fail "[$b] workspace changed"
        # Now one that commits the symlink and keeps going after failed writes.
        tx --backend "$b" -c "ln -s /etc e; echo pwned >>e/passwd; echo x >e/$p; ln -s .. up; echo x >up/$p; ln -s /etc/hosts h; echo pwned >h; exit 0"
        assert_status 0
        [ "$(readlink "$WS/e")" = /etc ] && [ "$(readlink "$WS/up")" = .. ] || fail "[$b] symlinks not committed"
        [ ! -e "/etc/$p" ] && [ ! -e "$BATS_TEST_TMPDIR/box/$p" ] || fail "[$b] a write escaped the workspace"
        assert_host_unchanged || fail "[$b]"
    done
}

@test "pre-existing symlinks to /etc and .. replaced by directories: commit writes inside" {
    local b s
    s='echo x >link_etc/probe 2>/dev/null; rm link_etc; mkdir link_etc; echo mine >link_etc/passwd
rm link_up; mkdir link_up; echo mine >link_up/README; mkdir link_up/outside; echo mine >link_up/outside/a.txt'
    for b in overlay copy; do
        new_ws "box/ws"
        make_ref "$WS" "$BATS_TEST_TMPDIR/ref" "${s#*2>/dev/null; }"
        snap ref "$BATS_TEST_TMPDIR/ref"
        tx --backend "$b" -c "$s"
        assert_status 0
        assert_tree ref "$WS" || fail "[$b] commit differs from the reference"
        assert_host_unchanged || fail "[$b]"
    done
}

@test "a directory replaced by a symlink out of the workspace: commit deletes nothing outside" {
    # The upper holds whiteouts for docs/a.txt, docs/sub/b.txt and a symlink
    # docs -> ../outside, whose files have the same names: a commit that
    # follows the new symlink would delete the sibling's files.
    local b s='rm -r docs; ln -s ../outside docs; rm -r src; ln -s /etc src'
    for b in overlay copy; do
        new_ws "box/ws"
        make_ref "$WS" "$BATS_TEST_TMPDIR/ref" "$s"
        snap ref "$BATS_TEST_TMPDIR/ref"
        tx --backend "$b" -c "$s"
        assert_status 0
        assert_tree ref "$WS" || fail "[$b] commit differs from the reference"
        assert_host_unchanged || fail "[$b]"
    done
}

@test "writes through pre-existing symlinks pointing outside fail" {
    local b
    for b in overlay copy; do
        new_ws "box/ws"
        ln -s ../outside "$WS/link_out"
        snap ws.pre "$WS" --mtime
        tx --backend "$b" -c 'echo x >>link_out/a.txt'
        [ "$status" != 0 ] || fail "[$b] append through link_out succeeded"
        tx --backend "$b" -c 'echo x >link_up/outside/new'
        [ "$status" != 0 ] || fail "[$b] create through link_up succeeded"
        tx --backend "$b" -c 'echo x >>link_etc/hosts'
        [ "$status" != 0 ] || fail "[$b] append through link_etc succeeded"
        tx --backend "$b" -c 'rm link_up/outside/README'
        [ "$status" != 0 ] || fail "[$b] delete through link_up succeeded"
        assert_tree ws.pre "$WS" --mtime || fail "[$b] workspace changed"
        assert_host_unchanged || fail "[$b]"
    done
}

@test "the command is in its transaction's own cgroups from its start (as root), or held by rlimits (as a user), and the result says which" {
    txj -c 'cat /proc/self/cgroup; cat /proc/1/cgroup'
    assert_status 0
    local via tx out
    via="$(jget protections.limits.via)"
    tx="$(jget tx)"
    out="$(jget stdout)"
    if is_root; then
        # this project's machines: cgroup v1 pids and memory (v2 where the
        # unified hierarchy has both)
        [[ "$via" == "cgroup v1" || "$via" == "cgroup v2" ]] || fail "limits via: $via"
        if [ "$via" = "cgroup v1" ]; then
            for c in pids memory; do
                # the command and the sandbox's init, both (the group:
                # txbox-PID-TX-RANDOM, lib/sandbox/cgroup.c)
                [ "$(grep -c ":$c:/txbox-[0-9]*-$tx-[0-9a-f]\{8\}\$" <<<"$out")" = 2 ] ||
                    fail "not in its own $c group: $out"
            done
        else
            [ "$(grep -c "^0::/txbox/txbox-[0-9]*-$tx-[0-9a-f]\{8\}\$" <<<"$out")" = 2 ] || fail "$out"
        fi
    else
        [ "$via" = rlimits ] || fail "limits via: $via (as a user)"
    fi
}
