#!/usr/bin/env bats
# `txbox agent` against a scripted OpenAI-compatible server: each case file
# in tests/agent/cases holds the canned replies and the requests expected
# (curl's manner); tests/agent/runcase.py starts the server on 127.0.0.1
# (ephemeral port), runs `txbox agent --json`, and checks the requests sent,
# the workspace and the summary. Plus the command line's own errors.

bats_require_minimum_version 1.5.0
load ../lib/common

CASES="$REPO_DIR/tests/agent/cases"

# agent_case NAME: run one case file; status 77 from the runner is a skip.
agent_case() {
    run --separate-stderr timeout 150 python3 "$REPO_DIR/tests/agent/runcase.py" \
        --txbox "$TXBOX" --tmp "$BATS_TEST_TMPDIR" "$CASES/$1.case"
    if [ "$status" = 77 ]; then
        skip "$output"
    fi
    [ "$status" = 0 ] || fail "case $1 failed (status $status):" "$output" "$(clip "$stderr")"
}

@test "agent: a task completed in several steps with commits" { agent_case steps-commit; }
@test "agent: the task from --task-file" { agent_case task-file; }
@test "agent: a destructive command blocked, the model adapts" { agent_case blocked-adapt; }
@test "agent: a failing command rolled back, then corrected" { agent_case rollback; }
@test "agent: stubbornness breaker (same failing command) ends with 112" { agent_case stubborn; }
@test "agent: a failed command retried after a commit is not stubborn" { agent_case stubborn-reset; }
@test "agent: stubbornness breaker on a blocked command" { agent_case stubborn-blocked; }
@test "agent: text protocol for servers without tool calling" { agent_case text-protocol; }
@test "agent: automatic fallback when the server refuses tools" { agent_case auto-fallback; }
@test "agent: streaming (SSE) with fragmented tool-call deltas" { agent_case stream; }
@test "agent: malformed stream chunk is an endpoint error" { agent_case stream-malformed; }
@test "agent: 429 and 503 retried with backoff, then success" { agent_case retry-429; }
@test "agent: a persistent 500 ends with 114 after the retries" { agent_case server-500; }
@test "agent: a hanging server times out" { agent_case hang; }
@test "agent: malformed JSON response" { agent_case malformed; }
@test "agent: oversized response refused at the cap" { agent_case oversized; }
@test "agent: a response without choices" { agent_case no-choices; }
@test "agent: an HTML page is not an OpenAI-compatible endpoint" { agent_case not-openai; }
@test "agent: 404 names the URL" { agent_case not-found; }
@test "agent: API key from the environment only, never logged; 401" { agent_case auth; }
@test "agent: commands do not see the API key variable" { agent_case key-hidden; }
@test "agent: connection refused is retried then fails" { agent_case connect-refused; }
@test "agent: step budget ends with 110" { agent_case step-budget; }
@test "agent: token budget ends with 111" { agent_case token-budget; }
@test "agent: a model that never acts ends with 113" { agent_case no-action; }
@test "agent: undo refused when a later transaction changed the path" { agent_case undo-conflict; }
@test "agent: undo reverts the last transaction" { agent_case undo; }
@test "agent: --no-transaction commits each command on its own" { agent_case no-transaction; }
@test "agent: one transaction: savepoint, failing middle command, rollback, commit at finish" { agent_case tx-savepoint; }
@test "agent: --verify at finish: failing keeps the transaction open, passing commits" { agent_case tx-verify; }
@test "agent: a conflicting commit meanwhile: finish applies nothing, 116" { agent_case tx-conflict; }
@test "agent: an effect rule holds the task's changes at finish: nothing applied, 117" { agent_case tx-held; }
@test "agent: one run is one session: a helper in /tmp runs in the next command" { agent_case session-tmp; }
@test "agent: one run is one session: a background server answers the next, killed at the end" { agent_case session-background; }

@test "agent: every case file is listed here" {
    local f name
    for f in "$CASES"/*.case; do
        name="$(basename "$f" .case)"
        grep -q "agent_case $name;" "$BATS_TEST_FILENAME" || fail "case $name has no @test"
    done
}

# ---- the command line ----

agent_err() {
    run --separate-stderr txbox_bin agent "$@"
    assert_txbox_error
}

@test "agent: bad options are one-line errors with status 125" {
    mkdir -p "$BATS_TEST_TMPDIR/ws"
    local e=http://127.0.0.1:9/v1 ws="$BATS_TEST_TMPDIR/ws"
    agent_err -C "$ws" --model m --task t
    [[ "$stderr" == *"--endpoint URL is required"* ]] || fail "$stderr"
    agent_err -C "$ws" --endpoint "$e" --task t
    [[ "$stderr" == *"--model NAME is required"* ]] || fail "$stderr"
    agent_err -C "$ws" --endpoint "$e" --model m
    agent_err -C "$ws" --endpoint "$e" --model m --task t --task-file /etc/hostname
    [[ "$stderr" == *"exactly one of --task"* ]] || fail "$stderr"
    agent_err -C "$ws" --endpoint "$e" --model m --task-file "$BATS_TEST_TMPDIR/nope"
    agent_err -C "$ws" --endpoint "$e" --model m --task '   '
    agent_err -C "$ws" --endpoint "$e" --model m --task t --max-steps 0
    agent_err -C "$ws" --endpoint "$e" --model m --task t --max-steps 12x
    agent_err -C "$ws" --endpoint "$e" --model m --task t --protocol xml
    agent_err -C "$ws" --endpoint "$e" --model m --task t --timeout -1
    agent_err -C "$ws" --endpoint "ftp://127.0.0.1/v1" --model m --task t
    agent_err -C "$ws" --endpoint "http://me:hunter2@127.0.0.1:9/v1" --model m --task t
    [[ "$stderr" != *hunter2* ]] || fail "the credential was echoed: $stderr"
    agent_err -C "$ws" --endpoint "$e" --model m --task t --api-key-env TXBOX_TEST_UNSET_VAR
    [[ "$stderr" == *"TXBOX_TEST_UNSET_VAR"* ]] || fail "$stderr"
    agent_err -C "$BATS_TEST_TMPDIR/missing" --endpoint "$e" --model m --task t
    agent_err -C "$ws" --endpoint "$e" --model m --task t extra-arg
    agent_err -C "$ws" --endpoint "$e" --model m --task t --bogus
    # nothing was created by a refused invocation
    [ ! -e "$ws/.txbox" ] || fail "a refused invocation created $ws/.txbox"
}

@test "agent: --help documents the exit statuses" {
    run --separate-stderr txbox_bin agent --help
    assert_status 0
    [[ "$output" == *"110 step budget"* && "$output" == *"116 the task's transaction conflicted"* &&
       "$output" == *"125 txbox error"* ]] || fail "$output"
}

# start_server CASEFILE: the scripted server standalone; sets SRV_PID, PORT.
start_server() {
    local port_file="$BATS_TEST_TMPDIR/port.$RANDOM" i
    python3 "$REPO_DIR/tests/agent/server.py" "$1" >"$port_file" 2>/dev/null &
    SRV_PID=$!
    for i in $(seq 50); do
        [ -s "$port_file" ] && break
        sleep 0.1
    done
    PORT="$(awk '/^port/ { print $2; exit }' "$port_file")"
    [ -n "$PORT" ] || fail "the scripted server did not start"
}

stop_server() {
    kill "$SRV_PID" 2>/dev/null || true
    wait "$SRV_PID" 2>/dev/null || true
}

# interrupt_agent CASE_TEXT [FN]: txbox agent --json against a server serving
# CASE_TEXT, SIGTERM after 2 s (after FN PID, when given); sets status, output.
interrupt_agent() {
    printf '%s\n' "$1" >"$BATS_TEST_TMPDIR/int.case"
    start_server "$BATS_TEST_TMPDIR/int.case"
    timeout 120 "$TXBOX" agent --json -C "$WS" --endpoint "http://127.0.0.1:$PORT" --model test-model \
        --task t --timeout 60 --retries 0 >"$BATS_TEST_TMPDIR/int.out" 2>"$BATS_TEST_TMPDIR/int.err" </dev/null &
    local pid=$!
    sleep 2
    [ -z "${2:-}" ] || "$2" "$pid"
    kill -TERM "$pid"
    status=0
    wait "$pid" || status=$?
    stop_server
    output="$(cat "$BATS_TEST_TMPDIR/int.out")"
}

@test "agent: SIGTERM while waiting for the model ends with 115 and a complete transcript" {
    new_ws
    interrupt_agent "--- reply hang=30"
    assert_status 115
    assert_json_field status interrupted
    local t
    t="$WS/$(jget transcript)"
    [ -f "$t" ] || fail "no transcript at $t"
    python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); assert t["complete"] is True, t' "$t" ||
        fail "transcript not complete"
}

@test "agent: SIGTERM while a command runs: the command is rolled back, 115" {
    new_ws
    snap pre "$WS"
    interrupt_agent '--- reply
{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"run_command","arguments":"{\"command\":\"echo x > new.txt; rm README; sleep 30\"}"}}]},"finish_reason":"tool_calls"}]}'
    assert_status 115
    assert_json_field status interrupted
    assert_json_field commands.total 1
    [ "$(jget commands.by_outcome.committed)" = 0 ] || fail "the interrupted command committed: $output"
    assert_tree pre "$WS"
}

# the agent's children while its command runs: no `txbox run` among them
children_args() { ps -o args= --ppid "$1" >"$BATS_TEST_TMPDIR/children"; }

@test "agent: run_command runs in the agent's process, not in a child txbox run" {
    new_ws
    interrupt_agent '--- reply
{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"run_command","arguments":"{\"command\":\"echo x > new.txt; sleep 30\"}"}}]},"finish_reason":"tool_calls"}]}' children_args
    assert_status 115
    [ -s "$BATS_TEST_TMPDIR/children" ] || fail "no child while the command ran"
    ! grep -q ' run --json' "$BATS_TEST_TMPDIR/children" ||
        fail "a child txbox run:" "$(cat "$BATS_TEST_TMPDIR/children")"
}

@test "agent: SIGTERM after staged commands: the task's transaction is aborted, nothing applied, 115" {
    new_ws
    snap pre "$WS"
    interrupt_agent '--- reply
{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"run_command","arguments":"{\"command\":\"echo x > new.txt; rm README\"}"}}]},"finish_reason":"tool_calls"}]}
--- reply hang=30'
    assert_status 115
    assert_json_field status interrupted
    assert_json_field commands.by_outcome.staged 1
    assert_json_field transaction.outcome aborted
    assert_tree pre "$WS"
    run --separate-stderr txbox_bin status -C "$WS"
    assert_status 0
    [ "$output" = "no open transactions" ] || fail "a transaction is still open: $output"
}

@test "agent: --verify does not go with --no-transaction" {
    mkdir -p "$BATS_TEST_TMPDIR/ws"
    agent_err -C "$BATS_TEST_TMPDIR/ws" --endpoint http://127.0.0.1:9/v1 --model m --task t \
        --no-transaction --verify true
    [[ "$stderr" == *"--verify gates the commit"* ]] || fail "$stderr"
    agent_err -C "$BATS_TEST_TMPDIR/ws" --endpoint http://127.0.0.1:9/v1 --model m --task t --verify ''
    [ ! -e "$BATS_TEST_TMPDIR/ws/.txbox" ] || fail "a refused invocation created .txbox"
}

@test "agent: what the model writes cannot drive the terminal (escapes in progress and summary)" {
    new_ws
    printf '%s\n' '--- reply
{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"run_command","arguments":"{\"command\":\"true \\u001b]0;pwned\\u0007\"}"}}]},"finish_reason":"tool_calls"}]}
--- reply
{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"finish","arguments":"{\"summary\":\"done \\u001b[2J\"}"}}]},"finish_reason":"tool_calls"}]}' >"$BATS_TEST_TMPDIR/esc.case"
    start_server "$BATS_TEST_TMPDIR/esc.case"
    run --separate-stderr timeout 120 "$TXBOX" agent -C "$WS" --endpoint "http://127.0.0.1:$PORT" \
        --model test-model --task t </dev/null
    stop_server
    assert_status 0
    [[ "$output$stderr" != *$'\e'* && "$output$stderr" != *$'\a'* ]] ||
        fail "an escape character reached the terminal:" "$(printf '%q' "$output$stderr")"
    [[ "$output" == *'summary: done \x1b[2J'* ]] || fail "summary not shown escaped: $output"
}

@test "agent: without --json, progress on stderr and a human summary; no terminal needed" {
    new_ws
    # The case runner always passes --json; here the scripted server is
    # started standalone and txbox runs detached from any terminal (setsid,
    # stdin from /dev/null).
    start_server "$CASES/steps-commit.case"
    run --separate-stderr timeout 120 setsid "$TXBOX" agent -C "$WS" --endpoint "http://127.0.0.1:$PORT" \
        --model test-model --task "Create hello.txt" </dev/null
    stop_server
    assert_status 0
    [[ "${lines[0]}" == "txbox agent: finished after 3 steps: the model called finish" ]] || fail "$output"
    [[ "$output" == *"commands: 2 (2 staged)"* ]] || fail "$output"
    # (the standard workspace has no notes.md: the case's setup is not run here)
    [[ "$output" == *"files changed: 2 +hello.txt +notes.md"* || "$output" == *"files changed: 2 +notes.md +hello.txt"* ]] ||
        fail "$output"
    [[ "$output" =~ "transaction "[0-9]+": committed (the task's changes are in the workspace)" ]] || fail "$output"
    [[ "$output" == *"summary: created hello.txt, appended to notes.md"* ]] || fail "$output"
    [[ "$stderr" == *"txbox: step 1: run_command: printf 'hello\\n' > hello.txt -> staged (tx "* ]] ||
        fail "no progress line: $stderr"
    [[ "$stderr" == *"txbox: step 3: finish -> committed (tx "* ]] || fail "no commit line: $stderr"
    [ "$(cat "$WS/hello.txt")" = hello ] || fail "hello.txt not committed"
}
