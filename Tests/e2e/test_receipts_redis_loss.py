"""Receipts survive Redis losing its data (issue #31, criterion 3).

Two relay nodes share a redis-server without persistence (`--save '' --appendonly no`). Raw
Socket.IO clients write receipts to both nodes without pause (most of them to node A). Each
cycle kills redis-server with SIGKILL while receipts stream through it — entries Redis has
accepted but the other node has not read yet are lost with it — and starts it again on the
same port:

- empty (a Redis without persistence restarted), or
- from an RDB snapshot taken with `redis-cli --rdb` shortly before the kill: Redis comes back
  with an older prefix of its data and without its last writes, as after a failover to a
  replica that had not received them (replication is asynchronous).

After a bounded settle, `receipt:sync` on every node must return every receipt acked on any
node. Waiting is polling with a deadline; the only sleeps pick a random kill moment.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import subprocess
import threading
from pathlib import Path

from websockets.exceptions import ConnectionClosed

from conftest import RelayProcess
from helpers import ADMIN_KEY, http, run
from redis_servers import free_port
from test_receipts_crash import ROOM, RawClient

CYCLES = 4
WRITERS_A = 6
WRITERS_B = 2
IN_FLIGHT = 16
RATE = 100                         # receipts per second per writer, at most (a shared CI machine)
MAX_PER_WRITER = 40_000            # count bound of each writer
NEW_ACKS_PER_CYCLE = 300           # receipts acked between two kills, at least
SETTLE_SECONDS = 45.0              # every acked receipt on every node within this
HEARTBEAT_MS = 200
RELAY_FLAGS = ["--events-per-second", "100000", "--event-burst", "100000", "--rate", "receipt=100000:100000",
               "--cluster-heartbeat-ms", str(HEARTBEAT_MS)]


class Redis:
    """A redis-server on 127.0.0.1 without persistence, started and killed by the test (by pid);
    `start(rdb=...)` loads an RDB snapshot first."""

    def __init__(self, port: int, workdir: Path):
        self.port = port
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self, rdb: Path | None = None) -> "Redis":
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed: run scripts/test.sh (CI installs Debian's redis-server)"
        self.starts += 1
        run_dir = self.workdir / f"redis-{self.starts}"
        run_dir.mkdir()
        if rdb is not None:
            shutil.copy(rdb, run_dir / "dump.rdb")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(run_dir), "--dbfilename", "dump.rdb"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        ready = threading.Event()

        def drain(proc=self.proc):
            for line in proc.stdout:
                if b"Ready to accept connections" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        assert ready.wait(15) and self.proc.poll() is None, "redis-server did not start"
        return self

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def snapshot(self, path: Path):
        """An RDB of the live server, taken the way a replica gets its first copy."""
        subprocess.run(["redis-cli", "-p", str(self.port), "--rdb", str(path)], check=True,
                       capture_output=True, timeout=20)

    def cli(self, *args: str) -> str:
        return subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True, timeout=10).stdout

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"


async def eventually(check, timeout: float, what: str):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if await check():
            return
        assert loop.time() < deadline, f"{what} did not hold within {timeout} s"
        await asyncio.sleep(0.05)


async def redis_up(node: RelayProcess) -> bool:
    status, body = await http(node, "GET", "/admin/v1/ready", key=ADMIN_KEY)
    return status == 200 and body.get("redis") == "up"


async def synced(port: int) -> set[tuple[str, str, str]]:
    """Every receipt on messages by `author`, paged through receipt:sync on one node."""
    client = await RawClient.connect(port, "author")
    out, since = [], 0
    try:
        for _ in range(10_000):
            ack = await client.call("receipt:sync", {"since": since, "limit": 1000})
            assert ack["ok"], ack
            if not ack["receipts"]:
                break
            out += ack["receipts"]
            since = ack["next"]
    finally:
        await client.close()
    keys = [(r["messageId"], r["userId"], r["kind"]) for r in out]
    assert len(keys) == len(set(keys)), "one sync listing returned a receipt twice"
    return set(keys)


class Writers:
    """Raw clients sending receipts to their node until stopped; every ack is recorded."""

    def __init__(self):
        self.acked: set[tuple[str, str, str]] = set()
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task] = []
        self.failed: dict[str, int] = {}

    def start(self, node: RelayProcess, name: str, count: int):
        for w in range(count):
            self.tasks.append(asyncio.create_task(self._writer(node.port, f"{name}{w}")))

    async def _writer(self, port: int, user: str):
        client = await RawClient.connect(port, user)
        sem = asyncio.Semaphore(IN_FLIGHT)

        async def send(n: int):
            kind = "message:read" if n % 3 == 0 else "message:delivered"
            message_id = f"{user}-m{n}"
            try:
                ack = await client.call(kind, {"room": ROOM, "messageId": message_id, "authorId": "author"})
            except (ConnectionError, ConnectionClosed, asyncio.TimeoutError) as e:
                self.failed[type(e).__name__] = self.failed.get(type(e).__name__, 0) + 1
                return
            finally:
                sem.release()
            assert ack.get("ok") is True, ack
            self.acked.add((message_id, user, kind.split(":")[1]))

        sends = []
        loop = asyncio.get_running_loop()
        began = loop.time()
        for n in range(MAX_PER_WRITER):
            if self.stop.is_set():
                break
            await sem.acquire()
            sends.append(asyncio.create_task(send(n)))
            # Pacing (not waiting for a condition): at most RATE receipts a second.
            ahead = began + n / RATE - loop.time()
            if ahead > 0:
                await asyncio.sleep(ahead)
        await asyncio.gather(*sends)
        await client.close()

    async def until(self, count: int, timeout: float = 30):
        async def enough() -> bool:
            return len(self.acked) >= count
        await eventually(enough, timeout, f"{count} receipts acked (failed sends: {self.failed})")

    async def finish(self):
        self.stop.set()
        await asyncio.wait_for(asyncio.gather(*self.tasks), 60)


def run_loss_cycles(tmp_path: Path, from_snapshot: bool):
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    redis = Redis(free_port(), tmp_path).start()
    nodes: list[RelayProcess] = []
    try:
        for name in ("a", "b"):
            d = tmp_path / name
            d.mkdir()
            nodes.append(RelayProcess(d, ["--redis", redis.url, "--node-id", f"node-{name}", *RELAY_FLAGS]).start())
        a, b = nodes

        async def scenario():
            for n in nodes:
                await eventually(lambda n=n: redis_up(n), 15, "redis link up")
            writers = Writers()
            writers.start(a, "ra", WRITERS_A)
            writers.start(b, "rb", WRITERS_B)
            try:
                for cycle in range(CYCLES):
                    await writers.until(len(writers.acked) + NEW_ACKS_PER_CYCLE)
                    rdb = None
                    if from_snapshot:
                        # The replica's copy: taken now, then Redis takes more writes it lacks.
                        rdb = tmp_path / f"snapshot-{cycle}.rdb"
                        await asyncio.to_thread(redis.snapshot, rdb)
                        await writers.until(len(writers.acked) + NEW_ACKS_PER_CYCLE)
                    # A random moment while receipts stream through Redis.
                    await asyncio.sleep(rng.uniform(0.0, 0.15))
                    redis.kill()
                    acked_at_kill = len(writers.acked)
                    await asyncio.to_thread(redis.start, rdb)
                    if rdb is not None:
                        assert redis.cli("EXISTS", "relay:receipts").strip() == "1", "the snapshot has the receipt stream"
                    for n in nodes:
                        await eventually(lambda n=n: redis_up(n), 20, "redis link up again")
                    print(f"cycle {cycle}: Redis killed with {acked_at_kill} receipts acked; restarted "
                          + ("from an older snapshot" if rdb else "empty"))
                await writers.until(len(writers.acked) + NEW_ACKS_PER_CYCLE)
            finally:
                await writers.finish()
            acked = set(writers.acked)
            print(f"{len(acked)} receipts acked over {CYCLES} Redis kills")

            missing: dict[str, int] = {}
            loop = asyncio.get_running_loop()
            deadline = loop.time() + SETTLE_SECONDS
            while True:
                for n, name in ((a, "a"), (b, "b")):
                    missing[name] = len(acked - await synced(n.port))
                if not any(missing.values()) or loop.time() >= deadline:
                    break
                print(f"settling: missing {missing}")
                await asyncio.sleep(0.5)
            print(f"every node returned all {len(acked)} receipts within {SETTLE_SECONDS - (deadline - loop.time()):.1f} s "
                  "after the writers stopped" if not any(missing.values()) else f"still missing: {missing}")
            assert not any(missing.values()), (
                f"receipt:sync misses acked receipts after {SETTLE_SECONDS} s: {missing['a']} on node A, "
                f"{missing['b']} on node B (of {len(acked)})")

        run(scenario(), timeout=240)
    finally:
        for n in nodes:
            n.stop()
        redis.kill()


def test_receipts_survive_redis_restarting_empty(tmp_path):
    run_loss_cycles(tmp_path, from_snapshot=False)


def test_receipts_survive_redis_losing_its_last_writes(tmp_path):
    run_loss_cycles(tmp_path, from_snapshot=True)
