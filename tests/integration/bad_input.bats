#!/usr/bin/env bats
# Bad input: a clear one-line `txbox: ...` error, status 125, a JSON error
# object with --json, and the workspace untouched.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    new_ws
    snap pre "$WS" --mtime
}

# bad ARGS...: `txbox ARGS...` is a clean error, with and without --json
# (the --json run inserts --json right after the subcommand), and the
# workspace is unchanged.
bad() {
    run --separate-stderr txbox_bin "$@"
    assert_txbox_error || fail "for: $(clip "txbox $*")"
    local sub="$1"
    shift
    run --separate-stderr txbox_bin "$sub" --json "$@"
    assert_txbox_error json || fail "for: $(clip "txbox $sub --json $*")"
    assert_tree pre "$WS" --mtime
}

@test "missing workspace" {
    bad run -C "$BATS_TEST_TMPDIR/no/such/dir" -c 'echo x >f'
    [ ! -e "$BATS_TEST_TMPDIR/no" ] || fail "txbox created the missing workspace"
}

@test "workspace that is a file" {
    echo data >"$BATS_TEST_TMPDIR/afile"
    bad run -C "$BATS_TEST_TMPDIR/afile" -c 'echo x >f'
    [ "$(cat "$BATS_TEST_TMPDIR/afile")" = data ] || fail "the file was changed"
}

@test "workspace given as a symlink to a file" {
    echo data >"$BATS_TEST_TMPDIR/afile"
    ln -s afile "$BATS_TEST_TMPDIR/alink"
    bad run -C "$BATS_TEST_TMPDIR/alink" -c true
}

@test "-C without a value" {
    cd "$WS"
    bad run -C
}

@test "empty command" {
    bad run -C "$WS" -c ''
}

@test "no command at all" {
    bad run -C "$WS"
    bad run -C "$WS" --
}

@test "both -c and an argv command" {
    bad run -C "$WS" -c 'echo x >f' -- touch g
}

@test "unknown option" {
    bad run -C "$WS" --no-such-option -c 'echo x >f'
    bad run -C "$WS" -x -c 'echo x >f'
    bad recover -C "$WS" --no-such-option
}

@test "every subcommand: an unknown option or a missing value is one line naming it" {
    # One option loop serves them all (src/txbox.c cli_opt_next): exit 125,
    # one line on stderr naming the subcommand and the option as typed, and
    # with --json the error object on stdout; nothing changed.
    local sub
    for sub in run check recover log show diff undo gc begin savepoint rollback commit abort status \
        review approve reject resolve agent mcp setup; do
        if [ "$sub" = setup ]; then # setup writes an agent CLI's settings: no -C
            run --separate-stderr txbox_bin setup --no-such-option
        else
            run --separate-stderr txbox_bin "$sub" -C "$WS" --no-such-option
        fi
        assert_status 125
        [ "$stderr" = "txbox: $sub: unknown option or missing value '--no-such-option' (see 'txbox $sub --help')" ] ||
            fail "txbox $sub --no-such-option said: $stderr"
    done
    for sub in run recover log undo gc begin status review; do
        run --separate-stderr txbox_bin "$sub" -C "$WS" --json -Z
        assert_status 125
        [ "$(jq -r .error.message <<<"$output")" = "$sub: unknown option or missing value '-Z' (see 'txbox $sub --help')" ] ||
            fail "txbox $sub --json -Z printed: $output"
    done
    run --separate-stderr txbox_bin log -C "$WS" -n
    assert_status 125
    [ "$stderr" = "txbox: log: unknown option or missing value '-n' (see 'txbox log --help')" ] || fail "log -n: $stderr"
    assert_tree pre "$WS" --mtime
}

@test "bad --timeout values" {
    local v
    for v in abc -1 '' 1x 99999999999999999999; do
        bad run -C "$WS" --timeout "$v" -c 'echo x >f'
    done
    bad run -C "$WS" -c 'echo x >f' --timeout
}

@test "unknown --backend" {
    bad run -C "$WS" --backend zfs -c 'echo x >f'
    bad run -C "$WS" --backend '' -c 'echo x >f'
}

@test "over-long command (more than 1 MiB in all) is refused" {
    # One argv string cannot exceed 128 KiB (the kernel's MAX_ARG_STRLEN), so
    # the over-long command is an argv of ten 110 kB words.
    local w
    w="$(head -c 110000 /dev/zero | tr '\0' a)"
    bad run -C "$WS" -- echo "$w" "$w" "$w" "$w" "$w" "$w" "$w" "$w" "$w" "$w"
}

@test "a long but reasonable shell string (100 kB) runs" {
    local s
    s="$(head -c 100000 /dev/zero | tr '\0' ' ')echo long >long.txt"
    tx -c "$s"
    assert_status 0
    [ "$(cat "$WS/long.txt")" = long ] || fail "long command did not commit"
}

@test "recover: missing workspace" {
    bad recover -C "$BATS_TEST_TMPDIR/no/such/dir"
}

@test ".txbox that is a file" {
    echo keep >"$WS/.txbox"
    bad run -C "$WS" -c 'echo x >f'
    [ "$(cat "$WS/.txbox")" = keep ] || fail ".txbox file was changed"
}

@test "unwritable .txbox/ (unprivileged user)" {
    is_root && skip "root can write any directory; the unprivileged run covers this"
    mkdir "$WS/.txbox"
    chmod 0555 "$WS/.txbox"
    bad run -C "$WS" -c 'echo x >f'
    chmod 0755 "$WS/.txbox"
}

@test "unwritable workspace (unprivileged user)" {
    is_root && skip "root can write any directory; the unprivileged run covers this"
    chmod 0555 "$WS"
    run --separate-stderr txbox_bin run -C "$WS" -c 'echo x >f'
    chmod 0755 "$WS"
    assert_txbox_error
    assert_tree pre "$WS" --mtime
}

# A directory where overlayfs refuses the upper dir: the runner prepares one
# on an overlayfs mount (an overlay upper cannot live on overlayfs).
noovl_ws() {
    [ -n "${TXBOX_TEST_NOOVL:-}" ] && [ -d "$TXBOX_TEST_NOOVL" ] ||
        { need "no TXBOX_TEST_NOOVL directory (tests/run-integration prepares it)"; return; }
    WS="$(mktemp -d "$TXBOX_TEST_NOOVL/ws.XXXXXX")"
    populate "$WS"
    snap noovl "$WS" --mtime
}

@test "workspace where overlay cannot be mounted: clear error, untouched" {
    noovl_ws
    run --separate-stderr txbox_bin run -C "$WS" -c 'echo x >f'
    assert_txbox_error
    run --separate-stderr txbox_bin run -C "$WS" --json -c 'echo x >f'
    assert_txbox_error json
    assert_tree noovl "$WS" --mtime
    rm -rf "$WS"
}

@test "workspace where overlay cannot be mounted: --allow-copy-fallback runs with copy" {
    noovl_ws
    txj --allow-copy-fallback -c 'echo x >f; rm README'
    assert_status 0
    assert_outcome committed
    assert_json_field backend copy
    [[ "$(jget fallback)" == "overlay unavailable ("*"); used the copy backend" ]] ||
        fail "the run object does not say why it fell back: $(clip "$output")"
    [ "$(cat "$WS/f")" = x ] && [ ! -e "$WS/README" ] || fail "fallback run did not commit"
    snap noovl2 "$WS" --mtime
    txj --allow-copy-fallback -c 'echo y >g; rm -r src; exit 3'
    assert_status 3
    assert_outcome rolled_back
    assert_tree noovl2 "$WS" --mtime
    rm -rf "$WS"
}

@test "--timeout takes plain decimal seconds only; --hide wants a path (issue 22)" {
    new_ws
    for t in ' 5' 0x10 1e3 5. inf nan -1 ''; do
        run --separate-stderr txbox_bin run -C "$WS" --timeout "$t" -c true
        [ "$status" = 125 ] || fail "--timeout '$t': status $status"
        [[ "$stderr" == *"--timeout wants a number of seconds"* ]] || fail "--timeout '$t': $stderr"
    done
    for t in 5 1.5 .5; do
        run --separate-stderr txbox_bin run -C "$WS" --timeout "$t" -c true
        [ "$status" = 0 ] || fail "--timeout '$t': status $status; $stderr"
    done
    for h in '' rel ./x; do
        run --separate-stderr txbox_bin run -C "$WS" --hide "$h" -c true
        [ "$status" = 125 ] || fail "--hide '$h': status $status"
        [[ "$stderr" == *"--hide wants an absolute path"* ]] || fail "--hide '$h': $stderr"
    done
}
