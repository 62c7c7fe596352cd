#!/usr/bin/env python3
"""listener: host-side endpoints that a sandboxed command must not reach.

usage: listener.py DIR UNIX_PATH ABSTRACT_NAME

Listens on TCP 127.0.0.1 and [::1] and UDP 127.0.0.1 (ports chosen by the
kernel), on the pathname unix socket UNIX_PATH and on the abstract unix
socket "\\0ABSTRACT_NAME". Writes DIR/ports (shell assignments: TCP4 TCP6
UDP4) once everything listens, then appends one line to DIR/log for every
connection or datagram received: "tcp4 <first bytes>", "unix ...", etc.
Exits after 600 s or on SIGTERM.
"""
import os
import selectors
import signal
import socket
import sys
import time

d, upath, aname = sys.argv[1], sys.argv[2], sys.argv[3]
log = open(os.path.join(d, "log"), "a", buffering=1)
sel = selectors.DefaultSelector()
socks = {}


def add(kind, fam, typ, addr):
    s = socket.socket(fam, typ)
    if fam != socket.AF_UNIX:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(addr)
    if typ == socket.SOCK_STREAM:
        s.listen(16)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, kind)
    socks[kind] = s
    return s


add("tcp4", socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0))
try:
    add("tcp6", socket.AF_INET6, socket.SOCK_STREAM, ("::1", 0))
except OSError:
    pass
add("udp4", socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0))
add("unix", socket.AF_UNIX, socket.SOCK_STREAM, upath)
os.chmod(upath, 0o777)
add("abstract", socket.AF_UNIX, socket.SOCK_STREAM, "\0" + aname)

with open(os.path.join(d, "ports.tmp"), "w") as f:
    f.write("TCP4=%d\n" % socks["tcp4"].getsockname()[1])
    f.write("TCP6=%d\n" % (socks["tcp6"].getsockname()[1] if "tcp6" in socks else 0))
    f.write("UDP4=%d\n" % socks["udp4"].getsockname()[1])
os.rename(os.path.join(d, "ports.tmp"), os.path.join(d, "ports"))

signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
end = time.time() + 600
while time.time() < end:
    for key, _ in sel.select(timeout=1):
        s, kind = key.fileobj, key.data
        try:
            if kind == "udp4":
                data, _ = s.recvfrom(256)
            else:
                c, _ = s.accept()
                c.settimeout(0.5)
                try:
                    data = c.recv(256)
                except OSError:
                    data = b""
                c.close()
        except OSError as e:
            data = ("(error %s)" % e).encode()
        log.write("%s %r\n" % (kind, data[:80]))
