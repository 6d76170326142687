#!/usr/bin/env python3
"""Dashboard logins under a guessing attack: how long the right key waits.

Starts herald (API listener on 127.0.0.1, which serves the dashboard) on a fresh home,
opens --wrong connections from 127.0.0.1 that each send a login with a wrong key (all
in flight at once), then logs in with the right key from 127.0.0.2 (another client
address on Linux's loopback) and reports how long that took, and what the attacking
address's logins were answered (status counts, and when the last answer came).

Works against any herald build (pass --herald-bin), so the figures of two builds can be
put side by side.

Usage: python3 bench/dashboard_login.py [--wrong 400] [--herald-bin target/debug/herald]
"""

import argparse
import asyncio
import collections
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load  # noqa: E402

KEY = "bench-api-key-0123456789abcdef"


def config(home, api_port):
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write(f"""model:
  default: none
  base_url: http://127.0.0.1:9/v1
platforms:
  api_server:
    enabled: true
    extra:
      host: 127.0.0.1
      port: {api_port}
      key: {KEY}
""")


async def login(port, token, source, sent=None):
    """One login over its own connection from `source`: (status, seconds); `sent` is
    called once the request is written."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    body = f"token={token}".encode()
    head = (f"POST /dashboard/login HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    writer.write(head + body)
    await writer.drain()
    if sent:
        sent()
    line = await reader.readline()
    took = time.perf_counter() - started
    writer.close()
    parts = line.split()
    return (int(parts[1]) if len(parts) > 1 else 0), took


async def attack(port, wrong):
    written = [0]
    all_sent = asyncio.Event()

    def sent():
        written[0] += 1
        if written[0] == wrong:
            all_sent.set()

    guesses = [asyncio.create_task(login(port, f"wrong-guess-{n}", "127.0.0.1", sent))
               for n in range(wrong)]
    # The right key comes once every guess has been written.
    await all_sent.wait()
    status, took = await login(port, KEY, "127.0.0.2")
    answers = await asyncio.gather(*guesses)
    return status, took, answers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wrong", type=int, default=400)
    ap.add_argument("--herald-bin", default=os.path.join(load.ROOT, "target/debug/herald"))
    args = ap.parse_args()
    home = tempfile.mkdtemp(prefix="herald-bench-login-")
    port = load.free_port()
    config(home, port)
    env = dict(os.environ, HERALD_HOME=home, RUST_LOG="warn")
    herald = subprocess.Popen([args.herald_bin, "gateway", "run"], env=env,
                              stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(home, "herald.log"), "w"))
    try:
        load.wait_http(port, "/health", timeout=60)
        status, took, answers = asyncio.run(attack(port, args.wrong))
        counts = collections.Counter(s for s, _ in answers)
        slowest = max(t for _, t in answers)
        print(f"{args.wrong} wrong logins in flight from 127.0.0.1; the right key from 127.0.0.2:")
        print(f"  answered {status} in {took * 1000:.0f} ms")
        print(f"  the wrong logins were answered {dict(sorted(counts.items()))}, "
              f"the last after {slowest:.1f} s")
    finally:
        herald.terminate()
        herald.wait(timeout=30)


if __name__ == "__main__":
    main()
