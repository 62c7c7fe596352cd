#!/usr/bin/env python3
"""sigsentinel: a host process that records every signal it receives.

usage: sigsentinel.py LOG

Catches every catchable signal (SIGKILL and SIGSTOP cannot be caught; the
tests see those as the process dying or stopping) and appends "signal N" to
LOG. Writes "ready" to LOG once the handlers are in place. Exits after
600 s.
"""
import os
import signal
import sys
import time

log = sys.argv[1]


def note(sig, _frame):
    with open(log, "a") as f:
        f.write("signal %d\n" % sig)


for s in signal.valid_signals():
    if s in (signal.SIGKILL, signal.SIGSTOP):
        continue
    try:
        signal.signal(s, note)
    except (OSError, ValueError):
        pass
with open(log, "a") as f:
    f.write("ready\n")
end = time.time() + 600
while time.time() < end:
    time.sleep(1)
