#!/usr/bin/env python3
"""Cross-node fan-out through one Redis and through a Redis Cluster of 3 masters (issue #31,
criterion 5): 4 relay nodes on this machine, the same `relay-load fanout --nodes` load against
each topology in turn, several rounds. Reports deliveries per second (all of them cross a node
boundary for 3 in 4 members: sockets are spread round-robin over the nodes), the relays' CPU,
and each Redis process's CPU over the measured window only (from /proc/PID/stat, between the
generator's `measuring` and `done` phases).

    python3 LoadTests/cluster/redis_scale.py --relay .build-release/release/relay \
        --relay-load .build-release/release/relay-load --rounds 2 --out /tmp/redis-scale

Everything listens on 127.0.0.1; every process started here is stopped by pid at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SECRET = "redis-scale-secret-0123456789abcdef0123456789"
TICKS = os.sysconf("SC_CLK_TCK")


def free_port(limit: int = 65535) -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port <= limit:
            return port


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def wait_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


class Procs:
    def __init__(self):
        self.procs: list[subprocess.Popen] = []

    def start(self, args, log: Path, cwd: Path) -> subprocess.Popen:
        p = subprocess.Popen([str(a) for a in args], cwd=cwd, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        return p

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self.procs.clear()


def commandstats(url: str) -> dict[str, dict]:
    """`INFO commandstats` of every Redis behind `url`, summed: command → calls, µs."""
    total: dict[str, dict] = {}
    for hostport in url[len("redis://"):].split(","):
        port = hostport.rsplit(":", 1)[1]
        out = subprocess.run(["redis-cli", "-p", port, "INFO", "commandstats"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if not line.startswith("cmdstat_"):
                continue
            name, _, rest = line[len("cmdstat_"):].partition(":")
            fields = dict(kv.split("=") for kv in rest.split(","))
            t = total.setdefault(name, {"calls": 0, "usec": 0})
            t["calls"] += int(fields["calls"])
            t["usec"] += int(fields["usec"])
    return dict(sorted(total.items(), key=lambda kv: -kv[1]["usec"]))


def start_redis(kind: str, procs: Procs, work: Path) -> tuple[str, list[int]]:
    """Returns (--redis URL, redis pids)."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    if kind == "single":
        port = free_port()
        d = work / f"redis-{port}"
        d.mkdir()
        p = procs.start([binary, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", d], d / "log", d)
        wait_port(port)
        return f"redis://127.0.0.1:{port}", [p.pid]
    masters = int(kind.split("-")[1])
    ports, pids = [], []
    for _ in range(masters):
        port = free_port(55535)
        d = work / f"redis-{port}"
        d.mkdir()
        p = procs.start([binary, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", d,
                         "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"], d / "log", d)
        ports.append(port)
        pids.append(p.pid)
    for port in ports:
        wait_port(port)
    create = subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports],
                             "--cluster-replicas", "0", "--cluster-yes"], capture_output=True, text=True, timeout=60)
    assert create.returncode == 0, create.stdout + create.stderr
    deadline = time.time() + 30
    while time.time() < deadline:
        if all("cluster_state:ok" in subprocess.run(["redis-cli", "-p", str(p), "CLUSTER", "INFO"], capture_output=True,
                                                    text=True).stdout for p in ports):
            break
        time.sleep(0.1)
    else:
        raise RuntimeError("cluster not ok")
    return "redis://" + ",".join(f"127.0.0.1:{p}" for p in ports), pids


def start_relays(args, url: str, procs: Procs, work: Path) -> list[tuple[int, int]]:
    nodes = []
    for i in range(args.relays):
        port = free_port()
        d = work / f"relay-{i}"
        d.mkdir()
        p = procs.start([args.relay, "--host", "127.0.0.1", "--port", port, "--redis", url, "--node-id", f"scale-{i}",
                         "--jwt-secret", SECRET, "--api-key", "scale-api-key-0123456789abcdef", "--admin-key", "scale-admin-key-0123456789abcdef",
                         "--db", d / "r.sqlite", "--log-level", "warning",
                         "--events-per-second", 1000000, "--event-burst", 1000000, "--packets-per-second", 1000000,
                         "--inbound-bytes-per-second", 1000000000, "--event-bytes-per-second", 1000000000,
                         "--max-connections-per-ip", 1000000, "--max-connections-per-user", 1000000], d / "log", d)
        nodes.append((port, p.pid))
    for port, _ in nodes:
        wait_port(port)
    # Ready means linked to Redis.
    deadline = time.time() + 30
    import urllib.request
    for port, _ in nodes:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("relay not healthy")
            time.sleep(0.1)
    return nodes


def run_once(args, kind: str, round_: int, out: Path) -> dict:
    procs = Procs()
    work = Path(tempfile.mkdtemp(prefix=f"scale-{kind}-"))
    try:
        url, redis_pids = start_redis(kind, procs, work)
        nodes = start_relays(args, url, procs, work)
        time.sleep(1.0)  # the nodes' first heartbeats and subscriptions (setup, not measured)
        # Redis's idle cost with the nodes linked (heartbeats, receipt polling, its own cron),
        # taken off the loaded window's so what is left is the traffic's.
        idle_a = ({pid: cpu_seconds(pid) for pid in redis_pids}, time.time())
        time.sleep(args.idle)
        idle_b = ({pid: cpu_seconds(pid) for pid in redis_pids}, time.time())
        idle_cores = sum(idle_b[0][p] - idle_a[0][p] for p in redis_pids) / (idle_b[1] - idle_a[1])
        phase = work / "phase"
        cmd = [args.relay_load, "fanout", "--nodes", ",".join(f"127.0.0.1:{p}" for p, _ in nodes), "--secret", SECRET,
               "--rooms", args.rooms, "--members", args.members, "--senders", args.senders, "--rate", args.rate,
               "--duration", args.duration, "--phase-file", phase, "--json", "--max-error-rate", 1]
        pids = redis_pids + [pid for _, pid in nodes]
        setup_start = {pid: cpu_seconds(pid) for pid in redis_pids}
        gen = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        before = after = None
        setup_stats: dict = {}
        deadline = time.time() + args.duration + 600
        while gen.poll() is None and time.time() < deadline:
            state = phase.read_text().strip() if phase.exists() else ""
            if state == "measuring" and before is None:
                before = ({pid: cpu_seconds(pid) for pid in pids}, time.time())
                setup_stats = commandstats(url)
            if state == "done" and after is None and before is not None:
                after = ({pid: cpu_seconds(pid) for pid in pids}, time.time())
            time.sleep(0.02)
        stdout, stderr = gen.communicate(timeout=60)
        report = json.loads(stdout) if stdout.strip().startswith("{") else {"error": stderr[-2000:]}
        result = {"kind": kind, "round": round_, "report": report}
        if before and after:
            window = after[1] - before[1]
            sockets = report.get("sockets", 0) or 0
            # Setup: every socket connects (directory, user channel) and joins its room (presence
            # scripts, the room channel, presence events): Redis CPU per socket.
            setup_us = sum(before[0][p] - setup_start[p] for p in redis_pids) * 1e6 / max(1, sockets)
            result["redis_setup_cpu_us_per_socket"] = round(setup_us, 1)
            redis_cpu = [after[0][p] - before[0][p] for p in redis_pids]
            relay_cpu = [after[0][pid] - before[0][pid] for _, pid in nodes]
            deliveries = report.get("deliveries", 0) or 0
            result.update({
                "window_s": round(window, 2),
                "redis_cores": [round(c / window, 3) for c in redis_cpu],
                "redis_cpu_us_per_delivery": round(sum(redis_cpu) * 1e6 / max(1, deliveries), 3),
                "redis_idle_cores": round(idle_cores, 4),
                "redis_cpu_us_per_message": round(max(0.0, sum(redis_cpu) - idle_cores * window) * 1e6 / max(1, report.get("sent", 0) or 0), 2),
                "relay_cores": round(sum(relay_cpu) / window, 3),
                "deliveries_per_second": report.get("deliveries_per_second"),
                "sent_per_second": report.get("sent_per_second"),
                "p99_ms": report.get("latency_p99_ms"),
                "missing": max(0, (report.get("expected_deliveries_min") or 0) - deliveries),
            })
        end_stats = commandstats(url)
        if before:
            # What setting up the sockets sent (connects, joins) and what the measured window did.
            result["setup_commands_per_socket"] = {k: round(v["calls"] / max(1, report.get("sockets", 0) or 0), 2)
                                                   for k, v in setup_stats.items() if v["calls"]}
            result["window_commands_per_message"] = {
                k: round((v["calls"] - setup_stats.get(k, {"calls": 0})["calls"]) / max(1, report.get("sent", 0) or 0), 3)
                for k, v in end_stats.items() if v["calls"] - setup_stats.get(k, {"calls": 0})["calls"] > 0}
            result["window_usec_per_message_by_command"] = {
                k: round((v["usec"] - setup_stats.get(k, {"usec": 0})["usec"]) / max(1, report.get("sent", 0) or 0), 2)
                for k, v in end_stats.items() if v["usec"] - setup_stats.get(k, {"usec": 0})["usec"] > 0}
        (out / f"{kind}-{round_}-{args.rate:.0f}.json").write_text(json.dumps(result, indent=2))
        return result
    finally:
        procs.stop_all()
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--relay", required=True)
    ap.add_argument("--relay-load", required=True)
    ap.add_argument("--kinds", default="single,cluster-3")
    ap.add_argument("--relays", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rooms", type=int, default=200)
    ap.add_argument("--members", type=int, default=8)
    ap.add_argument("--senders", type=int, default=200)
    ap.add_argument("--rate", type=float, default=4000)
    ap.add_argument("--rates", default="", help="several rates, comma-separated (each run at each rate)")
    ap.add_argument("--duration", type=float, default=8)
    ap.add_argument("--idle", type=float, default=4, help="seconds of idle Redis CPU measured before each run")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    rates = [float(x) for x in args.rates.split(",")] if args.rates else [args.rate]
    for r in range(args.rounds):
        for rate in rates:
            for kind in args.kinds.split(","):
                args.rate = rate
                res = run_once(args, kind, r, out)
                res["rate"] = rate
                rows.append(res)
            print(json.dumps({k: v for k, v in res.items() if k != "report"}), flush=True)
    print("\n| topology | round | sent/s | deliveries/s | missing | p99 ms | Redis cores (each process) | Redis CPU µs/message (idle taken off) | Redis CPU µs/socket set up | relay cores (4 nodes) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    for res in rows:
        if "window_s" not in res:
            print(f"| {res['kind']} | {res['round']} | failed: {str(res['report'])[:80]} |")
            continue
        print(f"| {res['kind']} | {res['round']} | {res['sent_per_second']:.0f} | {res['deliveries_per_second']:.0f} | {res['missing']} | {res['p99_ms']} | "
              f"{', '.join(f'{c:.3f}' for c in res['redis_cores'])} | {res['redis_cpu_us_per_message']:.1f} | "
              f"{res['redis_setup_cpu_us_per_socket']:.0f} | {res['relay_cores']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
