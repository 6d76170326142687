#!/usr/bin/env python3
"""Webhook accepts while the dashboard's search index is built (issue 42, finding 2).

For each herald build (--herald-bin, and --baseline-bin side by side when given), on a
fresh home with no model (accepted events wait in the inbox):

  1. fills the inbox with --events accepted GitHub pull_request events through wrk
     (prompts of about 500 characters: the PR's title and body);
  2. no login: accepts paced at --rate a second for --paced seconds, then wrk at full
     speed for --saturate seconds;
  3. logs in to the dashboard (which starts the index), then wrk at full speed for
     --saturate seconds, then accepts paced at --rate until the index has caught up;
  4. reports each phase's accept latency (p50, p99, worst; measured from when each
     request was due, so a stall counts for every request it held back), wrk's rate,
     how long the backfill took, the largest WAL seen, and the index's size against the
     text it indexes (SQLite's dbstat).

Usage: python3 bench/search_backfill.py [--events 100000] [--rate 200] [--no-build]
       [--herald-bin PATH] [--baseline-bin PATH]
"""

import argparse
import hashlib
import hmac
import http.client
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dashboard  # noqa: E402
import load  # noqa: E402

PROMPT = "Review PR #{number}: {pull_request.title}\n\n{pull_request.body}"
SENDERS = 16


def paced(port, body, rate, run_id, until):
    """Accepts sent at `rate` a second by SENDERS threads until `until()` is true; the
    latency of each, from when it was due, in ms."""
    sig = "sha256=" + hmac.new(load.SECRET.encode(), body.encode(), hashlib.sha256).hexdigest()
    latencies, failures = [], []
    lock = threading.Lock()
    start = time.perf_counter() + 0.05
    stop = threading.Event()

    def sender(i):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        k = 0
        while not stop.is_set():
            due = start + (k * SENDERS + i) / rate
            k += 1
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            headers = {"Content-Type": "application/json", "X-GitHub-Event": "pull_request",
                       "X-Hub-Signature-256": sig, "X-GitHub-Delivery": f"{run_id}-{i}-{k}"}
            try:
                conn.request("POST", "/webhooks/accepted", body=body, headers=headers)
                r = conn.getresponse()
                r.read()
                ok = r.status == 202
            except OSError:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                ok = False
            with lock:
                (latencies if ok else failures).append((time.perf_counter() - due) * 1000)

    threads = [threading.Thread(target=sender, args=(i,), daemon=True) for i in range(SENDERS)]
    for t in threads:
        t.start()
    while not until():
        time.sleep(0.1)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    return latencies, len(failures)


def summary(latencies):
    if not latencies:
        return "no accepts"
    s = sorted(latencies)
    p99 = s[min(len(s) - 1, int(len(s) * 0.99))]
    return f"{len(s)} accepts: p50 {statistics.median(s):.1f} ms, p99 {p99:.1f} ms, worst {s[-1]:.1f} ms"


def index_state(db):
    """(newest inbox id, newest indexed id), read from the side."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        newest = conn.execute("SELECT coalesce(max(id), 0) FROM inbox").fetchone()[0]
        indexed = conn.execute("SELECT last_id FROM inbox_fts_state").fetchone()[0]
        return newest, indexed
    finally:
        conn.close()


def sizes(db):
    """(bytes of the index's tables, bytes of the text it indexes), or None without dbstat."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        index = conn.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'inbox_fts%' AND name != 'inbox_fts_state'"
        ).fetchone()[0]
        text = conn.execute(
            "SELECT sum(length(CAST(delivery_id AS BLOB)) + length(CAST(event_type AS BLOB))"
            " + length(CAST(substr(prompt, 1, 4000) AS BLOB))) FROM inbox"
        ).fetchone()[0]
        return index, text
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()


def measure(name, binary, args, body):
    home = tempfile.mkdtemp(prefix="herald-bench-backfill-")
    webhook_port, api_port = load.free_port(), load.free_port()
    dashboard.config(home, webhook_port, api_port, PROMPT)
    env = dict(os.environ, HERALD_HOME=home, RUST_LOG="warn")
    herald = subprocess.Popen([binary, "gateway", "run"], env=env, stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(home, "herald.log"), "w"))
    db = os.path.join(home, "herald.db")
    wal = db + "-wal"
    try:
        load.wait_http(webhook_port)
        load.wait_http(api_port, "/health")
        fill = argparse.Namespace(threads=2, connections=32, duration=5)
        while dashboard.inbox_total(webhook_port) < args.events:
            load.run_wrk(webhook_port, "accepted", body, fill, f"fill-{time.time()}")
        print(f"[{name}] inbox: {dashboard.inbox_total(webhook_port)} events")
        t_end = time.time() + args.paced
        lat, failed = paced(webhook_port, body, args.rate, f"calm-{time.time()}", lambda: time.time() > t_end)
        print(f"[{name}] no login, paced {args.rate}/s: {summary(lat)}, {failed} failed")
        sat = argparse.Namespace(threads=2, connections=32, duration=args.saturate)
        r = load.run_wrk(webhook_port, "accepted", body, sat, f"sat-calm-{time.time()}")
        print(f"[{name}] no login, wrk: {r['rps']:.0f}/s, p99 {r['p99_us'] / 1000:.1f} ms")
        dashboard.Dashboard(api_port)  # the first login starts the index
        started = time.time()
        peak_wal = [0]
        watching = threading.Event()

        def watch_wal():
            while not watching.is_set():
                try:
                    peak_wal[0] = max(peak_wal[0], os.path.getsize(wal))
                except OSError:
                    pass
                time.sleep(0.2)

        threading.Thread(target=watch_wal, daemon=True).start()
        r = load.run_wrk(webhook_port, "accepted", body, sat, f"sat-backfill-{time.time()}")
        print(f"[{name}] backfill, wrk: {r['rps']:.0f}/s, p99 {r['p99_us'] / 1000:.1f} ms")

        def caught_up():
            newest, indexed = index_state(db)
            return indexed >= newest or time.time() - started > args.max_backfill

        lat, failed = paced(webhook_port, body, args.rate, f"backfill-{time.time()}", caught_up)
        took = time.time() - started
        watching.set()
        print(f"[{name}] backfill, paced {args.rate}/s: {summary(lat)}, {failed} failed")
        newest, indexed = index_state(db)
        print(f"[{name}] index caught up after {took:.0f} s ({indexed} of {newest}); "
              f"largest WAL {peak_wal[0] / 2**20:.1f} MiB, now {os.path.getsize(wal) / 2**20:.1f} MiB")
        measured = sizes(db)
        if measured and measured[0]:
            index, text = measured
            print(f"[{name}] index {index / 2**20:.0f} MiB for {text / 2**20:.0f} MiB of text "
                  f"({index / text:.1f}x)")
    finally:
        herald.terminate()
        herald.wait(timeout=60)
        shutil.rmtree(home, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--rate", type=int, default=200, help="paced accepts a second")
    ap.add_argument("--paced", type=int, default=20, help="seconds of paced accepts without a login")
    ap.add_argument("--saturate", type=int, default=10, help="seconds of wrk in each phase")
    ap.add_argument("--max-backfill", type=int, default=900)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--herald-bin")
    ap.add_argument("--baseline-bin", help="also measure this build, before the other one")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "herald-cli"], cwd=load.ROOT, check=True)
    binary = args.herald_bin or os.path.join(load.ROOT, "target/release/herald")
    with open(load.FIXTURE) as f:
        body = f.read()
    if args.baseline_bin:
        measure("baseline", args.baseline_bin, args, body)
    measure("herald", binary, args, body)


if __name__ == "__main__":
    main()
