"""This disk's limit for durable receipts: fsyncs per second, and SQLite commits per second with
Relay's schema and pragmas.

A durable receipt is acked only after the commit of its batch is on disk (docs/PROTOCOL.md §4),
and Relay has one writer thread that commits one batch at a time. So the store can ack at most

    commits per second (one fsync each) × receipts per commit (the batch size)

This measures the first factor on the file system of `--dir` (the benchmark's `--db` lives in
/tmp), one sync at a time, as the writer does:

- `append 1 frame+fdatasync`: one WAL frame (4 KiB page + 24-byte header) written at the end of
  a growing file, then `fdatasync` (a fresh WAL: the size changes, so ext4 commits its journal);
- `overwrite … +fdatasync` / `+fsync`: the same frames written over a preallocated 16 MiB region
  that wraps around (a WAL that SQLite starts over after a checkpoint); N frames (`--frames`)
  is a commit that touches N pages: Relay's commits write about one WAL frame per receipt (the
  receipts of a batch land on different leaves of the unique and author indexes), so 200
  frames is a commit of ~200 receipts, and its rate × 200 also bounds receipts by bandwidth;
- `sqlite FULL batch=N`: Relay's schema (ReceiptSchema, all migrations, read from a database
  the relay itself creates: `--relay BIN`, default the release build, or `--schema-from DB`) and pragmas
  (SQLiteReceiptStore: WAL, `synchronous=FULL`, `cache_size=-65536`, `mmap_size=256 MiB`,
  `wal_autocheckpoint=0`; passive checkpoints every 0.5 s from a second connection on another
  thread, as WALCheckpointer does), the writer's `INSERT … ON CONFLICT DO NOTHING`, N receipts
  per transaction, one transaction at a time;
- `sqlite NORMAL batch=N`: the same with `synchronous=NORMAL`, where a WAL commit does not sync
  (only checkpoints do): what a commit costs without the disk. (GRDB's DatabasePool sets
  `synchronous=NORMAL` after `prepareDatabase`, so this is also what a relay runs unless it sets
  FULL again once the pool is open: count its syncs with LoadTests/receipts/receipt_batches.py.)

For each test: operations per second and latency (p50/p99/max), then the same without the time
this thread spent waiting for a CPU (read from /proc/thread-self/schedstat around each
operation; on a shared 2-core box most of a sync's latency is that wait, not the disk; the rate
at 1/p50 of that is robust against stalls other processes' I/O causes), and the block device's
own flushes per operation and time per flush (/proc/diskstats).

Python's `sqlite3` here loads the same `libsqlite3.so.0` as the relay (check with `ldd`).
Every test is bounded by `--seconds` and `--max-ops`; the files are removed afterwards.
Prints a table, then one JSON object on the last line (`--json`: the JSON only).

    python3 LoadTests/receipts/disk_limit.py --dir /tmp --seconds 3 --batch 1 128 256
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

FRAME = 4096 + 24  # one WAL frame: a 4 KiB page and its header
REGION = 16 << 20  # the wrapped region of the overwrite tests (a small WAL)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def relay_schema(relay: str | None, database: str | None, scratch: str) -> str:
    """The receipts schema exactly as the relay makes it (ReceiptSchema, every migration): read
    from `database` (a file a relay created), or from a database a relay started here creates
    (`relay --db … --port 0`, stopped by its pid once it listens). Not a copy kept here, so the
    measurement follows every migration."""
    if database is None:
        if relay is None or not os.access(relay, os.X_OK):
            raise SystemExit(f"no relay binary at {relay}: give --relay BIN or --schema-from DB")
        database = os.path.join(scratch, "schema.sqlite")
        secret = "disk-limit-secret-0123456789abcdef0123"
        proc = subprocess.Popen([relay, "--host", "127.0.0.1", "--port", "0", "--db", database, "--jwt-secret", secret,
                                 "--api-key", "disk-limit-api-key-0123456789", "--admin-key", "disk-limit-admin-key-0123456789",
                                 "--log-level", "notice"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            # Bounded even if the relay hangs without a word: raw reads of its pipe, waited for
            # with select (no buffered reader that could hold the line select cannot see).
            deadline = time.monotonic() + 30
            assert proc.stdout is not None
            fd = proc.stdout.fileno()
            output = b""
            while b"listening" not in output:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    raise SystemExit("the relay did not report listening within 30 s")
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise SystemExit(f"the relay exited ({proc.wait()}) before listening")
                output = output[-64:] + chunk
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    db = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
                          "ORDER BY type = 'index', rowid").fetchall()
    finally:
        db.close()
    if not any("CREATE TABLE receipt" in (r[0] or "") for r in rows):
        raise SystemExit(f"{database} has no receipt table")
    return ";\n".join(r[0] for r in rows) + ";"


INSERT = ("INSERT INTO receipt (room, message_id, author_id, user_id, kind, ts, replicated) VALUES (?, ?, ?, ?, ?, ?, ?) "
          "ON CONFLICT (message_id, user_id, kind) DO NOTHING")


def block_device(path: str) -> str | None:
    """The /proc/diskstats name of the disk that holds `path` (the whole disk for a partition)."""
    st = os.stat(path)
    try:
        sys_path = os.path.realpath(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    except OSError:
        return None
    if os.path.exists(os.path.join(sys_path, "partition")):
        sys_path = os.path.dirname(sys_path)
    return os.path.basename(sys_path) if os.path.isdir(sys_path) else None


def diskstats(dev: str | None) -> list[int] | None:
    """The device's counters: [5] writes, [8] ms writing, [16] flushes, [17] ms flushing (1-based)."""
    if dev is None:
        return None
    with open("/proc/diskstats") as f:
        for line in f:
            parts = line.split()
            if parts[2] == dev:
                return [0] + [int(x) for x in parts[3:]]
    return None


class CPUWait:
    """How long this thread has waited for a CPU (runnable, not running), read around each
    operation from /proc/thread-self/schedstat: on a shared box most of a sync's latency can be
    the wait for a CPU after the device answered, not the device."""

    def __init__(self):
        try:
            self.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            self.fd = None

    def now(self) -> int:
        if self.fd is None:
            return 0
        return int(os.pread(self.fd, 128, 0).split()[1])

    def close(self):
        if self.fd is not None:
            os.close(self.fd)


class Probe:
    """What the device says about one test: flushes and writes per operation, and the time the
    device itself took for them."""

    def __init__(self, dev: str | None):
        self.dev = dev
        self.disk0 = diskstats(dev)

    def result(self, ops: int) -> dict:
        out: dict = {}
        d1 = diskstats(self.dev)
        if self.disk0 and d1 and len(d1) > 17:
            flushes = d1[16] - self.disk0[16]
            writes = d1[5] - self.disk0[5]
            out["device_flushes_per_op"] = round(flushes / max(1, ops), 2)
            out["device_ms_per_flush"] = round((d1[17] - self.disk0[17]) / flushes, 3) if flushes else None
            out["device_writes_per_op"] = round(writes / max(1, ops), 2)
            out["device_ms_per_write"] = round((d1[8] - self.disk0[8]) / writes, 3) if writes else None
        return out


def percentile(sorted_ns: list[int], q: float) -> float:
    if not sorted_ns:
        return float("nan")
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))] / 1e6


def summary(name: str, lat_ns: list[int], waits_ns: list[int], elapsed: float, per_op: int = 1, **extra) -> dict:
    """Measured rate and latency, and the same without the time spent waiting for a CPU
    (`*_excl_cpu_wait`: what a quiet box would see, as long as the device stays the same)."""
    service = sorted(max(0, t - w) for t, w in zip(lat_ns, waits_ns))
    lat_ns = sorted(lat_ns)
    ops = len(lat_ns)
    busy = sum(service) / 1e9
    out = {"test": name, "ops": ops, "seconds": round(elapsed, 3), "ops_per_second": round(ops / elapsed, 1),
           "p50_ms": round(percentile(lat_ns, 0.50), 3), "p99_ms": round(percentile(lat_ns, 0.99), 3),
           "max_ms": round(lat_ns[-1] / 1e6, 3) if lat_ns else None,
           "cpu_wait_ms_per_op": round(sum(waits_ns) / 1e6 / max(1, ops), 3),
           "ops_per_second_excl_cpu_wait": round(ops / busy, 1) if busy > 0 else None,
           # 1 / median: robust against the stalls other processes' I/O causes on a shared disk.
           "ops_per_second_at_p50_excl_cpu_wait": round(1e3 / percentile(service, 0.50), 1) if service and service[len(service) // 2] > 0 else None,
           "p50_ms_excl_cpu_wait": round(percentile(service, 0.50), 3),
           "p99_ms_excl_cpu_wait": round(percentile(service, 0.99), 3)}
    if per_op != 1:
        out["receipts_per_op"] = per_op
        out["receipts_per_second"] = round(ops * per_op / elapsed, 1)
        if busy > 0:
            out["receipts_per_second_excl_cpu_wait"] = round(ops * per_op / busy, 1)
    out.update(extra)
    return out


def raw_sync(path: str, seconds: float, max_ops: int, frames: int, overwrite: bool, sync) -> tuple[list[int], list[int], float]:
    """One write of `frames` WAL frames, then one sync; repeated, one at a time."""
    buf = os.urandom(FRAME * frames)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if overwrite:
            # Preallocate and sync once so the measured syncs carry data, not new blocks.
            os.write(fd, b"\0" * REGION)
            os.fsync(fd)
        lat: list[int] = []
        waits: list[int] = []
        cpu = CPUWait()
        offset = 0
        start = time.perf_counter()
        stop = start + seconds
        while len(lat) < max_ops:
            w0 = cpu.now()
            t0 = time.perf_counter_ns()
            if overwrite:
                if offset + len(buf) > REGION:
                    offset = 0
                os.pwrite(fd, buf, offset)
                offset += len(buf)
            else:
                os.write(fd, buf)
            sync(fd)
            lat.append(time.perf_counter_ns() - t0)
            waits.append(cpu.now() - w0)
            if time.perf_counter() >= stop:
                break
        cpu.close()
        return lat, waits, time.perf_counter() - start
    finally:
        os.close(fd)


def sqlite_commits(path: str, schema: str, seconds: float, max_ops: int, batch: int, synchronous: str) -> tuple[list[int], list[int], float, int]:
    """Relay's writer: `batch` receipts per transaction, one transaction at a time."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {synchronous}")
    db.execute("PRAGMA cache_size = -65536")
    db.execute("PRAGMA mmap_size = 268435456")
    db.execute("PRAGMA wal_autocheckpoint = 0")
    db.executescript(schema)

    # WALCheckpointer: a passive checkpoint every 0.5 s from its own connection and thread.
    stop_checkpoints = threading.Event()
    checkpoints = [0]

    def checkpointer():
        c = sqlite3.connect(path, isolation_level=None, timeout=5)
        try:
            while not stop_checkpoints.wait(0.5):
                c.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                checkpoints[0] += 1
        finally:
            c.close()

    thread = threading.Thread(target=checkpointer, daemon=True)
    thread.start()
    lat: list[int] = []
    waits: list[int] = []
    cpu = CPUWait()
    n = 0
    try:
        start = time.perf_counter()
        stop = start + seconds
        while len(lat) < max_ops:
            rows = []
            for _ in range(batch):
                n += 1
                i = n % 100
                rows.append((f"bench-rc{i}", f"m-{n}", f"author-{i}", f"u-{i}", "delivered" if n % 2 else "read", n, 1))
            w0 = cpu.now()
            t0 = time.perf_counter_ns()
            db.execute("BEGIN IMMEDIATE")
            db.executemany(INSERT, rows)
            db.execute("COMMIT")
            lat.append(time.perf_counter_ns() - t0)
            waits.append(cpu.now() - w0)
            if time.perf_counter() >= stop:
                break
        elapsed = time.perf_counter() - start
    finally:
        stop_checkpoints.set()
        thread.join()
        db.close()
        cpu.close()
    return lat, waits, elapsed, checkpoints[0]


def filesystem(path: str) -> dict:
    """The mount that holds `path`: device, type, options (from /proc/self/mountinfo)."""
    best = None
    real = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                parts = line.split()
                mount = parts[4]
                sep = parts.index("-")
                if (real == mount or real.startswith(mount.rstrip("/") + "/")) and (best is None or len(mount) > len(best["mount"])):
                    best = {"mount": mount, "fstype": parts[sep + 1], "device": parts[sep + 2], "options": parts[5]}
    except OSError:
        pass
    return best or {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp", help="directory on the file system to measure (the relay's --db lives in /tmp)")
    ap.add_argument("--seconds", type=float, default=3.0, help="measured seconds per test (each test also stops at --max-ops)")
    ap.add_argument("--max-ops", type=int, default=200_000, help="most syncs or commits per test")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 64, 256], help="receipts per transaction for the SQLite tests")
    ap.add_argument("--frames", type=int, nargs="+", default=[8, 200],
                    help="WAL frames per sync for the larger raw tests (Relay writes about one frame per receipt: "
                         "each receipt lands on its own leaf of the unique index)")
    ap.add_argument("--skip-raw", action="store_true", help="only the SQLite tests")
    ap.add_argument("--skip-sqlite", action="store_true", help="only the raw write+sync tests")
    ap.add_argument("--relay", default=os.path.join(REPO, ".build-release", "release", "relay"),
                    help="relay binary that creates the receipts schema for the SQLite tests (default: the release build)")
    ap.add_argument("--schema-from", metavar="DB", help="a receipts database a relay created (instead of starting --relay)")
    ap.add_argument("--json", action="store_true", help="print only the JSON object")
    args = ap.parse_args()
    if args.seconds <= 0 or args.seconds > 60 or args.max_ops <= 0:
        ap.error("--seconds must be in (0, 60] and --max-ops positive")
    if any(n < 1 or n * FRAME > REGION for n in args.frames):
        ap.error(f"--frames must be in [1, {REGION // FRAME}]")

    tmp = tempfile.mkdtemp(prefix="relay-disk-limit-", dir=args.dir)
    dev = block_device(tmp)
    results: list[dict] = []
    load_before = os.getloadavg()
    began = time.monotonic()
    try:
        if not args.skip_raw:
            f = os.path.join(tmp, "wal-like")
            tests = [("append 1 frame+fdatasync", 1, False, os.fdatasync),
                     ("overwrite 1 frame+fdatasync", 1, True, os.fdatasync),
                     ("overwrite 1 frame+fsync", 1, True, os.fsync)]
            tests += [(f"overwrite {n} frames+fdatasync", n, True, os.fdatasync) for n in args.frames if n > 1]
            for name, frames, overwrite, sync in tests:
                probe = Probe(dev)
                lat, waits, elapsed = raw_sync(f, args.seconds, args.max_ops, frames, overwrite, sync)
                results.append(summary(name, lat, waits, elapsed, bytes_per_sync=FRAME * frames,
                                       frames_per_second=round(len(lat) * frames / elapsed, 1),
                                       mb_per_second=round(len(lat) * frames * FRAME / elapsed / 1e6, 1), **probe.result(len(lat))))
                os.remove(f)
        if not args.skip_sqlite:
            schema = relay_schema(args.relay, args.schema_from, tmp)
            f = os.path.join(tmp, "receipts.sqlite")
            for synchronous in ("FULL", "NORMAL"):
                for batch in args.batch:
                    probe = Probe(dev)
                    lat, waits, elapsed, cps = sqlite_commits(f, schema, args.seconds, args.max_ops, batch, synchronous)
                    results.append(summary(f"sqlite {synchronous} batch={batch}", lat, waits, elapsed, per_op=batch, checkpoints=cps,
                                           **probe.result(len(lat))))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    report = {
        "dir": os.path.realpath(args.dir),
        "filesystem": filesystem(args.dir),
        "block_device": dev,
        "sqlite_version": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "wall_seconds": round(time.monotonic() - began, 1),
        "results": results,
    }
    full1 = next((r for r in results if r["test"] == "sqlite FULL batch=1"), None)
    sync1 = next((r for r in results if r["test"] == "overwrite 1 frame+fdatasync"), None)
    if full1:
        report["sqlite_full_commits_per_second"] = full1["ops_per_second"]
        report["sqlite_full_commits_per_second_excl_cpu_wait"] = full1["ops_per_second_excl_cpu_wait"]
        report["sqlite_full_commits_per_second_at_p50_excl_cpu_wait"] = full1["ops_per_second_at_p50_excl_cpu_wait"]
    if sync1:
        report["fdatasyncs_per_second"] = sync1["ops_per_second"]
        report["fdatasyncs_per_second_excl_cpu_wait"] = sync1["ops_per_second_excl_cpu_wait"]
        report["fdatasyncs_per_second_at_p50_excl_cpu_wait"] = sync1["ops_per_second_at_p50_excl_cpu_wait"]

    if not args.json:
        fs = report["filesystem"]
        print(f"dir {report['dir']} on {fs.get('device', '?')} ({fs.get('fstype', '?')}, {fs.get('options', '?')}), "
              f"SQLite {report['sqlite_version']}, {report['cpus']} CPUs, load {report['loadavg_before']} -> {report['loadavg_after']}")
        print("measured, then (after |) the same without this thread's waits for a CPU:")
        print(f"{'test':<30} {'ops/s':>7} {'receipts/s':>10} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>8} {'cpu wait':>8} | "
              f"{'ops/s':>7} {'receipts/s':>10} {'p50 ms':>7} {'p99 ms':>7} | {'flush/op':>8} {'dev ms/flush':>12}")
        for r in results:
            rps = format(r["receipts_per_second"], ".0f") if "receipts_per_second" in r else ""
            rps2 = format(r["receipts_per_second_excl_cpu_wait"], ".0f") if "receipts_per_second_excl_cpu_wait" in r else ""
            ops2 = r["ops_per_second_excl_cpu_wait"] or 0
            dms = r.get("device_ms_per_flush")
            print(f"{r['test']:<30} {r['ops_per_second']:>7.0f} {rps:>10} {r['p50_ms']:>7.3f} {r['p99_ms']:>7.3f} {r['max_ms']:>8.3f} "
                  f"{r['cpu_wait_ms_per_op']:>8.3f} | {ops2:>7.0f} {rps2:>10} {r['p50_ms_excl_cpu_wait']:>7.3f} {r['p99_ms_excl_cpu_wait']:>7.3f} | "
                  f"{r.get('device_flushes_per_op', ''):>8} {'' if dms is None else dms:>12}")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
