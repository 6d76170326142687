#!/usr/bin/env python3
"""Hostile clients against a release herald (127.0.0.1 only, every attack bounded in time).

Starts herald on a fresh home and runs, one after another:

  slowloris      N connections sending a request head a byte every second
  idle           M connections that open and send nothing (more than max_connections)
  nested_bodies  K concurrent signed 1 MB bodies of nested arrays, then a pause
  forged_flood   wrk sending requests with a wrong signature

During each attack it samples herald's RSS, open file descriptors and the latency of
GET /health on a fresh connection, and prints the worst of each; after the nested bodies
it also prints the RSS once the burst is over (memory given back), and after the flood
the size of herald's log.

Usage: python3 bench/hostile.py [--seconds 12] [--slowloris 1000] [--idle 6000]
       [--bodies 64] [--no-build] [--herald-bin PATH]
"""

import argparse
import hashlib
import hmac
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load import free_port, rss_kb, wait_http  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECRET = "hostile-test-secret"

CONFIG = """platforms:
  webhook:
    enabled: true
    extra:
      host: 127.0.0.1
      port: {port}
      secret: {secret}
      rate_limit: 1000000
      max_connections: {max_connections}
      header_timeout_seconds: {header_timeout}
      idle_timeout_seconds: 30
      routes:
        nested:
          deliver: log
"""


def fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def health_ms(port):
    start = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            s.settimeout(5)
            if not s.recv(64).startswith(b"HTTP/1.1 200"):
                return None
    except OSError:
        return None
    return (time.perf_counter() - start) * 1000


class Sampler:
    """Samples RSS, fds and /health latency in the background until stopped."""

    def __init__(self, pid, port):
        self.pid, self.port = pid, port
        self.rss, self.fds, self.health, self.failed = 0, 0, 0.0, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            self.rss = max(self.rss, rss_kb(self.pid, "VmRSS"))
            self.fds = max(self.fds, fds(self.pid))
            ms = health_ms(self.port)
            if ms is None:
                self.failed += 1
            else:
                self.health = max(self.health, ms)
            time.sleep(0.2)

    def finish(self):
        self.stop.set()
        self.thread.join()
        return self


def report(name, s, extra=""):
    print(f"{name:14} peak RSS {s.rss / 1024:7.1f} MB  peak fds {s.fds:6}  "
          f"worst /health {s.health:7.1f} ms  /health failures {s.failed:3}  {extra}")


def slowloris(pid, port, count, seconds):
    socks = []
    sampler = Sampler(pid, port)
    for _ in range(count):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(b"POST /webhooks/nested HTTP/1.1\r\n")
            socks.append(s)
        except OSError:
            break
    closed = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and socks:
        alive = []
        for s in socks:
            try:
                s.sendall(b"X")
                alive.append(s)
            except OSError:
                closed += 1
                s.close()
        socks = alive
        time.sleep(1)
    for s in socks:
        s.close()
    report("slowloris", sampler.finish(), f"closed by herald {closed}/{count}")


def idle(pid, port, count, seconds):
    socks = []
    sampler = Sampler(pid, port)
    for _ in range(count):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            break
    time.sleep(seconds)
    refused = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                refused += 1
        except BlockingIOError:
            pass
        except OSError:
            refused += 1
        s.close()
    report("idle", sampler.finish(), f"opened {len(socks)}, closed by herald {refused}")


def nested_body(size):
    # [[[...]]] chains of depth 100 side by side: many small JSON nodes.
    unit = "[" * 100 + "1" + "]" * 100
    items = []
    total = 0
    while total < size - 300:
        items.append(unit)
        total += len(unit) + 1
    return ('{"n": 1, "a": [' + ",".join(items) + "]}").encode()


def post(port, body, sig):
    head = (f"POST /webhooks/nested HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"X-Hub-Signature-256: {sig}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(head.encode() + body)
            s.settimeout(30)
            return s.recv(64).split(b" ")[1].decode()
    except (OSError, IndexError):
        return "error"


def nested_bodies(pid, port, count):
    body = nested_body(1 << 20)
    sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    before = rss_kb(pid, "VmRSS")
    one = Sampler(pid, port)
    status = post(port, body, sig)
    one = one.finish()
    report("one 1MB body", one, f"status {status}, RSS before {before / 1024:.1f} MB, "
           f"growth {(one.rss - before) / 1024:.1f} MB")
    sampler = Sampler(pid, port)
    statuses = {}
    threads = []
    lock = threading.Lock()

    def send():
        s = post(port, body, sig)
        with lock:
            statuses[s] = statuses.get(s, 0) + 1

    for _ in range(count):
        t = threading.Thread(target=send)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    sampler.finish()
    time.sleep(3)
    after = rss_kb(pid, "VmRSS")
    report("nested_bodies", sampler, f"{count} at once: statuses {statuses}, RSS 3 s later {after / 1024:.1f} MB")


def forged_flood(pid, port, seconds, log_path):
    if not shutil.which("wrk"):
        print("forged_flood   skipped: wrk is not installed (apt-get install wrk)")
        return
    lua = ('wrk.method = "POST"\nwrk.body = \'{"n": 1}\'\n'
           'wrk.headers["X-Hub-Signature-256"] = "sha256=' + "0" * 64 + '"\n')
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(lua)
        script = f.name
    size_before = os.path.getsize(log_path)
    sampler = Sampler(pid, port)
    out = subprocess.run(["wrk", "-t", "2", "-c", "32", "-d", f"{seconds}s", "-s", script,
                          f"http://127.0.0.1:{port}/webhooks/nested"],
                         capture_output=True, text=True, check=False)
    os.unlink(script)
    sampler.finish()
    requests = next((line.split()[0] for line in out.stdout.splitlines() if "requests in" in line), "?")
    grew = os.path.getsize(log_path) - size_before
    report("forged_flood", sampler, f"{requests} forged requests, log grew {grew} bytes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=12)
    ap.add_argument("--slowloris", type=int, default=1000)
    ap.add_argument("--idle", type=int, default=6000)
    ap.add_argument("--bodies", type=int, default=64)
    ap.add_argument("--max-connections", type=int, default=4096)
    ap.add_argument("--header-timeout", type=int, default=10)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--herald-bin")
    args = ap.parse_args()
    binary = args.herald_bin or os.path.join(ROOT, "target/release/herald")
    if not args.herald_bin and not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "herald-cli", "--bin", "herald"],
                       cwd=ROOT, check=True)
    home = tempfile.mkdtemp(prefix="herald-hostile-")
    port = free_port()
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write(CONFIG.format(port=port, secret=SECRET, max_connections=args.max_connections,
                              header_timeout=args.header_timeout))
    log_path = os.path.join(home, "herald.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([binary, "gateway", "run"], env={**os.environ, "HERALD_HOME": home},
                                stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_http(port)
        print(f"herald {binary}, idle RSS {rss_kb(proc.pid, 'VmRSS') / 1024:.1f} MB, "
              f"max_connections {args.max_connections}, header timeout {args.header_timeout} s")
        slowloris(proc.pid, port, args.slowloris, args.seconds + args.header_timeout)
        idle(proc.pid, port, args.idle, args.seconds)
        nested_bodies(proc.pid, port, args.bodies)
        forged_flood(proc.pid, port, args.seconds, log_path)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
