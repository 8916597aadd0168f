"""Receipt audiences (`--receipt-audience`, PROTOCOL §4) with stock python-socketio clients: with
`read=devices` a committed `message:read` reaches the author's devices (in the room or not) and
the reader's other devices, and no other member, on one node and across two nodes on a real
redis-server; `delivered` keeps the default `room` audience.
"""

from __future__ import annotations

import asyncio

from conftest import RelayProcess
from helpers import Clients, async_test
from redis_servers import redis_kind, redis_server  # noqa: F401 - fixtures
from test_cluster import HEARTBEAT_MS, wait_linked

ROOM = "conversation:audience"
QUIET_S = 0.5  # what has not arrived this long after the others' copies is taken as not sent


async def scenario(node_a, node_b):
    async with Clients() as c:
        alice_in = await c.connect(node_a, "alice", name="alice-in")
        alice_out = await c.connect(node_b, "alice", name="alice-out")  # not in the room
        bob = await c.connect(node_a, "bob", name="bob-sender")
        bob_other = await c.connect(node_b, "bob", name="bob-other")
        carol = await c.connect(node_b, "carol")
        for member in (alice_in, bob, carol):
            await member.join(ROOM)
        await bob.ok("message:read", {"room": ROOM, "messageId": "m1", "authorId": "alice"})
        for device in (alice_in, alice_out, bob_other):
            await device.expect("message:read", messageId="m1", **{"from": "bob"})
        await asyncio.sleep(QUIET_S)
        assert carol.events("message:read") == [], carol.history
        assert bob.events("message:read") == [], "the sending socket is excluded"
        # `delivered` keeps the room audience: carol gets it.
        await bob.ok("message:delivered", {"room": ROOM, "messageId": "m2", "authorId": "alice"})
        await carol.expect("message:delivered", messageId="m2")
        await alice_in.expect("message:delivered", messageId="m2")


@async_test
async def test_read_receipts_to_devices_on_one_node(start_relay):
    relay = start_relay("--receipt-audience", "read=devices")
    await scenario(relay, relay)


@async_test
async def test_read_receipts_to_devices_across_nodes(tmp_path, redis_server):  # noqa: F811
    nodes: list[RelayProcess] = []
    try:
        for name in ("a", "b"):
            d = tmp_path / name
            d.mkdir()
            nodes.append(RelayProcess(d, ["--redis", redis_server.url, "--node-id", f"node-{name}", "--cluster-heartbeat-ms", str(HEARTBEAT_MS),
                                          "--receipt-audience", "read=devices"]).start())
        await wait_linked(*nodes)
        await scenario(nodes[0], nodes[1])
    finally:
        for n in nodes:
            n.stop()


@async_test
async def test_a_receipt_window_coalesces_every_reader_of_a_room(start_relay):
    """`--receipt-window-ms 300`: two readers' receipts within the window reach the room as one
    batch event carrying both items (each with its reader), after the acks."""
    relay = start_relay("--receipt-window-ms", "300")
    async with Clients() as c:
        alice = await c.connect(relay, "alice")
        bob = await c.connect(relay, "bob")
        carol = await c.connect(relay, "carol")
        for member in (alice, bob, carol):
            await member.join(ROOM)
        await bob.ok("message:read", {"room": ROOM, "messageId": "m1", "authorId": "alice"})
        await carol.ok("message:read", {"room": ROOM, "messageId": "m1", "authorId": "alice"})
        batch = await alice.expect("message:read", room=ROOM, kind="read")
        assert "from" not in batch and sorted(i["userId"] for i in batch["items"]) == ["bob", "carol"], batch
        await asyncio.sleep(QUIET_S)
        assert len(alice.events("message:read")) == 1, alice.history
