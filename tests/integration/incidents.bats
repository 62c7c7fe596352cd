#!/usr/bin/env bats
# Real incidents, replayed. Each case is a data-loss report by a user of an
# agent CLI (Claude Code, Gemini CLI, Codex, Cursor, other agents), its
# source beside it, the agent's command as the report quotes it, and a
# workspace holding the kind of work the report says was lost. The rule
# every case checks (tests/incidents/README.md):
#
#   - run by a person at a terminal, the command is held (121) and nothing
#     of it is applied;
#   - run with no one to ask, nothing of the work is lost without a loss
#     report: the command commits and its result names the loss (and the
#     kinds the case expects), or it is held or refused with the workspace
#     unchanged;
#   - one command, `txbox undo`, brings the workspace back exactly.
#
# The cases need only `txbox undo` of the latest transaction.

bats_require_minimum_version 1.5.0
load ../lib/common
load ../lib/losses

FIXTURES="$REPO_DIR/tests/incidents/fixtures"

setup() {
    git_ws
}

# replay CMD [KIND...]: the rule above, for the agent's command CMD; each
# KIND must be among the kinds reported.
replay() {
    local cmd="$1" kind id
    shift
    command -v script >/dev/null || need "script(1) (util-linux) for a terminal"
    snap pre "$WS"
    # a person can answer: held, nothing applied
    at_terminal run -C "$WS" -c "$cmd"
    [ "$status" = 121 ] || fail "at a terminal: status $status, not held:" "$(clip "$output")"
    assert_tree pre "$WS"
    id="$(sed -n 's/.*txbox: tx \([0-9]*\) held for review.*/\1/p' <<<"$output" | head -n 1)"
    run --separate-stderr txbox_bin reject -C "$WS" "$id"
    assert_status 0
    assert_tree pre "$WS"
    # no one to ask: committed with the loss named, or not applied at all
    txj -c "$cmd"
    case "$(jget outcome)" in
    committed)
        [ "$(jget losses.count)" -gt 0 ] || fail "committed without a loss report:" "$(clip "$output")"
        for kind in "$@"; do
            losses_of | grep -q "^$kind " || fail "no loss of kind $kind: $(losses_of)"
        done
        run --separate-stderr txbox_bin undo -C "$WS"
        assert_status 0
        ;;
    held | rejected | rolled_back) ;;
    *) fail "outcome $(jget outcome)" "$(clip "$output")" ;;
    esac
    assert_tree pre "$WS"
}

# person_edits: uncommitted changes of a person to tracked files.
person_edits() {
    printf 'an afternoon of work\n' >>"$WS/a.txt"
    printf 'def g():\n    return 2\n' >>"$WS/lib.py"
}

# sqlite DB SQL...: runs statements on the workspace's database DB.
sqlite() {
    local db="$1"
    shift
    python3 - "$WS/$db" "$@" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for s in sys.argv[2:]:
    c.execute(s)
c.commit()
EOF
}

# claude-code: "Claude ran git reset --hard with full knowledge of unstaged
# tracked file modifications" -- https://github.com/anthropics/claude-code/issues/39859
@test "claude-code#39859: git reset --hard over unstaged changes" {
    person_edits
    replay 'git reset --hard' uncommitted
}

# claude-code: "To restore a WIP commit (ff0b0dd9), Claude Code then ran
# git reset --hard ff0b0dd9 without asking" after an earlier
# `reset: moving to HEAD^1` -- https://github.com/anthropics/claude-code/issues/84660
# (ff0b0dd9 is the WIP commit of this workspace)
@test "claude-code#84660: git reset --hard <WIP commit> over the changes made since" {
    printf 'wip\n' >"$WS/wip.txt"
    g add wip.txt
    g commit -qm WIP
    local wip
    wip="$(g rev-parse --short=8 HEAD)"
    g reset -q 'HEAD^1'
    person_edits
    replay "git reset --hard $wip" uncommitted
}

# claude-code: "ran git reset HEAD && git checkout -- . to unstage files --
# wiping all uncommitted changes" -- https://github.com/anthropics/claude-code/issues/70363
@test "claude-code#70363: git reset HEAD && git checkout -- . (staged and unstaged work)" {
    person_edits
    printf 'new page\n' >"$WS/page.tsx"
    g add page.tsx lib.py
    replay 'git reset HEAD && git checkout -- .' uncommitted
}

# claude-code: "the files erased by Claude Code after committing
# git reset --hard HEAD~1" -- https://github.com/anthropics/claude-code/issues/4541
@test "claude-code#4541: git reset --hard HEAD~1" {
    person_edits
    replay 'git reset --hard HEAD~1' uncommitted
}

# gemini-cli: "it executed 'git reset --hard HEAD~1'. This destroyed the
# user's uncommitted changes" -- https://github.com/google-gemini/gemini-cli/issues/5352
@test "gemini-cli#5352: rm -rf of its own directories, then git reset --hard HEAD~1" {
    mkdir -p "$WS/impl"
    printf 'x\n' >"$WS/impl/gen.py"
    person_edits
    replay 'rm -rf impl && git reset --hard HEAD~1' uncommitted
}

# gemini-cli: "I ran: git reset --hard origin/main. This command
# destructively discarded all uncommitted local changes" --
# https://github.com/google-gemini/gemini-cli/issues/15580
@test "gemini-cli#15580: git reset --hard origin/main" {
    g update-ref refs/remotes/origin/main 'HEAD~1'
    mkdir -p "$WS/src"
    printf 'int interpret(void) { return 0; }\n' >"$WS/src/interpreter.cpp"
    g add src/interpreter.cpp
    g commit -qm 'local work not pushed'
    printf '/* runtime safety fixes */\n' >>"$WS/src/interpreter.cpp"
    replay 'git reset --hard origin/main' uncommitted
}

# gemini-cli: "Gemini 3.1 pro decided to run git reset --hard HEAD in plan
# mode" -- https://github.com/google-gemini/gemini-cli/issues/25722
@test "gemini-cli#25722: git reset --hard HEAD" {
    person_edits
    replay 'git reset --hard HEAD' uncommitted
}

# gemini-cli: "executed a destructive git checkout ... resulting in the loss
# of all of my uncomitted work" -- https://github.com/google-gemini/gemini-cli/issues/22649
@test "gemini-cli#22649: git checkout . over the day's uncommitted work" {
    person_edits
    replay 'git checkout .' uncommitted
}

# an agent's session log: "git checkout -- dir used to revert a few damaged
# files, but wiped ALL unstaged changes in those directories" --
# https://github.com/Field-Guide/construction-inspector-tracking-app/issues/86
@test "Field-Guide#86: git checkout -- dir wipes every unstaged change in it" {
    mkdir -p "$WS/lib/screens"
    printf 'a\n' >"$WS/lib/screens/one.dart"
    printf 'b\n' >"$WS/lib/screens/two.dart"
    g add lib
    g commit -qm screens
    printf 'days of work\n' >>"$WS/lib/screens/one.dart"
    printf 'more work\n' >>"$WS/lib/screens/two.dart"
    replay 'git checkout -- lib' uncommitted
}

# an agent tool: "git clean -fd deletes ALL untracked project files on QA
# rejection" -- https://github.com/AndyMik90/Aperant/issues/1477
@test "Aperant#1477: git clean -fd deletes every untracked project file" {
    mkdir -p "$WS/src/feature"
    printf 'export const x = 1\n' >"$WS/src/feature/new.ts"
    printf '# plan\n' >"$WS/PLAN.md"
    replay 'git clean -fd' untracked
}

# an agent skill: "runs git reset HEAD -- . && git checkout -- . && git
# clean -fd ... Irrecoverable data loss" --
# https://github.com/kirich1409/krozov-ai-tools/issues/240
@test "krozov-ai-tools#240: git reset HEAD -- . && git checkout -- . && git clean -fd" {
    person_edits
    printf 'unrelated work\n' >"$WS/notes.md"
    replay 'git reset HEAD -- . && git checkout -- . && git clean -fd' uncommitted untracked
}

# mistral-vibe: "Ran ... git checkout main && git reset --hard upstream/main"
# -- https://github.com/mistralai/mistral-vibe/issues/557
@test "mistral-vibe#557: git checkout main && git reset --hard upstream/main" {
    g branch -M main
    g update-ref refs/remotes/upstream/main 'HEAD~1'
    person_edits
    replay 'git checkout main && git reset --hard upstream/main' uncommitted
}

# gemini-cli: "Shell rm -rf docs/journeys ... You deleted the files that
# weren't moved yet" -- https://github.com/google-gemini/gemini-cli/issues/1504
@test "gemini-cli#1504: rm -rf docs/journeys with stories not moved yet" {
    mkdir -p "$WS/docs/journeys/onboarding" "$WS/docs/stories"
    printf 'moved\n' >"$WS/docs/stories/a.md"
    printf 'orphaned story\n' >"$WS/docs/journeys/onboarding/b.md"
    printf 'another\n' >"$WS/docs/journeys/c.md"
    replay 'rm -rf docs/journeys' untracked
}

# claude-code: "Agent A pops stash after running test, but pop fails due to
# conflict ... Agent A drops the stash, deleting the uncommited WIP files"
# -- https://github.com/anthropics/claude-code/issues/50817
@test "claude-code#50817: git stash drop after a stash pop that failed" {
    person_edits
    g stash -q
    printf 'agent B changed it\n' >>"$WS/a.txt"
    g commit -qam 'agent B'
    run git -C "$WS" stash pop # conflicts: the entry stays
    g reset -q --hard
    replay 'git stash drop' stash
}

# claude-code: "I (Claude AI Assistant) executed a destructive database
# command (prisma migrate reset --force) that resulted in the complete
# deletion of all user data" -- https://github.com/anthropics/claude-code/issues/34729
# (prisma: tests/incidents/fixtures/prisma, the CLI's SQLite reset)
@test "claude-code#34729: prisma migrate reset --force" {
    mkdir -p "$WS/prisma/migrations/0001_init" "$WS/node_modules/.bin"
    cp "$FIXTURES/prisma" "$WS/node_modules/.bin/prisma"
    printf 'create table "User" (id integer primary key, email text);\n' \
        >"$WS/prisma/migrations/0001_init/migration.sql"
    sqlite prisma/dev.db 'create table "User" (id integer primary key, email text)'
    python3 - "$WS/prisma/dev.db" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.executemany('insert into "User"(email) values (?)', [("u%d@example.org" % i,) for i in range(2000)])
c.commit()
EOF
    PATH="$WS/node_modules/.bin:$PATH" replay 'prisma migrate reset --force' database
}

# claude-code: "init_db(conn)          # <- this line ... Python bound conn
# (a psycopg2 connection object, which is truthy) to the first parameter"
# (drop_existing) -- https://github.com/anthropics/claude-code/issues/74557
# (db/: tests/incidents/fixtures/db, the same signature over SQLite)
@test "claude-code#74557: a Python init_db that drops the tables" {
    cp -r "$FIXTURES/db" "$WS/db"
    (cd "$WS" && python3 -c 'from db.pg_init import init_db; init_db()')
    python3 - "$WS/app.db" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.executemany("insert into scanner(symbol, signal_tier) values (?, ?)", [("S%d" % i, "x" * 100) for i in range(3000)])
c.commit()
EOF
    replay 'python3 -c "
from db.pg_conn import get_conn
from db.pg_init import init_db
conn = get_conn()
init_db(conn)          # <- this line
conn.commit()
"' database
}

# claude-code: "Claude executed DROP TABLE poc_staging on a production
# database without asking" -- https://github.com/anthropics/claude-code/issues/21227
@test "claude-code#21227: DROP TABLE poc_staging" {
    sqlite poc.db 'create table poc_staging (id integer primary key, finder text)'
    python3 - "$WS/poc.db" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.executemany("insert into poc_staging(finder) values (?)", [("f" * 150,)] * 1508)
c.commit()
EOF
    replay "python3 -c \"import sqlite3; c = sqlite3.connect('poc.db'); c.execute('DROP TABLE poc_staging'); c.commit()\"" database
}

# gemini-cli: "Did not check all commits was pushed to origin ... did
# delete PERMANENTLY ... I lost several weeks of work" (git repository
# folders removed) -- https://github.com/google-gemini/gemini-cli/issues/19143
@test "gemini-cli#19143: rm -rf of a repository folder with commits never pushed" {
    mkdir -p "$WS/repos/tool-b"
    (
        cd "$WS/repos/tool-b"
        git init -q --template= .
        git config user.name tester
        git config user.email tester@example.org
        printf 'weeks of work\n' >main.go
        git add main.go
        git commit -qm 'not pushed'
    )
    replay 'rm -rf repos/tool-b' repository
}

# an agent's session cleanup: "force-deletes branches before anything was
# merged" -- https://github.com/tomcounsell/ai/issues/1646
@test "tomcounsell/ai#1646: git branch -D of a session branch never merged" {
    local c
    c="$(printf 'feat(image_gen): make gpt-image-1 the default provider\n' |
        g commit-tree "$(g rev-parse 'HEAD^{tree}')" -p HEAD)"
    g update-ref -m 'session work' refs/heads/session/dev-ec1e7c6e "$c"
    replay 'git branch -D session/dev-ec1e7c6e' branch
}

# an agent plugin: "runs git worktree remove --force followed by git
# branch -D, with no merge check and no confirmation" --
# https://github.com/anthropics/claude-plugins-official/issues/5665
@test "claude-plugins-official#5665: git worktree remove --force and git branch -D of a [gone] branch" {
    g worktree add -q .worktrees/b -b b
    printf 'committed on b\n' >"$WS/.worktrees/b/b.txt"
    git -C "$WS/.worktrees/b" add b.txt
    git -C "$WS/.worktrees/b" commit -qm 'work on b'
    printf 'work in progress\n' >>"$WS/.worktrees/b/a.txt"
    replay 'git worktree remove --force .worktrees/b && git branch -D b' uncommitted branch
}

# gh-pages set-up as an agent runs it (the commands of
# https://github.com/plorry/VegAssist/issues/27), over a person's
# uncommitted work: `git rm -rf .` removes modified files too
@test "VegAssist#27: git checkout --orphan gh-pages then git rm -rf . over uncommitted work" {
    person_edits
    replay 'git checkout --orphan gh-pages && git rm -rf -q .' uncommitted
}
