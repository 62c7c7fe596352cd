#!/usr/bin/env bats
# What `safe` promises (docs/policy.md, "What safe means"): the command
# reads only, runs no program the workspace controls and reads no secret.
# Each class of issue #20 part 1 through `txbox check` on a real
# workspace: sed scripts, abbreviated long options, programs that load
# project code when they start, path-qualified programs and lookup
# changes, git with repository configuration, reads of secrets. Where the
# host has the program, the test first shows that the workspace really
# makes it run something (natively, outside txbox), then that txbox does
# not call it safe.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    WS="$BATS_TEST_TMPDIR/ws"
    mkdir -p "$WS"
    MARK="$BATS_TEST_TMPDIR/ran"
}

# verdicts: each line of stdin, classified in the workspace with --batch;
# prints "VERDICT<TAB>RULE<TAB>COMMAND" lines.
verdicts() {
    "$TXBOX" check --batch -C "$WS" | python3 -c '
import json, sys
for line in sys.stdin:
    o = json.loads(line)
    print("%s\t%s\t%s" % (o["verdict"], o["rule"], o["command"]))'
}

# none_safe <<'EOF' ... EOF: every command, one a line, is not safe.
none_safe() {
    local out bad
    out="$(verdicts)" || fail "txbox check --batch failed"
    bad="$(grep '^safe' <<<"$out" || true)"
    [ -z "$bad" ] || fail "classified safe:" "$bad"
}

# all_safe <<'EOF' ... EOF: every command is safe (the controls).
all_safe() {
    local out bad
    out="$(verdicts)" || fail "txbox check --batch failed"
    bad="$(grep -v '^safe' <<<"$out" || true)"
    [ -z "$bad" ] || fail "not safe:" "$bad"
}

@test "sed: a script that runs a command, writes or reads a secret is not safe, however it is written" {
    printf 'a\n' >"$WS/f"
    if command -v sed >/dev/null; then
        (cd "$WS" && sed --expression="1e touch $MARK" f >/dev/null)
        [ -e "$MARK" ] || fail "control: sed's e command did not run"
    fi
    none_safe <<'EOF'
sed --expression='1e touch X' f
sed -e p -e '1e touch X' f
sed -n '1e touch X' f
sed 's/x/y/e' f
sed 's|x|y|ge' f
sed 's/[/]/x/e' f
sed '$!N;e' f
sed 's/x/y/w out' f
sed 's/x/y/3w out' f
sed 'w out' f
sed -n '/a/,/b/{p;W out' -e '}' f
sed 'b end;w out;:end' f
sed -e 'a\' -e 'x' -e 'w out' f
sed 'R ~/.ssh/id_rsa' f
sed '1r /etc/shadow' f
sed -f script.sed f
sed --file=script.sed f
sed '1d;Z' f
EOF
    all_safe <<'EOF'
sed -n '1,20p' f
sed 's/foo/bar/g' f
sed -E 's/[0-9]+//' f
sed -n '$!{h;d};x;G;p' f
sed -e 'a\' -e 'w out' f
sed 's/a/b/w /dev/stdout' f
sed ':a;N;$!ba;s/\n/,/g' f
EOF
}

@test "long options: an unambiguous prefix is the option (getopt_long, git)" {
    none_safe <<'EOF'
sed --in 's/a/b/' f
sed --in-pl=.bak 's/a/b/' f
sed --exp '1e touch X' f
sort --out=x f
sort --outp x f
git -c core.pager=x rev-parse HEAD
journalctl --vac=1d
journalctl --rot
date --se '2020-01-01'
file --comp
EOF
    run --separate-stderr "$TXBOX" check -C "$WS" --json -c "sed --in 's/a/b/' /etc/hosts"
    [[ "$output" == *'"verdict":"unsafe"'* ]] || fail "sed --in on /etc/hosts: $output"
    run --separate-stderr "$TXBOX" check -C "$WS" --json -c 'timeout --kill 5 10 rm -rf ~'
    [[ "$output" == *'"verdict":"unsafe"'* ]] || fail "timeout --kill 5 10 rm -rf ~: $output"
    run --separate-stderr "$TXBOX" check -C "$WS" --json -c 'git config --glob user.name x'
    [[ "$output" == *'"rule":"git-config-global"'* ]] || fail "git config --glob: $output"
}

@test "programs that load project code when they start are not safe, even for --version or --help" {
    printf 'help:\n\t@touch %s\n' "$MARK" >"$WS/Makefile"
    if command -v make >/dev/null; then
        (cd "$WS" && make -s help)
        [ -e "$MARK" ] || fail "control: make help did not run the Makefile"
    fi
    none_safe <<'EOF'
make help
make --version
mvn -v
mvn --version
gradle --version
yarn --help
yarn --version
npm --version
pnpm --help
bun --version
deno --version
pytest --version
mypy --version
go version
go env
cargo --version
rustc --version
rustup --version
dotnet --version
composer --version
poetry --version
uv --version
eslint --version
prettier --version
tsc --version
ninja -v
pytest -v
npm ls --depth=0
yarn why lodash
pnpm list
EOF
    all_safe <<'EOF'
python3 --version
node --version
node -v
gcc --version
java -version
git --version
EOF
}

@test "path-qualified programs and lookup changes: only the host's system programs are what a safe rule knows" {
    none_safe <<'EOF'
./ls
./cat f
bin/cat f
../x/cat f
./sh -c ls
/proc/self/cwd/cat f
/usr/bin/../../tmp/cat f
hash -p ./evil cat; cat f
enable -f ./x.so cat; cat f
enable -n echo; echo x
PATH=.:$PATH ls
export PATH=.:$PATH; ls
read PATH <<< .; ls
unset PATH; ls
shopt -s expand_aliases; alias ls=./evil; ls
cat() { ./evil; }; cat f
export LD_PRELOAD=./x.so; ls
export BASH_ENV=./x; sh -c ls
PYTHONPATH=. pip --version
awk '@include "lib.awk"; {print}' f
gawk '@load "./x"; BEGIN{}'
EOF
    all_safe <<'EOF'
/usr/bin/cat f
/bin/ls -la
ls -la
f=a.txt; cat $f
EOF
    # a search path into the workspace (an activated .venv, node_modules/.bin)
    # or a relative one: a name may find a workspace file
    mkdir -p "$WS/.venv/bin"
    printf '#!/bin/sh\ntouch %s\n' "$MARK" >"$WS/.venv/bin/ls"
    chmod +x "$WS/.venv/bin/ls"
    (cd "$WS" && PATH="$WS/.venv/bin:$PATH" ls >/dev/null)
    [ -e "$MARK" ] || fail "control: ls did not find the workspace's ls"
    PATH="$WS/.venv/bin:$PATH" none_safe <<<'ls -la'
    PATH=".:$PATH" none_safe <<<'cat f'
    PATH="$WS/.venv/bin:$PATH" all_safe <<<'echo x; pwd'
}

@test "git: a read the repository's configuration can turn into running a program is not safe" {
    command -v git >/dev/null || need "git is not installed"
    git -C "$WS" init -q
    printf 'x\n' >"$WS/f.txt"
    git -C "$WS" -c user.name=t -c user.email=t@t.example commit -qm init --allow-empty
    printf '#!/bin/sh\ntouch %s\n' "$MARK" >"$WS/fsmon"
    chmod +x "$WS/fsmon"
    git -C "$WS" config core.fsmonitor "$WS/fsmon"
    git -C "$WS" status --short >/dev/null
    [ -e "$MARK" ] || fail "control: git status did not run core.fsmonitor"
    none_safe <<'EOF'
git status
git status --short
git diff
git diff --stat
git diff --ext-diff
git log -p
git log --oneline
git show --stat
git blame f.txt
git grep x
git ls-files
git --git-dir=.git status
git --work-tree=. log
git -C ../other status
GIT_DIR=.git git log
GIT_CONFIG_GLOBAL=./x git rev-parse HEAD
git branch
git tag
git config --list
git help log
git describe --dirty
git cat-file --textconv HEAD:f.txt
git log --format=%G? -1
EOF
    all_safe <<'EOF'
git rev-parse --show-toplevel
git ls-tree -r HEAD
git cat-file -p HEAD
git rev-list --count HEAD
git for-each-ref refs/heads
git --no-pager branch
git remote -v
git config --get user.name
git version
EOF
}

@test "reads of secrets are not safe: key files however named, globs, the environment" {
    none_safe <<'EOF'
cat ~/.ssh/id_rsa
cat $HOME/.ssh/id_rsa
cat ${HOME}/.ssh/id_rsa
cat "$HOME/.aws/credentials"
cat /root/.ssh/id_rsa
cat ../../../../../../root/.ssh/id_rsa
cat ~/.ssh/*
cat ~/.ss?/id_rsa
cd ~/.aws && cat credentials
cd /etc && cat shadow
cat /etc/shadow
cat /etc/./shadow
head -c 100 /etc/shadow
cat /proc/self/environ
cat /proc/1/environ
cat /proc/*/environ
cat /proc/self/env*
tr '\0' '\n' < /proc/self/environ
printenv AWS_SECRET_ACCESS_KEY
printenv GITHUB_TOKEN
printenv
env
env -u X
set
declare -p
export -p
export
grep -r KEY ~/.aws
base64 ~/.kube/config
cat < ~/.netrc
grep -r KEY ~
rg -n token /etc
find ~ -type f -exec cat {} +
cat ~root/.ssh/id_rsa
echo "$GITHUB_TOKEN"
printf '%s' "$AWS_SECRET_ACCESS_KEY"
cat /run/secrets/db
cat /etc/ssh/ssh_host_ed25519_key
cat "$HOME/$F"
cat /etc/$X
ls ~/.ssh | xargs -I{} cat ~/.ssh/{}
cd; cat .ssh/id_rsa
cd /proc/self; cat environ
ps e
ps auxe
jq -n env
jq -n '$ENV.HOME'
awk 'BEGIN{for (k in ENVIRON) print ENVIRON[k]}'
EOF
    all_safe <<'EOF'
printenv HOME
env ls
printf '%s\n' "$PATH"
ps aux
jq .name package.json
grep -rn TODO src
find . -name '*.c' -exec grep -l main {} +
echo ~/.ssh/id_rsa.pub
set -euo pipefail
ls /usr/include
cat README.md
EOF
}
