"""Durable receipts survive SIGKILL: every receipt the relay acknowledged is in the database
after a restart on the same file, exactly once.

Each cycle starts a relay on one SQLite file, has many clients send thousands of receipts
concurrently (acks pipelined), kills the relay with SIGKILL at a random moment after the first
acks, restarts it on the same file and checks every acked receipt through `receipt:sync` and the
HTTP API. Receipts acked in earlier cycles are sent again to check idempotency across restarts.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal

import aiohttp
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidMessage

from conftest import RelayProcess
from helpers import API_KEY, AckingSocket, mint_token, run

CYCLES = 3
WRITERS = 8
RECEIPTS_PER_WRITER = 600
IN_FLIGHT = 64
ROOM = "conversation:crash"
# Generous per-kind budgets: this test is about durability, not rate limits.
RELAY_FLAGS = ["--events-per-second", "100000", "--event-burst", "100000", "--rate", "receipt=100000:100000"]


class RawClient(AckingSocket):
    """A pipelining Socket.IO client that has joined ROOM."""

    @classmethod
    async def connect(cls, port: int, user: str) -> "RawClient":
        client = await cls.open(f"ws://127.0.0.1:{port}/socket.io/?EIO=4&transport=websocket",
                                mint_token(user, rooms=["conversation:*"]))
        ack = await client.call("room:join", {"room": ROOM})
        assert ack["ok"], ack
        return client


def receipt(cycle: int, writer: int, n: int) -> tuple[str, str, str]:
    kind = "message:read" if n % 3 == 0 else "message:delivered"
    return (f"c{cycle}-w{writer}-m{n}", f"reader{writer}", kind)


async def write_until_killed(port: int, cycle: int, acked: dict, first_ack: asyncio.Event, replay: list):
    """Sends receipts from WRITERS clients until the relay dies; records every ack."""

    async def writer(w: int):
        try:
            client = await RawClient.connect(port, f"reader{w}")
        except (OSError, ConnectionClosed, InvalidHandshake, InvalidMessage, AssertionError):
            return
        # Receipts acked in earlier cycles go first, so every cycle sends some again
        # before the kill: each must be acked with the cursor it had.
        todo = [(m, u, f"message:{k}") for (m, u, k) in replay if u == f"reader{w}"]
        todo += [receipt(cycle, w, n) for n in range(RECEIPTS_PER_WRITER)]
        sem = asyncio.Semaphore(IN_FLIGHT)

        async def send(r):
            message_id, _, kind = r
            async with sem:
                try:
                    ack = await client.call(kind, {"room": ROOM, "messageId": message_id, "authorId": "author"})
                except (ConnectionError, ConnectionClosed, asyncio.TimeoutError):
                    return
                assert ack.get("ok") is True, ack
                key = (message_id, r[1], kind.split(":")[1])
                previous = acked.get(key)
                assert previous is None or previous == ack["id"], f"{key} acked as {previous} and {ack['id']}"
                acked[key] = ack["id"]
                first_ack.set()

        await asyncio.gather(*(send(r) for r in todo))
        await client.close()

    await asyncio.gather(*(writer(w) for w in range(WRITERS)))


async def all_receipts(port: int) -> list[dict]:
    """Every receipt on messages by `author`, paged through receipt:sync."""
    client = await RawClient.connect(port, "author")
    out, since = [], 0
    while True:
        ack = await client.call("receipt:sync", {"since": since, "limit": 1000})
        assert ack["ok"], ack
        out += ack["receipts"]
        if not ack["receipts"]:
            break
        assert ack["next"] == ack["receipts"][-1]["id"]
        since = ack["next"]
    await client.close()
    return out


async def http_receipts(port: int, message_id: str) -> list[dict]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/api/v1/receipts", params={"messageId": message_id},
                            headers={"Authorization": f"Bearer {API_KEY}"}) as r:
            assert r.status == 200
            return (await r.json())["receipts"]


def test_acked_receipts_survive_sigkill(tmp_path):
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    acked: dict[tuple[str, str, str], int] = {}
    relay = None
    try:
        for cycle in range(CYCLES):
            relay = RelayProcess(tmp_path, RELAY_FLAGS).start()
            replay = rng.sample(sorted(acked), min(200, len(acked)))
            before = len(acked)

            async def cycle_run():
                first_ack = asyncio.Event()
                writers = asyncio.create_task(write_until_killed(relay.port, cycle, acked, first_ack, replay))
                await asyncio.wait_for(first_ack.wait(), 30)
                # A random moment after the first acks, while receipts are in flight.
                await asyncio.sleep(rng.uniform(0.05, 0.6))
                os.kill(relay.proc.pid, signal.SIGKILL)
                await asyncio.wait_for(writers, 60)

            run(cycle_run(), timeout=120)
            relay.proc.wait(10)
            assert relay.proc.returncode == -signal.SIGKILL
            assert len(acked) > before, "no receipt was acked before the kill"
            print(f"cycle {cycle}: {len(acked) - before} new receipts acked before SIGKILL")

            relay = RelayProcess(tmp_path, RELAY_FLAGS).start()
            stored = run(all_receipts(relay.port))
            keys = [(r["messageId"], r["userId"], r["kind"]) for r in stored]
            assert len(keys) == len(set(keys)), "a receipt is stored twice"
            by_key = {k: r["id"] for k, r in zip(keys, stored)}
            missing = [k for k in acked if k not in by_key]
            assert not missing, f"{len(missing)} acked receipts lost after SIGKILL, e.g. {missing[:3]}"
            changed = [k for k in acked if by_key[k] != acked[k]]
            assert not changed, f"cursor changed for {changed[:3]}"
            for key in rng.sample(sorted(acked), 5):
                found = run(http_receipts(relay.port, key[0]))
                assert [(r["userId"], r["kind"], r["id"]) for r in found if r["userId"] == key[1] and r["kind"] == key[2]] \
                    == [(key[1], key[2], acked[key])]
            relay.stop()
            relay = None
    finally:
        if relay is not None:
            relay.stop()
