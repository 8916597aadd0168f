#!/usr/bin/env python3
"""Presence grace at churn: what `--presence-grace-ms` saves (#42, criterion 3).

For each grace (default 0, then 5000) a fresh relay (release build) runs `relay-load chat` with
churn (sockets cut without a close frame, back `--offline-ms` later), webhooks on to a local
receiver. Printed per run, for relay-load's measured window: reconnects, presence deliveries (per
reconnect), the webhook presence events the receiver got (user:online/offline,
room:occupied/vacated; those of an event queued late in the window may arrive after it), the
relay's CPU.

    python3 LoadTests/presence/grace_churn.py --relay .build-release/release/relay \\
        --relay-load .build-release/release/relay-load --devices 1 --churn 0.01 --duration 20

Everything on 127.0.0.1; each run is bounded by relay-load's own duration (plus setup) and a
timeout; only the processes this script started are stopped.
"""

from __future__ import annotations

import argparse
import collections
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

SECRET = "grace-bench-jwt-secret-0123456789abcdef-0123"
HOOK_SECRET = "grace-bench-webhook-secret-0123456789abcdef"
# The benchmark flags (scripts/bench-relay-flags.sh): no limit in the way of the load.
BENCH_FLAGS = ["--api-key", "bench-api-key-0123456789", "--admin-key", "bench-admin-key-0123456789", "--log-level", "notice",
               "--events-per-second", "1000000", "--event-burst", "1000000", "--packets-per-second", "1000000",
               "--inbound-bytes-per-second", "1000000000", "--event-bytes-per-second", "1000000000", "--rate", "custom=1000000:1000000",
               "--max-connections-per-ip", "1000000", "--max-connections-per-user", "1000000"]


class Hooks(http.server.BaseHTTPRequestHandler):
    counts: collections.Counter = collections.Counter()
    lock = threading.Lock()

    def do_POST(self):  # noqa: N802 - the stdlib's name
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            events = json.loads(body).get("events", [])
        except ValueError:
            events = []
        with Hooks.lock:
            for e in events:
                Hooks.counts[e.get("type", "?")] += 1
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def run(args, grace: int, hook_port: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        relay = subprocess.Popen(
            [args.relay, "--port", "0", "--jwt-secret", SECRET, "--db", os.path.join(tmp, "r.sqlite"), *BENCH_FLAGS,
             "--presence-grace-ms", str(grace), "--webhook-url", f"http://127.0.0.1:{hook_port}/hook", "--webhook-secret", HOOK_SECRET,
             "--webhook-flush-ms", "100"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            port = None
            deadline = time.monotonic() + 30
            while port is None and time.monotonic() < deadline:
                line = relay.stdout.readline()
                if "relay listening on" in line:
                    port = int(line.rsplit(":", 1)[1])
            assert port, "the relay did not start"
            threading.Thread(target=lambda: [None for _ in relay.stdout], daemon=True).start()
            with Hooks.lock:
                Hooks.counts.clear()
            # The webhooks of the measured window only: counted at its start and end.
            phase_file = os.path.join(tmp, "phase")
            marks: dict[str, collections.Counter] = {}

            def watch():
                while "done" not in marks:
                    try:
                        phase = open(phase_file).read().strip()
                    except OSError:
                        phase = ""
                    if phase and phase not in marks:
                        with Hooks.lock:
                            marks[phase] = collections.Counter(Hooks.counts)
                    time.sleep(0.02)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            load = subprocess.run(
                [args.relay_load, "chat", "--port", str(port), "--secret", SECRET, "--relay-pid", str(relay.pid), "--source-addresses", "16",
                 "--phase-file", phase_file,
                 "--users", str(args.users), "--devices", str(args.devices), "--message-interval", str(args.message_interval),
                 "--churn", str(args.churn), "--offline-ms", str(args.offline_ms), "--duration", str(args.duration), "--json"],
                capture_output=True, text=True, timeout=args.duration + 600)
            if load.returncode != 0:
                sys.exit(f"relay-load failed ({load.returncode}): {load.stderr[-2000:]}")
            report = json.loads(load.stdout)
            watcher.join(5)
            start, end = marks.get("measuring", collections.Counter()), marks.get("done", collections.Counter())
            return {"report": report, "hooks": dict(end - start)}
        finally:
            relay.terminate()
            try:
                relay.wait(10)
            except subprocess.TimeoutExpired:
                relay.kill()


def value(report: dict, key: str):
    v = report.get(key)
    return v.get("value") if isinstance(v, dict) else v


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--relay", required=True)
    p.add_argument("--relay-load", required=True)
    p.add_argument("--grace", default="0,5000", help="comma-separated grace values, ms")
    p.add_argument("--users", type=int, default=5000)
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--message-interval", type=float, default=60)
    p.add_argument("--churn", type=float, default=0.01)
    p.add_argument("--offline-ms", type=float, default=1000)
    p.add_argument("--duration", type=float, default=20)
    args = p.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hooks)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        print(f"{'grace ms':>8} {'reconnects':>10} {'presence deliveries':>19} {'per reconnect':>13} {'hooks on/off':>12} "
              f"{'occupied/vacated':>16} {'relay cores':>11} {'µs/message':>10}", flush=True)
        for grace in [int(g) for g in args.grace.split(",")]:
            r = run(args, grace, server.server_address[1])
            rep, hooks = r["report"], r["hooks"]
            reconnects = value(rep, "reconnects_done") or 0
            presence = value(rep, "deliveries.presence") or 0
            print(f"{grace:8d} {reconnects:10d} {presence:19d} {presence / max(1, reconnects):13.2f} "
                  f"{hooks.get('user:online', 0):5d}/{hooks.get('user:offline', 0):<6d} "
                  f"{hooks.get('room:occupied', 0):7d}/{hooks.get('room:vacated', 0):<8d} "
                  f"{value(rep, 'relay_cpu_cores') or 0:11.3f} {value(rep, 'relay_cpu_us_per_message') or 0:10.0f}", flush=True)
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
