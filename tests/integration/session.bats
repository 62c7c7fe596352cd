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

@test "cwd_after: none for a shell killed (the time limit, a signal): where it was is no place to go on from" {
    local i
    for i in 1 2 3; do # whether a killed shell stopped at its exit was a race: never now
        txj --timeout 0.3 -c 'cd src && sleep 5'
        assert_outcome timed_out
        [ "$(pj 'd.get("cwd_after")')" = None ] || fail "cwd_after of a timed-out shell: $(pj 'd.get("cwd_after")')"
        txj -c 'cd src && kill -KILL $$'
        [ "$(pj 'd.get("cwd_after")')" = None ] || fail "cwd_after of a killed shell: $(pj 'd.get("cwd_after")')"
    done
    txj -c 'cd src && exit 3'
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

# ---- sessions ----

SESSIONS=()

teardown() {
    local s
    # the host /tmp files a test made, also when it failed half-way
    [ -z "${HOST_BASE:-}" ] || rm -rf "/tmp/$HOST_BASE".*
    for s in "${SESSIONS[@]}"; do
        "$TXBOX" session end -C "$WS" "$s" >/dev/null 2>&1 || true
    done
}

# sess_start [OPTIONS]: a new session of $WS in $SID (ended by teardown).
sess_start() {
    SID="$("$TXBOX" session start -C "$WS" "$@")" || fail "session start failed"
    [ -n "$SID" ] || fail "session start printed no id"
    SESSIONS+=("$SID")
}

# stx / stxj ARGS...: tx / txj in the session $SID.
stx() { tx --session "$SID" "$@"; }
stxj() { txj --session "$SID" "$@"; }

# A TCP port free on the host's loopback now.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# no_process MARK: no process on the host has MARK in its command line
# (waits a little: a killed process is reaped by its parent).
no_process() {
    local i
    for i in $(seq 1 50); do
        pgrep -f "$1" >/dev/null || return 0
        sleep 0.1
    done
    fail "a process is left on the host: $(pgrep -af "$1")"
}

@test "session: start, list, status and end as a user sees them" {
    local mark
    mark="$(probe_name ls)"
    sess_start
    local a="$SID"
    sess_start --id my-session.1
    [ "$SID" = my-session.1 ] || fail "--id: $SID"
    # both listed, running; a's background command counted
    stx -c true
    SID="$a" stx -c "(exec -a $mark sleep 1000) & echo ok >/tmp/marker"
    assert_status 0
    run --separate-stderr txbox_bin session list -C "$WS"
    assert_status 0
    [[ "$output" == *"$a"$'\t'"running"$'\t'"1 background command(s)"* ]] || fail "list: $output"
    [[ "$output" == *"my-session.1"$'\t'"running"* ]] || fail "list: $output"
    run --separate-stderr txbox_bin session list -C "$WS" --json
    assert_status 0
    [ "$(pj '" ".join(sorted(s["session"] for s in d["sessions"] if s["running"]))')" = "$(printf '%s\n' "$a" my-session.1 | sort | tr '\n' ' ' | sed 's/ $//')" ] ||
        fail "list --json: $output"
    run --separate-stderr txbox_bin session status -C "$WS" "$a"
    assert_status 0
    [ "$(pj 'd["running"]')" = True ] || fail "status: $output"
    # options after the id, as other subcommands take them
    run --separate-stderr txbox_bin session status "$a" -C "$WS" --json
    assert_status 0
    [ "$(pj 'd["running"]')" = True ] || fail "status ID -C DIR: $output $stderr"
    # ended: no longer running, its processes and /tmp gone
    run --separate-stderr txbox_bin session end "$a" -C "$WS"
    assert_status 0
    [[ "$stderr" == *"1 background process killed"* ]] || fail "end: $stderr"
    no_process "$mark"
    run --separate-stderr txbox_bin session list -C "$WS"
    [[ "$output" != *"$a"$'\t'"running"* ]] || fail "list after end: $output"
    [[ "$output" == *"my-session.1"$'\t'"running"* ]] || fail "list after end: $output"
    run --separate-stderr txbox_bin session status -C "$WS" "$a"
    [ "$status" != 0 ] || fail "status of an ended session: $output"
    # a command with its id starts a new session of that id, afresh
    SID="$a" stx -c 'cat /tmp/marker'
    [ "$status" != 0 ] || fail "the ended session's /tmp survived: $output"
    SID="$a" stx -c "pgrep -f $mark"
    [ "$status" != 0 ] || fail "the ended session's process survived: $output"
    run --separate-stderr txbox_bin session list -C "$WS"
    [[ "$output" == *"$a"$'\t'"running"* ]] || fail "list after a new start: $output"
    run --separate-stderr txbox_bin session end -C "$WS" "$a"
    assert_status 0
    # bad input: one line, status 125, nothing started
    run --separate-stderr txbox_bin session start -C "$WS" --id ../x
    assert_status 125
    [[ "$stderr" == *"not a session id"* ]] || fail "bad id: $stderr"
    run --separate-stderr txbox_bin session bogus -C "$WS"
    assert_status 125
    run --separate-stderr txbox_bin session end -C "$WS"
    assert_status 125
    run --separate-stderr txbox_bin run -C "$WS" --session ../x -c true
    [ "$status" != 0 ] || fail "run --session ../x ran"
    run --separate-stderr txbox_bin session list -C "$WS" --json
    [ "$(pj 'len([s for s in d["sessions"] if s["running"]])')" = 1 ] || fail "list: $output"
}

# journal_open ID: is transaction ID's journal still open (.txbox/journal/ID)?
journal_open() { [ -e "$WS/.txbox/journal/$1" ]; }

@test "session: answered once applied; the steward retires the commit, else the next recovery" {
    echo 0 >"$WS/log.txt"
    sess_start
    local line id ids=() n
    for line in 1 2 3; do
        stxj -c "echo $line >>log.txt"
        assert_status 0
        assert_outcome committed
        ids+=("$(jget tx)")
        # applied before the answer
        [ "$(tail -n 1 "$WS/log.txt")" = "$line" ] || fail "answered before the apply: $(cat "$WS/log.txt")"
    done
    # retired after it: journals closed, scratch gone, the outcome as answered
    # (active/ID goes last)
    for n in $(seq 100); do
        [ -z "$(ls -A "$WS/.txbox/journal")" ] && [ -z "$(ls -A "$WS/.txbox/active")" ] && break
        sleep 0.1
    done
    [ -z "$(ls -A "$WS/.txbox/journal")" ] || fail "not retired: $(ls "$WS/.txbox/journal")"
    for id in "${ids[@]}"; do
        [ -e "$WS/.txbox/tx/$id/journal" ] || fail "tx $id: no closed journal"
        [ ! -e "$WS/.txbox/tx/$id/upper" ] || fail "tx $id: its upper is left"
        [ "$(cat "$WS/.txbox/tx/$id/outcome")" = committed ] || fail "tx $id: $(cat "$WS/.txbox/tx/$id/outcome")"
        [ ! -e "$WS/.txbox/active/$id" ] || fail "tx $id: still active"
    done
    # a steward that never retires it (gone, killed): the journal stays
    # open, as after a crash there, and the next command takes it from
    # there: the next transaction in the session sees the change and commits
    # on top of it, and a history command's recovery closes it
    TXBOX_TEST_NO_RETIRE=1 stxj -c 'echo 4 >>log.txt'
    assert_status 0
    assert_outcome committed
    id="$(jget tx)"
    journal_open "$id" || fail "the journal of tx $id was not left open"
    [ "$(tail -n 1 "$WS/log.txt")" = 4 ] || fail "not applied: $(cat "$WS/log.txt")"
    TXBOX_TEST_NO_RETIRE=1 stxj -c 'echo 5 >>log.txt'
    assert_status 0
    assert_outcome committed
    ! journal_open "$id" || fail "the next command's recovery left tx $id open"
    [ "$(cat "$WS/log.txt")" = "$(printf '0\n1\n2\n3\n4\n5')" ] || fail "log.txt: $(cat "$WS/log.txt")"
    local last
    last="$(jget tx)"
    journal_open "$last" || fail "the journal of tx $last was not left open"
    # the log has every row as its run wrote it (timed, not "recovered"),
    # the open one's too
    h log --json
    assert_status 0
    [ "$(pj '" ".join(r["outcome"] + ":" + str(r["recovered"]) + ":" + str(r["duration_ms"] is not None) for r in d)')" = "$(printf 'committed:0:True %.0s' 1 2 3 4 5 | sed 's/ $//')" ] ||
        fail "log: $(pj '[(r["tx"], r["outcome"], r["recovered"], r["duration_ms"]) for r in d]')"
    journal_open "$last" || fail "a reader closed tx $last"
    # and undone as any other, its journal closed first
    h undo
    assert_status 0
    ! journal_open "$last" || fail "undo's recovery left tx $last open"
    [ "$(tail -n 1 "$WS/log.txt")" = 4 ] || fail "undo: $(cat "$WS/log.txt")"
    [ ! -e "$WS/.txbox/tx/$last/upper" ] || fail "tx $last: its upper is left"
}

@test "session: /tmp persists from command to command, stays in the session, is reported at its end" {
    sess_start
    stxj -c 'printf "print(6 * 7)\n" >/tmp/helper.py && mkdir -p /tmp/work && echo data >/tmp/work/in.txt'
    assert_status 0
    [ "$(jget session)" = "$SID" ] || fail "session: $(jget session)"
    [ "$(jget discarded.count)" = 0 ] || fail "the session's /tmp counted as discarded per command"
    stxj -c 'python3 /tmp/helper.py && cat /tmp/work/in.txt && echo more >>/tmp/work/in.txt'
    assert_status 0
    [ "$(jget stdout)" = "$(printf '42\ndata')" ] || fail "stdout: $(jget stdout)"
    # /var/tmp and /dev/shm too
    stx -c 'echo v >/var/tmp/v.txt; echo s >/dev/shm/s.txt'
    stx -c 'cat /var/tmp/v.txt /dev/shm/s.txt'
    [ "$output" = "$(printf 'v\ns')" ] || fail "output: $output"
    # nothing of it on the host
    [ ! -e /tmp/helper.py ] && [ ! -e /tmp/work/in.txt ] || fail "the session's /tmp leaked to the host"
    # $TMPDIR points there
    stx -c 'echo "$TMPDIR"'
    [ "$output" = /tmp ] || fail "TMPDIR: $output"
    run --separate-stderr txbox_bin session end -C "$WS" --json "$SID"
    assert_status 0
    SESSIONS=()
    [ "$(pj 'd["discarded"]["count"]')" = 4 ] || fail "end report: $output"
    pj 'sorted(d["discarded"]["paths"])' | grep -q "'/tmp/helper.py', '/tmp/work/in.txt', '/var/tmp/v.txt'" ||
        fail "end report: $output"
    # the session is gone: a command in it fails, another session of that id starts afresh
    tx --session "$SID" -c 'cat /tmp/helper.py'
    [ "$status" != 0 ] || fail "the ended session's /tmp survived"
    SESSIONS+=("$SID")
}

@test "session: /dev is the session's, minimal, the same from command to command, another session's its own" {
    sess_start
    local a="$SID"
    stx -c 'ls /dev | LC_ALL=C sort | tr "\n" " "; echo; echo x >/dev/null && head -c 3 /dev/zero | wc -c && head -c 3 /dev/urandom | wc -c'
    assert_status 0
    [ "$output" = "$(printf 'fd full null ptmx pts random shm stderr stdin stdout tty urandom zero \n3\n3')" ] ||
        fail "the session's /dev: $output"
    # a pseudo-terminal opened by a command of the session works
    stx -c 'python3 -c "import os, pty; m, s = pty.openpty(); os.write(s, b\"hi\\n\"); print(os.read(m, 8).decode().strip(), os.ttyname(s).startswith(\"/dev/pts/\"))"'
    assert_status 0
    [ "$output" = "hi True" ] || fail "a pty in the session: $output"
    # made once for the session: a pty a background process of one command
    # holds is there for the next (a command's own /dev has none)
    stx -c 'python3 -u -c "import os, pty, time; m, s = pty.openpty(); print(os.ttyname(s)); time.sleep(60)" >/tmp/pty.txt 2>&1 &
for i in $(seq 50); do [ -s /tmp/pty.txt ] && break; sleep 0.1; done; cat /tmp/pty.txt'
    assert_status 0
    local pty="$output"
    [[ "$pty" == /dev/pts/[0-9]* ]] || fail "no pty name: $pty"
    stx -c "test -e $pty && echo there"
    [ "$output" = there ] || fail "a later command of the session has another /dev: $pty is not there"
    # shared, so read-only itself: no command replaces a link or adds a name
    # for the next (its nodes, /dev/pts and /dev/shm stay writable)
    stx -c 'rm -f /dev/stdout; ln -s /tmp/x /dev/stdout; touch /dev/mark; ls -l /dev/stdout; ls /dev | grep -c "^mark"'
    [[ "$output" == *"/dev/stdout -> /proc/self/fd/1"* ]] || fail "a command replaced the session's /dev/stdout: $output"
    [[ "$output" == *$'\n0' ]] || fail "a command added a name to the session's /dev: $output"
    stx -c 'echo x >/dev/null && echo s >/dev/shm/s && cat /dev/shm/s'
    assert_status 0
    [ "$output" = s ] || fail "the session's /dev/shm: $output"
    sess_start
    stx -c "test -e $pty && echo there || echo absent"
    [ "$output" = absent ] || fail "another session sees the first one's pty: $output"
    tx -c "test -e $pty && echo there || echo absent"
    [ "$output" = absent ] || fail "a command outside the session sees its pty: $output"
    SID="$a"
}

@test "session: a server started in the background by one command answers the next" {
    local port
    port="$(free_port)"
    sess_start
    stxj -c "python3 -m http.server $port --bind 127.0.0.1 >/tmp/server.log 2>&1 & echo \$! >/tmp/server.pid; echo started"
    assert_status 0
    assert_outcome committed
    [ "$(jget background.kept)" = true ] || fail "background: $(pj 'd.get("background")')"
    # the next command reaches it, through curl (which the policy gives the proxy) and without
    stxj -c "for i in \$(seq 1 50); do curl -sf -o /dev/null http://127.0.0.1:$port/README && break; sleep 0.1; done; curl -sS -o /dev/null -w '%{http_code}' http://127.0.0.1:$port/README"
    assert_status 0
    [ "$(jget stdout)" = 200 ] || fail "curl: $(jget stdout) $(jget stderr)"
    stx -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf 'GET /README HTTP/1.0\\r\\n\\r\\n' >&3 && head -1 <&3"
    assert_status 0
    [[ "$output" == "HTTP/1.0 200"* ]] || fail "bash /dev/tcp: $output $stderr"
    stxj -c "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:$port/README\").read().decode().split()[0])'"
    [ "$(jget stdout)" = hello ] || fail "python: $(jget stdout) $(jget stderr)"
    # it is seen (ps, pgrep) and stopped (kill PID) as without txbox
    stx -c 'pgrep -f "http[.]server"; cat /tmp/server.pid'
    assert_status 0
    [ "${#lines[@]}" = 2 ] && [ "${lines[0]}" = "${lines[1]}" ] || fail "pgrep, server.pid: $output"
    stx -c 'kill "$(cat /tmp/server.pid)" && sleep 0.5 && ! pgrep -f "http[.]server"'
    assert_status 0
    stx -c "curl -s -o /dev/null http://127.0.0.1:$port/README"
    [ "$status" != 0 ] || fail "the server still answers after kill"
    # pkill too
    stx -c "python3 -m http.server $port --bind 127.0.0.1 >/dev/null 2>&1 &"
    stx -c 'sleep 0.3; pkill -f "http[.]server"; sleep 0.3; ! pgrep -f "http[.]server"'
    assert_status 0
}

@test "session: background processes live as long as the session and no longer" {
    local mark
    mark="$(probe_name bg)"
    sess_start
    stx -c "(exec -a $mark sleep 1000) & echo ok"
    assert_status 0
    stx -c "pgrep -f $mark"
    assert_status 0
    pgrep -f "$mark" >/dev/null || fail "the background process is not running"
    run --separate-stderr txbox_bin session end -C "$WS" "$SID"
    assert_status 0
    SESSIONS=()
    [[ "$stderr" == *"1 background process killed"* ]] || fail "end: $stderr"
    no_process "$mark"
    # the idle limit
    sess_start --idle 2
    stx -c "(exec -a $mark sleep 1000) &"
    sleep 4
    no_process "$mark"
    run --separate-stderr txbox_bin session status -C "$WS" "$SID"
    [ "$status" != 0 ] || fail "the session runs after its idle limit: $output"
    run --separate-stderr txbox_bin session end -C "$WS" --json "$SID"
    assert_status 0
    [ "$(pj 'd["ended_by"]')" = idle ] || fail "end report: $output"
    SESSIONS=()
    # the owner's death
    sleep 1000 &
    local owner=$!
    sess_start --owner "$owner"
    stx -c "(exec -a $mark sleep 1000) &"
    pgrep -f "$mark" >/dev/null || fail "not started"
    kill "$owner"
    wait "$owner" 2>/dev/null || true
    no_process "$mark"
    # the session's own processes (its keeper) are gone too
    no_process "$SID" 2>/dev/null || true
    # a command of a copy backend or a multi-command transaction leaves nothing
    sess_start
    stx --backend copy -c "(exec -a $mark sleep 1000) & echo x >c.txt"
    assert_status 0
    no_process "$mark"
    # nor one timed out: its background processes go with it
    stx --timeout 1 -c "(exec -a $mark sleep 1000) & sleep 30"
    assert_status 124
    no_process "$mark"
}

@test "run --session: a session the command starts is said (an id none runs; one that ended while idle), one it joins is not" {
    local id="fresh-$BATS_TEST_NUMBER-$$"
    SESSIONS+=("$id")
    txj --session "$id" -c 'echo x >a.txt'
    assert_status 0
    [ "$(pj 'd.get("session_started")')" = new ] || fail "session_started: $(clip "$output")"
    tx --session "$id" -c 'echo y >>a.txt'
    assert_status 0
    [[ "$stderr" != *"session $id started"* ]] || fail "a running session said started: $stderr"
    txj --session "$id" -c true
    [ "$(pj 'd.get("session_started")')" = None ] || fail "session_started: $(clip "$output")"
    # a mistyped id: a new session, said on the status line
    tx --session "$id-x" -c 'echo z >>a.txt'
    SESSIONS+=("$id-x")
    assert_status 0
    [[ "$stderr" == *"committed ("*"); session $id-x started: no session of that id was running"* ]] ||
        fail "status line: $stderr"
    # one that ended on its own: what it kept is gone, and that is said
    sess_start --idle 1
    stx -c 'echo note >/tmp/note'
    assert_status 0
    sleep 3 # (no status asked meanwhile: every request restarts its idle clock)
    ! "$TXBOX" session status -C "$WS" "$SID" >/dev/null 2>&1 || fail "the session runs after its idle limit"
    stx -c 'cat /tmp/note 2>/dev/null || echo gone'
    assert_status 0
    [ "$output" = gone ] || fail "the ended session's /tmp is there: $output"
    [[ "$stderr" == *"; session $SID started again: the one of that id had ended, and its /tmp and background processes are gone"* ]] ||
        fail "status line: $stderr"
}

# cgroup_of PID: the name of the txbox control group PID is in (as root;
# empty for a user's commands, which have none).
cgroup_of() {
    sed -n 's|.*/\(txbox-[^/]*\)$|\1|p' "/proc/$1/cgroup" 2>/dev/null | head -n 1
}

# no_cgroup NAME: no control group of that name is left (v2's, or v1's
# pids and memory hierarchies), within 5 seconds.
no_cgroup() {
    local d i
    for i in $(seq 1 50); do
        [ -e "/sys/fs/cgroup/txbox/$1" ] || [ -e "/sys/fs/cgroup/pids/$1" ] ||
            [ -e "/sys/fs/cgroup/memory/$1" ] || return 0
        sleep 0.1
    done
    for d in /sys/fs/cgroup/txbox /sys/fs/cgroup/pids /sys/fs/cgroup/memory; do
        [ ! -e "$d/$1" ] || fail "control group $d/$1 is left on the host"
    done
}

@test "session: a background command's control groups go when its processes end, or with the session" {
    local mark short long_cg short_cg
    mark="$(probe_name cg)"
    short="$(probe_name cgshort)"
    sess_start
    stx -c "(exec -a $mark sleep 1000) >/dev/null 2>&1 &"
    assert_status 0
    stx -c "( (exec -a $short sleep 1); echo late >late.txt ) >/dev/null 2>&1 &"
    assert_status 0
    long_cg="$(cgroup_of "$(pgrep -f "$mark" | head -n 1)")"
    short_cg="$(cgroup_of "$(pgrep -f "$short" | head -n 1)")"
    if is_root; then
        [ -n "$long_cg" ] && [ -n "$short_cg" ] && [ "$long_cg" != "$short_cg" ] ||
            fail "the commands have no control groups of their own: '$long_cg' '$short_cg'"
    fi
    # the short one ends: its late write commits, its group goes
    local i
    for i in $(seq 1 100); do
        [ -e "$WS/late.txt" ] && break
        sleep 0.1
    done
    [ "$(cat "$WS/late.txt" 2>/dev/null)" = late ] || fail "the late write was not committed"
    if is_root; then
        no_cgroup "$short_cg"
        [ -d "/sys/fs/cgroup/txbox/$long_cg" ] || [ -d "/sys/fs/cgroup/pids/$long_cg" ] ||
            fail "the running command's group went before its processes"
    fi
    run --separate-stderr txbox_bin session end -C "$WS" "$SID"
    assert_status 0
    SESSIONS=()
    no_process "$mark"
    if is_root; then
        no_cgroup "$long_cg"
    fi
}

@test "session: what a background process writes later is a transaction of its own" {
    sess_start
    # exits 0 of its own accord: committed, reported with the next result
    stxj -c '(sleep 1; echo late >late.txt; echo more >>README) & echo now >now.txt'
    assert_status 0
    local first
    first="$(jget tx)"
    [ "$(jget changes.added)" = now.txt ] || fail "the command's own: $(jget changes)"
    [ ! -e "$WS/late.txt" ] || fail "a late write reached the workspace before its process ended"
    sleep 2.5
    [ "$(cat "$WS/late.txt")" = late ] || fail "the late write was not committed"
    stxj -c 'true'
    [ "$(pj 'len(d["late_transactions"])')" = 1 ] || fail "late: $(pj 'd.get("late_transactions")')"
    [ "$(jget late_transactions.0.from_tx)" = "$first" ] || fail "late: $(pj 'd["late_transactions"]')"
    [ "$(jget late_transactions.0.outcome)" = committed ] || fail "late: $(pj 'd["late_transactions"]')"
    [ "$(jget late_transactions.0.changes.added)" = late.txt ] || fail "late: $(pj 'd["late_transactions"]')"
    [ "$(jget late_transactions.0.changes.modified)" = README ] || fail "late: $(pj 'd["late_transactions"]')"
    local late
    late="$(jget late_transactions.0.tx)"
    run --separate-stderr txbox_bin show -C "$WS" --json "$late"
    assert_status 0
    [ "$(pj 'd["outcome"]')" = committed ] || fail "audit log: $output"
    # reported once
    stxj -c 'true'
    [ "$(pj 'd.get("late_transactions")')" = None ] || fail "reported twice"
    # fails: rolled back, reported. It writes only once the next command
    # has run (a write made before its own command ended is that
    # command's, and a loaded machine can take a second to end one).
    stxj -c '(until [ -e /tmp/go ]; do sleep 0.1; done; echo bad >bad.txt; exit 3) &'
    assert_status 0
    stxj -c 'touch /tmp/go'
    local t1="$output"
    sleep 2.5
    [ ! -e "$WS/bad.txt" ] || fail "a failed background process's late write was committed"
    stxj -c 'true'
    # reported with the next result after it ended: the touch's, or this one
    [ "$(pj 'd.get("late_transactions") and 1')" = 1 ] || output="$t1"
    [ "$(jget late_transactions.0.outcome)" = rolled_back ] || fail "late: $(pj 'd.get("late_transactions")')"
    [[ "$(jget late_transactions.0.reason)" == *"exited with status 3"* ]] || fail "late: $(pj 'd["late_transactions"]')"
    # killed at the session's end: rolled back, in the end report
    stxj -c '(sleep 0.5; echo early >early.txt; sleep 1000) & true'
    sleep 1.5
    run --separate-stderr txbox_bin session end -C "$WS" --json "$SID"
    assert_status 0
    SESSIONS=()
    [ "$(pj 'd["late_transactions"][-1]["outcome"]')" = rolled_back ] || fail "end report: $output"
    [ "$(pj 'd["late_transactions"][-1]["changes"]["added"]')" = "['early.txt']" ] || fail "end report: $output"
    [[ "$(pj 'd["late_transactions"][-1]["reason"]')" == *"session's end"* ]] || fail "end report: $output"
    [ ! -e "$WS/early.txt" ] || fail "a killed process's write was committed"
}

@test "session: a failing process born and gone between two looks fails the late write" {
    # the failing process is an orphan of an orphan (its parent exits at
    # once) that lives 50 ms: the keeper reaps it before the session has
    # seen it (it looks every 200 ms); its status must still fail the
    # late transaction, as the status of a process the command left does
    sess_start
    stxj -c '(until [ -e /tmp/go ]; do sleep 0.1; done; sh -c "sleep 0.05; echo bad >quick.txt; exit 4" &) &'
    assert_status 0
    for i in 1 2 3; do
        stxj -c "(until [ -e /tmp/go$i ]; do sleep 0.1; done; sh -c 'sleep 0.05; echo bad >q$i.txt; kill -9 \$\$' &) &"
        assert_status 0
    done
    stxj -c 'touch /tmp/go /tmp/go1 /tmp/go2 /tmp/go3'
    sleep 3
    stxj -c 'true'
    for f in quick q1 q2 q3; do
        [ ! -e "$WS/$f.txt" ] || fail "$f: a failed process's late write was committed"
    done
    run --separate-stderr txbox_bin session end -C "$WS" --json "$SID"
    assert_status 0
    SESSIONS=()
    [ "$(pj 'sum(1 for t in d["late_transactions"] if t["outcome"] == "rolled_back")')" = 4 ] ||
        fail "end report: $output"
    [ "$(pj '"exited with status 4" in " ".join(t["reason"] for t in d["late_transactions"])')" = True ] ||
        fail "end report: $output"
    [ "$(pj '"killed by signal 9" in " ".join(t["reason"] for t in d["late_transactions"])')" = True ] ||
        fail "end report: $output"
}

@test "session: a late write is judged like any commit: conflicts and rules on effects" {
    sess_start
    # written by the command and later by its background process, and by
    # another command meanwhile: the late transaction is a conflict
    stxj -c 'echo one >shared.txt; (sleep 1.5; echo bg >>shared.txt) &'
    stx -c 'echo other >shared.txt'
    assert_status 0
    sleep 2.5
    [ "$(cat "$WS/shared.txt")" = other ] || fail "the late write overwrote a later commit"
    stxj -c 'true'
    [ "$(jget late_transactions.0.outcome)" = conflict ] || fail "late: $(pj 'd.get("late_transactions")')"
    # a git hook written in the background is held or rejected, never committed
    git -C "$WS" init -q
    stxj -c '(sleep 1; printf "#!/bin/sh\necho pwned\n" >.git/hooks/pre-commit; chmod +x .git/hooks/pre-commit) &'
    sleep 2.5
    [ ! -e "$WS/.git/hooks/pre-commit" ] || fail "a git hook written in the background was committed"
    stxj -c 'true'
    [[ "$(jget late_transactions.0.outcome)" =~ ^(rejected|held)$ ]] ||
        fail "late: $(pj 'd.get("late_transactions")')"
}

@test "session: the shell's last directory may be in the session's /tmp" {
    sess_start
    stxj -c 'mkdir -p /tmp/scratch && cd /tmp/scratch'
    assert_json_field cwd_after /tmp/scratch
    stxj -c 'cd src'
    assert_json_field cwd_after "$WS/src"
}

@test "session: two sessions are isolated from each other and from the host" {
    local port hport mark
    port="$(free_port)"
    mark="$(probe_name iso)"
    sess_start
    local a="$SID"
    sess_start
    local b="$SID"
    SID="$a" stx -c "echo secret-a >/tmp/a.txt; (exec -a $mark python3 -m http.server $port --bind 127.0.0.1 >/dev/null 2>&1) & sleep 0.5"
    SID="$a" stx -c "curl -sf -o /dev/null http://127.0.0.1:$port/ && echo reached"
    [ "$output" = reached ] || fail "session a cannot reach its own server: $output $stderr"
    # b: not a's loopback, /tmp or processes
    SID="$b" stx -c "curl -sf -o /dev/null --max-time 2 http://127.0.0.1:$port/ && echo reached"
    [ "$output" != reached ] || fail "session b reached session a's server"
    SID="$b" stx -c 'cat /tmp/a.txt'
    [ "$status" != 0 ] || fail "session b read session a's /tmp"
    SID="$a" stx -c "ps -eo pid=,args= | grep \" $mark\" | grep -v grep"
    [ "${#lines[@]}" = 1 ] || fail "session a does not see its own server: $output"
    local apid="${lines[0]%% *}"
    SID="$b" stx -c "ps -eo args= | grep -c '^$mark'"
    [ "$output" = 0 ] || fail "session b sees session a's processes: $output"
    SID="$b" stx -c "kill -0 $apid 2>/dev/null && ps -o args= -p $apid"
    [[ "$output" != *"$mark"* ]] || fail "session b can signal session a's processes"
    # the host: not the session's server, and the session not the host's
    ! curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$port/" || fail "the host reaches a session's server"
    hport="$(free_port)"
    python3 -m http.server "$hport" --bind 127.0.0.1 >/dev/null 2>&1 &
    local hpid=$!
    sleep 0.5
    SID="$a" stx -c "curl -sf -o /dev/null --max-time 2 http://127.0.0.1:$hport/ && echo reached"
    kill "$hpid"
    [ "$output" != reached ] || fail "a session reached the host's loopback"
}

@test "session: the caller's own files of the host's /tmp are seen, never another's, a socket or a secret" {
    local base="txbox-probe-host-$$-$RANDOM" other_uid
    HOST_BASE="$base"
    mkdir -p "/tmp/$base.d"
    printf 'print(6 * 7)\n' >"/tmp/$base.py"
    printf 'X = 5\n' >"/tmp/$base.d/util.py"
    printf 'import util\nprint(util.X)\n' >"/tmp/$base.d/main.py"
    # another user's file, and a socket of the caller's
    if is_root; then other_uid="$(id -u "${TXBOX_TEST_USER:-txbox-test}")"; else other_uid=0; fi
    python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.bind('/tmp/$base.sock')"
    sess_start
    stx -c "python3 /tmp/$base.py && python3 /tmp/$base.d/main.py"
    assert_status 0
    [ "$output" = "$(printf '42\n5')" ] || fail "output: $output"
    # the host changes it: the next command sees the change; the session's
    # own writes stay in the session
    printf 'print("edited")\n' >"/tmp/$base.py"
    stx -c "python3 /tmp/$base.py; echo session >/tmp/$base.d/new.txt; echo mine >>/tmp/$base.d/util.py"
    [ "$output" = edited ] || fail "output: $output"
    [ ! -e "/tmp/$base.d/new.txt" ] && [ "$(cat "/tmp/$base.d/util.py")" = "X = 5" ] ||
        fail "the session's writes reached the host's /tmp"
    # removed on the host: removed from the session
    rm "/tmp/$base.py"
    stx -c "cat /tmp/$base.py"
    [ "$status" != 0 ] || fail "a file the host removed is still in the session"
    stx -c "test -e /tmp/$base.sock"
    [ "$status" != 0 ] || fail "a host socket is in the session's /tmp"
    if is_root; then
        printf 'other\n' >"/tmp/$base.other"
        chown "$other_uid" "/tmp/$base.other"
        stx -c "cat /tmp/$base.other"
        [ "$status" != 0 ] || fail "another user's file is in the session's /tmp"
    fi
    # a path the policy hides
    printf 'secret\n' >"/tmp/$base.secret"
    stx --hide "/tmp/$base.secret" -c "cat /tmp/$base.secret"
    [ "$status" != 0 ] || fail "a hidden path came into the session's /tmp"
    rm -rf "/tmp/$base".*
    # what came from the host is not what the session discards
    run --separate-stderr txbox_bin session end -C "$WS" --json "$SID"
    SESSIONS=()
    local paths
    paths="$(pj '" ".join(sorted(p for p in d["discarded"]["paths"] if "__pycache__" not in p))')"
    [ "$paths" = "/tmp/$base.d/new.txt /tmp/$base.d/util.py" ] || fail "end report: $output"
}
