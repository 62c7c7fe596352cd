"""Case files for the agent tests, in the manner of curl's tests/data/testN.

A case file is a sequence of sections; each starts with a line
    --- NAME [attr[=value]]...
and runs to the next such line. Lines before the first section and lines
starting with '#' directly after a section header line are comments.

  --- info              one line: what the case shows
  --- args              extra arguments for `txbox agent` (shell words);
                        the runner adds --json -C WS --endpoint URL --model test-model
  --- env               KEY=VALUE lines for txbox's environment
  --- setup             a sh script run in the fresh workspace first
  --- hook              a sh script run in the workspace when a request whose
                        reply has the attribute `hook` arrives, before the
                        workspace is recorded and the reply sent ($TXBOX: the
                        binary under test); e.g. another txbox commit meanwhile
  --- requires          lines "blocked: CMD": skip (exit 77) unless `txbox run`
                        blocks CMD (the policy engine is wired in); "command: NAME"
                        / "no-command: NAME": skip unless `txbox NAME` exists / is missing
  --- reply [attrs]     one canned reply, served in order; the body is the text
                        attrs: status=N  type=CT  sse  chunk-delay=S  delay=S
                               hang=S  close  raw  bytes=N (repeat the body to N
                               bytes)  header=Name:Value (repeatable)  hook
  --- verify            assertions, one per line (see runcase.py)
"""
import json
import shlex


class Case:
    def __init__(self, path):
        self.path = path
        self.info = ""
        self.args = []
        self.env = {}
        self.setup = ""
        self.hook = ""
        self.requires = []
        self.replies = []
        self.verify = []
        self.timeout = 60


def _attrs(words):
    out = {}
    headers = []
    for w in words:
        k, eq, v = w.partition("=")
        if k == "header":
            name, _, value = v.partition(":")
            headers.append((name.strip(), value.strip()))
        else:
            out[k] = v if eq else True
    out["headers"] = headers
    return out


def _reply(attrs, text, where):
    r = {"headers": attrs["headers"]}
    if "status" in attrs:
        r["status"] = int(attrs["status"])
    for k in ("delay", "hang", "chunk-delay"):
        if k in attrs:
            r[k.replace("-", "_")] = float(attrs[k])
    if "close" in attrs:
        r["close"] = True
    if "hook" in attrs:
        r["hook"] = True
    if "type" in attrs:
        r["type"] = attrs["type"]
    if "sse" in attrs:
        r["sse"] = True
        text = text.rstrip("\n") + "\n\n"
    elif "raw" not in attrs:
        text = text.strip("\n")
        if text and r.get("status", 200) == 200 and "type" not in attrs:
            json.loads(text)  # a case-file typo must not pass as "malformed JSON"
    body = text.encode("utf-8")
    if "bytes" in attrs:
        n = int(attrs["bytes"])
        unit = body or b"x"
        body = (unit * (n // len(unit) + 1))[:n]
    r["body"] = body
    return r


def load(path):
    case = Case(path)
    sections = []
    cur = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("--- "):
                words = shlex.split(line[4:])
                cur = [words[0], words[1:], []]
                sections.append(cur)
            elif cur is not None:
                cur[2].append(line)
    for name, attrs, lines in sections:
        text = "".join(lines)
        if name == "info":
            case.info = text.strip()
        elif name == "args":
            case.args = shlex.split(text, comments=True)
            a = _attrs(attrs)
            if "timeout" in a:
                case.timeout = float(a["timeout"])
        elif name == "env":
            for l in lines:
                l = l.strip()
                if l and not l.startswith("#"):
                    k, _, v = l.partition("=")
                    case.env[k] = v
        elif name == "setup":
            case.setup = text
        elif name == "hook":
            case.hook = text
        elif name == "requires":
            case.requires = [l.strip() for l in lines if l.strip() and not l.startswith("#")]
        elif name == "reply":
            case.replies.append(_reply(_attrs(attrs), text, path))
        elif name == "verify":
            case.verify = [l.rstrip("\n") for l in lines if l.strip() and not l.lstrip().startswith("#")]
        else:
            raise ValueError(f"{path}: unknown section '{name}'")
    return case
