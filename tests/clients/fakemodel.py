#!/usr/bin/env python3
"""A fake model server on 127.0.0.1 for the real agent CLIs, speaking the
three wire protocols they use:

  POST .../chat/completions                  OpenAI chat completions (qwen-code), SSE
  POST .../responses                         OpenAI Responses API (Codex), SSE
  POST .../models/M:streamGenerateContent    Gemini API (Gemini CLI), SSE
  POST .../models/M:generateContent          (Gemini CLI's side questions)

The "model" follows one script, given on the command line: on the first
turn it calls one tool (the first offered tool whose name matches TOOL_RE)
with {"command": COMMAND} (and the shell tools' other arguments); once a
tool result is in the conversation it answers with text and stops. Every
request and every tool result it saw is appended, one JSON object a line,
to LOG, for the test to check what the model was told.

usage: fakemodel.py PORTFILE LOG TOOL_RE COMMAND
"""
import http.server
import json
import re
import socketserver
import sys
import time

PORTFILE, LOG, TOOL_RE, COMMAND = sys.argv[1:5]
MAX_REQUEST = 64 * 1024 * 1024


def log(obj):
    with open(LOG, "a") as f:
        f.write(json.dumps(obj) + "\n")


def pick_tool(names):
    for n in names:
        if re.search(TOOL_RE, n):
            return n
    return None


def shell_args(name):
    args = {"command": COMMAND}
    if name in ("run_shell_command",):
        args["description"] = "the test's command"
        args["is_background"] = False
    return args


FINAL = "Done: the command ran."


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_REQUEST:
            raise ValueError("request too large")
        return json.loads(self.rfile.read(n) or b"{}")

    def send_sse(self, events):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for ev in events:
            self.wfile.write(ev.encode())
            self.wfile.flush()
        self.close_connection = True

    def send_json(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        # model lists and the like: an empty but well-formed answer
        log({"get": self.path})
        if self.path.rstrip("/").endswith("/models"):
            self.send_json({"object": "list", "data": [{"id": "fake-model", "object": "model"}], "models": []})
        else:
            self.send_json({}, 404)

    def do_POST(self):
        try:
            req = self.body()
        except Exception as e:
            self.send_json({"error": {"message": str(e)}}, 400)
            return
        path = self.path.split("?")[0]
        log({"path": self.path, "request": req})
        if path.endswith("/chat/completions"):
            self.chat(req)
        elif path.endswith("/responses"):
            self.openai_responses(req)
        elif ":streamGenerateContent" in path:
            self.gemini(req, stream=True)
        elif ":generateContent" in path:
            self.gemini(req, stream=False)
        elif ":countTokens" in path:
            self.send_json({"totalTokens": 10})
        else:
            self.send_json({"error": {"message": "not served: " + path}}, 404)

    # ---- OpenAI chat completions ----
    def chat(self, req):
        msgs = req.get("messages", [])
        names = [t.get("function", {}).get("name", "") for t in req.get("tools", []) or []]
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": req.get("model", "fake-model")}
        target_ids = {c.get("id") for m in msgs if m.get("role") == "assistant"
                      for c in m.get("tool_calls") or [] if re.search(TOOL_RE, c.get("function", {}).get("name", ""))}
        searched = any(c.get("function", {}).get("name") == "tool_search" for m in msgs
                       if m.get("role") == "assistant" for c in m.get("tool_calls") or [])
        tool = pick_tool(names)
        call = None
        if target_ids:
            for m in msgs:
                if m.get("role") == "tool" and m.get("tool_call_id") in target_ids:
                    log({"tool_result": m.get("content")})
        elif tool:
            call = (tool, shell_args(tool))
        elif "tool_search" in names and not searched:
            # qwen-code defers MCP tools: the system prompt names them, and
            # tool_search "select:NAME" brings in the declaration
            text = " ".join(m["content"] if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
                            for m in msgs if m.get("role") == "system")
            found = pick_tool(re.findall(r"[A-Za-z0-9_.-]+", text))
            if found:
                call = ("tool_search", {"query": "select:" + found})
        if call is None and not target_ids:
            log({"no_tool": names})
        if call:
            deltas = [{"role": "assistant", "content": None, "tool_calls": [
                {"index": 0, "id": "call_%d" % len(msgs), "type": "function",
                 "function": {"name": call[0], "arguments": json.dumps(call[1])}}]}]
            finish = "tool_calls"
        else:
            deltas = [{"role": "assistant", "content": FINAL}]
            finish = "stop"
        if not req.get("stream"):
            msg = dict(deltas[0])
            self.send_json({"id": "chatcmpl-1", "object": "chat.completion", "created": base["created"],
                            "model": base["model"],
                            "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
            return
        events = []
        for d in deltas:
            events.append("data: " + json.dumps(dict(base, choices=[{"index": 0, "delta": d, "finish_reason": None}])) + "\n\n")
        events.append("data: " + json.dumps(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}],
                                                   usage={"prompt_tokens": 10, "completion_tokens": 5,
                                                          "total_tokens": 15})) + "\n\n")
        events.append("data: [DONE]\n\n")
        self.send_sse(events)

    # ---- OpenAI Responses API (Codex) ----
    def openai_responses(self, req):
        items = req.get("input", []) or []
        results = [i for i in items if isinstance(i, dict) and i.get("type") in ("function_call_output", "custom_tool_call_output")]
        names, ns_of = [], {}
        for t in req.get("tools", []) or []:
            if t.get("type") == "namespace":
                # Codex groups an MCP server's tools in a namespace
                for sub in t.get("tools", []):
                    full = t["name"] + "__" + sub.get("name", "")
                    names.append(full)
                    ns_of[full] = (t["name"], sub.get("name", ""))
            else:
                names.append(t.get("name") or t.get("function", {}).get("name", ""))
        tool = pick_tool(names)
        rid = "resp_%d" % int(time.time() * 1000)

        def ev(kind, obj):
            obj = dict(obj, type=kind)
            return "event: %s\ndata: %s\n\n" % (kind, json.dumps(obj))

        events = [ev("response.created", {"response": {"id": rid, "object": "response", "status": "in_progress"}})]
        if results or not tool:
            for r in results:
                log({"tool_result": r.get("output")})
            if not tool and not results:
                log({"no_tool": names})
            item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": FINAL, "annotations": []}]}
        else:
            item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": tool,
                    "arguments": json.dumps(shell_args(tool)), "status": "completed"}
            if tool in ns_of:
                item["namespace"], item["name"] = ns_of[tool]
        events.append(ev("response.output_item.added", {"output_index": 0, "item": item}))
        events.append(ev("response.output_item.done", {"output_index": 0, "item": item}))
        events.append(ev("response.completed", {"response": {
            "id": rid, "object": "response", "status": "completed", "output": [item],
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}}}))
        self.send_sse(events)

    # ---- Gemini API ----
    def gemini(self, req, stream):
        contents = req.get("contents", []) or []
        results = [p["functionResponse"] for c in contents for p in c.get("parts", []) if "functionResponse" in p]
        names = [d.get("name", "") for t in req.get("tools", []) or [] for d in t.get("functionDeclarations", []) or []]
        tool = pick_tool(names)
        schema = (req.get("generationConfig") or {}).get("responseJsonSchema") or \
            (req.get("generationConfig") or {}).get("responseSchema")
        if not stream and schema is not None:
            # a side question (next speaker, routing, loop check): answer
            # with JSON that says "the user speaks next" / "no loop"
            text = json.dumps({"reasoning": "test", "next_speaker": "user", "model_choice": "flash",
                               "is_stuck": False, "unproductive_state_confidence": 0,
                               "unproductive_state_analysis": ""})
            parts = [{"text": text}]
        elif results or not tool:
            for r in results:
                log({"tool_result": r.get("response")})
            if not tool and not results:
                log({"no_tool": names})
            parts = [{"text": FINAL}]
        else:
            parts = [{"functionCall": {"name": tool, "args": shell_args(tool)}}]
        resp = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
                "modelVersion": "fake-model"}
        if stream:
            self.send_sse(["data: " + json.dumps(resp) + "\r\n\r\n"])
        else:
            self.send_json(resp)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    srv = Server(("127.0.0.1", 0), H)
    with open(PORTFILE + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(PORTFILE + ".tmp", PORTFILE)
    srv.serve_forever()


if __name__ == "__main__":
    main()
