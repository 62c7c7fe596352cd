#!/usr/bin/env python3
"""A small service on loopback for tests/integration/saga.bats: it records
every create and delete it gets, one line each, in LOG.

usage: saga_server.py LOG PORTFILE   (PORTFILE gets the port once it listens)

  POST   /items/NAME   creates NAME          -> 201 {"id": "NAME"}
  POST   /items        creates item-N        -> 201 {"id": "item-N"}
  POST   /notify       a notification        -> 200 (nothing to undo)
  DELETE /items/NAME   deletes NAME          -> 200; NAME starting with
                       "locked" is refused   -> 409 (a failing compensation)
"""
import http.server, json, os, sys, socketserver, itertools
LOG = sys.argv[1]
counter = itertools.count(1)
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def rec(self, what):
        with open(LOG, "a") as f:
            f.write(what + "\n")
    def reply(self, code, body):
        b = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_POST(self):
        p = self.path.rstrip("/")
        if p == "/items":
            name = "item-%d" % next(counter)
        elif p.startswith("/items/"):
            name = p[len("/items/"):]
        elif p == "/notify":
            self.rec("NOTIFY"); return self.reply(200, {"ok": True})
        else:
            return self.reply(404, {"error": "no such route"})
        self.rec("CREATE " + name)
        self.reply(201, {"id": name})
    def do_DELETE(self):
        p = self.path
        if not p.startswith("/items/"):
            return self.reply(404, {"error": "no such route"})
        name = p[len("/items/"):]
        if name.startswith("locked"):
            self.rec("DELETE-REFUSED " + name)
            return self.reply(409, {"error": "locked"})
        self.rec("DELETE " + name)
        self.reply(200, {"deleted": name})
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), H)
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write(str(s.server_address[1]))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
s.serve_forever()
