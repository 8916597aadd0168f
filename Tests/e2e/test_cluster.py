"""Two relay nodes sharing rooms through a real redis-server: cross-node fan-out, user events,
cluster presence (a SIGKILLed node leaves it), receipts acked on one node synced on another,
and Redis killed and restarted mid-test."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from conftest import RelayProcess
from helpers import ADMIN_KEY, API_KEY, TIMEOUT, Clients, async_test, emit_api, http, mint_token
# Re-exported: other modules import the servers and the port helper from here.
from redis_servers import RedisServer, assert_no_cross_slot, free_port, redis_kind, redis_server  # noqa: F401 - fixtures

HEARTBEAT_MS = 300


async def eventually(check, timeout: float = 15, what: str = "condition"):
    """Re-checks `check()` (an async predicate that does a real round trip) until it holds,
    bounded by `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if await check():
            return
        assert loop.time() < deadline, f"{what} did not hold within {timeout} s"
        await asyncio.sleep(0.05)


async def subscribers(redis: RedisServer, channel: str, expected: int) -> bool:
    """Whether `channel` has `expected` (sharded) subscribers, asked of the Redis node that
    owns it."""
    out = redis.cli("PUBSUB", "SHARDNUMSUB", channel, key=channel).split()
    return len(out) >= 2 and int(out[1]) == expected


@pytest.fixture
def cluster(tmp_path, redis_server):
    """Relay nodes a and b on `redis_server` (each Redis kind)."""
    redis = redis_server
    nodes = []
    try:
        for name in ("a", "b"):
            d = tmp_path / name
            d.mkdir()
            nodes.append(RelayProcess(d, ["--redis", redis.url, "--node-id", f"node-{name}", "--cluster-heartbeat-ms", str(HEARTBEAT_MS)]).start())
        yield redis, nodes[0], nodes[1]
        assert_no_cross_slot(redis, *nodes)
    finally:
        for n in nodes:
            n.stop()


async def wait_linked(*nodes):
    for n in nodes:
        async def up(n=n):
            status, body = await http(n, "GET", "/admin/v1/ready", key=ADMIN_KEY)
            return status == 200 and body.get("redis") == "up"
        await eventually(up, what="redis link up")


@async_test
async def test_cross_node_rooms_users_presence_and_receipts(cluster):
    redis, a, b = cluster
    await wait_linked(a, b)
    room = "conversation:cluster"
    async with Clients() as c:
        alice = await c.connect(a, "alice")
        bob = await c.connect(b, "bob")
        bob_on_a = await c.connect(a, "bob", name="bob-on-a")
        assert (await alice.join(room))["presence"] == [{"user": "alice", "devices": 1}]
        joined = await bob.join(room)
        assert joined["presence"] == [{"user": "alice", "devices": 1}, {"user": "bob", "devices": 1}], "cluster-wide presence"
        await alice.expect("presence:join", user="bob", room=room)
        # bob's second device, on the other node: no second presence:join, devices counted cluster-wide.
        await bob_on_a.join(room)
        listed = await bob.ok("presence:list", {"room": room})
        assert listed["presence"] == [{"user": "alice", "devices": 1}, {"user": "bob", "devices": 2}]

        # Room fan-out across nodes, both ways.
        await alice.ok("message:reaction", {"room": room, "messageId": "m1", "emoji": "👍", "action": "add"})
        got = await bob.expect("message:reaction", messageId="m1")
        assert got["from"] == "alice"
        await bob.ok("note:new", {"room": room, "text": "from b"})
        assert (await alice.expect("note:new"))["text"] == "from b"
        # Typing, coalesced on the origin node, reaches the other node.
        await alice.ok("typing:start", {"room": room})
        await bob.expect("typing:start", **{"from": "alice"})

        # A user event emitted on node A reaches the user's devices on both nodes.
        status, body = await emit_api(a, "notification:new", {"user": "bob"}, {"title": "hello"})
        assert status == 200
        await bob.expect("notification:new", title="hello")
        await bob_on_a.expect("notification:new", title="hello")

        # A receipt acked on node B is forwarded live to the author on node A…
        ack = await bob.ok("message:read", {"room": room, "messageId": "m1", "authorId": "alice"})
        assert isinstance(ack["id"], int)
        live = await alice.expect("message:read", messageId="m1")
        assert live["userId"] == "bob"

        # …and receipt:sync on node A (and B) returns it, with the same cluster cursor.
        async def synced(client):
            reply = await client.call("receipt:sync", {"since": 0})
            return reply["ok"] and [(r["messageId"], r["userId"], r["kind"]) for r in reply["receipts"]] == [("m1", "bob", "read")]
        await eventually(lambda: synced(alice), what="receipt replicated to node A")
        author_on_b = await c.connect(b, "alice", name="alice-on-b")
        await eventually(lambda: synced(author_on_b), what="receipt visible on node B")
        ra = (await alice.call("receipt:sync", {"since": 0}))["receipts"][0]
        rb = (await author_on_b.call("receipt:sync", {"since": 0}))["receipts"][0]
        assert ra == rb, "every node agrees on the cluster cursor"
        assert (await alice.call("receipt:sync", {"since": ra["id"]}))["receipts"] == []

        # Both nodes have members, so both subscribe to the room's channel.
        await eventually(lambda: subscribers(redis, f"relay:room:{{{room}}}", 2), what="two nodes subscribed")

        # bob's last device leaving: presence:leave on the other node…
        await bob_on_a.ok("room:leave", {"room": room})
        await bob.ok("room:leave", {"room": room})
        await alice.expect("presence:leave", user="bob", room=room)
        # …and node B, with no member left, unsubscribes: it no longer receives the room.
        await eventually(lambda: subscribers(redis, f"relay:room:{{{room}}}", 1), what="node B unsubscribed")


@async_test
async def test_sigkilled_node_leaves_presence_in_bounded_time(cluster):
    _, a, b = cluster
    await wait_linked(a, b)
    room = "conversation:failover"
    async with Clients() as c:
        alice = await c.connect(a, "alice")
        await alice.join(room)
        bob = await c.connect(b, "bob")
        await bob.join(room)
        await alice.expect("presence:join", user="bob", room=room)
        loop = asyncio.get_running_loop()
        killed_at = loop.time()
        os.kill(b.proc.pid, signal.SIGKILL)
        # Documented bound: 3 heartbeats of silence, plus up to one heartbeat to notice.
        await alice.expect("presence:leave", user="bob", room=room, timeout=15)
        elapsed = loop.time() - killed_at
        assert elapsed <= 4 * HEARTBEAT_MS / 1000 + 2, f"took {elapsed:.2f} s"
        listed = await alice.ok("presence:list", {"room": room})
        assert listed["presence"] == [{"user": "alice", "devices": 1}]


@async_test
async def test_losing_redis_degrades_to_local_and_recovers(cluster):
    redis, a, b = cluster
    await wait_linked(a, b)
    room = "conversation:outage"
    async with Clients() as c:
        alice = await c.connect(a, "alice")
        carol = await c.connect(a, "carol")
        bob = await c.connect(b, "bob")
        for cl in (alice, carol, bob):
            await cl.join(room)

        redis.kill()

        async def degraded():
            status, body = await http(a, "GET", "/admin/v1/ready", key=ADMIN_KEY)
            return status == 200 and body["redis"] == "down" and body["degraded"] is True
        await eventually(degraded, what="node A reports degraded")
        # Node-local delivery goes on.
        await alice.ok("note:new", {"room": room, "n": 1})
        assert (await carol.expect("note:new"))["n"] == 1
        status, metrics = await http(a, "GET", "/metrics", key=None)
        assert "relay_redis_link_up 0" in metrics
        degraded_count = [l for l in metrics.splitlines() if l.startswith("relay_redis_degraded_total ")]
        assert degraded_count and float(degraded_count[0].split()[1]) >= 1

        # Redis back on the same port (empty): the nodes reconnect and resubscribe by themselves.
        redis.start()
        await wait_linked(a, b)
        seq = 0

        async def crosses():
            nonlocal seq
            seq += 1
            await alice.emit("note:new", {"room": room, "probe": seq})
            try:
                await bob.expect("note:new", where=lambda d: d.get("probe") == seq, timeout=0.5)
                return True
            except AssertionError:
                return False
        await eventually(crosses, what="cross-node delivery after Redis returned")
        # Presence was restated in the new Redis (once it takes writes: a restarted cluster
        # node refuses them for its first seconds, so the restatement may land after delivery
        # works again).
        async def restated():
            listed = await bob.ok("presence:list", {"room": room})
            return [e["user"] for e in listed["presence"]] == ["alice", "bob", "carol"]
        await eventually(restated, what="presence restated in the new Redis")


def test_load_generator_multi_node_mode(cluster):
    """`relay-load fanout --nodes a,b` spreads every room over both nodes."""
    from test_load_generator import run_load
    from helpers import JWT_SECRET
    import asyncio as _asyncio
    _, a, b = cluster
    _asyncio.run(wait_linked(a, b))
    out = run_load("fanout", "--nodes", f"127.0.0.1:{a.port},127.0.0.1:{b.port}", "--secret", JWT_SECRET,
                   "--rooms", 2, "--members", 4, "--senders", 2, "--rate", 50, "--duration", 1, "--warmup", 0.3,
                   "--max-error-rate", 1)
    assert out["nodes"] == 2 and out["deliveries"] > 0


@async_test
async def test_backend_ends_a_users_sessions_on_every_node(cluster):
    redis, a, b = cluster
    await wait_linked(a, b)
    import time as _time
    old = mint_token("grace", iat=int(_time.time()) - 60)
    async with Clients() as c:
        on_a = await c.connect(a, "grace", token=old, name="grace-a")
        on_b = await c.connect(b, "grace", token=old, name="grace-b")
        other = await c.connect(b, "heidi")
        status, body = await http(a, "POST", "/api/v1/users/grace/disconnect", body={"revoke": True})
        assert status == 200 and body["disconnected"] == 1 and body["revoked"] is True, body

        async def both_gone():
            return not on_a.connected and not on_b.connected
        await eventually(both_gone, what="grace's sockets closed on both nodes")
        assert other.connected
    # Node B refuses the revoked token too (it learnt the revocation through Redis).
    for node in (a, b):
        refused = Clients()
        async with refused:
            try:
                await refused.connect(node, "grace", token=old)
                raise AssertionError(f"revoked token connected to {node.url}")
            except Exception as error:  # python-socketio: ConnectionError
                assert "connected to" not in str(error)
