#!/usr/bin/env python3
"""Load test of the whole agent path: request -> durable inbox -> agent run -> delivery.

Starts instant fake upstreams (an OpenAI-compatible provider streaming
`done: <prompt>` and a Telegram Bot API counting the texts it got;
crates/herald-test-support/examples/fake_upstreams.rs) and a release herald on a fresh
home, then sends N signed GitHub events with unique delivery ids and unique payloads
(127.0.0.1 only), and waits until every one is delivered.

Prints: the ingress rate (202s per second), events/s from the first request to the last
delivery, the inbox's peak depth (queued + running + delivering, sampled from
/health/detailed), herald's peak RSS, and whether every event was delivered exactly once
(each answer text seen once by the fake Telegram, every inbox entry `delivered`).

Usage: python3 bench/inbox_load.py [--events 10000] [--senders 32] [--runs 16]
"""

import argparse
import hashlib
import hmac
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load import ROOT, cpu_seconds, free_port, rss_kb, wait_http  # noqa: E402

SECRET = "inbox-load-secret"


def get_json(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def sender(port, ids, results, lock):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    accepted = other = 0
    for n in ids:
        body = json.dumps({"number": n, "pull_request": {"title": f"change {n}"}}).encode()
        sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": f"load-{n}",
            "X-Hub-Signature-256": sig,
        }
        conn.request("POST", "/webhooks/agent", body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        if resp.status == 202:
            accepted += 1
        else:
            other += 1
    conn.close()
    with lock:
        results["accepted"] += accepted
        results["other"] += other


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=10000)
    ap.add_argument("--senders", type=int, default=32)
    ap.add_argument("--runs", type=int, default=16, help="max_concurrent_runs (and per route)")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--herald-bin", help="measure this herald binary instead of target/release/herald")
    args = ap.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "herald-cli"], cwd=ROOT, check=True)
        subprocess.run(["cargo", "build", "--release", "-p", "herald-test-support", "--example", "fake_upstreams"], cwd=ROOT, check=True)
    herald_bin = args.herald_bin or os.path.join(ROOT, "target/release/herald")
    fake_bin = os.path.join(ROOT, "target/release/examples/fake_upstreams")

    fake_port = free_port()
    fake = subprocess.Popen([fake_bin, f"127.0.0.1:{fake_port}"], stdout=subprocess.DEVNULL)
    home = tempfile.mkdtemp(prefix="herald-inbox-load-")
    port = free_port()
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write(f"""model:
  default: fake-model
  base_url: http://127.0.0.1:{fake_port}/v1
platforms:
  webhook:
    enabled: true
    extra:
      host: 127.0.0.1
      port: {port}
      secret: {SECRET}
      rate_limit: 1000000000
      max_concurrent_runs: {args.runs}
      max_concurrent_runs_per_route: {args.runs}
      routes:
        agent:
          prompt: "Review PR #{{number}}: {{pull_request.title}}"
          deliver: telegram
          deliver_extra: {{chat_id: "42"}}
""")
    env = dict(os.environ, HERALD_HOME=home, TELEGRAM_BOT_TOKEN="1:bench",
               TELEGRAM_BASE_URL=f"http://127.0.0.1:{fake_port}/bot",
               RUST_LOG=os.environ.get("HERALD_LOG", "warn"))
    herald = subprocess.Popen([herald_bin, "gateway", "run"], env=env,
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(home, "herald.log"), "w"))
    try:
        wait_http(fake_port, "/stats")
        wait_http(port)
        idle_rss = rss_kb(herald.pid, "VmRSS")
        peak_depth = 0
        stop = threading.Event()

        def sample():
            nonlocal peak_depth
            while not stop.is_set():
                try:
                    inbox = get_json(port, "/health/detailed")["inbox"]
                    depth = inbox["queued"] + inbox["running"] + inbox["delivering"]
                    peak_depth = max(peak_depth, depth)
                except (OSError, ValueError, KeyError):
                    pass
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        results = {"accepted": 0, "other": 0}
        lock = threading.Lock()
        ids = list(range(args.events))
        chunks = [ids[i::args.senders] for i in range(args.senders)]
        cpu_before = cpu_seconds(herald.pid)
        fake_cpu_before = cpu_seconds(fake.pid)
        start = time.perf_counter()
        threads = [threading.Thread(target=sender, args=(port, c, results, lock)) for c in chunks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sent_s = time.perf_counter() - start
        deadline = start + args.timeout
        stats = {}
        while time.perf_counter() < deadline:
            stats = get_json(fake_port, "/stats")
            if stats["messages"] >= results["accepted"]:
                break
            time.sleep(0.02)
        total_s = time.perf_counter() - start
        herald_cpu = cpu_seconds(herald.pid) - cpu_before
        fake_cpu = cpu_seconds(fake.pid) - fake_cpu_before
        # A moment more: nothing must arrive twice.
        time.sleep(1.0)
        stats = get_json(fake_port, "/stats")
        stop.set()
        sampler.join()
        inbox = get_json(port, "/health/detailed")["inbox"]
        peak_rss = rss_kb(herald.pid, "VmHWM")
    finally:
        herald.terminate()
        herald.wait(timeout=60)
        fake.terminate()
        fake.wait()

    exactly_once = (stats.get("messages") == args.events and stats.get("unique") == args.events
                    and stats.get("duplicated_texts") == 0 and inbox.get("delivered") == args.events)
    print(f"events sent:            {args.events} ({results['accepted']} answered 202, {results['other']} other)")
    print(f"ingress:                {results['accepted'] / sent_s:,.0f} accepted/s ({sent_s:.2f} s, {args.senders} senders)")
    print(f"request to delivery:    {stats.get('messages', 0) / total_s:,.0f} events/s "
          f"({total_s:.2f} s for all, max_concurrent_runs {args.runs})")
    print(f"CPU per event:          herald {herald_cpu / args.events * 1e6:.0f} us, "
          f"fake upstreams {fake_cpu / args.events * 1e6:.0f} us")
    print(f"peak queue depth:       {peak_depth}")
    print(f"herald RSS:             idle {idle_rss / 1024:.1f} MB, peak {peak_rss / 1024:.1f} MB")
    print(f"provider calls:         {stats.get('provider_calls')}")
    print(f"delivered exactly once: {'yes' if exactly_once else 'NO'} "
          f"(fake Telegram: {stats.get('messages')} messages, {stats.get('unique')} distinct, "
          f"{stats.get('duplicated_texts')} duplicated; inbox: {json.dumps(inbox)})")
    if not exactly_once:
        sys.exit(1)


if __name__ == "__main__":
    main()
