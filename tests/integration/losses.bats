#!/usr/bin/env bats
# Losses: what a commit destroys that exists nowhere else (docs/guarantees.md,
# "Losses"). Every commit measures it; the result, the status line, the
# audit log and `txbox show` carry it; the built-in rule work-lost (action
# ask) holds it when a person can answer at a terminal, and otherwise the
# commit goes on and says what was lost and that `txbox undo TX` brings it
# back. One test per kind of loss, then what is not a loss, the noise rule
# (the agent's own scratch work), the audit log, the policy matcher and
# failing closed.

bats_require_minimum_version 1.5.0
load ../lib/common
load ../lib/losses

setup() {
    git_ws
}

@test "uncommitted: git reset --hard discards changes; the line says what and how to get it back; undo restores them" {
    printf 'my work\n' >>"$WS/a.txt"
    snap pre "$WS"
    tx -c 'git reset -q --hard'
    assert_status 0
    [[ "$stderr" == *"committed ("* ]] || fail "$stderr"
    [[ "$stderr" == *"; destroyed uncommitted changes to 1 file ("*"): a.txt"* ]] || fail "status line: $stderr"
    local id
    id="$(sed -n 's/^txbox: tx \([0-9]*\) committed.*/\1/p' <<<"$stderr")"
    [[ "$stderr" == *"'txbox undo $id' brings it back"* ]] || fail "no way back named: $stderr"
    [ "$(cat "$WS/a.txt")" = "$(printf 'one\ntwo\nthree\nfour\nfive')" ]
    undo_latest
    [ "$(tail -n 1 "$WS/a.txt")" = "my work" ]
}

@test "uncommitted: git checkout -- . and a truncation are losses; an ordinary edit of a changed file is not" {
    printf 'my work\n' >>"$WS/a.txt"
    snap pre "$WS"
    txj -c 'git checkout -- .'
    assert_status 0
    assert_lost uncommitted a.txt
    [[ "$(jget losses.items.0.detail)" == "reset to the index's version"* ]] || fail "$(jget losses.items.0.detail)"
    undo_latest
    txj -c 'sed -i "s/two/TWO/" a.txt'
    assert_no_loss
    txj -c ': >a.txt'
    assert_lost uncommitted a.txt
    [ "$(jget losses.items.0.detail)" = emptied ]
}

@test "uncommitted: an older version put back over changes is a loss, however git wrote it; over a clean file none" {
    printf 'my work\n' >>"$WS/a.txt"
    snap pre "$WS"
    local cmd
    # HEAD~1's a.txt keeps most of the lines: no clobber by the lines kept
    for cmd in 'git restore --source=HEAD~1 a.txt' 'git show HEAD~1:a.txt >a.txt' \
        'git cat-file -p "$(git rev-parse HEAD~1:a.txt)" >a.txt' 'git checkout HEAD~1 -- a.txt'; do
        txj -c "$cmd"
        assert_status 0
        assert_lost uncommitted a.txt
        [[ "$(jget losses.items.0.detail)" == "an older version from git's history put back"* ||
            ("$cmd" == *checkout* && "$(jget losses.items.0.detail)" == "reset to the index's version"*) ]] ||
            fail "$cmd: $(jget losses.items.0.detail)"
        undo_latest
    done
    # the work stashed first is held by git: none
    txj -c 'git stash -q && git stash apply -q && git show HEAD~1:a.txt >a.txt'
    assert_status 0
    assert_no_loss
    undo_latest
    # over a clean file: HEAD holds what it replaced
    g checkout -q -- a.txt
    txj -c 'git show HEAD~1:a.txt >a.txt'
    assert_status 0
    assert_no_loss
}

@test "untracked: git clean -fd deletes untracked files; ignored build products and caches are not losses" {
    mkdir -p "$WS/docs/journeys" "$WS/build" "$WS/node_modules/x"
    printf 'notes\n' >"$WS/notes.md"
    printf 'journey\n' >"$WS/docs/journeys/one.md"
    printf 'obj\n' >"$WS/main.o"
    printf 'out\n' >"$WS/build/out"
    printf 'dep\n' >"$WS/node_modules/x/index.js"
    snap pre "$WS"
    txj -c 'git clean -fdx'
    assert_status 0
    assert_lost untracked notes.md
    assert_lost untracked docs/journeys/one.md
    [ "$(jget losses.count)" = 2 ] || fail "only the two person's files: $(losses_of)"
    [ ! -e "$WS/notes.md" ]
    undo_latest
}

@test "untracked: files of secrets git ignores (.env, a key) are losses; installed packages and .env.example are not" {
    mkdir -p "$WS/config" "$WS/venv/lib/python3/site-packages/certifi"
    printf '.env*\n*.key\nvenv/\n' >>"$WS/.gitignore"
    g commit -qam 'ignore secrets'
    printf 'API_KEY=mine\n' >"$WS/.env"
    printf 'KEY=\n' >"$WS/.env.example"
    printf 'private\n' >"$WS/config/master.key"
    printf 'certs\n' >"$WS/venv/lib/python3/site-packages/certifi/cacert.pem"
    printf 'obj\n' >"$WS/main.o"
    snap pre "$WS"
    txj -c 'git clean -fdX'
    assert_status 0
    [ ! -e "$WS/.env" ] && [ ! -e "$WS/venv" ] && [ ! -e "$WS/main.o" ]
    assert_lost untracked .env
    assert_lost untracked config/master.key
    [ "$(jget losses.count)" = 2 ] || fail "only the two files of secrets: $(losses_of)"
    [[ "$(jget losses.items.0.detail)" == *"holds secrets"* ]] || fail "$(jget losses.items.0.detail)"
    undo_latest
    [ "$(cat "$WS/.env")" = "API_KEY=mine" ]
    # overwritten: the same
    txj -c 'echo API_KEY= >.env'
    assert_lost untracked .env
}

@test "staged: git reset --hard drops a staged change; undo gives the index back" {
    printf 'staged\n' >"$WS/new.txt"
    printf 'six\n' >>"$WS/a.txt"
    g add new.txt a.txt
    snap pre "$WS"
    txj -c 'git reset -q --hard'
    assert_status 0
    assert_lost staged new.txt
    assert_lost staged a.txt
    # --no-optional-locks: a status that refreshed the index would be a
    # change made outside txbox, which undo does not overwrite
    [ -z "$(g --no-optional-locks status --porcelain)" ] || fail "the reset did not happen"
    undo_latest
    [ "$(g diff --cached --name-only | sort | tr '\n' ' ')" = "a.txt new.txt " ] || fail "$(g status)"
}

@test "stash: git stash drop loses an entry; git stash and git stash pop lose nothing" {
    printf 'stashed work\n' >>"$WS/a.txt"
    txj -c 'git stash -q'
    assert_status 0
    assert_no_loss
    txj -c 'git stash pop -q'
    assert_status 0
    assert_no_loss
    g stash -q
    snap pre "$WS"
    txj -c 'git stash drop -q'
    assert_status 0
    assert_lost stash 'stash@{0}'
    [ -z "$(g stash list)" ]
    undo_latest
    [ -n "$(g stash list)" ] || fail "the stash entry is not back"
}

@test "history: commits only reflogs kept, expired and pruned, are lost: kind history with their count" {
    g reset -q --hard HEAD~1 # the second commit: now in reflogs only
    snap pre "$WS"
    txj -c 'git reflog expire --expire=now --all && git gc -q --prune=now'
    assert_status 0
    assert_lost history .git
    [ "$(jget losses.items.0.commits)" = 1 ] || fail "$(clip "$output")"
    undo_latest
    g cat-file -e "$(g reflog -1 --format=%H 'HEAD@{1}')" || fail "the commit is not back"
}

@test "branch: git branch -D of a branch whose commits no other ref or reflog has; -D of a merged one is none" {
    # a commit on 'feature' only: made without checking it out (no HEAD reflog)
    local c
    c="$(printf 'feature\n' | g commit-tree "$(g rev-parse 'HEAD^{tree}')" -p HEAD)"
    g update-ref -m 'feature work' refs/heads/feature "$c"
    g branch merged HEAD
    txj -c 'git branch -q -D merged'
    assert_no_loss
    snap pre "$WS"
    txj -c 'git branch -q -D feature'
    assert_status 0
    assert_lost branch refs/heads/feature
    undo_latest
    [ "$(g rev-parse feature)" = "$c" ]
}

# The usual way to lose a branch: made, checked out, committed on, left,
# deleted. Its commits stay in HEAD's reflog, which expires and which
# nobody reads: git itself calls the branch "not fully merged".
@test "branch: git branch -D of a branch once checked out (its commits only in HEAD's reflog); -m and merged ones are none" {
    g checkout -q -b feature
    printf 'feature work\n' >"$WS/f.txt"
    g add f.txt
    g commit -qm 'feature work'
    local c
    c="$(g rev-parse HEAD)"
    g checkout -q -
    g branch merged HEAD
    txj -c 'git branch -q -m merged renamed && git branch -q -D renamed'
    assert_no_loss
    snap pre "$WS"
    txj -c 'git branch -q -D feature'
    assert_status 0
    assert_lost branch refs/heads/feature
    [[ "$(jget losses.items.0.detail)" == "branch feature deleted with 1 commit no other branch or tag has"*"only a reflog still names it" ]] ||
        fail "$(jget losses.items.0.detail)"
    [ "$(jget losses.items.0.commits)" = 1 ] || fail "$(clip "$output")"
    undo_latest
    [ "$(g rev-parse feature)" = "$c" ]
}

@test "branch: a branch moved back past commits no other branch has (reset --hard HEAD~1, branch -f); commit --amend is none" {
    local tip
    tip="$(g rev-parse HEAD)"
    txj -c 'git commit -q --amend -m "second, reworded"'
    assert_no_loss
    txj -c 'git reset -q --hard HEAD~1 && git branch -q keep "HEAD@{1}" && git reset -q --hard keep && git branch -q -D keep'
    assert_no_loss
    snap pre "$WS"
    txj -c 'git reset -q --hard HEAD~1'
    assert_status 0
    local br
    br="$(g symbolic-ref HEAD)"
    assert_lost branch "$br"
    [[ "$(jget losses.items.0.detail)" == "branch ${br#refs/heads/} moved off 1 commit no other branch or tag has"* ]] ||
        fail "$(jget losses.items.0.detail)"
    undo_latest
    [ "$(g log -1 --format=%s)" = "second, reworded" ]
    [ "$(g rev-parse HEAD)" != "$tip" ] || fail "the amend was not kept"
    g branch side HEAD~1
    txj -c 'git branch -q -f side HEAD'
    assert_no_loss # a fast-forward
    local c
    c="$(printf 'side work\n' | g commit-tree "$(g rev-parse 'HEAD^{tree}')" -p HEAD)"
    g update-ref -m 'side work' refs/heads/side "$c"
    txj -c 'git branch -q -f side HEAD~1'
    assert_lost branch refs/heads/side
}

# Work done on a detached HEAD, then left: git says "you are leaving 1
# commit behind, not connected to any of your branches".
@test "branch: a detached HEAD moved off commits no branch has is a loss; a checkout from a branch is none" {
    local br c
    br="$(g symbolic-ref --short HEAD)"
    g branch other HEAD~1
    txj -c 'git checkout -q other && git checkout -q -'
    assert_no_loss
    g checkout -q --detach
    printf 'detached work\n' >"$WS/d.txt"
    g add d.txt
    g commit -qm 'detached work'
    c="$(g rev-parse HEAD)"
    snap pre "$WS"
    txj -c "git checkout -q $br"
    assert_status 0
    assert_lost branch HEAD
    [[ "$(jget losses.items.0.detail)" == "HEAD, detached, left 1 commit no other branch or tag has"* ]] ||
        fail "$(jget losses.items.0.detail)"
    undo_latest
    [ "$(g rev-parse HEAD)" = "$c" ]
    # left for a commit the transaction made: a rewrite
    txj -c 'git commit -q --amend -m "detached work, reworded"'
    assert_no_loss
}

@test "branch: a tag deleted or moved that alone kept commits is a loss; a tag on a branch's commit is none" {
    local br c
    br="$(g symbolic-ref --short HEAD)"
    g tag on-branch HEAD~1
    txj -c 'git tag -d on-branch'
    assert_no_loss
    g checkout -q --detach
    printf 'release fix\n' >"$WS/r.txt"
    g add r.txt
    g commit -qm 'release fix'
    c="$(g rev-parse HEAD)"
    g tag -a -m 'the release' v1.0.1
    g checkout -q "$br"
    snap pre "$WS"
    txj -c 'git tag -d v1.0.1'
    assert_status 0
    assert_lost branch refs/tags/v1.0.1
    [[ "$(jget losses.items.0.detail)" == "tag v1.0.1 deleted with 1 commit no other branch or tag has"* ]] ||
        fail "$(jget losses.items.0.detail)"
    undo_latest
    [ "$(g rev-parse 'v1.0.1^{commit}')" = "$c" ]
    tx -c 'git tag -d v1.0.1'
    [[ "$stderr" == *"from 1 branch or tag"*"refs/tags/v1.0.1 (1 commit)"* ]] || fail "$stderr"
    undo_latest
    [ "$(g rev-parse 'v1.0.1^{commit}')" = "$c" ]
    txj -c 'git tag -f -a -m moved v1.0.1 HEAD'
    assert_lost branch refs/tags/v1.0.1
    [[ "$(jget losses.items.0.detail)" == "tag v1.0.1 moved off 1 commit"* ]] || fail "$(jget losses.items.0.detail)"
}

@test "repository: rm -rf .git is a loss of the repository" {
    snap pre "$WS"
    txj -c 'rm -rf .git'
    assert_status 0
    assert_lost repository .git
    undo_latest
    [ "$(g log --format=%s | tr '\n' ' ')" = "second first " ]
}

@test "database: tables dropped in a SQLite file are a loss; an insert is ordinary use" {
    python3 -c '
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("create table users(id integer primary key, name text)")
c.executemany("insert into users(name) values (?)", [("x" * 200,)] * 500)
c.commit()' "$WS/app.db"
    txj -c "python3 -c \"import sqlite3; c = sqlite3.connect('app.db'); c.execute('insert into users(name) values (1)'); c.commit()\""
    assert_status 0
    assert_no_loss
    snap pre "$WS"
    txj -c "python3 -c \"import sqlite3; c = sqlite3.connect('app.db'); c.execute('drop table users'); c.execute('create table users(id integer primary key, name text)'); c.commit()\""
    assert_status 0
    assert_lost database app.db
    undo_latest
    [ "$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("select count(*) from users").fetchone()[0])' "$WS/app.db")" = 501 ]
}

# db_files: databases git ignores, made as their engines lay them out (the
# header bytes or the file the server keeps at the top of its directory),
# and an ignored build directory.
db_files() {
    printf '*.duckdb\n*.mdb\npgdata/\ndata/\n' >>"$WS/.gitignore"
    g commit -qam 'ignore the databases'
    mkdir -p "$WS/pgdata/base/1" "$WS/data/index" "$WS/build"
    python3 - "$WS" <<'PY'
import os, struct, sys
ws = sys.argv[1]
def put(p, b):
    with open(os.path.join(ws, p), "wb") as f:
        f.write(b)
put("app.duckdb", bytes(8) + b"DUCK" + os.urandom(4084))  # DuckDB: its magic after a checksum
put("cache.mdb", bytes(16) + struct.pack("<I", 0xBEEFC0DE) + os.urandom(8172))  # LMDB's meta page
put("pgdata/PG_VERSION", b"16\n")
put("pgdata/base/1/1259", os.urandom(8192))
put("data/index/CURRENT", b"MANIFEST-000002\n")  # LevelDB/RocksDB
put("data/index/000003.log", os.urandom(4096))
put("build/out.bin", os.urandom(4096))
PY
}

@test "database: another engine's file or a database server's directory, ignored by git, deleted is a loss; a build directory is not" {
    db_files
    snap pre "$WS"
    txj -c 'rm -rf app.duckdb cache.mdb pgdata data build'
    assert_status 0
    [ ! -e "$WS/pgdata" ] && [ ! -e "$WS/build" ]
    assert_lost database app.duckdb
    assert_lost database cache.mdb
    assert_lost database pgdata/base/1/1259
    assert_lost database pgdata/PG_VERSION
    assert_lost database data/index/000003.log
    ! losses_of | grep -q build/ || fail "an ignored build product counted: $(losses_of)"
    local details
    details="$(printf '%s' "$output" | python3 -c '
import json, sys
for it in json.load(sys.stdin)["losses"]["items"]:
    print(it["path"], "=", it["detail"])')"
    grep -qxF 'app.duckdb = a DuckDB database deleted' <<<"$details" || fail "$details"
    grep -qxF 'pgdata/base/1/1259 = a file of a PostgreSQL database deleted' <<<"$details" || fail "$details"
    grep -qxF 'data/index/000003.log = a file of a LevelDB/RocksDB database deleted' <<<"$details" || fail "$details"
    undo_latest
}

@test "database: a server's files removed below its directory are a loss; written in place is its use, emptied a loss" {
    db_files
    snap pre "$WS"
    txj -c 'rm -rf pgdata/base'
    assert_status 0
    assert_lost database pgdata/base/1/1259
    undo_latest
    # a page written in place, a DuckDB file grown: the engines at work
    txj -c 'printf x | dd of=pgdata/base/1/1259 bs=1 seek=100 conv=notrunc status=none && head -c 4096 /dev/urandom >>app.duckdb'
    assert_status 0
    assert_no_loss
    snap pre "$WS"
    txj -c ': >app.duckdb'
    assert_status 0
    assert_lost database app.duckdb
    [ "$(jget losses.items.0.detail)" = "a DuckDB database emptied" ] || fail "$(jget losses.items.0.detail)"
    undo_latest
    # a CURRENT file that names no manifest marks no database
    printf 'v2\n' >"$WS/build/CURRENT"
    txj -c 'rm -rf build'
    assert_status 0
    assert_no_loss
}

@test "ordinary work loses nothing: new files, edits, git add and commit, a move, a clean tracked file deleted" {
    txj -c 'printf "x\n" >new.txt && mkdir -p src && printf "y\n" >src/m.py'
    assert_no_loss
    txj -c 'sed -i "s/one/ONE/" a.txt && printf "more\n" >>lib.py'
    assert_no_loss
    txj -c 'git add -A && git commit -qm work'
    assert_status 0
    assert_no_loss
    txj -c 'mv new.txt renamed.txt && mv src source'
    assert_no_loss
    txj -c 'rm lib.py'
    assert_no_loss
}

@test "the agent's own scratch file, deleted, is reported and not held; a person's file is held at a terminal, approve commits it" {
    command -v script >/dev/null || need "script(1) (util-linux) for a terminal"
    txj -c 'printf "scratch\n" >scratch.txt'
    assert_status 0
    at_terminal run -C "$WS" -c 'rm scratch.txt'
    [ "$status" = 0 ] || fail "status $status: $output"
    [[ "$output" == *"committed"*"destroyed 1 untracked file"*"scratch.txt"* ]] || fail "$output"
    [ ! -e "$WS/scratch.txt" ]
    run --separate-stderr txbox_bin show -C "$WS" --json "$(txbox_bin log -C "$WS" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["tx"])')"
    [ "$(jget losses.items.0.own)" = true ] || fail "not the agent's own: $(clip "$output")"
    # a file no transaction wrote: the person's
    printf 'mine\n' >"$WS/person.txt"
    at_terminal run -C "$WS" -c 'rm person.txt'
    [ "$status" = 121 ] || fail "status $status: $output"
    [[ "$output" == *"held for review by effect rule work-lost"*"untracked 1"* ]] || fail "$output"
    [ -e "$WS/person.txt" ]
    local id
    id="$(sed -n 's/.*tx \([0-9]*\) held for review.*/\1/p' <<<"$output" | head -n 1)"
    run --separate-stderr txbox_bin approve -C "$WS" "$id"
    assert_status 0
    [ ! -e "$WS/person.txt" ]
}

@test "outside git: a file no transaction wrote, deleted, is a loss; without a terminal it commits with the loss in the line" {
    rm -rf "$WS/.git"
    printf 'draft\n' >"$WS/draft.md"
    snap pre "$WS"
    tx -c 'rm draft.md'
    assert_status 0
    [[ "$stderr" == *"destroyed 1 untracked file (6 bytes): draft.md"* ]] || fail "$stderr"
    undo_latest
}

@test "git status only refreshes the index: not reported as a change" {
    touch "$WS/a.txt" "$WS/lib.py" # stat data git must refresh
    txj -c 'git status --short'
    assert_status 0
    [ -z "$(jget changes.modified)" ] || fail "reported: $(jget changes.modified)"
    assert_no_loss
}

@test "the audit log and txbox show carry the losses, and the bytes lost in a column of their own" {
    printf 'my work\n' >>"$WS/a.txt"
    txj -c 'git reset -q --hard'
    local id bytes
    id="$(jget tx)"
    bytes="$(jget losses.bytes)"
    [ "$bytes" -gt 0 ]
    run --separate-stderr txbox_bin show -C "$WS" --json "$id"
    assert_status 0
    [ "$(jget losses.items.0.kind)" = uncommitted ] || fail "$(clip "$output")"
    [ "$(jget lost_bytes)" = "$bytes" ] || fail "lost_bytes $(jget lost_bytes), want $bytes"
    run --separate-stderr txbox_bin show -C "$WS" "$id"
    [[ "$output" == *"losses "*"uncommitted a.txt"* ]] || fail "$output"
    run --separate-stderr txbox_bin log -C "$WS" --json
    [ "$(printf '%s' "$output" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["lost_bytes"])')" = "$bytes" ]
}

@test "policy: a losses rule with rollback rejects; losses_grace: 0 counts the agent's own work; a bad kind is one clear error" {
    local pol="$BATS_TEST_TMPDIR/policy.yaml"
    cat >"$pol" <<'EOF'
version: 1
effects:
  - id: keep-untracked
    action: rollback
    reason: destroys an untracked file
    suggestion: keep it
    match:
      losses: [untracked]
      losses_grace: 0
    examples:
      match: [{losses: [untracked]}, {own_losses: [untracked]}]
      no_match: [{losses: [stash]}]
EOF
    txj --policy "$pol" -c 'printf "scratch\n" >s.txt'
    snap pre "$WS"
    txj --policy "$pol" -c 'rm s.txt'
    assert_status 122
    assert_outcome rejected
    assert_json_field effect_rule keep-untracked
    assert_tree pre "$WS"
    sed -i 's/losses: \[untracked\]$/losses: [untracked, lost-in-space]/' "$pol"
    tx --policy "$pol" -c 'true'
    assert_status 125
    [ "${#stderr_lines[@]}" = 1 ] || fail "$stderr"
    [[ "$stderr" == *"'lost-in-space' is no kind of loss"* ]] || fail "$stderr"
}

@test "fail closed: an index txbox cannot read makes a deleted file count as lost, unverified" {
    printf 'garbage\n' >"$WS/.git/index"
    txj -c 'rm lib.py'
    assert_status 0
    assert_lost uncommitted lib.py
    [ "$(jget losses.items.0.unverified)" = true ] || fail "$(clip "$output")"
}

@test "a workspace that is a linked worktree of a repository elsewhere: its losses are read from that repository" {
    local main="$BATS_TEST_TMPDIR/main"
    mv "$WS" "$main"
    git -C "$main" worktree add -q "$WS" -b wt
    printf 'my work\n' >>"$WS/a.txt"
    printf 'draft\n' >"$WS/draft.md"
    txj -c 'rm a.txt lib.py draft.md'
    assert_status 0
    assert_lost uncommitted a.txt
    assert_lost untracked draft.md
    [ "$(jget losses.count)" = 2 ] || fail "lib.py is git's: $(losses_of)"
    printf '%s' "$output" | python3 -c '
import json, sys
for it in json.load(sys.stdin)["losses"]["items"]:
    assert not it.get("unverified"), it' || fail "unverified: $(clip "$output")"
}

@test "a bare repository in the workspace: git gc there loses nothing; removing it is a loss" {
    git clone -q --bare "$WS" "$WS/mirror.git"
    txj -c 'git --git-dir=mirror.git gc -q'
    assert_status 0
    assert_no_loss
    txj -c 'rm -rf mirror.git'
    assert_lost repository mirror.git
}

@test "a multi-command transaction's commit measures its losses too: the line, the result, the log, and undo" {
    printf 'my work\n' >>"$WS/a.txt"
    printf 'notes\n' >"$WS/notes.md"
    run --separate-stderr txbox_bin begin -C "$WS"
    assert_status 0
    local id="$output"
    run --separate-stderr txbox_bin run -C "$WS" --tx "$id" -c 'git checkout -- a.txt'
    assert_status 0
    run --separate-stderr txbox_bin run -C "$WS" --tx "$id" -c 'rm notes.md; echo new >new.txt'
    assert_status 0
    run --separate-stderr txbox_bin commit -C "$WS" "$id"
    assert_status 0
    [[ "$stderr" == *"tx $id committed ("*"; destroyed uncommitted changes to 1 file ("*"): a.txt"* ]] ||
        fail "status line: $stderr"
    [[ "$stderr" == *"destroyed 1 untracked file ("*"): notes.md"* ]] || fail "status line: $stderr"
    [[ "$stderr" == *"'txbox undo $id' brings it back"* ]] || fail "no way back named: $stderr"
    run --separate-stderr txbox_bin show -C "$WS" --json "$id"
    assert_status 0
    [[ "$output" == *'"losses":{"count":2'* ]] || fail "not in the log: $output"
    run --separate-stderr txbox_bin undo -C "$WS" "$id"
    assert_status 0
    [ "$(tail -n 1 "$WS/a.txt")" = "my work" ] && [ "$(cat "$WS/notes.md")" = notes ] || fail "not back"
    [ ! -e "$WS/new.txt" ]
}

@test "through MCP: run's and a transaction's commit answers name what was lost and the undo tool call" {
    printf 'my work\n' >>"$WS/a.txt"
    run --separate-stderr timeout 120 python3 - "$TXBOX" "$WS" <<'PY'
import json, subprocess, sys
p = subprocess.Popen([sys.argv[1], "mcp", "-C", sys.argv[2]], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
ids = iter(range(1, 100))
def call(method, params):
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}) + "\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())
call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
p.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
def tool(name, **a):
    return call("tools/call", {"name": name, "arguments": a})["result"]["content"][0]["text"].splitlines()[0]
print(tool("run", command="git checkout -- a.txt"))
open(sys.argv[2] + "/a.txt", "a").write("more work\n")
tx = json.loads(call("tools/call", {"name": "begin", "arguments": {}})["result"]["content"][0]["text"].splitlines()[-1])["transaction"]
print(tool("run", command="git reset -q --hard", tx=tx))
print(tool("commit", tx=tx))
p.stdin.close()
sys.exit(p.wait())
PY
    assert_status 0
    [[ "${lines[0]}" =~ ^committed\ tx\ ([0-9]+)\ .*\;\ LOST\ uncommitted\ changes\ to\ 1\ file\ \(.*\):\ a\.txt\;\ to\ bring\ it\ back\ call\ the\ \`undo\`\ tool\ with\ tx\ \"([0-9]+)\"$ ]] ||
        fail "run's line: ${lines[0]}"
    [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] || fail "undo names another tx: ${lines[0]}"
    [[ "${lines[2]}" =~ ^committed\ transaction\ ([0-9]+)\ .*\;\ LOST\ uncommitted\ changes\ to\ 1\ file\ \(.*\):\ a\.txt\;\ to\ bring\ it\ back\ call\ the\ \`undo\`\ tool\ with\ tx\ \"([0-9]+)\"$ ]] ||
        fail "commit's line: ${lines[2]}"
    [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] || fail "undo names another tx: ${lines[2]}"
    run --separate-stderr txbox_bin undo -C "$WS" "${BASH_REMATCH[1]}"
    assert_status 0
    [ "$(tail -n 1 "$WS/a.txt")" = "more work" ] || fail "undo did not bring the second loss back: $(cat "$WS/a.txt")"
}

# ---- in a session: git's warm reader (the steward's) ----

teardown() {
    [ -z "${SID:-}" ] || "$TXBOX" session end -C "$WS" "$SID" >/dev/null 2>&1 || true
}

# reader FIELD: what the status of session $SID says of its warm reader
# of git (state, started, pid).
reader() {
    "$TXBOX" session status -C "$WS" "$SID" --json |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["git_reader"].get(sys.argv[1], ""))' "$1"
}

# stxw ARGS...: txj in the session $SID, with the phases' timing on stderr
# (TXBOX_TIMING): $warm says whether the warm reader answered git's part.
stxw() {
    TXBOX_TIMING=1 txj --session "$SID" "$@"
    warm=no
    [[ "$stderr" != *"losses:warm"* ]] || warm=yes
}

@test "in a session, the steward's warm reader of git judges losses as a commit's own child does" {
    printf '.env\nnode_modules/\n' >>"$WS/.gitignore"
    g commit -qam 'ignore more'
    g rm -q --cached lib.py # untracked now, its content HEAD's
    mkdir -p "$WS/build" "$WS/scratch" "$WS/node_modules/p"
    printf 'draft\n' >"$WS/notes.txt"
    printf 'obj\n' >"$WS/x.o"
    printf 'out\n' >"$WS/build/out.o"
    printf 'mine\n' >"$WS/scratch/s.txt"
    printf 'KEY=1\n' >"$WS/.env"
    printf 'dep\n' >"$WS/node_modules/p/i.js"
    local odd alone="$BATS_TEST_TMPDIR/alone" ci pid warm answered=0
    odd="$(printf 'odd-\xff.txt')"
    printf 'odd\n' >"$WS/$odd"
    cp -a "$WS" "$alone"
    SID="$("$TXBOX" session start -C "$WS")" || fail "session start failed"
    # each command in the session, and alone on the copy: the losses each
    # of them is known to have, the same in both
    local cmds=('echo r1 >notes.txt; echo r1 >x.o' 'echo r2 >notes.txt' 'git clean -fdq scratch; rm -rf build'
        'rm -f .env; rm -rf node_modules' 'echo mine >lib.py' 'echo r3 >notes.txt; echo r3 >x.o')
    local want=('untracked notes.txt' 'untracked notes.txt' 'untracked scratch/s.txt' 'untracked .env' ''
        'untracked notes.txt')
    for ci in "${!cmds[@]}"; do
        run --separate-stderr txbox_bin run -C "$alone" --json -c "${cmds[ci]}"
        check_run_json
        assert_status 0
        [ "$(losses_of)" = "${want[ci]}" ] || fail "${cmds[ci]}: alone '$(losses_of)', not '${want[ci]}'"
        stxw -c "${cmds[ci]}"
        assert_status 0
        [ "$(losses_of)" = "${want[ci]}" ] || fail "${cmds[ci]}: in the session '$(losses_of)', not '${want[ci]}'"
        [ "$warm" = no ] || answered=$((answered + 1))
        [ "$ci" != 0 ] || pid="$(reader pid)"
    done
    [ "$(cat "$WS/notes.txt")" = r3 ] && [ ! -e "$WS/.env" ] && [ ! -e "$WS/build" ] || fail "not committed"
    # the first question started the reader; it answered every other one
    [ "$answered" -ge $((${#cmds[@]} - 1)) ] || fail "the warm reader answered $answered of ${#cmds[@]} questions"
    [ -n "$pid" ] && [ "$(reader pid)" = "$pid" ] && [ "$(reader started)" = 1 ] ||
        fail "not one reader for all: $pid, then $(reader pid), $(reader started) started"
    # a name that is not UTF-8: the commit's own child, with the same answer
    stxw -c "echo x >'$odd'"
    assert_status 0
    [ "$(jget losses.count)" = 1 ] || fail "the odd name's loss: $(losses_of)"
    [ "$warm" = no ] || fail "a question the reader cannot take was asked of it"
}

@test "in a session, a warm reader killed is replaced; the losses stay right; none outlives the session" {
    printf 'draft\n' >"$WS/notes.txt"
    SID="$("$TXBOX" session start -C "$WS")" || fail "session start failed"
    local pid warm
    stxw -c 'echo 1 >notes.txt'
    assert_lost untracked notes.txt
    pid="$(reader pid)"
    [ -n "$pid" ] && kill -0 "$pid" || fail "no warm reader after the first question"
    stxw -c 'echo 2 >notes.txt'
    assert_lost untracked notes.txt
    [ "$warm" = yes ] || fail "the reader did not answer: $(clip "$stderr")"
    kill -9 "$pid"
    # the next commit finds none listening: its own child, and a new reader
    stxw -c 'echo 3 >notes.txt'
    assert_status 0
    assert_lost untracked notes.txt
    [ "$warm" = no ] || fail "a killed reader answered"
    stxw -c 'echo 4 >notes.txt'
    assert_lost untracked notes.txt
    [ "$warm" = yes ] || fail "no new reader answered: $(clip "$stderr")"
    [ "$(reader pid)" != "$pid" ] && [ "$(reader started)" = 2 ] || fail "not replaced: $(reader pid)"
    pid="$(reader pid)"
    [ "$(sed -n 's/^State:\s*\(.\).*/\1/p' "/proc/$pid/status")" = S ] || fail "no new reader waiting"
    "$TXBOX" session end -C "$WS" "$SID" >/dev/null
    SID=
    ! kill -0 "$pid" 2>/dev/null || fail "the warm reader $pid outlived its session"
}
