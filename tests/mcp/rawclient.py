#!/usr/bin/env python3
"""Protocol robustness of `txbox mcp`: raw bytes in, every line out checked.

    rawclient.py TXBOX WORKSPACE CASE

Runs one session of `txbox mcp -C WORKSPACE` with the bytes of CASE on its
stdin (then EOF), and checks: the server exits 0 without a crash report;
every line it wrote to stdout is a JSON-RPC 2.0 response (an object with
"jsonrpc":"2.0", an id, and a result xor an error); and the responses are
exactly the ones CASE expects (the right error code for each bad message,
with the request's id or null). Exit status 0 when all holds, 1 with a
message otherwise. CASE names are listed by `rawclient.py - - list`.
"""
import json
import random
import subprocess
import sys

INIT = (b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25",'
        b'"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}\n'
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')


def req(id_, method, params=None):
    m = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        m["params"] = params
    return (json.dumps(m) + "\n").encode()


PING_LAST = req("last", "ping")
# (expected responses in order: (id, "result") or (id, error code))
OK_INIT = ("init", "result")
OK_LAST = ("last", "result")


def case_invalid_json():
    data = INIT + b'{"jsonrpc":"2.0","id":1,"method":"ping"\n{bad}\n"str\n' + PING_LAST
    return data, [OK_INIT, (None, -32700), (None, -32700), (None, -32700), OK_LAST]


def case_batch():
    data = INIT + b'[' + req(1, "ping").strip() + b',' + req(2, "ping").strip() + b']\n[]\n' + PING_LAST
    return data, [OK_INIT, (None, -32600), (None, -32600), OK_LAST]


def case_long_line():
    big = b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"' + b'x' * (10 * 1024 * 1024) + b'"}}\n'
    return INIT + big + PING_LAST, [OK_INIT, (None, -32600), OK_LAST]


def case_binary_garbage():
    rnd = random.Random(20251125)
    junk = bytes(rnd.randrange(256) for _ in range(200000))
    # garbage lines, never a valid JSON-RPC request by chance: drop '{' so
    # no line can parse as an object
    junk = junk.replace(b'{', b'?')
    data = INIT + junk + b'\n' + b'\x00\x00\xff\xfe\n' + PING_LAST
    return data, [OK_INIT, "garbage", OK_LAST]


def case_unknown_method():
    data = INIT + req(5, "no/such/method") + req(6, "resources/list", {}) + PING_LAST
    return data, [OK_INIT, (5, -32601), (6, -32601), OK_LAST]


def case_before_initialize():
    data = (req(1, "tools/list") + req(2, "tools/call", {"name": "run", "arguments": {"command": "touch x"}})
            + req(3, "ping") + INIT + req(4, "tools/list"))
    return data, [(1, -32600), (2, -32600), (3, "result"), OK_INIT, (4, "result")]


def case_eof_mid_message():
    return INIT + b'{"jsonrpc":"2.0","id":4,"method":"pi', [OK_INIT, (None, -32700)]


def case_bad_ids():
    data = (INIT + b'{"jsonrpc":"2.0","id":null,"method":"ping"}\n{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}\n'
            b'{"jsonrpc":"2.0","id":true,"method":"ping"}\n{"jsonrpc":"1.0","id":7,"method":"ping"}\n'
            b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}\n'
            b'{"jsonrpc":"2.0","method":"no/such/notification"}\n{"jsonrpc":"2.0","id":8,"result":{}}\n' + PING_LAST)
    return data, [OK_INIT, (None, -32600), (None, -32600), (None, -32600), (7, -32600), OK_LAST]


def case_invalid_params():
    data = (req(1, "initialize", {"capabilities": {}}) + INIT + req(2, "tools/call", [1, 2])
            + req(3, "tools/call", {"arguments": {}}) + req(4, "tools/call", {"name": "nope"})
            + req(5, "tools/list", {"cursor": 5}) + req(6, "initialize", {"protocolVersion": "2025-11-25"})
            + PING_LAST)
    return data, [(1, -32602), OK_INIT, (2, -32602), (3, -32602), (4, -32602), (5, -32602), (6, -32600), OK_LAST]


def case_versions():
    data = req(1, "initialize", {"protocolVersion": "2024-11-05", "capabilities": {},
                                 "clientInfo": {"name": "old", "version": "1"}}) + PING_LAST
    return data, [(1, "result"), OK_LAST], {"1": "2024-11-05"}


def case_unknown_version():
    data = req(1, "initialize", {"protocolVersion": "1999-01-01", "capabilities": {},
                                 "clientInfo": {"name": "x", "version": "1"}}) + PING_LAST
    return data, [(1, "result"), OK_LAST], {"1": "2025-11-25"}


def case_old_revision_invalid_args():
    # Before 2025-11-25, bad tool arguments are Invalid params (-32602).
    data = (req(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "x", "version": "1"}})
            + req(2, "tools/call", {"name": "run", "arguments": {"command": 7}}) + PING_LAST)
    return data, [(1, "result"), (2, -32602), OK_LAST]


def case_empty_input():
    return b'', []


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}


def fail(msg, out=b"", err=b""):
    print("FAIL: " + msg, file=sys.stderr)
    if out:
        print("--- stdout (start) ---\n" + out[:3000].decode("utf-8", "replace"), file=sys.stderr)
    if err:
        print("--- stderr (end) ---\n" + err[-3000:].decode("utf-8", "replace"), file=sys.stderr)
    sys.exit(1)


def main():
    txbox, ws, name = sys.argv[1:4]
    if name == "list":
        print("\n".join(CASES))
        return
    spec = CASES[name]()
    data, expected = spec[0], spec[1]
    versions = spec[2] if len(spec) > 2 and isinstance(spec[2], dict) else {}
    try:
        p = subprocess.run([txbox, "mcp", "-C", ws], input=data, capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        fail("the server did not exit within 120 s after EOF")
    out, err = p.stdout, p.stderr
    if p.returncode != 0:
        fail(f"exit status {p.returncode}, want 0", out, err)
    if b"AddressSanitizer" in err or b"runtime error" in err:
        fail("crash report on stderr", out, err)
    if out and not out.endswith(b"\n"):
        fail("stdout does not end with a newline", out, err)
    got = []
    for i, line in enumerate(out.split(b"\n")[:-1] if out else []):
        try:
            m = json.loads(line)
        except ValueError:
            fail(f"stdout line {i + 1} is not JSON: {line[:200]!r}", out, err)
        if not isinstance(m, dict) or m.get("jsonrpc") != "2.0" or "id" not in m:
            fail(f"stdout line {i + 1} is not a JSON-RPC response: {line[:200]!r}", out, err)
        if ("result" in m) == ("error" in m):
            fail(f"stdout line {i + 1} has neither or both of result and error", out, err)
        if "error" in m and not (isinstance(m["error"].get("code"), int) and isinstance(m["error"].get("message"), str)):
            fail(f"stdout line {i + 1}: malformed error object", out, err)
        got.append(m)
    # "garbage": any number of id-null parse or invalid-request errors
    exp = []
    for e in expected:
        if e == "garbage":
            while len(got) > len(exp) and got[len(exp)].get("id") is None and "error" in got[len(exp)]:
                if got[len(exp)]["error"]["code"] not in (-32700, -32600):
                    fail(f"garbage answered with code {got[len(exp)]['error']['code']}", out, err)
                exp.append(("garbage", None))
        else:
            exp.append(e)
    if len(got) != len(exp):
        fail(f"{len(got)} responses, want {len(exp)}: {[(m.get('id'), m.get('error', {}).get('code', 'result')) for m in got]}",
             out, err)
    for m, (want_id, want) in zip(got, exp):
        if want_id == "garbage":
            continue
        if m["id"] != want_id:
            fail(f"response id {m['id']!r}, want {want_id!r}: {m}", out, err)
        if want == "result":
            if "result" not in m:
                fail(f"id {want_id!r}: an error, want a result: {m}", out, err)
        elif "error" not in m or m["error"]["code"] != want:
            fail(f"id {want_id!r}: {m.get('error') or m.get('result')}, want error {want}", out, err)
        if str(want_id) in versions and m["result"].get("protocolVersion") != versions[str(want_id)]:
            fail(f"negotiated {m['result'].get('protocolVersion')}, want {versions[str(want_id)]}", out, err)
    print(f"{name}: {len(got)} responses as expected")


if __name__ == "__main__":
    main()
