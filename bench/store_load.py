#!/usr/bin/env python3
"""Durable accepts on each store backend, side by side in one run.

Starts a throwaway PostgreSQL cluster (Debian's `postgresql`: initdb into a temporary
folder, pg_ctl on a free port; as the `postgres` user when run as root) and release
heralds on fresh homes, then drives the `accepted` mix of bench/load.py (a ~2 KB GitHub
pull_request payload with unique delivery ids, answered 202 once durable) with wrk
against, in rotating order each round:

  sqlite     one herald on its home's SQLite inbox
  pg-1       one herald on the PostgreSQL store
  pg-2       two heralds on the same PostgreSQL store, each driven by its own wrk
             with half the connections, at the same time

For each it prints accepted events/s (all instances together), herald's CPU µs per
accepted event (all instances), PostgreSQL's own CPU µs per accepted event (every
process of the cluster), and PostgreSQL commits per accepted event (from
pg_stat_database: the group commit's goal is one commit per batch, far below one per
event). No model is configured, so accepted events wait in the inbox: the figures are
the ingress and its durable enqueue alone.

On a 2-core machine every process shares the same cores: the figures are per-event
costs, not a scaling claim (docs/scale-out.md says what they imply).

Usage: python3 bench/store_load.py [--duration 10] [--rounds 3] [--connections 32]
       [--threads 2] [--no-build]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load  # noqa: E402

USER = "herald"


class Cluster:
    """A throwaway PostgreSQL cluster, stopped and removed by `stop`."""

    def __init__(self):
        versions = sorted(
            (int(v), v) for v in os.listdir("/usr/lib/postgresql") if v.isdigit()
        ) if os.path.isdir("/usr/lib/postgresql") else []
        if not versions:
            raise SystemExit("PostgreSQL is not installed (apt-get install postgresql)")
        self.bin = f"/usr/lib/postgresql/{versions[-1][1]}/bin"
        self.root = os.geteuid() == 0
        self.dir = tempfile.mkdtemp(prefix="herald-bench-pg-")
        os.chmod(self.dir, 0o755)
        if self.root:
            subprocess.run(["chown", "-R", "postgres:postgres", self.dir], check=True)
        self.port = load.free_port()
        data = os.path.join(self.dir, "data")
        self.run("initdb", "-D", data, "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync")
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=200"
        self.run("pg_ctl", "-D", data, "-l", os.path.join(self.dir, "log"), "-o", opts, "-w", "start")
        self.data = data

    def run(self, tool, *args):
        cmd = [os.path.join(self.bin, tool), *args]
        if self.root:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout

    def psql(self, db, sql):
        return self.run("psql", "-h", self.dir, "-p", str(self.port), "-U", USER, "-d", db, "-At", "-c", sql).strip()

    def url(self, db):
        return f"postgres://{USER}@127.0.0.1:{self.port}/{db}"

    def commits(self, db):
        return int(self.psql(db, f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{db}'"))

    def cpu_seconds(self):
        """CPU of every process of the cluster: the postmaster, its children (the
        backends, walwriter, checkpointer...) and the children that ended already."""
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            master = int(f.readline())
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid, ppid = int(entry), int(fields[1])
            if pid == master or ppid == master:
                total += (int(fields[11]) + int(fields[12])) / ticks
            if pid == master:
                total += (int(fields[13]) + int(fields[14])) / ticks
        return total

    def stop(self):
        try:
            self.run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def start(binary, store_url, bare_port):
    home = tempfile.mkdtemp(prefix="herald-store-load-")
    port = load.free_port()
    env = load.herald_env(home, port, bare_port)
    if store_url:
        with open(os.path.join(home, "config.yaml")) as f:
            config = f.read()
        with open(os.path.join(home, "config.yaml"), "w") as f:
            f.write(f"store:\n  url: {store_url}\n" + config)
    p = load.start_herald(binary, env)
    load.wait_http(port, timeout=30)
    return p, port, home


def drive(instances, body, args, run_id):
    """wrk against every instance at once, the connections split between them."""
    share = argparse.Namespace(**{**vars(args), "connections": max(args.connections // len(instances), 1),
                                  "threads": max(args.threads // len(instances), 1)})
    results = [None] * len(instances)

    def one(i):
        _, port, _ = instances[i]
        results[i] = load.run_wrk(port, "accepted", body, share, f"{run_id}-{i}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(instances))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def measure(name, instances, cluster, db, body, args, run_id):
    cpu0 = sum(load.cpu_seconds(p.pid) for p, _, _ in instances)
    pg0 = cluster.cpu_seconds() if db else 0.0
    commits0 = cluster.commits(db) if db else 0
    results = drive(instances, body, args, run_id)
    cpu = sum(load.cpu_seconds(p.pid) for p, _, _ in instances) - cpu0
    accepted = sum(r["requests"] - r["non2xx"] for r in results)
    out = {
        "name": name,
        "rps": sum(r["rps"] for r in results),
        "non2xx": sum(r["non2xx"] + r["errors"] for r in results),
        "p99_ms": max(r["p99_us"] for r in results) / 1000,
        "cpu_us": cpu * 1e6 / max(accepted, 1),
    }
    if db:
        out["pg_cpu_us"] = (cluster.cpu_seconds() - pg0) * 1e6 / max(accepted, 1)
        out["commits"] = (cluster.commits(db) - commits0) / max(accepted, 1)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--herald-bin")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "herald-cli"], cwd=load.ROOT, check=True)
    binary = args.herald_bin or os.path.join(load.ROOT, "target/release/herald")
    with open(load.FIXTURE) as f:
        body = f.read()
    cluster = Cluster()
    started = []
    try:
        for db in ("one", "two"):
            cluster.psql("postgres", f"CREATE DATABASE {db}")
        bare_port = load.free_port()
        setups = {
            "sqlite": (None, [start(binary, None, bare_port)]),
            "pg-1": ("one", [start(binary, cluster.url("one"), bare_port)]),
            "pg-2": ("two", [start(binary, cluster.url("two"), bare_port) for _ in range(2)]),
        }
        for _, instances in setups.values():
            started.extend(instances)
        time.sleep(0.5)
        rounds = {name: [] for name in setups}
        for r in range(max(args.rounds, 1)):
            names = list(setups)
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                db, instances = setups[name]
                rounds[name].append(measure(name, instances, cluster, db, body, args, f"{int(time.time())}-{r}"))
        print()
        print(f"wrk -t{args.threads} -c{args.connections} -d{args.duration}s (split between instances), accepted mix, "
              f"body {len(body)} bytes, 127.0.0.1, {max(args.rounds, 1)} rounds in rotating order; medians")
        print(f"{'store':<8} {'accepted/s':>11} {'p99 ms':>7} {'herald CPU us/event':>20} {'PG CPU us/event':>16} {'PG commits/event':>17} {'errors':>7}")
        for name, runs in rounds.items():
            med = lambda k: statistics.median(x[k] for x in runs)  # noqa: E731
            pg_cpu = f"{med('pg_cpu_us'):>16.1f}" if "pg_cpu_us" in runs[0] else f"{'-':>16}"
            commits = f"{med('commits'):>17.4f}" if "commits" in runs[0] else f"{'-':>17}"
            print(f"{name:<8} {med('rps'):>11.0f} {med('p99_ms'):>7.2f} {med('cpu_us'):>20.1f} {pg_cpu} {commits} {sum(x['non2xx'] for x in runs):>7}")
        for name, runs in rounds.items():
            print(f"{name} accepted/s per round: " + " ".join(f"{x['rps']:.0f}" for x in runs))
    finally:
        for p, _, home in started:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
            shutil.rmtree(home, ignore_errors=True)
        cluster.stop()


if __name__ == "__main__":
    main()
