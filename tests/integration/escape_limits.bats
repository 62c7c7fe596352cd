#!/usr/bin/env bats
# Escape attempts, resources and lifetime: a fork bomb, a memory bomb, disk
# fillers (in the workspace, in one big file, in the RAM-backed /tmp and
# /dev/shm), a CPU hog, an output flood, a background process that outlives
# the command to write after the commit, and processes that change their
# session or process group to escape the kill.

bats_require_minimum_version 1.5.0
load ../lib/common
load ../lib/escape_helpers

setup_file() { esc_setup_file; }
teardown_file() { esc_teardown_file; }
setup() { esc_setup; }
teardown() {
    # whatever survived (an escape): do not let it run on
    pkill -KILL -f "$ESC_MARK" 2>/dev/null
    esc_teardown
}

# last_number WORD: the number after the last "WORD N" line of the attempt's output.
last_number() {
    grep -o "^$1 [0-9]*" <<<"$ATT_OUT" | tail -n1 | cut -d' ' -f2
}

# Processes on the host whose command line holds the attempt's mark.
marked_procs() {
    pgrep -f -- "$ESC_MARK" | grep -vx "$$" || true
}

@test "a fork bomb (--pids 128 --timeout 6): never more than 128 processes, all gone afterwards, the host unharmed" {
    local max=0 n t0 t1 samples="$BATS_TEST_TMPDIR/samples"
    (
        while :; do
            pgrep -c -f "forkbomb $ESC_MARK" || true
            sleep 0.1
        done
    ) >"$samples" 2>/dev/null 3>&- &
    local sampler=$!
    t0="$(date +%s)"
    attempt --pids 128 --timeout 6 <<'EOF'
"$PROBE" forkbomb "$ESC_MARK"
exit 3
EOF
    t1="$(date +%s)"
    kill "$sampler"
    wait "$sampler" 2>/dev/null || true
    while read -r n; do [ "$n" -gt "$max" ] && max="$n"; done <"$samples"
    echo "# most bomb processes seen at once: $max" >&3
    [ "$max" -gt 20 ] || ESC_ERRS+=("the bomb never got going (at most $max processes): the test proves nothing")
    [ "$max" -le 128 ] || ESC_ERRS+=("ESCAPE: $max bomb processes at once, above --pids 128")
    [ $((t1 - t0)) -lt 60 ] || ESC_ERRS+=("txbox took $((t1 - t0)) s to stop a fork bomb with --timeout 6")
    sleep 0.5
    [ -z "$(marked_procs)" ] || ESC_ERRS+=("ESCAPE: bomb processes outlived txbox: $(marked_procs | head -5 | tr '\n' ' ')")
    # killed by the timeout (124), or by the limit's fallout: either way rolled back
    case "$status" in
    124) esc_check --status 124 --outcome timed_out ;;
    *) esc_check --status "$status" ;;
    esac
    [ "$(jget protections.limits.processes 2>/dev/null)" = 128 ] ||
        ESC_ERRS+=("protections.limits.processes is not 128: $(jget protections.limits 2>&1)")
    esc_done
}

@test "a memory bomb (--memory 256M): the command never holds more than the limit, rolled back, the host unharmed (control)" {
    attempt --memory 256M --timeout 60 <<'EOF'
python3 -c '
import os, sys
chunks, held = [], 0
cap = int(os.environ.get("ESC_BOMB_CAP", "2048"))
while held < cap:
    b = bytearray(32 << 20)
    for i in range(0, len(b), 4096):
        b[i] = 1
    chunks.append(b)
    held += 32
    print("held", held, flush=True)
'
exit 3
EOF
    local most
    most="$(last_number held)"
    echo "# the bomb held at most ${most:-0} MiB" >&3
    [ -n "$most" ] || ESC_ERRS+=("the bomb allocated nothing: the test proves nothing ($(clip "$ATT_ERR"))")
    [ "${most:-0}" -le 256 ] || ESC_ERRS+=("ESCAPE: the bomb held $most MiB with --memory 256M")
    [ "$status" != 0 ] || ESC_ERRS+=("the bomb ended with status 0")
    # what stopped it, and how far the limit reaches, said as it is
    if [ "$(jget protections.limits.via 2>/dev/null)" = rlimits ]; then
        [ "$(jget protections.limits.memory_scope 2>/dev/null)" = "per process" ] ||
            ESC_ERRS+=("protections.limits.memory_scope is not 'per process' under rlimits")
    else
        [ "$(jget protections.limits.memory_scope 2>/dev/null)" = "per transaction" ] ||
            ESC_ERRS+=("protections.limits.memory_scope is not 'per transaction' under a cgroup")
        [ "$(jget stopped_by 2>/dev/null)" = "memory limit" ] ||
            ESC_ERRS+=("stopped_by is '$(jget stopped_by 2>/dev/null)', not 'memory limit' ($(jget protections.limits.via 2>/dev/null))")
    fi
    esc_check --status "$status"
    [ "$(jget protections.limits.memory_bytes 2>/dev/null)" = $((256 << 20)) ] ||
        ESC_ERRS+=("protections.limits.memory_bytes is not 256 MiB: $(jget protections.limits 2>&1)")
    esc_done
    # the control: without the limit the same bomb goes past 256 MiB
    CONTROL_OUT="$(ESC_BOMB_CAP=384 /bin/sh "$ESC_SCRIPT" 2>&1)" || true
    grep -q '^held 384$' <<<"$CONTROL_OUT" ||
        fail "control: without txbox the bomb does not get past 256 MiB, so the check proves nothing: $(clip "$CONTROL_OUT")"
}

@test "the OOM killer's first choice is the command (score 1000); txbox's own score and init's stay as they were" {
    local out="$BATS_TEST_TMPDIR/oom" before during pid
    before="$(cat /proc/self/oom_score_adj)" # the shell's, which txbox inherits
    # set by init once the command has exec'd: a moment after it starts
    "$TXBOX" run -C "$WS" -c 'for i in $(seq 200); do [ "$(cat /proc/$$/oom_score_adj)" = 1000 ] && break; sleep 0.01; done
        cat /proc/$$/oom_score_adj /proc/1/oom_score_adj; sleep 2' \
        >"$out" 2>&1 </dev/null &
    pid=$!
    sleep 1
    during="$(cat "/proc/$pid/oom_score_adj")"
    wait "$pid" || fail "txbox exited $?: $(clip "$(cat "$out")")"
    [ "$(sed -n 1p "$out")" = 1000 ] || fail "the command's score: $(clip "$(cat "$out")")"
    [ "$(sed -n 2p "$out")" = "$before" ] || fail "init's score (was $before): $(clip "$(cat "$out")")"
    [ "$during" = "$before" ] || fail "txbox's own score was $during while the command ran (was $before)"
}

@test "a disk filler in the workspace (--max-write 50M): stopped, rolled back with stopped_by 'write limit', the space given back" {
    local before after
    before="$(df -Pk "$WS" | awk 'NR == 2 {print $4}')"
    attempt --max-write 50M --timeout 60 <<'EOF'
i=0
while [ $i -lt 100 ]; do
    head -c 8M /dev/zero >"fill-$i" || break
    i=$((i + 1))
done
echo "wrote $i files of 8 MiB"
exit 3
EOF
    esc_check --status "$status"
    [ "$(jget stopped_by 2>/dev/null)" = "write limit" ] ||
        ESC_ERRS+=("stopped_by is '$(jget stopped_by 2>&1)', want 'write limit' (status $status; $(grep wrote <<<"$ATT_OUT"))")
    [ -z "$(find "$WS/.txbox" -path '*/tx/*/upper' 2>/dev/null)" ] ||
        ESC_ERRS+=("the transaction's upper directory is still there: $(find "$WS/.txbox" -path '*/tx/*/upper')")
    after="$(df -Pk "$WS" | awk 'NR == 2 {print $4}')"
    # (others share the disk: allow 200 MiB of their noise, far below the 800 MiB the filler tried)
    [ $((before - after)) -lt 204800 ] ||
        ESC_ERRS+=("the filesystem has $(((before - after) / 1024)) MiB less free space than before the filler")
    esc_done
}

@test "a disk filler writing one big file (--max-write 50M): stopped and rolled back" {
    attempt --max-write 50M --timeout 60 <<'EOF'
head -c 400M /dev/zero >big
echo "head ended with $?"
ls -l big | sed 's/^/INFO /'
exit 3
EOF
    esc_check --status "$status"
    [ "$status" != 0 ] || ESC_ERRS+=("status 0")
    [ ! -e "$WS/big" ] || ESC_ERRS+=("the big file reached the workspace")
    esc_done
}

@test "a disk filler in the RAM-backed /tmp and /dev/shm (--max-write 50M --memory 256M): held to the limits" {
    attempt --max-write 50M --memory 256M --timeout 60 <<'EOF'
n=0
for d in /tmp /dev/shm; do
    i=0
    while [ $i -lt 32 ]; do
        head -c 16M /dev/zero >"$d/fill-$i" 2>/dev/null || break
        n=$((n + 16))
        echo "written $n"
        i=$((i + 1))
    done
done
exit 3
EOF
    local most
    most="$(last_number written)"
    echo "# wrote ${most:-0} MiB to /tmp and /dev/shm" >&3
    [ -n "$most" ] || ESC_ERRS+=("the filler wrote nothing: the test proves nothing ($(clip "$ATT_ERR"))")
    [ "${most:-0}" -le 256 ] ||
        ESC_ERRS+=("ESCAPE (resources): $most MiB written to RAM-backed /tmp and /dev/shm with --max-write 50M --memory 256M")
    esc_check --status "$status"
    esc_done
}

@test "a CPU hog (--cpu 2): killed after about 2 s of CPU, rolled back" {
    local t0 t1
    t0="$(date +%s)"
    attempt --cpu 2 --timeout 60 <<'EOF'
python3 -c 'while True: pass'
echo "python ended with $?"
exit 3
EOF
    t1="$(date +%s)"
    esc_check --status "$status"
    grep -q 'python ended with \(137\|152\)' <<<"$ATT_OUT" ||
        ESC_ERRS+=("the hog was not killed by the CPU limit: $(clip "$ATT_OUT")")
    [ $((t1 - t0)) -lt 30 ] || ESC_ERRS+=("the CPU hog ran $((t1 - t0)) s with --cpu 2")
    esc_done
}

@test "an output flood: 64 MiB on stdout and stderr, captured at most 1 MiB each" {
    attempt <<'EOF'
head -c 64M /dev/zero | tr '\0' x
head -c 64M /dev/zero | tr '\0' y >&2
exit 3
EOF
    esc_check --status 3
    [ "$(jget stdout_truncated)" = true ] && [ "$(jget stderr_truncated)" = true ] ||
        ESC_ERRS+=("the output was not reported as truncated")
    [ "${#output}" -lt $((3 << 20)) ] || ESC_ERRS+=("txbox's JSON is ${#output} bytes")
    esc_done
}

@test "a background process that survives to write after the commit: it does not (control)" {
    attempt <<'EOF'
echo committed >late.txt
# keeps the file open and writes to it (and by path) once the command is over
( exec 5>>late.txt
  trap '' HUP TERM INT
  sleep 2
  echo "written after the commit $ESC_MARK" >&5
  echo "by path $ESC_MARK" >>"$ESC_WS/late.txt"
  echo x >"$ESC_WS/late-$ESC_MARK" ) </dev/null >/dev/null 2>&1 &
nohup sh -c "sleep 2; echo late >>\"$ESC_WS/README\" # $ESC_MARK" </dev/null >/dev/null 2>&1 &
exit 0
EOF
    local want
    want="$(printf 'committed')"
    [ "$status" = 0 ] && [ "$ATT_OUTCOME" = committed ] || ESC_ERRS+=("the command did not commit: $status $(clip "$ATT_ERR")")
    sleep 3.5
    [ "$(cat "$WS/late.txt" 2>&1)" = "$want" ] ||
        ESC_ERRS+=("ESCAPE: late.txt changed after the commit: $(cat "$WS/late.txt" 2>&1)")
    [ ! -e "$WS/late-$ESC_MARK" ] || ESC_ERRS+=("ESCAPE: a file appeared in the workspace after the commit")
    grep -q late "$WS/README" && ESC_ERRS+=("ESCAPE: README changed after the commit")
    [ -z "$(marked_procs)" ] || ESC_ERRS+=("ESCAPE: processes of the command outlived it: $(marked_procs | tr '\n' ' ')")
    local msg
    msg="$(esc_host_diff)" || ESC_ERRS+=("ESCAPE: the host changed: $msg")
    esc_done
    # the control: without txbox the late writer does write
    (cd "$WS" && ESC_WS="$WS" /bin/sh "$ESC_SCRIPT" >/dev/null 2>&1)
    sleep 3.5
    grep -q "written after the commit" "$WS/late.txt" ||
        fail "control: without txbox the late write did not happen, so the check proves nothing"
}

@test "processes that change session and process group, double-fork and ignore signals to escape the kill" {
    attempt --timeout 5 <<'EOF'
# setsid, setpgid, a double fork, nohup; every catchable signal ignored
for how in setsid pgrp double nohup; do
    case $how in
    setsid) setsid sh -c "trap '' HUP INT TERM QUIT USR1 USR2; sleep 3; echo \$\$ >\"$ESC_WS/survivor-$how-$ESC_MARK\"" & ;;
    pgrp) python3 -c "
import os, signal, time
os.setpgid(0, 0)
for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT): signal.signal(s, signal.SIG_IGN)
time.sleep(3)
open(os.environ['ESC_WS'] + '/survivor-$how-$ESC_MARK', 'w').write('x')
" & ;;
    double) sh -c "sh -c 'trap \"\" HUP TERM; sleep 3; touch \"$ESC_WS/survivor-$how-$ESC_MARK\"' &" ;;
    nohup) nohup sh -c "sleep 3; touch \"$ESC_WS/survivor-$how-$ESC_MARK\"" >/dev/null 2>&1 & ;;
    esac
done
sleep 0.5
ps -eo pid,pgid,sid,args | sed 's/^/INFO /'
# the command itself hangs: the timeout must take everything down
sleep 60
EOF
    sleep 4
    ls "$WS" | grep -q survivor && ESC_ERRS+=("ESCAPE: a survivor wrote into the workspace: $(ls "$WS" | grep survivor)")
    [ -z "$(marked_procs)" ] || ESC_ERRS+=("ESCAPE: processes outlived the transaction: $(marked_procs | tr '\n' ' ')")
    esc_check --status 124 --outcome timed_out
    esc_done
}

@test "a commit that fails with ENOSPC on its journal: the workspace is unchanged and the audit log has the transaction, failed" {
    run --separate-stderr env TXBOX_FAULT=write:1:ENOSPC "$TXBOX" run -C "$WS" -c 'echo new >enospc-file'
    [ "$status" = 125 ] || fail "status $status, want 125: $stderr"
    [[ "$stderr" == *"No space left on device"* ]] || fail "stderr does not say ENOSPC: $stderr"
    [ ! -e "$WS/enospc-file" ] || fail "the workspace changed although the commit failed"
    run --separate-stderr txbox_bin log -C "$WS" --json
    [ "$status" = 0 ] || fail "txbox log fails ($status): $stderr"
    printf '%s' "$output" | python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r.get("command") == "echo new >enospc-file"]
sys.exit(0 if len(rows) == 1 and rows[0]["outcome"] == "failed" else 1)' ||
        fail "the failed transaction has no row saying it failed: $output"
    local id
    id="$(printf '%s' "$output" | python3 -c 'import json, sys; print([r["tx"] for r in json.load(sys.stdin) if r.get("command") == "echo new >enospc-file"][0])')"
    run --separate-stderr txbox_bin show -C "$WS" "$id"
    [ "$status" = 0 ] || fail "txbox show $id fails ($status): $stderr"
}
