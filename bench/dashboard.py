#!/usr/bin/env python3
"""The dashboard with a big inbox: search latency and the events page's load time.

Starts a release herald (webhook and API listeners, no model: accepted events wait in
the inbox) on a fresh home, fills the inbox with --events accepted events (the accepted
mix of bench/load.py: a ~2 KB GitHub pull_request with unique delivery ids, through wrk),
logs in to the dashboard and waits for its search index to catch up, then measures:

  - the JSON API: the first page of events, a search by a delivery id's substring, a
    search for a word of the rendered prompts, a route filter (medians and worst of
    --repeat requests);
  - the events page in headless Chromium (Debian's chromium and chromium-driver, over
    WebDriver): DOMContentLoaded and the time until the first page of events is shown
    (medians of --repeat loads, cache disabled).

Usage: python3 bench/dashboard.py [--events 100000] [--repeat 15] [--no-build]
"""

import argparse
import http.cookiejar
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load  # noqa: E402

KEY = "bench-api-key-0123456789abcdef"


def config(home, webhook_port, api_port, prompt="Review PR #{number}: {pull_request.title}"):
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write(f"""model:
  default: none
  base_url: http://127.0.0.1:9/v1
platforms:
  webhook:
    enabled: true
    extra:
      host: 127.0.0.1
      port: {webhook_port}
      secret: {load.SECRET}
      rate_limit: 1000000000
      routes:
        accepted:
          prompt: {json.dumps(prompt)}
  api_server:
    enabled: true
    extra:
      port: {api_port}
      key: {KEY}
""")


def inbox_total(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/detailed", timeout=10) as r:
        return json.load(r)["inbox"]["total"]


class Dashboard:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        req = urllib.request.Request(
            self.base + "/dashboard/login", data=f"token={KEY}".encode(), method="POST",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        with self.opener.open(req, timeout=10) as r:
            self.secret = json.load(r)["secret"]
        self.cookie = next(c.value for c in self.jar if c.name == "herald_dashboard")

    def get(self, path):
        start = time.perf_counter()
        req = urllib.request.Request(self.base + path, headers={"X-Dashboard-Secret": self.secret})
        with self.opener.open(req, timeout=30) as r:
            body = json.load(r)
        return (time.perf_counter() - start) * 1000, body


def timed(d, path, repeat):
    times = []
    found = None
    for _ in range(repeat):
        ms, body = d.get(path)
        times.append(ms)
        found = len(body.get("events", []))
    return statistics.median(times), max(times), found


class WebDriver:
    """Headless Chromium through chromedriver's W3C WebDriver HTTP API."""

    def __init__(self):
        self.port = load.free_port()
        self.profile = tempfile.mkdtemp(prefix="herald-bench-chrome-")
        self.proc = subprocess.Popen(["chromedriver", f"--port={self.port}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        load.wait_port(self.port)
        caps = {"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "binary": shutil.which("chromium") or "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-background-networking", "--disable-component-update",
                     "--disable-sync", "--no-first-run", "--disable-quic",
                     f"--user-data-dir={self.profile}"]}}}}
        self.session = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.load(r)["value"]

    def s(self, method, path, body=None):
        return self.call(method, f"/session/{self.session}{path}", body)

    def close(self):
        try:
            self.s("DELETE", "")
        finally:
            self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)


def page_load(wd, base, cookie, secret, repeat):
    wd.s("POST", "/url", {"url": base + "/dashboard/"})
    wd.s("POST", "/cookie", {"cookie": {"name": "herald_dashboard", "value": cookie, "path": "/dashboard"}})
    # The tab's session secret, where the login page would have put it.
    wd.s("POST", "/execute/sync", {"script": "sessionStorage.setItem('herald-dashboard-secret', arguments[0]);",
                                   "args": [secret]})
    dcl, shown = [], []
    for _ in range(repeat):
        wd.s("POST", "/url", {"url": "about:blank"})
        wd.s("POST", "/url", {"url": base + "/dashboard/#/events"})
        deadline = time.time() + 30
        while True:
            v = wd.s("POST", "/execute/sync", {"script": """
                const nav = performance.getEntriesByType('navigation')[0];
                const rows = document.querySelectorAll('#events tbody tr').length;
                return [nav ? nav.domContentLoadedEventEnd - nav.startTime : -1, rows, performance.now()];
            """, "args": []})
            if v[1] > 0:
                dcl.append(v[0])
                shown.append(v[2])
                break
            if time.time() > deadline:
                raise SystemExit("the events page never showed its events")
            time.sleep(0.005)
    return statistics.median(dcl), max(dcl), statistics.median(shown)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--herald-bin")
    args = ap.parse_args()
    for tool in ["wrk", "chromium", "chromedriver"]:
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is not installed (apt-get install wrk chromium chromium-driver)")
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "herald-cli"], cwd=load.ROOT, check=True)
    binary = args.herald_bin or os.path.join(load.ROOT, "target/release/herald")
    with open(load.FIXTURE) as f:
        body = f.read()
    home = tempfile.mkdtemp(prefix="herald-bench-dashboard-")
    webhook_port, api_port = load.free_port(), load.free_port()
    config(home, webhook_port, api_port)
    env = dict(os.environ, HERALD_HOME=home, RUST_LOG="warn")
    herald = subprocess.Popen([binary, "gateway", "run"], env=env, stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(home, "herald.log"), "w"))
    try:
        load.wait_http(webhook_port)
        load.wait_http(api_port, "/health")
        fill = argparse.Namespace(threads=2, connections=32, duration=5)
        start = time.time()
        while inbox_total(webhook_port) < args.events:
            load.run_wrk(webhook_port, "accepted", body, fill, f"fill-{time.time()}")
        total = inbox_total(webhook_port)
        print(f"inbox: {total} events (filled in {time.time() - start:.0f} s)")
        d = Dashboard(api_port)
        # The search index catches up in the background, a batch at a time: it has
        # when a search finds the oldest event (beyond the scanned newest entries).
        start = time.time()
        _, newest = d.get("/dashboard/api/events?limit=1")
        newest_id = newest["events"][0]["id"]
        delivery = newest["events"][0]["delivery_id"]
        _, oldest = d.get("/dashboard/api/events?before=2&limit=1")
        oldest_delivery = oldest["events"][0]["delivery_id"]
        while True:
            _, found = d.get(f"/dashboard/api/events?q={oldest_delivery}&limit=1")
            if found["events"] or time.time() - start > 300:
                break
            time.sleep(0.2)
        print(f"search index caught up in {time.time() - start:.1f} s (newest id {newest_id})")
        rows = [
            ("first page (50)", "/dashboard/api/events?limit=50"),
            ("search: a delivery id's part", f"/dashboard/api/events?q={delivery[-12:]}&limit=50"),
            ("search: the oldest's delivery id", f"/dashboard/api/events?q={oldest_delivery}&limit=50"),
            ("search: a prompt word", "/dashboard/api/events?q=Review%20PR&limit=50"),
            ("search: nothing matches", "/dashboard/api/events?q=no-such-thing-here&limit=50"),
            ("route filter", "/dashboard/api/events?route=accepted&limit=50"),
            ("page 100 (before an id)", f"/dashboard/api/events?before={newest_id - 5000}&limit=50"),
        ]
        print(f"\nJSON API over {total} events, {args.repeat} requests each (ms):")
        print(f"{'request':32} {'median':>8} {'worst':>8} {'found':>6}")
        for name, path in rows:
            med, worst, found = timed(d, path, args.repeat)
            print(f"{name:32} {med:8.1f} {worst:8.1f} {found:6}")
        wd = WebDriver()
        try:
            dcl, dcl_worst, shown = page_load(wd, f"http://127.0.0.1:{api_port}", d.cookie, d.secret, args.repeat)
        finally:
            wd.close()
        print(f"\nevents page in headless Chromium ({args.repeat} loads): DOMContentLoaded "
              f"median {dcl:.1f} ms (worst {dcl_worst:.1f}); first 50 events shown at {shown:.1f} ms")
    finally:
        herald.terminate()
        herald.wait(timeout=60)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
