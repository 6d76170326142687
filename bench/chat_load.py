#!/usr/bin/env python3
"""Slack and Discord doors under load, as bench/telegram_load.py measures Telegram: a
fake platform (Slack's Web API and Socket Mode WebSocket, or Discord's REST API and
gateway WebSocket) with N DM channels, each sending M messages (the next one once the
previous is answered, as people do), against an instant fake provider, through a
release herald.

Reports the time from an event being sent on the socket to its answer's post (p50,
p99), herald's CPU time per message, the calls each method got, and the closest two
posts to one channel (both platforms allow about one message a second per channel).

Needs aiohttp (in target/test-venv after scripts/test, or `pip install aiohttp`).

Usage: python3 bench/chat_load.py --platform slack|discord [--chats 100] [--messages 10]
                                  [--no-build] [--herald-bin PATH]
"""

import argparse, asyncio, json, os, subprocess, sys, tempfile, threading, time

from aiohttp import web, WSMsgType

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLACK_BOT, SLACK_APP = "xoxb-1-2-bench", "xapp-1-A1-bench"
DISCORD_TOKEN, BOT_ID = "MTIz.bench.token", "900000000000000001"


class Load:
    """Who sends what next, and when each answer came."""

    def __init__(self, chats, messages):
        self.left = {c: messages for c in chats}
        self.asked_at = {}
        self.latencies = []
        self.posts = {}
        self.calls = {}
        self.sockets = set()
        self.seq = 0
        self.next_id = int(time.time() * 1000 - 1_420_070_400_000) << 22

    def count(self, name):
        self.calls[name] = self.calls.get(name, 0) + 1

    def answered(self, chat):
        now = time.monotonic()
        self.posts.setdefault(chat, []).append(now)
        asked = self.asked_at.pop(chat, None)
        if asked is not None:
            self.latencies.append(now - asked)
            return True
        return False

    def new_id(self):
        self.next_id += 1 << 22
        return str(self.next_id)


async def provider(request):
    req = await request.json()
    last = [m for m in req["messages"] if m["role"] == "user"][-1]["content"]
    text = last if isinstance(last, str) else json.dumps(last)
    events = [{"choices": [{"index": 0, "delta": {"content": "re: " + text[-40:]}}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return web.Response(text=body, content_type="text/event-stream")


# --- Slack -------------------------------------------------------------------------

def slack_app(load, port):
    async def offer(chat):
        n = load.left[chat]
        if n == 0:
            return
        load.left[chat] = n - 1
        ts = f"{time.time():.6f}"
        event = {"type": "message", "channel": chat, "channel_type": "im", "user": "U1",
                 "text": f"message {n} from {chat}", "ts": ts}
        load.seq += 1
        env = {"envelope_id": f"e{load.seq}", "type": "events_api", "accepts_response_payload": False,
               "payload": {"type": "event_callback", "event_id": f"Ev{load.seq}", "event": event}}
        load.asked_at[chat] = time.monotonic()
        for ws in list(load.sockets):
            await ws.send_str(json.dumps(env))
            break

    async def api(request):
        method = request.match_info["method"]
        load.count(method)
        if request.content_type == "application/json":
            args = await request.json()
        else:
            args = dict(await request.post())
        if method == "auth.test":
            return web.json_response({"ok": True, "user_id": "UBOT", "team": "B", "bot_id": "B1"})
        if method == "apps.connections.open":
            return web.json_response({"ok": True, "url": f"ws://127.0.0.1:{port}/link"})
        if method == "chat.postMessage":
            if load.answered(args["channel"]):
                asyncio.get_running_loop().create_task(offer(args["channel"]))
            return web.json_response({"ok": True, "ts": f"{time.time():.6f}"})
        if method == "conversations.history":
            return web.json_response({"ok": True, "messages": []})
        return web.json_response({"ok": True})

    async def link(request):
        ws = web.WebSocketResponse(heartbeat=None)
        await ws.prepare(request)
        await ws.send_str(json.dumps({"type": "hello"}))
        load.sockets.add(ws)
        async for _ in ws:
            pass
        load.sockets.discard(ws)
        return ws

    app = web.Application()
    app.router.add_post("/api/{method}", api)
    app.router.add_get("/link", link)
    env = f"SLACK_BOT_TOKEN={SLACK_BOT}\nSLACK_APP_TOKEN={SLACK_APP}\nSLACK_ALLOWED_USERS=*\n" \
          f"SLACK_BASE_URL=http://127.0.0.1:{port}/api/\n"
    return app, env, offer


# --- Discord -----------------------------------------------------------------------

def discord_app(load, port):
    async def offer(chat):
        n = load.left[chat]
        if n == 0:
            return
        load.left[chat] = n - 1
        load.seq += 1
        d = {"id": load.new_id(), "channel_id": chat, "type": 0, "content": f"message {n} from {chat}",
             "author": {"id": "11", "username": "u"}, "mentions": [], "attachments": []}
        load.asked_at[chat] = time.monotonic()
        for ws in list(load.sockets):
            await ws.send_str(json.dumps({"op": 0, "t": "MESSAGE_CREATE", "s": load.seq, "d": d}))
            break

    async def rest(request):
        path = "/" + request.match_info["path"]
        parts = path.strip("/").split("/")
        load.count(f"{request.method} {'/'.join(p if not p.isdigit() else ':id' for p in parts)}")
        if path == "/gateway/bot":
            return web.json_response({"url": f"ws://127.0.0.1:{port}/gw"})
        if path == "/users/@me":
            return web.json_response({"id": BOT_ID, "username": "bench"})
        if request.method == "POST" and len(parts) == 3 and parts[2] == "messages":
            if load.answered(parts[1]):
                asyncio.get_running_loop().create_task(offer(parts[1]))
            return web.json_response({"id": load.new_id(), "channel_id": parts[1]})
        if request.method == "GET" and parts[-1] == "messages":
            return web.json_response([])
        return web.Response(status=204)

    async def gateway(request):
        ws = web.WebSocketResponse(heartbeat=None)
        await ws.prepare(request)
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 41250}}))
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            frame = json.loads(msg.data)
            if frame["op"] == 1:
                await ws.send_str(json.dumps({"op": 11}))
            elif frame["op"] in (2, 6):
                load.seq += 1
                await ws.send_str(json.dumps({"op": 0, "t": "READY", "s": load.seq, "d": {
                    "session_id": "s", "resume_gateway_url": f"ws://127.0.0.1:{port}/gw",
                    "user": {"id": BOT_ID}}}))
                load.sockets.add(ws)
        load.sockets.discard(ws)
        return ws

    app = web.Application()
    app.router.add_route("*", "/api/v10/{path:.*}", rest)
    app.router.add_get("/gw", gateway)
    app.router.add_get("/gw/", gateway)
    env = f"DISCORD_BOT_TOKEN={DISCORD_TOKEN}\nDISCORD_ALLOWED_USERS=*\n" \
          f"DISCORD_BASE_URL=http://127.0.0.1:{port}/api/v10\n"
    return app, env, offer


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run(args, herald_bin):
    prefix = "D" if args.platform == "slack" else ""
    chats = [f"{prefix}{1000 + i}" for i in range(args.chats)]
    load = Load(chats, args.messages)
    prov = web.Application()
    prov.router.add_post("/v1/chat/completions", provider)
    runner = web.AppRunner(prov)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    prov_port = site._server.sockets[0].getsockname()[1]
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    make = slack_app if args.platform == "slack" else discord_app
    app, env_text, offer = make(load, port)
    platform_runner = web.AppRunner(app)
    await platform_runner.setup()
    await web.TCPSite(platform_runner, "127.0.0.1", port).start()
    home = tempfile.mkdtemp(prefix=f"herald-{args.platform}-bench-")
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write(f"model:\n  default: fake\n  base_url: http://127.0.0.1:{prov_port}/v1\n"
                "display:\n  busy_input_mode: queue\n")
    with open(os.path.join(home, ".env"), "w") as f:
        f.write(env_text)
    env = dict(os.environ, HERALD_HOME=home, RUST_LOG="warn")
    proc = subprocess.Popen([herald_bin, "gateway", "run"], env=env, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(home, "herald.log"), "w"))
    while not load.sockets:
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)
    total = args.chats * args.messages
    cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
    for c in chats:
        await offer(c)
    while len(load.latencies) < total and time.monotonic() - t0 < 1800:
        await asyncio.sleep(0.5)
    wall, cpu = time.monotonic() - t0, cpu_seconds(proc.pid) - cpu0
    proc.terminate()
    proc.wait(timeout=30)
    return load, total, wall, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--platform", choices=["slack", "discord"], required=True)
    ap.add_argument("--chats", type=int, default=100)
    ap.add_argument("--messages", type=int, default=10)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--herald-bin")
    args = ap.parse_args()
    if not args.no_build and not args.herald_bin:
        subprocess.run(["cargo", "build", "--release", "-p", "herald-cli"], cwd=ROOT, check=True)
    herald_bin = args.herald_bin or os.path.join(ROOT, "target/release/herald")
    load, total, wall, cpu = asyncio.run(run(args, herald_bin))
    lat = sorted(load.latencies)
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else 0
    closest = min((b - a for t in load.posts.values() for a, b in zip(t, t[1:])), default=None)
    print(f"{args.platform}: answered {len(lat)}/{total} in {wall:.1f} s ({len(lat) / wall:.1f} answers/s)")
    print(f"event -> answer: p50 {q(0.50):.0f} ms, p99 {q(0.99):.0f} ms, max {q(1.0):.0f} ms")
    print(f"herald CPU: {cpu:.2f} s, {cpu / max(1, len(lat)) * 1000:.2f} ms per message")
    print(f"calls: {json.dumps(load.calls, sort_keys=True)}")
    spacing = "n/a" if closest is None else f"{closest:.3f} s"
    print(f"closest two posts to one channel: {spacing} (>= 1 s allowed)")
    sys.exit(0 if len(lat) == total and (closest is None or closest >= 0.99) else 1)


if __name__ == "__main__":
    main()
