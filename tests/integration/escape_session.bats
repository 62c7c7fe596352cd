#!/usr/bin/env bats
# Escape attempts in a session (txbox run --session): its keeper, the
# processes a command leaves running (still confined once their command
# has ended: the host's files, sockets, loopback and processes), a later
# command writing through an earlier one's view, and one session reaching
# another's loopback, /tmp, abstract sockets or processes. Every attempt
# runs in a session of its box (ESC_SESSION_MODE=1, escape_helpers.bash);
# the other escape suites run so too with ESC_SESSION_MODE=1 in the
# environment.

bats_require_minimum_version 1.5.0
load ../lib/common
ESC_SESSION_MODE=1
load ../lib/escape_helpers

@test "session: its keeper (pid 1) is out of reach: descriptors, root, environment, signals" {
    attempt <<'EOF'
try keeper-environ cat /proc/1/environ
try keeper-fd-links sh -c 'readlink /proc/1/fd/* | grep -q .'
try keeper-fd0 cat /proc/1/fd/3
try keeper-root ls /proc/1/root/
try keeper-cwd ls /proc/1/cwd/
try keeper-mem dd if=/proc/1/mem bs=1 count=1 skip=4096
try keeper-maps cat /proc/1/maps
try keeper-ns-net ls -l /proc/1/ns/net
# the kernel drops these for its pid namespace's init: it must live on
kill -KILL 1 2>/dev/null; kill -STOP 1 2>/dev/null; kill -TERM 1 2>/dev/null; kill -HUP 1 2>/dev/null
exit 3
EOF
    esc_check
    # the session still runs, and still answers a command
    run --separate-stderr txbox_bin session status -C "$WS" "$ESC_SID"
    [ "$status" = 0 ] || ESC_ERRS+=("the session ended after signals from a command: $stderr")
    attempt <<'EOF'
exit 3
EOF
    esc_check
    esc_done
}

@test "session: a process left running stays confined after its command: host files, sockets, loopback, processes" {
    start_listener
    # the attempt leaves a process that tries, once the command has ended
    # (and its transaction is decided), what the command itself could not
    attempt <<'EOF'
(
    sleep 1.5
    {
        try bg-write-outside sh -c 'echo x >"$ESC_OUT/bg-$ESC_MARK"'
        try bg-write-home sh -c 'echo x >"$ESC_HOME/.bashrc"'
        try bg-read-secret cat "$ESC_HOME/.ssh/id_rsa"
        try bg-unix-connect python3 -c 'import os, socket; s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(os.environ["ESC_USOCK"]); s.sendall(b"bg")'
        try bg-abstract-connect python3 -c 'import os, socket; s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect("\0" + os.environ["ESC_ABSTRACT"]); s.sendall(b"bg")'
        try bg-tcp-connect python3 -c 'import os, socket; s = socket.create_connection(("127.0.0.1", int(os.environ["ESC_TCP4"])), 2); s.sendall(b"bg")'
        try bg-signal-sentinel kill -USR1 "$SENT_PID"
        trysh bg-mount-out 'mount -t tmpfs none "$ESC_OUT"'
        trysh bg-remount-root 'mount -o remount,rw /'
        "$PROBE" ptrace 1
        echo BG-DONE
    } >/tmp/bg-result 2>&1
) &
exit 3
EOF
    esc_check
    attempt <<'EOF'
for i in $(seq 1 150); do grep -q BG-DONE /tmp/bg-result 2>/dev/null && break; sleep 0.1; done
cat /tmp/bg-result
exit 3
EOF
    grep -q '^BG-DONE$' <<<"$ATT_OUT" || ESC_ERRS+=("the background attempts did not run: $(clip "$ATT_OUT")")
    esc_check
    listener_untouched
    esc_done
}

@test "session: a later command cannot write through an earlier command's view (/proc/PID/root)" {
    attempt <<'EOF'
sleep 1000 &
echo $! >/tmp/bg.pid
exit 3
EOF
    esc_check
    attempt <<'EOF'
pid=$(cat /tmp/bg.pid)
try via-root-ws sh -c "echo x >>/proc/$pid/root$ESC_WS/README"
try via-root-new sh -c "echo x >/proc/$pid/root$ESC_WS/new-$ESC_MARK"
try via-cwd sh -c "echo x >/proc/$pid/cwd/new2-$ESC_MARK"
try via-root-outside sh -c "echo x >/proc/$pid/root$ESC_OUT/o-$ESC_MARK"
try via-root-state ls "/proc/$pid/root$ESC_WS/.txbox/"
exit 3
EOF
    esc_check
    esc_done
}

@test "session: one session cannot reach another's loopback, /tmp, abstract sockets or processes" {
    local other port
    other="$("$TXBOX" session start -C "$WS")" || fail "cannot start the other session"
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    # the other session: a TCP server, an abstract and a /tmp unix socket,
    # a file in its /tmp, a process to signal (its log says if it was)
    run --separate-stderr txbox_bin run -C "$WS" --session "$other" --keep-env 'ESC_*' -c "
        echo other-secret >/tmp/other.txt
        python3 -m http.server $port --bind 127.0.0.1 >/dev/null 2>&1 &
        python3 -c 'import socket, time
a = socket.socket(socket.AF_UNIX); a.bind(\"\\0other-$ESC_MARK\"); a.listen(5)
u = socket.socket(socket.AF_UNIX); u.bind(\"/tmp/other.sock\"); u.listen(5)
time.sleep(1000)' &
        python3 \"\$ESC_TOOLS/sigsentinel.py\" /tmp/other-sentinel.log >/dev/null 2>&1 &
        echo \$! >/tmp/other.pid
        sleep 1"
    [ "$status" = 0 ] || fail "the other session's command failed: $stderr"
    export ESC_PORT="$port"
    attempt <<'EOF'
try other-tcp python3 -c 'import os, socket; socket.create_connection(("127.0.0.1", int(os.environ["ESC_PORT"])), 2)'
try other-abstract python3 -c 'import os, socket; s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect("\0other-" + os.environ["ESC_MARK"])'
try other-tmp-file cat /tmp/other.txt
try other-tmp-sock python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect("/tmp/other.sock")'
try other-process sh -c 'ps -eo args | grep -v grep | grep -q sigsentinel'
# signal every pid this session can name: none is the other's
trap '' USR1
for p in $(seq 2 400); do kill -USR1 "$p" 2>/dev/null; done
exit 3
EOF
    esc_check
    run --separate-stderr txbox_bin run -C "$WS" --session "$other" -c 'cat /tmp/other-sentinel.log 2>/dev/null; cat /tmp/other.txt'
    "$TXBOX" session end -C "$WS" "$other" >/dev/null 2>&1
    [[ "$output" == *other-secret* ]] || ESC_ERRS+=("the other session lost its /tmp: $output")
    # (SIGCONT, 18: its own session let it go on after its command ended)
    [[ "$output" == *ready* ]] && ! grep -v '^signal 18$' <<<"$output" | grep -q '^signal ' ||
        ESC_ERRS+=("ESCAPE: the other session's process got a signal (or never started): $output")
    esc_done
}
