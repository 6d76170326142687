#!/usr/bin/env python3
"""The Hermes plugins published on PyPI, run under Hermes 0.19.0 and under herald side by
side (issue 43): the same scripted model, the same plugins, the same turn.

Needs what scripts/test sets up: target/hermes-venv (Hermes 0.19.0) and the PyPI plugins
in target/test-cache/pypi-plugins; and a herald binary (target/debug/herald unless
--herald-bin). For each of Hermes and herald, on a fresh home with every plugin enabled
and a capture plugin that records each hook and the names of its arguments:

  - a stand-in model asks for three terminal calls (`touch acp-ask`, `touch acp-deny`,
    `touch plain`), then answers;
  - a stand-in for ACP's governance API answers acp-hermes: ask, deny, allow;
  - the turn runs with `chat -Q -q` (nobody can answer an approval).

Prints, per hook, how often it fired under each and the argument names one has and the
other lacks; and which files the calls made.

Usage: python3 scripts/plugins_side_by_side.py [--herald-bin PATH]
"""

import argparse
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SITE = os.path.join(ROOT, "target/test-cache/pypi-plugins")
HERMES = os.path.join(ROOT, "target/hermes-venv/bin/hermes")
PLUGINS = ["acp", "agentguard", "agentguard-spend", "agento11y", "agentmetrics",
           "atbash-hermes-plugin", "aarvion-guard", "capture"]

CAPTURE = '''
import json, os
HOOKS = ["pre_tool_call", "post_tool_call", "transform_tool_result", "transform_llm_output",
         "pre_llm_call", "post_llm_call", "pre_api_request", "post_api_request",
         "api_request_error", "on_session_start", "on_session_end", "on_session_finalize",
         "on_session_reset"]
def recorder(hook):
    def record(**kwargs):
        with open(os.environ["CAPTURE_FILE"], "a") as f:
            f.write(json.dumps({"hook": hook, "args": sorted(kwargs)}) + "\\n")
    return record
def register(ctx):
    for hook in HOOKS:
        ctx.register_hook(hook, recorder(hook))
'''


def serve(handler_fn):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)) or 0)
            request = json.loads(body or b"{}")
            status, answer = handler_fn(self.path, request)
            if request.get("stream") and "choices" in answer:
                self.send_response(status)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in as_chunks(answer):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                return
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


# The tool results the model was last sent.
TOOL_RESULTS = []


def as_chunks(completion):
    """A chat completion as the chunks of a stream."""
    choice = completion["choices"][0]
    message = choice["message"]
    delta = {"role": "assistant"}
    if message.get("content"):
        delta["content"] = message["content"]
    if message.get("tool_calls"):
        delta["tool_calls"] = [dict(call, index=i) for i, call in enumerate(message["tool_calls"])]
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": 0,
            "model": completion["model"]}
    yield dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}])
    yield dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}])
    yield dict(base, choices=[], usage=completion["usage"])


def model(path, body):
    """Three terminal calls, then an answer (each conversation: keyed by its tool results)."""
    results = [m for m in body.get("messages", []) if m.get("role") == "tool"]
    answered = bool(results)
    if answered:
        TOOL_RESULTS[:] = [str(m.get("content"))[:160] for m in results]
        message = {"role": "assistant", "content": "Done."}
        finish = "stop"
    else:
        calls = [{"id": f"call_{i}", "type": "function",
                  "function": {"name": "terminal", "arguments": json.dumps({"command": f"touch {name}"})}}
                 for i, name in enumerate(["acp-ask", "acp-deny", "plain"])]
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        finish = "tool_calls"
    return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": "fake-model",
                 "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def governance(path, body):
    command = (body.get("tool_input") or {}).get("command", "")
    if "acp-ask" in command:
        return 200, {"decision": "ask", "reason": "a human decides"}
    if "acp-deny" in command:
        return 200, {"decision": "deny", "reason": "not here"}
    return 200, {"decision": "allow"}


def home_for(kind, base, work):
    home = tempfile.mkdtemp(prefix=f"side-{kind}-")
    capture = os.path.join(home, "plugins", "capture")
    os.makedirs(capture)
    with open(os.path.join(capture, "__init__.py"), "w") as f:
        f.write(CAPTURE)
    with open(os.path.join(capture, "plugin.yaml"), "w") as f:
        f.write("name: capture\nversion: 0.1.0\n")
    # Folder plugins of the PyPI packages that ship as folders.
    for pkg, name in [("agentguard_hermes", "agentguard"), ("aarvion_guard_hermes", "aarvion-guard")]:
        src = os.path.join(SITE, pkg)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(home, "plugins", name))
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write(f"""model:
  default: fake-model
  provider: custom
  base_url: {base}/v1
  api_key: sk-fake
terminal:
  cwd: {work}
plugins:
  enabled: [{", ".join(PLUGINS)}]
""")
    return home


def run(kind, binary, base, acp_base):
    work = tempfile.mkdtemp(prefix=f"side-{kind}-work-")
    home = home_for(kind, base, work)
    user = tempfile.mkdtemp(prefix=f"side-{kind}-user-")
    env = dict(os.environ, HOME=user, PYTHONPATH=SITE, CAPTURE_FILE=os.path.join(home, "capture.jsonl"),
               ACP_BEARER_TOKEN="gsk_test", ACP_API_BASE=acp_base, NO_PROXY="127.0.0.1",
               AGENTGUARD_DISABLE="1",
               HTTPS_PROXY="http://127.0.0.1:9", OPENAI_API_KEY="sk-fake")
    if kind == "hermes":
        env["HERMES_HOME"] = home
        cmd = [binary, "chat", "-Q", "-q", "make three files", "--accept-hooks"]
    else:
        env["HERALD_HOME"] = home
        cmd = [binary, "chat", "-Q", "-q", "make three files"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    seen = []
    try:
        with open(env["CAPTURE_FILE"]) as f:
            seen = [json.loads(line) for line in f]
    except OSError:
        pass
    made = sorted(os.listdir(work))
    results = list(TOOL_RESULTS)
    TOOL_RESULTS.clear()
    return {"code": out.returncode, "seen": seen, "made": made, "stderr": out.stderr[-2000:],
            "results": results}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--herald-bin", default=os.path.join(ROOT, "target/debug/herald"))
    args = ap.parse_args()
    for path in [SITE, HERMES, args.herald_bin]:
        if not os.path.exists(path):
            raise SystemExit(f"{path} is missing: run scripts/test (and build herald) first")
    _, base = serve(model)
    _, acp_base = serve(governance)
    results = {kind: run(kind, binary, base, acp_base)
               for kind, binary in [("hermes", HERMES), ("herald", args.herald_bin)]}
    for kind, r in results.items():
        print(f"{kind}: exit {r['code']}, files made: {r['made']}")
        for result in r["results"]:
            print(f"    tool result: {result}")
        if r["code"] != 0:
            print(r["stderr"])
    hooks = sorted({e["hook"] for r in results.values() for e in r["seen"]})
    print(f"\n{'hook':24} {'hermes':>7} {'herald':>7}  argument names only one passes")
    for hook in hooks:
        counts, names = {}, {}
        for kind, r in results.items():
            calls = [e for e in r["seen"] if e["hook"] == hook]
            counts[kind] = len(calls)
            names[kind] = set().union(*[set(e["args"]) for e in calls]) if calls else set()
        only = []
        if counts["hermes"] and counts["herald"]:
            only += [f"hermes: {n}" for n in sorted(names["hermes"] - names["herald"])]
            only += [f"herald: {n}" for n in sorted(names["herald"] - names["hermes"])]
        print(f"{hook:24} {counts['hermes']:>7} {counts['herald']:>7}  {', '.join(only)}")


if __name__ == "__main__":
    sys.exit(main())
