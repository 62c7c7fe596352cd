#!/usr/bin/env bats
# Many agents, one workspace (issue 9): 8 agents, each a process driving
# txbox (multi-command transactions through begin / run --tx / commit, and
# single runs), on one workspace at once. Every committed change is in the
# final workspace, every conflict is reported (outcome conflict, status 123,
# conflict_paths exactly the overlapping paths, the changes kept in
# .txbox/tx/ID/upper), nothing is lost: the final tree equals, byte for
# byte, the replay of the committed transactions in the order of their
# generations (tests/lib/agents-check). `txbox status` shows the open
# transactions while they run, and the audit log agrees with what the
# agents saw.
#
# The first test orders the steps by barrier files, so that given
# transactions certainly overlap; the second draws its plans at random
# (seed printed; TXBOX_AGENTS_SEED=N repeats one) and derives what it
# asserts from what the agents recorded.

bats_require_minimum_version 1.5.0
load ../lib/common
load ../lib/agents

AGENTS_CHECK="$TESTS_LIB/agents-check"

setup() {
    new_ws
    (
        set -e
        cd "$WS"
        mkdir shared
        for f in x y z v w log1 log2 p0 p1 p2 p3 p4 p5; do printf 'pre %s\n' "$f" >"shared/$f"; done
        for i in 1 2 3 4 5 6 7 8; do mkdir "a$i" && printf 'pre\n' >"a$i/r"; done
    ) || fail "cannot prepare the workspace"
    AGENT_RES="$BATS_TEST_TMPDIR/res"
    AGENT_SYNC="$BATS_TEST_TMPDIR/sync"
    PLANS="$BATS_TEST_TMPDIR/plans"
    mkdir -p "$AGENT_RES" "$AGENT_SYNC" "$PLANS"
    PRE="$BATS_TEST_TMPDIR/pre"
    cp -a "$WS" "$PRE"
    # No .txbox/ yet: the agents' first commands create it at once.
    APIDS=()
}

teardown() {
    # agents still running after a failure: stop them (they are ours, by pid)
    local p
    for p in "${APIDS[@]}"; do
        kill "$p" 2>/dev/null || true
    done
}

# start_agents NAME...: each agent follows $PLANS/NAME in the background.
start_agents() {
    local a
    for a in "$@"; do
        agent_run "$a" "$PLANS/$a" </dev/null >/dev/null 2>>"$AGENT_RES/$a.err" &
        APIDS+=($!)
    done
}

# wait_agents: waits for them; fails with what they reported if any failed.
wait_agents() {
    local p bad=0
    for p in "${APIDS[@]}"; do
        wait "$p" || bad=1
    done
    APIDS=()
    if [ "$bad" = 1 ] || [ -s "$AGENT_RES/errors" ]; then
        fail "an agent failed:" "$(cat "$AGENT_RES/errors" 2>/dev/null)" \
            "$(tail -n 3 "$AGENT_RES"/*.err 2>/dev/null)"
        return 1
    fi
}

# wait_file NAME...: waits (at most 120 s) for barrier files.
wait_file() {
    local f k
    for f in "$@"; do
        for ((k = 0; k < 1200; k++)); do
            [ -e "$AGENT_SYNC/$f" ] && break
            [ -s "$AGENT_RES/errors" ] && fail "an agent failed:" "$(cat "$AGENT_RES/errors")" && return 1
            sleep 0.1
        done
        [ -e "$AGENT_SYNC/$f" ] || { fail "barrier $f never came" "$(cat "$AGENT_RES/errors" 2>/dev/null)"; return 1; }
    done
}

# check_all [EXPECT]: agents-check on the result, with the audit log.
check_all() {
    run --separate-stderr txbox_bin log -C "$WS" --json
    assert_status 0 || return 1
    printf '%s' "$output" >"$BATS_TEST_TMPDIR/log.json"
    run "$AGENTS_CHECK" "$WS" "$PRE" "$AGENT_RES" "$BATS_TEST_TMPDIR/log.json" ${1:+--expect "$1"}
    echo "# $(tail -n 1 <<<"$output")" >&3
    # (explicit returns: callers use check_all || ..., where set -e is off)
    [ "$status" = 0 ] || { fail "$output"; return 1; }
    # and nothing is left open
    run --separate-stderr txbox_bin status -C "$WS" --json
    assert_status 0 || return 1
    [ "$(jget transactions)" = "" ] || { fail "transactions still open: $output"; return 1; }
}

# w PATH TEXT: a command writing TEXT as PATH's content; a PATH TEXT: appending.
w() { printf "printf '%%s\\\\n' %s >%s" "$2" "$1"; }
a() { printf "printf '%%s\\\\n' %s >>%s" "$2" "$1"; }

@test "8 agents: planned overlaps conflict with exactly their paths, the rest commits, nothing is lost" {
    # a1, a2, a3, a4: multi-command transactions; a5..a8: single runs.
    # a1 and a2 both change shared/x and shared/log1: a1 commits first, a2
    # is the conflict (its shared/y and a2/own are not applied). a3 changes
    # README and docs/a.txt; the single run a5 changes README and deletes
    # docs/a.txt after a3 began and commits before a3's commit: a3 is the
    # conflict. a4, a6, a7 and a8 change paths nobody else changes, a8
    # shared/y only after a2 failed to: all commit. a4 and a7 both delete
    # shared/v: the same end whoever is first, no conflict.
    cat >"$PLANS/a1" <<EOF
begin a1
tx $(w shared/x a1); $(a shared/log1 a1)
tx $(w a1/one a1)
savepoint s
tx $(w a1/gone a1); rm a1/r
rollback s
txfail echo junk >a1/junk; rm shared/y; exit 3
tx $(a a1/one a1-2)
signal a1.staged
wait go.a1
commit
signal a1.done
EOF
    cat >"$PLANS/a2" <<EOF
begin a2
tx $(w shared/x a2)
tx $(a shared/log1 a2); $(w shared/y a2)
tx $(w a2/own a2)
signal a2.staged
wait a1.done
commit
signal a2.done
EOF
    cat >"$PLANS/a3" <<EOF
begin a3
tx $(a README a3); $(w a3/f a3)
tx $(a docs/a.txt a3)
signal a3.staged
wait a5.done
wait go.a3
commit
EOF
    cat >"$PLANS/a4" <<EOF
begin a4
tx $(w a4/f a4); $(w shared/z a4)
tx rm -f shared/w shared/v
signal a4.staged
wait go.a4
commit
EOF
    cat >"$PLANS/a5" <<EOF
wait a3.staged
single $(a README a5); rm docs/a.txt; $(w a5/f a5)
signal a5.done
EOF
    cat >"$PLANS/a6" <<EOF
wait go.singles
single $(w a6/f a6); $(a shared/log2 a6)
EOF
    cat >"$PLANS/a7" <<EOF
wait go.singles
single $(w a7/f a7); rm -f shared/v
EOF
    cat >"$PLANS/a8" <<EOF
wait a2.done
single $(w shared/y a8); $(w a8/f a8)
EOF
    start_agents a1 a2 a3 a4 a5 a6 a7 a8
    wait_file a1.staged a2.staged a3.staged a4.staged a5.done
    # All four multi-command transactions are open (and nothing of them is
    # applied yet): status lists exactly them.
    local i t want="" got
    for i in 1 2 3 4; do
        t="$(cat "$AGENT_RES/a$i.tid")"
        want+="$t a$i $((i == 1 ? 0 : i == 2 ? 3 : 2))"$'\n'
    done
    run --separate-stderr txbox_bin status -C "$WS" --json
    assert_status 0
    # (a1's count after its rollback is not asserted: printed as 0)
    got="$(printf '%s' "$output" | python3 -c 'import json,sys
for t in json.load(sys.stdin)["transactions"]:
    print(t["tx"], t["name"], 0 if t["name"] == "a1" else t["commands"])' | sort)"
    [ "$got" = "$(sort <<<"$want" | sed '/^$/d')" ] || fail "status lists (tx, name, commands):" "$got" "expected:" "$want"
    run --separate-stderr txbox_bin status -C "$WS"
    for i in 1 2 3 4; do
        [[ "$output" == *"tx $(cat "$AGENT_RES/a$i.tid")  a$i "* ]] || fail "status (text) lacks a$i: $output"
    done
    [ "$(cat "$WS/shared/x")" = "pre x" ] && [ ! -e "$WS/a1/one" ] || fail "a staged change is already in the workspace"
    # a1 and a4 commit while a6 and a7 run; a3 after a5 committed.
    : >"$AGENT_SYNC/go.singles"
    : >"$AGENT_SYNC/go.a1"
    : >"$AGENT_SYNC/go.a4"
    : >"$AGENT_SYNC/go.a3"
    wait_agents
    cat >"$BATS_TEST_TMPDIR/expect" <<EOF
@a1 committed
@a2 conflict shared/log1 shared/x
@a3 conflict README docs/a.txt
@a4 committed
@a5 committed
@a6 committed
@a7 committed
@a8 committed
EOF
    check_all "$BATS_TEST_TMPDIR/expect"
    # spot checks of the outcome, beside the replay
    [ "$(cat "$WS/shared/x")" = a1 ] && [ "$(cat "$WS/shared/y")" = a8 ] &&
        [ "$(cat "$WS/a1/one")" = "$(printf 'a1\na1-2')" ] && [ ! -e "$WS/a1/gone" ] && [ -e "$WS/a1/r" ] &&
        [ ! -e "$WS/a1/junk" ] && [ ! -e "$WS/a2/own" ] && [ ! -e "$WS/a3/f" ] && [ ! -e "$WS/shared/w" ] && [ ! -e "$WS/shared/v" ] ||
        fail "the workspace: $(cd "$WS" && head shared/x shared/y a1/* a2/* a3/* 2>&1)"
    [ "$(tail -n 1 "$WS/README")" = a5 ] || fail "README: $(cat "$WS/README")"
    # the conflicts' changes are kept aside, as the status line says
    local t2 t3
    t2="$(cat "$AGENT_RES/a2.tid")" t3="$(cat "$AGENT_RES/a3.tid")"
    [ "$(cat "$WS/.txbox/tx/$t2/upper/a2/own")" = a2 ] && [ "$(cat "$WS/.txbox/tx/$t2/upper/shared/y")" = a2 ] &&
        [ "$(tail -n 1 "$WS/.txbox/tx/$t3/upper/README")" = a3 ] || fail "a conflict's changes are not kept"
}

@test "a command that changed nothing when it ran is no change at commit, even if the path changed since" {
    # a1's rm -f shared/new finds nothing; then a2's single run creates
    # shared/new and commits; a1 did not change shared/new, so both commit
    # and a2's file stays (first committer wins on the paths written; a
    # blind replay of the commands in commit order would delete it).
    cat >"$PLANS/a1" <<EOF
begin a1
tx rm -f shared/new; $(w a1/r a1)
signal a1.ran
wait a2.done
commit
EOF
    cat >"$PLANS/a2" <<EOF
wait a1.ran
single $(w shared/new a2)
signal a2.done
EOF
    start_agents a1 a2
    wait_agents
    cat >"$BATS_TEST_TMPDIR/expect" <<EOF
@a1 committed
@a2 committed
EOF
    check_all "$BATS_TEST_TMPDIR/expect"
    [ "$(cat "$WS/shared/new")" = a2 ] && [ "$(cat "$WS/a1/r")" = a1 ] ||
        fail "the workspace: $(cd "$WS" && head shared/new a1/r 2>&1)"
}

# random_plan AGENT ROUNDS: a random plan (bash's RANDOM, seeded by the
# caller) for agent number AGENT: per round a multi-command transaction
# (1 to 3 commands, sometimes a failing one, sometimes a savepoint and a
# rollback) or a single run; each command changes 1 or 2 paths drawn from
# shared files every agent uses, new shared names and the agent's own.
random_cmd() {
    local ag="$1" tag="$2" k n p c=""
    n=$((1 + RANDOM % 2))
    for ((k = 0; k < n; k++)); do
        case $((RANDOM % 4)) in
        0) p="shared/n$((RANDOM % 3))" ;;
        1) p="a$ag/r$((RANDOM % 2))" ;;
        *) p="shared/p$((RANDOM % 6))" ;;
        esac
        case $((RANDOM % 5)) in
        0) c+="rm -f $p; " ;;
        1 | 2) c+="$(w "$p" "$tag.$k"); " ;;
        *) c+="$(a "$p" "$tag.$k"); " ;;
        esac
    done
    printf '%s' "${c%; }"
}

random_plan() {
    local ag="$1" rounds="$2" r k n
    for ((r = 0; r < rounds; r++)); do
        echo "sleep 0.$((RANDOM % 6))"
        if ((RANDOM % 3)); then
            echo "begin r$ag-$r"
            n=$((1 + RANDOM % 3))
            for ((k = 0; k < n; k++)); do
                echo "tx $(random_cmd "$ag" "a$ag.$r.$k")"
                ((RANDOM % 4)) || echo "txfail $(random_cmd "$ag" "x$ag.$r.$k"); exit 7"
                ((RANDOM % 5)) || echo "sleep 0.$((RANDOM % 8))"
            done
            if ((RANDOM % 3 == 0)); then
                echo "savepoint s"
                echo "tx $(random_cmd "$ag" "s$ag.$r")"
                echo "rollback s"
            fi
            echo "signal r$ag-$r.staged"
            echo "commit"
        else
            echo "single $(random_cmd "$ag" "a$ag.$r")"
        fi
    done
}

@test "8 agents at random: outcomes, conflict paths, the final tree and the log agree (seeded)" {
    local seed="${TXBOX_AGENTS_SEED:-$(($(date +%s) % 100000))}" i
    echo "# seed $seed (TXBOX_AGENTS_SEED=$seed repeats it)" >&3
    RANDOM="$seed"
    for i in 1 2 3 4 5 6 7 8; do
        random_plan "$i" 2 >"$PLANS/a$i"
    done
    start_agents a1 a2 a3 a4 a5 a6 a7 a8
    # While they run, status lists only transactions an agent began, each
    # at most once.
    local k seen=0
    for ((k = 0; k < 6; k++)); do
        run --separate-stderr txbox_bin status -C "$WS" --json
        assert_status 0 || break
        local ids
        ids="$(printf '%s' "$output" | python3 -c 'import json,sys
for t in json.load(sys.stdin)["transactions"]: print(t["tx"])')"
        [ -n "$ids" ] && seen=$((seen + 1)) && printf '%s\n' "$ids" >>"$BATS_TEST_TMPDIR/seen"
        [ "$(sort <<<"$ids" | uniq -d)" = "" ] || fail "status lists a transaction twice: $output"
        sleep 0.5
    done
    wait_agents || fail "seed $seed" "plans:" "$(head -n 50 "$PLANS"/a*)"
    # every transaction status listed was one an agent began and then committed
    local t
    for t in $(sort -u "$BATS_TEST_TMPDIR/seen" 2>/dev/null); do
        [ "$(cat "$AGENT_RES/tx/$t/kind" 2>/dev/null)" = multi ] ||
            fail "status listed tx $t, which is no agent's multi-command transaction"
    done
    echo "# status showed open transactions $seen times of 6" >&3
    check_all || fail "seed $seed" "plans:" "$(head -n 50 "$PLANS"/a*)"
}
