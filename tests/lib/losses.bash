# Helpers of the tests of losses (tests/integration/losses.bats,
# incidents.bats): a git workspace, the losses of a result, a terminal.
# Load after ../lib/common.

# git_ws: $WS, a git repository (no sample hooks) with two commits: a.txt,
# lib.py, .gitignore (ignores *.o and build/).
git_ws() {
    WS="$BATS_TEST_TMPDIR/ws"
    rm -rf "$WS"
    mkdir -p "$WS"
    (
        set -e
        cd "$WS"
        git init -q --template= .
        git config user.name tester
        git config user.email tester@example.org
        git config commit.gpgsign false
        printf 'one\ntwo\nthree\nfour\n' >a.txt
        printf 'def f():\n    return 1\n' >lib.py
        printf '*.o\nbuild/\n' >.gitignore
        git add -A
        git commit -qm first
        printf 'five\n' >>a.txt
        git commit -qam second
    ) || fail "cannot make the repository"
}

# g ARGS...: git in the workspace, outside txbox (the person's own git).
g() { git -C "$WS" "$@"; }

# losses_of: "kind path" of each loss in the JSON result in $output.
losses_of() {
    printf '%s' "$output" | python3 -c '
import json, sys
d = json.load(sys.stdin)
for it in d.get("losses", {}).get("items", []):
    print(it["kind"], it["path"])'
}

# assert_lost KIND PATH: the last run's losses hold that item.
assert_lost() {
    local got
    got="$(losses_of)" || fail "no losses in: $(clip "$output")"
    grep -qxF "$1 $2" <<<"$got" || fail "expected a loss '$1 $2'; losses: ${got:-none}" "$(clip "$output")"
}

# assert_no_loss: the last run's losses are empty (count 0).
assert_no_loss() {
    [ "$(jget losses.count)" = 0 ] || fail "expected no loss; losses: $(losses_of)" "$(clip "$output")"
}

# at_terminal ARGS...: txbox ARGS... with stdin and stderr a terminal
# (script(1)), as a person runs it; status in $status, its output in $output.
at_terminal() {
    local f="$BATS_TEST_TMPDIR/at_terminal.sh"
    printf '%q ' "$TXBOX" "$@" >"$f"
    run script -qefc "bash $(printf %q "$f")" /dev/null </dev/null
}

# undo_latest: `txbox undo` brings the pre-state (snap pre) back exactly.
undo_latest() {
    run --separate-stderr txbox_bin undo -C "$WS"
    assert_status 0
    assert_tree pre "$WS"
}
