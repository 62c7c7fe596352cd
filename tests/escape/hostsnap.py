#!/usr/bin/env python3
"""hostsnap: everything an escape could change, in one pass (for the escape
suites; one process instead of dozens keeps each check fast).

usage: hostsnap.py OUTDIR [--tree NAME DIR]... [--ws DIR] [--list NAME DIR [SKIP]]...
                   [--files F...] [--mark MARK PLACE...] [--mounts PREFIX]
                   [--loose REL...]

Writes one file per section into OUTDIR, to be compared with diff:
  NAME.tree  every entry below DIR: path, type, mode, owner, content (sha256
             of a file, target of a symlink), extended attributes, mtime,
             inode, link count, ctime. Paths named with --loose (relative)
             leave out link count and ctime.
  ws.tree    the same for the workspace, without inode, link count and
             ctime (a rollback may recreate files), .txbox left out
  NAME.list  the names in DIR, minus SKIP
  host       for each of --files: owner, mode, inode, size, mtime, ctime and
             sha256 (or the error), and for /proc and /sys files the value;
             the host name
  mounts     lines of /proc/self/mountinfo naming PREFIX (ids left out)
  mark       files whose names hold MARK directly in any PLACE
Exit status 0 (2 on a usage error).
"""
import hashlib
import os
import socket
import stat
import sys

TYPES = ((stat.S_ISREG, "f"), (stat.S_ISDIR, "d"), (stat.S_ISLNK, "l"),
         (stat.S_ISFIFO, "p"), (stat.S_ISSOCK, "s"), (stat.S_ISCHR, "c"),
         (stat.S_ISBLK, "b"))


def esc(p):
    return "".join(chr(b) if 0x21 <= b <= 0x7E and b != 0x5C else "\\x%02x" % b
                   for b in os.fsencode(p))


def kind(mode):
    for f, k in TYPES:
        if f(mode):
            return k
    return "?"


def sha(path):
    h = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        return "!" + (os.strerror(e.errno) if e.errno else str(e)).replace(" ", "_")
    try:
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            h.update(b)
    finally:
        os.close(fd)
    return h.hexdigest()


def xattrs(path):
    try:
        names = sorted(os.listxattr(path, follow_symlinks=False))
    except OSError:
        return "-"
    out = []
    for n in names:
        try:
            v = os.getxattr(path, n, follow_symlinks=False)
        except OSError:
            v = b"?"
        out.append("%s=%s" % (n, hashlib.sha256(v).hexdigest()[:16]))
    return ",".join(out) or "-"


def entry(root, rel, full, loose):
    st = os.lstat(full)
    k = kind(st.st_mode)
    if k == "f":
        content = sha(full)
    elif k == "l":
        content = esc(os.readlink(full))
    elif k in "cb":
        content = "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
    else:
        content = "-"
    base = "%s %s %04o %d:%d %s %s" % (esc(rel) or ".", k, stat.S_IMODE(st.st_mode), st.st_uid,
                                       st.st_gid, content, xattrs(full))
    if loose is None:  # the workspace
        return base + (" %d" % st.st_mtime_ns if k in "fp" else "")
    tail = " - -" if rel in loose else " %d %d" % (st.st_nlink, st.st_ctime_ns)
    return base + " %d %d" % (st.st_mtime_ns, st.st_ino) + tail


def tree(d, loose, skip_txbox=False):
    lines = []
    for dirpath, dirnames, filenames in os.walk(d):
        rel_dir = os.path.relpath(dirpath, d)
        if skip_txbox and rel_dir == ".":
            dirnames[:] = [n for n in dirnames if n != ".txbox"]
        for n in dirnames + filenames:
            rel = n if rel_dir == "." else os.path.join(rel_dir, n)
            try:
                lines.append(entry(d, rel, os.path.join(dirpath, n), loose))
            except OSError as e:
                lines.append("%s !%s" % (esc(rel), e.strerror))
    lines.append(entry(d, "", d, loose))
    return sorted(lines)


def hostfile(f):
    try:
        st = os.stat(f)
    except OSError as e:
        return ["%s !%s" % (f, e.strerror)]
    out = ["%s %04o %d:%d" % (f, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)]
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        out[0] += " dev ctime=%d" % st.st_ctime_ns
    elif f.startswith(("/proc/", "/sys/")):
        try:
            with open(f) as fh:
                out[0] += " = " + fh.read().strip().replace("\n", "\\n")
        except OSError as e:
            out[0] += " !" + e.strerror
    else:
        out[0] += " ino=%d size=%d mtime=%d ctime=%d %s" % (st.st_ino, st.st_size, st.st_mtime_ns,
                                                           st.st_ctime_ns, sha(f))
    return out


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: hostsnap.py OUTDIR ...")
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    args = argv[2:]
    trees, lists, files, places, mark, prefix, loose, ws = [], [], [], [], None, None, set(), None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--tree":
            trees.append((args[i + 1], args[i + 2]))
            i += 3
        elif a == "--ws":
            ws = args[i + 1]
            i += 2
        elif a == "--list":
            skip = args[i + 3] if i + 3 < len(args) and not args[i + 3].startswith("--") else None
            lists.append((args[i + 1], args[i + 2], skip))
            i += 4 if skip else 3
        else:
            j = i + 1
            vals = []
            while j < len(args) and not args[j].startswith("--"):
                vals.append(args[j])
                j += 1
            if a == "--files":
                files += vals
            elif a == "--mark":
                mark, places = vals[0], vals[1:]
            elif a == "--mounts":
                prefix = vals[0]
            elif a == "--loose":
                loose |= set(vals)
            else:
                sys.exit("hostsnap: unknown option %s" % a)
            i = j

    def put(name, lines):
        with open(os.path.join(outdir, name), "w") as f:
            f.write("".join(l + "\n" for l in lines))

    for name, d in trees:
        # a tree that is the workspace itself (the workspace is HOME): its
        # state directory changes with every run, and is not the host's
        is_ws = ws is not None and os.path.realpath(d) == os.path.realpath(ws)
        put(name + ".tree", tree(d, loose, skip_txbox=is_ws))
    if ws:
        put("ws.tree", tree(ws, None, skip_txbox=True))
    for name, d, skip in lists:
        try:
            put(name + ".list", sorted(n for n in os.listdir(d) if n != skip))
        except OSError as e:
            put(name + ".list", ["!" + e.strerror])
    host = []
    for f in files:
        host += hostfile(f)
    host.append("hostname " + socket.gethostname())
    put("host", host)
    if prefix:
        with open("/proc/self/mountinfo") as f:
            put("mounts", sorted(" ".join(l.split()[3:]) for l in f
                                 if prefix in l or (mark and mark in l)))
    if mark:
        found = []
        for p in places:
            try:
                found += [os.path.join(p, n) for n in os.listdir(p) if mark in n]
            except OSError:
                pass
        put("mark", sorted(found))


if __name__ == "__main__":
    main(sys.argv)
