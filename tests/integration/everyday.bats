#!/usr/bin/env bats
# Everyday commands still work inside the sandbox: compilers, make, git on
# the workspace's repository, python3, node and npm with a local cache,
# package builds that write to /tmp, and commands that read /etc/passwd,
# /proc/self, /dev/urandom and the terminal. Each result is checked on the
# host after the commit (the built program runs, the commit is in git log,
# the installed package is there...).
#
# The workspace and HOME live outside /tmp (as a real project and home
# would; see tests/lib/escape_helpers.bash), HOME with an ordinary
# .gitconfig and the secrets txbox hides.

bats_require_minimum_version 1.5.0
load ../lib/common
load ../lib/escape_helpers

setup() {
    BOX="$ESC_BASE/t$BATS_TEST_NUMBER"
    rm -rf "$BOX"
    WS="$BOX/ws"
    FHOME="$BOX/home"
    mkdir -p "$WS"
    esc_fill_home "$FHOME"
    export HOME="$FHOME"
    cd "$WS"
}

teardown() { cd /; }

# ev [TXBOX RUN OPTIONS...] -c 'STRING' | -- ARGV: run in the workspace;
# status 0 and outcome committed or read_only are required.
ev() {
    txj "$@"
    local got
    got="$(jget outcome 2>&1)"
    if [ "$status" != 0 ] || { [ "$got" != committed ] && [ "$got" != read_only ]; }; then
        fail "txbox run $*: status $status, outcome $got" "command stdout: $(clip "$(jget stdout 2>&1)")" \
            "command stderr: $(clip "$(jget stderr 2>&1)")"
        return 1
    fi
    EV_OUT="$(jget stdout)"
}

# evs [TXBOX RUN OPTIONS...] <<'EOF' ... EOF: ev on a script (kept outside
# the workspace, in the box).
evs() {
    EV_N=$((${EV_N:-0} + 1))
    cat >"$BOX/step-$EV_N.sh"
    ev "$@" -- /bin/sh "$BOX/step-$EV_N.sh"
}

@test "C and C++ compilers: build, link and run; the program runs on the host after the commit" {
    printf '#include <stdio.h>\nint main(void) { puts("hello from c"); return 0; }\n' >hello.c
    printf '#include <iostream>\nint main() { std::cout << "hello from c++" << std::endl; }\n' >hello.cpp
    printf 'int twice(int x) { return 2 * x; }\n' >lib.c
    printf '#include <stdio.h>\nint twice(int);\nint main(void) { printf("%%d\\n", twice(21)); return 0; }\n' >main.c
    ev -c 'cc -O2 -Wall -o hello hello.c && ./hello &&
c++ -o hellocpp hello.cpp && ./hellocpp &&
cc -c -fPIC lib.c && ar rcs libtwice.a lib.o && cc -o main main.c -L. -ltwice && ./main &&
cc -shared -o libtwice.so lib.o && cc -o main_so main.c -L. -ltwice -Wl,-rpath,"$PWD" && ./main_so'
    [ "$EV_OUT" = "$(printf 'hello from c\nhello from c++\n42\n42')" ] || fail "inside: $EV_OUT"
    [ "$(./hello)" = "hello from c" ] && [ "$(./hellocpp)" = "hello from c++" ] && [ "$(./main)" = 42 ] &&
        [ "$(./main_so)" = 42 ] || fail "the committed programs do not run on the host"
}

@test "make: a parallel build commits, and the next make finds everything up to date" {
    cat >Makefile <<'EOF'
all: app
app: a.o b.o
	$(CC) -o $@ a.o b.o
%.o: %.c
	$(CC) -c -o $@ $<
clean:
	rm -f app *.o
EOF
    printf 'int b(void);\nint main(void) { return b() - 7; }\n' >a.c
    printf 'int b(void) { return 7; }\n' >b.c
    ev -c 'make -j2'
    [ -x app ] && ./app || fail "app not built or wrong: $EV_OUT"
    # mtimes survive the commit: nothing to rebuild
    ev -c 'make -q && echo UP-TO-DATE'
    [ "$EV_OUT" = UP-TO-DATE ] || fail "after the commit make wants to rebuild: $EV_OUT $(jget stderr)"
    ev -c 'touch b.c && make && make clean && make'
    ./app || fail "the rebuilt app fails"
}

@test "git on the workspace's repository: status, add, commit, branch, log, diff; the history is there on the host" {
    git init -q -b main .
    git config user.email t@example.invalid
    git config user.name T
    echo one >f.txt
    git add f.txt
    git commit -q -m first
    ev -c 'git status --short && echo two >>f.txt && git add -A && git commit -q -m "second, inside txbox" &&
git checkout -q -b topic && echo three >g.txt && git add g.txt && git commit -q -m third &&
git checkout -q main && git merge -q --no-edit topic && git log --format=%s && git diff HEAD~2 --stat'
    [ "$(git log --format=%s | head -3 | tr '\n' '|')" = "third|second, inside txbox|first|" ] ||
        fail "git log on the host: $(git log --oneline)"
    git fsck --no-progress || fail "git fsck fails after the commit"
    [ "$(git status --porcelain)" = "" ] || fail "the working tree is dirty on the host: $(git status --porcelain)"
    [ "$(git branch --format='%(refname:short)' | tr '\n' ' ')" = "main topic " ] || fail "branches: $(git branch)"
    # a read-only git command
    ev -c 'git log --oneline | wc -l'
    [ "$EV_OUT" = 3 ] || fail "git log inside: $EV_OUT"
}

# rename(2) to another directory, which programs do not retry as a copy
# (mv does): git mv, git branch -m (its reflog), os.rename of a file and of
# a directory. A Landlock domain of init's that allowed no such move made
# every one fail with EXDEV.
@test "moves between directories: git mv, git branch -m, rename(2) of a file and a directory, in a session too" {
    git init -q -b main .
    git config user.email t@example.invalid
    git config user.name T
    mkdir -p src old
    echo one >src/f.txt
    echo two >old/g.txt
    git add -A
    git commit -q -m first
    git branch topic
    # (a directory the command made: one of the workspace's moves by a
    # copy, as mv does on EXDEV: overlayfs moves no directory of its lower)
    printf 'import os\nos.makedirs("b/n", exist_ok=True)\nos.rename("a/x.txt", "b/x.txt")\nos.rename("a/d", "b/n/d")\nos.rename("src/f.txt", "b/f.txt")\nprint("renamed")\n' >mv.py
    ev -c 'git mv old/g.txt g.txt && git branch -m topic feature && mkdir -p a/d && echo x >a/x.txt && echo y >a/d/y.txt && python3 mv.py && mv src b/src'
    [ "$EV_OUT" = renamed ] || fail "inside: $EV_OUT"
    [ -f g.txt ] && [ ! -e old/g.txt ] || fail "git mv: $(ls -R)"
    [ "$(git branch --format='%(refname:short)' | tr '\n' ' ')" = "feature main " ] || fail "branches: $(git branch)"
    [ "$(cat b/x.txt)" = x ] && [ "$(cat b/n/d/y.txt)" = y ] && [ "$(cat b/f.txt)" = one ] && [ -d b/src ] &&
        [ ! -e a/x.txt ] && [ ! -e src ] || fail "renames: $(ls -R)"
    local sid
    sid="$("$TXBOX" session start -C "$WS")"
    ev --session "$sid" -c 'git mv g.txt b/g.txt && git branch -m feature topic && python3 -c "import os; os.rename(\"b/x.txt\", \"x.txt\")"'
    "$TXBOX" session end -C "$WS" "$sid" >/dev/null
    [ -f b/g.txt ] && [ -f x.txt ] && [ ! -e b/x.txt ] || fail "in the session: $(ls -R)"
    [ "$(git branch --format='%(refname:short)' | tr '\n' ' ')" = "main topic " ] || fail "branches: $(git branch)"
}

@test "python3: scripts, modules, sqlite and a venv" {
    printf 'import json, sys\njson.dump({"argv": sys.argv[1:]}, open("out.json", "w"))\nprint("py ok")\n' >s.py
    ev -c 'python3 s.py a b && python3 -c "import sqlite3; c = sqlite3.connect(\"db.sqlite\"); c.execute(\"create table t(x)\"); c.execute(\"insert into t values (42)\"); c.commit()" &&
python3 -m venv --without-pip .venv && .venv/bin/python -c "import sys; print(sys.prefix != sys.base_prefix)"'
    [ "$EV_OUT" = "$(printf 'py ok\nTrue')" ] || fail "inside: $EV_OUT"
    [ "$(python3 -c 'import json; print(json.load(open("out.json")))')" = "{'argv': ['a', 'b']}" ] || fail "out.json: $(cat out.json)"
    [ "$(python3 -c 'import sqlite3; print(sqlite3.connect("db.sqlite").execute("select x from t").fetchone()[0])')" = 42 ] ||
        fail "the database is not as written"
    [ -x .venv/bin/python ] || fail "no venv"
}

@test "node and npm with a local cache: npm init, install a local package, npm run, node scripts" {
    mkdir -p pkgsrc/leftpad
    printf '{"name":"leftpad-local","version":"1.0.0","main":"index.js"}\n' >pkgsrc/leftpad/package.json
    printf 'module.exports = (s, n) => String(s).padStart(n, "0");\n' >pkgsrc/leftpad/index.js
    printf 'console.log(require("leftpad-local")(7, 3));\n' >pad.js
    evs <<'EOF'
set -e
export npm_config_cache="$PWD/.npm-cache" npm_config_update_notifier=false
npm init -y >/dev/null
(cd pkgsrc/leftpad && npm pack --silent >/dev/null)
npm install --offline --no-audit --no-fund --silent ./pkgsrc/leftpad/leftpad-local-1.0.0.tgz
node -e 'const fs = require("fs"); const p = JSON.parse(fs.readFileSync("package.json")); p.scripts = {pad: "node pad.js"}; fs.writeFileSync("package.json", JSON.stringify(p, null, 2))'
npm run --silent pad
node -e 'require("fs").writeFileSync("from-node.txt", process.version)'
EOF
    [ "$(tail -n1 <<<"$EV_OUT")" = 007 ] || fail "npm run inside: $EV_OUT $(jget stderr)"
    [ -f node_modules/leftpad-local/index.js ] || fail "the package is not installed in the workspace"
    grep -q leftpad-local package.json || fail "package.json lacks the dependency"
    [ "$(cat from-node.txt)" = "$(node -e 'process.stdout.write(process.version)')" ] || fail "from-node.txt: $(cat from-node.txt)"
    [ "$(node -e 'console.log(require("leftpad-local")(5, 2))')" = 05 ] || fail "the installed package does not work on the host"
}

@test "package builds that write to /tmp: a C build in a temporary directory, a pip wheel, tar and gzip" {
    mkdir -p tool
    printf 'from setuptools import setup\nsetup(name="txtool", version="0.1", py_modules=["txtool"])\n' >tool/setup.py
    printf 'def hi():\n    return "hi"\n' >tool/txtool.py
    unset TMPDIR
    evs <<'EOF'
set -e
b="$(mktemp -d)"
case "$b" in /tmp/*) ;; *) echo "mktemp not in /tmp: $b"; exit 1 ;; esac
printf 'int main(void) { return 0; }\n' >"$b/x.c"
cc -o "$b/x" "$b/x.c"
cp "$b/x" built-in-tmp
python3 -m pip wheel --no-deps --no-build-isolation --no-cache-dir -q -w dist ./tool
tar -C /tmp -czf snapshot.tgz "${b#/tmp/}"
EOF
    [ -x built-in-tmp ] && ./built-in-tmp || fail "the program built in /tmp was not committed"
    ls dist/txtool-0.1-*.whl >/dev/null || fail "no wheel: $(ls dist 2>&1) $(jget stderr)"
    tar -tzf snapshot.tgz | grep -q 'x.c$' || fail "the tarball lacks the file from /tmp"
}

@test "a TMPDIR the caller set under the host's /tmp (as pam_tmpdir does) still gives a usable temporary directory" {
    # The sandbox's /tmp is private: the caller's $TMPDIR does not exist
    # there unless txbox provides it. mktemp, sort -T, pip and many build
    # systems use $TMPDIR without a fallback.
    export TMPDIR="$BATS_TEST_TMPDIR/user-tmp"
    mkdir -p "$TMPDIR"
    ev -c 'f="$(mktemp)" && echo data >"$f" && cat "$f" && d="$(mktemp -d)" && test -d "$d" && echo tmp-ok'
    [ "$EV_OUT" = "$(printf 'data\ntmp-ok')" ] || fail "inside: $EV_OUT"
}

@test "reading /etc/passwd, /proc/self, /dev/urandom, /dev/null, /dev/zero; id, whoami, ps, env" {
    ev -c 'getent passwd root | cut -d: -f1
grep -c "^root:" /etc/passwd
id -un
test -r /proc/self/status && grep -c "^Pid:" /proc/self/status
readlink /proc/self/exe
ls /proc/self/fd | grep -c .
head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n" | wc -c
head -c 8 /dev/zero | od -An -tx1 | tr -d " \n"; echo
echo discard >/dev/null && echo null-ok
ps -o comm= -p $$
test -n "$HOME" && test -n "$PATH" && echo env-ok'
    local want
    want="root
1
$(id -un)
1
/usr/bin/readlink
4
64
0000000000000000
null-ok
bash
env-ok"
    # the open fds of `ls` vary: 0, 1, 2 and its own directory at least
    local got
    got="$(sed '6s/^[4-9]$/4/' <<<"$EV_OUT")"
    [ "$got" = "$want" ] || fail "inside:" "$EV_OUT" "wanted:" "$want"
}

@test "the terminal: a command reads what is typed on it, knows it is a terminal, and writes to it" {
    local rep="$BATS_TEST_TMPDIR/pty.json" out
    out="$(python3 "$ESC_TOOLS/ptyrun.py" "$rep" "$TXBOX_DEADLINE" --input $'typed line\n' -- \
        "$TXBOX" run -C "$WS" -c 'test -t 0 && echo stdin-is-a-tty
IFS= read -r line </dev/tty && echo "got: $line"
echo on-the-terminal >/dev/tty
stty -a </dev/tty >/dev/null && echo stty-ok' 2>"$BATS_TEST_TMPDIR/err")" ||
        fail "txbox on a terminal failed: $out $(cat "$BATS_TEST_TMPDIR/err") $(cat "$rep")"
    [ "$out" = "$(printf 'stdin-is-a-tty\ngot: typed line\nstty-ok')" ] ||
        fail "inside: $out" "stderr: $(cat "$BATS_TEST_TMPDIR/err")"
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(0 if "on-the-terminal" in r["echoed"] else 1)' "$rep" ||
        fail "nothing written on the terminal: $(cat "$rep")"
}

@test "common tools: find, sed -i, sort, tar, gzip, xz, zip, diff, patch, cp -a, ln, bash" {
    mkdir -p d/e
    printf 'b\na\nc\n' >d/list
    echo x >d/e/f
    ev -c 'find d -type f | sort
sed -i "s/a/A/" d/list && sort d/list | tr "\n" " "; echo
tar -cf d.tar d && gzip -k d.tar && xz -k d.tar && zip -qr d.zip d
cp -a d d2 && diff -r d d2 && echo same
printf "x\n" >one; printf "y\n" >two; diff -u one two >p.diff; patch -s one <p.diff && cat one
ln -s d/list l && readlink l
bash -c "declare -A m=([k]=v); echo \${m[k]}"'
    [ "$EV_OUT" = "$(printf 'd/e/f\nd/list\nA b c \nsame\ny\nd/list\nv')" ] || fail "inside: $EV_OUT"
    [ -f d.tar.gz ] && [ -f d.tar.xz ] && [ -f d.zip ] && [ "$(cat one)" = y ] || fail "the results were not committed"
    unzip -l d.zip | grep -q 'd/e/f' || fail "d.zip is incomplete"
}
