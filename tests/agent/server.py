#!/usr/bin/env python3
"""A scripted OpenAI-compatible chat completions server for txbox's agent tests.

It serves canned replies, in order, one per request, and records every
request (method, path, headers, body) for the test to check afterwards, in
the manner of curl's test server. It binds 127.0.0.1 on an ephemeral port
only. Python standard library only.

A reply is a dict:
  status   HTTP status (default 200)
  body     bytes to send (default b"")
  type     Content-Type (default application/json)
  sse      True: send body as an event stream, one event at a time
  chunk_delay  seconds between SSE events (default 0)
  delay    seconds to wait before answering
  hang     seconds to hold the request without answering (the client
           should time out first); ends early when the server stops
  close    True: close the connection without any response
  headers  list of (name, value)
  hook     True: call Script.on_hook first (the test's own action)

Standalone use (for trying txbox agent by hand):
  python3 server.py CASEFILE      prints "port N", serves the case's replies,
                                  exits a second after the last one is answered
                                  (printing the requests it got as JSON)
"""
import http.server
import json
import socketserver
import sys
import threading
import time

MAX_REQUEST = 16 * 1024 * 1024


class Script:
    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []
        self.extra = 0  # requests that came after the replies ran out
        self.inflight = 0  # requests being answered
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.on_request = None  # a function whose value is recorded as record["workspace"]
        self.on_hook = None  # run before a reply marked "hook" is served

    def take(self, record):
        with self.lock:
            nxt = self.replies[0] if self.replies else None
        if nxt and nxt.get("hook") and self.on_hook:
            self.on_hook()
        if self.on_request:
            record["workspace"] = self.on_request()
        with self.lock:
            self.requests.append(record)
            if self.replies:
                return self.replies.pop(0)
            self.extra += 1
            return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server_version = "txbox-test-llm/1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def _record(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(min(n, MAX_REQUEST)) if n > 0 else b""
        try:
            body = json.loads(raw.decode("utf-8"))
        except Exception:
            body = None
        return {
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
            "raw": raw.decode("utf-8", "replace"),
        }

    def _serve(self):
        script = self.server.script
        with script.lock:
            script.inflight += 1
        try:
            self._answer(script)
        finally:
            with script.lock:
                script.inflight -= 1

    def _answer(self, script):
        reply = script.take(self._record())
        if reply is None:
            self._send(500, b'{"error":{"message":"test server: no more canned replies"}}',
                       "application/json", [])
            return
        if reply.get("delay"):
            script.stopping.wait(reply["delay"])
        if reply.get("hang"):
            script.stopping.wait(reply["hang"])
            return  # the connection closes without a reply
        if reply.get("close"):
            return
        status = reply.get("status", 200)
        body = reply.get("body", b"")
        headers = reply.get("headers", [])
        if reply.get("sse"):
            self.send_response(status)
            self.send_header("Content-Type", reply.get("type", "text/event-stream"))
            self.send_header("Cache-Control", "no-cache")
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            # One event (up to and including its blank line) per write.
            parts = body.split(b"\n\n")
            try:
                for i, p in enumerate(parts):
                    if i < len(parts) - 1:
                        p += b"\n\n"
                    if not p:
                        continue
                    self.wfile.write(p)
                    self.wfile.flush()
                    if reply.get("chunk_delay"):
                        if script.stopping.wait(reply["chunk_delay"]):
                            return
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        self._send(status, body, reply.get("type", "application/json"), headers)

    def _send(self, status, body, ctype, headers):
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_POST = _serve
    do_GET = _serve


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, script):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script = script

    @property
    def port(self):
        return self.server_address[1]


def start(replies):
    """Start a server in a thread; returns (server, script). Stop with stop()."""
    script = Script(replies)
    srv = Server(script)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    srv.thread = t
    return srv, script


def stop(srv):
    srv.script.stopping.set()
    srv.shutdown()
    srv.server_close()
    srv.thread.join(timeout=5)


if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import casefile

    case = casefile.load(sys.argv[1])
    srv, script = start(case.replies)
    print("port", srv.port, flush=True)
    try:
        while script.replies or script.inflight:
            time.sleep(0.2)
        time.sleep(1)
    except KeyboardInterrupt:
        pass
    stop(srv)
    json.dump(script.requests, sys.stdout, indent=1)
