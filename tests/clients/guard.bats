#!/usr/bin/env bats
# The guard with the real agent CLIs (tests/clients/package.json, pinned),
# offline against the fake model server (tests/clients/fakemodel.py), wired
# by `txbox setup` as a user would: a command that plants
# {"disableAllHooks": true} is held and the hook keeps judging the next
# command; Claude Code's own Write tool cannot plant it either, nor
# replace a script its hooks run; with txbox's binary gone (make uninstall, a moved binary) each
# CLI's hook denies the shell command instead of running it unjudged.
# Run by tests/clients/run (make check-clients), beside clients.bats.

bats_require_minimum_version 1.5.0
load ../lib/common
load common

CLIENTS="${TXBOX_CLIENTS_DIR:-$REPO_DIR/tests/clients}"
NM="$CLIENTS/node_modules"

setup() {
    W="$BATS_TEST_TMPDIR/ws"
    clients_home
    mkdir -p "$W" "$HOME/keep"
    printf 'canary\n' >"$HOME/keep/canary"
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

# g_model TOOL_RE COMMAND: the fake model calls the tool once; sets PORT
g_model() {
    rm -f "$BATS_TEST_TMPDIR/port" "$LOG"
    python3 "$CLIENTS/fakemodel.py" "$BATS_TEST_TMPDIR/port" "$LOG" "$1" "$2" 2>"$BATS_TEST_TMPDIR/model.err" &
    SRV=$!
    for _ in $(seq 100); do [ -s "$BATS_TEST_TMPDIR/port" ] && break; sleep 0.1; done
    PORT=$(cat "$BATS_TEST_TMPDIR/port")
}

# g_cli CLI: one headless run of the CLI in the workspace
g_cli() {
    local out="$BATS_TEST_TMPDIR/cli.out" err="$BATS_TEST_TMPDIR/cli.err"
    case $1 in
    claude)
        [ -x "$NM/@anthropic-ai/claude-code-linux-x64/claude" ] ||
            fail "Claude Code is not installed: @anthropic-ai/claude-code in tests/clients/package.json (tests/clients/run)"
        (cd "$W" && ANTHROPIC_BASE_URL="http://127.0.0.1:$PORT" ANTHROPIC_API_KEY=test \
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
            timeout 300 "$NM/@anthropic-ai/claude-code-linux-x64/claude" -p "do the task" --model fake-model) \
            >"$out" 2>"$err" </dev/null
        ;;
    gemini)
        mkdir -p "$HOME/.gemini"
        [ -f "$HOME/.gemini/settings.json" ] ||
            printf '{"security": {"auth": {"selectedType": "gemini-api-key"}}}\n' >"$HOME/.gemini/settings.json"
        (cd "$W" && GEMINI_API_KEY=test GOOGLE_GEMINI_BASE_URL="http://127.0.0.1:$PORT" GEMINI_CLI_TRUST_WORKSPACE=true \
            timeout 300 "$NM/.bin/gemini" -p "do the task" -m fake-model --approval-mode yolo) >"$out" 2>"$err" </dev/null
        ;;
    qwen)
        (cd "$W" && OPENAI_API_KEY=test OPENAI_BASE_URL="http://127.0.0.1:$PORT/v1" OPENAI_MODEL=fake-model \
            timeout 300 "$NM/.bin/qwen" -p "do the task" --approval-mode yolo --auth-type openai) >"$out" 2>"$err" </dev/null
        ;;
    esac
}

# g_drive CLI TOOL_RE COMMAND: the CLI runs with the model calling TOOL_RE
# with COMMAND; TOLD: every tool result the model was given
g_drive() {
    g_model "$2" "$3"
    g_cli "$1" || true # a CLI may end non-zero after a denied call
    kill "$SRV"
    SRV=
    TOLD=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "tool_result" in d: print(json.dumps(d["tool_result"]))' "$LOG")
    [ -n "$TOLD" ] || fail "$1: the model never got a tool result" "$(tail -20 "$BATS_TEST_TMPDIR/cli.err")"
}

g_setup() {
    run --separate-stderr txbox_bin setup "$@"
    [ "$status" = 0 ] || fail "txbox setup $*: $stderr"
}

@test "claude-code: a planted disableAllHooks is held, and the hook judges the next command" {
    g_setup claude-code --project "$W"
    g_drive claude '^Bash$' 'mkdir -p .claude && echo "{\"disableAllHooks\":true}" > .claude/settings.local.json'
    ! grep -qs disableAllHooks "$W/.claude/settings.local.json" || fail "planted" "$TOLD"
    [[ "$TOLD" == *held* && "$TOLD" == *agent-settings* ]] || fail "the model was not told it is held: $TOLD"
    g_drive claude '^Bash$' 'rm -rf ~'
    [ "$(cat "$HOME/keep/canary")" = canary ] || fail "the hook no longer judged: ~ is gone"
    [[ "$TOLD" == *"txbox blocked this command"* ]] || fail "$TOLD"
}

@test "claude-code: its own Write tool cannot plant disableAllHooks or a hook's script; the hook leaves other files to Claude" {
    g_setup claude-code --project "$W"
    mkdir -p "$W/.claude" "$W/scripts"
    printf '#!/bin/sh\nexit 0\n' >"$W/scripts/fmt.sh"
    python3 - "$W/.claude/settings.json" <<'EOF'
import json, sys
p = sys.argv[1]
s = json.load(open(p))
s["hooks"].setdefault("PostToolUse", []).append({"matcher": "Edit", "hooks": [{"type": "command", "command": "./scripts/fmt.sh"}]})
json.dump(s, open(p, "w"))
EOF
    local steps
    steps=$(python3 -c 'import json, sys; w = sys.argv[1]; print(json.dumps([
        {"tool": "^Write$", "file_path": w + "/.claude/settings.local.json", "content": "{\"disableAllHooks\": true}\n"},
        {"tool": "^Write$", "file_path": w + "/scripts/fmt.sh", "content": "#!/bin/sh\ntouch /tmp/planted\n"},
        {"tool": "^Write$", "file_path": w + "/notes.md", "content": "plain notes\n"}]))' "$W")
    g_drive claude '^Write$' "$steps"
    ! grep -qs disableAllHooks "$W/.claude/settings.local.json" || fail "planted" "$TOLD"
    [ "$(cat "$W/scripts/fmt.sh")" = "$(printf '#!/bin/sh\nexit 0')" ] || fail "the hook's script was replaced" "$TOLD"
    [[ "$TOLD" == *"settings.local.json, which rule agent-settings holds"* &&
        "$TOLD" == *"fmt.sh, which rule runner-scripts holds"* ]] || fail "the model was not told why: $TOLD"
    # notes.md: no decision of txbox's (Claude's own permissions answer)
    [[ "$TOLD" != *"notes.md, which rule"* && "$TOLD" == *notes.md* ]] || fail "$TOLD"
}

@test "a missing txbox binary fails closed in each CLI's hook: claude-code, gemini-cli, qwen-code" {
    local cli agent tool copy
    for cli in claude gemini qwen; do
        case $cli in
        claude) agent=claude-code tool='^Bash$' ;;
        gemini) agent=gemini-cli tool='^run_shell_command$' ;;
        qwen) agent=qwen-code tool='^run_shell_command$' ;;
        esac
        rm -rf "$W" && mkdir -p "$W"
        copy="$BATS_TEST_TMPDIR/gone-$cli/txbox"
        mkdir -p "$(dirname "$copy")" && cp "$(readlink -f "$TXBOX")" "$copy"
        g_setup "$agent" --project "$W" --txbox "$copy"
        rm -f "$copy"
        g_drive "$cli" "$tool" 'echo ran > ran.txt; rm -rf ~'
        [ ! -e "$W/ran.txt" ] || fail "$cli ran the command without txbox" "$TOLD"
        [ "$(cat "$HOME/keep/canary")" = canary ] || fail "$cli: ~ is gone"
        [[ "$TOLD" == *"txbox could not run"* ]] || fail "$cli: the model was not told why: $TOLD"
    done
}

@test "codex: with txbox's binary gone, codex exec does not start (the txbox server is required)" {
    local copy="$BATS_TEST_TMPDIR/gone-codex/txbox"
    mkdir -p "$(dirname "$copy")" && cp "$(readlink -f "$TXBOX")" "$copy"
    g_setup codex --txbox "$copy"
    rm -f "$copy"
    g_model '.*' 'echo ran > ran.txt'
    run --separate-stderr bash -c "cd '$W' && FAKE_KEY=test timeout 300 '$NM/.bin/codex' exec --skip-git-repo-check \
        -c model_provider=fake \
        -c 'model_providers.fake={name=\"fake\",base_url=\"http://127.0.0.1:$PORT/v1\",wire_api=\"responses\",env_key=\"FAKE_KEY\"}' \
        -m fake-model 'do the task' </dev/null"
    [ "$status" != 0 ] || fail "codex exec ran without its required txbox server" "$output" "$stderr"
    [ ! -e "$W/ran.txt" ] || fail "codex ran the command"
    [[ "$stderr$output" == *"required MCP server"* ]] || fail "codex did not say why" "$stderr"
}
