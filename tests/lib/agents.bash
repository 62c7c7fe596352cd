# Agents for tests/integration/multi_agents.bats: processes that drive the
# txbox binary on one workspace, each following a plan, and record what
# they saw for tests/lib/agents-check.
#
# A plan is a file, one step a line ("VERB ARGUMENT..."; the rest of the
# line after the verb is the argument, a shell string for the command
# verbs):
#   begin NAME       txbox begin --name NAME (one multi-command transaction
#                    at a time per agent)
#   tx CMD           txbox run --tx: must exit 0 (outcome staged)
#   txfail CMD       txbox run --tx: must fail (outcome rolled_back); it is
#                    not part of the transaction
#   savepoint NAME   txbox savepoint
#   rollback NAME    txbox rollback to savepoint NAME
#   commit           txbox commit --json: committed (0) or conflict (123)
#   abort            txbox abort
#   single CMD       txbox run --json: committed (0) or conflict (123)
#   signal NAME      creates the barrier file $AGENT_SYNC/NAME
#   wait NAME        waits (at most 120 s) for $AGENT_SYNC/NAME
#   sleep S          sleeps S seconds
#
# Records, for every transaction that reached its end, under $AGENT_RES/tx/ID/:
#   kind     multi or single        agent   the agent's name
#   times    b0 b1 c0 c1: before and after begin (for a single run, its
#            start and end), before and after the commit call (a single run:
#            its start and end again), in microseconds
#   out.json the commit's (or run's) JSON result; status its exit status
#   cmds.sh  the commands that are part of it, in order (a failed command
#            and those rolled back to a savepoint are not)
# Anything unexpected (a status other than those above, a txbox error) is
# appended to $AGENT_RES/errors.

# usec: the time now in microseconds (no fork).
agent_usec() {
    local t="$EPOCHREALTIME"
    echo "${t%.*}${t#*.}"
}

agent_err() {
    printf '%s: %s\n' "$AGENT_NAME" "$*" >>"$AGENT_RES/errors"
}

# agent_record ID KIND B0 B1 C0 C1 STATUS JSON CMDS
agent_record() {
    local d="$AGENT_RES/tx/$1"
    mkdir -p "$d"
    echo "$2" >"$d/kind"
    echo "$AGENT_NAME" >"$d/agent"
    echo "$3 $4 $5 $6" >"$d/times"
    echo "$7" >"$d/status"
    printf '%s\n' "$8" >"$d/out.json"
    printf '%s' "$9" >"$d/cmds.sh"
}

# agent_final ARGS...: txbox ARGS, a commit or a single run, whose status
# must be 0 or 123 (conflict); sets agent_run's out, rc, c0, c1 (the times
# around it).
agent_final() {
    rc=0
    c0="$(agent_usec)"
    out="$("$TXBOX" "$@" 2>>"$AGENT_RES/$AGENT_NAME.err")" || rc=$?
    c1="$(agent_usec)"
    [ "$rc" = 0 ] || [ "$rc" = 123 ] || { agent_err "txbox $*: status $rc: $out"; return 1; }
}

# agent_run NAME PLAN: follows PLAN as agent NAME (run it in the background).
agent_run() {
    AGENT_NAME="$1"
    local plan="$2" verb arg tid="" b0 b1 c0 c1 out rc cmds="" n k
    local -A sp=()
    # (the plan on fd 9: txbox and its commands get /dev/null as stdin)
    while IFS= read -r line <&9 || [ -n "$line" ]; do
        [ -n "$line" ] || continue
        verb="${line%% *}"
        arg=""
        [ "$verb" = "$line" ] || arg="${line#* }"
        case "$verb" in
        begin)
            b0="$(agent_usec)"
            tid="$("$TXBOX" begin -C "$WS" --name "$arg" 2>>"$AGENT_RES/$AGENT_NAME.err")" ||
                { agent_err "begin $arg failed"; return 1; }
            b1="$(agent_usec)"
            cmds="" sp=()
            echo "$tid" >"$AGENT_RES/$AGENT_NAME.tid"
            ;;
        tx | txfail)
            rc=0
            out="$("$TXBOX" run -C "$WS" --json --tx "$tid" -c "$arg" 2>>"$AGENT_RES/$AGENT_NAME.err")" || rc=$?
            if [ "$verb" = tx ]; then
                [ "$rc" = 0 ] || { agent_err "run --tx $tid '$arg': status $rc: $out"; return 1; }
                cmds+="$arg"$'\n'
            else
                [ "$rc" != 0 ] && [ "$rc" != 125 ] ||
                    { agent_err "run --tx $tid '$arg' (meant to fail): status $rc: $out"; return 1; }
                case "$out" in *'"outcome":"rolled_back"'*) ;; *)
                    agent_err "run --tx $tid '$arg': not rolled back: $out"; return 1 ;; esac
            fi
            ;;
        savepoint)
            "$TXBOX" savepoint -C "$WS" "$tid" "$arg" 2>>"$AGENT_RES/$AGENT_NAME.err" ||
                { agent_err "savepoint $tid $arg failed"; return 1; }
            sp[$arg]="$cmds"
            ;;
        rollback)
            "$TXBOX" rollback -C "$WS" "$tid" "$arg" 2>>"$AGENT_RES/$AGENT_NAME.err" ||
                { agent_err "rollback $tid $arg failed"; return 1; }
            cmds="${sp[$arg]}"
            ;;
        commit)
            agent_final commit -C "$WS" --json "$tid" || return 1
            agent_record "$tid" multi "$b0" "$b1" "$c0" "$c1" "$rc" "$out" "$cmds"
            tid=""
            ;;
        abort)
            "$TXBOX" abort -C "$WS" "$tid" 2>>"$AGENT_RES/$AGENT_NAME.err" ||
                { agent_err "abort $tid failed"; return 1; }
            tid=""
            ;;
        single)
            agent_final run -C "$WS" --json -c "$arg" || return 1
            n="$(printf '%s' "$out" | "$RUNJSON" get tx)" || { agent_err "run '$arg': no tx in $out"; return 1; }
            agent_record "$n" single "$c0" "$c1" "$c0" "$c1" "$rc" "$out" "$arg"$'\n'
            echo "$n" >"$AGENT_RES/$AGENT_NAME.tid"
            ;;
        signal) : >"$AGENT_SYNC/$arg" ;;
        wait)
            for ((k = 0; k < 1200; k++)); do
                [ -e "$AGENT_SYNC/$arg" ] && break
                sleep 0.1
            done
            [ -e "$AGENT_SYNC/$arg" ] || { agent_err "barrier $arg never came"; return 1; }
            ;;
        sleep) sleep "$arg" ;;
        *) agent_err "bad plan line: $line"; return 1 ;;
        esac
    done 9<"$plan" </dev/null
    : >"$AGENT_RES/$AGENT_NAME.done"
}
