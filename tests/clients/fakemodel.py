#!/usr/bin/env python3
"""A fake model server on 127.0.0.1 for the real agent CLIs, speaking the
four wire protocols they use:

  POST .../chat/completions                  OpenAI chat completions (qwen-code, opencode), SSE
  POST .../responses                         OpenAI Responses API (Codex), SSE
  POST .../models/M:streamGenerateContent    Gemini API (Gemini CLI), SSE
  POST .../models/M:generateContent          (Gemini CLI's side questions)
  POST .../v1/messages                       Anthropic Messages API (Claude Code), SSE

The "model" follows one script, given on the command line: COMMAND is one
shell command, or a JSON array of steps (each a command string, or an
object of the tool's arguments, such as {"command": ..., "run_in_background":
true} for Claude Code's Bash tool). While fewer results of the tool than
steps are in the conversation, it calls one tool (the first offered tool
whose name matches TOOL_RE) with the next step's arguments (and the shell
tools' other arguments); then it answers with text and stops. A step may
name another tool with "tool": TOOL_RE. In a step's string arguments,
"{{last:REGEX}}" stands for REGEX's first group in the latest result that
it matches (a path the CLI named there, say). Every request and every tool
result it saw is appended, one JSON object a line, to LOG, for the test to
check what the model was told. A request with no tools (a side question:
a title, a command's prefix) gets a short text answer.

usage: fakemodel.py PORTFILE LOG TOOL_RE COMMAND
"""
import http.server
import itertools
import json
import re
import socketserver
import sys
import time

PORTFILE, LOG, TOOL_RE, COMMAND = sys.argv[1:5]
MAX_REQUEST = 64 * 1024 * 1024
try:
    STEPS = json.loads(COMMAND) if COMMAND.startswith("[") else [COMMAND]
except ValueError:
    STEPS = [COMMAND]


def log(obj):
    with open(LOG, "a") as f:
        f.write(json.dumps(obj) + "\n")


def pick_tool(names, pattern=None):
    for n in names:
        if re.search(pattern or TOOL_RE, n):
            return n
    return None


def step_args(i):
    st = STEPS[i]
    return dict(st) if isinstance(st, dict) else {"command": st}


def step_tool(i, names):
    """The tool step i calls: its own "tool" pattern, else TOOL_RE."""
    return pick_tool(names, step_args(i).get("tool"))


LAST = re.compile(r"\{\{last:(.*?)\}\}")


def from_last(value, results):
    """value with each {{last:REGEX}} replaced by REGEX's first group in
    the latest result it matches ("" when none does)."""
    def sub(m):
        for r in reversed(results):
            found = re.search(m.group(1), r if isinstance(r, str) else json.dumps(r), re.M)
            if found:
                return found.group(1)
        return ""
    return LAST.sub(sub, value)


def shell_args(name, i=0, results=()):
    args = step_args(i)
    args.pop("tool", None)
    args = {k: from_last(v, results) if isinstance(v, str) else v for k, v in args.items()}
    if name in ("run_shell_command",):
        args.setdefault("description", "the test's command")
        args.setdefault("is_background", False)
    if name in ("Bash", "bash"):
        args.setdefault("description", "the test's command")
    return args


def is_target(name):
    """A call of the script's tools (what counts as a step done)."""
    pats = {TOOL_RE} | {s.get("tool") for s in STEPS if isinstance(s, dict) and s.get("tool")}
    return any(re.search(p, name or "") for p in pats)


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
        elif path.endswith("/messages/count_tokens"):
            self.send_json({"input_tokens": 10})
        elif path.endswith("/messages"):
            self.anthropic(req)
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
        target_ids = [c.get("id") for m in msgs if m.get("role") == "assistant"
                      for c in m.get("tool_calls") or [] if is_target(c.get("function", {}).get("name", ""))]
        results = [m.get("content") for i in target_ids for m in msgs
                   if m.get("role") == "tool" and m.get("tool_call_id") == i]
        searched = any(c.get("function", {}).get("name") == "tool_search" for m in msgs
                       if m.get("role") == "assistant" for c in m.get("tool_calls") or [])
        call = next_call(names, results)
        if call is None and len(results) < len(STEPS) and "tool_search" in names and not searched:
            # qwen-code defers MCP tools: the system prompt names them, and
            # tool_search "select:NAME" brings in the declaration
            text = " ".join(m["content"] if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
                            for m in msgs if m.get("role") == "system")
            found = pick_tool(re.findall(r"[A-Za-z0-9_.-]+", text))
            if found:
                call = ("tool_search", {"query": "select:" + found})
        if call:
            deltas = [{"role": "assistant", "content": None, "tool_calls": [
                {"index": 0, "id": "call_%d" % next(IDS), "type": "function",
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
        call_ids = [i.get("call_id") for i in items if isinstance(i, dict) and i.get("type") == "function_call"
                    and is_target((i.get("namespace", "") + "__" if i.get("namespace") else "") + i.get("name", ""))]
        results = [i.get("output") for c in call_ids for i in items if isinstance(i, dict)
                   and i.get("type") in ("function_call_output", "custom_tool_call_output") and i.get("call_id") == c]
        call = next_call(names, results)
        rid = "resp_%d" % int(time.time() * 1000)

        def ev(kind, obj):
            obj = dict(obj, type=kind)
            return "event: %s\ndata: %s\n\n" % (kind, json.dumps(obj))

        events = [ev("response.created", {"response": {"id": rid, "object": "response", "status": "in_progress"}})]
        if not call:
            item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": FINAL, "annotations": []}]}
        else:
            tool, args = call
            item = {"type": "function_call", "id": "fc_%d" % next(IDS), "call_id": "call_%d" % next(IDS),
                    "name": tool, "arguments": json.dumps(args), "status": "completed"}
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
        results = [p["functionResponse"].get("response") for c in contents for p in c.get("parts", [])
                   if "functionResponse" in p and is_target(p["functionResponse"].get("name"))]
        names = [d.get("name", "") for t in req.get("tools", []) or [] for d in t.get("functionDeclarations", []) or []]
        schema = (req.get("generationConfig") or {}).get("responseJsonSchema") or \
            (req.get("generationConfig") or {}).get("responseSchema")
        if not stream and schema is not None:
            # a side question (next speaker, routing, loop check): answer
            # with JSON that says "the user speaks next" / "no loop"
            text = json.dumps({"reasoning": "test", "next_speaker": "user", "model_choice": "flash",
                               "is_stuck": False, "unproductive_state_confidence": 0,
                               "unproductive_state_analysis": ""})
            parts = [{"text": text}]
        else:
            call = next_call(names, results)
            parts = [{"functionCall": {"name": call[0], "args": call[1]}}] if call else [{"text": FINAL}]
        resp = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
                "modelVersion": "fake-model"}
        if stream:
            self.send_sse(["data: " + json.dumps(resp) + "\r\n\r\n"])
        else:
            self.send_json(resp)

    # ---- Anthropic Messages API (Claude Code) ----
    def anthropic(self, req):
        msgs = req.get("messages", []) or []
        names = [t.get("name", "") for t in req.get("tools", []) or []]
        blocks = [(m.get("role"), b) for m in msgs if isinstance(m.get("content"), list)
                  for b in m["content"] if isinstance(b, dict)]
        use_ids = [b.get("id") for r, b in blocks if r == "assistant" and b.get("type") == "tool_use"
                   and is_target(b.get("name"))]
        results = []
        for i in use_ids:
            for r, b in blocks:
                if b.get("type") == "tool_result" and b.get("tool_use_id") == i:
                    c = b.get("content")
                    if isinstance(c, list):  # text blocks: the text as the model reads it
                        c = "\n".join(x.get("text", json.dumps(x)) for x in c if isinstance(x, dict))
                    results.append(c)
        call = next_call(names, results) if names else None
        searched = any(b.get("type") == "tool_use" and b.get("name") == "ToolSearch" for r, b in blocks)
        if call is None and names and len(results) < len(STEPS) and "ToolSearch" in names and not searched:
            # Claude Code defers MCP tools: a system message names them, and
            # ToolSearch "select:NAME" brings in the declaration
            text = " ".join(b.get("text", "") for r, b in blocks) + " ".join(
                m["content"] for m in msgs if isinstance(m.get("content"), str))
            pat = step_args(len(results)).get("tool") or TOOL_RE
            found = pick_tool(re.findall(r"[A-Za-z0-9_.-]+", text), pat)
            if found:
                call = ("ToolSearch", {"query": "select:" + found})
        model = req.get("model", "fake-model")
        if call:
            block = {"type": "tool_use", "id": "toolu_%d" % next(IDS), "name": call[0], "input": call[1]}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": FINAL}
            stop = "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        msg = {"id": "msg_%d" % int(time.time() * 1000), "type": "message", "role": "assistant", "model": model,
               "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not req.get("stream"):
            self.send_json(msg)
            return

        def ev(kind, obj):
            return "event: %s\ndata: %s\n\n" % (kind, json.dumps(dict(obj, type=kind)))

        start = dict(msg, content=[], stop_reason=None)
        if call:
            first = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(call[1])}
        else:
            first = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": FINAL}
        self.send_sse([ev("message_start", {"message": start}),
                       ev("content_block_start", {"index": 0, "content_block": first}),
                       ev("content_block_delta", {"index": 0, "delta": delta}),
                       ev("content_block_stop", {"index": 0}),
                       ev("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                                            "usage": {"output_tokens": 5}}),
                       ev("message_stop", {})])


LOGGED = [0]
IDS = itertools.count(1)  # tool call ids, unique in a run


def next_call(names, results):
    """The next step's call (tool, arguments), or None when the script is
    done or no tool of the step is offered. Logs the results not logged
    yet, in order: what the model was told."""
    for r in results[LOGGED[0]:]:
        log({"tool_result": r})
    LOGGED[0] = max(LOGGED[0], len(results))
    n = len(results)
    if n >= len(STEPS):
        return None
    tool = step_tool(n, names)
    if not tool:
        log({"no_tool": names})
        return None
    return (tool, shell_args(tool, n, results))


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
