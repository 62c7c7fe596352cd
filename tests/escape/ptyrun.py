#!/usr/bin/env python3
"""ptyrun: run a command on a fresh pseudo-terminal that is its controlling
terminal, and report what happened to the terminal.

usage: ptyrun.py REPORT TIMEOUT [--input TEXT] -- ARGV...

The command (normally `txbox run ...`) runs in a new session (its leader,
a child of ptyrun, waits for it as a login shell would) whose
controlling terminal is the pty's slave, with the slave as stdin; its
stdout and stderr are ptyrun's own. The slave is in raw mode, so anything
pushed into its input queue (TIOCSTI) can be read back at once.
--input TEXT is typed on the terminal (written to the master) at start.
After the command ends (or is killed after TIMEOUT seconds, with its whole
session), REPORT gets a JSON object:
  status       the command's exit status (128+N for signal N; 124 killed)
  injected     bytes waiting in the terminal's input queue, unread: what
               was injected (nothing is typed there but --input)
  echoed       what was written on the terminal (the master's side)
  fg_pgrp, own_pgrp, fg_changed
               the terminal's foreground process group afterwards, the
               command's, and whether they differ
Exit status: the command's.
"""
import fcntl
import json
import os
import select
import signal
import sys
import termios
import time
import tty

report, timeout = sys.argv[1], float(sys.argv[2])
rest = sys.argv[3:]
typed = None
if rest[:1] == ["--input"]:
    typed, rest = rest[1].encode(), rest[2:]
if rest[:1] != ["--"] or len(rest) < 2:
    sys.exit("usage: ptyrun.py REPORT TIMEOUT [--input TEXT] -- ARGV...")
argv = rest[1:]

master, slave = os.openpty()
tty.setraw(slave)
fgr, fgw = os.pipe()
pid = os.fork()
if pid == 0:
    # The session leader, as a login shell would be: it stays while the
    # command runs in its process group (the terminal's foreground group),
    # then reports the terminal's foreground group as the command left it.
    # (Once a session leader exits, the terminal has no foreground group at
    # all, so it must be looked at before.)
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    os.dup2(slave, 0)
    os.close(master)
    os.close(fgr)
    if slave != 0:
        os.close(slave)
    cpid = os.fork()
    if cpid == 0:
        os.close(fgw)
        try:
            os.execvp(argv[0], argv)
        except OSError as e:
            sys.stderr.write("ptyrun: cannot run %s: %s\n" % (argv[0], e))
            os._exit(127)
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    _, cws = os.waitpid(cpid, 0)
    try:
        fg_now = os.tcgetpgrp(0)
    except OSError:
        fg_now = -1
    os.write(fgw, str(fg_now).encode())
    os.close(fgw)
    code = os.waitstatus_to_exitcode(cws)
    os._exit(code if code >= 0 else 128 - code)
os.close(fgw)

if typed:
    os.write(master, typed)
echoed = b""
deadline = time.time() + timeout
status = None
while status is None:
    r, _, _ = select.select([master], [], [], 0.05)
    if r:
        try:
            echoed += os.read(master, 65536)
        except OSError:
            pass
    wp, ws = os.waitpid(pid, os.WNOHANG)
    if wp == pid:
        status = os.waitstatus_to_exitcode(ws)
        if status < 0:
            status = 128 - status
    elif time.time() > deadline:
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        status = 124
time.sleep(0.1)
while select.select([master], [], [], 0)[0]:
    try:
        chunk = os.read(master, 65536)
    except OSError:
        break
    if not chunk:
        break
    echoed += chunk

fcntl.fcntl(slave, fcntl.F_SETFL, fcntl.fcntl(slave, fcntl.F_GETFL) | os.O_NONBLOCK)
injected = b""
try:
    while True:
        chunk = os.read(slave, 65536)
        if not chunk:
            break
        injected += chunk
except BlockingIOError:
    pass
try:
    fg = int(os.read(fgr, 64) or b"-1")
except (OSError, ValueError):
    fg = -1
with open(report, "w") as f:
    json.dump({"status": status,
               "injected": injected.decode("latin-1"),
               "echoed": echoed.decode("latin-1"),
               "fg_pgrp": fg, "own_pgrp": pid, "fg_changed": fg != pid}, f)
sys.exit(status)
