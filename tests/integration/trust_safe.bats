#!/usr/bin/env bats
# `safe` is sound under the hook's --trust-safe, where the agent CLI runs a
# safe command natively on the host (docs/policy.md, "What safe means").
# Each class of a wrong `safe` is first shown doing its harm in plain bash
# (the control), then through `txbox hook claude-code --trust-safe` as
# Claude Code would run it: it must not touch the host. Then the CLI sides
# of the same round: paths read as bash reads them, policy values
# validated, suggestions that point at a place whose writes last.

bats_require_minimum_version 1.5.0
load ../lib/common

HOOKHOST="$REPO_DIR/tests/mcp/hookhost.py"

setup() {
    # outside /tmp (the sandbox's own): a write there would reach the host
    local parent="${TXBOX_ESCAPE_DIR:-$BATS_TEST_TMPDIR}"
    BASE="$(mktemp -d "$parent/trust-safe.XXXXXX")"
    chmod 0755 "$BASE"
    WS="$BASE/ws"
    OUT="$BASE/out" # outside the workspace: must never change
    mkdir -p "$WS" "$OUT"
}

teardown() {
    rm -rf "$BASE"
}

# hooked CMD: Claude Code's Bash tool calls the hook with --trust-safe, then
# runs what it allows (tests/mcp/hookhost.py); HOST is its report.
hooked() {
    local ws payload
    ws="$(cd "$WS" && pwd -P)"
    payload="$(python3 -c 'import json, sys
print(json.dumps({"cwd": sys.argv[1], "hook_event_name": "PreToolUse", "tool_name": "Bash",
                  "tool_input": {"command": sys.argv[2]}}))' "$ws" "$1")"
    run --separate-stderr python3 "$HOOKHOST" "$TXBOX" claude-code "$payload" --trust-safe
    [ "$status" = 0 ] || fail "hookhost: $stderr"
    HOST="$output"
}

hf() { printf '%s' "$HOST" | python3 -c 'import json, sys; v = json.load(sys.stdin); print(v.get(sys.argv[1]))' "$1"; }

# harmless CMD MARK: in plain bash CMD creates MARK (the control); through
# the hook it does not, and it did not run as it is.
harmless() {
    local cmd="$1" mark="$2"
    rm -f "$mark"
    (cd "$WS" && bash -c "$cmd") >/dev/null 2>&1 || true
    [ -e "$mark" ] || fail "control: plain bash did not create $mark with: $cmd"
    rm -f "$mark"
    hooked "$cmd"
    [ ! -e "$mark" ] || fail "ESCAPE: through the hook, $cmd created $mark on the host: $HOST"
    [ "$(hf ran)" != "$cmd" ] || fail "a command bash evaluates ran natively: $cmd"
}

@test "trust-safe: what bash evaluates (subscripts, arithmetic, names, prompts) runs nothing on the host" {
    printf 'a[$(touch %s/from-file)]\n' "$OUT" >"$WS/n.txt"
    local p="'a[\$(touch $OUT/m)]'"
    harmless "[[ -v $p ]]" "$OUT/m"
    harmless "test -v $p" "$OUT/m"
    harmless "printf -v $p x" "$OUT/m"
    harmless "read $p <<< x" "$OUT/m"
    harmless "declare -n r=$p; echo \$r" "$OUT/m"
    harmless "x=$p; echo \$((x))" "$OUT/m"
    harmless "x=$p; echo \${!x}" "$OUT/m"
    harmless "y=abc; x=$p; echo \${y:x}" "$OUT/m"
    harmless "x='\$(touch $OUT/m)'; echo \${x@P}" "$OUT/m"
    harmless "read x < n.txt; echo \$((x))" "$OUT/from-file"
    harmless "x=\$(cat n.txt); [[ \$x -gt 0 ]]" "$OUT/from-file"
    # the controls: harmless arithmetic and names stay native
    hooked 'x=5; echo $((x * 2)); [[ -v HOME ]]'
    [ "$(hf ran)" = 'x=5; echo $((x * 2)); [[ -v HOME ]]' ] && [ "$(hf stdout)" = 10 ] || fail "$HOST"
}

@test "trust-safe: a glob that expands to workspace files named like options runs nothing on the host" {
    # sort * with files named --compress-program=sh and -S1: sort pipes its
    # data into sh, so a line of the data runs
    touch -- "$WS/--compress-program=sh" "$WS/-S1"
    python3 -c 'import sys
print("touch %s/sorted" % sys.argv[1])
for i in range(20000): print("# %06d" % i)' "$OUT" >"$WS/data"
    harmless 'sort *' "$OUT/sorted"
    # find * with a file named -delete: the control deletes the workspace
    mkdir -p "$WS/f" && touch -- "$WS/f/-delete" "$WS/f/.keep"
    (cd "$WS/f" && bash -c 'find *') 2>/dev/null || true
    [ ! -e "$WS/f/.keep" ] || fail "control: find * did not delete"
    touch -- "$WS/f/-delete" "$WS/f/.keep"
    hooked 'cd f && find *'
    [[ "$(hf ran)" == *" run -C "* ]] || fail "find * ran natively: $HOST"
    # the control: a glob with a literal first character stays native
    hooked 'sort -- *.txt; sort data/../data | head -1'
    [ "$(hf ran)" = 'sort -- *.txt; sort data/../data | head -1' ] || fail "$HOST"
}

@test "trust-safe: flock FILE creates no file outside the workspace" {
    (cd "$WS" && flock "$OUT/lock" true)
    [ -e "$OUT/lock" ] || fail "control: flock did not create its file"
    rm -f "$OUT/lock"
    hooked "flock $OUT/lock true"
    [ ! -e "$OUT/lock" ] || fail "ESCAPE: flock created $OUT/lock on the host: $HOST"
    [ "$(hf blocked)" = True ] || [[ "$(hf ran)" == *" run -C "* ]] || fail "$HOST"
}

@test "trust-safe: the secrets the sandbox hides are not read natively (~/.ssh/github, agents' credentials)" {
    export HOME="$BASE/home"
    mkdir -p "$HOME/.ssh" "$HOME/.claude"
    echo TXBOX-SECRET-github >"$HOME/.ssh/github"
    echo TXBOX-SECRET-claude >"$HOME/.claude/.credentials.json"
    echo TXBOX-SECRET-history >"$HOME/.bash_history"
    chmod -R go-rwx "$HOME/.ssh"
    for f in .ssh/github .claude/.credentials.json .bash_history; do
        [[ "$(cat "$HOME/$f")" == TXBOX-SECRET-* ]] || fail "control: $f"
        hooked "cat ~/$f"
        [[ "$(hf stdout)" != *TXBOX-SECRET* ]] || fail "ESCAPE: ~/$f read: $HOST"
        [ "$(hf ran)" != "cat ~/$f" ] || fail "cat ~/$f ran natively"
    done
}

@test "paths as bash reads them: ~/ws, \$HOME/ws, ../ws and the absolute path are the workspace alike" {
    export HOME="$BASE/home"
    WS="$HOME/claude-mcp"
    mkdir -p "$WS" "$HOME/other"
    local real
    real="$(cd "$WS" && pwd -P)"
    local n=0 c
    for c in 'rm -rf ~/claude-mcp/d' 'rm -rf $HOME/claude-mcp/d' 'rm -rf "$HOME"/claude-mcp/d' \
        'rm -rf ${HOME}/claude-mcp/d' "rm -rf $real/d" 'rm -rf ../claude-mcp/d' 'cd ~ && rm -rf claude-mcp/d' \
        'rm -rf ~+/d' 'rm -rf $PWD/d'; do
        mkdir -p "$WS/d/e"
        run --separate-stderr "$TXBOX" run -C "$WS" --json -c "$c"
        assert_status 0 || fail "$c"
        assert_outcome committed || fail "$c"
        [ ! -e "$WS/d" ] || fail "$c: not deleted"
        n=$((n + 1))
    done
    [ "$n" = 9 ]
    for c in 'rm -rf ~/other' 'rm -rf ../other' 'rm -rf ~/claude-mcp/../other' 'cd .. && rm -rf other'; do
        run --separate-stderr "$TXBOX" check -C "$WS" -c "$c"
        [ "$status" != 0 ] || fail "$c: safe"
        run --separate-stderr "$TXBOX" run -C "$WS" -c "$c"
        [ -d "$HOME/other" ] || fail "$c: deleted a directory outside the workspace"
    done
}

@test "policy values: hide: foo, 7 and \"\" are one-line errors naming file, line and key, from every command" {
    local v
    for v in foo 7 '""' "[/ok, rel]" "'~'"; do
        printf 'version: 1\nhide: %s\n' "$v" >"$BASE/p.yaml"
        run --separate-stderr "$TXBOX" run -C "$WS" --policy "$BASE/p.yaml" -c true
        assert_txbox_error || fail "hide: $v"
        [[ "$stderr" == "txbox: policy $BASE/p.yaml:2: hide: "* ]] || fail "hide: $v: $stderr"
        run --separate-stderr "$TXBOX" check -C "$WS" --policy "$BASE/p.yaml" -c ls
        assert_txbox_error || fail "check, hide: $v"
    done
    # the workspace's own file is refused whole: every command fails closed
    printf 'hide: foo\n' >"$WS/.txbox-policy.yaml"
    run --separate-stderr "$TXBOX" run -C "$WS" -c 'touch x'
    assert_txbox_error
    [[ "$stderr" == *".txbox-policy.yaml:1: hide: 'foo'"* ]] || fail "$stderr"
    [ ! -e "$WS/x" ] || fail "the command ran"
    hooked 'ls'
    [ "$(hf hook_status)" = 2 ] || fail "the hook did not fail closed: $HOST"
    # deep nesting is refused as soon as it is seen
    python3 -c 'print("rules: " + "[" * 100000 + "]" * 100000)' >"$WS/.txbox-policy.yaml"
    run --separate-stderr "$TXBOX" check -C "$WS" -c ls
    assert_txbox_error
    [[ "$stderr" == *"nested deeper than 32 levels"* ]] || fail "$stderr"
    # a good entry hides more
    printf 'hide: [%s]\n' "$OUT" >"$WS/.txbox-policy.yaml"
    echo TXBOX-SECRET-out >"$OUT/s"
    run --separate-stderr "$TXBOX" run -C "$WS" --json -c "cat $OUT/s; true"
    [[ "$output" != *TXBOX-SECRET* ]] || fail "the workspace's hide: entry was not hidden: $output"
}

@test "suggestions point inside the workspace, not at /tmp, whose writes vanish" {
    local c
    for c in 'echo x > ../x' 'ls > /opt/out.txt' 'sort -o /etc/x y'; do
        run --separate-stderr "$TXBOX" check -C "$WS" --json -c "$c"
        [ "$(jget verdict)" = unsafe ] || fail "$c: $output"
        [[ "$(jget suggestion)" != */tmp* ]] || fail "$c: $(jget suggestion)"
        [[ "$(jget suggestion)" == *inside\ the\ workspace* ]] || fail "$c: $(jget suggestion)"
    done
}
