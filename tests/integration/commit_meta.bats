#!/usr/bin/env bats
# What a commit does with metadata the command left: privilege bits and file
# capabilities are not committed; entries without owner permissions (a
# read-only file, a directory of mode 0 or 0555) commit, undo and redo
# exactly, unprivileged too; directory xattrs come back with undo.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    new_ws
}

# Directories the command leaves without owner permissions are not
# removable by the test user: give them back before bats cleans up.
teardown() {
    chmod -R u+rwX "$BATS_TEST_TMPDIR" 2>/dev/null || true
}

# h ARGS: a txbox subcommand on $WS, bats-run.
h() {
    local cmd="$1"
    shift
    run --separate-stderr txbox_bin "$cmd" -C "$WS" "$@"
}


# snap2 NAME DIR: as snap, but complete where directories lack owner
# permissions: every directory gets owner rwx for the time of the listing,
# which then shows the modes they had; they are put back after.
snap2() {
    python3 - "$TREESUM" "$2" "$BATS_TEST_TMPDIR/$1.sum" <<'EOF' || fail "snap2 $2 failed"
import os, stat, subprocess, sys
treesum, root, out = sys.argv[1], os.fsencode(sys.argv[2]), sys.argv[3]
def esc(raw):
    return "".join(chr(b) if 0x21 <= b <= 0x7E and b != 0x5C else "\\x%02x" % b for b in raw)
orig = {}
stack = [b""]
while stack:
    rel = stack.pop()
    full = os.path.join(root, rel) if rel else root
    st = os.lstat(full)
    if not stat.S_ISDIR(st.st_mode):
        continue
    if st.st_mode & 0o700 != 0o700:
        orig[full] = (esc(rel) if rel else ".", stat.S_IMODE(st.st_mode))
        os.chmod(full, stat.S_IMODE(st.st_mode) | 0o700)
    for n in os.listdir(full):
        if rel or n != b".txbox":
            stack.append(os.path.join(rel, n) if rel else n)
try:
    lines = subprocess.run([treesum, "-v", sys.argv[2]], check=True, capture_output=True,
                           text=True).stdout.splitlines()
finally:
    for full in sorted(orig, key=lambda p: -p.count(b"/")):
        os.chmod(full, orig[full][1])
modes = {e: m for e, m in orig.values()}
with open(out, "w") as f:
    for l in lines:
        if l.startswith("digest "):
            continue
        fl = l.split(" ")
        if fl[0] in modes:
            fl[2] = "%04o" % modes[fl[0]]
        f.write(" ".join(fl) + "\n")
EOF
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

@test "entries without owner permissions commit exactly, and undo and redo exactly" {
    local s='mv ro.txt src/ro.txt; echo n >new_ro; chmod 0444 new_ro; mkdir -m 0 d0
mkdir -p d5/sub; echo f >d5/sub/f; chmod 0555 d5/sub d5; echo z >zero; chmod 0 zero
rm docs/a.txt; chmod 0 docs; chmod 0 empty_dir; chmod 0500 deep/a
chmod -R u+w rod; rm -rf rod; chmod u+rwx zd/in; rm -r zd/in; mkdir -m 0 zd/in'
    local ref="$BATS_TEST_TMPDIR/ref" d
    mkdir -p "$WS/rod/in" "$WS/zd/in"
    echo x >"$WS/rod/in/f"
    echo z >"$WS/zd/in/f"
    cp -a "$WS" "$ref"
    for d in "$WS" "$ref"; do
        chmod 0555 "$d/rod/in" "$d/rod"
        chmod 0 "$d/zd/in"
    done
    snap2 pre "$WS"
    (cd "$ref" && sh -c "$s") || fail "the script failed run by a plain shell"
    snap2 ref "$ref"
    txj -c "$s"
    assert_status 0
    assert_outcome committed
    snap2 post "$WS"
    same_tree ref post
    h undo
    assert_status 0
    snap2 undone "$WS"
    same_tree pre undone
    h undo 2
    assert_status 0
    snap2 redone "$WS"
    same_tree ref redone
}

@test "directory xattrs: undo restores them, redo sets them again" {
    is_root && setfattr -n trusted.keep -v k "$WS/src"
    setfattr -n user.old -v o "$WS/src"
    snap pre "$WS"
    tx -c 'setfattr -n user.new -v n src; setfattr -x user.old src; setfattr -n user.d -v changed docs
setfattr -n user.r -v root .; setfattr -n user.x -v 1 deep/a/b'
    assert_status 0
    snap post "$WS"
    ! same_tree pre post 2>/dev/null || fail "the command changed no xattr"
    h undo
    assert_status 0
    assert_tree pre "$WS"
    h undo 2
    assert_status 0
    assert_tree post "$WS"
}

@test "undo of a directory's xattrs refuses when a later transaction changed them too" {
    tx -c 'setfattr -n user.a -v 1 src'
    assert_status 0
    tx -c 'setfattr -n user.a -v 2 src'
    assert_status 0
    h undo 1 --json
    assert_status 123
    [ "$(pj 'd["conflicts"][0]["path"]')" = src ] || fail "no conflict on src: $output"
    [ "$(getfattr --only-values -n user.a "$WS/src")" = 2 ] || fail "src changed by a refused undo"
}

@test "txbox's own reads leave atimes alone: a new file's and a replaced file's pre-image" {
    # the effect rules read every new and modified file, the audit log
    # hashes them: with relatime, a first read after a write would set the
    # atime, so the committed file, or the pre-image undo puts back, would
    # carry txbox's read instead of what the command or the user left
    echo old >"$WS/f"
    touch -a -d '2001-02-03 04:05:06' "$WS/f"
    want_f=$(stat -c %X "$WS/f")
    h run --json -c 'echo more >>f; echo new >n; touch -a -d "2002-03-04 05:06:07" n'
    [ "$status" -eq 0 ]
    tx=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["tx"])' <<<"$output")
    [ "$(stat -c %X "$WS/n")" = "$(date -d "2002-03-04 05:06:07" +%s)" ] || fail "n: atime $(stat -c %x "$WS/n"), mtime $(stat -c %y "$WS/n"), fs $(stat -f -c %T "$WS")"
    h undo "$tx"
    [ "$status" -eq 0 ]
    [ "$(stat -c %X "$WS/f")" = "$want_f" ] || fail "f: atime $(stat -c %x "$WS/f") after undo"
    [ "$(cat "$WS/f")" = old ] # (after: cat sets the atime)
}
