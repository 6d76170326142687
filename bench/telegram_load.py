#!/usr/bin/env python3
"""Telegram door under load: a fake Bot API with N chats, each sending M messages (the
next one once the previous is answered, as people do), against an instant fake
provider, through a release herald serving the bot by long polling.

Reports the time from an update being available to its answer's sendMessage (p50,
p99), herald's CPU time per message, how many sends each Bot API method got, and
whether any chat got more than one message a second or the bot more than 30 a second
(Telegram's limits, which herald's send governor applies).

Usage: python3 bench/telegram_load.py [--chats 200] [--messages 20] [--no-build]
                                      [--herald-bin PATH]
"""

import argparse, http.server, json, os, socketserver, statistics, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "123456:BENCH-token"


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 1024


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive, no Nagle delay, no access log: the fakes' common ground."""
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *a):
        pass


def provider():
    class Handler(QuietHandler):
        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            last = [m for m in req["messages"] if m["role"] == "user"][-1]["content"]
            text = last if isinstance(last, str) else json.dumps(last)
            events = [{"choices": [{"index": 0, "delta": {"content": "re: " + text[-40:]}}]},
                      {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
            body = ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Bot:
    """The fake Bot API's state: pending updates, and every send with its time."""

    def __init__(self, chats, messages):
        self.lock = threading.Condition()
        self.pending = []
        self.next_update = 1
        self.next_message = 1
        self.sent = {}        # chat -> [times of sendMessage]
        self.asked_at = {}    # chat -> time the current message became available
        self.latencies = []
        self.left = {c: messages for c in chats}
        self.calls = {}
        self.all_sends = []

    def offer(self, chat):
        with self.lock:
            n = self.left[chat]
            if n == 0:
                return
            self.left[chat] = n - 1
            self.next_message += 1
            update = {"update_id": self.next_update, "message": {
                "message_id": self.next_message, "date": int(time.time()),
                "chat": {"id": chat, "type": "private"},
                "from": {"id": chat, "is_bot": False, "first_name": "U"},
                "text": f"message {n} from {chat}"}}
            self.next_update += 1
            self.pending.append(update)
            self.asked_at[chat] = time.monotonic()
            self.lock.notify_all()

    def get_updates(self, body):
        offset = body.get("offset")
        deadline = time.monotonic() + min(body.get("timeout", 0), 5)
        with self.lock:
            while True:
                if offset is not None:
                    self.pending = [u for u in self.pending if u["update_id"] >= offset]
                if self.pending or time.monotonic() >= deadline:
                    return self.pending[:100]
                self.lock.wait(timeout=max(0.0, deadline - time.monotonic()))

    def send(self, body):
        now = time.monotonic()
        chat = body["chat_id"]
        with self.lock:
            self.sent.setdefault(chat, []).append(now)
            self.all_sends.append(now)
            self.next_message += 1
            asked = self.asked_at.pop(chat, None)
            mid = self.next_message
        if asked is not None:
            self.latencies.append(now - asked)
            self.offer(chat)
        return {"message_id": mid, "chat": {"id": chat}, "text": body.get("text", "")}


def bot_api(bot):
    class Handler(QuietHandler):
        def do_POST(self):
            method = self.path.rsplit("/", 1)[-1]
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            with bot.lock:
                bot.calls[method] = bot.calls.get(method, 0) + 1
            if method == "getUpdates":
                result = bot.get_updates(body)
            elif method == "sendMessage":
                result = bot.send(body)
            elif method == "getMe":
                result = {"id": 123456, "is_bot": True, "first_name": "B", "username": "bench_bot"}
            else:
                result = True
            out = json.dumps({"ok": True, "result": result}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            try:
                self.wfile.write(out)
            except BrokenPipeError:
                pass  # herald stopped while a long poll waited

    server = ThreadingServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def limits(bot):
    """The worst spacing per chat, and the most sends in any one-second window."""
    closest = min((b - a for times in bot.sent.values() for a, b in zip(times, times[1:])), default=None)
    sends = sorted(bot.all_sends)
    most, j = 0, 0
    for i, t in enumerate(sends):
        while sends[j] <= t - 1.0:
            j += 1
        most = max(most, i - j + 1)
    return closest, most


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chats", type=int, default=200)
    ap.add_argument("--messages", type=int, default=20)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--herald-bin")
    args = ap.parse_args()
    if not args.no_build and not args.herald_bin:
        subprocess.run(["cargo", "build", "--release", "-p", "herald-cli"], cwd=ROOT, check=True)
    herald_bin = args.herald_bin or os.path.join(ROOT, "target/release/herald")
    chats = list(range(1000, 1000 + args.chats))
    bot = Bot(chats, args.messages)
    prov, api = provider(), bot_api(bot)
    home = tempfile.mkdtemp(prefix="herald-tg-bench-")
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write(f"model:\n  default: fake\n  base_url: http://127.0.0.1:{prov.server_port}/v1\n"
                "display:\n  busy_input_mode: queue\n")
    with open(os.path.join(home, ".env"), "w") as f:
        f.write(f"TELEGRAM_BOT_TOKEN={TOKEN}\nTELEGRAM_ALLOWED_USERS=*\n"
                f"TELEGRAM_BASE_URL=http://127.0.0.1:{api.server_port}/bot\n")
    env = dict(os.environ, HERALD_HOME=home, RUST_LOG="warn")
    proc = subprocess.Popen([herald_bin, "gateway", "run"], env=env, stdout=subprocess.PIPE,
                            stderr=open(os.path.join(home, "herald.log"), "w"), text=True)
    for line in proc.stdout:
        if "bot answering" in line:
            break
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    total = args.chats * args.messages
    cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
    for c in chats:
        bot.offer(c)
    while len(bot.latencies) < total and time.monotonic() - t0 < 1800:
        time.sleep(0.5)
    wall, cpu = time.monotonic() - t0, cpu_seconds(proc.pid) - cpu0
    proc.terminate()
    proc.wait(timeout=30)
    lat = sorted(bot.latencies)
    closest, most = limits(bot)
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
    print(f"answered {len(lat)}/{total} in {wall:.1f} s ({len(lat) / wall:.1f} answers/s)")
    print(f"update -> answer: p50 {q(0.50):.0f} ms, p99 {q(0.99):.0f} ms, max {lat[-1] * 1000:.0f} ms")
    print(f"herald CPU: {cpu:.2f} s, {cpu / max(1, len(lat)) * 1000:.2f} ms per message")
    print(f"calls: {json.dumps(bot.calls, sort_keys=True)}")
    spacing = "n/a" if closest is None else f"{closest:.3f} s"
    print(f"limits: closest two sends to one chat {spacing} (>= 1 s allowed); "
          f"most sends in one second {most} (<= 30 allowed)")
    ok = len(lat) == total and (closest is None or closest >= 0.99) and most <= 30
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
