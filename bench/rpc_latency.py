#!/usr/bin/env python3
"""Latency per turn of the JSON-RPC gateway (`prompt.submit` in to `message.complete`
out) and of the ACP server (`session/prompt` in to its response out), against the
instant fake provider; medians over N turns.

Measures `herald rpc` on stdio and, when the `websockets` package is importable,
`herald rpc --ws` on WebSocket. With --hermes-python PATH (the python of a venv with
hermes-agent 0.19.0), Hermes's own gateway (`python -m tui_gateway.entry`, stdio) is
measured in the same run on the same fake provider.

Usage: python3 bench/rpc_latency.py [--turns 100] [--no-build] [--herald-bin PATH]
                                    [--hermes-python PATH]
"""

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load import ROOT, start_provider  # noqa: E402


class Lines:
    """A JSON-RPC client over a subprocess's stdin/stdout lines."""

    def __init__(self, cmd, env):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)
        self.next_id = 0

    def send(self, method, params):
        self.next_id += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}) + "\n")
        self.p.stdin.flush()
        return self.next_id

    def frames(self):
        for line in self.p.stdout:
            if line.strip():
                yield json.loads(line)

    def until(self, pred, timeout=120):
        start = time.time()
        for f in self.frames():
            if pred(f):
                return f
            if time.time() - start > timeout:
                break
        raise SystemExit("no matching frame (the gateway exited?)")

    def close(self):
        self.p.stdin.close()
        try:
            self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()


def is_event(kind):
    return lambda f: f.get("method") == "event" and f["params"].get("type") == kind


def answer_to(i):
    return lambda f: f.get("id") == i


def turns_on_lines(client, n):
    client.until(is_event("gateway.ready"), timeout=120)
    i = client.send("session.create", {})
    sid = client.until(answer_to(i))["result"]["session_id"]
    times = []
    for k in range(n + 3):
        start = time.perf_counter()
        client.send("prompt.submit", {"session_id": sid, "text": f"turn {k}"})
        client.until(is_event("message.complete"))
        if k >= 3:  # the first turns warm caches up
            times.append((time.perf_counter() - start) * 1000)
    client.close()
    return times


async def turns_on_ws(url, n):
    import websockets
    async with websockets.connect(url, max_size=None) as ws:
        async def until(pred):
            while True:
                f = json.loads(await ws.recv())
                if pred(f):
                    return f
        await until(is_event("gateway.ready"))
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session.create", "params": {}}))
        sid = (await until(answer_to(1)))["result"]["session_id"]
        times = []
        for k in range(n + 3):
            start = time.perf_counter()
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": k + 2, "method": "prompt.submit",
                                      "params": {"session_id": sid, "text": f"turn {k}"}}))
            await until(is_event("message.complete"))
            if k >= 3:
                times.append((time.perf_counter() - start) * 1000)
        return times


def turns_on_acp(client, n, cwd):
    """ACP: initialize, session/new, then session/prompt to its response, n times."""
    i = client.send("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    client.until(answer_to(i), timeout=120)
    i = client.send("session/new", {"cwd": cwd, "mcpServers": []})
    sid = client.until(answer_to(i))["result"]["sessionId"]
    times = []
    for k in range(n + 3):
        start = time.perf_counter()
        i = client.send("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": f"turn {k}"}]})
        client.until(answer_to(i))
        if k >= 3:
            times.append((time.perf_counter() - start) * 1000)
    client.close()
    return times


def report(name, times):
    times = sorted(times)
    p90 = times[int(len(times) * 0.9) - 1]
    print(f"{name:<28} median {statistics.median(times):8.2f} ms   p90 {p90:8.2f} ms   ({len(times)} turns)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--herald-bin", default=os.path.join(ROOT, "target/release/herald"))
    ap.add_argument("--hermes-python", help="python of a venv with hermes-agent 0.19.0")
    args = ap.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "herald-cli"], cwd=ROOT, check=True)
        subprocess.run(["cargo", "build", "--release", "-p", "herald-test-support", "--example", "fake_upstreams"],
                       cwd=ROOT, check=True)
    provider, base = start_provider()
    homes = []
    try:
        home = tempfile.mkdtemp(prefix="herald-rpc-bench-")
        homes.append(home)
        with open(os.path.join(home, "config.yaml"), "w") as f:
            f.write(f"model:\n  default: fake\n  base_url: {base}\n")
        env = dict(os.environ, HERALD_HOME=home, RUST_LOG="warn")
        report("herald rpc (stdio)", turns_on_lines(Lines([args.herald_bin, "rpc"], env), args.turns))
        try:
            import websockets  # noqa: F401
            ws = subprocess.Popen([args.herald_bin, "rpc", "--ws", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, text=True)
            ws.stdout.readline()  # "listening on ws://…/api/ws"
            # The token herald made for this run, in a ready URL.
            url = ws.stdout.readline().strip().removeprefix("herald: connect with ")
            report("herald rpc --ws", asyncio.run(turns_on_ws(url, args.turns)))
            ws.terminate()
            ws.wait(timeout=20)
        except ImportError:
            print("herald rpc --ws: skipped (pip install websockets)")
        report("herald acp session/prompt", turns_on_acp(Lines([args.herald_bin, "acp"], env), args.turns, home))
        if args.hermes_python:
            hhome = tempfile.mkdtemp(prefix="hermes-rpc-bench-")
            homes.append(hhome)
            with open(os.path.join(hhome, "config.yaml"), "w") as f:
                f.write(f"model:\n  default: fake\n  provider: custom\n  base_url: {base}\n")
            henv = dict(os.environ, HERMES_HOME=hhome, OPENAI_API_KEY="unused",
                        HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="127.0.0.1,localhost")
            n = max(10, args.turns // 5)
            report("Hermes tui_gateway (stdio)",
                   turns_on_lines(Lines([args.hermes_python, "-m", "tui_gateway.entry"], henv), n))
            hermes = os.path.join(os.path.dirname(args.hermes_python), "hermes")
            report("Hermes acp session/prompt", turns_on_acp(Lines([hermes, "acp"], henv), n, hhome))
    finally:
        provider.terminate()
        provider.wait(timeout=10)
        for h in homes:
            shutil.rmtree(h, ignore_errors=True)


if __name__ == "__main__":
    main()
