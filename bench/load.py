#!/usr/bin/env python3
"""Load test: herald's webhook ingress against a bare axum server, side by side.

Starts a release herald on a fresh home and the bare server (reads the body, answers
200), then drives both with wrk (127.0.0.1 only, bounded duration) for four mixes of a
~2 KB GitHub pull_request payload with unique delivery ids:

  filtered       valid signature, event not in the route's `events`   (200 ignored)
  accepted       valid signature, durable enqueue                      (202)
  bad_signature  wrong signature                                       (401)
  duplicate      valid signature, one delivery id repeated             (200 duplicate)

Prints requests/s, p50/p99 latency and herald's peak RSS per mix, the herald/bare ratio,
herald's idle RSS and its start-to-/health time.

The machine is shared and noisy (the bare server alone varies by a third between runs), so
each mix is run in several rounds, herald and bare back to back with their order swapped
every round, and the table shows the round with the median ratio; every round's ratio is
printed under it.

With --bare-verifies the bare server also verifies every signature with herald's verifier
(a bare verifying server: the baseline for the bad-signature mix's CPU per request).

With --baseline-bin PATH a second herald (another build, on its own home and port) is
measured in the same rounds, in the rotating order, and each mix also shows this
build's CPU per request against it: "no worse than the previous build", side by side.
With --metrics both run with `metrics.enabled` (the cost of recording every request).

Usage: python3 bench/load.py [--duration 10] [--rounds 3] [--connections 32] [--threads 2]
       [--bare-verifies] [--baseline-bin PATH] [--metrics]
"""

import argparse
import contextlib
import hashlib
import hmac
import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "crates/herald-webhook/tests/fixtures/github_pull_request_opened.json")
SECRET = "load-test-secret"

# wrk's summary as one JSON line on stderr (`WRK_RESULT {...}`), for every load script.
WRK_DONE = r"""
function done(summary, latency, requests)
  local out = string.format('{"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, "errors": %d, "non2xx": %d}',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status)
  io.stderr:write("WRK_RESULT " .. out .. "\n")
end
"""

LUA = r"""
local counter = 0
thread_id = 0  -- a global: setup() sets it per thread with thread:set
local threads = {}
function setup(thread)
  thread:set("thread_id", #threads)
  table.insert(threads, thread)
end
function init(args)
  wrk.method = "POST"
  wrk.body = BODY
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["X-GitHub-Event"] = EVENT
  wrk.headers["X-Hub-Signature-256"] = SIGNATURE
end
function request()
  counter = counter + 1
  local id
  if UNIQUE then id = RUN .. "-" .. thread_id .. "-" .. counter else id = RUN .. "-same" end
  wrk.headers["X-GitHub-Delivery"] = id
  return wrk.format(nil, PATH)
end
local statuses = {}
function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end
""" + WRK_DONE


def lua_string(s):
    return "[==[" + s + "]==]"


def start_listening(cmd, prefix, env=None):
    """Starts `cmd` and waits for its line starting with `prefix`: the process and the
    rest of that line (its address). Later output is drained."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    while True:
        line = p.stdout.readline()
        if not line:
            raise SystemExit(f"{cmd[0]} exited before listening")
        if line.startswith(prefix):
            threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()
            return p, line[len(prefix):].strip()


def start_provider():
    """The release fake provider on a free port: the process and its /v1 base URL."""
    exe = os.path.join(ROOT, "target/release/examples/fake_upstreams")
    p, addr = start_listening([exe, "127.0.0.1:0"], "listening on ")
    return p, f"http://{addr}/v1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kb(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def wait_http(port, path="/health", timeout=10.0):
    start = time.perf_counter()
    req = f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
    while time.perf_counter() - start < timeout:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(req)
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return time.perf_counter() - start
        except OSError:
            time.sleep(0.001)
    raise SystemExit(f"server on port {port} did not answer {path}")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def wait_port(port, timeout=10.0):
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.01)
    raise SystemExit(f"nothing listens on port {port}")


def run_wrk(port, mix, body, args, run_id):
    sig = "sha256=" + hmac.new(SECRET.encode(), body.encode(), hashlib.sha256).hexdigest()
    path, event, unique = {
        "filtered": ("/webhooks/filtered", "pull_request", True),
        "accepted": ("/webhooks/accepted", "pull_request", True),
        "bad_signature": ("/webhooks/accepted", "pull_request", True),
        "duplicate": ("/webhooks/accepted", "pull_request", False),
        "direct": ("/webhooks/direct", "pull_request", True),
    }[mix]
    if mix == "bad_signature":
        sig = "sha256=" + "0" * 64
    script = (
        f"BODY = {lua_string(body)}\nEVENT = {lua_string(event)}\nSIGNATURE = {lua_string(sig)}\n"
        f"PATH = {lua_string(path)}\nUNIQUE = {'true' if unique else 'false'}\nRUN = {lua_string(run_id)}\n" + LUA
    )
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
        lua = f.name
    try:
        out = subprocess.run(
            ["wrk", "-t", str(args.threads), "-c", str(args.connections), "-d", f"{args.duration}s",
             "--timeout", "5s", "-s", lua, f"http://127.0.0.1:{port}{path}"],
            capture_output=True, text=True, check=True,
        )
    finally:
        os.unlink(lua)
    return wrk_result(out)


def wrk_result(out):
    """The summary WRK_DONE printed, with requests/s."""
    for line in out.stderr.splitlines():
        if line.startswith("WRK_RESULT "):
            r = json.loads(line[len("WRK_RESULT "):])
            r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
            return r
    raise SystemExit("wrk printed no result:\n" + out.stdout + out.stderr)


def measure(pid, port, mix, body, args, run_id):
    """One wrk run against a server, with the server's CPU time per request."""
    c0 = cpu_seconds(pid)
    r = run_wrk(port, mix, body, args, run_id)
    r["cpu_us"] = (cpu_seconds(pid) - c0) * 1e6 / max(r["requests"], 1)
    return r


def herald_env(home, port, bare_port, metrics=False):
    """A fresh home with the load routes; the environment to run herald on it."""
    with open(os.path.join(home, "config.yaml"), "w") as f:
        if metrics:
            # Every request recorded, as a scraped herald records them.
            f.write("metrics:\n  enabled: true\n")
        f.write(f"""platforms:
  webhook:
    enabled: true
    extra:
      host: 127.0.0.1
      port: {port}
      secret: {SECRET}
      rate_limit: 1000000000
      routes:
        filtered:
          events: [push]
        accepted:
          prompt: "Review PR #{{number}}: {{pull_request.title}}"
        direct:
          deliver_only: true
          deliver: telegram
          prompt: "PR #{{number}}: {{pull_request.title}}"
          deliver_extra: {{chat_id: "42"}}
""")
    env = dict(os.environ, HERALD_HOME=home, TELEGRAM_BOT_TOKEN="1:bench", TELEGRAM_BASE_URL=f"http://127.0.0.1:{bare_port}/bot", RUST_LOG=os.environ.get("HERALD_LOG", "warn"))
    if os.environ.get("HERALD_WORKERS"):
        env["TOKIO_WORKER_THREADS"] = os.environ["HERALD_WORKERS"]
    return env


def start_herald(binary, env):
    return subprocess.Popen([binary, "gateway", "run"], env=env, stdout=subprocess.DEVNULL, stderr=open(os.environ.get("HERALD_STDERR", os.devnull), "w"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3, help="runs per mix; the median ratio is shown")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mixes", default="filtered,accepted,bad_signature,duplicate")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--bare-verifies", action="store_true",
                    help="the bare server verifies each signature (answers 401 on a bad one)")
    ap.add_argument("--herald-bin", help="measure this herald binary instead of target/release/herald")
    ap.add_argument("--baseline-bin", help="also measure this herald build, side by side (e.g. the previous release)")
    ap.add_argument("--metrics", action="store_true",
                    help="both heralds run with metrics.enabled (a build without metrics ignores it)")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "herald-gateway", "--example", "bare_server"], cwd=ROOT, check=True)
        subprocess.run(["cargo", "build", "--release", "-p", "herald-cli"], cwd=ROOT, check=True)
    herald_bin = args.herald_bin or os.path.join(ROOT, "target/release/herald")
    bare_bin = os.path.join(ROOT, "target/release/examples/bare_server")
    with open(FIXTURE) as f:
        body = f.read()

    home = tempfile.mkdtemp(prefix="herald-load-")
    herald_port, bare_port = free_port(), free_port()
    env = herald_env(home, herald_port, bare_port, args.metrics)
    herald = start_herald(herald_bin, env)
    start_s = wait_http(herald_port)
    bare_env = dict(os.environ, BARE_SERVER_SECRET=SECRET) if args.bare_verifies else None
    bare = subprocess.Popen([bare_bin, f"127.0.0.1:{bare_port}"], stdout=subprocess.DEVNULL, env=bare_env)
    baseline = None
    if args.baseline_bin:
        base_home = tempfile.mkdtemp(prefix="herald-load-baseline-")
        base_port = free_port()
        baseline = start_herald(args.baseline_bin, herald_env(base_home, base_port, bare_port, args.metrics))
        wait_http(base_port)
    try:
        time.sleep(0.5)
        idle_kb = rss_kb(herald.pid, "VmRSS")
        wait_port(bare_port)
        rows = []
        # Requests herald answered per mix, over all rounds.
        answered = {}
        # Per mix and round: this build's and the baseline build's CPU µs per request.
        baseline_rounds = {}
        # Per mix: herald's CPU per request over the bare server's, each round.
        cpu_rounds = {}
        servers = {"herald": (herald.pid, herald_port), "bare": (bare.pid, bare_port)}
        if baseline:
            servers["baseline"] = (baseline.pid, base_port)
        for i, mix in enumerate(args.mixes.split(",")):
            rounds = []
            for r in range(max(args.rounds, 1)):
                run_id = f"{int(time.time())}-{i}-{r}"
                # Swap the order every round so that a drift of the machine's speed
                # does not always favour the same server.
                order = list(servers)[r % len(servers):] + list(servers)[:r % len(servers)]
                got = {who: measure(*servers[who], mix, body, args, run_id) for who in order}
                h, b = got["herald"], got["bare"]
                rounds.append((h["rps"] / b["rps"], h, b))
                cpu_rounds.setdefault(mix, []).append(h["cpu_us"] / b["cpu_us"])
                if baseline:
                    baseline_rounds.setdefault(mix, []).append((h["cpu_us"], got["baseline"]["cpu_us"]))
                answered[mix] = answered.get(mix, 0) + h["requests"]
            peak = rss_kb(herald.pid, "VmHWM")
            rounds_by_ratio = sorted(rounds, key=lambda x: x[0])
            _, h, b = rounds_by_ratio[len(rounds_by_ratio) // 2]
            rows.append((mix, h, b, peak, [x[0] for x in rounds]))
        print()
        print(f"wrk -t{args.threads} -c{args.connections} -d{args.duration}s, body {len(body)} bytes, 127.0.0.1, "
              f"{max(args.rounds, 1)} rounds per mix (the round with the median ratio is shown)")
        print(f"{'mix':<14} {'herald req/s':>12} {'p50 ms':>7} {'p99 ms':>7} {'bare req/s':>11} {'p50 ms':>7} {'p99 ms':>7} {'ratio':>6} {'peak RSS MB':>11} {'non-2xx':>8} {'CPU us/req h/b':>15}")
        for mix, h, b, peak, _ in rows:
            print(f"{mix:<14} {h['rps']:>12.0f} {h['p50_us']/1000:>7.2f} {h['p99_us']/1000:>7.2f} {b['rps']:>11.0f} "
                  f"{b['p50_us']/1000:>7.2f} {b['p99_us']/1000:>7.2f} {h['rps']/b['rps']:>6.2f} {peak/1024:>11.1f} {h['non2xx']:>8} {h['cpu_us']:>7.1f}/{b['cpu_us']:<7.1f}")
        print("ratio per round: " + "; ".join(f"{mix} " + " ".join(f"{x:.2f}" for x in ratios) for mix, _, _, _, ratios in rows))
        # The CPU bar (herald's CPU per request over the bare server's), per round.
        for mix, per_round in cpu_rounds.items():
            print(f"CPU us/req herald/bare, {mix}: per-round median {statistics.median(per_round):.2f} ("
                  + " ".join(f"{x:.2f}" for x in per_round) + ")")
        for mix, pairs in baseline_rounds.items():
            ratios = sorted(h / b for h, b in pairs)
            print(f"CPU us/req against the baseline build, {mix}: median herald {statistics.median(h for h, _ in pairs):.1f} "
                  f"vs baseline {statistics.median(b for _, b in pairs):.1f}, per-round ratio median {statistics.median(ratios):.2f} "
                  f"(" + " ".join(f"{h / b:.2f}" for h, b in pairs) + ")")
        # Direct delivery latency with one connection: herald (request in, send to the
        # instant fake target, answer) against the bare server's own round trip.
        lat = argparse.Namespace(**{**vars(args), "connections": 1, "threads": 1})
        hd = run_wrk(herald_port, "direct", body, lat, f"{int(time.time())}-direct")
        bd = run_wrk(bare_port, "filtered", body, lat, "bare-latency")
        print(f"direct delivery, 1 connection: herald p50 {hd['p50_us']/1000:.3f} ms p99 {hd['p99_us']/1000:.3f} ms "
              f"({hd['rps']:.0f} req/s, non-2xx {hd['non2xx']}); bare p50 {bd['p50_us']/1000:.3f} ms; "
              f"herald overhead p50 ~{(hd['p50_us'] - 2 * bd['p50_us'])/1000:.3f} ms")
        print(f"herald idle RSS: {idle_kb/1024:.1f} MB; start to /health answering: {start_s*1000:.0f} ms")
        db = os.path.join(home, "herald.db")
        if os.path.exists(db):
            if "accepted" in answered:
                # Every accepted request must have made its own inbox entry: the ids are
                # unique. A request wrk sent but stopped waiting for may be in it too.
                with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as c:
                    (stored,) = c.execute("SELECT count(*) FROM inbox WHERE route = 'accepted'").fetchone()
                sent = answered["accepted"]
                print(f"inbox: {stored} accepted events for {sent} accepted requests answered")
                if not sent <= stored <= sent + args.connections * max(args.rounds, 1):
                    raise SystemExit("the accepted mix did not store one inbox entry per request")
            out = subprocess.run([herald_bin, "inbox", "list", "--limit", "1"], env=env, capture_output=True, text=True)
            print("inbox newest entry:", (out.stdout.splitlines() or [""])[-1])
    finally:
        for p in (herald, bare, baseline):
            if p is None:
                continue
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(home, ignore_errors=True)
        if baseline:
            shutil.rmtree(base_home, ignore_errors=True)


if __name__ == "__main__":
    main()
