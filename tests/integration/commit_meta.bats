#!/usr/bin/env bats
# What a commit does with metadata the command left: privilege bits and file
# capabilities are not committed.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    new_ws
}

# h ARGS: a txbox subcommand on $WS, bats-run.
h() {
    local cmd="$1"
    shift
    run --separate-stderr txbox_bin "$cmd" -C "$WS" "$@"
}

@test "setuid and setgid bits and file capabilities are not committed; a directory's setgid bit is" {
    tx -c 'printf "#!/bin/sh\n" >su; chmod 4755 su; cp su sg; chmod 2755 sg; cp su both; chmod 6711 both
chmod u+s exec.sh; chmod g+s src/main.c
mkdir -p nd/in; cp su nd/in/deep; chmod 4755 nd/in/deep; chmod 2775 nd
chmod g+s src/lib
cp su cap; setcap cap_setuid+ep cap 2>/dev/null || true'
    assert_status 0
    local f m want
    for f in su:0755 sg:0755 both:0711 exec.sh:0755 src/main.c:0644 nd/in/deep:0755 nd:2775 src/lib:2755; do
        want="${f##*:}"
        m="$(stat -c %04a "$WS/${f%:*}")"
        [ "$m" = "$want" ] || fail "${f%:*}: mode $m committed, want $want"
    done
    ! getfattr -n security.capability "$WS/cap" >/dev/null 2>&1 ||
        fail "file capabilities committed: $(getcap "$WS/cap")"
}

@test "a setuid bit is stripped in the upper before the commit point: a crash right after it commits none" {
    # Killed at the first rename of the commit (the journal's), before it:
    # recovery rolls back. Killed at the second (after the commit point):
    # recovery rolls forward. Neither state has the setuid bit.
    local n
    for n in 1 2 3; do
        new_ws "ws$n"
        TXBOX_FAULT="rename:$n:kill" run --separate-stderr txbox_bin run -C "$WS" -c 'cp exec.sh su; chmod 4755 su'
        h recover
        assert_status 0
        if [ -e "$WS/su" ]; then
            [ "$(stat -c %04a "$WS/su")" = 0755 ] || fail "kill at rename $n: su committed as $(stat -c %04a "$WS/su")"
        fi
    done
}
