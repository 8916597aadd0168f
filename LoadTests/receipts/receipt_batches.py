"""The batch size Relay's receipt writer achieves under a load, and how close it is to the disk.

Runs a load command (normally `relay-load receipts … --json`) against a running relay and reads,
around it, what the relay itself exposes:

- `/metrics`: `relay_receipt_batch_size` (receipts per committed transaction: `_sum`/`_count`
  is the mean batch, the buckets its spread), `relay_receipt_commit_seconds` (one commit:
  inserts + sync; `_count` is the number of commits), `relay_receipts_stored_total`;
- `/proc/<relay-pid>/task/*/schedstat`: CPU time and time spent waiting for a CPU of each of the
  relay's threads (the receipt writer is the busiest thread that is not an event loop);
- with `--perf`: `fdatasync`/`fsync` calls of the relay's threads (`perf stat`, tracepoints
  `syscalls:sys_enter_fdatasync`/`sys_enter_fsync`), i.e. syncs per commit.

Then the disk's limit for durable receipts = syncs per second (`--fsyncs-per-second`, or
`--disk-json` from `disk_limit.py`) × the batch size measured here, against the receipts per
second the load achieved. Bounded by the load command (and `--timeout`). Prints a table, then
one JSON object on the last line.

    python3 LoadTests/receipts/receipt_batches.py --metrics http://127.0.0.1:18090/metrics \\
        --relay-pid $PID --perf --disk-json /tmp/disk.json -- \\
        $BIN/relay-load receipts --port 18090 --secret $S --clients 100 --window 4 --duration 8 --json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("relay_receipt") and not line.startswith("#"):
            m = SAMPLE.match(line)
            if m:
                out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def buckets(before: dict, after: dict, name: str) -> list[tuple[float, float]]:
    """(upper bound, observations in the run at or below it), ascending."""
    out = []
    for key, value in after.items():
        m = re.fullmatch(re.escape(name) + r'_bucket\{le="([^"]+)"\}', key)
        if m:
            le = float("inf") if m.group(1) == "+Inf" else float(m.group(1))
            out.append((le, value - before.get(key, 0.0)))
    return sorted(out)


def bucket_quantile(bs: list[tuple[float, float]], q: float) -> float | None:
    """The upper bound of the bucket that holds quantile q (Prometheus buckets: an upper bound)."""
    if not bs or bs[-1][1] <= 0:
        return None
    target = q * bs[-1][1]
    for le, n in bs:
        if n >= target:
            return le
    return bs[-1][0]


def threads(pid: int) -> dict[int, tuple[str, int, int]]:
    """tid -> (name, CPU ns, runqueue wait ns)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                cpu, wait, _ = f.read().split()
            out[int(tid)] = (name, int(cpu), int(wait))
        except (OSError, ValueError):
            pass
    return out


def perf_syncs(pid: int, seconds: float, result: dict):
    """Counts the relay's fdatasync/fsync calls per thread for `seconds` (perf stat)."""
    cmd = ["perf", "stat", "--per-thread", "-x", ",", "-e", "syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync",
           "-p", str(pid), "--", "sleep", f"{seconds:.1f}"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30)
    except (OSError, subprocess.TimeoutExpired) as e:
        result["error"] = str(e)
        return
    per_thread: dict[str, dict[str, int]] = {}
    for line in p.stderr.splitlines():
        parts = line.split(",")
        if len(parts) >= 4 and parts[3].startswith("syscalls:"):
            try:
                n = int(parts[1])
            except ValueError:
                continue
            per_thread.setdefault(parts[0], {})[parts[3].split(":")[1]] = n
    result["per_thread"] = {t: c for t, c in per_thread.items() if sum(c.values()) > 0}
    result["fdatasync"] = sum(c.get("sys_enter_fdatasync", 0) for c in per_thread.values())
    result["fsync"] = sum(c.get("sys_enter_fsync", 0) for c in per_thread.values())
    if p.returncode != 0 and not per_thread:
        result["error"] = p.stderr.strip()[-500:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metrics", default="http://127.0.0.1:18090/metrics", help="the relay's /metrics (loopback)")
    ap.add_argument("--relay-pid", type=int, help="the relay's pid, for per-thread CPU and CPU waits (and --perf)")
    ap.add_argument("--perf", action="store_true", help="count the relay's fdatasync/fsync calls with perf stat")
    ap.add_argument("--perf-seconds", type=float, help="how long to count syncs (default: the load's --duration)")
    ap.add_argument("--fsyncs-per-second", type=float, help="this disk's syncs per second (from disk_limit.py)")
    ap.add_argument("--disk-json", help="disk_limit.py's JSON output (its last line), for the syncs per second")
    ap.add_argument("--interval", type=float, default=0.5, help="seconds between scrapes during the load")
    ap.add_argument("--timeout", type=float, default=300, help="the load command is killed after this many seconds")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the load command")
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("give the load command after --")
    host = urllib.request.urlparse(args.metrics).hostname or ""
    if not (host.startswith("127.") or host in ("localhost", "::1")):
        ap.error("--metrics must be on loopback")

    duration = None
    if "--duration" in cmd:
        duration = float(cmd[cmd.index("--duration") + 1])

    load_before = os.getloadavg()
    m0 = scrape(args.metrics)
    t0 = threads(args.relay_pid) if args.relay_pid else {}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    started = time.monotonic()

    # Scrape during the run: the first and last scrape where the commit count moved bound the
    # window in which receipts were written (connecting sockets writes none).
    samples: list[tuple[float, float]] = []
    perf_result: dict = {}
    perf_thread = None
    stop = threading.Event()

    def sampler():
        nonlocal perf_thread
        while not stop.wait(args.interval):
            try:
                samples.append((time.monotonic(), scrape(args.metrics).get("relay_receipt_commit_seconds_count", 0.0)))
            except OSError:
                pass
            if args.perf and args.relay_pid and perf_thread is None and samples and samples[-1][1] > m0.get("relay_receipt_commit_seconds_count", 0.0):
                # Count syncs once commits have started, for the measured seconds.
                perf_thread = threading.Thread(target=perf_syncs, args=(args.relay_pid, args.perf_seconds or duration or 5.0, perf_result))
                perf_thread.start()

    st = threading.Thread(target=sampler, daemon=True)
    st.start()
    try:
        out, _ = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    stop.set()
    st.join()
    if perf_thread:
        perf_thread.join()
    m1 = scrape(args.metrics)
    t1 = threads(args.relay_pid) if args.relay_pid else {}
    load_after = os.getloadavg()
    sys.stdout.write(out)

    load = None
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            try:
                load = json.loads(line)
                break
            except ValueError:
                pass

    d = lambda k: m1.get(k, 0.0) - m0.get(k, 0.0)  # noqa: E731
    commits = d("relay_receipt_commit_seconds_count")
    batched = d("relay_receipt_batch_size_sum")
    commit_s = d("relay_receipt_commit_seconds_sum")
    moved = [t for (t, c), (_, prev) in zip(samples[1:], samples) if c > prev]
    window = (moved[-1] - moved[0] + args.interval) if len(moved) >= 2 else (duration or (time.monotonic() - started))
    bbs = buckets(m0, m1, "relay_receipt_batch_size")
    cbs = buckets(m0, m1, "relay_receipt_commit_seconds")
    report: dict = {
        "command": " ".join(cmd),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        "commits": int(commits),
        "receipts_committed": int(batched),
        "receipts_new": int(d("relay_receipts_stored_total")),
        "write_window_seconds": round(window, 2),
        "commits_per_second": round(commits / window, 1) if window else None,
        "receipts_per_second_committed": round(batched / window, 1) if window else None,
        "batch_mean": round(batched / commits, 1) if commits else None,
        "batch_p50_bucket_le": bucket_quantile(bbs, 0.5),
        "batch_p99_bucket_le": bucket_quantile(bbs, 0.99),
        "batch_buckets": {str(le): int(n) for le, n in bbs},
        "commit_mean_ms": round(commit_s / commits * 1000, 3) if commits else None,
        "commit_p50_bucket_le_ms": (bucket_quantile(cbs, 0.5) or 0) * 1000 if commits else None,
        "commit_p99_bucket_le_ms": (bucket_quantile(cbs, 0.99) or 0) * 1000 if commits else None,
        "writer_busy_fraction": round(commit_s / window, 3) if window else None,
    }
    if load:
        report["load"] = {k: load.get(k) for k in ("durable_receipts_per_second", "ack_p50_ms", "ack_p99_ms", "ack_p999_ms",
                                                  "ack_max_ms", "receipts_sent", "receipts_acked", "error_rate", "failed") if k in load}
        report["load"].update({k: v for k, v in load.items() if k.startswith("ack_error")})
    if t0 and t1:
        rows = []
        for tid, (name, cpu1, wait1) in t1.items():
            _, cpu0, wait0 = t0.get(tid, (name, 0, 0))
            rows.append({"tid": tid, "name": name, "cpu_ms": round((cpu1 - cpu0) / 1e6, 1), "cpu_wait_ms": round((wait1 - wait0) / 1e6, 1)})
        rows.sort(key=lambda r: -r["cpu_ms"])
        report["relay_threads"] = rows[:8]
        report["relay_cpu_ms"] = round(sum(r["cpu_ms"] for r in rows), 1)
        # The receipt writer: "relay-receipts" (builds before 5f22f93 named it past Linux's 15
        # characters, so it showed its starter's name: then the busiest thread that is neither an
        # event loop nor a reader).
        writer = next((r for r in rows if r["name"] == "relay-receipts"), None) or \
            next((r for r in rows if not r["name"].startswith(("NIO-", "TP-#", "relay-wal-ckpt"))), None)
        if writer and batched:
            report["writer_thread"] = writer
            report["writer_cpu_us_per_receipt"] = round(writer["cpu_ms"] * 1000 / batched, 2)
            # The writer with a core of its own, at this CPU cost per receipt (syncs not counted).
            report["writer_cpu_limit_receipts_per_second"] = round(batched / (writer["cpu_ms"] / 1000), 1) if writer["cpu_ms"] else None
            report["writer_cpu_wait_fraction_of_window"] = round(writer["cpu_wait_ms"] / 1000 / window, 3) if window else None
    if perf_result:
        report["syncs"] = perf_result
        syncs = perf_result.get("fdatasync", 0) + perf_result.get("fsync", 0)
        secs = args.perf_seconds or duration or 5.0
        report["syncs_per_second"] = round(syncs / secs, 1)
        if report["commits_per_second"]:
            report["syncs_per_commit"] = round(syncs / secs / report["commits_per_second"], 2)

    # The disk's limit: syncs per second (one per commit) × the batch measured here.
    achieved = (load or {}).get("durable_receipts_per_second") or report["receipts_per_second_committed"]
    limits: dict[str, float] = {}
    if args.fsyncs_per_second:
        limits["fsyncs_per_second"] = args.fsyncs_per_second
    if args.disk_json:
        with open(args.disk_json) as f:
            disk = json.loads(f.read().strip().splitlines()[-1])
        report["disk_json"] = args.disk_json
        for key in ("fdatasyncs_per_second", "fdatasyncs_per_second_excl_cpu_wait", "fdatasyncs_per_second_at_p50_excl_cpu_wait",
                    "sqlite_full_commits_per_second", "sqlite_full_commits_per_second_excl_cpu_wait",
                    "sqlite_full_commits_per_second_at_p50_excl_cpu_wait"):
            if disk.get(key):
                limits[key] = disk[key]
    if limits and report["batch_mean"]:
        report["disk_limits"] = {
            key: {"syncs_per_second": rate, "receipts_per_second": round(rate * report["batch_mean"], 1),
                  "achieved_fraction": round(achieved / (rate * report["batch_mean"]), 3)}
            for key, rate in limits.items()}
    if report["batch_mean"] and report["commit_mean_ms"]:
        # The writer, always busy, at this batch and this commit time.
        report["writer_limit_receipts_per_second"] = round(report["batch_mean"] / (report["commit_mean_ms"] / 1000), 1)

    print()
    print(f"load {report['loadavg_before']} -> {report['loadavg_after']}")
    if load:
        print(f"achieved (relay-load): {load.get('durable_receipts_per_second')} receipts/s, ack p50 {load.get('ack_p50_ms')} ms, "
              f"p99 {load.get('ack_p99_ms')} ms, p999 {load.get('ack_p999_ms')} ms")
    print(f"commits {report['commits']} in {report['write_window_seconds']} s = {report['commits_per_second']}/s; "
          f"batch mean {report['batch_mean']} (p50 <= {report['batch_p50_bucket_le']}, p99 <= {report['batch_p99_bucket_le']}); "
          f"commit mean {report['commit_mean_ms']} ms (p50 <= {report['commit_p50_bucket_le_ms']} ms, p99 <= {report['commit_p99_bucket_le_ms']} ms); "
          f"writer busy {report['writer_busy_fraction']}")
    if "syncs_per_commit" in report:
        print(f"syncs {report['syncs_per_second']}/s, {report['syncs_per_commit']} per commit")
    for key, lim in report.get("disk_limits", {}).items():
        print(f"disk limit ({key}) {lim['syncs_per_second']:.0f} syncs/s x batch {report['batch_mean']} = "
              f"{lim['receipts_per_second']:.0f} receipts/s; achieved {lim['achieved_fraction'] * 100:.1f} % of it")
    if "writer_limit_receipts_per_second" in report:
        print(f"writer limit (always busy, this batch, this commit time): {report['writer_limit_receipts_per_second']:.0f} receipts/s")
    if "writer_cpu_us_per_receipt" in report:
        print(f"writer thread {report['writer_thread']['tid']}: {report['writer_cpu_us_per_receipt']} us CPU per receipt "
              f"(a core of its own: {report['writer_cpu_limit_receipts_per_second']:.0f} receipts/s); "
              f"waited for a CPU {report['writer_cpu_wait_fraction_of_window'] * 100:.0f} % of the window")
    for r in report.get("relay_threads", [])[:6]:
        print(f"  thread {r['tid']} {r['name']:<16} cpu {r['cpu_ms']:>8} ms  waiting for a CPU {r['cpu_wait_ms']:>8} ms")
    print(json.dumps(report))
    return proc.returncode or 0


if __name__ == "__main__":
    sys.exit(main())
