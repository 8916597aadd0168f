"""The backend API across nodes: two relay nodes on a real redis-server behind the real HAProxy
configuration of deploy/ (test_sticky_cluster.py's `Balancer`). Emit recipients are counted on
every node (per user when asked, `to.users`), the presence queries answer the same from both
nodes and through the balancer, coalesced emits reach a socket at most once per window with the
latest data whichever node took them, and a node without Redis answers `degraded`."""

from __future__ import annotations

import asyncio

import pytest

from conftest import RelayProcess
from helpers import ADMIN_KEY, Clients, async_test, emit_api, http
from redis_servers import assert_no_cross_slot, redis_kind, redis_server  # noqa: F401 - fixtures
from test_cluster import eventually, wait_linked
from test_sticky_cluster import Balancer, ready_through

HEARTBEAT_MS = 300


@pytest.fixture
def haproxy_cluster(tmp_path, redis_server):  # noqa: F811 - the imported fixture
    """Redis (each kind), relay nodes a and b, and deploy/haproxy.cfg in front of them."""
    redis = redis_server
    nodes: list[RelayProcess] = []
    balancer: Balancer | None = None
    try:
        for name in ("a", "b"):
            d = tmp_path / name
            d.mkdir()
            nodes.append(RelayProcess(d, ["--redis", redis.url, "--node-id", f"node-{name}",
                                          "--cluster-heartbeat-ms", str(HEARTBEAT_MS)]).start())
        lb_dir = tmp_path / "haproxy"
        lb_dir.mkdir()
        balancer = Balancer("haproxy", lb_dir, [n.port for n in nodes]).start()
        yield redis, nodes[0], nodes[1], balancer
        assert_no_cross_slot(redis, *nodes)
    finally:
        if balancer is not None:
            balancer.stop()
        for n in nodes:
            n.stop()


async def ready(a, b, balancer):
    await wait_linked(a, b)
    await ready_through(balancer)


async def presence(relay, user: str) -> dict:
    status, body = await http(relay, "GET", f"/api/v1/users/{user}/presence")
    assert status == 200, body
    return body


async def batch(relay, users: list[str]) -> dict:
    status, body = await http(relay, "POST", "/api/v1/presence", body={"users": users})
    assert status == 200, body
    return body


async def same_everywhere(relays, query):
    """`query(relay)` answers the same on every relay; returns that answer."""
    answers = [await query(r) for r in relays]
    assert all(a == answers[0] for a in answers), answers
    return answers[0]


async def devices_are(relays, expected: dict[str, int]):
    """Waits until every node's directory has `expected` sockets per user (connects are written
    to Redis as they happen, not before the CONNECT answer)."""
    async def check():
        for r in relays:
            body = await batch(r, list(expected))
            if {u: v["devices"] for u, v in body["users"].items()} != expected:
                return False
        return True
    await eventually(check, what=f"directory shows {expected}")


@async_test
async def test_emit_counts_recipients_on_every_node(haproxy_cluster):
    redis, a, b, balancer = haproxy_cluster
    await ready(a, b, balancer)
    room = "conversation:api-cluster"
    async with Clients() as c:
        bob_a = await c.connect(a, "bob", name="bob-a")
        bob_b1 = await c.connect(b, "bob", name="bob-b1")
        bob_b2 = await c.connect(b, "bob", name="bob-b2")
        alice_b = await c.connect(b, "alice", name="alice-b")
        await bob_a.join(room)
        await alice_b.join(room)
        await devices_are([a, b], {"bob": 3, "alice": 1, "carol": 0})

        for relay in (a, b, balancer):
            assert await emit_api(relay, "notification:new", {"user": "bob"}, {"via": relay.port}) == (200, {"recipients": 3})
            for client in (bob_a, bob_b1, bob_b2):
                await client.expect("notification:new", via=relay.port)

            status, body = await http(relay, "POST", "/api/v1/emit", body={
                "event": "group:update", "to": {"users": ["bob", "carol", "bob", "alice"]},
                "recipientsByUser": True, "data": {"via": relay.port}})
            assert (status, body) == (200, {"recipients": 4, "users": {"bob": 3, "carol": 0, "alice": 1}})
            for client in (bob_a, bob_b1, bob_b2, alice_b):
                await client.expect("group:update", via=relay.port)

            status, body = await http(relay, "POST", "/api/v1/emit", body={
                "event": "message:new", "to": {"room": room}, "recipientsByUser": True, "data": {"via": relay.port}})
            assert (status, body) == (200, {"recipients": 2, "users": {"alice": 1, "bob": 1}})
            await bob_a.expect("message:new", via=relay.port)
            await alice_b.expect("message:new", via=relay.port)

        # A duplicate user is sent to once: bob-a got exactly one group:update per emit.
        assert len(bob_a.events("group:update")) == 3
        assert not bob_b1.events("message:new"), "not in the room"


@async_test
async def test_presence_is_answered_the_same_from_every_node(haproxy_cluster):
    redis, a, b, balancer = haproxy_cluster
    await ready(a, b, balancer)
    async with Clients() as c:
        on_a = await c.connect(a, "dora", name="dora-a")
        on_b = await c.connect(b, "dora", name="dora-b")
        await on_a.join("conversation:p2")
        await on_b.join("conversation:p1")
        await c.connect(a, "emil")
        await devices_are([a, b], {"dora": 2, "emil": 1})

        async def dora_has(devices: int, rooms: list[str]):
            async def check():
                for r in (a, b):
                    p = await presence(r, "dora")
                    if p["devices"] != devices or p["rooms"] != rooms:
                        return False
                return True
            await eventually(check, what=f"dora on {devices} devices in {rooms}")

        await dora_has(2, ["conversation:p1", "conversation:p2"])
        first = await same_everywhere([a, b, balancer], lambda r: presence(r, "dora"))
        assert first == {"user": "dora", "online": True, "devices": 2,
                         "rooms": ["conversation:p1", "conversation:p2"], "lastSeen": None}

        await on_b.disconnect()
        await dora_has(1, ["conversation:p2"])
        second = await same_everywhere([a, b, balancer], lambda r: presence(r, "dora"))
        assert second["online"] is True and isinstance(second["lastSeen"], int), second

        await on_a.disconnect()
        await dora_has(0, [])
        third = await same_everywhere([a, b, balancer], lambda r: presence(r, "dora"))
        assert third["online"] is False and third["lastSeen"] >= second["lastSeen"], third

        users = await same_everywhere([a, b, balancer], lambda r: batch(r, ["dora", "emil", "nobody", "emil"]))
        assert users == {"users": {
            "dora": {"online": False, "devices": 0, "lastSeen": third["lastSeen"]},
            "emil": {"online": True, "devices": 1, "lastSeen": None},
            "nobody": {"online": False, "devices": 0, "lastSeen": None},
        }}

        # Limits and keys.
        status, body = await http(a, "POST", "/api/v1/presence", body={"users": [f"u{i}" for i in range(1001)]})
        assert status == 400 and body["error"]["code"] == "invalid_payload"
        status, body = await http(a, "GET", "/api/v1/users/dora/presence", key=ADMIN_KEY)
        assert status == 401
        status, body = await http(a, "GET", "/api/v1/presence")
        assert status == 405


@async_test
async def test_coalesced_emits_across_nodes(haproxy_cluster):
    redis, a, b, balancer = haproxy_cluster
    await ready(a, b, balancer)
    async with Clients() as c:
        on_a = await c.connect(a, "fay", name="fay-a")
        on_b = await c.connect(b, "fay", name="fay-b")
        await devices_are([a, b], {"fay": 2})
        loop = asyncio.get_running_loop()
        start = loop.time()
        targets = [a, b, balancer]

        async def emit(i: int):
            # On a fixed schedule, 25 ms apart (20 emits in 500 ms), each to another node.
            await asyncio.sleep(max(0.0, start + i * 0.025 - loop.time()))
            status, body = await http(targets[i % 3], "POST", "/api/v1/emit", body={
                "event": "unread:update", "to": {"user": "fay"}, "data": {"n": i},
                "coalesce": {"key": "unread:fay", "windowMs": 500}})
            assert (status, body) == (200, {"recipients": 2}), body

        await asyncio.gather(*(emit(i) for i in range(20)))
        # A plain emit afterwards: the coalesced ones have all been delivered by the time it
        # arrives after the last window (≤ 500 ms after the last emit).
        await asyncio.sleep(0.6)
        assert await emit_api(a, "barrier:done", {"user": "fay"}) == (200, {"recipients": 2})
        for client in (on_a, on_b):
            await client.expect("barrier:done")
            got = [d["n"] for _, d in client.events("unread:update")]
            assert 1 <= len(got) <= 2, (client.name, got)
            assert got[-1] == 19, (client.name, got)
        status, metrics = await http(a, "GET", "/metrics", key=None)
        assert "relay_emits_superseded_total" in metrics


@async_test
async def test_without_redis_a_node_answers_for_itself_degraded(haproxy_cluster):
    redis, a, b, balancer = haproxy_cluster
    await ready(a, b, balancer)
    async with Clients() as c:
        gus = await c.connect(a, "gus")
        await c.connect(b, "gus", name="gus-b")
        await devices_are([a, b], {"gus": 2})
        redis.kill()

        async def down():
            status, body = await http(a, "GET", "/admin/v1/ready", key=ADMIN_KEY)
            return body.get("redis") == "down"
        await eventually(down, what="redis link down")
        assert await presence(a, "gus") == {"user": "gus", "online": True, "devices": 1, "rooms": [],
                                            "lastSeen": None, "degraded": True}
        assert await batch(a, ["gus"]) == {"users": {"gus": {"online": True, "devices": 1, "lastSeen": None}}, "degraded": True}
        assert await emit_api(a, "notification:new", {"user": "gus"}, {"x": 1}) == (200, {"recipients": 1, "degraded": True})
        await gus.expect("notification:new", x=1)

        # Redis back, empty: each node restates its users (every user shard of its directory at
        # once), so the answer is the cluster's again, from either node.
        redis.start()
        await ready(a, b, balancer)

        async def restated():
            for r in (a, b):
                p = await presence(r, "gus")
                if p != {"user": "gus", "online": True, "devices": 2, "rooms": [], "lastSeen": None}:
                    return False
            return True
        await eventually(restated, what="gus restated by both nodes")
