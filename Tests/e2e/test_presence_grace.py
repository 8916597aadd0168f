"""Presence without flicker (`presence-grace-ms`, PROTOCOL §5): a phone whose connection drops
and that is back within the grace causes no `presence:leave`/`presence:join` in its rooms and no
`user:offline`/`online` or `room:vacated`/`occupied` webhook, on one node and across two nodes on
a real redis-server; the presence API says `online` meanwhile; one that is not back leaves when
the grace ends; a `41` leaves at once.

The drop is a TCP connection cut without a close frame (`transport.abort()`), as a phone that
lost its network; the watcher is a stock python-socketio client.
"""

from __future__ import annotations

import asyncio
import json
import time

from conftest import RelayProcess
from helpers import Clients, RawSocket, async_test, http, mint_token
from redis_servers import redis_kind, redis_server  # noqa: F401 - fixtures
from test_cluster import HEARTBEAT_MS, wait_linked
from test_webhooks import Receiver, webhook_flags

GRACE_MS = 1500
ROOM = "conversation:grace"


async def phone(relay, user: str, room: str = ROOM) -> RawSocket:
    """A raw WebSocket client connected as `user` with `room` named in its CONNECT."""
    sock = await RawSocket.open(relay)
    await sock.send("40" + json.dumps({"token": mint_token(user), "rooms": [room]}))
    answer = await sock.recv_packet()
    assert answer.startswith("40{") and room in json.loads(answer[2:]).get("rooms", {}), answer
    return sock


def drop(sock: RawSocket) -> None:
    """Cuts the TCP connection without a close frame: the phone lost its network."""
    sock.ws.transport.abort()


def presence_events(client, user: str) -> list[str]:
    return [name for name, data in client.events("presence:join", "presence:leave") if isinstance(data, dict) and data.get("user") == user]


async def online(relay, user: str) -> bool:
    status, body = await http(relay, "GET", f"/api/v1/users/{user}/presence")
    assert status == 200, body
    return body["online"]


@async_test
async def test_a_drop_and_return_within_the_grace_shows_nothing(start_relay):
    receiver = await Receiver().start()
    relay = start_relay("--presence-grace-ms", str(GRACE_MS), *webhook_flags(receiver))
    try:
        async with Clients() as c:
            bob = await c.connect(relay, "bob")
            await bob.join(ROOM)
            alice = await phone(relay, "alice")
            await bob.expect("presence:join", user="alice")
            await receiver.wait_for(lambda: receiver.of("user:online", user="alice"), what="alice online")
            drop(alice)
            await asyncio.sleep(0.3)
            assert await online(relay, "alice"), "online during the grace"
            again = await phone(relay, "alice")  # back after ~0.3 s
            await asyncio.sleep(GRACE_MS / 1000 + 1.0)  # past the first connection's grace
            assert presence_events(bob, "alice") == ["presence:join"], bob.history
            assert await online(relay, "alice")
            assert receiver.of("user:offline", user="alice") == [] and receiver.of("room:vacated", room=ROOM) == []
            assert len(receiver.of("user:online", user="alice")) == 1
            await again.close()
    finally:
        await receiver.stop()


@async_test
async def test_a_phone_not_back_leaves_when_the_grace_ends(start_relay):
    receiver = await Receiver().start()
    relay = start_relay("--presence-grace-ms", str(GRACE_MS), *webhook_flags(receiver))
    try:
        async with Clients() as c:
            bob = await c.connect(relay, "bob")
            await bob.join(ROOM)
            alice = await phone(relay, "alice")
            await bob.expect("presence:join", user="alice")
            dropped = time.monotonic()
            drop(alice)
            await bob.expect("presence:leave", user="alice", timeout=GRACE_MS / 1000 + 5)
            waited = time.monotonic() - dropped
            assert waited >= GRACE_MS / 1000 - 0.1, f"the leave came {waited:.2f} s after the drop, before the grace ended"
            assert not await online(relay, "alice")
            await receiver.wait_for(lambda: receiver.of("user:offline", user="alice"), what="alice offline")
    finally:
        await receiver.stop()


@async_test
async def test_disconnect_on_purpose_leaves_at_once(start_relay):
    relay = start_relay("--presence-grace-ms", "60000")
    async with Clients() as c:
        bob = await c.connect(relay, "bob")
        await bob.join(ROOM)
        alice = await phone(relay, "alice")
        await bob.expect("presence:join", user="alice")
        await alice.send("41")
        await bob.expect("presence:leave", user="alice", timeout=3)
        await alice.close()


@async_test
async def test_across_nodes_a_phone_back_on_the_other_node_shows_nothing(tmp_path, redis_server):  # noqa: F811
    receiver = await Receiver().start()
    nodes: list[RelayProcess] = []
    try:
        for name in ("a", "b"):
            d = tmp_path / name
            d.mkdir()
            nodes.append(RelayProcess(d, ["--redis", redis_server.url, "--node-id", f"node-{name}", "--cluster-heartbeat-ms", str(HEARTBEAT_MS),
                                          "--presence-grace-ms", str(GRACE_MS), *webhook_flags(receiver)]).start())
        a, b = nodes
        await wait_linked(a, b)
        async with Clients() as c:
            bob = await c.connect(a, "bob")
            await bob.join(ROOM)
            alice = await phone(a, "alice")
            await bob.expect("presence:join", user="alice")
            await receiver.wait_for(lambda: receiver.of("user:online", user="alice"), what="alice online")
            drop(alice)
            await asyncio.sleep(0.3)
            assert await online(b, "alice"), "online for the other node too"
            again = await phone(b, "alice")  # back on the other node
            await asyncio.sleep(GRACE_MS / 1000 + 1.5)
            assert presence_events(bob, "alice") == ["presence:join"], bob.history
            assert receiver.of("user:offline", user="alice") == [] and receiver.of("room:vacated", room=ROOM) == []
            # Gone for good this time: the leave comes, once, after the grace.
            drop(again)
            await bob.expect("presence:leave", user="alice", timeout=GRACE_MS / 1000 + 5)
            await receiver.wait_for(lambda: receiver.of("user:offline", user="alice"), what="alice offline")
            assert len(receiver.of("user:offline", user="alice")) == 1
    finally:
        for n in nodes:
            n.stop()
        await receiver.stop()
