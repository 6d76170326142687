#!/usr/bin/env python3
"""Growth over time: RSS and disk per accepted event under sustained load.

For each herald binary given (the build before and this one, side by side in one run),
on a fresh home: back-to-back --loads accept loads of --seconds each (the accepted mix
of bench/load.py: a ~2 KB GitHub pull_request with unique delivery ids, through wrk; no
model, so every event waits in the inbox and stays a dedup key for the hour), with the
retention task pruning every second during the load (HERALD_RETENTION_EVERY_MS=1000;
a build without it ignores the variable). After each load it prints the events in the
inbox, herald's RSS and peak RSS, and the inbox files on disk; at the end, what each
million events cost in RSS and in disk.

Usage: python3 bench/growth.py --herald-bin OLD --herald-bin NEW [--loads 6] [--seconds 20]
       [--dedup-mb 16]   (the last binary again, its dedup keys within 16 MiB)
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load  # noqa: E402


def disk_bytes(home):
    total = 0
    for name in os.listdir(home):
        if name.startswith("herald.db"):
            total += os.path.getsize(os.path.join(home, name))
    return total


def inbox_total(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/detailed", timeout=30) as r:
        return json.load(r)["inbox"]["total"]


def run(binary, args, body, dedup_mb=None):
    home = tempfile.mkdtemp(prefix="herald-growth-")
    port = load.free_port()
    env = load.herald_env(home, port, load.free_port())
    if dedup_mb:
        with open(os.path.join(home, "config.yaml"), "a") as f:
            f.write(f"inbox:\n  dedup_memory_mb: {dedup_mb}\n")
    env["HERALD_RETENTION_EVERY_MS"] = "1000"
    herald = load.start_herald(binary, env)
    rows = []
    try:
        load.wait_http(port)
        time.sleep(0.5)
        rss0 = load.rss_kb(herald.pid, "VmRSS")
        wrk_args = argparse.Namespace(threads=2, connections=32, duration=args.seconds)
        budget = f" (inbox.dedup_memory_mb: {dedup_mb})" if dedup_mb else ""
        print(f"\n{binary}{budget}\n{'load':>4} {'req/s':>8} {'events':>10} {'RSS MB':>8} {'peak MB':>8} {'disk MB':>9}")
        for n in range(1, args.loads + 1):
            r = load.run_wrk(port, "accepted", body, wrk_args, f"growth-{time.time()}-{n}")
            events = inbox_total(port)
            rss = load.rss_kb(herald.pid, "VmRSS")
            peak = load.rss_kb(herald.pid, "VmHWM")
            disk = disk_bytes(home)
            rows.append((events, rss, disk))
            print(f"{n:4} {r['rps']:8.0f} {events:10} {rss / 1024:8.1f} {peak / 1024:8.1f} {disk / 2**20:9.1f}")
        events, rss, disk = rows[-1]
        per_m = 1_000_000 / max(events, 1)
        print(f"per million events: RSS +{(rss - rss0) / 1024 * per_m:.1f} MB, disk {disk / 2**20 * per_m:.0f} MB "
              f"({disk / max(events, 1):.0f} bytes/event); idle RSS at start {rss0 / 1024:.1f} MB")
    finally:
        herald.terminate()
        herald.wait(timeout=120)
        shutil.rmtree(home, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--herald-bin", action="append", required=True)
    ap.add_argument("--loads", type=int, default=6)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--dedup-mb", type=int, action="append", default=[],
                    help="also run the last binary with this dedup memory budget")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    with open(load.FIXTURE) as f:
        body = f.read()
    for binary in args.herald_bin:
        run(binary, args, body)
    for mb in args.dedup_mb:
        run(args.herald_bin[-1], args, body, mb)


if __name__ == "__main__":
    main()
