#!/usr/bin/env bats
# The command's lifetime: killed by a signal (128+N, rolled back), timed out
# (124, rolled back, promptly), and background processes that die with the
# transaction (nothing they do after the command exits reaches anything).

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    new_ws
    snap pre "$WS" --mtime
}

@test "killed by SIGKILL: 137, rolled back" {
    local b
    for b in overlay copy; do
        txj --backend "$b" -c 'echo x >new; rm -r src; echo more >>README; kill -9 $$; echo survived >alive'
        assert_status 137 || fail "[$b]"
        assert_outcome rolled_back || fail "[$b]"
        assert_json_field signal 9 || fail "[$b]"
        assert_tree pre "$WS" --mtime || fail "[$b] workspace changed"
    done
}

@test "killed by SIGTERM and SIGSEGV: 128+N, rolled back" {
    tx -c 'echo x >new; kill -TERM $$; sleep 5; echo survived >alive'
    assert_status 143
    assert_tree pre "$WS" --mtime
    tx -- sh -c 'echo x >new; kill -SEGV $$; sleep 5'
    assert_status 139
    assert_tree pre "$WS" --mtime
}

@test "--timeout: 124, timed_out, rolled back, returns promptly" {
    local t0 t1 b
    for b in overlay copy; do
        t0="$(date +%s)"
        txj --backend "$b" --timeout 1 -c 'echo x >new; rm -r docs; sleep 30'
        t1="$(date +%s)"
        assert_status 124 || fail "[$b]"
        assert_outcome timed_out || fail "[$b]"
        assert_tree pre "$WS" --mtime || fail "[$b] workspace changed"
        [ $((t1 - t0)) -lt 15 ] || fail "[$b] --timeout 1 took $((t1 - t0)) s"
    done
}

@test "--timeout: a read-only command that runs over is timed_out and 124 too" {
    txj --timeout 1 -c 'sleep 30'
    assert_status 124
    assert_outcome timed_out
    [ "$(jget verdict)" = safe ] || fail "sleep was not classified read-only: $(jget verdict)"
    tx --timeout 1 -c 'sleep 30'
    assert_status 124
    [[ "$stderr" == *"read-only command timed out"* ]] || fail "status line: $stderr"
    assert_tree pre "$WS" --mtime
}

@test "--timeout: a command that ignores SIGTERM and its children are still stopped" {
    local t0 t1
    t0="$(date +%s)"
    tx --timeout 1 -c 'trap "" TERM INT HUP; (trap "" TERM; sleep 40) & sleep 40 & echo x >new; while :; do sleep 1; done'
    t1="$(date +%s)"
    assert_status 124
    assert_tree pre "$WS" --mtime
    [ $((t1 - t0)) -lt 20 ] || fail "--timeout 1 took $((t1 - t0)) s"
}

@test "a command that finishes in time is not affected by --timeout" {
    tx --timeout 20 -c 'sleep 0.2; echo in time >t'
    assert_status 0
    [ -f "$WS/t" ] || fail "not committed"
}

# late_write_check BACKEND EXIT MAKE_BG: the command starts a background job
# (MAKE_BG: a shell snippet using $LATE as the file name) then exits with
# EXIT; 1.5 s after txbox returns, no file named $LATE may exist anywhere.
late_write_check() {
    local b="$1" code="$2" bg="$3" name t0 t1
    LATE="$(probe_name late)"
    new_ws
    snap late.pre "$WS" --mtime
    t0="$(date +%s)"
    tx --backend "$b" -c "LATE=$LATE; $bg
echo now >now.txt; exit $code"
    t1="$(date +%s)"
    [ "$status" = "$code" ] || fail "[$b] status $status, want $code; stderr: $(clip "$stderr")"
    [ $((t1 - t0)) -lt 10 ] || fail "[$b] txbox waited $((t1 - t0)) s for a background job"
    sleep 1.5
    name="$(find "$BATS_TEST_TMPDIR" /tmp -maxdepth 6 -name "$LATE*" 2>/dev/null | head -n3)"
    [ -z "$name" ] || fail "[$b] a background process wrote after the command exited: $name"
    if [ "$code" = 0 ]; then
        [ -f "$WS/now.txt" ] || fail "[$b] the command's own change was not committed"
    else
        assert_tree late.pre "$WS" --mtime || fail "[$b] rollback changed the workspace"
    fi
}

@test "background writes after exit never land (commit)" {
    local b
    for b in overlay copy; do
        late_write_check "$b" 0 '(sleep 0.5; echo late >"$LATE") &'
    done
}

@test "background writes after exit never land (rollback)" {
    late_write_check overlay 1 '(sleep 0.5; echo late >"$LATE") &'
}

@test "a daemonized background process (setsid, fds closed, absolute paths) never writes" {
    local b
    for b in overlay copy; do
        late_write_check "$b" 0 'setsid sh -c "sleep 0.5; echo late >\"$PWD/$LATE\"; echo late >/tmp/$LATE" </dev/null >/dev/null 2>&1 &'
    done
}

@test "a background process holding stdout open does not hang txbox" {
    local b
    for b in overlay copy; do
        late_write_check "$b" 0 '(sleep 20; echo late >"$LATE") &'
        late_write_check "$b" 0 'nohup sh -c "sleep 20; echo late >$LATE" 2>&1 &'
    done
}

@test "a background process holding the captured output open does not hang txbox --json" {
    local t0 t1
    t0="$(date +%s)"
    txj -c '(sleep 20; echo late) & echo early'
    t1="$(date +%s)"
    assert_status 0
    [ $((t1 - t0)) -lt 6 ] || fail "txbox --json waited $((t1 - t0)) s"
    [ "$(jget stdout)" = early ] || fail "stdout: $(jget stdout)"
}

@test "txbox killed (SIGKILL) at any moment of its start leaves no process behind, and the workspace as it was" {
    # The sandbox's init is started early, while txbox still prepares, and
    # shares its descriptors until let go: killed then, it must go too.
    # Kills at every millisecond of the first 40 (policy, prepare,
    # namespaces, set-up), three times over, for a read-only command and a
    # writing one.
    local i k mark="txbox-kill-$$-$RANDOM" pid left="" cmd
    for k in 1 2 3; do
        for i in $(seq 1 40); do
            for cmd in "sleep 30 # $mark" "echo x >new$i; sleep 30 # $mark"; do
                "$TXBOX" run -C "$WS" -c "$cmd" >/dev/null 2>&1 </dev/null &
                pid=$!
                sleep "$(printf '0.%03d' "$i")"
                kill -9 "$pid" 2>/dev/null || true
                wait "$pid" 2>/dev/null || true
            done
        done
    done
    for i in $(seq 1 50); do
        left="$(pgrep -f -- "$mark" || true)"
        [ -z "$left" ] && break
        sleep 0.1
    done
    [ -z "$left" ] || fail "left behind: $(ps -o pid,ppid,stat,args -p "$(echo $left | tr ' ' ,)")"
    run --separate-stderr txbox_bin recover -C "$WS"
    assert_status 0
    assert_tree pre "$WS" --mtime
}

@test "the sandbox ends whole before txbox exits: its init, every process and its control group" {
    # txbox no longer waits for the sandbox's init to end before the commit
    # (the overlay's unmount overlaps it), but it has ended, with its
    # cgroup, when txbox exits: committed and rolled back alike.
    local c d before after
    for c in 'mkdir -p t && for i in $(seq 1 500); do : >t/f$i; done; sleep 1017 & echo bg' 'sleep 1017 & exit 3'; do
        before="$(ls /sys/fs/cgroup/txbox /sys/fs/cgroup/pids /sys/fs/cgroup/memory 2>/dev/null | grep '^txbox-' | sort)"
        run txbox_bin run -C "$WS" -c "$c"
        ! pgrep -x sleep -a | grep -q ' 1017$' || fail "[$c] a process of the sandbox outlived txbox: $(pgrep -x sleep -a)"
        # root's transactions have a control group (root's tests run one at
        # a time; the user's run beside them and have none)
        is_root || continue
        after="$(ls /sys/fs/cgroup/txbox /sys/fs/cgroup/pids /sys/fs/cgroup/memory 2>/dev/null | grep '^txbox-' | sort)"
        [ "$after" = "$before" ] || fail "[$c] control groups left: $(comm -13 <(echo "$before") <(echo "$after"))"
    done
    [ -d "$WS/t" ] || fail "the first command did not commit"
    if is_root; then
        run txbox_bin run -C "$WS" --json -c 'echo x >y'
        pj 'd["protections"]["limits"]["via"]' | grep -q cgroup || fail "no cgroup to check: $output"
    fi
}
