#!/usr/bin/env python3
"""A reconnect storm (#42, criterion 2): every socket dropped at once, and back with the stock
clients' default backoff.

For each server (Relay, and Node's socket.io 4.8.1 beside it when --node-modules is given): a
fresh server, `relay-load chat --backoff socketio --churn 0` (10 000 sockets of 5 000 users, 20
rooms in each CONNECT, one message per user per --interval s, receipts on), and --storm-after s
into the measured window the server is restarted under them: `--mode restart` sends SIGTERM
(a deploy), `--mode kill` SIGKILL (a crash); the same server starts again at once on the same
port (Relay on the same database). Every socket then comes back the way socket.io-client does
on default options (try k waits 1 s × 2^k ±50 %, at most 5 s; the first try waits too).

Prints one line per run: sockets dropped and back, how many within 10 s of their drop, the time
back (p50/p99/max), the first drop to the last socket back, every try (how many, p99/max, how
many took over 5 s, why they failed), the message latency over the window, and how long the
server was away (its exit to listening again). The JSON of each run goes to --out.

Loopback only; every run bounded by relay-load's own duration and a timeout; only the servers
this script started are stopped, by pid.

    python3 LoadTests/storm/storm.py --relay .build-release/release/relay \
        --relay-load .build-release/release/relay-load --node-modules /work/peers/socketio-node/node_modules
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

SECRET = "storm-bench-jwt-secret-0123456789abcdef-0123"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Server:
    def __init__(self, kind, args, work):
        self.kind, self.args, self.work = kind, args, work
        self.proc = None
        self.starts = 0

    def start(self):
        self.starts += 1
        env = dict(os.environ)
        if self.kind == "relay":
            cmd = [self.args.relay, "--port", str(self.args.port), "--db", os.path.join(self.work, "r.sqlite"),
                   "--jwt-secret", SECRET, "--api-key", "bench-api-key-0123456789", "--admin-key",
                   "bench-admin-key-0123456789", "--log-level", "notice", "--max-connections-per-ip", "1000000",
                   "--max-connections-per-user", "1000000"] + self.args.relay_flag
            ready = "relay listening"
        else:
            cmd = ["node", os.path.join(ROOT, "LoadTests/peers/chat-socketio-node-server.js"), str(self.args.port)]
            env.update(RELAY_JWT_SECRET=SECRET, NODE_PATH=self.args.node_modules)
            ready = "listening"
        log_path = os.path.join(self.work, f"{self.kind}-{self.starts}.log")
        log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(log_path) as f:
                if ready in f.read():
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop(signal.SIGKILL)
        sys.exit(f"{self.kind} did not start: see {log_path}")

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def cpu_seconds(pid):
    """utime + stime of `pid`, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(kind, args):
    work = tempfile.mkdtemp(prefix=f"storm-{kind}-")
    phase = os.path.join(work, "phase")
    server = Server(kind, args, work)
    server.start()
    out = os.path.join(args.out, f"storm-{args.mode}-{kind}.json")
    cmd = [args.relay_load, "chat", "--port", str(args.port), "--secret", SECRET, "--source-addresses", "16",
           "--users", str(args.users), "--message-interval", str(args.interval), "--churn", "0", "--backoff", "socketio",
           "--warmup", "5", "--duration", str(args.duration), "--drain", "1", "--phase-file", phase, "--json"]
    away = {}

    def storm():
        while True:
            try:
                with open(phase) as f:
                    if "measuring" in f.read():
                        break
            except OSError:
                pass
            if load.poll() is not None:
                return
            time.sleep(0.05)
        time.sleep(args.storm_after)
        t0 = time.monotonic()
        server.stop(signal.SIGTERM if args.mode == "restart" else signal.SIGKILL)
        t1 = time.monotonic()
        server.start()
        away.update(exit_s=t1 - t0, away_s=time.monotonic() - t0, cpu_start=cpu_seconds(server.proc.pid))
        # The storm's CPU: the new server's, and the generator's, over the 10 s after it is back.
        time.sleep(10)
        away.update(cpu_10s=cpu_seconds(server.proc.pid) - away["cpu_start"])

    with open(out, "w") as f:
        load = subprocess.Popen(cmd, stdout=f, stderr=subprocess.DEVNULL)
        trigger = threading.Thread(target=storm)
        trigger.start()
        try:
            load.wait(timeout=900)
        except subprocess.TimeoutExpired:
            load.kill()
            load.wait()
        trigger.join()
    server.stop()
    try:
        with open(out) as f:
            r = json.load(f)
    except (OSError, ValueError):
        print(f"{kind:5} {args.mode}: relay-load gave no report (see {out})")
        return
    v = lambda k: (r.get(k) or {}).get("value") if isinstance(r.get(k), dict) else r.get(k)
    failures = ", ".join(f"{k[len('storm_attempt_failure['):-1]} {v(k)}" for k in sorted(r) if k.startswith("storm_attempt_failure["))
    print(f"{kind:5} {args.mode} | dropped {v('storm_dropped')} back {v('storm_back')} (within 10 s {v('storm_back_within_10s')}) | "
          f"back p50/p99/max {v('storm_back_p50_ms')}/{v('storm_back_p99_ms')}/{v('storm_back_max_ms')} ms | "
          f"first drop to last back {v('storm_first_drop_to_last_back_s')} s | tries {v('storm_attempts')} "
          f"(p50/p99/max {v('storm_attempt_p50_ms')}/{v('storm_attempt_p99_ms')}/{v('storm_attempt_max_ms')} ms, over 5 s {v('storm_attempts_over_5s')}) | "
          f"failed tries: {failures or 'none'} | message p50/p99 {v('latency_p50_ms')}/{v('latency_p99_ms')} ms | "
          f"server exit {away.get('exit_s', 0):.2f} s, away {away.get('away_s', 0):.2f} s | "
          f"server CPU in the 10 s after it was back {away.get('cpu_10s', 0):.2f} s", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--relay", required=True)
    p.add_argument("--relay-load", required=True)
    p.add_argument("--node-modules", help="node_modules of the socket.io 4.8.1 build: also run Node")
    p.add_argument("--mode", choices=["restart", "kill"], default="restart")
    p.add_argument("--users", type=int, default=5000, help="users (2 sockets each)")
    p.add_argument("--interval", type=float, default=60)
    p.add_argument("--duration", type=int, default=30)
    p.add_argument("--storm-after", type=float, default=3)
    p.add_argument("--port", type=int, default=19481)
    p.add_argument("--out", default="/tmp/storm")
    p.add_argument("--relay-flag", action="append", default=[])
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    servers = ["relay"] + (["node"] if args.node_modules else [])
    if args.node_modules:
        args.node_modules = os.path.abspath(args.node_modules)
    for kind in servers:
        run(kind, args)


if __name__ == "__main__":
    main()
