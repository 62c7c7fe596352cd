#!/usr/bin/env bats
# The workspace's own policy (.txbox-policy.yaml) is written by the commands
# it judges (issue 20, part 2): it can only tighten the user's policy, what
# it tried and was refused is reported, the user's configuration outside the
# workspace (or --policy) can trust it, a transaction that changes it is
# held, and a policy path that is not a regular file (or is too large) is
# an error at once, never a hang and never a read through a symlink.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    WS="$BATS_TEST_TMPDIR/ws"
    mkdir -p "$WS/src"
    printf 'hello\n' >"$WS/README"
    # no configuration of the user running the tests leaks in
    export XDG_CONFIG_HOME="$BATS_TEST_TMPDIR/config"
    mkdir -p "$XDG_CONFIG_HOME"
    PF="$WS/.txbox-policy.yaml"
}

chk() {
    run --separate-stderr txbox_bin check -C "$WS" "$@"
}

# field NAME: a field of the single JSON object in $output (lists: one a line)
field() {
    printf '%s' "$output" | python3 -c '
import json, sys
v = json.loads(sys.stdin.read()).get(sys.argv[1])
if isinstance(v, list): print("\n".join(v))
elif isinstance(v, bool): print(str(v).lower())
elif v is not None: print(v)' "$1"
}

# refused WORDS: check --json reported a refusal holding WORDS, and so did
# stderr (a "txbox: warning:" line).
refused() {
    field refused | grep -qF -- "$1" || fail "no refusal with '$1' in: $output"
    [[ "$stderr" == *"txbox: warning: "*"$1"* ]] || fail "no warning with '$1' on stderr: $stderr"
}

# verdict WANT RULE CMD: check --json -c CMD gives verdict WANT (and rule RULE, unless -)
verdict() {
    chk --json -c "$3"
    assert_status 0 || return 1
    [ "$(field verdict)" = "$1" ] || fail "'$3': want $1, got: $output"
    [ "$2" = - ] || [ "$(field rule)" = "$2" ] || fail "'$3': want rule $2, got: $output"
}

@test "workspace policy: switching a rule off is refused and reported" {
    cat >"$PF" <<'EOF'
version: 1
rules:
  - id: delete-outside-workspace
    decision: off
  - id: read-only-tools
    decision: off
EOF
    verdict unsafe delete-outside-workspace 'rm -rf ~'
    refused 'rule delete-outside-workspace: refused'
    [ "$(field workspace_policy)" = tighten ] || fail "$output"
    verdict safe - 'ls -la'
    # plain mode: the verdict as before, the warnings on stderr
    chk -c 'rm -rf ~'
    assert_status 122
    [[ "$stderr" == *"cannot switch a rule off"* ]] || fail "$stderr"
}

@test "workspace policy: a rule replaced by id, or made narrower, is refused" {
    cat >"$PF" <<'EOF'
version: 1
rules:
  - id: delete-outside-workspace
    decision: uncertain
    reason: only this exact path
    match: {program: rm, args_any: [/nonexistent-only]}
    examples: {match: ['rm -rf /nonexistent-only'], no_match: ['rm -rf ~']}
EOF
    verdict unsafe delete-outside-workspace 'rm -rf ~'
    refused 'rule delete-outside-workspace: refused: a workspace policy cannot replace'
}

@test "workspace policy: a safe rule is refused; the command keeps its verdict" {
    cat >"$PF" <<'EOF'
version: 1
rules:
  - id: all-fine
    decision: safe
    reason: trust me
    match: {program: [rm, make, curl]}
    examples: {match: ['rm -rf ~', make], no_match: [ls]}
EOF
    verdict unsafe delete-outside-workspace 'rm -rf ~'
    verdict uncertain - 'make -j4'
    refused 'rule all-fine: refused: a workspace policy cannot add a safe rule'
}

@test "workspace policy: loosening lists and program specs are refused" {
    cat >"$PF" <<'EOF'
version: 1
harmless_env: [LD_PRELOAD, 'LD_*', '*']
null_paths: [/etc/passwd, '/etc/*']
scratch_paths: ['/home/*', '/root', '/root/*', /etc, '/etc/*']
programs:
  sudo: {}
  rm: {options_with_value: [-r, -f, -rf]}
EOF
    verdict uncertain - 'LD_PRELOAD=./x.so ls'
    verdict unsafe - 'echo x > /etc/passwd'
    verdict unsafe - 'rm -rf /etc'
    verdict unsafe - 'sudo rm -rf /'
    for k in harmless_env null_paths scratch_paths programs.sudo; do
        refused "$k: refused"
    done
    # a spec of a program the user's policy does not describe is taken,
    # but only in the workspace's layer: it cannot lower a verdict
    ! field refused | grep -q 'programs.rm' || fail "$output"
}

@test "workspace policy: it cannot grant network, trust itself, or declare compensations" {
    cat >"$PF" <<'EOF'
version: 1
workspace_policy: trusted
rules:
  - id: fetch-more
    decision: uncertain
    reason: fetches
    network: true
    compensate: 'rm -rf ~'
    external: true
    match: {program: ls, args_any: [fetchme]}
    examples: {match: ['ls fetchme'], no_match: [ls]}
EOF
    chk --json -c 'ls fetchme'
    assert_status 0
    [ "$(field rule)" = fetch-more ] || fail "the rule itself still applies: $output"
    [ "$(field needs_network)" = false ] || fail "network granted: $output"
    refused 'rule fetch-more: network: refused'
    refused 'rule fetch-more: external/compensate/capture: refused'
    refused 'workspace_policy: refused'
    # and read-only stays read-only
    verdict unsafe delete-outside-workspace 'rm -rf ~'
}

@test "workspace policy: tightening works (unsafe and uncertain rules, more secrets)" {
    cat >"$PF" <<'EOF'
version: 1
rules:
  - id: no-deploys
    decision: unsafe
    reason: deploys are for people
    suggestion: ask the user to deploy
    match: {program: deploy}
    examples: {match: ['./deploy prod'], no_match: [ls]}
  - id: careful-with-ls
    decision: uncertain
    reason: ls of the vault
    match: {program: ls, operands_any: [vault]}
    examples: {match: ['ls vault'], no_match: [ls]}
EOF
    verdict unsafe no-deploys './deploy prod'
    [ "$(field suggestion)" = 'ask the user to deploy' ] || fail "$output"
    verdict uncertain careful-with-ls 'ls vault'
    verdict safe - 'ls src'
    [ -z "$(field refused)" ] || fail "nothing was refused: $output"
    [ -z "$stderr" ] || fail "no warnings: $stderr"
}

@test "workspace policy: an effect rule that holds applies; off or replacing a built-in one is refused" {
    cat >"$PF" <<'EOF'
version: 1
effects:
  - id: git-hooks
    action: off
  - id: workspace-policy-changed
    action: off
  - id: hold-generated
    action: hold
    reason: generated code is reviewed
    suggestion: ask
    match: {paths_written: ['gen/**']}
    examples: {match: [{written: [gen/a.c]}], no_match: [{written: [src/a.c]}]}
EOF
    chk --json -c true
    refused 'effect rule git-hooks: refused'
    refused 'effect rule workspace-policy-changed: refused'
    tx --json -c 'mkdir -p gen && echo x > gen/a.c'
    assert_status 121
    assert_json_field effect_rule hold-generated
    [ ! -e "$WS/gen" ] || fail "applied"
    mkdir -p "$WS/.git/hooks"
    tx --json -c 'echo "#!/bin/sh" > .git/hooks/pre-commit'
    assert_status 121
    assert_json_field effect_rule git-hooks
}

@test "trusted workspace (the user's config.yaml) may loosen; a config inside the workspace may not" {
    cat >"$PF" <<'EOF'
version: 1
rules:
  - id: read-only-tools
    decision: off
EOF
    verdict safe - 'ls -la'
    mkdir -p "$XDG_CONFIG_HOME/txbox"
    printf 'version: 1\ntrusted_workspaces:\n  - %s\n' "$WS" >"$XDG_CONFIG_HOME/txbox/config.yaml"
    verdict uncertain - 'ls -la'
    [ "$(field workspace_policy)" = trusted ] || fail "$output"
    [ -z "$(field refused)" ] || fail "$output"
    # a configuration the workspace holds is the workspace's: ignored
    mkdir -p "$WS/cfg/txbox"
    cp "$XDG_CONFIG_HOME/txbox/config.yaml" "$WS/cfg/txbox/"
    XDG_CONFIG_HOME="$WS/cfg" chk --json -c 'ls -la'
    [ "$(field verdict)" = safe ] || fail "$output"
    refused 'inside the workspace'
    # a broken configuration is an error, not a silent default
    printf 'version: 1\ntrusted: [%s]\n' "$WS" >"$XDG_CONFIG_HOME/txbox/config.yaml"
    chk -c 'ls -la'
    assert_txbox_error
    [[ "$stderr" == *"unknown key 'trusted'"* ]] || fail "$stderr"
}

@test "trusted workspace via --policy (workspace_policy: trusted)" {
    printf 'version: 1\nrules:\n  - id: read-only-tools\n    decision: off\n' >"$PF"
    printf 'version: 1\nworkspace_policy: trusted\n' >"$BATS_TEST_TMPDIR/user.yaml"
    verdict safe - 'ls -la'
    chk --json --policy "$BATS_TEST_TMPDIR/user.yaml" -c 'ls -la'
    [ "$(field verdict)" = uncertain ] || fail "$output"
    [ "$(field workspace_policy)" = trusted ] || fail "$output"
    # --policy naming the workspace's file itself: read once, as the user's
    chk --json --policy "$PF" -c 'ls -la'
    [ "$(field verdict)" = uncertain ] || fail "$output"
    [ -z "$(field refused)" ] && [ -z "$stderr" ] || fail "$output $stderr"
}

# bad_path: check, run and the hook all fail at once on the policy path as
# it is now: one line naming the problem ($1), 125 (hook: 2), no hang.
bad_path() {
    run --separate-stderr timeout 20 "$TXBOX" check -C "$WS" -c ls
    assert_txbox_error || return 1
    [[ "$stderr" == *".txbox-policy.yaml"*"$1"* ]] || fail "check: $stderr"
    run --separate-stderr timeout 20 "$TXBOX" run -C "$WS" -c ls
    assert_txbox_error || return 1
    run --separate-stderr timeout 20 "$TXBOX" check -C "$WS" --json -c ls
    assert_txbox_error json || return 1
    run --separate-stderr bash -c "printf '%s' '{\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"ls\"}}' |
        timeout 20 '$TXBOX' hook claude-code -C '$WS'"
    assert_status 2 || return 1
    [[ "$stderr" == "txbox hook: "*"$1"* ]] || fail "hook: $stderr"
}

@test "a fifo as the workspace policy: error 125 at once (hook: 2), never a hang" {
    mkfifo "$PF"
    bad_path 'a fifo'
}

@test "a symlink as the workspace policy: error, never read through (even to a valid policy)" {
    printf 'version: 1\nrules:\n  - id: delete-outside-workspace\n    decision: off\n' >"$BATS_TEST_TMPDIR/elsewhere.yaml"
    ln -s "$BATS_TEST_TMPDIR/elsewhere.yaml" "$PF"
    bad_path 'a symlink'
    rm "$PF"
    ln -s /dev/zero "$PF"
    bad_path 'a symlink'
}

@test "a directory, a device or a huge file as the workspace policy: error 125" {
    mkdir "$PF"
    bad_path 'a directory'
    rmdir "$PF"
    if is_root; then
        mknod "$PF" c 1 5 # /dev/zero
        bad_path 'character device'
        rm "$PF"
    fi
    { echo 'version: 1'; head -c 1100000 /dev/zero | tr '\0' '#'; } >"$PF"
    bad_path 'larger than'
}

@test "--policy and the user config must be regular files too (a fifo is an error, not a wait)" {
    mkfifo "$BATS_TEST_TMPDIR/p.fifo"
    run --separate-stderr timeout 20 "$TXBOX" check -C "$WS" --policy "$BATS_TEST_TMPDIR/p.fifo" -c ls
    assert_txbox_error
    [[ "$stderr" == *"a fifo"* ]] || fail "$stderr"
    printf 'version: 1\n' >"$PF"
    mkdir -p "$XDG_CONFIG_HOME/txbox"
    mkfifo "$XDG_CONFIG_HOME/txbox/config.yaml"
    run --separate-stderr timeout 20 "$TXBOX" check -C "$WS" -c ls
    assert_txbox_error
    [[ "$stderr" == *"config.yaml"*"a fifo"* ]] || fail "$stderr"
}

# held CMD: txbox run -c CMD is held by workspace-policy-changed, and the
# workspace is as before.
held() {
    snap pre "$WS"
    tx --json -c "$1"
    assert_status 121 || return 1
    assert_json_field effect_rule workspace-policy-changed || return 1
    assert_tree pre "$WS"
}

@test "a run that writes, deletes, renames or links a workspace policy file is held, whatever it writes" {
    held 'printf "version: 1\n" > .txbox-policy.yaml'
    printf 'version: 1\nrules:\n  - id: no-deploys\n    decision: unsafe\n    reason: r\n    suggestion: s\n    match: {program: deploy}\n    examples: {match: [deploy], no_match: [ls]}\n' >"$PF"
    held 'rm .txbox-policy.yaml'
    held 'mv .txbox-policy.yaml old.yaml'
    held 'echo "# more" >> .txbox-policy.yaml'
    held 'rm .txbox-policy.yaml && ln -s /etc/passwd .txbox-policy.yaml'
    held 'mkdir -p sub && cp .txbox-policy.yaml sub/'
    held 'echo x > .TXBOX-Policy.YAML'
    mkdir -p "$WS/sub"
    cp "$PF" "$WS/sub/"
    held 'mv sub sub2'
    held 'rm -rf sub'
    # other files commit as usual
    tx --json -c 'echo x > notes.txt'
    assert_status 0
    assert_outcome committed
}

@test "a held change to the policy file applies only when approved" {
    tx --json -c 'printf "version: 1\n" > .txbox-policy.yaml'
    assert_status 121
    id="$(jget tx)"
    [ ! -e "$PF" ] || fail "applied before approval"
    run --separate-stderr txbox_bin approve -C "$WS" "$id"
    assert_status 0
    [ -f "$PF" ] || fail "not applied after approval"
}

@test "--policy naming a file inside the workspace: a run that changes it is held" {
    mkdir -p "$WS/conf"
    printf 'version: 1\n' >"$WS/conf/my [p]* policy.yaml"
    snap pre "$WS"
    tx --json --policy "$WS/conf/my [p]* policy.yaml" -c 'echo "# more" >> "conf/my [p]* policy.yaml"'
    assert_status 121
    assert_json_field effect_rule workspace-policy-changed-user
    tx --json --policy "$WS/conf/my [p]* policy.yaml" -c 'rm -rf conf'
    assert_status 121
    assert_tree pre "$WS"
    # the path is matched as it is, not as a glob
    tx --json --policy "$WS/conf/my [p]* policy.yaml" -c 'echo x > "conf/my p policy.yaml"'
    assert_status 0
}

@test "a workspace policy full of refused rules: at most 20 warning lines" {
    { echo 'version: 1'; echo 'rules:'; for i in $(seq 300); do printf '  - id: r%d\n    decision: off\n' "$i"; done; } >"$PF"
    chk -c ls
    assert_status 0
    [ "${#stderr_lines[@]}" = 20 ] || fail "${#stderr_lines[@]} lines: $(clip "$stderr")"
    [[ "${stderr_lines[19]}" == *"281 more refusals not shown"* ]] || fail "${stderr_lines[19]}"
}
