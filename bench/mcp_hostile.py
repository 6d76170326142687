#!/usr/bin/env python3
"""A hostile MCP server against a running herald gateway: herald's memory and CPU.

Starts `herald gateway run` on a fresh home whose one MCP server is
crates/herald-cli/tests/clients/hostile_mcp.py, in one of its modes:

  pages   tools/list pages of 5000 tools of about 2.7 KB (13.5 MB a page) with a next
          cursor for ever, and notifications/tools/list_changed every 2 s
  flood   notifications as fast as herald reads them

and samples herald's /proc/<pid>/status (VmRSS, VmHWM) and /proc/<pid>/stat (utime +
stime) every 0.5 s for --seconds. Prints the peak RSS, the high-water mark, the CPU
seconds used (and the share of one core), how many tools/list requests the server got
and when, and herald's log lines about the server.

Usage: PATH=$PWD/target/test-venv/bin:$PATH python3 bench/mcp_hostile.py pages
       [--seconds 93] [--herald-bin target/debug/herald]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load import rss_kb  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.path.join(ROOT, "crates", "herald-cli", "tests", "clients", "hostile_mcp.py")

CONFIG = """platforms:
  webhook:
    enabled: true
    extra:
      host: 127.0.0.1
      port: 0
      secret: bench-secret
      routes:
        r: {{}}
model:
  default: fake
  base_url: http://127.0.0.1:9/v1
mcp_servers:
  hostile:
    command: {python}
    args: [{server}, {mode}]
    env: {{MCP_TEST_LIST_LOG: {lists}}}
"""


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["pages", "flood"])
    p.add_argument("--seconds", type=float, default=93)
    p.add_argument("--herald-bin", default=os.path.join(ROOT, "target", "debug", "herald"))
    args = p.parse_args()
    home = tempfile.mkdtemp(prefix="herald-mcp-hostile-")
    lists = os.path.join(home, "lists.log")
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write(CONFIG.format(python=sys.executable, server=SERVER, mode=args.mode, lists=lists))
    log = open(os.path.join(home, "herald.log"), "w")
    env = dict(os.environ, HERALD_HOME=home)
    env.pop("RUST_LOG", None)
    herald = subprocess.Popen([args.herald_bin, "gateway", "run"], env=env,
                              stdout=subprocess.DEVNULL, stderr=log)
    start = time.time()
    peak_rss = hwm = 0
    samples = []
    try:
        while time.time() - start < args.seconds:
            if herald.poll() is not None:
                print(f"herald exited with {herald.returncode}")
                break
            rss = rss_kb(herald.pid, "VmRSS")
            peak_rss = max(peak_rss, rss)
            hwm = max(hwm, rss_kb(herald.pid, "VmHWM"))
            samples.append((time.time() - start, cpu_seconds(herald.pid), rss))
            time.sleep(0.5)
        end_rss = rss_kb(herald.pid, "VmRSS")
        cpu = cpu_seconds(herald.pid)
        elapsed = time.time() - start
    finally:
        stopping = time.time()
        herald.terminate()
        try:
            herald.wait(timeout=30)
            stopped = f"herald stopped {time.time() - stopping:.1f} s after SIGTERM"
        except subprocess.TimeoutExpired:
            herald.kill()
            herald.wait()
            stopped = "herald did not stop within 30 s of SIGTERM: killed"
    print(f"herald {args.herald_bin}, mode {args.mode}, {elapsed:.0f} s:")
    print(f"  peak VmRSS {peak_rss / 1024:.1f} MB, VmHWM {hwm / 1024:.1f} MB, "
          f"VmRSS at the end {end_rss / 1024:.1f} MB")
    print(f"  CPU {cpu:.1f} s in {elapsed:.0f} s ({cpu / elapsed:.2f} of a core)")
    print(f"  {stopped}")
    # The busiest 10 s window.
    busiest = 0.0
    for i, (t0, c0, _) in enumerate(samples):
        for t1, c1, _ in samples[i:]:
            if t1 - t0 >= 10:
                busiest = max(busiest, (c1 - c0) / (t1 - t0))
                break
    print(f"  busiest 10 s: {busiest:.2f} of a core")
    try:
        with open(lists) as f:
            times = [float(line.split()[0]) for line in f if line.strip()]
    except OSError:
        times = []
    at = [t - start for t in times]
    print(f"  tools/list requests: {len(times)}"
          + (f", at {', '.join(f'{t:.1f}' for t in at[:12])} s" if times else ""))
    with open(os.path.join(home, "herald.log")) as f:
        lines = [l.rstrip() for l in f if "hostile" in l or "MCP" in l]
    print(f"  herald log lines about MCP: {len(lines)}")
    for l in lines[:8]:
        print("    " + l[:300])


if __name__ == "__main__":
    main()
