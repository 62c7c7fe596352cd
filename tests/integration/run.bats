#!/usr/bin/env bats
# `txbox run`: the basic contract (status, output, JSON, argv vs shell
# string, cwd, namespaces) and `txbox recover` on a clean workspace.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    new_ws
}

@test "exit 0 commits; output streams through; one txbox: status line on stderr" {
    snap pre "$WS"
    tx -c 'echo new >new.txt; echo out; echo err >&2'
    assert_status 0
    [ "$output" = out ] || fail "stdout is not the command's own: '$output'"
    [ "${#stderr_lines[@]}" = 2 ] || fail "stderr should be the command's line and one status line:" "$stderr"
    [ "${stderr_lines[0]}" = err ] || fail "command's stderr not passed through first: $stderr"
    [[ "${stderr_lines[1]}" == txbox:* ]] || fail "status line not prefixed txbox: '${stderr_lines[1]}'"
    [ "$(cat "$WS/new.txt")" = new ] || fail "new.txt not committed"
}

@test "non-zero exit status passes through and rolls back" {
    snap pre "$WS" --mtime
    tx -c 'echo x >>README; rm -r src; exit 7'
    assert_status 7
    assert_tree pre "$WS" --mtime
    txj -c 'echo x >>README; exit 42'
    assert_status 42
    assert_outcome rolled_back
    assert_json_field exit_code 42
    assert_json_field signal null
    assert_tree pre "$WS" --mtime
}

@test "--json: one object with every field; output captured, not streamed" {
    txj -c 'echo new >new.txt; rm README; echo more >>docs/a.txt; printf out; printf err >&2'
    assert_status 0
    assert_outcome committed
    assert_json_field exit_code 0
    assert_json_field signal null
    assert_json_field stdout out
    assert_json_field stderr err
    assert_json_field stdout_truncated false
    assert_json_field stderr_truncated false
    assert_json_field backend overlay
    [ -n "$(jget tx)" ] || fail "empty tx id"
    [ "$(jget changes.added)" = new.txt ] || fail "added: $(jget changes.added)"
    [ "$(jget changes.deleted)" = README ] || fail "deleted: $(jget changes.deleted)"
    [ "$(jget changes.modified)" = docs/a.txt ] || fail "modified: $(jget changes.modified)"
    [ "${#stderr_lines[@]}" -le 1 ] || fail "with --json, stderr has more than a status line:" "$stderr"
    [[ "$stderr" != *err* || "$stderr" == txbox:* ]] || fail "captured stderr also streamed: $stderr"
}

@test "--json: directories are listed with a trailing slash" {
    txj -c 'mkdir -p nd/sub; echo 1 >nd/sub/f; rm -r docs'
    assert_status 0
    jget changes.added | grep -qx 'nd/' || fail "nd/ not in added: $(jget changes.added)"
    jget changes.deleted | grep -qx 'docs/' || fail "docs/ not in deleted: $(jget changes.deleted)"
}

@test "--json: changed paths are unambiguous (non-UTF-8 bytes vs look-alike names)" {
    # a name with the byte 0xff and a name with the four characters \xff
    tx -c 'echo 1 >"$(printf "a\377b")"; echo 2 >"a\\xffb"; ls'
    assert_status 0
    [ "$(ls "$WS" | grep -c '^a')" = 2 ] || fail "test set-up: expected two files a*b, got: $(ls "$WS")"
    txj -c 'rm a*b'
    assert_status 0
    local n
    n="$(jget changes.deleted | sort -u | wc -l)"
    [ "$n" = 2 ] || fail "two different deleted files are reported as $n distinct path(s): $(jget changes.deleted)"
}

@test "--json: large output is capped with a truncation flag; without --json it streams whole" {
    txj -c 'head -c 5000000 /dev/zero | tr "\0" a; head -c 5000000 /dev/zero | tr "\0" b >&2'
    assert_status 0
    assert_json_field stdout_truncated true
    assert_json_field stderr_truncated true
    local n
    n="$(jget stdout | wc -c)"
    [ "$n" -lt 5000000 ] && [ "$n" -gt 0 ] || fail "captured stdout has $n bytes"
    txbox_bin run -C "$WS" -c 'head -c 5000000 /dev/zero | tr "\0" a' >"$BATS_TEST_TMPDIR/out" 2>/dev/null
    [ "$(wc -c <"$BATS_TEST_TMPDIR/out")" = 5000000 ] || fail "streamed output is not whole"
    # what is still in the pipes when the sandbox's init reports its end
    # (txbox stops waiting for init then) is read whole, on both streams
    txbox_bin run -C "$WS" -c 'head -c 3000000 /dev/zero | tr "\0" a & head -c 3000000 /dev/zero | tr "\0" b >&2; wait; echo END' \
        >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err"
    [ "$(wc -c <"$BATS_TEST_TMPDIR/out")" = 3000004 ] || fail "stdout: $(wc -c <"$BATS_TEST_TMPDIR/out") bytes"
    [ "$(tail -c 4 "$BATS_TEST_TMPDIR/out")" = END ] || fail "stdout does not end with END"
    # what is left in the pipes at that moment exactly (a test build's hook
    # leaves it all there until then)
    TXBOX_TEST_PUMP_HOLD=1 txbox_bin run -C "$WS" -c 'head -c 30000 /dev/zero | tr "\0" a; echo END; echo ERR >&2' \
        >"$BATS_TEST_TMPDIR/out2" 2>"$BATS_TEST_TMPDIR/err2"
    [ "$(wc -c <"$BATS_TEST_TMPDIR/out2")" = 30004 ] || fail "held stdout: $(wc -c <"$BATS_TEST_TMPDIR/out2") bytes"
    grep -qx ERR "$BATS_TEST_TMPDIR/err2" || fail "held stderr: $(head -c 300 "$BATS_TEST_TMPDIR/err2")"
    # the command's stderr, then txbox's own line
    [ "$(head -c 3000000 "$BATS_TEST_TMPDIR/err" | tr -d b | wc -c)" = 0 ] &&
        [ "$(head -c 3000001 "$BATS_TEST_TMPDIR/err" | tail -c 1)" != b ] ||
        fail "stderr: $(tr -cd b <"$BATS_TEST_TMPDIR/err" | wc -c) b's, not 3000000 first"
}

@test "argv after -- is executed as is, never re-joined into a shell string" {
    tx -- printf '%s|' 'a b' '$HOME' ';x' '"q"' '' "$(printf 'n\nl')" '*'
    assert_status 0
    [ "$output" = "a b|\$HOME|;x|\"q\"||$(printf 'n\nl')|*|" ] || fail "argv changed: '$output'"
    tx -- touch 'new file;rm -rf src'
    assert_status 0
    [ -f "$WS/new file;rm -rf src" ] && [ -d "$WS/src" ] || fail "argv was re-joined"
}

@test "the shell string goes unchanged to the shell (-c)" {
    tx -c 'x="a  b"; printf "[%s]\n" "$x" $x; echo $#; echo $((6*7)) # comment
printf "%s\n" "$(printf "%s" "'\''q'\''")"'
    assert_status 0
    [ "$output" = "$(printf '[a  b]\n[a]\n[b]\n0\n42\n'"'"'q'"'")" ] || fail "got: $output"
}

@test "argv mode: status and rollback" {
    snap pre "$WS" --mtime
    tx -- sh -c 'echo x >>README; exit 3'
    assert_status 3
    assert_tree pre "$WS" --mtime
    tx -- false
    assert_status 1
    tx -- /nonexistent/program
    assert_status 127 # not found; also not 254, the harness's "txbox hung"
    [[ "$stderr" == *"cannot execute /nonexistent/program: No such file or directory"* ]] ||
        fail "no reason given: $(clip "$stderr")"
    assert_tree pre "$WS" --mtime
}

@test "the command sees the workspace at its real path, with its cwd kept" {
    cd "$WS/src/lib"
    tx -c 'pwd; echo here >made_here'
    assert_status 0
    [ "$output" = "$WS/src/lib" ] || fail "cwd inside is '$output', want $WS/src/lib"
    [ -f "$WS/src/lib/made_here" ] || fail "relative write did not land in the cwd"
    cd "$WS"
    run --separate-stderr txbox_bin run -c 'pwd; test -f "'"$WS"'/README" && echo seen'
    assert_status 0
    [ "$output" = "$WS
seen" ] || fail "without -C the workspace is not the cwd: '$output'"
}

@test "sequential transactions build on each other" {
    tx -c 'echo 1 >counter'
    assert_status 0
    tx -c 'n=$(cat counter); echo $((n+1)) >counter'
    assert_status 0
    tx -c 'n=$(cat counter); echo $((n+1)) >counter; exit 1'
    assert_status 1
    [ "$(cat "$WS/counter")" = 2 ] || fail "counter is $(cat "$WS/counter")"
}

@test "a command that changes nothing commits nothing" {
    snap pre "$WS" --mtime
    txj -c 'cat README >/dev/null; ls -R >/dev/null'
    assert_status 0
    case "$(jget outcome)" in committed | read_only) ;; *) fail "outcome $(jget outcome)" ;; esac
    [ -z "$(jget changes.added)$(jget changes.modified)$(jget changes.deleted)" ] ||
        fail "changes reported: $output"
    assert_tree pre "$WS" --mtime
}

@test "--backend copy: same contract" {
    txj --backend copy -c 'echo c >copy.txt; printf out'
    assert_status 0
    assert_outcome committed
    assert_json_field backend copy
    assert_json_field stdout out
    [ -f "$WS/copy.txt" ] || fail "copy backend did not commit"
    snap pre "$WS" --mtime
    txj --backend copy -c 'rm -rf src; exit 5'
    assert_status 5
    assert_outcome rolled_back
    assert_tree pre "$WS" --mtime
}

@test "recover on a clean workspace does nothing and succeeds" {
    tx -c 'echo 1 >f'
    snap pre "$WS" --mtime
    run --separate-stderr txbox_bin recover -C "$WS"
    assert_status 0
    assert_tree pre "$WS" --mtime
    run --separate-stderr txbox_bin recover -C "$WS" --json
    assert_status 0
    printf '%s' "$output" | "$RUNJSON" check-object ||
        fail "recover --json did not print one JSON object: $output"
    assert_tree pre "$WS" --mtime
}

@test "protections are reported" {
    txj -c true
    assert_status 0
    [ "$(jget protections)" != "{}" ] || fail "protections object is empty"
}

@test "recover on a workspace that never ran a transaction succeeds and changes nothing" {
    # After a crash before .txbox/ existed, `txbox recover` is what a script
    # runs blindly: nothing to do is not an error.
    snap pre "$WS" --mtime
    run --separate-stderr txbox_bin recover -C "$WS"
    assert_status 0
    [[ "$output" == *"nothing to recover"* ]] || fail "recover did not say there is nothing to recover: $output"
    run --separate-stderr txbox_bin recover -C "$WS" --json
    assert_status 0
    printf '%s' "$output" | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(any(d[k] for k in ("rolled_forward","rolled_back","failed")))' ||
        fail "recover --json did not report an empty recovery: $output"
    [ ! -e "$WS/.txbox" ] || fail "recover created .txbox/"
    assert_tree pre "$WS" --mtime
}

@test "-c runs under bash by default, as the policy reads it; --shell sh and bash too" {
    txj -c 'echo {1..3} > f && [[ -f f ]] && cat <(cat f) > g && echo $BASH_VERSION'
    assert_status 0
    assert_outcome committed
    [ "$(cat "$WS/f")" = "1 2 3" ] && [ "$(cat "$WS/g")" = "1 2 3" ] || fail "f: $(cat "$WS/f")"
    [[ "$(jget shell)" == */bash ]] || fail "shell: $(jget shell)"
    [ -n "$(jget stdout)" ] || fail "not bash"
    txj --shell sh -c 'echo "$0"'
    assert_status 0
    [ "$(jget shell)" = /bin/sh ] && [ "$(jget stdout)" = /bin/sh ] || fail "$output"
    tx --shell bash -c 'echo ${BASH_VERSINFO[0]}'
    [ "$status" = 0 ] && [ -n "$output" ] || fail "$output"
}

@test "--shell sh: a command sh reads otherwise than bash is never read-only" {
    # bash: one echo of a $'...' string (read-only); dash: $ and '\' then
    # a second command that writes
    cmd=$'echo $\'\\\'; touch PWNED\necho \\\'\''
    txj --shell bash -c "$cmd"
    assert_outcome read_only
    [ ! -e "$WS/PWNED" ] || fail "bash ran touch"
    for c in "$cmd" 'echo {a,b}' '((x=1))' 'alias ls=true' '[[ -f x ]] || true' 'cat <(ls)' 'echo a\\nb'; do
        txj --shell sh -c "$c"
        [ "$(jget verdict)" != safe ] && [ "$(jget rule)" != read-only-tools ] || fail "$c: $output"
        [ "$(jget outcome)" != read_only ] || fail "$c ran read-only under sh: $output"
    done
    # plain POSIX commands keep their verdict under sh
    txj --shell sh -c 'ls; echo $((1+2))'
    assert_outcome read_only
}

@test "--shell: other shells, relative names, a shell in the workspace and misuse are refused (125)" {
    for s in zsh fish ./bash /nonexistent/bash /usr/bin/env; do
        tx --shell "$s" -c true
        assert_txbox_error
    done
    cp "$(command -v bash)" "$WS/bash"
    tx --shell "$WS/bash" -c true
    assert_txbox_error
    tx --shell bash -- true
    assert_status 125
    tx --read-only --tx 1 -c true
    assert_status 125
    tx --tee-fd 9 -c true
    assert_status 125
}

@test "the shell's environment loses what would run or change code around the command" {
    printf 'touch ENVRAN\n' >"$WS/evil.sh"
    run --separate-stderr env BASH_ENV="$WS/evil.sh" ENV="$WS/evil.sh" 'BASH_FUNC_ls%%=() { touch FNRAN; }' \
        SHELLOPTS=xtrace PS4='$(touch PS4RAN)' "$TXBOX" run -C "$WS" --json -c 'ls >/dev/null; touch done'
    assert_status 0
    [ -f "$WS/done" ] && [ ! -e "$WS/ENVRAN" ] && [ ! -e "$WS/FNRAN" ] && [ ! -e "$WS/PS4RAN" ] ||
        fail "$(ls "$WS")"
    [[ "$(jget protections.env_removed)" == *BASH_ENV* ]] || fail "$output"
}

@test "--read-only runs without a transaction whatever the verdict; --tee-fd copies the output" {
    txj --read-only -c 'echo x > w.txt'
    [ "$(jget outcome)" = read_only ] || [ "$(jget outcome)" = rolled_back ] || fail "$output"
    [ ! -e "$WS/w.txt" ] || fail "wrote under --read-only"
    run --separate-stderr bash -c "'$TXBOX' run -C '$WS' --json --tee-fd 3 -c 'echo teed; echo e >&2' 3>'$BATS_TEST_TMPDIR/tee'"
    assert_status 0
    [ "$(cat "$BATS_TEST_TMPDIR/tee")" = "$(printf 'teed\ne')" ] || fail "tee: $(cat "$BATS_TEST_TMPDIR/tee")"
}
