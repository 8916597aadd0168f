"""Signed webhooks (docs/PROTOCOL.md §13) against a real HTTP receiver (aiohttp on 127.0.0.1):
retries through a receiver that answers 503 for a while, signatures, event ids stable across
retries, online/offline pairs and their duration; and in a two-node cluster on a real
redis-server, exactly one `user:online` / `user:offline` per user whatever the nodes, including
after a node is SIGKILLed."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import signal
import time

from aiohttp import web

from conftest import RelayProcess
from helpers import Clients, async_test, http
from redis_servers import assert_no_cross_slot, redis_kind, redis_server  # noqa: F401 - fixtures
from test_cluster import HEARTBEAT_MS, wait_linked

SECRET = "whsec-e2e-0123456789abcdef-0123456789abcdef"
TOLERANCE_S = 300


def verify(secret: str, header: str, body: bytes, now: float | None = None) -> bool:
    """The verification PROTOCOL §13 documents: t and v1 from the header, HMAC-SHA256 over
    `<t>.<body>`, constant-time compare, replay window."""
    parts = dict(p.strip().split("=", 1) for p in header.split(",") if "=" in p)
    t = int(parts["t"])
    if abs((now or time.time()) - t) > TOLERANCE_S:
        return False
    expected = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts.get("v1", ""))


class Receiver:
    """A webhook endpoint that records every request and answers 503 while `failing`."""

    def __init__(self):
        self.requests: list[dict] = []  # every request, failed ones included
        self.failing = False
        self.changed = asyncio.Event()
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        status = 503 if self.failing else 200
        self.requests.append({
            "status": status,
            "signature": request.headers.get("X-Relay-Signature", ""),
            "delivery": request.headers.get("X-Relay-Delivery", ""),
            "attempt": int(request.headers.get("X-Relay-Attempt", "0")),
            "content_type": request.headers.get("Content-Type", ""),
            "body": body,
            "json": json.loads(body),
            "at": time.time(),
        })
        self.changed.set()
        return web.Response(status=status, text="ok" if status == 200 else "unavailable")

    async def start(self) -> "Receiver":
        app = web.Application()
        app.router.add_post("/hook", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def stop(self):
        if self.runner:
            await self.runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def delivered(self) -> list[dict]:
        """Events of the requests answered 200, deduplicated by event id (at least once)."""
        seen: dict[str, dict] = {}
        for r in self.requests:
            if r["status"] == 200:
                for e in r["json"]["events"]:
                    seen.setdefault(e["id"], e)
        return list(seen.values())

    def of(self, type_: str, **data) -> list[dict]:
        return [e for e in self.delivered() if e["type"] == type_ and all(e["data"].get(k) == v for k, v in data.items())]

    async def wait_for(self, check, timeout: float = 20, what: str = "webhooks"):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not check():
            remaining = deadline - loop.time()
            assert remaining > 0, f"{what} not delivered within {timeout} s; got {[(e['type'], e['data']) for e in self.delivered()]}"
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), min(remaining, 0.5))
            except asyncio.TimeoutError:
                pass


async def scrape(relay) -> str:
    status, text = await http(relay, "GET", "/metrics")
    assert status == 200
    return text if isinstance(text, str) else json.dumps(text)


def webhook_flags(receiver: Receiver, *extra) -> list[str]:
    return ["--webhook-url", receiver.url, "--webhook-secret", SECRET, "--webhook-flush-ms", "50",
            "--webhook-max-backoff-ms", "400", *extra]


def check_requests(receiver: Receiver):
    """Every request is signed and well formed; a delivery id always carries the same body
    (so the same event ids) on every attempt; no event id appears in two deliveries."""
    assert receiver.requests
    by_delivery: dict[str, bytes] = {}
    owner: dict[str, str] = {}
    for r in receiver.requests:
        assert r["content_type"].startswith("application/json")
        assert verify(SECRET, r["signature"], r["body"], now=r["at"]), f"bad signature {r['signature']}"
        assert not verify("another-secret-of-at-least-32-chars!!", r["signature"], r["body"], now=r["at"])
        assert r["json"]["id"] == r["delivery"]
        if r["delivery"] in by_delivery:
            assert by_delivery[r["delivery"]] == r["body"], "a retry carries the same body"
        by_delivery[r["delivery"]] = r["body"]
        for e in r["json"]["events"]:
            assert owner.setdefault(e["id"], r["delivery"]) == r["delivery"], f"event {e['id']} in two deliveries"


@async_test
async def test_webhooks_retry_sign_and_pair_online_offline(start_relay):
    receiver = await Receiver().start()
    receiver.failing = True
    try:
        relay = start_relay(*webhook_flags(receiver, "--webhook-events", "message:read,chat:seen", "--webhook-batch-size", "3"))
        room = "conversation:wh"
        async with Clients() as c:
            alice = await c.connect(relay, "alice")
            alice_connected = time.monotonic()
            await alice.join(room)
            bob = await c.connect(relay, "bob")
            bob_phone = await c.connect(relay, "bob", name="bob-phone")
            await bob.join(room)
            await bob.ok("chat:seen", {"room": room, "upTo": "m-7"})
            await bob.ok("message:read", {"room": room, "messageId": "m-7", "authorId": "alice"})
            await bob.ok("note:new", {"room": room, "text": "not allow-listed"})
            # The receiver fails until the relay has retried a few times.
            await receiver.wait_for(lambda: sum(r["status"] == 503 for r in receiver.requests) >= 3, what="failed attempts")
            receiver.failing = False
            await asyncio.sleep(0.3)
            await alice.disconnect()
            alice_online_s = time.monotonic() - alice_connected
            await bob.disconnect()
            # bob still has his phone: not offline yet.
            await receiver.wait_for(lambda: receiver.of("user:offline", user="alice") and receiver.of("message:read"),
                                    what="alice offline")
            assert receiver.of("user:offline", user="bob") == []
            await bob_phone.disconnect()
            await receiver.wait_for(lambda: receiver.of("user:offline", user="bob") and receiver.of("room:vacated", room=room),
                                    what="bob offline, room vacated")

        check_requests(receiver)
        assert any(r["status"] == 503 for r in receiver.requests) and any(r["attempt"] > 1 for r in receiver.requests)
        # A delivery retried after 503s was eventually answered 200.
        retried = {r["delivery"] for r in receiver.requests if r["status"] == 503}
        ok = {r["delivery"] for r in receiver.requests if r["status"] == 200}
        assert retried <= ok, "every failed delivery was retried until it succeeded"

        for user in ("alice", "bob"):
            online, offline = receiver.of("user:online", user=user), receiver.of("user:offline", user=user)
            assert len(online) == 1 and len(offline) == 1, (user, online, offline)
            assert online[0]["ts"] <= offline[0]["ts"]
            assert isinstance(offline[0]["data"]["onlineMs"], int)
        alice_ms = receiver.of("user:offline", user="alice")[0]["data"]["onlineMs"]
        assert alice_online_s * 1000 - 1000 <= alice_ms <= alice_online_s * 1000 + 1000, (alice_ms, alice_online_s)
        assert len(receiver.of("room:occupied", room=room)) == 1 and len(receiver.of("room:vacated", room=room)) == 1

        (seen,) = receiver.of("chat:seen")
        assert seen["data"]["room"] == room and seen["data"]["from"] == "bob" and seen["data"]["payload"]["upTo"] == "m-7"
        (read,) = receiver.of("message:read")
        assert read["data"]["from"] == "bob" and read["data"]["payload"]["messageId"] == "m-7"
        assert read["data"]["payload"]["authorId"] == "alice" and isinstance(read["ts"], int)
        assert receiver.of("note:new") == [], "only allow-listed client events"

        # Order per URL: events arrive in the order they happened (one batch in flight).
        order = [e["id"] for r in receiver.requests if r["status"] == 200 for e in r["json"]["events"]]
        first_seen = list(dict.fromkeys(order))
        types = [next(e for e in receiver.delivered() if e["id"] == i)["type"] for i in first_seen]
        assert types.index("user:online") < types.index("room:occupied") < types.index("chat:seen")

        metrics = await scrape(relay)
        assert "relay_webhook_retries_total" in metrics and "relay_webhook_deliveries_total" in metrics
        assert SECRET not in relay.log(), "the secret is never logged"
    finally:
        await receiver.stop()


@async_test
async def test_webhook_queue_overflow_drops_and_counts(start_relay):
    receiver = await Receiver().start()
    receiver.failing = True
    try:
        relay = start_relay(*webhook_flags(receiver, "--webhook-queue-size", "2", "--webhook-batch-size", "1"))
        async with Clients() as c:
            for i in range(5):
                await c.connect(relay, f"user{i}")
        metrics = ""
        for _ in range(100):
            metrics = await scrape(relay)
            dropped = [line for line in metrics.splitlines() if line.startswith("relay_webhook_dropped_total") and 'queue_full' in line]
            if dropped and float(dropped[0].split()[-1]) > 0:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"no drops counted:\n{metrics}")
        assert "webhook queue full" in relay.log()
    finally:
        await receiver.stop()


def test_webhook_flags_are_validated(start_relay, tmp_path):
    import subprocess
    from helpers import relay_binary
    out = subprocess.run([relay_binary(), "--port", "0", "--db", str(tmp_path / "x.sqlite"), "--webhook-url", "ftp://example/hook",
                          "--webhook-secret", "short"], capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert "webhook-url" in out.stderr + out.stdout and "webhook-secret" in out.stderr + out.stdout
    assert "short" not in (out.stderr + out.stdout).replace("--webhook-secret", "")


@async_test
async def test_cluster_sends_each_online_offline_once(tmp_path, redis_server):  # noqa: F811 - the imported fixture
    receiver = await Receiver().start()
    redis = redis_server
    nodes: list[RelayProcess] = []
    try:
        for name in ("a", "b"):
            d = tmp_path / name
            d.mkdir()
            nodes.append(RelayProcess(d, ["--redis", redis.url, "--node-id", f"node-{name}", "--cluster-heartbeat-ms", str(HEARTBEAT_MS),
                                          *webhook_flags(receiver)]).start())
        a, b = nodes
        await wait_linked(a, b)
        room = "conversation:wh-cluster"
        async with Clients() as c:
            alice_a = await c.connect(a, "alice", name="alice-a")
            await alice_a.join(room)
            await receiver.wait_for(lambda: receiver.of("user:online", user="alice") and receiver.of("room:occupied", room=room), what="alice online")
            alice_b = await c.connect(b, "alice", name="alice-b")
            await alice_b.join(room)
            await alice_a.disconnect()
            # Node A lost its last socket of alice, node B still has one: nothing to send.
            await asyncio.sleep(0.5)
            assert receiver.of("user:offline", user="alice") == [] and receiver.of("room:vacated", room=room) == []
            await alice_b.disconnect()
            await receiver.wait_for(lambda: receiver.of("user:offline", user="alice") and receiver.of("room:vacated", room=room), what="alice offline")
            # Whatever else might come late: wait a few flushes.
            await asyncio.sleep(0.5)
            assert len(receiver.of("user:online", user="alice")) == 1
            assert len(receiver.of("user:offline", user="alice")) == 1
            assert len(receiver.of("room:occupied", room=room)) == 1
            assert len(receiver.of("room:vacated", room=room)) == 1

            # A user on a node that is SIGKILLed goes offline exactly once (the survivor sweeps).
            bob = await c.connect(b, "bob")
            await bob.join(room)
            await receiver.wait_for(lambda: receiver.of("user:online", user="bob"), what="bob online")
            carol = await c.connect(a, "carol")
            os.kill(b.proc.pid, signal.SIGKILL)
            await receiver.wait_for(lambda: receiver.of("user:offline", user="bob") and receiver.of("room:vacated", room=room)
                                    and len(receiver.of("room:vacated", room=room)) == 2, timeout=20, what="bob swept offline")
            await asyncio.sleep(4 * HEARTBEAT_MS / 1000 + 0.5)
            assert len(receiver.of("user:offline", user="bob")) == 1
            assert receiver.of("user:offline", user="carol") == []
            await carol.disconnect()
            await receiver.wait_for(lambda: receiver.of("user:offline", user="carol"), what="carol offline")

        check_requests(receiver)
        nodes_seen = {r["json"]["node"] for r in receiver.requests}
        assert nodes_seen <= {"node-a", "node-b"}
        assert_no_cross_slot(redis, *nodes)
    finally:
        for n in nodes:
            n.stop()
        await receiver.stop()
