#!/usr/bin/env bats
# The real agent CLIs (tests/clients/package.json, pinned) driven end to end
# offline: each talks to a fake model server on 127.0.0.1
# (tests/clients/fakemodel.py: the Anthropic Messages API for Claude Code,
# chat completions for qwen-code and opencode, the Responses API for Codex,
# the Gemini API for Gemini CLI) that calls a tool with a scripted command
# per turn, and txbox is wired in by `txbox setup` exactly as a user would.
# Through MCP and through the hook: a committing, a destructive and a
# failing command, the workspace checked after each; headless MCP right
# after setup, with no approval flag; what the model is shown. The hook
# protocol is also replayed from the types Claude's Agent SDK publishes.
# Run by tests/clients/run (make check-clients), not by make check.

bats_require_minimum_version 1.5.0
load ../lib/common
load common

CLIENTS="$REPO_DIR/tests/clients"
NM="$CLIENTS/node_modules"

setup() {
    W="$BATS_TEST_TMPDIR/ws"
    clients_home
    mkdir -p "$W" "$HOME/keep"
    printf 'canary\n' >"$HOME/keep/canary"
    printf 'base\n' >"$W/base.txt"
    unset CODEX_HOME CLAUDE_CONFIG_DIR GEMINI_PROJECT_DIR CLAUDE_PROJECT_DIR
    LOG="$BATS_TEST_TMPDIR/model.log"
}

teardown() {
    [ -n "${SRV:-}" ] && kill "$SRV" 2>/dev/null || true
    # the sessions the hooks started (one per CLI session) end with the test
    local id
    if [ -d "$W/.txbox" ]; then
        for id in $(txbox_bin session list -C "$W" 2>/dev/null | awk -F'\t' '$2 == "running" { print $1 }'); do
            txbox_bin session end -C "$W" "$id" >/dev/null 2>&1 || true
        done
    fi
}

# model TOOL_RE COMMAND: the fake model server; sets PORT
model() {
    rm -f "$BATS_TEST_TMPDIR/port" "$LOG"
    python3 "$CLIENTS/fakemodel.py" "$BATS_TEST_TMPDIR/port" "$LOG" "$1" "$2" 2>"$BATS_TEST_TMPDIR/model.err" &
    SRV=$!
    for _ in $(seq 100); do [ -s "$BATS_TEST_TMPDIR/port" ] && break; sleep 0.1; done
    PORT=$(cat "$BATS_TEST_TMPDIR/port")
}

# what the model was told the tool did (all results, as text)
told() {
    python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "tool_result" in d: print(json.dumps(d["tool_result"]))' "$LOG"
}

# logged_outcomes WORDS: txbox log's outcomes of $W, newest first, are WORDS
logged_outcomes() {
    run --separate-stderr txbox_bin log -C "$W" --json
    [ "$(python3 -c 'import json,sys; print(" ".join(t["outcome"] for t in json.load(sys.stdin)))' <<<"$output")" = "$1" ] ||
        fail "txbox log: $output"
}

# told_first ERE: the text of the first result the model read (the first
# string in it, however the CLI wraps it) starts with a line matching ERE
told_first() {
    local first
    first=$(python3 -c 'import json,re,sys
def texts(v):
    if isinstance(v, str): return [v]
    vals = [x for k, x in v.items() if k != "type"] if isinstance(v, dict) else v if isinstance(v, list) else []
    return [t for x in vals for t in texts(x)]
# what a CLI puts around the server'"'"'s text: Gemini CLI <untrusted_context>,
# Codex "Wall time: ...\nOutput:"
frame = re.compile(r"^(<untrusted_context>|Wall time: .*|Output:)$")
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "tool_result" in d:
        lines = [x for t in texts(d["tool_result"]) for x in t.split("\n")]
        print(next((x for x in lines if x and not frame.match(x)), "")); break' "$LOG")
    [[ "$first" =~ $1 ]]
}

setup_cli() {
    run --separate-stderr txbox_bin setup "$@"
    [ "$status" = 0 ] || fail "txbox setup $*: $stderr"
}

cli_qwen() {
    (cd "$W" && OPENAI_API_KEY=test OPENAI_BASE_URL="http://127.0.0.1:$PORT/v1" OPENAI_MODEL=fake-model \
        timeout 300 "$NM/.bin/qwen" -p "do the task" --approval-mode yolo --auth-type openai) \
        >"$BATS_TEST_TMPDIR/cli.out" 2>"$BATS_TEST_TMPDIR/cli.err" </dev/null
}

cli_gemini() {
    mkdir -p "$HOME/.gemini"
    [ -f "$HOME/.gemini/settings.json" ] ||
        printf '{"security": {"auth": {"selectedType": "gemini-api-key"}}}\n' >"$HOME/.gemini/settings.json"
    (cd "$W" && GEMINI_API_KEY=test GOOGLE_GEMINI_BASE_URL="http://127.0.0.1:$PORT" GEMINI_CLI_TRUST_WORKSPACE=true \
        timeout 300 "$NM/.bin/gemini" -p "do the task" -m fake-model --approval-mode yolo) \
        >"$BATS_TEST_TMPDIR/cli.out" 2>"$BATS_TEST_TMPDIR/cli.err" </dev/null
}

# Claude Code: the native binary of its platform package (npm install
# --ignore-scripts leaves bin/claude.exe a placeholder); claude -p with no
# permission flag: what runs, runs because setup granted it
cli_claude() {
    (cd "$W" && ANTHROPIC_BASE_URL="http://127.0.0.1:$PORT" ANTHROPIC_API_KEY=test \
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
        timeout 300 "$NM/@anthropic-ai/claude-code-linux-x64/claude" -p "do the task" --model fake-model) \
        >"$BATS_TEST_TMPDIR/cli.out" 2>"$BATS_TEST_TMPDIR/cli.err" </dev/null
}

# opencode: its platform package's binary; the fake model as an
# OpenAI-compatible provider (the rest of its configuration is setup's;
# its XDG directories are clients_home's)
cli_opencode() {
    local oc="$NM/opencode-linux-x64/bin/opencode"
    [ -x "$oc" ] || oc="$NM/opencode-linux-x64-baseline/bin/opencode"
    (cd "$W" && OPENCODE_DISABLE_AUTOUPDATE=1 \
        OPENCODE_CONFIG_CONTENT="{\"provider\":{\"fake\":{\"npm\":\"@ai-sdk/openai-compatible\",\"name\":\"fake\",\"options\":{\"baseURL\":\"http://127.0.0.1:$PORT/v1\",\"apiKey\":\"test\"},\"models\":{\"fake-model\":{\"name\":\"fake\"}}}},\"model\":\"fake/fake-model\"}" \
        timeout 300 "$oc" run "do the task") \
        >"$BATS_TEST_TMPDIR/cli.out" 2>"$BATS_TEST_TMPDIR/cli.err" </dev/null
}

cli_codex() {
    (cd "$W" && FAKE_KEY=test timeout 300 "$NM/.bin/codex" exec --skip-git-repo-check \
        -c model_provider=fake \
        -c "model_providers.fake={name=\"fake\",base_url=\"http://127.0.0.1:$PORT/v1\",wire_api=\"responses\",env_key=\"FAKE_KEY\"}" \
        -m fake-model "do the task") \
        >"$BATS_TEST_TMPDIR/cli.out" 2>"$BATS_TEST_TMPDIR/cli.err" </dev/null
}

# drive CLI TOOL_RE COMMAND: one run of the CLI with the fake model
drive() {
    model "$2" "$3"
    "cli_$1" || fail "$1 exited $?" "$(tail -20 "$BATS_TEST_TMPDIR/cli.err")" "$(cat "$BATS_TEST_TMPDIR/cli.out")"
    kill "$SRV"
    SRV=
    TOLD=$(told)
    [ -n "$TOLD" ] || fail "$1: the model never got a tool result" "$(cat "$LOG" | cut -c1-2000)"
}

home_intact() {
    [ "$(cat "$HOME/keep/canary" 2>/dev/null)" = canary ] || fail "the destructive command ran: ~/keep/canary is gone"
}

# the three commands, through tool TOOL_RE of CLI; MCP results say what
# happened in txbox's words
three_cases_mcp() {
    local cli=$1 re=$2
    drive "$cli" "$re" 'echo hi > hello.txt'
    [ "$(cat "$W/hello.txt")" = hi ] || fail "$cli mcp: hello.txt not committed" "$TOLD"
    [[ "$TOLD" == *committed* ]] || fail "$TOLD"
    # the model is shown a line first, then compact JSON without protections
    told_first '^committed tx [0-9]+ \(exit 0\); added hello\.txt$' || fail "$cli mcp: the first line" "$TOLD"
    [[ "$TOLD" != *protections* ]] || fail "$cli mcp: protections shown" "$TOLD"
    drive "$cli" "$re" 'rm -rf ~'
    home_intact
    [[ "$TOLD" == *blocked* && "$TOLD" == *delete-outside-workspace* ]] || fail "$cli mcp destructive: $TOLD"
    drive "$cli" "$re" 'echo partial > partial.txt && rm base.txt && false'
    [ ! -e "$W/partial.txt" ] && [ "$(cat "$W/base.txt")" = base ] || fail "$cli mcp: the failing command's changes stayed"
    [[ "$TOLD" == *rolled* ]] || fail "$cli mcp failing: $TOLD"
    logged_outcomes "rolled_back blocked committed"
}

@test "claude-code 2.1 through MCP, claude -p right after txbox setup: commits, blocks, rolls back" {
    setup_cli claude-code --project "$W"
    three_cases_mcp claude 'mcp__txbox__run$'
}

@test "claude-code 2.1 without setup's grant: the MCP call is refused (why setup writes it)" {
    setup_cli claude-code --project "$W"
    rm "$W/.claude/settings.local.json"
    model 'mcp__txbox__run$' 'echo hi > hello.txt'
    cli_claude || true
    [ ! -e "$W/hello.txt" ]
    [[ "$(told)" == *"haven't granted it"* ]] || fail "$(told)"
}

@test "claude-code 2.1 through the hook, one session: /tmp helper, background server, cd carry over" {
    setup_cli claude-code --project "$W"
    local m="m$$x$RANDOM" w
    w="$(cd "$W" && pwd -P)"
    drive claude '^Bash$' "[\"printf 'echo answer \$((6*7))\\\\n' >/tmp/helper-$m.sh\", \"sh /tmp/helper-$m.sh\",
        \"python3 -m http.server 18085 --bind 127.0.0.1 >/dev/null 2>&1 &\",
        \"for i in \$(seq 100); do curl -sf http://127.0.0.1:18085/base.txt && exit 0; sleep 0.1; done; exit 7\",
        \"mkdir -p sub && cd sub\", \"pwd\"]"
    python3 - "$LOG" "$w" <<'PY' || fail "what the model was told" "$TOLD"
import json, sys
res = []
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "tool_result" in d:
        res.append(json.dumps(d["tool_result"]))
assert len(res) == 6, res
assert "answer 42" in res[1], "the helper in /tmp: " + res[1]
assert "base" in res[3], "the background server: " + res[3]
assert (sys.argv[2] + "/sub") in res[5], "cd sub, then pwd: " + res[5]
PY
    [ -d "$W/sub" ] || fail "sub not committed" "$TOLD"
}

@test "claude-code 2.1 through the hook: a command past its timeout goes to the background, its partial output is read" {
    # Claude Code moves a command that outlives its timeout to the
    # background and tells the model where its output is being written;
    # the model reads that file (its Read tool) while the command runs.
    # Under txbox the command's output reaches that file as it comes, not
    # when the transaction ends (issue 34).
    setup_cli claude-code --project "$W"
    local m="m$$x$RANDOM"
    drive claude '^Bash$' "[{\"command\": \"echo first; sleep 3; echo second-$m; sleep 4; echo late >late.txt\",
         \"timeout\": 1500}, \"sleep 5\",
        {\"tool\": \"^Read\$\", \"file_path\": \"{{last:written to: (/\\\\S+[.]output)}}\"}]"
    python3 - "$LOG" "$m" <<'PY' || fail "what the model was told" "$TOLD"
import json, sys
res = [json.dumps(json.loads(l)["tool_result"]) for l in open(sys.argv[1]) if "tool_result" in json.loads(l)]
assert len(res) == 3, res
assert "moved to the background" in res[0] and "second-" not in res[0], "not moved to the background: " + res[0]
assert "second-" + sys.argv[2] in res[2], "the output written after it went to the background: " + res[2]
PY
    # claude -p waits for it; it ended well, and commits as one transaction
    [ "$(cat "$W/late.txt" 2>/dev/null)" = late ] || fail "the backgrounded command did not commit" "$(txbox_bin log -C "$W")"
}

@test "claude-code 2.1 through the PreToolUse hook: its Bash tool commits through txbox run, blocks, rolls back" {
    setup_cli claude-code --project "$W"
    drive claude '^Bash$' 'echo hi > hello.txt'
    [ "$(cat "$W/hello.txt")" = hi ] || fail "claude hook: not committed" "$TOLD"
    [[ "$TOLD" == *"txbox: tx 1 committed"* ]] || fail "$TOLD"
    drive claude '^Bash$' 'rm -rf ~'
    home_intact
    [[ "$TOLD" == *"txbox blocked this command"* ]] || fail "$TOLD"
    drive claude '^Bash$' 'echo partial > partial.txt && rm base.txt && false'
    [ ! -e "$W/partial.txt" ] && [ "$(cat "$W/base.txt")" = base ] || fail "claude hook: the failing command's changes stayed" "$TOLD"
    [[ "$TOLD" == *"rolled back"* ]] || fail "$TOLD"
}

@test "opencode 1.18 after txbox setup opencode: its own shell tool is gone, txbox's run commits, blocks, rolls back" {
    setup_cli opencode --project "$W"
    model '^bash$' 'rm base.txt'
    cli_opencode || fail "opencode exited $?" "$(tail -20 "$BATS_TEST_TMPDIR/cli.err")"
    [ "$(cat "$W/base.txt")" = base ] || fail "opencode's bash tool ran rm base.txt"
    grep -q '"no_tool"' "$LOG" || fail "the model was offered a bash tool"
    kill "$SRV"
    three_cases_mcp opencode '^txbox_run$'
}

@test "opencode 1.18 through MCP, one session: /tmp helper and background server carry over" {
    setup_cli opencode --project "$W"
    local m="m$$x$RANDOM"
    drive opencode '^txbox_run$' "[\"printf 'echo answer \$((6*7))\\\\n' >/tmp/helper-$m.sh\", \"sh /tmp/helper-$m.sh\",
        \"python3 -m http.server 18086 --bind 127.0.0.1 >/dev/null 2>&1 &\",
        \"for i in \$(seq 100); do curl -sf http://127.0.0.1:18086/base.txt && exit 0; sleep 0.1; done; exit 7\"]"
    python3 - "$LOG" <<'PY' || fail "what the model was told" "$TOLD"
import json, sys
res = []
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "tool_result" in d:
        res.append(json.dumps(d["tool_result"]))
assert len(res) == 4, res
assert "answer 42" in res[1], "the helper in /tmp: " + res[1]
assert "base" in res[3], "the background server: " + res[3]
PY
}

@test "gemini-cli and qwen-code: headless MCP right after txbox setup, without --approval-mode yolo" {
    setup_cli gemini-cli --project "$W"
    setup_cli qwen-code --project "$W"
    model 'mcp_txbox_run$' 'echo g > g.txt'
    mkdir -p "$HOME/.gemini"
    printf '{"security": {"auth": {"selectedType": "gemini-api-key"}}}\n' >"$HOME/.gemini/settings.json"
    (cd "$W" && GEMINI_API_KEY=test GOOGLE_GEMINI_BASE_URL="http://127.0.0.1:$PORT" GEMINI_CLI_TRUST_WORKSPACE=true \
        timeout 300 "$NM/.bin/gemini" -p "do the task" -m fake-model) >"$BATS_TEST_TMPDIR/cli.out" 2>"$BATS_TEST_TMPDIR/cli.err" </dev/null ||
        fail "gemini exited $?" "$(tail -20 "$BATS_TEST_TMPDIR/cli.err")"
    [ "$(cat "$W/g.txt" 2>/dev/null)" = g ] || fail "gemini: the MCP call did not run" "$(told)"
    kill "$SRV"
    model 'txbox__run$' 'echo q > q.txt'
    (cd "$W" && OPENAI_API_KEY=test OPENAI_BASE_URL="http://127.0.0.1:$PORT/v1" OPENAI_MODEL=fake-model \
        timeout 300 "$NM/.bin/qwen" -p "do the task" --auth-type openai) >"$BATS_TEST_TMPDIR/cli.out" 2>"$BATS_TEST_TMPDIR/cli.err" </dev/null ||
        fail "qwen exited $?" "$(tail -20 "$BATS_TEST_TMPDIR/cli.err")"
    [ "$(cat "$W/q.txt" 2>/dev/null)" = q ] || fail "qwen: the MCP call did not run" "$(told)"
}

@test "qwen-code 0.15 through MCP: commits, blocks, rolls back" {
    setup_cli qwen-code --project "$W"
    three_cases_mcp qwen 'txbox__run$'
}

@test "gemini-cli 0.61 through MCP: commits, blocks, rolls back" {
    setup_cli gemini-cli --project "$W"
    three_cases_mcp gemini 'mcp_txbox_run$'
}

@test "codex 0.171 through MCP (codex exec, headless): commits, blocks, rolls back" {
    setup_cli codex
    three_cases_mcp codex 'mcp__txbox__run$'
}

@test "codex exec without default_tools_approval_mode: the MCP call is refused (why setup writes it)" {
    setup_cli codex
    sed -i '/^default_tools_approval_mode/d' "$HOME/.codex/config.toml"
    model 'mcp__txbox__run$' 'echo hi > hello.txt'
    cli_codex || true
    [ ! -e "$W/hello.txt" ]
    [[ "$(told)" == *"requires approval"* ]] || fail "$(told)"
}

@test "gemini-cli 0.61 through the BeforeTool hook: its own shell tool commits through txbox run, blocks, rolls back" {
    setup_cli gemini-cli --project "$W"
    drive gemini '^run_shell_command$' 'echo hi > hello.txt'
    [ "$(cat "$W/hello.txt")" = hi ] || fail "gemini hook: not committed" "$TOLD"
    drive gemini '^run_shell_command$' 'rm -rf ~'
    home_intact
    [[ "$TOLD" == *"txbox blocked this command"* ]] || fail "$TOLD"
    drive gemini '^run_shell_command$' 'echo partial > partial.txt && rm base.txt && false'
    [ ! -e "$W/partial.txt" ] && [ "$(cat "$W/base.txt")" = base ] || fail "gemini hook: the failing command's changes stayed" "$TOLD"
    # the hook's denial is in the log too, as blocked
    logged_outcomes "rolled_back blocked committed"
}

@test "qwen-code 0.15 through the PreToolUse hook: no shell command gets past txbox unjudged" {
    setup_cli qwen-code --project "$W"
    # qwen-code ignores updatedInput, so the hook cannot reroute a command
    # through txbox run: what may change state must be denied (with a
    # pointer to the MCP run tool), and nothing may reach the workspace
    for cmd in 'echo hi > hello.txt' 'rm -rf ~' 'echo partial > partial.txt && rm base.txt && false'; do
        drive qwen '^run_shell_command$' "$cmd"
        home_intact
        [ ! -e "$W/hello.txt" ] && [ ! -e "$W/partial.txt" ] && [ -e "$W/base.txt" ] ||
            fail "qwen hook let '$cmd' change the workspace" "$TOLD"
        [[ "$TOLD" == *txbox* ]] || fail "qwen hook: the model was not told why: $TOLD"
    done
}

@test "Claude Code hook protocol: inputs built from the Agent SDK's published types, answers checked against them" {
    setup_cli claude-code --project "$W"
    cmd=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hooks"]["PreToolUse"][0]["hooks"][0]["command"])' \
        "$W/.claude/settings.json")
    run --separate-stderr python3 "$CLIENTS/claude_types.py" "$NM/@anthropic-ai/claude-agent-sdk" "$W" "$cmd"
    [ "$status" = 0 ] || fail "$output" "$stderr"
    home_intact
    [ "$(cat "$W/hello.txt")" = hi ] || fail "the rewritten command did not commit" "$output"
    [ ! -e "$W/partial.txt" ] && [ "$(cat "$W/base.txt")" = base ] || fail "the failing command's changes stayed"
}
