# Shared helpers for txbox's bats integration tests (bats >= 1.5).
# Load with:  load ../lib/common
#
# Environment (set by tests/run-integration, with defaults for a direct
# `bats tests/integration/x.bats`):
#   TXBOX            the binary under test (default: <repo>/build/txbox)
#   TXBOX_MUST_WORK  1: a missing capability fails the test instead of skipping
#   TXBOX_TEST_NOOVL a directory on a filesystem where overlayfs cannot put its
#                    upper directory (prepared by the runner, writable by us)
#   TXBOX_DEADLINE   seconds after which a hung txbox is killed (default 120)

TESTS_LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$TESTS_LIB/../.." && pwd)"
: "${TXBOX:=$REPO_DIR/build/txbox}"
TREESUM="$TESTS_LIB/treesum"
RUNJSON="$TESTS_LIB/runjson"
: "${TXBOX_DEADLINE:=120}"

is_root() { [ "$(id -u)" = 0 ]; }

# A capability the test needs is missing: skip, or fail under TXBOX_MUST_WORK=1.
need() {
    local why="$1"
    if [ "${TXBOX_MUST_WORK:-0}" = 1 ]; then
        echo "required capability missing (TXBOX_MUST_WORK=1): $why" >&2
        return 1
    fi
    skip "$why"
}

fail() {
    printf '%s\n' "$@" >&2
    return 1
}

# clip STRING: at most 1500 characters of STRING, for failure messages.
clip() {
    if [ "${#1}" -gt 1500 ]; then
        printf '%s...[%d characters in all]' "${1:0:1500}" "${#1}"
    else
        printf '%s' "$1"
    fi
}

# Run the binary with a watchdog. The exit status is txbox's own; if txbox
# is still running after TXBOX_DEADLINE seconds it is killed and the call
# fails with a message (status 254), so no test hangs the suite.
txbox_bin() {
    local marker="$BATS_TEST_TMPDIR/.hung.$BASHPID.$RANDOM" pid wd rc
    "$TXBOX" "$@" <&0 &
    pid=$!
    (
        sleep "$TXBOX_DEADLINE" &
        s=$!
        trap 'kill $s 2>/dev/null; exit 0' TERM
        wait $s
        if kill -0 "$pid" 2>/dev/null; then
            : >"$marker"
            kill -KILL "$pid"
        fi
    ) </dev/null >/dev/null 2>&1 &
    wd=$!
    wait "$pid"
    rc=$?
    kill "$wd" 2>/dev/null
    wait "$wd" 2>/dev/null
    if [ -e "$marker" ]; then
        echo "test harness: txbox $* still running after ${TXBOX_DEADLINE}s; killed" >&2
        return 254
    fi
    return "$rc"
}

# tx ARGS...: `txbox run -C "$WS" ARGS...` under bats' run, stdout in
# $output, stderr in $stderr, exit status in $status.
tx() {
    run --separate-stderr txbox_bin run -C "$WS" "$@"
}

# h CMD ARGS...: `txbox CMD -C "$WS" ARGS...` (a history command: log,
# show, diff, undo, restore, gc...) under bats' run, as tx.
h() {
    local cmd="$1"
    shift
    run --separate-stderr txbox_bin "$cmd" -C "$WS" "$@"
}

# commit STRING: `txbox run -c STRING` on $WS, which must commit.
commit() {
    tx -c "$1"
    assert_status 0 || return 1
    [[ "$stderr" == *committed* ]] || fail "not committed: $stderr"
}

# txj ARGS...: as tx, with --json, and the output checked against the
# contract (exactly one object, every field, sane types).
txj() {
    run --separate-stderr txbox_bin run -C "$WS" --json "$@"
    check_run_json
}

check_run_json() {
    printf '%s' "$output" | "$RUNJSON" check-run ||
        fail "txbox run --json output does not follow the contract (status $status)" \
            "stderr: $(clip "$stderr")"
}

# Either a run object or an error object (txbox may report a failed commit
# either way).
check_any_json() {
    printf '%s' "$output" | "$RUNJSON" check-run 2>/dev/null ||
        printf '%s' "$output" | "$RUNJSON" check-error ||
        fail "txbox run --json printed neither a run object nor an error object (status $status)" \
            "stdout: $(clip "$output")" "stderr: $(clip "$stderr")"
}

# jget FIELD...: fields of the JSON in $output, one a line.
jget() {
    printf '%s' "$output" | "$RUNJSON" get "$@"
}

# Assertions with messages that say what happened.
assert_status() {
    local want="$1"
    [ "$status" = "$want" ] ||
        fail "expected exit status $want, got $status" "stdout: $(clip "$output")" "stderr: $(clip "$stderr")"
}

assert_outcome() {
    local got
    got="$(jget outcome)" || return 1
    [ "$got" = "$1" ] ||
        fail "expected outcome $1, got $got" "stdout: $(clip "$output")" "stderr: $(clip "$stderr")"
}

assert_json_field() {
    local got
    got="$(jget "$1")" || return 1
    [ "$got" = "$2" ] ||
        fail "expected $1 = $2, got $got" "stdout: $(clip "$output")" "stderr: $(clip "$stderr")"
}

# A txbox error: status 125, stderr exactly one line `txbox: ...`; with
# --json (first arg "json") also one {"error":...} object on stdout.
assert_txbox_error() {
    assert_status 125 || return 1
    [ "${#stderr_lines[@]}" = 1 ] ||
        fail "expected one line on stderr, got ${#stderr_lines[@]}:" "$(clip "$stderr")"
    [[ "${stderr_lines[0]}" == "txbox: "?* ]] ||
        fail "stderr line is not 'txbox: ...': ${stderr_lines[0]}"
    if [ "${1:-}" = json ]; then
        printf '%s' "$output" | "$RUNJSON" check-error ||
            fail "stdout is not a JSON error object: $(clip "$output")"
    fi
}

# snap NAME DIR [treesum flags]: save DIR's listing (without the digest
# line) to $BATS_TEST_TMPDIR/NAME.sum.
snap() {
    local name="$1" dir="$2"
    shift 2
    "$TREESUM" -v "$@" "$dir" >"$BATS_TEST_TMPDIR/$name.sum.tmp" ||
        fail "treesum failed on $dir"
    grep -v '^digest ' "$BATS_TEST_TMPDIR/$name.sum.tmp" >"$BATS_TEST_TMPDIR/$name.sum"
}

# same_tree A B: listings A and B (names given to snap) are identical.
same_tree() {
    local a="$BATS_TEST_TMPDIR/$1.sum" b="$BATS_TEST_TMPDIR/$2.sum" d
    if ! d="$(diff -u "$a" "$b")"; then
        fail "trees differ ($1 vs $2):" "$d"
    fi
}

# assert_tree NAME DIR [flags]: DIR equals the saved listing NAME now.
assert_tree() {
    local name="$1" dir="$2"
    shift 2
    snap "$name.now" "$dir" "$@" && same_tree "$name" "$name.now"
}

# ---------------------------------------------------------------------------
# A workspace with a bit of everything.

# populate DIR: the standard pre-state tree used by most tests.
populate() {
    local d="$1"
    mkdir -p "$d"
    (
        set -e
        cd "$d"
        printf 'hello\nworld\n' >README
        mkdir -p src/lib docs/sub empty_dir deep/a/b/c/d dir_to_file/inner
        printf 'int main(void) { return 0; }\n' >src/main.c
        printf 'int util(void);\n' >src/lib/util.h
        printf '#include "util.h"\nint util(void) { return 1; }\n' >src/lib/util.c
        printf 'a\n' >docs/a.txt
        printf 'b\n' >docs/sub/b.txt
        printf 'deep\n' >deep/a/b/c/d/f.txt
        printf 'x\n' >dir_to_file/x
        printf 'y\n' >dir_to_file/inner/y
        printf 'file\n' >file_to_dir
        printf '#!/bin/sh\necho hi\n' >exec.sh
        chmod 0755 exec.sh
        printf 'read only\n' >ro.txt
        chmod 0444 ro.txt
        printf 'secret\n' >secret
        chmod 0600 secret
        printf 'space\n' >'sp ace.txt'
        printf 'bytes\n' >"$(printf 'bad\377name')"
        head -c 70000 /dev/zero | tr '\0' 'z' >medium.bin
        : >empty.txt
        ln -s src/main.c link_rel
        ln -s src link_dir
        ln -s nowhere link_dangling
        ln -s /etc link_etc
        ln -s .. link_up
        mkfifo fifo
        printf 'attrs\n' >xattr.txt
        setfattr -n user.a -v one xattr.txt
        setfattr -n user.b -v two xattr.txt
        setfattr -n user.d -v dir docs
        touch -d '2020-01-02 03:04:05' README src/main.c docs/a.txt
        if [ "$(id -u)" = 0 ]; then
            printf 'owned\n' >owned.txt
            chown 1234:2345 owned.txt
            setfattr -n trusted.t -v tee xattr.txt
        fi
    ) || fail "populate $d failed"
}

# new_ws [NAME]: a fresh workspace at $BATS_TEST_TMPDIR/NAME$WS_SUFFIX
# (NAME defaults to ws) in $WS, filled by the function named in $POPULATE
# (default: populate).
new_ws() {
    local fill="${POPULATE:-populate}" tpl
    WS="$BATS_TEST_TMPDIR/${1:-ws}${WS_SUFFIX:-}"
    rm -rf "$WS"
    mkdir -p "$(dirname "$WS")"
    # built once per file and copied (cp -a keeps modes, owners, xattrs, times)
    tpl="$BATS_FILE_TMPDIR/template.$fill"
    if [ ! -d "$tpl" ]; then
        "$fill" "$tpl.new" && mv "$tpl.new" "$tpl" || fail "cannot populate a workspace with $fill"
    fi
    cp -a "$tpl" "$WS" || fail "cp -a $tpl $WS failed"
}

# make_ref DIR REF SCRIPT: REF = cp -a DIR, then SCRIPT run there by a plain
# /bin/sh (the same shell txbox gives -c strings to). The script must
# succeed: this is the expected post-state of a commit.
make_ref() {
    local dir="$1" ref="$2" script="$3" out
    rm -rf "$ref"
    cp -a "$dir" "$ref" || fail "cp -a $dir $ref failed"
    rm -rf "$ref/.txbox"
    out="$(cd "$ref" && /bin/sh -c "$script" 2>&1)" ||
        fail "test bug: the script fails outside txbox too:" "$script" "$out"
}

# ---------------------------------------------------------------------------
# The core check: SCRIPT's changes commit exactly and roll back exactly.
#
# check_kind SCRIPT [treesum flags]: for each backend in $BACKENDS (default
# "overlay copy"):
#  - rollback: a fresh workspace, `SCRIPT` then `exit 1` in txbox: status 1,
#    outcome rolled_back, tree (with mtimes) identical to before;
#  - commit: a fresh workspace and its reference (SCRIPT by plain sh on a
#    cp -a copy); txbox runs SCRIPT: status 0, outcome committed, the
#    backend reported, tree identical to the reference, `changes` matching
#    the difference.
# All failures of all backends are reported, then the test fails.
check_kind() {
    local script="$1"
    shift
    local backend errs=() base="$BATS_TEST_TMPDIR" sfx=plain f other=()
    for f in "$@"; do
        if [ "$f" = --mtime ]; then sfx=mtime; else other+=("$f"); fi
    done
    # The pre-state (with and without mtimes) and the reference post-state,
    # shared by both backends: every workspace is a copy of one template.
    new_ws pre
    snap pre.mtime "$WS" --mtime "${other[@]}"
    cut -d' ' -f1-6 "$base/pre.mtime.sum" >"$base/pre.plain.sum"
    make_ref "$WS" "$base/ref" "$script" || return 1
    snap ref "$base/ref" "$@"
    for backend in ${BACKENDS:-overlay copy}; do
        # rollback: the script, then exit 1
        new_ws "$backend/rb"
        run --separate-stderr txbox_bin run -C "$WS" --json --backend "$backend" -c "$script
exit 1"
        [ "$status" = 1 ] || errs+=("[$backend] rollback: status $status, want 1; stderr: $(clip "$stderr")")
        printf '%s' "$output" | "$RUNJSON" expect rolled_back "$backend" 2>"$base/rb.err" ||
            errs+=("[$backend] rollback: $(cat "$base/rb.err")")
        snap "$backend.rb.post" "$WS" --mtime "${other[@]}"
        same_tree pre.mtime "$backend.rb.post" 2>"$base/rb.diff" ||
            errs+=("[$backend] rollback changed the workspace: $(cat "$base/rb.diff")")

        # commit: the script alone
        new_ws "$backend/c"
        run --separate-stderr txbox_bin run -C "$WS" --json --backend "$backend" -c "$script"
        [ "$status" = 0 ] || errs+=("[$backend] commit: status $status, want 0; stderr: $(clip "$stderr")")
        printf '%s' "$output" | "$RUNJSON" expect committed "$backend" "$base/pre.$sfx.sum" "$base/ref.sum" \
            2>"$base/c.err" || errs+=("[$backend] commit: $(cat "$base/c.err")")
        snap "$backend.c.post" "$WS" "$@"
        same_tree ref "$backend.c.post" 2>"$base/c.diff" ||
            errs+=("[$backend] commit differs from the same script run by plain sh: $(cat "$base/c.diff")")
    done
    if [ "${#errs[@]}" -gt 0 ]; then
        printf '%s\n' "${errs[@]}" >&2
        return 1
    fi
}

# Unique probe names for things that must not appear anywhere.
probe_name() {
    printf 'txbox-probe-%s-%s-%s' "$1" "$$" "$RANDOM"
}

# pj EXPR: a python expression on the JSON in $output (as d).
pj() {
    printf '%s' "$output" | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"
}

# mcp_running PATTERN LINE...: `txbox mcp -C $WS` in the background (its pid
# in SRV, its stdin on fd 7, its stdout and stderr in $BATS_TEST_TMPDIR/out
# and err) sent the LINEs, until a process matching PATTERN (pgrep -f) runs.
mcp_running() {
    local pattern="$1" fifo="$BATS_TEST_TMPDIR/in"
    shift
    mkfifo "$fifo"
    "$TXBOX" mcp -C "$WS" <"$fifo" >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" &
    SRV=$!
    exec 7>"$fifo"
    printf '%s\n' "$@" >&7
    for _ in $(seq 1 300); do
        pgrep -f "$pattern" >/dev/null && return 0
        sleep 0.1
    done
    fail "the command never started" "$(cat "$BATS_TEST_TMPDIR/err")"
}
