# Helpers for the escape suites (tests/integration/escape_*.bats) and the
# everyday-commands suite. Load after common:
#     load ../lib/common
#     load ../lib/escape_helpers
#
# Every attempt works on a "box" of its own, outside /tmp (the sandbox's
# /tmp is private: a box under /tmp would be invisible inside and every
# attempt on it would fail for the wrong reason):
#
#   $ESC_BASE/tNN/ws        the workspace ($WS), filled by populate
#   $ESC_BASE/tNN/outside   $OUT: a sibling directory that must never change
#   $ESC_BASE/tNN/home      $FHOME: the HOME txbox runs with, holding every
#                           secret of the built-in policy's hide: list
#                           (parsed from policy/default.yaml) and ordinary dotfiles
#
# and is checked before and after: the trees of $OUT and $FHOME (content,
# mode, owner, xattrs, mtime; inode, link count and ctime, so that a chmod,
# a touch or a hard link shows), the box's own listing, host files (/etc/passwd
# and friends, a file in the real $HOME), kernel settings, host mounts under
# the base, no file named after the attempt's token in the usual places, and
# a host process (sigsentinel.py, cwd $OUT) that must stay alive, untraced
# and receive no signal. The workspace itself must be unchanged after the
# rollback each attempt ends with (`exit 3`).
#
# Environment: TXBOX_ESCAPE_DIR, where the bases go (tests/run-integration
# makes one under /var/lib; default /var/lib/txbox-escape; not under /tmp or
# /var/tmp, which are private in the sandbox). ESC_SESSION_MODE=1: every
# attempt runs in a session of its box (txbox run --session), started by
# esc_setup and ended by esc_teardown (escape_session.bats sets it; the
# other suites run so too with it in the environment).

ESC_SRC="$REPO_DIR/tests/escape"

# Loading this file installs the hooks below (setup_file, teardown_file,
# setup, teardown); a file that needs more defines its own after the load
# and calls these.

setup_file() { esc_setup_file; }
teardown_file() { esc_teardown_file; }
setup() { esc_setup; }
teardown() { esc_teardown; }

# ---------------------------------------------------------------------------
# Once per file.

esc_setup_file() {
    local parent="${TXBOX_ESCAPE_DIR:-/var/lib/txbox-escape}" real
    [ -n "${TXBOX_ESCAPE_DIR:-}" ] || [ -d "$parent" ] || mkdir -p -m 1777 "$parent" 2>/dev/null
    ESC_BASE="$(mktemp -d "$parent/txbox-escape.XXXXXX")" ||
        fail "cannot create a base directory in $parent (set TXBOX_ESCAPE_DIR)"
    real="$(realpath "$ESC_BASE")"
    case "$real/" in
    /tmp/* | /var/tmp/* | /dev/* | /proc/* | /run/*)
        rm -rf "$ESC_BASE"
        fail "TXBOX_ESCAPE_DIR ($parent) must be a directory the sandbox shows as it is (not under /tmp, /var/tmp, /dev, /proc or /run)"
        return 1
        ;;
    esac
    chmod 0755 "$ESC_BASE"
    mkdir -p "$ESC_BASE/tools" "$ESC_BASE/scripts"
    command -v cc >/dev/null || fail "cc is missing (the escape probes are compiled at test time)"
    cc -O1 -Wall -o "$ESC_BASE/tools/probe" "$ESC_SRC/probe.c" 2>"$ESC_BASE/cc.log" ||
        fail "cannot compile tests/escape/probe.c:" "$(cat "$ESC_BASE/cc.log")"
    cp "$ESC_SRC"/*.py "$ESC_SRC/lib.sh" "$ESC_BASE/tools/"
    chmod -R a+rX "$ESC_BASE/tools"
    # A file in the real HOME, to be checked after every attempt.
    ESC_REAL_HOME="$HOME"
    ESC_CALLER_CWD="$PWD"
    ESC_HOME_SENTINEL="$HOME/.txbox-escape-sentinel.${ESC_BASE##*.}"
    if ! printf 'txbox escape sentinel\n' >"$ESC_HOME_SENTINEL" 2>/dev/null; then
        ESC_HOME_SENTINEL=""
    fi
    export ESC_BASE ESC_TOOLS="$ESC_BASE/tools" ESC_REAL_HOME ESC_HOME_SENTINEL ESC_CALLER_CWD
}

esc_teardown_file() {
    [ -n "${ESC_BASE:-}" ] || return 0
    is_root && chattr -R -i "$ESC_BASE" 2>/dev/null
    rm -rf "$ESC_BASE" || true
    [ -z "${ESC_HOME_SENTINEL:-}" ] || rm -f "$ESC_HOME_SENTINEL"
}

# ---------------------------------------------------------------------------
# Once per test.

# The secrets txbox hides by default, relative to HOME: the ~/ entries of
# the built-in policy's hide: list, read from policy/default.yaml so that a
# new entry there is tested here at once.
esc_default_hidden() {
    sed -n '/^hide:/,/^[a-z]/p' "$REPO_DIR/policy/default.yaml" | sed -n 's|^  - ~/||p'
}

# Is a default hidden entry a file (else a directory)?
esc_is_file_secret() {
    case "$1" in
    *.json | *.toml | *.yml | *.yaml | *.xml | *.properties | *.Config | */credentials | .netrc | .npmrc | \
        .pypirc | .git-credentials | .vault-token | .pgpass | .my.cnf | .s3cfg | .boto | .terraformrc | \
        *history | .histfile | .lesshst | .bundle/config) return 0 ;;
    esac
    return 1
}

esc_fill_home() {
    local h="$1" s
    mkdir -p "$h"
    while read -r s; do
        [ -n "$s" ] || continue
        if esc_is_file_secret "$s"; then
            mkdir -p "$h/$(dirname "$s")"
            printf 'TXBOX-SECRET-file-%s\n' "$s" >"$h/$s"
            chmod 0600 "$h/$s"
        else
            mkdir -p "$h/$s"
            printf 'TXBOX-SECRET-dir-%s\n' "$s" >"$h/$s/secret"
            chmod 0600 "$h/$s/secret"
        fi
    done < <(esc_default_hidden)
    [ -f "$h/.ssh/secret" ] && cp "$h/.ssh/secret" "$h/.ssh/id_ed25519"
    printf 'not a secret\n' >"$h/notes.txt"
    printf '[user]\n\tname = Test\n\temail = test@example.invalid\n' >"$h/.gitconfig"
    printf 'alias ll="ls -l"\n' >"$h/.bashrc"
}

esc_fill_outside() {
    local o="$1"
    mkdir -p "$o/sub/deeper" "$o/keep"
    printf 'outside a\n' >"$o/a.txt"
    printf 'outside b\n' >"$o/b.txt"
    printf 'outside c\n' >"$o/sub/c.txt"
    printf 'outside d\n' >"$o/sub/deeper/d.txt"
    printf 'keep\n' >"$o/keep/k.txt"
    printf 'read only\n' >"$o/ro.txt"
    chmod 0444 "$o/ro.txt"
    printf '#!/bin/sh\necho outside\n' >"$o/exec.sh"
    chmod 0755 "$o/exec.sh"
    ln -s a.txt "$o/link"
    setfattr -n user.keep -v yes "$o/a.txt"
    if is_root; then
        printf 'owned\n' >"$o/owned.txt"
        chown 1234:2345 "$o/owned.txt"
    fi
}

# esc_setup: a fresh box, its pre-state recorded, the sentinel started.
esc_setup() {
    BOX="$ESC_BASE/t$BATS_TEST_NUMBER"
    rm -rf "$BOX"
    mkdir -p "$BOX"
    WS="$BOX/ws"
    OUT="$BOX/outside"
    FHOME="$BOX/home"
    # built once per file, copied (cp -a keeps modes, owners, xattrs, times)
    if [ ! -d "$ESC_BASE/template" ]; then
        mkdir -p "$ESC_BASE/template.new"
        populate "$ESC_BASE/template.new/ws" &&
            esc_fill_outside "$ESC_BASE/template.new/outside" &&
            esc_fill_home "$ESC_BASE/template.new/home" &&
            mv "$ESC_BASE/template.new" "$ESC_BASE/template" || fail "cannot build the box template"
    fi
    cp -a "$ESC_BASE/template/." "$BOX/" || fail "cannot copy the box template"
    ESC_MARK="txbox-probe-$BATS_TEST_NUMBER-$$-$RANDOM"
    ESC_N=0
    ESC_ERRS=()
    export ESC_WS="$WS" ESC_OUT="$OUT" ESC_HOME="$FHOME" ESC_MARK ESC_BOX="$BOX"
    # txbox hides the secrets of the HOME it runs with
    export HOME="$FHOME"
    ESC_SID=""
    if [ "${ESC_SESSION_MODE:-0}" = 1 ]; then
        ESC_SID="$("$TXBOX" session start -C "$WS")" || fail "cannot start the box's session"
    fi
    esc_sentinel_start
    esc_snap pre
    esc_sentinel_ready
}

esc_teardown() {
    [ -z "${ESC_SID:-}" ] || "$TXBOX" session end -C "$WS" "$ESC_SID" >/dev/null 2>&1
    # (the sentinel catches every signal it can: SIGKILL)
    local p
    for p in ${SENT_PID:-} ${LISTENER_PID:-}; do
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    if is_root && [ -n "${BOX:-}" ]; then
        # bind mounts some root-only attempts set up on the host
        grep -o " $BOX/[^ ]*" /proc/self/mountinfo 2>/dev/null | sort -r | while read -r m; do
            umount -l "$m" 2>/dev/null
        done
    fi
    return 0
}

# ---------------------------------------------------------------------------
# The host process that must survive everything.

esc_sentinel_start() {
    SENT_LOG="$BATS_TEST_TMPDIR/sentinel.log"
    : >"$SENT_LOG"
    # (fd 3 closed: bats waits for whoever holds it)
    (cd "$OUT" && exec python3 "$ESC_TOOLS/sigsentinel.py" "$SENT_LOG") </dev/null >/dev/null 2>&1 3>&- &
    SENT_PID=$!
    export SENT_PID
}

# Wait until the sentinel's handlers are in place (it starts while the
# pre-state is taken).
esc_sentinel_ready() {
    local i
    for i in $(seq 200); do
        grep -q '^ready$' "$SENT_LOG" && break
        sleep 0.02
    done
    grep -q '^ready$' "$SENT_LOG" || fail "the sentinel process did not start"
    SENT_START="$(esc_starttime "$SENT_PID")"
    SENT_PGID="$(ps -o pgid= -p "$SENT_PID" | tr -d ' ')"
    export SENT_PGID
}

# field 22 of /proc/PID/stat (after the command name, which may hold spaces)
esc_starttime() {
    local s
    s="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    s="${s##*) }"
    set -- $s
    echo "${20}"
}

esc_sentinel_check() {
    local st state tracer
    st="$(esc_starttime "$SENT_PID")" || {
        echo "the host sentinel process $SENT_PID is gone"
        return 1
    }
    [ "$st" = "$SENT_START" ] || {
        echo "the host sentinel process $SENT_PID is gone (its pid was reused)"
        return 1
    }
    state="$(awk '/^State:/{print $2}' "/proc/$SENT_PID/status")"
    tracer="$(awk '/^TracerPid:/{print $2}' "/proc/$SENT_PID/status")"
    case "$state" in T | t | Z | X)
        echo "the host sentinel process $SENT_PID is in state $state"
        return 1
        ;;
    esac
    [ "$tracer" = 0 ] || {
        echo "the host sentinel process $SENT_PID is traced by $tracer"
        return 1
    }
    if grep -v '^ready$' "$SENT_LOG" | grep -q .; then
        echo "the host sentinel process received signals: $(grep -v '^ready$' "$SENT_LOG" | sort | uniq -c | tr '\n' ';')"
        return 1
    fi
    return 0
}

# ---------------------------------------------------------------------------
# Host state.

ESC_HOST_FILES=(/etc/passwd /etc/group /etc/hosts /etc/hostname /etc/resolv.conf /etc/shells /etc/profile
    # the host's device nodes (the sandbox's /dev binds some of them)
    /dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/tty
    # kernel settings
    /proc/sys/kernel/core_pattern /proc/sys/kernel/hostname /proc/sys/kernel/domainname
    /proc/sys/net/ipv4/ip_forward /proc/sys/vm/overcommit_memory /proc/sys/kernel/sysrq
    /proc/sys/fs/protected_symlinks /sys/fs/cgroup/pids/release_agent /sys/fs/cgroup/memory/release_agent
    /sys/fs/cgroup/pids/notify_on_release /sys/kernel/mm/transparent_hugepage/enabled /sys/class/net/lo/mtu)

# esc_snap NAME: the host state into $BATS_TEST_TMPDIR/NAME/ (one file per
# part, see tests/escape/hostsnap.py). $ESC_STAT_LOOSE: relative paths of
# $OUT whose link count and ctime may change (a test where a workspace name
# of the file is legitimately renamed).
esc_snap() {
    local d="$BATS_TEST_TMPDIR/$1" files=("${ESC_HOST_FILES[@]}")
    local places=(/ /etc /usr /usr/bin /usr/local/bin /var/tmp /dev/shm /tmp "$ESC_BASE" "$ESC_REAL_HOME" "$ESC_CALLER_CWD")
    [ -z "${ESC_HOME_SENTINEL:-}" ] || files+=("$ESC_HOME_SENTINEL")
    if is_root; then
        files+=(/etc/shadow)
        places+=(/root)
    fi
    rm -rf "$d"
    python3 "$ESC_TOOLS/hostsnap.py" "$d" --tree out "$OUT" --tree home "$FHOME" --ws "$WS" \
        --list box "$BOX" --list base "$ESC_BASE" "t$BATS_TEST_NUMBER" --files "${files[@]}" \
        --mounts "$ESC_BASE/" --mark "$ESC_MARK" "${places[@]}" --loose ${ESC_STAT_LOOSE:-} ||
        fail "hostsnap failed"
}

# esc_host_diff: print every difference from the pre-state outside the
# workspace (nothing if the host is unchanged); status 1 if any.
esc_host_diff() {
    local d="$BATS_TEST_TMPDIR" k bad=0 msg
    esc_snap post
    for k in out.tree home.tree box.list base.list host mounts mark; do
        if ! msg="$(diff -u "$d/pre/$k" "$d/post/$k")"; then
            echo "changed outside the workspace ($k):"
            echo "$msg" | tail -n +3 | head -40
            bad=1
        fi
    done
    msg="$(esc_sentinel_check)" || {
        echo "$msg"
        bad=1
    }
    return "$bad"
}

# esc_ws_diff: the workspace as in the pre-state (after esc_host_diff).
esc_ws_diff() {
    local d="$BATS_TEST_TMPDIR" msg
    if ! msg="$(diff -u "$d/pre/ws.tree" "$d/post/ws.tree")"; then
        echo "the workspace changed although the attempt was rolled back:"
        echo "$msg" | tail -n +3 | head -40
        return 1
    fi
}

# ---------------------------------------------------------------------------
# Attempts.

# attempt [TXBOX RUN OPTIONS...] <<'EOF' ... EOF
# The script on stdin, after tests/escape/lib.sh (try, trysh, $PROBE; it
# prints TXBOX-ATTEMPT-RAN first), runs as `txbox run --json OPTIONS -- /bin/sh
# SCRIPT` in $WS, with stdin from $ESC_STDIN (default /dev/null). Sets
# status/output like `run`, and ATT_OUTCOME, ATT_OUT, ATT_ERR (the
# outcome, the command's stdout and stderr; see esc_split_result).
attempt() {
    ESC_N=$((ESC_N + 1))
    ESC_SCRIPT="$ESC_BASE/scripts/t$BATS_TEST_NUMBER-$ESC_N.sh"
    {
        printf '. "$ESC_TOOLS/lib.sh"\n'
        cat
    } >"$ESC_SCRIPT"
    # the box's variables are the caller's own: kept through the allowlist
    run --separate-stderr txbox_bin run -C "$WS" --json --keep-env 'ESC_*' --keep-env 'SENT_*' \
        ${ESC_SID:+--session "$ESC_SID"} "$@" -- /bin/sh "$ESC_SCRIPT" <"${ESC_STDIN:-/dev/null}"
    esc_split_result
}

# esc_split_result: ATT_OUTCOME, ATT_OUT and ATT_ERR from the run object in
# $output, in one pass (the contract itself is checked by the other suites).
# If txbox failed instead (no run object), that is recorded in ESC_ERRS and
# all three are empty.
esc_split_result() {
    local d="$BATS_TEST_TMPDIR/result"
    mkdir -p "$d"
    if printf '%s' "$output" | python3 -c '
import json, sys
o = json.load(sys.stdin)
if not isinstance(o, dict) or not isinstance(o.get("outcome"), str):
    sys.exit(1)
for k in ("outcome", "stdout", "stderr"):
    open(sys.argv[1] + "/" + k, "w").write(o.get(k) or "")
' "$d" 2>/dev/null; then
        ATT_OUTCOME="$(cat "$d/outcome")"
        ATT_OUT="$(cat "$d/stdout")"
        ATT_ERR="$(cat "$d/stderr")"
    else
        # txbox itself failed: the checks that follow still look at the host
        ATT_OUTCOME=""
        ATT_OUT=""
        ATT_ERR=""
        ESC_ERRS+=("txbox failed instead of reporting the attempt (status $status): $(clip "$stderr") $(clip "$output")")
    fi
}

# each_backend [TXBOX RUN OPTIONS...] <<'EOF' ... EOF: the same attempt on
# every backend ($ESC_BACKENDS, default "overlay copy"), each checked with
# esc_check (exit 3, rolled back, nothing changed).
each_backend() {
    local script b
    script="$(cat)"
    for b in ${ESC_BACKENDS:-overlay copy}; do
        attempt --backend "$b" "$@" <<<"$script"
        esc_check "$b"
    done
}

# The "OK" lines of the attempt's output (the calls that succeeded).
esc_oks() {
    grep '^OK ' <<<"$ATT_OUT"
}

# esc_check [LABEL] [--status N] [--outcome O]: the attempt ran (its marker
# is there), ended with status N (default 3: the script's `exit 3`) and
# outcome O (default rolled_back), no call in it succeeded, the host is
# unchanged and so is the workspace. Failures are collected in ESC_ERRS
# (report them with esc_done), so that every backend's result is seen.
esc_check() {
    local label="" want_status=3 want_outcome=rolled_back oks msg
    while [ $# -gt 0 ]; do
        case "$1" in
        --status) want_status="$2"; shift 2 ;;
        --outcome) want_outcome="$2"; shift 2 ;;
        *) label="[$1] "; shift ;;
        esac
    done
    if ! grep -q '^TXBOX-ATTEMPT-RAN$' <<<"$ATT_OUT"; then
        ESC_ERRS+=("${label}the attempt did not run (status $status): stdout: $(clip "$output") stderr: $(clip "$stderr")")
    else
        [ "$status" = "$want_status" ] ||
            ESC_ERRS+=("${label}exit status $status, want $want_status; command stderr: $(clip "$ATT_ERR")")
        [ "$ATT_OUTCOME" = "$want_outcome" ] ||
            ESC_ERRS+=("${label}outcome '$ATT_OUTCOME', want $want_outcome")
    fi
    if oks="$(esc_oks)"; then
        ESC_ERRS+=("${label}ESCAPE: these calls succeeded inside the sandbox:
$oks")
    fi
    msg="$(esc_host_diff)" || ESC_ERRS+=("${label}ESCAPE: the host changed:
$msg")
    msg="$(esc_ws_diff)" || ESC_ERRS+=("${label}$msg")
    # the next attempt of the same test starts from here
    rm -rf "$BATS_TEST_TMPDIR/pre"
    mv "$BATS_TEST_TMPDIR/post" "$BATS_TEST_TMPDIR/pre"
}

# After esc_check on an attempt that commits: the workspace is meant to
# change, so drop that complaint (the test checks the workspace itself).
esc_drop_ws_errors() {
    local keep=() e
    for e in "${ESC_ERRS[@]}"; do
        [[ "$e" == *"the workspace changed although"* ]] || keep+=("$e")
    done
    ESC_ERRS=("${keep[@]}")
}

# Report the failures collected by esc_check and the like.
esc_done() {
    if [ "${#ESC_ERRS[@]}" -gt 0 ]; then
        printf '%s\n' "${ESC_ERRS[@]}" >&2
        echo "(attempt script: $ESC_SCRIPT; command stdout:)" >&2
        printf '%s\n' "$(clip "$ATT_OUT")" >&2
        return 1
    fi
}

# ---------------------------------------------------------------------------
# Control runs: the same attempt without txbox, to show that the checks
# would see it succeed. Only for attempts that target the box, never the
# real host.

# control_run: the last attempt's script, by plain /bin/sh in $WS, as the
# same user, with the same environment. Its output in CONTROL_OUT.
# ESC_CONTROL=1 is set: lines of a script that would touch the real host
# when run without txbox skip themselves with [ -n "${ESC_CONTROL:-}" ] ||.
# ESC_TMP is the test's own directory: a script writes the shared temporary
# directory as "${ESC_TMP:-/tmp}" (in the box its own /tmp; in the control
# run not the host's, where nothing of a test may stay).
control_run() {
    mkdir -p "$BATS_TEST_TMPDIR/control-tmp"
    CONTROL_OUT="$(cd "$WS" && ESC_CONTROL=1 ESC_TMP="$BATS_TEST_TMPDIR/control-tmp" /bin/sh "$ESC_SCRIPT" 2>&1 \
        <"${ESC_STDIN:-/dev/null}")" || true
}

# expect_detected WHAT: after control_run, the checks must see the change.
expect_detected() {
    local what="$1" msg
    if msg="$(esc_host_diff)"; then
        fail "control run without txbox ($what): the host checks saw no change, so they would not see an escape either" \
            "control output: $(clip "$CONTROL_OUT")"
        return 1
    fi
    grep -q '^OK ' <<<"$CONTROL_OUT" ||
        fail "control run without txbox ($what): no call reported success, so the OK lines prove nothing" \
            "control output: $(clip "$CONTROL_OUT")"
}

# esc_done_controlled WHAT: esc_done, then the control run of the last
# attempt's script, which the checks must see.
esc_done_controlled() {
    esc_done || return 1
    control_run
    expect_detected "$1"
}

# Root-only attempts: they do not apply to an unprivileged run.
root_only() {
    is_root || skip "applies to root only: $1"
}

# ---------------------------------------------------------------------------
# The host's listeners (tests/escape/listener.py), for the network suites.

# The host's listeners; exports ESC_TCP4 ESC_TCP6 ESC_UDP4 ESC_USOCK ESC_ABSTRACT.
start_listener() {
    LDIR="$BATS_TEST_TMPDIR/listener"
    mkdir -p "$LDIR"
    : >"$LDIR/log"
    export ESC_USOCK="$OUT/host.sock" ESC_ABSTRACT="txbox-escape-$ESC_MARK"
    python3 "$ESC_TOOLS/listener.py" "$LDIR" "$ESC_USOCK" "$ESC_ABSTRACT" </dev/null >"$LDIR/out" 2>&1 3>&- &
    LISTENER_PID=$!
    local i
    for i in $(seq 100); do
        [ -f "$LDIR/ports" ] && break
        sleep 0.05
    done
    [ -f "$LDIR/ports" ] || fail "the host listener did not start: $(cat "$LDIR/out")"
    . "$LDIR/ports"
    export ESC_TCP4="$TCP4" ESC_TCP6="$TCP6" ESC_UDP4="$UDP4"
    # the socket file is part of the box from now on
    esc_snap pre
}

# Nothing reached the listener.
listener_untouched() {
    sleep 0.3
    if [ -s "$LDIR/log" ]; then
        ESC_ERRS+=("${1:+[$1] }ESCAPE: the host listener was reached: $(cat "$LDIR/log")")
        : >"$LDIR/log"
    fi
}
