#!/usr/bin/env python3
"""The agent's side of the sidecar test (tests/containers/kube): run inside
the agent container of deploy/k8s/deployment.yaml, which has python3 and no
txbox, with what the manifest gives it: TXBOX_MCP_URL and TXBOX_TOKEN (from
the Secret). Speaks MCP's Streamable HTTP transport with the standard
library only: a request without the token and one with a wrong token are
refused (401); with the token, initialize, then tools/call `run` with the
command given, whose answer (an SSE stream) must say `committed`. Prints one
line per check ("ok ..." / "FAIL ..."); exit 0 when all passed.

usage: python3 - COMMAND < mcpclient.py
"""
import json
import os
import sys
import urllib.error
import urllib.request

URL = os.environ["TXBOX_MCP_URL"]
TOKEN = os.environ["TXBOX_TOKEN"].strip()
failed = 0


def check(ok, what):
    global failed
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    failed += not ok


def post(body, token=None, session=None):
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = "Bearer " + token
    if session:
        headers["Mcp-Session-Id"] = session
    req = urllib.request.Request(URL, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def answer(ctype, text, want_id):
    """The JSON-RPC answer with id want_id, from JSON or an SSE stream."""
    if "text/event-stream" not in (ctype or ""):
        return json.loads(text)
    for event in text.split("\n\n"):
        data = "\n".join(l[5:].lstrip() for l in event.split("\n") if l.startswith("data:"))
        if data:
            msg = json.loads(data)
            if msg.get("id") == want_id:
                return msg
    return None


init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "txbox-kube-test", "version": "1"}}}
st, _, _ = post(init)
check(st == 401, f"no token: {st}")
st, _, _ = post(init, token="x" * 32)
check(st == 401, f"a wrong token: {st}")
st, hdr, text = post(init, token=TOKEN)
session = {k.lower(): v for k, v in hdr.items()}.get("mcp-session-id")
check(st == 200 and session, f"initialize: {st}, session {'given' if session else 'missing'}")
if failed:
    sys.exit(1)
st, _, _ = post({"jsonrpc": "2.0", "method": "notifications/initialized"}, TOKEN, session)
check(st == 202, f"initialized: {st}")
call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "run", "arguments": {"command": sys.argv[1]}}}
st, hdr, text = post(call, TOKEN, session)
msg = answer({k.lower(): v for k, v in hdr.items()}.get("content-type"), text, 2)
said = (msg or {}).get("result", {}).get("content", [{}])[0].get("text", "")
check(st == 200 and "committed" in said, f"run: {st}, {said.splitlines()[0] if said else text[:200]}")
sys.exit(1 if failed else 0)
