#!/usr/bin/env bats
# What one command leaves for the next outside the workspace, and what the
# result says of it: the writes that do not persist (`discarded`), the
# directory the shell ended in (`cwd_after`, --cwd-file), and sessions
# (txbox session; run --session): a /tmp that persists and sees the
# caller's own files of the host's /tmp, a loopback shared by the
# session's commands, background processes that live as long as the
# session and no longer, the late writes of those processes as
# transactions of their own, and sessions isolated from each other.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    new_ws
}

# ---- outside a session: what does not persist is said ----

@test "discarded: a write to the private /tmp, /var/tmp or /dev/shm is reported, not a bare committed" {
    txj -c 'mkdir -p /tmp/x && echo out >/tmp/x/outside.txt && echo shm >/dev/shm/s && echo in >inside.txt'
    assert_status 0
    assert_outcome committed
    [ "$(jget discarded.count)" = 2 ] || fail "discarded: $(pj 'd["discarded"]')"
    [ "$(jget discarded.paths)" = "$(printf '/tmp/x/outside.txt\n/dev/shm/s')" ] ||
        fail "discarded paths: $(pj 'd["discarded"]')"
    [ "$(jget discarded.truncated)" = false ] || fail "truncated"
    [ -e "$WS/inside.txt" ] || fail "the workspace write was not committed"
    # the status line says it, after the facts of the commit
    tx -c 'mkdir -p /tmp/x && echo out >/tmp/x/outside.txt'
    assert_status 0
    [[ "$stderr" == *"committed ("*"); discarded: 1 file written outside the workspace: /tmp/x/outside.txt"* ]] ||
        fail "status line: $stderr"
    # nothing written there: nothing said, and an empty list in the JSON
    txj -c 'echo in >>inside.txt'
    [ "$(jget discarded.count)" = 0 ] || fail "discarded: $(pj 'd["discarded"]')"
    tx -c 'echo in >>inside.txt'
    [[ "$stderr" != *discarded* ]] || fail "status line: $stderr"
}

@test "discarded: counted whole, named up to 100, a read-only command's too" {
    txj -c 'for i in $(seq 1 150); do : >/tmp/f$i; done; mkdir /tmp/emptydir; true >new'
    assert_status 0
    [ "$(jget discarded.count)" = 151 ] || fail "count: $(jget discarded.count)"
    [ "$(pj 'len(d["discarded"]["paths"])')" = 100 ] || fail "paths: $(pj 'len(d["discarded"]["paths"])')"
    [ "$(jget discarded.truncated)" = true ] || fail "truncated"
    txj --read-only -c 'echo x >/tmp/ro'
    assert_outcome read_only
    [ "$(jget discarded.paths)" = /tmp/ro ] || fail "discarded: $(pj 'd["discarded"]')"
}

@test "discarded: what a background process wrote before it was killed at the end is counted" {
    txj -c '(echo early >/tmp/bg; sleep 30) & sleep 0.5; echo in >inside.txt'
    assert_status 0
    [ "$(jget discarded.paths)" = /tmp/bg ] || fail "discarded: $(pj 'd["discarded"]')"
}

# ---- the directory the shell ended in ----

@test "cwd_after: the directory the shell ended in, when it lies in the workspace" {
    txj -c 'mkdir -p sub/deeper && cd sub/deeper && touch f'
    assert_status 0
    assert_json_field cwd_after "$WS/sub/deeper"
    # started in a subdirectory, stayed there
    (cd "$WS/src" && run --separate-stderr txbox_bin run --json -c 'true' && printf '%s' "$output" >"$BATS_TEST_TMPDIR/o")
    output="$(cat "$BATS_TEST_TMPDIR/o")"
    assert_json_field cwd_after "$WS/src"
    # a read-only command, a failing one, one that exec's its last program
    txj --read-only -c 'cd docs'
    assert_json_field cwd_after "$WS/docs"
    txj -c 'cd src/lib && false'
    assert_status 1
    assert_json_field cwd_after "$WS/src/lib"
    txj -c 'cd docs/sub && exec sleep 0'
    assert_json_field cwd_after "$WS/docs/sub"
    # outside the workspace (the shell could not follow it there): none
    txj -c 'cd /usr && true'
    [ "$(pj 'd.get("cwd_after")')" = None ] || fail "cwd_after: $(pj 'd.get("cwd_after")')"
    txj -c 'mkdir gone && cd gone && rmdir ../gone'
    [ "$(pj 'd.get("cwd_after")')" = None ] || fail "cwd_after of a removed directory: $(pj 'd.get("cwd_after")')"
}

@test "cwd_after: a command that dies before it runs, or stops itself, is still answered" {
    tx -- /nonexistent/program
    assert_status 127
    txj -c 'cd src; (sleep 0.5; kill -CONT $$) & kill -STOP $$; wait; true'
    assert_status 0
    assert_json_field cwd_after "$WS/src"
}

@test "--cwd-file: the directory is written there (0600), emptied when unknown, never through a link" {
    local f="$BATS_TEST_TMPDIR/cwd"
    tx --cwd-file "$f" -c 'mkdir -p a/b && cd a/b'
    assert_status 0
    [ "$(cat "$f")" = "$WS/a/b" ] || fail "cwd file: $(cat "$f")"
    [ "$(stat -c %a "$f")" = 600 ] || fail "mode $(stat -c %a "$f")"
    tx --cwd-file "$f" -c 'cd /'
    assert_status 0
    [ -f "$f" ] && [ ! -s "$f" ] || fail "not emptied: $(cat "$f")"
    tx --cwd-file "$f" -c 'rm -rf ~'
    assert_status 122
    [ ! -s "$f" ] || fail "a blocked command left a directory: $(cat "$f")"
    ln -s "$BATS_TEST_TMPDIR/target" "$BATS_TEST_TMPDIR/link"
    tx --cwd-file "$BATS_TEST_TMPDIR/link" -c 'cd src'
    [ "$status" != 0 ] || fail "wrote through a symbolic link"
    [ ! -e "$BATS_TEST_TMPDIR/target" ] || fail "the link's target was created"
    mkfifo "$BATS_TEST_TMPDIR/fifo"
    tx --cwd-file "$BATS_TEST_TMPDIR/fifo" -c 'cd src'
    [ "$status" != 0 ] || fail "wrote into a FIFO"
}
