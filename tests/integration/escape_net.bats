#!/usr/bin/env bats
# Escape attempts, network and terminal: TCP and UDP to listeners on the
# host's loopback and addresses, the host's unix sockets (abstract and in
# the file system), DNS, and terminal injection (TIOCSTI, TIOCLINUX) or
# takeover of the caller's terminal.
#
# The host side is tests/escape/listener.py, which logs every connection or
# datagram it gets; tests/escape/ptyrun.py runs txbox on a pseudo-terminal
# and reports what was pushed into its input queue.

bats_require_minimum_version 1.5.0
load ../lib/common
load ../lib/escape_helpers

# listener_verdict KIND: nothing reached the listener, the attempt is
# checked (esc_check, esc_done); then the control run from the host side
# must reach it with a KIND connection.
listener_verdict() {
    listener_untouched
    esc_check
    esc_done || return 1
    control_run
    listener_reached_by_control "$1"
}

listener_reached_by_control() {
    sleep 0.3
    [ -s "$LDIR/log" ] ||
        fail "control: the script reaches nothing even without txbox, so the check proves nothing: $(clip "$CONTROL_OUT")"
    grep -q "^$1 " "$LDIR/log" ||
        fail "control: the listener logged no $1 connection: $(cat "$LDIR/log")"
}

@test "TCP to a listener on the host's loopback (127.0.0.1, ::1) and to the host's own addresses (control)" {
    start_listener
    export ESC_ADDRS="$(hostname -I 2>/dev/null)"
    attempt <<'EOF'
cat >"${ESC_TMP:-/tmp}/conn.py" <<'PY'
import os, socket, sys
fam, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_INET6 if fam == "6" else socket.AF_INET)
s.settimeout(2)
s.connect((host, port))
s.sendall(b"from-sandbox")
PY
try tcp4-loopback python3 "${ESC_TMP:-/tmp}/conn.py" 4 127.0.0.1 "$ESC_TCP4"
[ "$ESC_TCP6" = 0 ] || try tcp6-loopback python3 "${ESC_TMP:-/tmp}/conn.py" 6 ::1 "$ESC_TCP6"
try tcp4-loopback-other-name python3 "${ESC_TMP:-/tmp}/conn.py" 4 127.1.2.3 "$ESC_TCP4"
for a in $ESC_ADDRS; do
    case "$a" in *:*) f=6 ;; *) f=4 ;; esac
    try "tcp-host-address-$a" python3 "${ESC_TMP:-/tmp}/conn.py" "$f" "$a" "$ESC_TCP4"
done
try curl-loopback curl -s -m 2 "http://127.0.0.1:$ESC_TCP4/"
exit 3
EOF
    listener_verdict tcp4
}

@test "with network granted (--net, or a rule for one sub-command), the host's loopback and abstract sockets stay out of reach (control: --net=host)" {
    start_listener
    cat >"$WS/conn.py" <<'PY'
import os, socket, sys
for what, fam, addr in (("tcp4", socket.AF_INET, ("127.0.0.1", int(os.environ["ESC_TCP4"]))),
                        ("abstract", socket.AF_UNIX, "\0" + os.environ["ESC_ABSTRACT"])):
    s = socket.socket(fam)
    s.settimeout(2)
    try:
        s.connect(addr)
        s.sendall(b"from-sandbox")
        print("OK", what)
    except OSError as e:
        print("FAIL", what, e)
PY
    esc_snap pre
    local mode
    for mode in --net --net=proxy; do
        run --separate-stderr txbox_bin run -C "$WS" --json --keep-env 'ESC_*' "$mode" -- python3 conn.py
        esc_split_result
        grep -q '^FAIL abstract' <<<"$ATT_OUT" || ESC_ERRS+=("[$mode] the probe did not run: $(clip "$ATT_OUT") $(clip "$ATT_ERR")")
        [ "$(jget protections.network)" = proxy ] || ESC_ERRS+=("[$mode] protections.network: $(jget protections.network)")
        listener_untouched "$mode"
    done
    # the issue's case: one sub-command matches a network rule
    run --separate-stderr txbox_bin run -C "$WS" --json --keep-env 'ESC_*' -c 'python3 conn.py; exit 0; npm install'
    esc_split_result
    grep -q '^FAIL abstract' <<<"$ATT_OUT" || ESC_ERRS+=("[rule] the probe did not run: $(clip "$ATT_OUT") $(clip "$ATT_ERR")")
    [ "$(jget protections.network)" = proxy ] || ESC_ERRS+=("[rule] protections.network: $(jget protections.network)")
    listener_untouched rule
    esc_done || return 1
    # the control: the explicit opt-in reaches both, and says so
    run --separate-stderr txbox_bin run -C "$WS" --json --keep-env 'ESC_*' --net=host -- python3 conn.py
    esc_split_result
    [ "$(jget protections.network)" = host ] || fail "--net=host: protections.network: $(jget protections.network)"
    # abstract sockets stay behind Landlock's scope where the kernel has it
    # (ABI 6), even in the host's namespace; without it --net=host reaches
    # them, and the protections say which
    if grep -q '^OK abstract' <<<"$ATT_OUT"; then
        [[ "$(jget protections.host_sockets.abstract)" == reachable* ]] || fail "reached, but reported: $(jget protections.host_sockets)"
    else
        [ "$(jget protections.host_sockets.abstract)" = "Landlock scope" ] || fail "control: --net=host did not reach the abstract socket: $(clip "$ATT_OUT") $(jget protections.host_sockets)"
    fi
    listener_reached_by_control tcp4
}

@test "UDP datagrams to a listener on the host's loopback (control)" {
    start_listener
    attempt <<'EOF'
try udp4-sendto python3 -c 'import os, socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); [s.sendto(b"from-sandbox", ("127.0.0.1", int(os.environ["ESC_UDP4"]))) for _ in range(5)]; s.close()'
exit 3
EOF
    # a datagram to the sandbox's own loopback "succeeds" (nobody listens there):
    # the listener decides
    ATT_OUT="$(grep -v '^OK udp4-sendto$' <<<"$ATT_OUT")"
    listener_verdict udp4
}

@test "the host's abstract unix socket (control)" {
    start_listener
    attempt <<'EOF'
try abstract-connect python3 -c 'import os, socket; s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect("\0" + os.environ["ESC_ABSTRACT"]); s.sendall(b"from-sandbox")'
exit 3
EOF
    listener_verdict abstract
}

@test "the host's unix socket in the file system, outside the workspace (control)" {
    # Like a docker.sock, an ssh-agent or a D-Bus socket: connecting to it
    # reaches a host service whatever the mounts say.
    start_listener
    attempt <<'EOF'
try unix-connect python3 -c 'import os, socket; s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(os.environ["ESC_USOCK"]); s.sendall(b"from-sandbox")'
try unix-connect-via-dotdot python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect("../outside/host.sock"); s.sendall(b"via-dotdot")'
try unix-connect-dgram python3 -c 'import os, socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto(b"dgram", os.environ["ESC_USOCK"])'
exit 3
EOF
    listener_verdict unix
}

@test "DNS: no name resolves, no query leaves, also with --net (control with --net=host)" {
    attempt <<'EOF'
try getent-hosts getent hosts deb.debian.org
try getent-ahosts getent ahosts registry.npmjs.org
try python-getaddrinfo python3 -c 'import socket; socket.getaddrinfo("deb.debian.org", 443)'
ns="$(awk '$1 == "nameserver" {print $2; exit}' /etc/resolv.conf)"
echo "INFO nameserver $ns"
# a raw query to the host's resolver: must not even leave (no route)
python3 -c "
import socket, sys
s = socket.socket(socket.AF_INET6 if ':' in '$ns' else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
q = b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03deb\x06debian\x03org\x00\x00\x01\x00\x01'
try:
    s.sendto(q, ('$ns', 53))
except OSError as e:
    print('RAW-QUERY sendto:', e.strerror); sys.exit(1)
s.recvfrom(512)
print('OK raw-query-answered')
"
exit 3
EOF
    esc_check
    esc_done
    grep -q '^RAW-QUERY sendto: Network is unreachable$' <<<"$ATT_OUT" ||
        fail "the query to the resolver did not fail with 'Network is unreachable' (it may have left): $(clip "$ATT_OUT")"
    # with --net too: names are resolved by txbox's proxy, outside
    attempt --net <<'EOF'
try getent-hosts getent hosts deb.debian.org
try python-getaddrinfo python3 -c 'import socket; socket.getaddrinfo("deb.debian.org", 443)'
exit 3
EOF
    esc_check net
    esc_done
    # the control: with --net=host the same names resolve (where the host resolves them)
    if getent hosts deb.debian.org >/dev/null 2>&1; then
        attempt --net=host <<'EOF'
getent hosts deb.debian.org && echo RESOLVED
exit 3
EOF
        grep -q '^RESOLVED$' <<<"$ATT_OUT" ||
            fail "control: with --net=host the name does not resolve inside, so the check proves nothing: $(clip "$ATT_ERR")"
    fi
}

# tty_attempt: run the last written script through txbox on a pty;
# REPORT (JSON) in $BATS_TEST_TMPDIR/pty.json.
tty_attempt() {
    ESC_N=$((ESC_N + 1))
    ESC_SCRIPT="$ESC_BASE/scripts/t$BATS_TEST_NUMBER-$ESC_N.sh"
    {
        printf '. "$ESC_TOOLS/lib.sh"\n'
        cat
    } >"$ESC_SCRIPT"
    PTYREP="$BATS_TEST_TMPDIR/pty.json"
    run --separate-stderr python3 "$ESC_TOOLS/ptyrun.py" "$PTYREP" "$TXBOX_DEADLINE" -- \
        "$TXBOX" run -C "$WS" --json --keep-env 'ESC_*' --keep-env 'SENT_*' -- /bin/sh "$ESC_SCRIPT"
    esc_split_result
}

ptyget() {
    python3 -c 'import json, sys; v = json.load(open(sys.argv[1]))[sys.argv[2]]; print(v)' "$PTYREP" "$1"
}

@test "terminal injection: TIOCSTI on stdin and /dev/tty (also with high bits in the request), TIOCLINUX (control)" {
    tty_attempt <<'EOF'
test -t 0 && echo "INFO stdin is a terminal"
"$PROBE" tty 0 "$ESC_MARK"
exit 3
EOF
    esc_check
    # The command's stdin is a terminal: its own (txbox relays it to the
    # caller's); the caller's terminal, checked by ptyrun, must get nothing.
    grep -q 'INFO stdin is a terminal' <<<"$ATT_OUT" || ESC_ERRS+=("the command's stdin was not a terminal: the attempt proves nothing")
    grep -q '^FAIL TIOCSTI EPERM$' <<<"$ATT_OUT" ||
        ESC_ERRS+=("TIOCSTI on stdin did not fail with EPERM (the seccomp filter): $(clip "$ATT_OUT")")
    [[ "$(ptyget injected)" != *"$ESC_MARK"* ]] ||
        ESC_ERRS+=("ESCAPE: text was pushed into the caller's terminal: $(ptyget injected)")
    esc_done
    # the control: the injector run directly on the same kind of terminal works
    python3 "$ESC_TOOLS/ptyrun.py" "$PTYREP" 30 -- "$ESC_TOOLS/probe" tty 0 "$ESC_MARK" >"$BATS_TEST_TMPDIR/control.out" 2>&1 || true
    if grep -q '^OK TIOCSTI$' "$BATS_TEST_TMPDIR/control.out"; then
        [[ "$(ptyget injected)" == *"$ESC_MARK"* ]] ||
            fail "control: TIOCSTI worked without txbox but the harness saw nothing injected: $(cat "$PTYREP")"
    else
        # TIOCSTI disabled on this kernel (dev.tty.legacy_tiocsti=0) for this user
        [ "$(cat /proc/sys/dev/tty/legacy_tiocsti 2>/dev/null)" = 0 ] ||
            fail "control: TIOCSTI fails even without txbox: $(cat "$BATS_TEST_TMPDIR/control.out")"
    fi
}

@test "terminal takeover: the caller's terminal keeps its foreground process group (control)" {
    tty_attempt <<'EOF'
"$PROBE" tty-pgrp 0
exit 3
EOF
    # setsid and a new group of its own inside are harmless, and so is taking
    # the foreground of the command's own terminal (txbox gives it a
    # pseudo-terminal and relays it): the caller's terminal decides
    ATT_OUT="$(grep -v -e '^OK setpgid-own-group$' -e '^OK setsid$' -e '^OK TIOCNOTTY$' -e '^OK TIOCSPGRP-own-group$' <<<"$ATT_OUT")"
    esc_check
    [ "$(ptyget fg_changed)" = False ] ||
        ESC_ERRS+=("ESCAPE: the caller's terminal now has another foreground process group ($(ptyget fg_pgrp), was $(ptyget own_pgrp)): the caller would be stopped by SIGTTIN/SIGTTOU")
    esc_done
    # the control: directly, the same calls move the terminal's foreground group
    # (as a child of a shell: the session leader itself cannot change group)
    python3 "$ESC_TOOLS/ptyrun.py" "$PTYREP" 30 -- sh -c '"$1" tty-pgrp 0; true' x "$ESC_TOOLS/probe" \
        >"$BATS_TEST_TMPDIR/control.out" 2>&1 || true
    [ "$(ptyget fg_changed)" = True ] ||
        fail "control: without txbox the foreground group did not change, so the check proves nothing: $(cat "$BATS_TEST_TMPDIR/control.out") $(cat "$PTYREP")"
}

# A listener on a unix socket at $1 (a path ending in .sock), in a network
# namespace of its own (absent from the host's /proc/net/unix), logging into
# $2; bound only once the file $3 appears, when given (a socket made after
# the command started). Sets NS_LISTENER_PID. (start_any_listener, below.)
start_ns_listener() {
    start_any_listener "${1%.sock}" "$2" "${3:-}"
    NS_LISTENER_PID=$ANY_LISTENER_PID
}

# go_when_running NAME FILE: in the background, create FILE once a process
# whose command line holds NAME runs (the attempt shows itself so).
go_when_running() {
    (
        for i in $(seq 1000); do
            pgrep -f "$1" >/dev/null && break
            sleep 0.02
        done
        : >"$2"
    ) </dev/null >/dev/null 2>&1 3>&- &
}

# The directory where host services keep sockets: /run as root; as a user,
# a runtime directory of their own named by XDG_RUNTIME_DIR.
sock_dir() {
    if is_root; then
        SOCKDIR="/run/txbox-esc-$ESC_MARK"
    else
        SOCKDIR="$BOX/xdg-runtime"
        export XDG_RUNTIME_DIR="$SOCKDIR"
    fi
    mkdir -p "$SOCKDIR"
    chmod 0700 "$SOCKDIR"
    export ESC_SOCKDIR="$SOCKDIR"
}

@test "a unix socket bound in another network namespace, in /run or the runtime directory, is unreachable (control)" {
    sock_dir
    local log="$BATS_TEST_TMPDIR/nslog" i e=0 dirs
    start_ns_listener "$SOCKDIR/svc.sock" "$log"
    for i in $(seq 200); do [ -e "$log.ready" ] && break; sleep 0.02; done
    [ -e "$log.ready" ] || fail "the listener in its own network namespace did not start"
    ! grep -q "$SOCKDIR/svc.sock" /proc/net/unix || fail "the socket shows in the host's /proc/net/unix: the test proves nothing"
    esc_snap pre
    attempt <<'EOF'
try ns-unix-connect python3 -c 'import os, socket; s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(os.environ["ESC_SOCKDIR"] + "/svc.sock"); s.sendall(b"from-sandbox")'
exit 3
EOF
    sleep 0.3
    [ ! -s "$log" ] || ESC_ERRS+=("ESCAPE: the socket in another network namespace was reached: $(cat "$log")")
    dirs="$(jget protections.host_sockets.masked_dirs 2>/dev/null)"
    if is_root; then
        grep -qx /run <<<"$dirs" || ESC_ERRS+=("protections.host_sockets.masked_dirs lacks /run: $dirs")
    else
        grep -qxF "$SOCKDIR" <<<"$dirs" || ESC_ERRS+=("protections.host_sockets.masked_dirs lacks XDG_RUNTIME_DIR: $dirs")
    fi
    esc_check
    esc_done || e=1
    control_run
    sleep 0.3
    kill "$NS_LISTENER_PID" 2>/dev/null || true
    ! is_root || rm -rf "$SOCKDIR"
    [ "$e" = 0 ] || return 1
    grep -q from-sandbox "$log" || fail "control: the script does not reach the socket even without txbox: $(clip "$CONTROL_OUT")"
}

@test "a unix socket bound after the command started, in /run or the runtime directory, is unreachable" {
    sock_dir
    local log="$BATS_TEST_TMPDIR/latelog" go="$BATS_TEST_TMPDIR/late-go"
    # bound once the command runs (it shows itself by a process name)
    start_ns_listener "$SOCKDIR/late.sock" "$log" "$go"
    go_when_running "txbox-late-$ESC_MARK" "$go"
    esc_snap pre
    attempt <<'EOF'
sh -c 'for i in $(seq 100); do sleep 0.05; [ -S "$ESC_SOCKDIR/late.sock" ] && break; done' "txbox-late-$ESC_MARK"
for i in 1 2 3 4 5 6 7 8 9 10; do
    try late-unix-connect python3 -c 'import os, socket; s = socket.socket(socket.AF_UNIX); s.settimeout(1); s.connect(os.environ["ESC_SOCKDIR"] + "/late.sock"); s.sendall(b"late")'
    sleep 0.2
done | sort -u
exit 3
EOF
    sleep 0.3
    [ ! -s "$log" ] || ESC_ERRS+=("ESCAPE: the socket bound after the start was reached: $(cat "$log")")
    [ -e "$log.ready" ] || ESC_ERRS+=("the socket was never bound (the command was not seen running)")
    kill "$NS_LISTENER_PID" 2>/dev/null || true
    ! is_root || rm -rf "$SOCKDIR"
    esc_check
    esc_done
}

@test "the host's abstract unix socket with the host's network (--net): refused by Landlock's scope" {
    start_listener
    attempt --net <<'EOF'
try abstract-connect-host-net python3 -c 'import os, socket; s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect("\0" + os.environ["ESC_ABSTRACT"]); s.sendall(b"from-sandbox")'
exit 3
EOF
    listener_untouched
    local a
    a="$(jget protections.host_sockets.abstract 2>/dev/null)"
    [[ "$a" == *"Landlock scope"* ]] || ESC_ERRS+=("protections.host_sockets.abstract does not name Landlock's scope: $a")
    esc_check
    esc_done
}

# A stream and a datagram socket at $1.sock and $1.dgram, in a network
# namespace of their own, bound once the file $3 appears when given,
# logging what reaches them into $2. Sets ANY_LISTENER_PID.
start_any_listener() {
    local base="$1" log="$2" after="${3:-}" ns=(unshare --net)
    is_root || ns=(unshare --user --map-current-user --net)
    : >"$log"
    "${ns[@]}" python3 -c '
import os, select, socket, sys, time
base, log, after = sys.argv[1], sys.argv[2], sys.argv[3]
while after and not os.path.exists(after):
    time.sleep(0.02)
s = socket.socket(socket.AF_UNIX)
s.bind(base + ".sock")
s.listen(8)
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
d.bind(base + ".dgram")
for p in (base + ".sock", base + ".dgram"):
    os.chmod(p, 0o777)
open(log + ".ready", "w").close()
end = time.time() + 40
while time.time() < end:
    r, _, _ = select.select([s, d], [], [], 0.5)
    for x in r:
        if x is s:
            c, _ = s.accept()
            c.settimeout(1)
            try:
                got = c.recv(64)
            except OSError:
                got = b""
            open(log, "a").write("stream %r\n" % got)
        else:
            open(log, "a").write("dgram %r\n" % d.recv(64))
' "$base" "$log" "$after" </dev/null >/dev/null 2>&1 3>&- &
    ANY_LISTENER_PID=$!
}

# The attempts on a host socket at $ESC_SVC.sock / .dgram: by its path, a
# relative path, a symlink the command makes in the workspace and in /tmp,
# a hard link, datagrams, io_uring's connect.
svc_attempt() {
    attempt "$@" <<'EOF'
for i in 1 2 3 4 5; do [ -S "$ESC_SVC.sock" ] && break; sleep 0.1; done
conn='import socket, sys; s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(sys.argv[1]); s.sendall(b"from-sandbox")'
try svc-connect python3 -c "$conn" "$ESC_SVC.sock"
try svc-connect-relative python3 -c "$conn" "../outside/$(basename "$ESC_SVC").sock"
ln -s "$ESC_SVC.sock" ws-link.sock 2>/dev/null
try svc-connect-ws-symlink python3 -c "$conn" ws-link.sock
ln -s "$ESC_SVC.sock" "${ESC_TMP:-/tmp}/tmp-link.sock" 2>/dev/null
try svc-connect-tmp-symlink python3 -c "$conn" "${ESC_TMP:-/tmp}/tmp-link.sock"
try svc-hardlink-into-tmp ln "$ESC_SVC.sock" "${ESC_TMP:-/tmp}/hard.sock"
try svc-dgram python3 -c 'import socket, sys; d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); d.sendto(b"dgram", sys.argv[1])' "$ESC_SVC.dgram"
try svc-dgram-socketpair python3 -c 'import socket, sys; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b"dgram", sys.argv[1])' "$ESC_SVC.dgram"
[ -n "${ESC_CONTROL:-}" ] || "$PROBE" uring-connect "$ESC_SVC.sock"
rm -f ws-link.sock
exit 3
EOF
}

@test "a unix socket anywhere on the host, bound in another network namespace, is unreachable in every network mode (control)" {
    local log="$BATS_TEST_TMPDIR/anylog" mode e=0
    export ESC_SVC="$OUT/svc-$BATS_TEST_NUMBER"
    start_any_listener "$ESC_SVC" "$log"
    for i in $(seq 200); do [ -e "$log.ready" ] && break; sleep 0.02; done
    [ -e "$log.ready" ] || fail "the listener in its own network namespace did not start"
    ! grep -q "$ESC_SVC" /proc/net/unix || fail "the socket shows in the host's /proc/net/unix: the test proves nothing"
    esc_snap pre
    for mode in "" --net --net=host; do
        svc_attempt $mode
        sleep 0.3
        [ ! -s "$log" ] || ESC_ERRS+=("[${mode:-no network}] ESCAPE: the host socket was reached: $(cat "$log")")
        : >"$log"
        [[ "$(jget protections.host_sockets.elsewhere 2>/dev/null)" == refused* ]] ||
            ESC_ERRS+=("[${mode:-no network}] protections.host_sockets.elsewhere: $(jget protections.host_sockets 2>/dev/null)")
        esc_check "${mode:-no network}"
    done
    esc_done || e=1
    control_run
    sleep 0.3
    kill "$ANY_LISTENER_PID" 2>/dev/null || true
    [ "$e" = 0 ] || return 1
    grep -q "^stream b'from-sandbox'" "$log" && grep -q "^dgram b'dgram'" "$log" ||
        fail "control: the script reaches neither socket without txbox: $(cat "$log") $(clip "$CONTROL_OUT")"
}

@test "a unix socket anywhere on the host, bound after the command started, is unreachable" {
    local log="$BATS_TEST_TMPDIR/anylate" go="$BATS_TEST_TMPDIR/any-go"
    # (a directory of its own, out of the host snapshot's trees: the socket
    # comes and goes during the attempt)
    mkdir "$BOX/late-svc"
    chmod 0777 "$BOX/late-svc"
    export ESC_SVC="$BOX/late-svc/late"
    esc_snap pre
    start_any_listener "$ESC_SVC" "$log" "$go"
    go_when_running "txbox-late-any-$ESC_MARK" "$go"
    attempt <<'EOF'
sh -c 'for i in $(seq 100); do sleep 0.05; [ -S "$ESC_SVC.sock" ] && break; done' "txbox-late-any-$ESC_MARK"
for i in 1 2 3 4 5; do
    try late-any-connect python3 -c 'import os, socket; s = socket.socket(socket.AF_UNIX); s.settimeout(1); s.connect(os.environ["ESC_SVC"] + ".sock"); s.sendall(b"late")'
    sleep 0.2
done | sort -u
exit 3
EOF
    sleep 0.3
    [ -e "$log.ready" ] || ESC_ERRS+=("the socket was never bound (the command was not seen running)")
    [ ! -s "$log" ] || ESC_ERRS+=("ESCAPE: the socket bound after the start was reached: $(cat "$log")")
    kill "$ANY_LISTENER_PID" 2>/dev/null || true
    esc_check
    esc_done
}

@test "the command's own unix sockets work: in /tmp, /var/tmp, /dev/shm and the workspace, by relative path and abstract, in every network mode" {
    local mode
    for mode in "" --net --net=host; do
        run --separate-stderr txbox_bin run -C "$WS" --json $mode -- python3 -c '
import os, socket, threading
def serve(s):
    c, _ = s.accept(); c.sendall(c.recv(16).upper())
addrs = ["/tmp/own.sock", "/var/tmp/own.sock", "/dev/shm/own.sock", "own.sock", "sub/rel.sock", "\0txbox-own-%d" % os.getpid()]
os.mkdir("sub")
for a in addrs:
    s = socket.socket(socket.AF_UNIX); s.bind(a); s.listen(1)
    t = threading.Thread(target=serve, args=(s,)); t.start()
    c = socket.socket(socket.AF_UNIX)
    c.connect(("./" + a) if a.startswith("sub") else a)
    c.sendall(b"ping"); assert c.recv(16) == b"PING", a
    t.join()
    if a[0] != "\0": os.unlink(a)
os.rmdir("sub")
a, b = socket.socketpair(); a.sendall(b"x"); assert b.recv(1) == b"x"
print("ALL-OWN-OK")
'
        [ "$status" = 0 ] || fail "[${mode:-no network}] status $status: $(clip "$output") $(clip "$stderr")"
        [ "$(jget stdout)" = "ALL-OWN-OK" ] || fail "[${mode:-no network}] $(jget stdout) $(jget stderr)"
    done
}

@test "a host service's unix socket inside the workspace itself is unreachable through the workspace view (the guard allows that mount) (control)" {
    local log="$BATS_TEST_TMPDIR/wslog"
    export ESC_SVC="$WS/svc-in-ws"
    start_any_listener "$ESC_SVC" "$log"
    for i in $(seq 200); do [ -e "$log.ready" ] && break; sleep 0.02; done
    [ -e "$log.ready" ] || fail "the listener did not start"
    esc_snap pre
    for backend in overlay copy; do
        attempt --backend "$backend" <<'EOF'
try ws-svc-connect python3 -c 'import os, socket; s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect("svc-in-ws.sock"); s.sendall(b"from-sandbox")'
try ws-svc-connect-abs python3 -c 'import os, socket; s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(os.environ["ESC_SVC"] + ".sock"); s.sendall(b"from-sandbox")'
exit 3
EOF
        sleep 0.3
        [ ! -s "$log" ] || ESC_ERRS+=("[$backend] ESCAPE: the host's socket in the workspace was reached: $(cat "$log")")
        : >"$log"
        esc_check "$backend"
    done
    local e=0
    esc_done || e=1
    control_run
    sleep 0.3
    kill "$ANY_LISTENER_PID" 2>/dev/null || true
    [ "$e" = 0 ] || return 1
    grep -q "^stream b'from-sandbox'" "$log" ||
        fail "control: the script does not reach the socket even without txbox: $(cat "$log") $(clip "$CONTROL_OUT")"
}
