#!/usr/bin/env bats
# Git configuration and hooks judged by git's own reading (issue 20, part
# 3). A transaction that makes git on the host run a program later (a
# setting in any scope of any repository of the workspace, through includes
# and conditional includes, or a hook of any repository) is held, with the
# key named; after `txbox reject`, plain git commands on the host run
# nothing planted. Harmless settings and ordinary commits are not held.

bats_require_minimum_version 1.5.0
load ../lib/common

# A workspace that is a git repository with one commit.
gitrepo() {
    local d="$1"
    mkdir -p "$d"
    (
        set -e
        cd "$d"
        printf 'hello\n' >README
        printf 'int main(void) { return 0; }\n' >main.c
        hgit_in "$d" init -q
        hgit_in "$d" add -A
        hgit_in "$d" commit -qm init
    )
}

# git as the host runs it, without the tester's own configuration.
hgit_in() {
    local d="$1"
    shift
    env -u GIT_DIR -u GIT_WORK_TREE GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null \
        GIT_EDITOR=true git -C "$d" -c user.name=t -c user.email=t@example.com "$@"
}
hgit() { hgit_in "$WS" "$@"; }

setup() {
    POPULATE=gitrepo new_ws
    MARK="$BATS_TEST_TMPDIR/planted-ran"
    EVIL="$BATS_TEST_TMPDIR/evil"
    printf '#!/bin/sh\ntouch "%s"\ncat >/dev/null 2>&1\nexit 0\n' "$MARK" >"$EVIL"
    chmod 0755 "$EVIL"
}

# held KEY: the last run was held by rule git-config-exec (or $2), its
# reason naming KEY; nothing reached the workspace.
assert_held() {
    assert_status 121
    assert_outcome held
    assert_json_field effect_rule "${2:-git-config-exec}"
    [[ "$(jget reason)" == *"$1"* ]] || fail "reason does not name $1: $(jget reason)"
}

# Reject the last held run, then use git on the host as a person would:
# nothing planted runs.
reject_and_use_git() {
    local tx
    tx="$(jget tx)"
    run --separate-stderr txbox_bin reject -C "$WS" "$tx"
    assert_status 0
    printf 'more\n' >>"$WS/README"
    hgit status >/dev/null 2>&1 || true
    hgit diff >/dev/null 2>&1 || true
    hgit add -A >/dev/null 2>&1 || true
    hgit commit -qm host >/dev/null 2>&1 </dev/null || true
    hgit log -1 -p >/dev/null 2>&1 || true
    [ ! -e "$MARK" ] || fail "a plain git command on the host ran the planted program"
}

@test "include.path to a file setting core.hooksPath: held, names the include and the key" {
    txj -c "git config include.path ../gitcfg && printf '[core]\\n\\thooksPath = $BATS_TEST_TMPDIR/h\\n' >gitcfg"
    assert_held include.path
    [[ "$(jget reason)" == *core.hookspath* ]] || fail "reason: $(jget reason)"
    reject_and_use_git
}

@test "an include already in place: writing the file it names is held" {
    hgit config include.path ../gitcfg
    : >"$WS/gitcfg"
    txj -c 'echo ordinary >>README'
    assert_outcome committed
    txj -c "printf '[core]\\n\\tfsmonitor = $EVIL\\n' >gitcfg"
    assert_held core.fsmonitor
    reject_and_use_git
}

@test "a conditional include (includeIf gitdir:) pulling in a command setting is held" {
    local wsr
    wsr="$(cd "$WS" && pwd -P)"
    txj -c "printf '[includeIf \"gitdir:$wsr/\"]\\n\\tpath = ../cond.inc\\n' >>.git/config && printf '[diff]\\n\\texternal = $EVIL\\n' >cond.inc"
    assert_held includeif
    [[ "$(jget reason)" == *diff.external* ]] || fail "reason: $(jget reason)"
    reject_and_use_git
}

@test "a key not at a line start ([core] hooksPath = x appended) is held" {
    mkdir -p "$BATS_TEST_TMPDIR/h"
    printf '#!/bin/sh\ntouch "%s"\n' "$MARK" >"$BATS_TEST_TMPDIR/h/pre-commit"
    chmod +x "$BATS_TEST_TMPDIR/h/pre-commit"
    txj -c "printf '[core] hooksPath = $BATS_TEST_TMPDIR/h' >> .git/config"
    assert_held core.hookspath
    reject_and_use_git
}

@test "keys in odd case and spacing ([CORE] HooksPath, [Core]sshCommand) are held" {
    txj -c "printf '\\n[CORE]   HOOKSPATH=$BATS_TEST_TMPDIR/h\\n' >> .git/config"
    assert_held core.hookspath
    reject_and_use_git
    txj -c "printf '[Core]sshCommand = $EVIL\\n' >> .git/config"
    assert_held core.sshcommand
}

@test "extensions.worktreeConfig with core.fsmonitor in config.worktree is held" {
    txj -c "git config extensions.worktreeConfig true && git config --worktree core.fsmonitor $EVIL"
    assert_held core.fsmonitor
    reject_and_use_git
}

@test "config.worktree written when worktreeConfig is already on: held" {
    hgit config extensions.worktreeConfig true
    txj -c 'echo ordinary >>README'
    assert_outcome committed
    txj -c "printf '[core]\\n\\tfsmonitor = $EVIL\\n' >.git/config.worktree"
    assert_held core.fsmonitor
    reject_and_use_git
}

@test "gpg.program with commit.gpgsign is held" {
    txj -c "git config gpg.program $EVIL && git config commit.gpgsign true"
    assert_held gpg.program
    reject_and_use_git
}

@test "diff.external, pager.log, interactive.diffFilter, alias with ! are held" {
    txj -c "git config diff.external $EVIL"
    assert_held diff.external
    reject_and_use_git
    txj -c "git config pager.log $EVIL"
    assert_held pager.log
    reject_and_use_git
    txj -c "git config interactive.diffFilter $EVIL"
    assert_held interactive.difffilter
    txj -c "git config alias.st '!$EVIL'"
    assert_held alias.st
}

@test "mergetool.*.cmd, merge.*.driver, filter.*.clean, diff.*.textconv are held" {
    txj -c "git config mergetool.mine.cmd $EVIL"
    assert_held mergetool.mine.cmd
    txj -c "git config merge.ours2.driver $EVIL && echo '* merge=ours2' >.gitattributes"
    assert_held merge.ours2.driver
    txj -c "git config filter.f.clean $EVIL && echo '* filter=f' >.gitattributes"
    assert_held filter.f.clean
    reject_and_use_git
    txj -c "git config diff.t.textconv $EVIL && echo '*.c diff=t' >.gitattributes"
    assert_held diff.t.textconv
    reject_and_use_git
}

@test "a remote URL with the ext:: transport and credential.helper are held" {
    txj -c "git config remote.origin.url 'ext::$EVIL %S'"
    assert_held remote.origin.url
    txj -c "git config credential.helper '!$EVIL'"
    assert_held credential.helper
}

@test "a submodule's hooks and its own configuration are held" {
    mkdir -p "$BATS_TEST_TMPDIR/subsrc"
    gitrepo "$BATS_TEST_TMPDIR/subsrc"
    hgit -c protocol.file.allow=always submodule add -q "$BATS_TEST_TMPDIR/subsrc" sub >/dev/null 2>&1 ||
        fail "cannot add a submodule"
    hgit commit -qm sub
    [ -f "$WS/.git/modules/sub/HEAD" ] || fail "no .git/modules/sub"
    txj -c "printf '#!/bin/sh\\ntouch $MARK\\n' >.git/modules/sub/hooks/post-checkout && chmod +x .git/modules/sub/hooks/post-checkout"
    assert_held hook git-hooks
    reject_and_use_git
    txj -c "git -C sub config core.hooksPath $BATS_TEST_TMPDIR/h"
    assert_held core.hookspath
    jget paths | grep -qxF .git/modules/sub || fail "paths: $(jget paths)"
    reject_and_use_git
}

@test "a submodule's directory removed or moved is not a configuration change; its settings still are" {
    mkdir -p "$BATS_TEST_TMPDIR/subsrc"
    gitrepo "$BATS_TEST_TMPDIR/subsrc"
    hgit -c protocol.file.allow=always submodule add -q "$BATS_TEST_TMPDIR/subsrc" sub >/dev/null 2>&1 ||
        fail "cannot add a submodule"
    hgit commit -qm sub
    # its core.worktree names sub/, which goes: git can still read the rest
    txj -c 'rm -rf sub'
    assert_outcome committed
    [ ! -e "$WS/sub" ]
    run --separate-stderr txbox_bin undo -C "$WS"
    assert_status 0
    [ -f "$WS/sub/README" ] || fail "undo did not bring sub back"
    txj -c 'mv sub sub2'
    assert_outcome committed
    run --separate-stderr txbox_bin undo -C "$WS"
    assert_status 0
    # a dangerous setting in its configuration is still found, with sub gone
    txj -c "rm -rf sub && git config --file .git/modules/sub/config core.fsmonitor $EVIL"
    assert_held core.fsmonitor
}

@test "core.worktree leading outside the workspace is held; one inside it commits" {
    txj -c "git config core.worktree $BATS_TEST_TMPDIR"
    assert_held core.worktree
    reject_and_use_git
    txj -c 'git config core.worktree ../../..'
    assert_held core.worktree
    jget paths | grep -qxF .git || fail "paths: $(jget paths)"
    run --separate-stderr txbox_bin reject -C "$WS" "$(jget tx)"
    assert_status 0
    # relative to the git directory: .. is the workspace itself
    txj -c 'git config core.worktree ..'
    assert_outcome committed
    # a submodule's, which git writes there: inside (its source in the
    # workspace, where the sandbox sees it; file:// clones without hard
    # links, which an unprivileged overlay cannot keep)
    gitrepo "$WS/subsrc"
    hgit -c protocol.file.allow=always submodule add -q "file://$WS/subsrc" sub >/dev/null 2>&1 ||
        fail "cannot add a submodule"
    hgit commit -qm sub
    hgit submodule -q deinit -f sub
    rm -rf "$WS/.git/modules/sub"
    txj -c 'git -c protocol.file.allow=always submodule -q update --init'
    assert_outcome committed
    [ -f "$WS/sub/README" ] || fail "the submodule was not checked out"
}

@test "a nested repository's configuration is held" {
    gitrepo "$WS/vendor/lib"
    txj -c "git -C vendor/lib config core.pager $EVIL"
    assert_held core.pager
    jget paths | grep -qxF vendor/lib/.git || fail "paths: $(jget paths)"
}

@test "core.hooksPath already set (husky): writing a hook there is held; other files commit" {
    hgit config core.hooksPath .husky
    mkdir -p "$WS/.husky"
    txj -c "printf '#!/bin/sh\\ntouch $MARK\\n' >.husky/pre-commit && chmod +x .husky/pre-commit"
    assert_held "hooks directory" git-hooks-path
    jget paths | grep -qxF .husky/pre-commit || fail "paths: $(jget paths)"
    reject_and_use_git
    txj -c 'echo ordinary >>main.c'
    assert_outcome committed
}

@test "an include naming a fifo: held at the deadline, never a hang" {
    txj -c 'mkfifo fifo.inc && git config include.path ../fifo.inc'
    assert_held "did not finish"
    run --separate-stderr txbox_bin reject -C "$WS" "$(jget tx)"
    assert_status 0
}

@test "configuration git cannot read after the change is held" {
    txj -c "printf '[core\\n\\thooksPath = x\\n' >> .git/config"
    assert_held "cannot read"
}

@test "a .git/config that is a symlink to a workspace file: writing that file is held" {
    mv "$WS/.git/config" "$WS/real.cfg"
    ln -s ../real.cfg "$WS/.git/config"
    txj -c 'echo ordinary >>README'
    assert_outcome committed
    txj -c "printf '[core]\\n\\tpager = $EVIL\\n' >>real.cfg"
    assert_held core.pager
    reject_and_use_git
}

@test "multi-command transaction: git configuration set across its commands is held at commit" {
    run --separate-stderr txbox_bin begin -C "$WS"
    local tid="$output"
    run --separate-stderr txbox_bin run -C "$WS" --tx "$tid" -c "git config include.path ../inc.cfg"
    assert_status 0
    run --separate-stderr txbox_bin run -C "$WS" --tx "$tid" -c "printf '[core]\\n\\tpager = $EVIL\\n' >inc.cfg"
    assert_status 0
    run --separate-stderr txbox_bin commit -C "$WS" --json "$tid"
    assert_status 121
    assert_json_field outcome held
    assert_json_field effect_rule git-config-exec
    [[ "$(jget reason)" == *core.pager* ]] || fail "reason: $(jget reason)"
    run --separate-stderr txbox_bin reject -C "$WS" "$tid"
    assert_status 0
    [ ! -e "$WS/inc.cfg" ] || fail "applied though held"
}

@test "no hold: user.name, core.autocrlf, a remote, a branch, ordinary edits and git commits" {
    txj -c 'git config user.name bob && git config core.autocrlf false'
    assert_status 0
    assert_outcome committed
    txj -c 'git remote add origin https://example.com/r.git && git checkout -q -b topic'
    assert_outcome committed
    txj -c 'echo change >>README && git -c user.name=a -c user.email=a@b commit -qam change'
    assert_outcome committed
    txj -c 'echo again >>main.c'
    assert_outcome committed
    # new repositories: git init, a clone
    # (the sandbox has a private /tmp: the source lies in the workspace)
    gitrepo "$WS/src"
    txj -c "git init -q fresh && git clone -q --no-local '$WS/src' cloned"
    assert_status 0
    assert_outcome committed
    [ "$(hgit config --local --get user.name)" = bob ] || fail "user.name not committed"
}

# ---- files other tools run on the host ----

@test "files run without asking (.envrc, mise.toml, .nvim.lua, .dir-locals.el): held, not applied" {
    local f
    for f in .envrc mise.toml sub/.nvim.lua .dir-locals.el .idea/runConfigurations/x.xml; do
        txj -c "mkdir -p \"\$(dirname $f)\" && echo 'touch $MARK' >$f"
        assert_held "without asking" host-autorun
        jget paths | grep -qxF "$f" || fail "paths: $(jget paths)"
        run --separate-stderr txbox_bin reject -C "$WS" "$(jget tx)"
        assert_status 0
        [ ! -e "$WS/$f" ] || fail "$f applied though held"
    done
}

@test "VS Code: a task run on folderOpen or a tool path is held; an ordinary setting commits" {
    txj -c "mkdir -p .vscode && printf '{\"version\":\"2.0.0\",\"tasks\":[{\"label\":\"x\",\"type\":\"shell\",\"command\":\"$EVIL\",\"runOptions\":{\"runOn\":\"folderOpen\"}}]}\\n' >.vscode/tasks.json"
    assert_held folderOpen editor-autorun
    txj -c "mkdir -p .vscode && printf '{\"python.defaultInterpreterPath\": \"$EVIL\"}\\n' >.vscode/settings.json"
    assert_held "tool path" editor-autorun
    txj -c "mkdir -p .vscode && printf '{\"editor.tabSize\": 4}\\n' >.vscode/settings.json"
    assert_outcome committed
}

@test "files run when a person asks (Makefile, package.json): committed, named as attention in the result and the log" {
    txj -c "printf 'all:\\n\\t$EVIL\\n' >Makefile && echo '{\"scripts\":{\"test\":\"x\"}}' >package.json && echo plain >>README"
    assert_status 0
    assert_outcome committed
    jget attention.0.effect_rule | grep -qx runs-on-ask || fail "attention: $output"
    jget attention.0.paths | grep -qxF Makefile || fail "attention paths: $(jget attention.0.paths)"
    jget attention.0.paths | grep -qxF package.json || fail "attention paths: $(jget attention.0.paths)"
    jget attention.0.paths | grep -qxF README && fail "README is no attention"
    local tx
    tx="$(jget tx)"
    run --separate-stderr txbox_bin show -C "$WS" --json "$tx"
    assert_status 0
    jget info.attention.0.effect_rule | grep -qx runs-on-ask || fail "log lacks attention: $output"
    txj -c 'echo plain >>main.c'
    assert_outcome committed
    [ -z "$(jget attention 2>/dev/null)" ] || fail "attention on an ordinary change: $output"
}

@test "multi-command transaction: attention in the commit's result and its log" {
    run --separate-stderr txbox_bin begin -C "$WS"
    local tid="$output"
    run --separate-stderr txbox_bin run -C "$WS" --tx "$tid" -c 'echo "all:" >Makefile'
    assert_status 0
    run --separate-stderr txbox_bin commit -C "$WS" --json "$tid"
    assert_status 0
    assert_json_field outcome committed
    assert_json_field attention.0.effect_rule runs-on-ask
    run --separate-stderr txbox_bin show -C "$WS" --json "$tid"
    assert_status 0
    assert_json_field info.attention.0.effect_rule runs-on-ask
}

@test "attention is configurable: a policy may hold those files, or not report them" {
    local pol="$BATS_TEST_TMPDIR/p.yaml"
    printf 'version: 1\neffects:\n  - id: runs-on-ask\n    action: hold\n    reason: r\n    suggestion: s\n    match: {paths_written: [Makefile]}\n    examples: {match: [{written: [Makefile]}], no_match: [{written: [x]}]}\n' >"$pol"
    txj --policy "$pol" -c 'echo "all:" >Makefile'
    assert_held r runs-on-ask
    printf 'version: 1\neffects:\n  - id: runs-on-ask\n    action: off\n' >"$pol"
    txj --policy "$pol" -c 'echo "all:" >>main.c && echo "all:" >Makefile2 && echo x >Makefile'
    assert_outcome committed
    [ -z "$(jget attention 2>/dev/null)" ] || fail "attention though off: $output"
    # a rule of one's own with action attention
    printf 'version: 1\neffects:\n  - id: lockfiles\n    action: attention\n    reason: changes a lock file\n    suggestion: s\n    match: {paths_written: ["*.lock"]}\n    examples: {match: [{written: [a.lock]}], no_match: [{written: [x]}]}\n' >"$pol"
    txj --policy "$pol" -c 'echo x >deps.lock'
    assert_status 0
    assert_outcome committed
    assert_json_field attention.0.effect_rule lockfiles
    assert_json_field attention.0.reason "changes a lock file"
}
