#!/usr/bin/env python3
"""Relay and Node's socket.io 4.8.1 in the chat shape, side by side (#42, criteria 1, 4 and 5).

For each round, each server in turn: a fresh server, one `relay-load chat` run against it, the
server stopped; one line per run and every run's JSON in --out. The two are given the same
semantics (--semantics):

- today:    receipts forwarded to the whole room, no presence grace
            (Relay --presence-grace-ms 0; Node as it always was);
- chat-app: receipts to the author's and the reader's devices, presence grace 5 000 ms
            (Relay --receipt-audience delivered=devices,read=devices, its default grace;
            Node RECEIPT_AUDIENCE=devices PRESENCE_GRACE_MS=5000).

--shape chat is the chat load (one message per user per --interval s, typing, receipts, 1 %/s
churn); --shape reconnects is reconnects alone (no messages, typing or receipts, 5 %/s churn),
followed by an idle run of the same server (--churn 0) whose CPU is taken off, as in
docs/BENCHMARKS.md.

Relay runs on its default limits (only the connection and user limits lifted, as the generator
opens 10 000 sockets from 16 loopback addresses). Loopback only; each run bounded by relay-load's
own duration and a timeout; only the servers this script started are stopped, by pid.

    LoadTests/chat/side_by_side.py --relay .build-release/release/relay \
        --relay-load .build-release/release/relay-load --node-modules /work/peers/socketio-node/node_modules \
        --shape chat --interval 60 --semantics chat-app --rounds 1
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SECRET = "side-by-side-jwt-secret-0123456789abcdef-01"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start(server, args, semantics, port, work):
    env = dict(os.environ)
    if server == "relay":
        cmd = [args.relay, "--port", str(port), "--db", os.path.join(work, "r.sqlite"), "--jwt-secret", SECRET,
               "--api-key", "bench-api-key-0123456789", "--admin-key", "bench-admin-key-0123456789",
               "--log-level", "notice", "--max-connections-per-ip", "1000000", "--max-connections-per-user", "1000000"]
        if semantics == "today":
            cmd += ["--presence-grace-ms", "0"]
        else:
            cmd += ["--receipt-audience", "delivered=devices,read=devices"]
        cmd += args.relay_flag
        ready = "relay listening"
    else:
        cmd = ["node", os.path.join(ROOT, "LoadTests/peers/chat-socketio-node-server.js"), str(port)]
        env.update(RELAY_JWT_SECRET=SECRET, NODE_PATH=args.node_modules)
        if semantics == "chat-app":
            env.update(RECEIPT_AUDIENCE="devices", PRESENCE_GRACE_MS="5000")
        ready = "listening"
    log = open(os.path.join(work, f"{server}.log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with open(os.path.join(work, f"{server}.log")) as f:
            if ready in f.read():
                return proc
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    sys.exit(f"{server} did not start: see {work}/{server}.log")


def load(args, port, pid, extra, out):
    cmd = [args.relay_load, "chat", "--port", str(port), "--secret", SECRET, "--relay-pid", str(pid),
           "--source-addresses", "16", "--users", str(args.users), "--duration", str(args.duration), "--json"] + extra
    with open(out, "w") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.DEVNULL, timeout=900, check=False)
    try:
        with open(out) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def run_once(server, args, work, extra, out):
    """A fresh server, one relay-load run against it, the server stopped (by pid)."""
    proc = start(server, args, args.semantics, args.port, work)
    try:
        return load(args, args.port, proc.pid, extra, out)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def value(report, key):
    v = report.get(key)
    return v.get("value") if isinstance(v, dict) else v


def shape_flags(args):
    if args.shape == "reconnects":
        return ["--message-interval", "100000", "--typing-ms", "0", "--delivered-delay-ms", "0",
                "--read-delay-ms", "0", "--churn", "0.05"]
    return ["--message-interval", str(args.interval)]


def line(server, semantics, r, idle=None):
    v = lambda k: value(r, k)
    if v("relay_cpu_cores") is None:
        return f"{server:5} {semantics:8} run failed"
    cores = v("relay_cpu_cores")
    common = (f"{server:5} {semantics:8} | cores {cores:.3f} | RSS {v('relay_rss_mb') or 0:.0f} MB | "
              f"reconnects {v('reconnects_done')} (p50/p99 {v('reconnect_p50_ms')}/{v('reconnect_p99_ms')} ms, "
              f"failures {v('reconnect_failures')}) | error rate {v('error_rate')}")
    if idle is not None:
        done = max(1, v("reconnects_done") or 0)
        rate = v("reconnects_per_second") or 0
        per = (cores - idle) / max(1e-9, rate) * 1000
        return f"{common} | idle {idle:.3f} cores | CPU per reconnect {per:.3f} ms | presence/reconnect {(v('deliveries.presence') or 0) / done:.1f}"
    m = max(1, v("messages_sent") or 0)
    return (f"{common} | messages {m} | deliveries/msg {(v('deliveries') or 0) / m:.1f} "
            f"(receipt {(v('deliveries.receipt') or 0) / m:.1f}) | CPU/msg {v('relay_cpu_us_per_message') or 0:.0f} µs | "
            f"µs/delivery {v('relay_cpu_us_per_delivery')} | msg p50/p99 {v('latency_p50_ms')}/{v('latency_p99_ms')} ms | "
            f"receipt ack p50/p99 {v('receipt_ack_p50_ms')}/{v('receipt_ack_p99_ms')} ms")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--relay", required=True)
    p.add_argument("--relay-load", required=True)
    p.add_argument("--node-modules", required=True, help="node_modules of the socket.io 4.8.1 build (absolute)")
    p.add_argument("--shape", choices=["chat", "reconnects"], default="chat")
    p.add_argument("--interval", type=float, default=60, help="seconds between a user's messages (chat shape)")
    p.add_argument("--duration", type=int, default=20)
    p.add_argument("--users", type=int, default=5000, help="users (2 sockets each)")
    p.add_argument("--semantics", choices=["today", "chat-app"], default="chat-app")
    p.add_argument("--servers", default="relay,node")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--port", type=int, default=19461)
    p.add_argument("--out", default="/tmp/side-by-side")
    p.add_argument("--relay-flag", action="append", default=[], help="one more relay argument (repeatable)")
    args = p.parse_args()
    args.node_modules = os.path.abspath(args.node_modules)
    os.makedirs(args.out, exist_ok=True)
    for rnd in range(1, args.rounds + 1):
        for server in args.servers.split(","):
            work = tempfile.mkdtemp(prefix=f"sbs-{server}-")
            tag = f"{args.shape}-{args.semantics}-{args.interval:g}-{server}-{rnd}"
            report = run_once(server, args, work, shape_flags(args), os.path.join(args.out, tag + ".json"))
            idle = None
            if args.shape == "reconnects":
                idle_report = run_once(server, args, work, shape_flags(args)[:-2] + ["--churn", "0"],
                                       os.path.join(args.out, tag + "-idle.json"))
                idle = value(idle_report, "relay_cpu_cores") or 0.0
            print(f"round {rnd} {args.shape} interval {args.interval:g} | " + line(server, args.semantics, report, idle), flush=True)
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
