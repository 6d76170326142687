#!/usr/bin/env python3
"""Whole-process cost of `herald chat -Q -q` against an instant local fake provider.

Reports medians of N runs: wall time from exec to exit for a plain answer, and the wall
and CPU time (herald and its children, e.g. the `true` that terminal runs) per extra
tool round trip, from a run with 10 terminal round trips.

Usage: python3 bench/chat.py [--runs 5] [--no-build] [--herald-bin PATH ...]

With several --herald-bin, each binary is measured in turn, round after round, so the
figures are side by side on the same (noisy) machine.
"""

import argparse, http.server, json, os, resource, statistics, subprocess, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fake_provider(tool_rounds):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *a):
            pass

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            done = sum(1 for m in req["messages"] if m["role"] == "tool")
            if done < tool_rounds:
                call = {"index": 0, "id": f"c{done}", "type": "function",
                        "function": {"name": "terminal", "arguments": "{\"command\": \"true\"}"}}
                events = [{"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
                          {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
            else:
                events = [{"choices": [{"index": 0, "delta": {"content": "done"}}]},
                          {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
            body = ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def measure(binary, tool_rounds, runs):
    server = fake_provider(tool_rounds)
    home = tempfile.mkdtemp(prefix="herald-chat-bench-")
    # A home that has met herald before: no first-contact work (the shipped skills).
    os.makedirs(os.path.join(home, "skills"))
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write(f"model:\n  default: m\n  base_url: http://127.0.0.1:{server.server_address[1]}/v1\n")
    env = dict(os.environ, HERALD_HOME=home)
    walls, cpus = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        p = subprocess.run([binary, "chat", "-Q", "--yolo", "-q", "hi"], env=env, capture_output=True, text=True, cwd=home)
        walls.append((time.perf_counter() - t) * 1000)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)) * 1000)
        if p.returncode != 0 or p.stdout.strip() != "done":
            raise SystemExit(f"herald chat failed ({p.returncode}): {p.stderr}")
    server.shutdown()
    return statistics.median(walls), statistics.median(cpus)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--herald-bin", action="append",
                    help="measure this binary (repeat to compare; default target/release/herald)")
    args = ap.parse_args()
    if not args.no_build and not args.herald_bin:
        subprocess.run(["cargo", "build", "--release", "-p", "herald-cli"], cwd=ROOT, check=True)
    binaries = args.herald_bin or [os.path.join(ROOT, "target/release/herald")]
    results = {b: ([], []) for b in binaries}
    for _ in range(args.runs):
        for b in binaries:
            results[b][0].append(measure(b, 0, 1))
            results[b][1].append(measure(b, 10, 1))
    for b in binaries:
        plain, tools = results[b]
        w0 = statistics.median(w for w, _ in plain)
        c0 = statistics.median(c for _, c in plain)
        w10 = statistics.median(w for w, _ in tools)
        c10 = statistics.median(c for _, c in tools)
        print(f"{b}")
        print(f"  plain answer: median wall {w0:.1f} ms (CPU {c0:.1f} ms)")
        print(f"  per extra tool round trip (terminal running `true`): wall {(w10 - w0) / 10:.2f} ms, CPU {(c10 - c0) / 10:.2f} ms")


if __name__ == "__main__":
    main()
