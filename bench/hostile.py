#!/usr/bin/env python3
"""Hostile clients against a release herald (127.0.0.1 only, every attack bounded in time).

Starts herald on a fresh home and runs, one after another:

  slowloris      N connections sending a request head a byte every second
  idle           M connections that open and send nothing (more than max_connections)
  nested_bodies  K concurrent signed 1 MB bodies of nested arrays, then a pause
  forged_flood   wrk sending requests with a wrong signature

then against the OpenAI-compatible API port of the same gateway (a fake provider at
127.0.0.1 answers `flood N` with N MiB of streamed text):

  api_slow       S authenticated chat completions sending their body at 0.5 KB/s
  api_stalled    B connections that send 9.5 MB of a 10 MB body and stall
  api_unread     U streamed chat completions of a 2 GB answer that are never read

and against `herald rpc --ws` on the same home:

  ws_unread      W WebSocket clients that submit a prompt with a 2 GB answer and
                 never read

During each attack it samples herald's RSS, open file descriptors and the latency of
GET /health on a fresh connection (for the WebSocket gateway, which has no /health, of a
fresh WebSocket upgrade), and prints the worst of each; after the nested bodies it also
prints the RSS once the burst is over (memory given back), after the flood the size of
herald's log, and for each API and WebSocket attack how its connections ended.

Usage: python3 bench/hostile.py [--seconds 12] [--slowloris 1000] [--idle 6000]
       [--bodies 64] [--api-slow 500] [--api-stalled 180] [--api-unread 4]
       [--ws-unread 4] [--only api|ws|webhook] [--no-build] [--herald-bin PATH]
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load import free_port, rss_kb, start_provider, wait_http  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECRET = "hostile-test-secret"
KEY = "hostile-api-key-0123456789abcdef"

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
  api_server:
    enabled: true
    extra:
      port: {api_port}
      key: {key}
      body_timeout_seconds: {body_timeout}
model:
  default: fake
  base_url: {base}
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
    """Samples RSS, fds and a probe's latency (/health on `port`, or `probe()`) in the
    background until stopped."""

    def __init__(self, pid, port, probe=None):
        self.pid, self.probe = pid, probe or (lambda: health_ms(port))
        self.rss, self.fds, self.health, self.failed = 0, 0, 0.0, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            self.rss = max(self.rss, rss_kb(self.pid, "VmRSS"))
            self.fds = max(self.fds, fds(self.pid))
            ms = self.probe()
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


def trickle(pid, port, count, seconds, head, drip):
    """`count` connections that send `head` and then `drip` once a second: how each
    ended (herald's status, or "closed" when it closed with none)."""
    socks, ended = [], {}
    sampler = Sampler(pid, port)
    for _ in range(count):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(head)
            socks.append(s)
        except OSError:
            break
    opened = len(socks)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and socks:
        alive = []
        for s in socks:
            answer = status_of(s)
            if answer is None:
                try:
                    s.sendall(drip)
                    alive.append(s)
                    continue
                except OSError:
                    answer = "closed"
            tally(ended, answer)
            s.close()
        socks = alive
        time.sleep(1)
    for s in socks:
        s.close()
    return sampler.finish(), f"opened {opened}, ended by herald {ended}, still open {len(socks)}"


def slowloris(pid, port, count, seconds):
    """Request heads that never end, one byte a second."""
    sampler, outcome = trickle(pid, port, count, seconds, b"POST /webhooks/nested HTTP/1.1\r\n", b"X")
    report("slowloris", sampler, outcome)


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


def api_head(port, length, stream_prompt=None):
    body = json.dumps({"model": "hermes-agent", "stream": stream_prompt is not None,
                       "messages": [{"role": "user", "content": stream_prompt or "hi"}]}).encode()
    length = len(body) if stream_prompt else length
    # A stream's end shows as the connection closing.
    close = "Connection: close\r\n" if stream_prompt else ""
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n{close}\r\n").encode()
    return head + body if stream_prompt else head


def status_of(s):
    """The status herald answered on `s`, "closed" when it closed with none, None when
    it has said nothing yet."""
    s.setblocking(False)
    try:
        data = s.recv(64)
    except BlockingIOError:
        return None
    except OSError:
        return "closed"
    finally:
        s.setblocking(True)
    return data.split(b" ")[1].decode() if data.startswith(b"HTTP/1.1 ") else "closed"


def tally(counts, key):
    counts[key] = counts.get(key, 0) + 1


def api_slow(pid, port, count, seconds):
    """Authenticated requests whose 100 kB bodies come at 0.5 KB/s."""
    sampler, outcome = trickle(pid, port, count, seconds, api_head(port, 100_000), b" " * 512)
    report("api_slow", sampler, outcome)


def api_stalled(pid, port, count, seconds):
    """Connections that send 9.5 MB of a declared 10 MB and then send nothing."""
    part = b" " * (9_500_000)
    ended, lock = {}, threading.Lock()
    sampler = Sampler(pid, port)

    def one():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=seconds) as s:
                s.sendall(api_head(port, 10_000_000))
                try:
                    s.sendall(part)
                except OSError:
                    pass  # herald answered and stopped reading
                s.settimeout(seconds)
                data = s.recv(64)
                answer = data.split(b" ")[1].decode() if data.startswith(b"HTTP/1.1 ") else "closed"
        except socket.timeout:
            answer = "still open"
        except OSError:
            answer = "closed"
        with lock:
            tally(ended, answer)

    threads = [threading.Thread(target=one) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    report("api_stalled", sampler.finish(), f"{count} at once, ended by herald {ended}")


def drained(s, within):
    """Reads what `s` holds until herald closes it; False when it is still open after
    `within` seconds."""
    s.settimeout(within)
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            if not s.recv(1 << 20):
                return True
    except OSError:
        return False
    return False


def unread_clients(pid, port, count, seconds, opener, probe=None):
    """`count` clients opened by `opener()` that then read nothing for `seconds`; how
    many herald let go."""
    sampler = Sampler(pid, port, probe)
    socks = [opener() for _ in range(count)]
    time.sleep(seconds)
    sampler.finish()
    let_go = sum(drained(s, 30) for s in socks)
    for s in socks:
        s.close()
    return sampler, let_go


def unread_socket(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    return s


def api_unread(pid, port, count, seconds):
    def open_stream():
        s = unread_socket(port)
        s.sendall(api_head(port, 0, stream_prompt="flood 2000"))
        return s
    sampler, let_go = unread_clients(pid, port, count, seconds, open_stream)
    report("api_unread", sampler, f"{count} streams of 2 GB never read for {seconds} s, let go {let_go}/{count}")


class WsClient:
    """A bare WebSocket client: masked text frames out, frames in only when asked."""

    def __init__(self, port, token):
        self.sock = unread_socket(port)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /api/ws?token={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                           f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        self.file = self.sock.makefile("rb")
        status = self.file.readline()
        if b" 101 " not in status:
            raise SystemExit(f"WebSocket upgrade refused: {status!r}")
        while self.file.readline() not in (b"\r\n", b""):
            pass

    def send(self, frame):
        data = json.dumps(frame).encode()
        mask = os.urandom(4)
        n = len(data)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0xFE]) + n.to_bytes(2, "big"))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        b0, b1 = self.file.read(2)
        n = b1 & 0x7F
        if n == 126:
            n = int.from_bytes(self.file.read(2), "big")
        elif n == 127:
            n = int.from_bytes(self.file.read(8), "big")
        payload = self.file.read(n)
        return json.loads(payload) if b0 & 0x0F == 1 else None

    def call(self, id_, method, params):
        self.send({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
        while True:
            frame = self.recv()
            if frame and frame.get("id") == id_:
                return frame


def upgrade_ms(port, token):
    start = time.perf_counter()
    try:
        WsClient(port, token).sock.close()
    except (OSError, SystemExit):
        return None
    return (time.perf_counter() - start) * 1000


def ws_unread(binary, home, count, seconds):
    """`herald rpc --ws` on the same home, and clients that submit a prompt whose answer
    is 2 GB and then read nothing."""
    proc = subprocess.Popen([binary, "rpc", "--ws", "127.0.0.1:0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env={**os.environ, "HERALD_HOME": home}, text=True)
    try:
        proc.stdout.readline()  # listening on ws://…/api/ws
        url = proc.stdout.readline().strip().removeprefix("herald: connect with ")
        port = int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        token = url.split("token=", 1)[1]

        def open_turn():
            c = WsClient(port, token)
            sid = c.call(1, "session.create", {"cwd": home})["result"]["session_id"]
            c.send({"jsonrpc": "2.0", "id": 2, "method": "prompt.submit",
                    "params": {"session_id": sid, "text": "flood 2000"}})
            return c.sock

        print(f"herald rpc --ws idle RSS {rss_kb(proc.pid, 'VmRSS') / 1024:.1f} MB")
        sampler, let_go = unread_clients(proc.pid, port, count, seconds, open_turn,
                                         lambda: upgrade_ms(port, token))
        report("ws_unread", sampler, f"{count} turns of 2 GB never read for {seconds} s, let go {let_go}/{count} "
               f"(latency: a fresh upgrade)")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=12)
    ap.add_argument("--slowloris", type=int, default=1000)
    ap.add_argument("--idle", type=int, default=6000)
    ap.add_argument("--bodies", type=int, default=64)
    ap.add_argument("--api-slow", type=int, default=500)
    ap.add_argument("--api-stalled", type=int, default=180)
    ap.add_argument("--api-unread", type=int, default=4)
    ap.add_argument("--ws-unread", type=int, default=4)
    ap.add_argument("--body-timeout", type=int, default=30, help="the API port's body_timeout_seconds")
    ap.add_argument("--only", choices=["webhook", "api", "ws"], help="run only this port's attacks")
    ap.add_argument("--max-connections", type=int, default=4096)
    ap.add_argument("--header-timeout", type=int, default=10)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--herald-bin")
    args = ap.parse_args()
    binary = args.herald_bin or os.path.join(ROOT, "target/release/herald")
    if not args.no_build:
        if not args.herald_bin:
            subprocess.run(["cargo", "build", "--release", "-p", "herald-cli", "--bin", "herald"],
                           cwd=ROOT, check=True)
        subprocess.run(["cargo", "build", "--release", "-p", "herald-test-support", "--example", "fake_upstreams"],
                       cwd=ROOT, check=True)
    provider, base = start_provider()
    home = tempfile.mkdtemp(prefix="herald-hostile-")
    port, api_port = free_port(), free_port()
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write(CONFIG.format(port=port, secret=SECRET, max_connections=args.max_connections,
                              header_timeout=args.header_timeout, api_port=api_port, key=KEY, base=base,
                              body_timeout=args.body_timeout))
    log_path = os.path.join(home, "herald.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([binary, "gateway", "run"], env={**os.environ, "HERALD_HOME": home},
                                stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_http(port)
        wait_http(api_port)
        print(f"herald {binary}, idle RSS {rss_kb(proc.pid, 'VmRSS') / 1024:.1f} MB, "
              f"max_connections {args.max_connections}, header timeout {args.header_timeout} s")
        if args.only in (None, "webhook"):
            slowloris(proc.pid, port, args.slowloris, args.seconds + args.header_timeout)
            idle(proc.pid, port, args.idle, args.seconds)
            nested_bodies(proc.pid, port, args.bodies)
            forged_flood(proc.pid, port, args.seconds, log_path)
        if args.only in (None, "api"):
            api_slow(proc.pid, api_port, args.api_slow, args.body_timeout + 5)
            api_stalled(proc.pid, api_port, args.api_stalled, args.body_timeout + 5)
            api_unread(proc.pid, api_port, args.api_unread, args.seconds + 3)
            print(f"gateway RSS after the API attacks: {rss_kb(proc.pid, 'VmRSS') / 1024:.1f} MB")
        if args.only in (None, "ws"):
            ws_unread(binary, home, args.ws_unread, args.seconds + 3)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        provider.terminate()
        provider.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
