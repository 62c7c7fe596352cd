#!/usr/bin/env bats
# Undo of an older transaction after later ones, as git revert does it
# (paths nobody changed since come back; text changed since is merged;
# anything else is a conflict that changes nothing, or with --force is
# taken and said), and restore of chosen paths from before a transaction.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    new_ws
    printf 'one\ntwo\nthree\nfour\nfive\nsix\nseven\n' >"$WS/notes.txt"
    mkdir -p "$WS/docs/journeys"
    printf 'j1\n' >"$WS/docs/journeys/a.md"
    printf 'j2\n' >"$WS/docs/journeys/b.md"
}

# A repository with staged work (an edit and a new file), then a command
# that discards it (git reset --hard): tx 1.
staged_work_reset() {
    command -v git >/dev/null || need "git is needed"
    (cd "$WS" && git init -q && git config user.email t@t && git config user.name t &&
        git add -A && git commit -qm base && printf 'staged work\n' >>notes.txt && git add notes.txt &&
        printf 'draft\n' >draft.md && git add draft.md)
    commit 'git reset -q --hard'
    ! grep -q 'staged work' "$WS/notes.txt" || fail "the reset did not discard the staged work"
}

# undo 1 brings the staged work back, index included.
staged_work_back() {
    h undo 1
    assert_status 0
    grep -q 'staged work' "$WS/notes.txt" || fail "the staged work is not back"
    [ "$(cat "$WS/draft.md")" = draft ] || fail "the staged new file is not back"
    [ "$(cd "$WS" && git diff --cached --name-only | sort | tr '\n' ' ')" = "draft.md notes.txt " ] ||
        fail "the index is not as it was: $(cd "$WS" && git status --short)"
}

@test "undo of an older transaction: what nobody changed since comes back, later edits stay" {
    commit 'rm -rf docs/journeys; printf "hello\n" >README; mkdir gen; printf "a\n" >gen/a; sed -i "s/^two$/TWO/" notes.txt'
    commit 'printf "new\n" >docs/new.md; printf "int x;\n" >>src/main.c; printf "b\n" >gen/b; sed -i "s/^six$/SIX/" notes.txt'
    make_ref "$WS" "$BATS_TEST_TMPDIR/ref" 'mkdir docs/journeys; printf "j1\n" >docs/journeys/a.md; printf "j2\n" >docs/journeys/b.md
        printf "hello\nworld\n" >README; rm gen/a; sed -i "s/^TWO$/two/" notes.txt'
    snap ref "$BATS_TEST_TMPDIR/ref"
    h undo 1
    assert_status 0
    [[ "$stderr" == "txbox: tx 3 undid transaction 1 ("*"; merged with later changes: notes.txt" ]] || fail "$stderr"
    assert_tree ref "$WS"
    [ "$(cat "$WS/docs/new.md")" = new ] && [ "$(cat "$WS/gen/b")" = b ] || fail "a later file is gone"
}

@test "undo of an older transaction merges a text file changed since on other lines" {
    commit 'sed -i "s/^two$/TWO/" notes.txt; printf "x\n" >other.txt'
    commit 'sed -i "s/^six$/SIX/" notes.txt'
    h undo 1 --json
    assert_status 0
    [ "$(pj 'd["merged"]')" = "['notes.txt']" ] || fail "$output"
    [ "$(cat "$WS/notes.txt")" = "$(printf 'one\ntwo\nthree\nfour\nfive\nSIX\nseven')" ] || fail "$(cat "$WS/notes.txt")"
    [ ! -e "$WS/other.txt" ]
    [[ "$stderr" == *"merged with later changes: notes.txt"* ]] || fail "$stderr"
    # the merge is a transaction: undone, both edits are back
    h undo 3
    assert_status 0
    [ "$(cat "$WS/notes.txt")" = "$(printf 'one\nTWO\nthree\nfour\nfive\nSIX\nseven')" ] || fail "$(cat "$WS/notes.txt")"
    [ -e "$WS/other.txt" ]
    # and transaction 1 undone again, merging once more
    h undo 1
    assert_status 0
    [ "$(cat "$WS/notes.txt")" = "$(printf 'one\ntwo\nthree\nfour\nfive\nSIX\nseven')" ] || fail "$(cat "$WS/notes.txt")"
    h undo 1
    assert_txbox_error
    [[ "$stderr" == *"undone already (by transaction 5)"* ]] || fail "$stderr"
}

@test "a real conflict refuses the whole undo, names path, reason and transactions, touches nothing" {
    commit 'sed -i "s/^two$/TWO/" notes.txt; rm -rf docs/journeys'
    commit 'sed -i "s/^TWO$/Two!/" notes.txt'
    snap before "$WS" --mtime
    h undo 1
    assert_status 123
    [ "${#stderr_lines[@]}" = 1 ] || fail "not one line: $stderr"
    [[ "$stderr" == "txbox: cannot undo transaction 1: later changes conflict: notes.txt (tx 2: changed since on the same lines); nothing was changed"* ]] ||
        fail "$stderr"
    assert_tree before "$WS" --mtime
    h undo 1 --json
    assert_status 123
    [ "$(pj '[(c["path"], c["by"], c["why"]) for c in d["conflicts"]]')" = "[('notes.txt', ['2'], 'changed since on the same lines')]" ] ||
        fail "$output"
    h log --json
    [ "$(pj 'd[0]["outcome"]')" = conflict ]
    # forced: the old version, and what it replaced is said
    h undo 1 --force
    assert_status 0
    [[ "$stderr" == *"replaced later changes to notes.txt (tx 2: changed since on the same lines)"* ]] || fail "$stderr"
    [ "$(sed -n 2p "$WS/notes.txt")" = two ]
    [ -f "$WS/docs/journeys/a.md" ]
    # and the forced undo is undoable: the later edit comes back
    h undo 5
    assert_status 0
    assert_tree before "$WS" --mtime
}

@test "binary files are merged only when one side is unchanged" {
    printf 'a\000b\000' >"$WS/bin.dat"
    commit 'printf "A\000B\000" >bin.dat'
    commit 'printf "Z\000Z\000" >bin.dat'
    h undo 1 --json
    assert_status 123
    [ "$(pj 'd["conflicts"][0]["why"]')" = "changed since, and binary: no merge" ] || fail "$output"
    # unchanged since: it comes back (undo of the later one first)
    h undo 2
    assert_status 0
    h undo 1
    assert_status 0
    cmp "$WS/bin.dat" <(printf 'a\000b\000')
}

@test "deleted since, re-created since, changed outside txbox: each a conflict with its reason" {
    printf 'keep\n' >"$WS/f1"
    printf 'keep\n' >"$WS/f2"
    commit 'printf "t1\n" >>f1; rm f2; printf "t1\n" >>f3'
    commit 'rm f1; printf "other\n" >f2'
    printf 'by hand\n' >>"$WS/f3"
    h undo 1 --json
    assert_status 123
    [ "$(pj 'sorted((c["path"], c["why"]) for c in d["conflicts"])')" = \
        "[('f1', 'deleted since'), ('f2', 'created again since, with other content'), ('f3', 'changed since outside txbox (by no recorded transaction)')]" ] ||
        fail "$output"
}

@test "a directory deleted and made again since: the old entries come back beside the new ones" {
    commit 'rm -rf docs/journeys'
    commit 'mkdir docs/journeys; printf "c\n" >docs/journeys/c.md'
    h undo 1
    assert_status 0
    [ "$(ls "$WS/docs/journeys" | tr '\n' ' ')" = "a.md b.md c.md " ] || fail "$(ls "$WS/docs/journeys")"
}

@test "a rename is a delete and an add: the added file changed since conflicts; restore brings the old name back" {
    commit 'mv notes.txt renamed.txt'
    commit 'printf "eight\n" >>renamed.txt'
    h undo 1 --json
    assert_status 123
    [ "$(pj '[(c["path"], c["why"]) for c in d["conflicts"]]')" = "[('renamed.txt', 'changed since, and the undone transaction had created it')]" ] ||
        fail "$output"
    h restore 1 -- notes.txt
    assert_status 0
    [ "$(wc -l <"$WS/notes.txt")" = 7 ] && [ "$(wc -l <"$WS/renamed.txt")" = 8 ] || fail "$(ls "$WS")"
}

@test "modes and symlinks: merged as values, a conflict when both sides changed them" {
    ln -s notes.txt "$WS/lnk"
    printf '#!/bin/sh\n' >"$WS/run.sh"
    commit 'chmod 0755 run.sh; ln -sfn README lnk; printf "x\n" >>run.sh'
    commit 'printf "y\n" >>notes.txt'
    h undo 1
    assert_status 0
    [ "$(stat -c %a "$WS/run.sh")" = 644 ] && [ "$(readlink "$WS/lnk")" = notes.txt ] || fail "$(ls -l "$WS")"
    h undo 3
    assert_status 0
    commit 'chmod 0700 run.sh; ln -sfn src lnk'
    h undo 1 --json
    assert_status 123
    [ "$(pj 'sorted((c["path"], c["why"]) for c in d["conflicts"])')" = \
        "[('lnk', 'the link was changed since'), ('run.sh', 'its permissions were changed since')]" ] || fail "$output"
    # a directory's mode, changed by both
    commit 'chmod 0700 docs'
    commit 'chmod 0750 docs'
    h undo 7 --json
    assert_status 123
    [ "$(pj '[(c["path"], c["why"], c["by"]) for c in d["conflicts"]]')" = "[('docs', 'its mode or owner was changed since', ['8'])]" ] ||
        fail "$output"
    h undo 8
    assert_status 0
    h undo 7
    assert_status 0
    [ "$(stat -c %a "$WS/docs")" = 755 ] || fail "$(stat -c %a "$WS/docs")"
}

@test "a file whose directory was deleted since conflicts; forced, the directory is made again" {
    commit 'printf "more\n" >>docs/journeys/a.md'
    commit 'rm -rf docs'
    h undo 1 --json
    assert_status 123
    [ "$(pj '[(c["path"], c["why"], c["by"]) for c in d["conflicts"]]')" = "[('docs/journeys/a.md', 'deleted since', ['2'])]" ] ||
        fail "$output"
    h undo 1 --force
    assert_status 0
    [ "$(cat "$WS/docs/journeys/a.md")" = j1 ] && [ ! -e "$WS/docs/journeys/b.md" ] || fail "$(find "$WS/docs")"
}

@test "restore of one path and of a directory, as a transaction that can be undone" {
    commit 'rm -rf docs/journeys; sed -i "s/^one$/ONE/" notes.txt'
    commit 'sed -i "s/^seven$/SEVEN/" notes.txt; printf "x\n" >docs/x.md'
    snap after2 "$WS" --mtime
    h restore 1 -- docs/journeys/a.md
    assert_status 0
    [[ "$stderr" == "txbox: tx 3 restored docs/journeys/a.md as before transaction 1 ("* ]] || fail "$stderr"
    [ "$(cat "$WS/docs/journeys/a.md")" = j1 ] && [ ! -e "$WS/docs/journeys/b.md" ] || fail "$(find "$WS/docs")"
    h restore 1 --json -- "$WS/docs/./journeys/"
    assert_status 0
    [ "$(pj '(d["restore_of"], d["paths"], sorted(d["changes"]["added"]))')" = "('1', ['docs/journeys'], ['docs/journeys/b.md'])" ] ||
        fail "$output"
    # a file changed since: restored exactly, the later edit replaced and said
    h restore 1 -- notes.txt
    assert_status 0
    [[ "$stderr" == *"replaced later changes to notes.txt (tx 2: changed since)"* ]] || fail "$stderr"
    [ "$(head -1 "$WS/notes.txt")" = one ] && [ "$(tail -1 "$WS/notes.txt")" = seven ] || fail "$(cat "$WS/notes.txt")"
    [ -e "$WS/docs/x.md" ] || fail "restore touched a path the transaction did not change"
    for t in 5 4 3; do
        h undo "$t"
        assert_status 0
    done
    assert_tree after2 "$WS" --mtime
}

@test "restore refuses a path the transaction did not change, and bad paths, with one line; nothing changes" {
    commit 'rm -rf docs/journeys'
    snap s "$WS" --mtime
    h restore 1 -- README
    assert_txbox_error
    [ "${stderr_lines[0]}" = "txbox: transaction 1 did not change README" ] || fail "$stderr"
    h restore 1 -- docs/journeys/zz.md
    assert_txbox_error
    h restore 1 --json -- docs/journeys/a.md README
    assert_txbox_error json
    for p in ../x /etc/passwd ''; do
        h restore 1 -- "$p"
        assert_txbox_error || fail "restore '$p'"
    done
    h restore 1
    assert_txbox_error
    h restore 99 -- x
    assert_txbox_error
    assert_tree s "$WS" --mtime
    h restore 1 -- .
    assert_status 0
    [ -f "$WS/docs/journeys/b.md" ]
    h restore 1 -- docs/journeys
    assert_txbox_error
    [[ "$stderr" == *"nothing to restore"* ]] || fail "$stderr"
}

@test "the MCP server's restore tool: paths back as before a transaction; bad arguments refused" {
    commit 'rm -rf docs/journeys'
    local init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
    printf '%s\n' "$init" \
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"restore","arguments":{"tx":"1","paths":["docs/journeys/a.md"]}}}' \
        '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"restore","arguments":{"tx":"1","paths":[]}}}' \
        '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"restore","arguments":{"tx":"1","paths":["README"]}}}' \
        >"$BATS_TEST_TMPDIR/requests"
    run --separate-stderr txbox_bin mcp -C "$WS" <"$BATS_TEST_TMPDIR/requests"
    assert_status 0
    local answers="$output"
    output="$(printf '%s\n' "$answers" | python3 -c 'import json,sys; print(json.dumps({d["id"]: d for d in map(json.loads, sys.stdin)}))')"
    [ "$(pj '(lambda r: (r["restore_of"], r["changes"]["added"]))(json.loads(d["2"]["result"]["content"][0]["text"]))')" = \
        "('1', ['docs/journeys/', 'docs/journeys/a.md'])" ] || fail "$answers"
    [[ "$(pj '(d["3"]["result"]["isError"], d["3"]["result"]["content"][0]["text"])')" == "(True, \"invalid arguments for restore: argument 'paths'"* ]] ||
        fail "$answers"
    [ "$(pj 'd["4"]["result"]["isError"]')" = True ] || fail "$answers"
    [[ "$(pj 'd["4"]["result"]["content"][0]["text"]')" == *"did not change README"* ]] || fail "$answers"
    [ "$(cat "$WS/docs/journeys/a.md")" = j1 ] && [ ! -e "$WS/docs/journeys/b.md" ] || fail "$(find "$WS/docs")"
}

@test "undo brings staged work back after a later git status refreshed the index" {
    # A later git status rewrites .git/index (its stat cache) without
    # changing what is staged: that is not a change to merge, and undo of
    # the loss must not stop at it as a conflict.
    staged_work_reset
    sleep 1.1 # past git's racy-timestamp window
    local before="$(stat -c %Y.%s.%i "$WS/.git/index")"
    commit 'touch notes.txt; git status --porcelain'
    [ "$before" != "$(stat -c %Y.%s.%i "$WS/.git/index")" ] ||
        fail "git status did not rewrite the index; the test cannot see the case"
    staged_work_back
}

@test "undo brings staged work back after a git status on the host, outside txbox" {
    # The next day: git status on the host first (it rewrites the index's
    # stat cache), then undo. The transaction recorded the entries of the
    # index it left, so a rewrite that kept them is no change.
    staged_work_reset
    sleep 1.1 # past git's racy-timestamp window
    local before="$(stat -c %Y.%s.%i "$WS/.git/index")"
    (cd "$WS" && git status --porcelain >/dev/null)
    [ "$before" != "$(stat -c %Y.%s.%i "$WS/.git/index")" ] ||
        fail "git status did not rewrite the index; the test cannot see the case"
    staged_work_back
    # a change of what is staged, made on the host, is still a conflict
    commit 'git reset -q --hard'
    (cd "$WS" && printf 'other\n' >other.txt && git add other.txt)
    h undo 3
    assert_status 123
    [[ "$stderr" == *".git/index"* ]] || fail "$stderr"
}
