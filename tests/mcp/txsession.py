#!/usr/bin/env python3
"""One `txbox mcp` session that begins a multi-command transaction, stages
a command in it and ends without committing.

    txsession.py TXBOX WORKSPACE eof|sigterm [--plain] [SERVER-OPTION...]

Sends initialize, `begin`, `run` with the transaction's id (echo staged >
staged.txt), waiting for each answer (with --structured, unless --plain:
then the answers as a model sees them); then ends the session by closing the
server's stdin (eof) or by SIGTERM. Prints one JSON line: {"tx": ID,
"run_outcome": ..., "server_status": N, "stderr": ...}. Exit status 0 when
the session went as described (whatever the server then did with the
transaction: the caller checks that), 1 otherwise.
"""
import json
import signal
import subprocess
import sys


def main():
    txbox, ws, how, *opts = sys.argv[1:]
    plain = opts[:1] == ["--plain"]
    if plain:
        opts = opts[1:]
    else:
        opts = ["--structured", *opts]
    p = subprocess.Popen([txbox, "mcp", "-C", ws, *opts], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)

    def call(i, method, params):
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
        p.stdin.flush()
        line = p.stdout.readline()
        if not line:
            raise SystemExit(f"no answer to {method}: {p.stderr.read().decode(errors='replace')}")
        return json.loads(line)

    call(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "txsession", "version": "1"}})
    b = call(2, "tools/call", {"name": "begin", "arguments": {"name": "session"}})
    if plain:  # the text's JSON line: {"transaction": ID}
        tx = json.loads(b["result"]["content"][0]["text"].splitlines()[-1])["transaction"]
    else:
        tx = b["result"]["structuredContent"]["tx"]
    r = call(3, "tools/call", {"name": "run", "arguments": {"command": "echo staged > staged.txt", "tx": tx}})
    if plain:
        outcome = json.loads(r["result"]["content"][0]["text"].splitlines()[-1])["outcome"]
    else:
        outcome = r["result"]["structuredContent"]["outcome"]
    if how == "eof":
        p.stdin.close()
    else:
        p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        raise SystemExit("the server did not exit within 60 s")
    err = p.stderr.read().decode(errors="replace")
    print(json.dumps({"tx": tx, "run_outcome": outcome, "server_status": rc, "stderr": err}))
    return 0 if outcome == "staged" else 1


if __name__ == "__main__":
    sys.exit(main())
