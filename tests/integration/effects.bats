#!/usr/bin/env bats
# Rules on effects (issue 9): policy rules that judge what a transaction
# actually wrote, before its commit point. A violated rule rolls back
# (outcome rejected, status 122, nothing applied) or holds the transaction
# (outcome held, status 121, not applied) for txbox review / approve /
# reject. A held transaction survives recovery; approve commits it through
# the ordinary commit protocol, with the conflict check.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    new_ws
    POL="$BATS_TEST_TMPDIR/policy.yaml"
}

teardown() {
    chmod -R u+rwX "$BATS_TEST_TMPDIR" 2>/dev/null || true # a directory a test left mode 000
}

# txc SUBCOMMAND ARGS...: txbox SUBCOMMAND -C $WS ARGS...
txc() {
    local sub="$1"
    shift
    run --separate-stderr txbox_bin "$sub" -C "$WS" "$@"
}

# A policy (outside the workspace) with one effect rule: policy ID ACTION
# MATCH-YAML MATCH-EXAMPLE NO-MATCH-EXAMPLE
policy() {
    cat >"$POL" <<EOF
version: 1
effects:
  - id: $1
    action: $2
    reason: test rule $1
    suggestion: do not do that ($1)
    match: $3
    examples:
      match: [$4]
      no_match: [$5]
EOF
}

# The held transaction ids, one a line (txbox review --json).
held_ids() {
    txbox_bin review -C "$WS" --json | python3 -c '
import json, sys
for h in json.load(sys.stdin)["held"]: print(h["tx"])'
}

# rejected RULE PATH: the last run was refused by effect rule RULE, PATH
# among its paths, and nothing of it reached the workspace ($1 snapshot pre).
assert_rejected() {
    assert_status 122 && assert_outcome rejected || return 1
    assert_json_field effect_rule "$1"
    assert_json_field effect_action rollback
    [[ "$(jget reason)" == "test rule $1"* ]] || fail "reason: $(jget reason)"
    assert_json_field suggestion "do not do that ($1)"
    jget paths | grep -qxF "$2" || fail "paths lack $2: $(jget paths)"
    assert_tree pre "$WS"
}

@test "protected path (default git-hooks): held, not applied; review lists it and shows why; approve commits it, logged" {
    mkdir -p "$WS/.git/hooks"
    snap pre "$WS"
    txj -c 'printf "#!/bin/sh\necho owned\n" >.git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo ok >notes.txt'
    assert_status 121
    assert_outcome held
    assert_json_field effect_rule git-hooks
    assert_json_field effect_action hold
    jget paths | grep -qxF .git/hooks/pre-commit || fail "paths: $(jget paths)"
    [ -n "$(jget suggestion)" ] || fail "no suggestion: $output"
    local id
    id="$(jget tx)"
    assert_tree pre "$WS"
    # review: listed, then the one transaction with its write set
    [ "$(held_ids)" = "$id" ] || fail "review lists: $(held_ids)"
    txc review "$id" --json
    assert_status 0
    assert_json_field effect_rule git-hooks
    assert_json_field command 'printf "#!/bin/sh\necho owned\n" >.git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo ok >notes.txt'
    [ "$(jget changes.added | sort | tr '\n' ' ')" = ".git/hooks/pre-commit notes.txt " ] ||
        fail "review changes: $(jget changes)"
    txc review "$id"
    assert_status 0
    [[ "$output" == *"held by effect rule git-hooks"* && "$output" == *"A .git/hooks/pre-commit"* ]] ||
        fail "review text: $output"
    # the log records it as held
    run --separate-stderr txbox_bin show -C "$WS" --json "$id"
    assert_json_field outcome held
    # approve: committed, exactly
    txc approve --json "$id"
    assert_status 0
    assert_json_field outcome committed
    [ "$(cat "$WS/notes.txt")" = ok ] && [ -x "$WS/.git/hooks/pre-commit" ] ||
        fail "approve did not apply the changes"
    [ -z "$(held_ids)" ] || fail "still listed as held: $(held_ids)"
    run --separate-stderr txbox_bin show -C "$WS" --json "$id"
    assert_json_field outcome committed
    # and it is an ordinary commit: undo reverts it
    run --separate-stderr txbox_bin undo -C "$WS" "$id"
    assert_status 0
    [ ! -e "$WS/notes.txt" ] && [ ! -e "$WS/.git/hooks/pre-commit" ] || fail "undo of the approved transaction"
    # approving again is an error
    txc approve "$id"
    assert_txbox_error
}

@test "reject drops a held transaction: nothing applied, logged as rejected" {
    snap pre "$WS"
    txj -c 'mkdir -p deploy && printf -- "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY-----\n" >deploy/key && echo x >>README'
    assert_status 121
    assert_outcome held
    assert_json_field effect_rule secret-written
    jget paths | grep -qxF deploy/key || fail "paths: $(jget paths)"
    local id
    id="$(jget tx)"
    txc reject --json "$id"
    assert_status 0
    assert_json_field outcome rejected
    assert_tree pre "$WS"
    [ -z "$(held_ids)" ] || fail "still held: $(held_ids)"
    [ ! -e "$WS/.txbox/tx/$id/upper" ] || fail "the rejected changes are still kept"
    run --separate-stderr txbox_bin show -C "$WS" --json "$id"
    assert_json_field outcome rejected
    txc approve "$id"
    assert_txbox_error
}

@test "secret rule: a key already in a modified file is not 'written'; a new one is" {
    printf -- '-----BEGIN RSA PRIVATE KEY-----\nMIIEow==\n-----END RSA PRIVATE KEY-----\n' >"$WS/fixture.pem"
    txj -c 'echo "# test fixture" >>fixture.pem'
    assert_status 0
    assert_outcome committed
    txj -c 'printf "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n" >>README'
    assert_status 121
    assert_outcome held
    assert_json_field effect_rule secret-written
}

@test "rules read every file of a new tree: a key deep in new directories, one under a directory left unreadable" {
    # The scan records a new tree once; the rules read its files from that
    # record (or walk it, where its owner could not search a directory).
    txj -c 'mkdir -p n/a/b && : >n/a/empty && printf "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n" >n/a/b/k.ini'
    assert_status 121
    assert_outcome held
    assert_json_field effect_rule secret-written
    jget changes.added | grep -qx 'n/a/b/k.ini' || fail "n/a/b/k.ini not in added: $(jget changes.added)"
    [ "$(jget changes.added | tr '\n' ' ')" = "n/ n/a/ n/a/b/ n/a/b/k.ini n/a/empty " ] ||
        [ "$(jget changes.added | tr '\n' ' ')" = "n/ n/a/ n/a/empty n/a/b/ n/a/b/k.ini " ] ||
        fail "added: $(jget changes.added)"
    txj -c 'mkdir -p m/a && printf "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n" >m/a/k.ini && chmod 000 m/a'
    assert_status 121
    assert_outcome held
    assert_json_field effect_rule secret-written
    txj -c 'mkdir -p q/a && printf "nothing secret\n" >q/a/k.ini && chmod 000 q/a'
    assert_status 0
    assert_outcome committed
    # a tree deeper than a path can name (PATH_MAX): walked by descriptors
    local d=dddddddddddddddddddddddddddddddddddddddddddddddddd
    txj -c "mkdir long && cd long && for i in \$(seq 1 90); do mkdir $d && cd $d; done &&
            printf 'aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n' >k.ini"
    assert_status 121
    assert_outcome held
    assert_json_field effect_rule secret-written
}

@test "content rules in a modified file judge only its changed lines, and find every new match there" {
    # A long file with a key far from the edits: unchanged text never counts.
    { printf 'line %s\n' $(seq 1 400); printf 'aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n';
      printf 'more %s\n' $(seq 1 400); } >"$WS/big.txt"
    txj -c 'sed -i "3s/line 3/line three/" big.txt && echo tail >>big.txt'
    assert_status 0
    assert_outcome committed
    # a key inserted in the middle
    txj -c 'sed -i "200a aws_secret = AKIAZZZZZZZZZZZZZZZZ" big.txt'
    assert_status 121
    assert_outcome held
    txc reject "$(jget tx)"
    assert_status 0
    # a key on an edited line (the line held another one)
    printf 'x\nkey = AKIAAAAAAAAAAAAAAAAA\ny\n' >"$WS/one.txt"
    txj -c 'sed -i "s/AKIAAAAAAAAAAAAAAAAA/AKIABBBBBBBBBBBBBBBB/" one.txt'
    assert_status 121
    assert_outcome held
    txc reject "$(jget tx)"
    # a key made by a deletion alone: the two halves joined
    printf 'x\nkey = AKIACCCC-cut-CCCCCCCCCCCC\ny\n' >"$WS/two.txt"
    txj -c 'sed -i "s/-cut-//" two.txt'
    assert_status 121
    assert_outcome held
    txc reject "$(jget tx)"
}

@test "a content rule with a newline in a pattern reads the whole file (a match across lines, one of them old)" {
    cat >"$POL" <<'EOF'
version: 1
effects:
  - id: two-lines
    action: rollback
    reason: test rule two-lines
    suggestion: do not do that (two-lines)
    match: {content_any: ["BEGIN\nEND"]}
    examples:
      match: [{written: [a], content: "x\nBEGIN\nEND\n"}]
      no_match: [{written: [a], content: "BEGIN END"}]
EOF
    printf 'a\nBEGIN\n' >"$WS/m.txt"
    snap pre "$WS"
    txj --policy "$POL" -c 'echo END >>m.txt'
    assert_rejected two-lines m.txt
}

@test "rollback rule on protected paths (--policy): rejected with effect_rule, reason, suggestion, paths; status 122; logged" {
    policy lockfiles rollback "{paths_any: ['*.lock', package-lock.json]}" \
        "{written: [sub/Cargo.lock]}" "{written: [src/lock.c]}"
    snap pre "$WS"
    txj --policy "$POL" -c 'mkdir -p sub && echo x >sub/Cargo.lock && echo y >other.txt'
    assert_rejected lockfiles sub/Cargo.lock
    local id
    id="$(jget tx)"
    run --separate-stderr txbox_bin show -C "$WS" --json "$id"
    assert_json_field outcome rejected
    [ -z "$(held_ids)" ] || fail "a rejected transaction is listed as held"
    # the summary line names the rule
    tx --policy "$POL" -c 'rm -f package-lock.json; echo {} >package-lock.json'
    assert_status 122
    [[ "$stderr" == *"effect rule lockfiles"* ]] || fail "status line: $stderr"
    # a write elsewhere commits
    txj --policy "$POL" -c 'echo z >src/lock.c'
    assert_status 0
    assert_outcome committed
}

@test "limit: files deleted" {
    policy few-deletions rollback "{max_files_deleted: 3}" "{deleted: 4}" "{deleted: 3}"
    snap pre "$WS"
    txj --policy "$POL" -c 'rm -rf deep docs src'
    assert_rejected few-deletions docs/sub/b.txt
    [[ "$(jget reason)" == *"6 files deleted (limit 3)"* ]] || fail "reason: $(jget reason)"
    txj --policy "$POL" -c 'rm -rf docs deep'
    assert_status 0
    assert_outcome committed
}

@test "default mass-deletion: over 1000 files held, unless they are regenerable caches" {
    mkdir -p "$WS/data" "$WS/pkg/__pycache__" "$WS/web/node_modules/dep"
    (cd "$WS" && for i in $(seq 1 1001); do : >"data/f$i" >"pkg/__pycache__/m$i.pyc" >"web/node_modules/dep/f$i.js"; done)
    txj -c 'find . -name __pycache__ -prune -exec rm -rf {} + && rm -rf web/node_modules'
    assert_status 0
    assert_outcome committed
    [ ! -e "$WS/pkg/__pycache__" ] && [ ! -e "$WS/web/node_modules" ] || fail "caches not deleted"
    snap pre "$WS"
    txj -c 'rm -rf data'
    assert_status 121
    assert_outcome held
    assert_json_field effect_rule mass-deletion
    [[ "$(jget reason)" == *"1001 files deleted (limit 1000)"* ]] || fail "reason: $(jget reason)"
    assert_tree pre "$WS"
}

@test "limit: bytes written" {
    policy small-writes rollback "{max_bytes_written: 1000}" "{bytes: 1001}" "{bytes: 1000}"
    snap pre "$WS"
    txj --policy "$POL" -c 'head -c 600 /dev/zero >a.bin; head -c 600 /dev/zero >b.bin'
    assert_rejected small-writes a.bin
    [[ "$(jget reason)" == *"1200 bytes written (limit 1000)"* ]] || fail "reason: $(jget reason)"
    txj --policy "$POL" -c 'head -c 900 /dev/zero >a.bin'
    assert_status 0
    assert_outcome committed
}

@test "limit: binary files added" {
    policy no-binaries rollback "{max_binary_added: 0}" "{written: [a.o], binary: true}" "{written: [a.c]}"
    snap pre "$WS"
    txj --policy "$POL" -c 'mkdir -p out && printf "ELF\000\001\002" >out/a.o && echo text >b.txt'
    assert_rejected no-binaries out/a.o
    txj --policy "$POL" -c 'echo text >b.txt && printf "more\000" >>medium.bin'
    assert_status 0
    assert_outcome committed
}

@test "limit: files made executable" {
    policy no-exec rollback "{max_made_executable: 0}" "{written: [run.sh], executable: true}" "{written: [run.sh]}"
    snap pre "$WS"
    txj --policy "$POL" -c 'chmod +x README'
    assert_rejected no-exec README
    snap pre "$WS"
    txj --policy "$POL" -c 'echo "echo new" >new.sh && chmod 755 new.sh'
    assert_rejected no-exec new.sh
    # an executable that stays executable is not "made" executable
    txj --policy "$POL" -c 'echo "echo more" >>exec.sh && chmod 644 README'
    assert_status 0
    assert_outcome committed
}

@test "approve after a conflicting commit: 123, it stays held; a non-overlapping one commits" {
    mkdir -p "$WS/.git/hooks"
    txj -c 'echo one >.git/hooks/post-merge && echo held >docs/a.txt'
    assert_status 121
    local id
    id="$(jget tx)"
    txj -c 'echo later >docs/a.txt'
    assert_status 0
    assert_outcome committed
    txc approve --json "$id"
    assert_status 123
    assert_json_field outcome conflict
    assert_json_field conflict_path docs/a.txt
    [ "$(cat "$WS/docs/a.txt")" = later ] && [ ! -e "$WS/.git/hooks/post-merge" ] ||
        fail "a conflicting approve changed the workspace"
    [ "$(held_ids)" = "$id" ] || fail "no longer held after the conflict: $(held_ids)"
    txc reject "$id"
    assert_status 0
    # non-overlapping: another commit in between does not stop it
    txj -c 'echo two >.git/hooks/post-merge && echo held2 >README'
    assert_status 121
    id="$(jget tx)"
    txj -c 'echo other >src/main.c'
    assert_status 0
    txc approve "$id"
    assert_status 0
    [ "$(cat "$WS/README")" = held2 ] && [ "$(cat "$WS/src/main.c")" = other ] || fail "approve lost a change"
}

@test "a held transaction survives txbox recover, gc and a restart; approve still works" {
    mkdir -p "$WS/.git/hooks"
    txj -c 'echo h >.git/hooks/pre-push && echo y >kept.txt'
    assert_status 121
    local id
    id="$(jget tx)"
    txc recover --json
    assert_status 0
    run --separate-stderr txbox_bin gc -C "$WS" --keep 0 --max-bytes 0
    assert_status 0
    [ "$(held_ids)" = "$id" ] || fail "recover/gc dropped the held transaction: $(held_ids)"
    [ ! -e "$WS/kept.txt" ] || fail "recover applied a held transaction"
    txc approve "$id"
    assert_status 0
    [ "$(cat "$WS/kept.txt")" = y ] && [ "$(cat "$WS/.git/hooks/pre-push")" = h ] || fail "approve after recover"
}

@test "multi-command transaction: its commit is held, then approved; a rollback rule rejects one" {
    mkdir -p "$WS/.git/hooks"
    snap pre "$WS"
    run --separate-stderr txbox_bin begin -C "$WS"
    local tid="$output"
    run --separate-stderr txbox_bin run -C "$WS" --tx "$tid" -c 'echo a >a.txt'
    assert_status 0
    run --separate-stderr txbox_bin run -C "$WS" --tx "$tid" -c 'echo h >.git/hooks/pre-commit'
    assert_status 0
    txc commit --json "$tid"
    assert_status 121
    assert_json_field outcome held
    assert_json_field effect_rule git-hooks
    assert_tree pre "$WS"
    [ "$(held_ids)" = "$tid" ] || fail "review: $(held_ids)"
    txc status --json
    [[ "$output" != *"\"tx\":\"$tid\""* ]] || fail "a held transaction is still open: $output"
    txc approve "$tid"
    assert_status 0
    [ "$(cat "$WS/a.txt")" = a ] && [ "$(cat "$WS/.git/hooks/pre-commit")" = h ] || fail "approve of a multi tx"
    # rollback rule: rejected, nothing applied, the transaction ends
    policy no-lock rollback "{paths_any: ['*.lock']}" "{written: [x.lock]}" "{written: [x]}"
    snap pre "$WS"
    run --separate-stderr txbox_bin begin -C "$WS"
    tid="$output"
    run --separate-stderr txbox_bin run -C "$WS" --tx "$tid" -c 'echo l >y.lock'
    txc commit --json --policy "$POL" "$tid"
    assert_status 122
    assert_json_field outcome rejected
    assert_json_field effect_rule no-lock
    assert_tree pre "$WS"
    txc commit "$tid"
    assert_txbox_error
}

@test "policy: action off switches a default effect rule off; a failing example refuses the policy" {
    mkdir -p "$WS/.git/hooks"
    cat >"$POL" <<'EOF'
version: 1
effects:
  - id: git-hooks
    action: off
EOF
    txj --policy "$POL" -c 'echo h >.git/hooks/pre-commit'
    assert_status 0
    assert_outcome committed
    policy bad rollback "{paths_any: ['*.lock']}" "{written: [x.txt]}" "{written: [y]}"
    tx --policy "$POL" -c 'true'
    assert_txbox_error
    [[ "$stderr" == *"effect rule bad"*"must match but does not"* ]] || fail "message: $stderr"
    policy bad2 hold "{paths_any: ['*.lock'], frobnicate: 1}" "{written: [x.lock]}" "{written: [y]}"
    tx --policy "$POL" -c 'true'
    assert_txbox_error
    [[ "$stderr" == *"unknown key 'frobnicate'"* ]] || fail "message: $stderr"
}

@test "git config: an ordinary setting commits; one that runs a program is held" {
    # a repository as git makes it (a .git without HEAD is none: git looks further up)
    git init -q "$WS"
    txj -c 'printf "[core]\n\tbare = false\n\tautocrlf = false\n[demo]\n\trun = yes\n" >.git/config'
    assert_status 0
    assert_outcome committed
    txj -c 'printf "[core]\n\thooksPath = /tmp/hooks\n" >>.git/config'
    assert_status 121
    assert_outcome held
    assert_json_field effect_rule git-config-exec
}

@test "approve cut short by a crash: before the commit point it stays held; after it, recovery completes the commit" {
    mkdir -p "$WS/.git/hooks"
    txj -c 'echo c >.git/hooks/pre-rebase && echo c >crash.txt'
    assert_status 121
    local id
    id="$(jget tx)"
    snap pre "$WS"
    # the first rename of the commit protocol makes the journal durable: the commit point
    run --separate-stderr env TXBOX_FAULT=rename:1:kill "$TXBOX" approve -C "$WS" "$id"
    [ "$status" = 137 ] || fail "not killed at the commit point: status $status, $stderr"
    txc recover
    assert_status 0
    assert_tree pre "$WS"
    [ "$(held_ids)" = "$id" ] || fail "not held after a crash before the commit point: $(held_ids)"
    # killed after the commit point: recovery rolls it forward
    run --separate-stderr env TXBOX_FAULT=rename:2:kill "$TXBOX" approve -C "$WS" "$id"
    [ "$status" = 137 ] || fail "not killed after the commit point: status $status, $stderr"
    txc recover --json
    assert_status 0
    [ "$(cat "$WS/crash.txt")" = c ] && [ "$(cat "$WS/.git/hooks/pre-rebase")" = c ] ||
        fail "recovery did not complete the approved commit"
    [ -z "$(held_ids)" ] || fail "still held after the commit: $(held_ids)"
    run --separate-stderr txbox_bin show -C "$WS" --json "$id"
    assert_json_field outcome committed
}

@test "the copy backend has no scanned write set: rules on effects are not enforced there, and protections says so" {
    txc run --json -c 'mkdir -p .git/hooks && echo x > .git/hooks/pre-commit'
    assert_status 121
    [ "$(pj 'd["protections"]["effect_rules"]')" = "enforced at commit" ] || fail "$output"
    [ ! -e "$WS/.git/hooks/pre-commit" ] || fail "applied though held"
    txc run --json --backend copy -c 'mkdir -p .git/hooks && echo x > .git/hooks/pre-commit'
    assert_status 0
    [ "$(pj 'd["protections"]["effect_rules"]')" = "not enforced (copy backend)" ] || fail "$output"
    [ -e "$WS/.git/hooks/pre-commit" ] || fail "the copy backend's commit is missing"
}
