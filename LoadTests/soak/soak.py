#!/usr/bin/env python3
"""Soak run: two relay nodes and a private redis-server under mixed load with faults.

    .venv/bin/python LoadTests/soak/soak.py --relay BIN/relay --relay-load BIN/relay-load \
        --minutes 30 --out /tmp/soak-out

For the whole duration, in rounds of about 60 s, concurrently:

- `relay-load fanout --nodes A,B` (10 rooms x 20 members, 500 msg/s), and in alternate rounds
  `relay-load slow-consumer` (2 stalled readers per room) instead;
- receipt writers: raw Socket.IO clients sending `message:delivered`/`message:read` with ack ids,
  recording every receipt acknowledged `{"ok":true}` and the node that acked it;
- join/leave churn: clients that connect, join and leave rooms and disconnect, repeatedly;
- a flood client once a round: a WebSocket ping flood and a pipelined `GET /metrics` flood, both
  without reading, then aborted;
- faults: every `--fault-every` rounds `kill -9` of node A (restarted on the same port and
  database), and, offset from it, `kill -9` of redis-server (restarted on the same port, empty).

RSS of each node is sampled every 5 s (rss.csv). At the end: a quiet period, a last RSS sample,
SIGTERM of both nodes, and a check with sqlite3 that every acknowledged receipt is in the
database of the node that acked it. Writes summary.json and summary.txt; exits 1 when a check
fails (a node or Redis exiting unexpectedly, a missing receipt, a non-zero exit on SIGTERM, final
RSS more than 10 % over the plateau).

All traffic goes to 127.0.0.1. Every loop is bounded in count and time. Every process started here
is stopped by its pid at the end, also on error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import csv
import hashlib
import hmac
import json
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import struct
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import aiohttp
from websockets.asyncio.client import connect as ws_connect

os.environ["NO_PROXY"] = "127.0.0.1,localhost"
os.environ["no_proxy"] = "127.0.0.1,localhost"

JWT_SECRET = "soak-jwt-secret-0123456789abcdef-0123456789"  # >= 32 bytes
API_KEY = "soak-api-key-0123456789abcdef"
ADMIN_KEY = "soak-admin-key-0123456789abcdef"
HOST = "127.0.0.1"

ROUND_SECONDS = 60.0
SAMPLE_SECONDS = 5.0
RECEIPT_WRITERS = 20
RECEIPTS_PER_SECOND = 20.0     # per writer: under the 50 events/s per connection and 200 receipts/s
RECEIPT_WINDOW = 8             # receipts in flight per writer
CHURN_WORKERS = 6
ACK_TIMEOUT = 15.0
RSS_TOLERANCE = 0.10

T0 = time.monotonic()


def now() -> float:
    return time.monotonic() - T0


def log(msg: str) -> None:
    print(f"[{now():7.1f}s] {msg}", flush=True)


# ------------------------------------------------------------------------------------------
# Tokens


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def mint_token(sub: str, rooms: list[str], ttl: int = 7200) -> str:
    t = int(time.time())
    header = {"alg": "HS256", "typ": "JWT"}
    claims = {"sub": sub, "iat": t, "exp": t + ttl, "rooms": rooms}
    signing_input = f"{_b64url(json.dumps(header, separators=(',', ':')).encode())}." \
                    f"{_b64url(json.dumps(claims, separators=(',', ':')).encode())}"
    sig = hmac.new(JWT_SECRET.encode(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64url(sig)}"


# ------------------------------------------------------------------------------------------
# Processes (every one registered by pid, stopped at the end)


class Registry:
    def __init__(self):
        self.procs: dict[int, tuple[str, object]] = {}

    def add(self, name: str, proc) -> None:
        self.procs[proc.pid] = (name, proc)

    def remove(self, proc) -> None:
        self.procs.pop(proc.pid, None)

    def stop_all(self) -> None:
        """Synchronous last resort: SIGTERM, bounded wait, SIGKILL — by pid, only our children."""
        for pid, (name, proc) in list(self.procs.items()):
            if proc.returncode is not None or (isinstance(proc, subprocess.Popen) and proc.poll() is not None):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        deadline = time.monotonic() + 10
        for pid, (name, proc) in list(self.procs.items()):
            if isinstance(proc, subprocess.Popen):
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
            elif proc.returncode is None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.procs.clear()


REGISTRY = Registry()


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def proc_mem_kib(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon, RssFile, RssShmem of a process, KiB (empty when it is gone)."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                    out[key] = int(line.split()[1])
    except OSError:
        return {}
    return out


def vm_rss_kib(pid: int) -> int | None:
    return proc_mem_kib(pid).get("VmRSS")


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a live process, from /proc/PID/stat (fields 14 and 15)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class RedisServer:
    def __init__(self, workdir: Path, port: int):
        self.workdir = workdir
        self.port = port
        self.proc: subprocess.Popen | None = None
        self.expected_exit = False
        self.starts: list[float] = []

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}"

    async def ping(self) -> bool:
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection(HOST, self.port), 2)
            w.write(b"PING\r\n")
            line = await asyncio.wait_for(r.readline(), 2)
            w.close()
            return line.startswith(b"+PONG")
        except (OSError, asyncio.TimeoutError):
            return False

    async def start(self) -> None:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        for attempt in range(10):
            logf = open(self.workdir / "redis.log", "ab")
            self.proc = subprocess.Popen(
                [binary, "--port", str(self.port), "--bind", HOST, "--save", "", "--appendonly", "no",
                 "--dir", str(self.workdir)],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
            logf.close()
            REGISTRY.add("redis-server", self.proc)
            for _ in range(100):
                if self.proc.poll() is not None:
                    break
                if await self.ping():
                    self.starts.append(now())
                    self.expected_exit = False
                    return
                await asyncio.sleep(0.1)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
            REGISTRY.remove(self.proc)
            await asyncio.sleep(1)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def kill9(self) -> None:
        self.expected_exit = True
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc:
            REGISTRY.remove(self.proc)

    def stop(self) -> None:
        self.expected_exit = True
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc:
            REGISTRY.remove(self.proc)


class Node:
    def __init__(self, name: str, binary: str, workdir: Path, port: int, redis: RedisServer):
        self.name = name
        self.binary = binary
        self.workdir = workdir
        self.port = port
        self.redis = redis
        self.db = workdir / f"node-{name}.sqlite"
        self.log = workdir / f"node-{name}.log"
        self.proc: subprocess.Popen | None = None
        self.expected_exit = False
        self.starts: list[float] = []     # times (s since start) it became healthy
        self.kills: list[float] = []
        self.crashes: list[dict] = []

    @property
    def addr(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{HOST}:{self.port}/socket.io/?EIO=4&transport=websocket"

    def args(self) -> list[str]:
        return [self.binary, "--host", HOST, "--port", str(self.port), "--redis", self.redis.url,
                "--node-id", f"soak-{self.name}", "--jwt-secret", JWT_SECRET, "--api-key", API_KEY,
                "--admin-key", ADMIN_KEY, "--db", str(self.db), "--log-level", "warning"]

    async def healthy(self, session: aiohttp.ClientSession) -> bool:
        try:
            async with session.get(f"http://{self.addr}/healthz", timeout=aiohttp.ClientTimeout(total=2)) as r:
                return r.status == 200
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return False

    async def start(self) -> None:
        # With --log-level warning the `relay listening on` line (notice) is not printed, so
        # readiness is /healthz answering on the chosen port.
        async with aiohttp.ClientSession(trust_env=False) as session:
            for attempt in range(10):
                with open(self.log, "ab") as logf:
                    logf.write(f"\n==== soak: start at {now():.1f}s (attempt {attempt}) ====\n".encode())
                    logf.flush()
                    self.proc = subprocess.Popen(self.args(), cwd=self.workdir, stdin=subprocess.DEVNULL,
                                                 stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
                REGISTRY.add(f"relay-{self.name}", self.proc)
                for _ in range(300):
                    if self.proc.poll() is not None:
                        break
                    if await self.healthy(session):
                        self.starts.append(now())
                        self.expected_exit = False
                        return
                    await asyncio.sleep(0.1)
                log(f"node {self.name}: start attempt {attempt} failed (exit {self.proc.poll()}), retrying")
                if self.proc.poll() is None:
                    self.proc.kill()
                    self.proc.wait(10)
                REGISTRY.remove(self.proc)
                await asyncio.sleep(1)
        raise RuntimeError(f"node {self.name} did not start on port {self.port}")

    def kill9(self) -> None:
        self.expected_exit = True
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        if self.proc:
            REGISTRY.remove(self.proc)
        self.kills.append(now())

    def terminate(self, timeout: float = 60) -> int | None:
        """SIGTERM (graceful shutdown); returns the exit code."""
        self.expected_exit = True
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                REGISTRY.remove(self.proc)
                return None
        REGISTRY.remove(self.proc)
        return self.proc.returncode


# ------------------------------------------------------------------------------------------
# Shared state


class State:
    def __init__(self):
        self.stop = asyncio.Event()          # end of the load phase
        self.round = -1
        self.phase = "start"
        self.acked: list[tuple[str, str, str, str, int]] = []   # node, messageId, userId, kind, ack id
        self.receipts = Counter()            # sent, acked, refused:<code>, unacked, reconnects
        self.churn = Counter()
        self.mixed = Counter()               # polling and binary clients
        self.mixed_drops: list[dict] = []    # unexpected disconnections, with the round
        self.floods: list[dict] = []
        self.loads: list[dict] = []
        self.faults: list[dict] = []
        self.events: list[str] = []

    def note(self, msg: str) -> None:
        self.events.append(f"{now():.1f}s {msg}")
        log(msg)


# ------------------------------------------------------------------------------------------
# A raw Engine.IO / Socket.IO client (as RawSocket/RawClient in Tests/e2e)


class SioClient:
    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.waiters: dict[int, asyncio.Future] = {}
        self.reader: asyncio.Task | None = None
        self.closed = asyncio.Event()

    @classmethod
    async def open(cls, node: Node, user: str, rooms: list[str]) -> "SioClient":
        ws = await ws_connect(node.ws_url, compression=None, proxy=None, open_timeout=10, ping_interval=None,
                              close_timeout=2, max_size=None, max_queue=64)
        try:
            first = await asyncio.wait_for(ws.recv(), 10)
            if not (isinstance(first, str) and first.startswith("0{")):
                raise ConnectionError(f"no Engine.IO open: {first!r}")
            await ws.send("40" + json.dumps({"token": mint_token(user, rooms)}))
            while True:
                reply = await asyncio.wait_for(ws.recv(), 10)
                if reply == "2":
                    await ws.send("3")
                    continue
                break
            if not reply.startswith("40{"):
                raise ConnectionError(f"CONNECT refused: {reply[:200]!r}")
        except BaseException:
            ws.transport.abort() if hasattr(ws, "transport") else None
            raise
        client = cls(ws)
        client.reader = asyncio.create_task(client._read())
        return client

    async def _read(self) -> None:
        try:
            async for text in self.ws:
                if text == "2":
                    await self.ws.send("3")
                elif isinstance(text, str) and text.startswith("43"):
                    i = 2
                    while i < len(text) and text[i].isdigit():
                        i += 1
                    fut = self.waiters.pop(int(text[2:i]), None)
                    if fut is not None and not fut.done():
                        try:
                            fut.set_result(json.loads(text[i:])[0])
                        except (ValueError, IndexError) as exc:
                            fut.set_exception(ConnectionError(f"bad ack {text[:100]!r}: {exc}"))
        except Exception:  # noqa: BLE001 - connection lost: the waiters learn below
            pass
        finally:
            self.closed.set()
            for fut in self.waiters.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("connection lost"))
            self.waiters.clear()

    def send_call(self, event: str, data: dict) -> asyncio.Future:
        """Sends `42<id>[event,data]`; returns the future of its ack."""
        if self.closed.is_set():
            raise ConnectionError("connection lost")
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.waiters[self.next_id] = fut
        asyncio.ensure_future(self._send(f"42{self.next_id}" + json.dumps([event, data]), fut))
        return fut

    async def _send(self, text: str, fut: asyncio.Future) -> None:
        try:
            await self.ws.send(text)
        except Exception as exc:  # noqa: BLE001
            if not fut.done():
                fut.set_exception(ConnectionError(f"send failed: {exc}"))

    async def call(self, event: str, data: dict, timeout: float = ACK_TIMEOUT) -> dict:
        return await asyncio.wait_for(self.send_call(event, data), timeout)

    async def close(self, abort: bool = False) -> None:
        try:
            if abort:
                self.ws.transport.abort()
            else:
                await asyncio.wait_for(self.ws.close(), 3)
        except Exception:  # noqa: BLE001
            pass
        if self.reader is not None:
            self.reader.cancel()
            try:
                await self.reader
            except BaseException:  # noqa: BLE001
                pass


# ------------------------------------------------------------------------------------------
# (c) receipt writers


async def receipt_writer(idx: int, nodes: list[Node], st: State, deadline: float, run_id: str) -> None:
    node = nodes[idx % len(nodes)]
    user = f"soak-rcpt-{idx}"
    room = f"soak:rcpt-{idx}"
    seq = 0
    max_receipts = int((deadline - now() + 60) * RECEIPTS_PER_SECOND * 2) + 100   # count bound
    attempts = 0
    while not st.stop.is_set() and now() < deadline and seq < max_receipts and attempts < 100_000:
        attempts += 1
        client = None
        try:
            client = await SioClient.open(node, user, ["soak:*"])
            ack = await client.call("room:join", {"room": room})
            if not ack.get("ok"):
                raise ConnectionError(f"join refused: {ack}")
            sem = asyncio.Semaphore(RECEIPT_WINDOW)
            pending: set[asyncio.Task] = set()
            interval = 1.0 / RECEIPTS_PER_SECOND
            next_t = time.monotonic()

            async def one(message_id: str, kind: str):
                try:
                    st.receipts["sent"] += 1
                    try:
                        reply = await client.call(f"message:{kind}", {"room": room, "messageId": message_id,
                                                                       "authorId": "soak-author"})
                    except (ConnectionError, asyncio.TimeoutError):
                        st.receipts["unacked"] += 1
                        return
                    if reply.get("ok") is True and isinstance(reply.get("id"), int):
                        st.acked.append((node.name, message_id, user, kind, reply["id"]))
                        st.receipts["acked"] += 1
                    else:
                        code = (reply.get("error") or {}).get("code", "?")
                        st.receipts[f"refused:{code}"] += 1
                finally:
                    sem.release()

            while not st.stop.is_set() and now() < deadline and seq < max_receipts:
                if client.closed.is_set():
                    raise ConnectionError("connection lost")
                await sem.acquire()
                seq += 1
                kind = "read" if seq % 5 == 0 else "delivered"
                t = asyncio.create_task(one(f"{run_id}-w{idx}-{seq}", kind))
                pending.add(t)
                t.add_done_callback(pending.discard)
                next_t += interval
                delay = next_t - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                else:
                    next_t = time.monotonic()
            if pending:
                await asyncio.wait(pending, timeout=ACK_TIMEOUT + 5)
            await client.close()
            return
        except Exception as exc:  # noqa: BLE001 - reconnect
            st.receipts["reconnects"] += 1
            st.receipts[f"reconnect:{type(exc).__name__}"] += 1
            if client is not None:
                await client.close(abort=True)
            await asyncio.sleep(1.0)


# ------------------------------------------------------------------------------------------
# (d) join/leave churn


async def churn_worker(w: int, nodes: list[Node], st: State, deadline: float) -> None:
    rng = random.Random(w)
    user = f"soak-churn-{w}"
    rooms = [f"soak:churn-{k}" for k in range(8)] + [f"bench-r{k}" for k in range(10)]
    iterations = 0
    while not st.stop.is_set() and now() < deadline and iterations < 100_000:
        iterations += 1
        node = nodes[rng.randrange(len(nodes))]
        client = None
        try:
            client = await SioClient.open(node, user, ["soak:*", "bench-*"])
            st.churn["connects"] += 1
            mine = rng.sample(rooms, 3)
            for r in mine:
                ack = await client.call("room:join", {"room": r})
                st.churn["joins" if ack.get("ok") else "join_refused"] += 1
            await asyncio.sleep(rng.uniform(0.2, 1.5))
            for r in mine[:2]:
                ack = await client.call("room:leave", {"room": r})
                st.churn["leaves" if ack.get("ok") else "leave_refused"] += 1
            ack = await client.call("presence:list", {"room": mine[2]})
            st.churn["presence_lists" if ack.get("ok") else "presence_refused"] += 1
            await asyncio.sleep(rng.uniform(0.1, 1.0))
            abort = rng.random() < 0.3
            await client.close(abort=abort)
            st.churn["aborts" if abort else "closes"] += 1
        except Exception as exc:  # noqa: BLE001
            st.churn["errors"] += 1
            st.churn[f"error:{type(exc).__name__}"] += 1
            if client is not None:
                await client.close(abort=True)
            await asyncio.sleep(1.0)


# ------------------------------------------------------------------------------------------
# (d2) polling and binary clients: python-socketio, the stock client, on its defaults (polling,
# then the upgrade) or polling only; each in a room of four, sending a binary custom event with
# a 2 KiB attachment every second and counting what the others' events bring.


async def mixed_worker(w: int, nodes: list[Node], st: State, deadline: float) -> None:
    import socketio  # python-socketio, from Tests/e2e/requirements.txt

    polling_only = w % 2 == 0
    room = f"soak:mix-{w % 4}"
    user = f"soak-mix-{w}"
    attempts = 0
    while not st.stop.is_set() and now() < deadline and attempts < 10_000:
        attempts += 1
        node = nodes[w % len(nodes)]
        sio = socketio.AsyncClient(reconnection=False)

        @sio.on("file:shared")
        async def on_file(data, *rest):
            st.mixed["received"] += 1
            if isinstance(data, dict) and isinstance(data.get("blob"), (bytes, bytearray)) and len(data["blob"]) == 2048:
                st.mixed["received_binary_intact"] += 1

        try:
            await sio.connect(f"http://{HOST}:{node.port}", auth={"token": mint_token(user, ["soak:*"])},
                              transports=["polling"] if polling_only else None, wait_timeout=10)
            st.mixed["connects_polling" if polling_only else "connects_default"] += 1
            ack = await sio.call("room:join", {"room": room}, timeout=10)
            st.mixed["joins" if isinstance(ack, dict) and ack.get("ok") else "join_refused"] += 1
            while not st.stop.is_set() and now() < deadline and sio.connected:
                ack = await sio.call("file:shared", {"room": room, "blob": os.urandom(2048)}, timeout=10)
                st.mixed["acked" if isinstance(ack, dict) and ack.get("ok") else "refused"] += 1
                await asyncio.sleep(1.0)
            if not st.stop.is_set() and now() < deadline:
                st.mixed["dropped"] += 1
                st.mixed_drops.append({"round": st.round, "at": round(now(), 1), "worker": w, "polling_only": polling_only})
        except Exception as exc:  # noqa: BLE001 - a killed node, a timeout: counted, then again
            st.mixed["errors"] += 1
            st.mixed[f"error:{type(exc).__name__}"] += 1
            st.mixed_drops.append({"round": st.round, "at": round(now(), 1), "worker": w, "error": type(exc).__name__})
            await asyncio.sleep(1.0)
        finally:
            try:
                await asyncio.wait_for(sio.disconnect(), 5)
            except Exception:  # noqa: BLE001
                pass


# ------------------------------------------------------------------------------------------
# (d3) the attacker: LoadTests/soak/attacker.py in its own process, the hostile matrix's floods
# and oversized inputs one after another against both nodes for the whole load phase.


CGROUP_CPU = Path("/sys/fs/cgroup/cpu")


def attacker_cgroup(cores: float) -> Path:
    """A cgroup-v1 `cpu` group holding the attacker to `cores` of CPU (CFS quota over a 100 ms
    period). On one machine the attacker's own Python bursts take CPU from the clients and the
    load generator that an attacker on another machine would not; the cap stands in for that
    other machine. The relays' work refusing it is not capped."""
    group = CGROUP_CPU / f"relay-soak-attacker-{os.getpid()}"
    group.mkdir(exist_ok=True)
    (group / "cpu.cfs_period_us").write_text("100000")
    (group / "cpu.cfs_quota_us").write_text(str(max(1000, int(cores * 100000))))
    return group


def start_attacker(nodes: list[Node], seconds: float, out: Path, niceness: int, cgroup: Path | None,
                   pause_file: Path | None = None) -> subprocess.Popen:
    """On this one machine the attacker's own Python competes with the load generator and the
    clients for two cores; `niceness` lets it yield to them and `cgroup` caps it, as an attacker
    on another machine would take none of them. The relays' work refusing it is not reduced."""
    script = Path(__file__).resolve().parent / "attacker.py"

    def enter() -> None:
        if cgroup is not None:
            (cgroup / "tasks").write_text(str(os.getpid()))
        if niceness:
            os.nice(niceness)

    proc = subprocess.Popen([sys.executable, str(script), "--nodes", ",".join(n.addr for n in nodes),
                             "--secret", JWT_SECRET, "--seconds", str(seconds), "--out", str(out / "attacks.jsonl"),
                             "--pause-file", str(pause_file) if pause_file else ""],
                            stdin=subprocess.DEVNULL, stdout=open(out / "attacker.log", "w"), stderr=subprocess.STDOUT,
                            preexec_fn=enter if (niceness or cgroup is not None) else None)
    REGISTRY.add("attacker", proc)
    return proc


def attacker_throttling(cgroup: Path | None) -> dict | None:
    """How often the cap held the attacker back (cpu.stat of its group)."""
    if cgroup is None:
        return None
    try:
        return {k: int(v) for k, v in (line.split() for line in (cgroup / "cpu.stat").read_text().splitlines())}
    except (OSError, ValueError):
        return None


def attacker_cpu(out: Path) -> dict | None:
    """The attacker's own CPU, the last line it prints (attacker.py)."""
    try:
        last = (out / "attacker.log").read_text().strip().splitlines()[-1]
        return json.loads(last)
    except (OSError, IndexError, ValueError):
        return None


def attack_summary(out: Path, fault_windows: list[tuple[float, float]]) -> dict:
    """Tallies attacks.jsonl: every attack must be refused or bounded; errors are allowed only
    while a node was down (a kill -9)."""
    tally: Counter = Counter()
    unexpected: list[dict] = []
    path = out / "attacks.jsonl"
    if not path.exists():
        return {"count": 0, "by_outcome": {}, "unexpected": []}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        tally[(r["attack"], r["outcome"])] += 1
        if r["outcome"] == "unexpected" or (r["outcome"] == "error" and not any(a <= r["t"] <= b for a, b in fault_windows)):
            unexpected.append(r)
    by_attack: dict[str, dict[str, int]] = {}
    for (attack, outcome), n in sorted(tally.items()):
        by_attack.setdefault(attack, {})[outcome] = n
    return {"count": sum(tally.values()), "by_attack": by_attack, "unexpected": unexpected[:20], "unexpected_count": len(unexpected)}


# ------------------------------------------------------------------------------------------
# (e) flood client (as Tests/e2e/test_hostile.py)

UPGRADE = (
    "GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\n"
    "Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


def ws_frame(opcode: int, payload: bytes) -> bytes:
    head = struct.pack("!BB", 0x80 | opcode, 0x80 | len(payload))
    return head + b"\0\0\0\0" + payload


async def write_for(writer: asyncio.StreamWriter, chunk: bytes, count: int, seconds: float) -> int:
    deadline = time.monotonic() + seconds
    sent = 0
    for _ in range(count):
        if time.monotonic() > deadline:
            break
        writer.write(chunk)
        try:
            await asyncio.wait_for(writer.drain(), max(0.05, deadline - time.monotonic()))
        except (asyncio.TimeoutError, ConnectionError):
            break
        sent += len(chunk)
    return sent


async def flood(node: Node, st: State, seconds: float = 3.0) -> None:
    result = {"round": st.round, "node": node.name, "at": round(now(), 1)}
    rss_before = vm_rss_kib(node.proc.pid) if node.proc else None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, node.port), 5)
        writer.write(UPGRADE.encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        result["ping_upgrade"] = head.split(b"\r\n", 1)[0].decode("latin-1")
        writer.write(ws_frame(0x1, b"6"))
        result["ping_bytes"] = await write_for(writer, ws_frame(0x9, b"p" * 125) * 64, 200_000, seconds)
        result["rss_peak_ping_kib"] = vm_rss_kib(node.proc.pid) if node.proc else None
        writer.transport.abort()
    except Exception as exc:  # noqa: BLE001
        result["ping_error"] = f"{type(exc).__name__}: {exc}"
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, node.port), 5)
        requests = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 256
        result["http_bytes"] = await write_for(writer, requests, 20_000, seconds)
        result["rss_peak_http_kib"] = vm_rss_kib(node.proc.pid) if node.proc else None
        writer.transport.abort()
    except Exception as exc:  # noqa: BLE001
        result["http_error"] = f"{type(exc).__name__}: {exc}"
    result["rss_before_kib"] = rss_before
    st.floods.append(result)


# ------------------------------------------------------------------------------------------
# (a)/(b) relay-load


async def run_relay_load(args, nodes: list[Node], st: State, slow: bool, out: Path) -> None:
    scenario = "slow-consumer" if slow else "fanout"
    duration = args.load_seconds / 2 - 2 if slow else args.load_seconds
    cmd = [args.relay_load, scenario, "--nodes", ",".join(n.addr for n in nodes), "--secret", JWT_SECRET,
           "--rooms", "10", "--members", "20", "--senders", "20", "--rate", "500",
           "--duration", f"{max(1.0, duration):.0f}", "--warmup", "1", "--json", "--max-error-rate", "0.01"]
    if slow:
        cmd += ["--stalled", "2"]
    rec = {"round": st.round, "scenario": scenario, "started": round(now(), 1)}
    proc = await asyncio.create_subprocess_exec(*cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE, start_new_session=True)
    REGISTRY.add(f"relay-load-{scenario}", proc)
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), args.load_seconds + 120)
    except asyncio.TimeoutError:
        proc.kill()
        stdout, stderr = await proc.communicate()
        rec["timeout"] = True
    finally:
        REGISTRY.remove(proc)
    rec["exit"] = proc.returncode
    rec["ended"] = round(now(), 1)
    text = stdout.decode("utf-8", "replace").strip()
    try:
        report = json.loads(text.splitlines()[-1]) if text else {}
    except ValueError:
        report = {}
        rec["stdout"] = text[-500:]
    if stderr.strip():
        rec["stderr"] = stderr.decode("utf-8", "replace")[-500:]
    rec["report"] = report
    if slow:
        rec["sent"] = report.get("baseline.sent", 0) + report.get("stalled.sent", 0)
        rec["deliveries"] = report.get("baseline.deliveries", 0) + report.get("stalled.deliveries", 0)
        rec["p99_ms"] = report.get("stalled.latency_p99_ms")
    else:
        rec["sent"] = report.get("sent", 0)
        rec["deliveries"] = report.get("deliveries", 0)
        rec["p99_ms"] = report.get("latency_p99_ms")
    st.loads.append(rec)
    with open(out / "loads.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")


# ------------------------------------------------------------------------------------------
# Monitoring: RSS samples and liveness


async def sampler(nodes: list[Node], redis: RedisServer, st: State, out: Path, until: asyncio.Event) -> None:
    path = out / "rss.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "phase", "round", "node", "pid", "alive", "rss_kib", "rss_anon_kib", "rss_file_kib", "rss_shmem_kib"])
        n = 0
        while not until.is_set() and n < 100_000:
            n += 1
            take_sample(w, nodes, redis, st)
            f.flush()
            try:
                await asyncio.wait_for(until.wait(), SAMPLE_SECONDS)
            except asyncio.TimeoutError:
                pass


SAMPLES: list[dict] = []


def take_sample(w, nodes: list[Node], redis: RedisServer, st: State, phase: str | None = None) -> None:
    t = round(now(), 1)
    for name, proc in [(n.name, n.proc) for n in nodes] + [("redis", redis.proc)]:
        alive = proc is not None and proc.poll() is None
        mem = proc_mem_kib(proc.pid) if alive else {}
        row = {"t": t, "phase": phase or st.phase, "round": st.round, "node": name,
               "pid": proc.pid if proc else None, "alive": alive, "rss_kib": mem.get("VmRSS"),
               "anon_kib": mem.get("RssAnon"), "file_kib": mem.get("RssFile"), "shmem_kib": mem.get("RssShmem")}
        SAMPLES.append(row)
        if w is not None:
            w.writerow(csv_row(row))


def csv_row(row: dict) -> list:
    return [row["t"], row["phase"], row["round"], row["node"], row["pid"], int(row["alive"])] + \
        ["" if row[k] is None else row[k] for k in ("rss_kib", "anon_kib", "file_kib", "shmem_kib")]


async def watchdog(nodes: list[Node], redis: RedisServer, st: State, until: asyncio.Event) -> None:
    """Notices a node or Redis exiting unexpectedly: records a crash and restarts it."""
    n = 0
    while not until.is_set() and n < 1_000_000:
        n += 1
        for node in nodes:
            if node.proc is not None and not node.expected_exit and node.proc.poll() is not None:
                code = node.proc.returncode
                tail = node.log.read_text(errors="replace")[-3000:] if node.log.exists() else ""
                node.crashes.append({"at": round(now(), 1), "exit": code, "log_tail": tail})
                st.note(f"CRASH: node {node.name} exited unexpectedly with {code}; restarting")
                REGISTRY.remove(node.proc)
                node.expected_exit = True
                try:
                    await node.start()
                except Exception as exc:  # noqa: BLE001
                    st.note(f"node {node.name} restart after crash failed: {exc}")
        if redis.proc is not None and not redis.expected_exit and redis.proc.poll() is not None:
            st.note(f"CRASH: redis-server exited unexpectedly with {redis.proc.returncode}; restarting")
            st.faults.append({"kind": "redis-crash", "at": round(now(), 1), "exit": redis.proc.returncode})
            REGISTRY.remove(redis.proc)
            redis.expected_exit = True
            try:
                await redis.start()
            except Exception as exc:  # noqa: BLE001
                st.note(f"redis restart after crash failed: {exc}")
        try:
            await asyncio.wait_for(until.wait(), 1.0)
        except asyncio.TimeoutError:
            pass


# ------------------------------------------------------------------------------------------
# Faults


async def kill_node(node: Node, st: State) -> None:
    st.note(f"fault: kill -9 node {node.name} (pid {node.proc.pid})")
    t = now()
    node.kill9()
    await asyncio.sleep(1.0)
    await node.start()
    st.faults.append({"kind": "kill-9 node", "node": node.name, "round": st.round, "at": round(t, 1),
                      "back_after_s": round(now() - t, 2), "new_pid": node.proc.pid})
    st.note(f"node {node.name} back after {now() - t:.1f}s (pid {node.proc.pid})")


async def restart_redis(redis: RedisServer, st: State) -> None:
    st.note(f"fault: kill -9 redis-server (pid {redis.proc.pid})")
    t = now()
    wall = time.time()
    redis.kill9()
    await asyncio.sleep(2.0)
    await redis.start()
    st.faults.append({"kind": "kill-9 redis", "round": st.round, "at": round(t, 1), "wall": wall,
                      "back_after_s": round(now() - t, 2), "new_pid": redis.proc.pid})
    st.note(f"redis-server back after {now() - t:.1f}s (pid {redis.proc.pid})")


async def ready_state(node: Node) -> dict | str:
    try:
        async with aiohttp.ClientSession(trust_env=False) as s:
            async with s.get(f"http://{node.addr}/admin/v1/ready", headers={"Authorization": f"Bearer {ADMIN_KEY}"},
                             timeout=aiohttp.ClientTimeout(total=5)) as r:
                return await r.json(content_type=None)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"


async def metrics(node: Node) -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        async with aiohttp.ClientSession(trust_env=False) as s:
            async with s.get(f"http://{node.addr}/metrics", timeout=aiohttp.ClientTimeout(total=10)) as r:
                text = await r.text()
        for line in text.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            parts = line.rsplit(" ", 1)
            if len(parts) == 2:
                try:
                    out[parts[0]] = float(parts[1])
                except ValueError:
                    pass
    except Exception:  # noqa: BLE001
        pass
    return out


# ------------------------------------------------------------------------------------------
# Verification and report


def verify_receipts(nodes: list[Node], st: State) -> dict:
    by_node: dict[str, dict[tuple[str, str, str], tuple[int, str | None]]] = {}
    for n in nodes:
        con = sqlite3.connect(f"file:{n.db}?mode=ro", uri=True, timeout=30)
        try:
            rows = con.execute("SELECT message_id, user_id, kind, id, origin, ts FROM receipt "
                               "WHERE user_id LIKE 'soak-rcpt-%'").fetchall()
        finally:
            con.close()
        by_node[n.name] = {(m, u, k): (i, o, ts) for m, u, k, i, o, ts in rows}
    redis_kills = [f["wall"] for f in st.faults if f["kind"] == "kill-9 redis"]
    res = {"acked": len(st.acked), "verified": 0, "missing": 0, "id_mismatch": 0, "not_local_origin": 0,
           "replicated_to_peer": 0, "not_replicated_to_peer": 0, "not_replicated_within_5s_before_a_redis_kill": 0,
           "not_replicated_by_redis_kill": Counter(), "not_replicated_examples": [],
           "missing_examples": [], "mismatch_examples": [],
           "rows_per_db": {k: len(v) for k, v in by_node.items()}, "acked_per_node": Counter()}
    for node_name, message_id, user, kind, ack_id in st.acked:
        res["acked_per_node"][node_name] += 1
        row = by_node[node_name].get((message_id, user, kind))
        if row is None:
            res["missing"] += 1
            if len(res["missing_examples"]) < 10:
                res["missing_examples"].append([node_name, message_id, user, kind, ack_id])
            continue
        res["verified"] += 1
        if row[0] != ack_id:
            res["id_mismatch"] += 1
            if len(res["mismatch_examples"]) < 10:
                res["mismatch_examples"].append([node_name, message_id, kind, ack_id, row[0]])
        if row[1] is not None:
            res["not_local_origin"] += 1
        for other, rows in by_node.items():
            if other != node_name:
                if (message_id, user, kind) in rows:
                    res["replicated_to_peer"] += 1
                else:
                    res["not_replicated_to_peer"] += 1
                    ts = row[2] / 1000
                    near = [k for k in redis_kills if k - 5 <= ts <= k + 0.5]
                    if near:
                        res["not_replicated_within_5s_before_a_redis_kill"] += 1
                        res["not_replicated_by_redis_kill"][f"{near[0]:.1f}"] += 1
                    if len(res["not_replicated_examples"]) < 10:
                        res["not_replicated_examples"].append([node_name, message_id, kind, ack_id, row[2]])
    res["acked_per_node"] = dict(res["acked_per_node"])
    res["not_replicated_by_redis_kill"] = dict(res["not_replicated_by_redis_kill"])
    res["db_bytes"] = {n.name: sum(p.stat().st_size for p in n.db.parent.glob(n.db.name + "*")) for n in nodes}
    return res


def rss_analysis(nodes: list[Node], load_start: float, load_end: float, final: dict[str, int | None]) -> dict:
    out = {}
    for n in nodes:
        since = load_start
        if n.name == "a" and n.starts:
            since = max(load_start, n.starts[-1])
        # Also any crash restart counts as a restart.
        if n.starts:
            since = max(since, max([s for s in n.starts if s <= load_end], default=since))
        span = load_end - since
        # The plateau is the steady state: the last third of the node's load window. Before it,
        # SQLite's page cache (up to 64 MiB per connection) fills as the database grows, which
        # takes ~20 minutes at this load and is bounded, not a leak.
        lo, hi = since + 2 * span / 3, load_end
        mids = [s["rss_kib"] for s in SAMPLES if s["node"] == n.name and s["phase"] == "load" and s["alive"]
                and s["rss_kib"] and lo <= s["t"] <= hi]
        allload = [s["rss_kib"] for s in SAMPLES if s["node"] == n.name and s["phase"] == "load" and s["alive"]
                   and s["rss_kib"] and s["t"] >= since]
        plateau = statistics.median(mids) if mids else None
        anon_mids = [s["anon_kib"] for s in SAMPLES if s["node"] == n.name and s["phase"] == "load" and s["alive"]
                     and s["anon_kib"] and lo <= s["t"] <= hi]
        file_mids = [s["file_kib"] for s in SAMPLES if s["node"] == n.name and s["phase"] == "load" and s["alive"]
                     and s["file_kib"] is not None and lo <= s["t"] <= hi]
        last = [s for s in SAMPLES if s["node"] == n.name and s["phase"] == "final"]
        fin_anon = last[-1]["anon_kib"] if last else None
        fin_file = last[-1]["file_kib"] if last else None
        fin = final.get(n.name)
        change = (fin - plateau) / plateau * 100 if plateau and fin else None
        out[n.name] = {"window_s": [round(since, 1), round(load_end, 1)], "last_third_s": [round(lo, 1), round(hi, 1)],
                       "samples_in_last_third": len(mids), "plateau_mib": round(plateau / 1024, 1) if plateau else None,
                       "peak_mib": round(max(allload) / 1024, 1) if allload else None,
                       "final_mib": round(fin / 1024, 1) if fin else None,
                       "final_vs_plateau_percent": round(change, 1) if change is not None else None,
                       "anon_plateau_mib": round(statistics.median(anon_mids) / 1024, 1) if anon_mids else None,
                       "anon_final_mib": round(fin_anon / 1024, 1) if fin_anon else None,
                       "file_plateau_mib": round(statistics.median(file_mids) / 1024, 1) if file_mids else None,
                       "file_final_mib": round(fin_file / 1024, 1) if fin_file is not None else None,
                       "ok": change is not None and change <= RSS_TOLERANCE * 100}
    return out


LEVELS = ("trace", "debug", "info", "notice", "warning", "error", "critical")


def scan_log(path: Path) -> dict:
    counts = Counter()
    samples: Counter = Counter()
    if not path.exists():
        return {}
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("==== soak") or not line.strip():
            continue
        m = re.match(r"^\d{4}-\d\d-\d\dT\S+\s+(trace|debug|info|notice|warning|error|critical)\b", line)
        if not m:
            if not (line.startswith("  ") or re.match(r"^relay \S+ configuration:", line)):
                counts["other"] += 1
                samples[f"other: {line[:160]}"] += 1
            continue
        level = m.group(1)
        counts[level] += 1
        if level in ("warning", "error", "critical"):
            msg = line[m.end():].strip()
            msg = re.sub(r"\d+", "N", msg)[:160]
            samples[f"{level}: {msg}"] += 1
    return {"levels": dict(counts), "top": samples.most_common(12)}


# ------------------------------------------------------------------------------------------
# Main


async def main(args) -> int:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    for f in ("loads.jsonl", "rss.csv", "acked.csv"):
        (out / f).unlink(missing_ok=True)
    st = State()
    run_id = f"s{int(time.time())}"

    redis = RedisServer(work, free_port())
    await redis.start()
    st.note(f"redis-server on port {redis.port} (pid {redis.proc.pid})")
    nodes = []
    ports = set()
    for name in ("a", "b"):
        p = free_port()
        while p in ports or p == redis.port:
            p = free_port()
        ports.add(p)
        d = work / name
        d.mkdir()
        node = Node(name, args.relay, d, p, redis)
        await node.start()
        nodes.append(node)
        st.note(f"node {name} on port {p} (pid {node.proc.pid})")
    a = nodes[0]

    async with aiohttp.ClientSession(trust_env=False) as s:
        for _ in range(100):
            states = [await ready_state(n) for n in nodes]
            if all(isinstance(x, dict) and x.get("redis") == "up" for x in states):
                break
            await asyncio.sleep(0.2)
    st.note(f"ready: {[await ready_state(n) for n in nodes]}")

    monitor_stop = asyncio.Event()
    sampler_task = asyncio.create_task(sampler(nodes, redis, st, out, monitor_stop))
    watchdog_task = asyncio.create_task(watchdog(nodes, redis, st, monitor_stop))

    rounds = max(1, int(round(args.minutes * 60 / ROUND_SECONDS)))
    every = max(2, args.fault_every)
    # Node kills only in the first half: a restarted node refills its SQLite page cache for ~10
    # minutes (up to 64 MiB per connection), so its plateau needs the second half to settle.
    kill_at = {r for r in range(rounds) if r % every == 1 and (rounds < 10 or r < rounds // 2)}
    redis_at = {r for r in range(rounds) if r % every == (1 + every // 2) % every and r not in kill_at}
    st.note(f"{rounds} rounds; kill -9 node a in rounds {sorted(kill_at)}; redis restart in rounds {sorted(redis_at)}")

    load_start = now()
    st.phase = "load"
    hard_deadline = load_start + rounds * ROUND_SECONDS + 600
    bg_deadline = load_start + rounds * ROUND_SECONDS + 30
    writers = [asyncio.create_task(receipt_writer(i, nodes, st, bg_deadline, run_id)) for i in range(RECEIPT_WRITERS)]
    churners = [asyncio.create_task(churn_worker(i, nodes, st, bg_deadline)) for i in range(CHURN_WORKERS)]
    mixed = [asyncio.create_task(mixed_worker(i, nodes, st, bg_deadline)) for i in range(args.mixed_clients)]
    background = writers + churners + mixed
    attacker = None
    # --attacker-alternate: the attacker runs in rounds 0-1, 4-5, 8-9, … and pauses (between
    # attacks) in rounds 2-3, 6-7, …, so each scenario has rounds with and without it in one run.
    pause_file = out / "attacker.paused"
    pause_file.unlink(missing_ok=True)
    attacker_rounds: list[int] = []
    cgroup = attacker_cgroup(args.attacker_cores) if args.attacker and args.attacker_cores > 0 else None
    if args.attacker:
        (out / "attacks.jsonl").unlink(missing_ok=True)
        attacker = start_attacker(nodes, rounds * ROUND_SECONDS, out, args.attacker_nice, cgroup,
                                  pause_file if args.attacker_alternate else None)
        st.note(f"attacker running (pid {attacker.pid}, nice {args.attacker_nice}, "
                f"cap {args.attacker_cores if cgroup else 'none'} cores)")

    for r in range(rounds):
        if now() > hard_deadline:
            st.note("hard deadline reached; ending the load phase early")
            break
        st.round = r
        round_start = load_start + r * ROUND_SECONDS
        if args.attacker and args.attacker_alternate:
            if (r // 2) % 2 == 0:
                pause_file.unlink(missing_ok=True)
                attacker_rounds.append(r)
            else:
                pause_file.touch()
        elif args.attacker:
            attacker_rounds.append(r)
        slow = r % 2 == 1
        st.note(f"round {r}: {'slow-consumer' if slow else 'fanout'}; receipts acked so far {st.receipts['acked']}")
        load_task = asyncio.create_task(run_relay_load(args, nodes, st, slow, out))

        async def round_side(r=r, round_start=round_start):
            await asyncio.sleep(max(0, round_start + 10 - now()))
            await flood(nodes[r % 2], st)
            await asyncio.sleep(max(0, round_start + 20 - now()))
            if r in kill_at:
                await kill_node(a, st)
            if r in redis_at:
                await restart_redis(redis, st)

        side = asyncio.create_task(round_side())
        await asyncio.gather(load_task, side)
        last = st.loads[-1] if st.loads else {}
        st.note(f"round {r} done: {last.get('scenario')} exit {last.get('exit')} sent {last.get('sent')} "
                f"deliveries {last.get('deliveries')} p99 {last.get('p99_ms')} ms; receipts {dict(st.receipts)}")
        await asyncio.sleep(max(0, round_start + ROUND_SECONDS - now()))

    load_end = now()
    # CPU each node spent since it (last) started, read before the drain: with and without the
    # attacker, node b's figure compares the same load phase (node b is never restarted).
    node_cpu = {n.name: {"pid": n.proc.pid, "cpu_s": cpu_seconds(n.proc.pid)} for n in nodes}
    st.stop.set()
    st.phase = "drain"
    st.note("load phase over; stopping writers, churn, mixed clients and the attacker")
    if attacker is not None:
        try:
            attacker.wait(60)
        except subprocess.TimeoutExpired:
            attacker.terminate()
            attacker.wait(10)
        REGISTRY.remove(attacker)
    throttling = attacker_throttling(cgroup)
    if cgroup is not None:
        try:
            cgroup.rmdir()
        except OSError:
            pass
    done, not_done = await asyncio.wait(background, timeout=ACK_TIMEOUT + 30)
    for t in not_done:
        t.cancel()
    for t in done:
        if t.exception():
            st.note(f"background task failed: {t.exception()!r}")
    metrics_end = {n.name: await metrics(n) for n in nodes}
    st.phase = "quiet"
    st.note(f"quiet period {args.quiet:.0f}s")
    await asyncio.sleep(args.quiet)
    monitor_stop.set()
    await asyncio.gather(sampler_task, watchdog_task)
    take_sample(None, nodes, redis, st, phase="final")
    final = {s["node"]: s["rss_kib"] for s in SAMPLES if s["phase"] == "final"}
    with open(out / "rss.csv", "a", newline="") as f:
        w = csv.writer(f)
        for s in SAMPLES:
            if s["phase"] == "final":
                w.writerow(csv_row(s))
    ready_end = {n.name: await ready_state(n) for n in nodes}

    st.note("SIGTERM both nodes")
    exit_codes = {}
    for n in nodes:
        t = now()
        exit_codes[n.name] = n.terminate(timeout=60)
        st.note(f"node {n.name} exited {exit_codes[n.name]} after {now() - t:.1f}s")
    redis.stop()

    with open(out / "acked.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["node", "message_id", "user_id", "kind", "ack_id"])
        w.writerows(st.acked)
    receipts = verify_receipts(nodes, st)
    rss = rss_analysis(nodes, load_start, load_end, final)
    crashes = {n.name: n.crashes for n in nodes}
    redis_crashes = [f for f in st.faults if f["kind"] == "redis-crash"]
    loads_failed = [{"round": x["round"], "scenario": x["scenario"], "exit": x["exit"],
                     "connect_failures": x["report"].get("connect_failures", x["report"].get("baseline.connect_failures")),
                     "errors": {k: v for k, v in x["report"].items() if "error[" in k or "closed_by_server" in k}}
                    for x in st.loads if x["exit"] != 0]
    kill_rounds = {f["round"] for f in st.faults if f["kind"] != "redis-crash"}
    # A node is down from its kill -9 until it answers again (a few seconds): attacks and
    # clients that meet it then fail by design.
    fault_windows = [(time.time() - now() + f["at"] - 1, time.time() - now() + f["at"] + 20) for f in st.faults if "at" in f]
    attacks = attack_summary(out, fault_windows) if args.attacker else None
    clean_rounds = [x for x in st.loads if x["round"] not in kill_rounds and x["exit"] == 0 and x.get("p99_ms") is not None]
    p99_fanout = [x["p99_ms"] for x in clean_rounds if x["scenario"] == "fanout"]
    p99_slow = [x["p99_ms"] for x in clean_rounds if x["scenario"] != "fanout"]
    summary = {
        "binary": args.relay,
        "duration_s": round(now(), 1),
        "load_phase_s": round(load_end - load_start, 1),
        "rounds": len(st.loads),
        "node_cpu_at_load_end": node_cpu,
        "attacker_cpu": attacker_cpu(out) if args.attacker else None,
        "attacker_rounds": attacker_rounds if args.attacker else None,
        "attacker_cap": {"cores": args.attacker_cores, "cpu_stat": throttling} if cgroup is not None else None,
        "relay_load": {
            "runs": len(st.loads),
            "sent": sum(x["sent"] for x in st.loads),
            "deliveries": sum(x["deliveries"] for x in st.loads),
            "nonzero_exit": len(loads_failed),
            "nonzero_exit_in_fault_rounds": sum(1 for x in loads_failed if x["round"] in kill_rounds),
            "failed_runs": loads_failed,
            "p99_ms_per_round": [x.get("p99_ms") for x in st.loads],
            "p99_ms_median_fanout_rounds_without_faults": statistics.median(p99_fanout) if p99_fanout else None,
            "p99_ms_median_slow_consumer_rounds_without_faults": statistics.median(p99_slow) if p99_slow else None,
        },
        "mixed_clients": {"count": args.mixed_clients, **dict(st.mixed),
                          "drops_outside_fault_rounds": [d for d in st.mixed_drops if d["round"] not in kill_rounds and d["round"] - 1 not in kill_rounds][:20]},
        "attacks": attacks,
        "receipts": {**receipts, "counters": dict(st.receipts)},
        "churn": dict(st.churn),
        "floods": {"count": len(st.floods),
                   "ping_mib": round(sum(f.get("ping_bytes", 0) for f in st.floods) / 2**20, 1),
                   "http_mib": round(sum(f.get("http_bytes", 0) for f in st.floods) / 2**20, 1),
                   "errors": [f for f in st.floods if "ping_error" in f or "http_error" in f][:5]},
        "faults": st.faults,
        "crashes": {k: [{"at": c["at"], "exit": c["exit"]} for c in v] for k, v in crashes.items()},
        "redis_crashes": redis_crashes,
        "shutdown_exit_codes": exit_codes,
        "rss": rss,
        "ready_at_end": ready_end,
        "metrics_at_end_of_load": {n: {k: v for k, v in m.items() if any(x in k for x in (
            "slow_consumer", "redis", "receipts_stored", "replicat", "connections ", "rate_limited",
            "dropped", "closes"))} for n, m in metrics_end.items()},
        "logs": {n.name: scan_log(n.log) for n in nodes},
        "events": st.events,
    }
    checks = {
        "no_crash": not any(crashes.values()) and not redis_crashes,
        "graceful_shutdown_exit_0": all(c == 0 for c in exit_codes.values()),
        "every_acked_receipt_present": receipts["missing"] == 0 and receipts["acked"] > 0,
        # Replicated to the other node too, Redis kill -9s included (#31: a node replays what a
        # Redis that lost its data had accepted).
        "every_acked_receipt_on_every_node": receipts["not_replicated_to_peer"] == 0 and receipts["acked"] > 0,
        "ack_ids_match_db": receipts["id_mismatch"] == 0,
        "final_rss_within_10_percent": all(v["ok"] for v in rss.values()),
    }
    if attacks is not None:
        checks["every_attack_refused_or_bounded"] = attacks["count"] > 0 and attacks["unexpected_count"] == 0
    summary["checks"] = checks
    summary["passed"] = all(checks.values())
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    for n in nodes:
        for i, c in enumerate(n.crashes):
            (out / f"crash-{n.name}-{i}.log").write_text(c["log_tail"])

    lines = [
        f"soak: {summary['duration_s']:.0f} s in total, load phase {summary['load_phase_s']:.0f} s, {summary['rounds']} rounds",
        f"relay-load: {summary['relay_load']['runs']} runs, {summary['relay_load']['sent']} messages sent, "
        f"{summary['relay_load']['deliveries']} deliveries; {len(loads_failed)} runs exited non-zero "
        f"({summary['relay_load']['nonzero_exit_in_fault_rounds']} of them in kill -9 rounds)",
        f"receipts: {receipts['acked']} acked ({receipts['acked_per_node']}), {receipts['verified']} verified in the "
        f"acking node's database, {receipts['missing']} missing, {receipts['id_mismatch']} with another id; "
        f"replicated to the other node: {receipts['replicated_to_peer']}, not: {receipts['not_replicated_to_peer']} "
        f"({receipts['not_replicated_within_5s_before_a_redis_kill']} of them acked within 5 s before a Redis kill -9); "
        f"database sizes {receipts['db_bytes']}",
        f"receipt counters: {dict(st.receipts)}",
        f"churn: {dict(st.churn)}",
        f"mixed clients ({args.mixed_clients}, polling-only and default): {dict(st.mixed)}; "
        f"drops outside fault rounds: {len(summary['mixed_clients']['drops_outside_fault_rounds'])}",
        f"relay-load p99, median of rounds without faults: fan-out {summary['relay_load']['p99_ms_median_fanout_rounds_without_faults']} ms, "
        f"slow-consumer {summary['relay_load']['p99_ms_median_slow_consumer_rounds_without_faults']} ms",
        f"CPU at the end of the load phase: {node_cpu}; attacker: {summary['attacker_cpu']}, cap: {summary['attacker_cap']}",
        (f"attacks: {attacks['count']} ({attacks['unexpected_count']} unexpected): {attacks['by_attack']}" if attacks is not None else "attacks: none (no --attacker)"),
        f"floods: {summary['floods']['count']} ({summary['floods']['ping_mib']} MiB of pings, "
        f"{summary['floods']['http_mib']} MiB of pipelined requests)",
        f"faults: {sum(1 for f in st.faults if f['kind'] == 'kill-9 node')} kill -9 of node a, "
        f"{sum(1 for f in st.faults if f['kind'] == 'kill-9 redis')} kill -9 of redis-server",
        f"crashes: {summary['crashes']}, redis: {len(redis_crashes)}",
        f"SIGTERM exit codes: {exit_codes}",
    ]
    for name, v in rss.items():
        lines.append(f"RSS node {name}: plateau {v['plateau_mib']} MiB (median of {v['samples_in_last_third']} samples, "
                     f"{v['last_third_s'][0]}-{v['last_third_s'][1]} s), peak {v['peak_mib']} MiB, final {v['final_mib']} MiB "
                     f"({v['final_vs_plateau_percent']:+} %); of which anonymous {v['anon_plateau_mib']} -> {v['anon_final_mib']} MiB, "
                     f"file-backed {v['file_plateau_mib']} -> {v['file_final_mib']} MiB" if v["final_vs_plateau_percent"] is not None else
                     f"RSS node {name}: {v}")
    for name, lg in summary["logs"].items():
        lines.append(f"log node {name}: {lg.get('levels')}")
        for msg, c in lg.get("top", [])[:6]:
            lines.append(f"    {c} x {msg}")
    lines.append("checks: " + ", ".join(f"{k}={'ok' if v else 'FAILED'}" for k, v in checks.items()))
    lines.append("PASSED" if summary["passed"] else "FAILED")
    text = "\n".join(lines)
    (out / "summary.txt").write_text(text + "\n")
    print(text, flush=True)
    return 0 if summary["passed"] else 1


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--relay", required=True, help="relay binary")
    p.add_argument("--relay-load", required=True, help="relay-load binary")
    p.add_argument("--minutes", type=float, default=30, help="length of the load phase (rounds of ~60 s)")
    p.add_argument("--out", required=True, help="output directory (rss.csv, loads.jsonl, acked.csv, summary.*, work/)")
    p.add_argument("--fault-every", type=int, default=5, help="rounds between two kill -9 of node a (and of Redis)")
    p.add_argument("--quiet", type=float, default=60, help="seconds of quiet before the last RSS sample")
    p.add_argument("--load-seconds", type=float, default=40, help="measured seconds of each relay-load run")
    p.add_argument("--mixed-clients", type=int, default=8, help="python-socketio clients (half polling-only) sending binary events")
    p.add_argument("--attacker", action="store_true", help="run LoadTests/soak/attacker.py against both nodes for the whole load phase")
    p.add_argument("--attacker-nice", type=int, default=19,
                   help="niceness of the attacker process (0: none); on one machine it competes with the load for CPU")
    p.add_argument("--attacker-alternate", action="store_true",
                   help="with --attacker: attack in rounds 0-1, 4-5, … and pause in rounds 2-3, 6-7, … (compared within one run)")
    p.add_argument("--attacker-cores", type=float, default=0,
                   help="cap the attacker at this many cores in its own cgroup-v1 cpu group (0: no cap; needs root)")
    return p.parse_args()


if __name__ == "__main__":
    args = parse_args()
    for b in (args.relay, args.relay_load):
        if not os.access(b, os.X_OK):
            sys.exit(f"not executable: {b}")

    def on_sigterm(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    code = 2
    try:
        code = asyncio.run(main(args))
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        code = 130
    except Exception as exc:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        code = 2
    finally:
        REGISTRY.stop_all()
    sys.exit(code)
