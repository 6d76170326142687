#!/usr/bin/env python3
"""Load test of the OpenAI-compatible API: chat completions (whole and streamed) through
herald's agent, against a bare pass-through server, side by side.

Starts the instant fake provider (crates/herald-test-support/examples/fake_upstreams.rs,
real SSE), measures it alone, then a release herald serving only the API (no cap on
concurrent runs) and the bare pass-through (crates/herald-api/examples/bare_passthrough.rs:
parse, forward over one pooled client, stream the answer back), and drives each with wrk
(127.0.0.1 only) at 1, 8 and 32 connections.

Prints per server, mode and connection count: requests/s, p50/p99 latency and the
server's CPU per request; herald's peak RSS; and the first-delta latency of streamed
answers (median of sequential requests) for both.

With --hermes PATH (the `hermes` script of a venv with `hermes-agent==0.19.0` and
`aiohttp`), Hermes's own API server is measured in the same run against the same fake
provider (1 and 8 connections, whole and streamed): requests/s, p50/p99, its CPU per
request and its first delta.

With --baseline-bin PATH a second herald (another build, e.g. the one before a change,
on its own home and port) is measured in the same run, round by round interleaved with
this build (whole and streamed, 1 and 8 connections, --rounds rounds): the CPU per
request of each and the per-round ratio, so a shared, noisy machine affects both alike.

Usage: python3 bench/api_load.py [--duration 8] [--no-build] [--herald-bin PATH]
                                 [--hermes PATH] [--baseline-bin PATH] [--rounds 3]
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load import (ROOT, WRK_DONE, cpu_seconds, free_port, lua_string, rss_kb, start_listening,  # noqa: E402
                  start_provider, wait_http, wrk_result)

KEY = "bench-api-key-0123456789abcdef"

LUA = r"""
function init(args)
  wrk.method = "POST"
  wrk.body = BODY
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. KEY
end
""" + WRK_DONE


def body(stream):
    return json.dumps({"model": "hermes-agent", "stream": stream,
                       "messages": [{"role": "user", "content": "say something short"}]})


def wrk(port, stream, connections, duration):
    script = f"BODY = {lua_string(body(stream))}\nKEY = {lua_string(KEY)}\n" + LUA
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
        lua = f.name
    try:
        out = subprocess.run(
            ["wrk", "-t", str(min(connections, 2)), "-c", str(connections), "-d", f"{duration}s",
             "--timeout", "10s", "-s", lua, f"http://127.0.0.1:{port}/v1/chat/completions"],
            capture_output=True, text=True, check=True)
    finally:
        os.unlink(lua)
    return wrk_result(out)


def measure(pid, port, stream, connections, duration):
    c0 = cpu_seconds(pid)
    r = wrk(port, stream, connections, duration)
    r["cpu_us"] = (cpu_seconds(pid) - c0) * 1e6 / max(r["requests"], 1)
    return r


def first_delta_ms(port, n=40):
    """Median time from sending a streamed request to its first content delta."""
    times = []
    for _ in range(n):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        start = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body(True),
                     {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
        resp = conn.getresponse()
        while True:
            line = resp.fp.readline()
            if not line:
                break
            if b'"content"' in line:
                times.append((time.perf_counter() - start) * 1000)
                break
        conn.close()
    return statistics.median(times) if times else float("nan")


def start_hermes(hermes, base, port):
    """Hermes 0.19.0's gateway with only its API server, on the fake provider."""
    home = tempfile.mkdtemp(prefix="hermes-api-bench-")
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write(f"model:\n  default: fake\n  provider: custom\n  base_url: {base}\n")
    env = dict(os.environ, HERMES_HOME=home, API_SERVER_ENABLED="true", API_SERVER_KEY=KEY,
               API_SERVER_PORT=str(port), OPENAI_API_KEY="unused",
               HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="127.0.0.1,localhost")
    p = subprocess.Popen([hermes, "gateway", "run"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env)
    wait_http(port, timeout=60.0)
    return p


def compare_hermes(hermes, base, herald_pid, herald_port, duration):
    port = free_port()
    p = start_hermes(hermes, base, port)
    try:
        print(f"{'mode':<7} {'conns':>5} {'Hermes req/s':>12} {'p50 ms':>7} {'p99 ms':>7} {'CPU us':>8}"
              f" {'herald req/s':>12} {'p50 ms':>7} {'CPU us':>7} {'errors H/h':>10}")
        for stream in (False, True):
            for conns in (1, 8):
                x = measure(p.pid, port, stream, conns, duration)
                h = measure(herald_pid, herald_port, stream, conns, duration)
                print(f"{'stream' if stream else 'whole':<7} {conns:>5} {x['rps']:>12.1f} {x['p50_us']/1000:>7.1f}"
                      f" {x['p99_us']/1000:>7.1f} {x['cpu_us']:>8.0f} {h['rps']:>12.0f} {h['p50_us']/1000:>7.2f}"
                      f" {h['cpu_us']:>7.0f} {x['errors'] + x['non2xx']:>5}/{h['errors'] + h['non2xx']}")
        print(f"first stream delta: Hermes {first_delta_ms(port, 10):.1f} ms, "
              f"herald {first_delta_ms(herald_port, 10):.2f} ms (median of 10)")
    finally:
        p.terminate()
        p.wait(timeout=30)


def api_home(base, port):
    """A herald home serving only the API on `port`, on the fake provider at `base`."""
    home = tempfile.mkdtemp(prefix="herald-api-bench-")
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write(f"model:\n  default: fake\n  base_url: {base}\nplatforms:\n  api_server:\n    enabled: true\n"
                f"    extra:\n      port: {port}\n      key: {KEY}\ngateway:\n  api_server:\n    max_concurrent_runs: 0\n")
    return home


def start_api_herald(binary, home):
    env = dict(os.environ, HERALD_HOME=home, RUST_LOG="warn")
    p, _ = start_listening([binary, "gateway", "run"], "herald: OpenAI-compatible API listening on ", env)
    return p


def compare_baseline(baseline_bin, base, herald_pid, herald_port, bare_pid, bare_port, args):
    """This build against another, interleaved round by round: CPU us per request."""
    port = free_port()
    p = start_api_herald(baseline_bin, api_home(base, port))
    wait_http(port)
    try:
        print(f"{'mode':<7} {'conns':>5} {'herald CPU us':>13} {'baseline CPU us':>15} {'ratio':>6}"
              f" {'bare CPU us':>11} {'herald/bare':>11} {'baseline/bare':>13} {'req/s h/b':>13}")
        for stream in (False, True):
            for conns in (1, 8):
                rounds = []
                for _ in range(args.rounds):
                    h = measure(herald_pid, herald_port, stream, conns, args.duration)
                    b = measure(p.pid, port, stream, conns, args.duration)
                    x = measure(bare_pid, bare_port, stream, conns, args.duration)
                    rounds.append((h, b, x))
                med = lambda f: statistics.median(f(r) for r in rounds)  # noqa: E731
                hc, bc, xc = med(lambda r: r[0]["cpu_us"]), med(lambda r: r[1]["cpu_us"]), med(lambda r: r[2]["cpu_us"])
                ratio = med(lambda r: r[0]["cpu_us"] / max(r[1]["cpu_us"], 1))
                print(f"{'stream' if stream else 'whole':<7} {conns:>5} {hc:>13.0f} {bc:>15.0f} {ratio:>6.2f}"
                      f" {xc:>11.0f} {hc / max(xc, 1):>11.1f} {bc / max(xc, 1):>13.1f}"
                      f" {med(lambda r: r[0]['rps']):>6.0f}/{med(lambda r: r[1]['rps']):<6.0f}")
        print(f"idle RSS now: herald {rss_kb(herald_pid, 'VmRSS') / 1024:.1f} MB, baseline {rss_kb(p.pid, 'VmRSS') / 1024:.1f} MB")
    finally:
        p.terminate()
        p.wait(timeout=20)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=8)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--herald-bin", default=os.path.join(ROOT, "target/release/herald"))
    ap.add_argument("--hermes", help="the hermes script of a venv with hermes-agent 0.19.0")
    ap.add_argument("--baseline-bin", help="also measure this herald build, round by round (e.g. the build before a change)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per mode against --baseline-bin")
    ap.add_argument("--only-baseline", action="store_true", help="with --baseline-bin: skip the table against the bare server alone")
    args = ap.parse_args()
    if not args.no_build:
        for pkg, example in [("herald-cli", None), ("herald-test-support", "fake_upstreams"), ("herald-api", "bare_passthrough")]:
            cmd = ["cargo", "build", "--release", "-p", pkg] + (["--example", example] if example else [])
            subprocess.run(cmd, cwd=ROOT, check=True)
    examples = os.path.join(ROOT, "target/release/examples")
    provider, base = start_provider()
    pport = int(base.removesuffix("/v1").rsplit(":", 1)[1])
    api_port, bare_port = free_port(), free_port()
    herald = start_api_herald(args.herald_bin, api_home(base, api_port))
    bare, _ = start_listening([os.path.join(examples, "bare_passthrough"), f"127.0.0.1:{bare_port}", base], "bare passthrough listening on ")
    wait_http(api_port)
    peak = [0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_kb(herald.pid, "VmRSS"))
            time.sleep(0.05)
    threading.Thread(target=sample, daemon=True).start()
    try:
        if args.baseline_bin and args.only_baseline:
            compare_baseline(args.baseline_bin, base, herald.pid, api_port, bare.pid, bare_port, args)
            return
        alone = measure(provider.pid, pport, False, 32, args.duration)
        print(f"fake provider alone, 32 connections: {alone['rps']:.0f} req/s, "
              f"CPU {alone['cpu_us']:.0f} us/req")
        print(f"herald idle RSS: {rss_kb(herald.pid, 'VmRSS') / 1024:.1f} MB")
        print(f"{'mode':<7} {'conns':>5} {'herald req/s':>12} {'p50 ms':>7} {'p99 ms':>7} {'CPU us':>7}"
              f" {'bare req/s':>10} {'p50 ms':>7} {'p99 ms':>7} {'CPU us':>7} {'CPU x':>6} {'errors h/b':>10}")
        for stream in (False, True):
            for conns in (1, 8, 32):
                h = measure(herald.pid, api_port, stream, conns, args.duration)
                b = measure(bare.pid, bare_port, stream, conns, args.duration)
                print(f"{'stream' if stream else 'whole':<7} {conns:>5} {h['rps']:>12.0f} {h['p50_us']/1000:>7.2f}"
                      f" {h['p99_us']/1000:>7.2f} {h['cpu_us']:>7.0f} {b['rps']:>10.0f} {b['p50_us']/1000:>7.2f}"
                      f" {b['p99_us']/1000:>7.2f} {b['cpu_us']:>7.0f} {h['cpu_us']/max(b['cpu_us'], 1):>6.1f}"
                      f" {h['errors'] + h['non2xx']:>5}/{b['errors'] + b['non2xx']}")
        print(f"first stream delta: herald {first_delta_ms(api_port):.2f} ms, bare {first_delta_ms(bare_port):.2f} ms (median of 40)")
        print(f"herald peak RSS under load: {peak[0] / 1024:.1f} MB")
        if args.hermes:
            compare_hermes(args.hermes, base, herald.pid, api_port, args.duration)
        if args.baseline_bin:
            compare_baseline(args.baseline_bin, base, herald.pid, api_port, bare.pid, bare_port, args)
    finally:
        stop.set()
        for p in (herald, bare, provider):
            p.terminate()
        for p in (herald, bare, provider):
            p.wait(timeout=20)


if __name__ == "__main__":
    main()
