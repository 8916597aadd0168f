"""Nothing missed across a reconnect, with two relay nodes on a real redis-server behind the
real HAProxy config of deploy/ (PROTOCOL §12: "With `--redis` the session and the history live
in Redis, so the client may come back to any node. While Redis is unreachable a reconnect is
simply not recovered.")

- The stock browser client through HAProxy recovers a dropped socket (HAProxy pins a client
  address to its node, so it comes back to the same node) while its peer sends from the other
  node.
- A socket spoken by hand drops on node A and comes back **directly to node B**: recovered,
  same sid, every missed event in order.
- Redis killed: a reconnect is not recovered (new session, nothing replayed — never wrong
  data); Redis back empty: a session from before is not recovered either.
"""

from __future__ import annotations

import asyncio

import pytest

from browser_client import BrowserPage, browser, page_server  # noqa: F401 - fixtures
from conftest import RelayProcess
from helpers import ADMIN_KEY, Clients, async_test, emit_api, http, mint_token
from recovery_helpers import RawSessions, assert_increasing, grew, metric, parse_offset, room_tag, user_tag
from redis_servers import assert_no_cross_slot, redis_kind, redis_server  # noqa: F401 - fixtures
from test_cluster import eventually, wait_linked
from test_recovery import (RATE_FLAGS, assert_new_session, browser_recovery_scenario, last_offset, member,
                           opted_in, recoveries_of, reconnect, send_ticks, tick_numbers, unique)
from test_sticky_cluster import Balancer, home_and_other, ready_through

HEARTBEAT_MS = 300


@pytest.fixture
def haproxy_cluster(tmp_path, page_server, redis_server):  # noqa: F811 - the imported fixture
    """Redis (each kind), relay nodes a and b (admitting the test page's origin), HAProxy in front."""
    redis = redis_server
    nodes: list[RelayProcess] = []
    balancer: Balancer | None = None
    try:
        for name in ("a", "b"):
            d = tmp_path / name
            d.mkdir()
            nodes.append(RelayProcess(d, ["--redis", redis.url, "--node-id", f"node-{name}",
                                          "--cluster-heartbeat-ms", str(HEARTBEAT_MS),
                                          "--allowed-origins", page_server.origin,
                                          # A connection of any age is taken over (default 1 s).
                                          "--recovery-takeover-after-ms", "0", *RATE_FLAGS]).start())
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


@async_test
async def test_browser_through_haproxy_recovers_with_the_sender_on_the_other_node(haproxy_cluster, browser, page_server):  # noqa: F811
    redis, a, b, balancer = haproxy_cluster
    await wait_linked(a, b)
    await ready_through(balancer)
    user, room = unique("web"), unique("conversation:lb")
    page = await BrowserPage.open(browser, page_server)
    try:
        async def the_other_node(sid: str):
            _, other = await home_and_other(a, b, user, sid)
            return other

        sid = await browser_recovery_scenario(page, balancer.url, the_other_node, [a, b], user, room)
        # One session, on one node (HAProxy pins the polling requests of each connection; the
        # reconnection may land on either node: the session lives in Redis).
        await home_and_other(a, b, user, sid)
        await page.disconnect("web")
    finally:
        await page.close()
    # History and sessions live in Redis: the nodes' memory history stays empty.
    for node in (a, b):
        assert await metric(node, "relay_history_events") == 0
        assert await metric(node, "relay_history_bytes") == 0


async def ticked_on_a(c: Clients, raw: RawSessions, a, b, user: str, room: str, last: int):
    """Bob in `room` on node B; `user`'s opted-in socket on node A that received ticks 1..last
    from him. Returns (bob, socket, its CONNECT answer, the last offset it received)."""
    bob = await member(c, b, room)  # the sender is on node B
    s, hello = await opted_in(raw, a, user, [room], "on-a")
    await send_ticks(bob, room, 1, last)
    await s.wait_for(lambda: tick_numbers(s.events) == list(range(1, last + 1)), f"ticks 1..{last} across nodes")
    return bob, s, hello, last_offset(s)


@async_test
async def test_recovery_on_the_other_node(haproxy_cluster):
    redis, a, b, _ = haproxy_cluster
    await wait_linked(a, b)
    user, room = unique("amy"), unique("conversation:move")
    async with Clients() as c, RawSessions() as raw:
        bob, s, hello, offset = await ticked_on_a(c, raw, a, b, user, room, 3)
        before = await recoveries_of([a, b])

        await s.drop()
        await send_ticks(bob, room, 4, 20)
        status, body = await emit_api(a, "notification:new", {"user": user}, {"title": "while away"})
        assert status == 200, body

        t, back = await reconnect(raw, b, mint_token(user), hello["pid"], offset, "on-b")
        assert back.get("recovered") is True, f"not recovered on the other node: {back}"
        assert back["sid"] == hello["sid"] and back["pid"] == hello["pid"], (back, hello)
        assert list(back.get("rooms", {})) == [room], back
        await bob.ok("chat:tick", {"room": room, "n": 21})
        await t.wait_for(lambda: 21 in tick_numbers(t.events), "tick 21, live")
        await t.wait_for(lambda: t.named("notification:new"), "the user's missed notification")
        got = tick_numbers(t.events)
        assert got == list(range(4, 22)), f"missed ticks 4..20 then 21, in order: {got}"
        ticks = t.named("chat:tick")
        assert_increasing([args[-1] for _, args in ticks], room_tag(room))
        assert parse_offset(ticks[0][1][-1])[:2] > parse_offset(offset)[:2]
        notes = t.named("notification:new")
        assert len(notes) == 1 and parse_offset(notes[0][1][-1])[2] == user_tag(user), notes
        moved = grew(before, await recoveries_of([a, b]))
        assert moved == {"recovered": 1.0}, moved
        # The session now lives on node B, and only there.
        assert await home_and_other(a, b, user, hello["sid"]) == (b, a)
        # Still in the room for events sent on node A too.
        amy_peer = await member(c, a, room, "carol")
        await amy_peer.ok("chat:tick", {"room": room, "n": 22})
        await t.wait_for(lambda: 22 in tick_numbers(t.events), "tick 22 from node A")


@async_test
async def test_a_reconnect_to_the_other_node_takes_over_a_connection_that_still_looks_alive(haproxy_cluster):
    """The phone's old connection on node A went silent (its TCP still open: node A has noticed
    nothing) and the phone comes back on node B: node A hands the session over (4009) when node
    B asks on the control channel, and node B recovers it."""
    redis, a, b, _ = haproxy_cluster
    await wait_linked(a, b)
    user, room = unique("amy"), unique("conversation:silent")
    async with Clients() as c, RawSessions() as raw:
        bob, s, hello, offset = await ticked_on_a(c, raw, a, b, user, room, 2)
        s.reading.clear()  # gone silent
        await send_ticks(bob, room, 3, 5)
        before = await recoveries_of([a, b])
        t, back = await reconnect(raw, b, mint_token(user), hello["pid"], offset, "on-b")
        assert back.get("recovered") is True, f"not recovered from the live connection on node A: {back}"
        assert back["sid"] == hello["sid"] and back["pid"] == hello["pid"], (back, hello)
        await bob.ok("chat:tick", {"room": room, "n": 6})
        await t.wait_for(lambda: 6 in tick_numbers(t.events), "tick 6, live")
        assert tick_numbers(t.events) == [3, 4, 5, 6], t.events
        assert grew(before, await recoveries_of([a, b])) == {"recovered": 1.0}
        assert await home_and_other(a, b, user, hello["sid"]) == (b, a)
        s.reading.set()
        closed = await asyncio.wait_for(asyncio.shield(s.closed), 15)
        assert getattr(getattr(closed, "rcvd", None), "code", None) == 4009, f"node A closed it as replaced: {closed!r}"


@async_test
async def test_recovery_after_a_node_shuts_down(haproxy_cluster):
    """A rolling restart: node A shuts down (SIGTERM) under its sockets; they come back on node B
    and recover, having missed nothing."""
    redis, a, b, _ = haproxy_cluster
    await wait_linked(a, b)
    user, room = unique("amy"), unique("conversation:deploy")
    async with Clients() as c, RawSessions() as raw:
        bob, s, hello, offset = await ticked_on_a(c, raw, a, b, user, room, 3)
        a.stop()
        closed = await asyncio.wait_for(asyncio.shield(s.closed), 15)
        assert getattr(getattr(closed, "rcvd", None), "code", None) == 1001, f"shutdown closes with 1001: {closed!r}"
        await send_ticks(bob, room, 4, 8)
        t, back = await reconnect(raw, b, mint_token(user), hello["pid"], offset, "on-b")
        assert back.get("recovered") is True and back["sid"] == hello["sid"], f"not recovered after node A's shutdown: {back}"
        await bob.ok("chat:tick", {"room": room, "n": 9})
        await t.wait_for(lambda: 9 in tick_numbers(t.events), "tick 9")
        assert tick_numbers(t.events) == list(range(4, 10)), t.events


@async_test
async def test_redis_history_is_bounded_and_paged(start_relay, redis_server):  # noqa: F811 - the imported fixture
    """With Redis the history is a Redis stream per room and per user: `--history-size` still
    bounds what can be recovered, and `room:sync` pages through it."""
    redis = redis_server
    relay = start_relay(*RATE_FLAGS, "--redis", redis.url, "--history-size", "5")
    await wait_linked(relay)
    user, room = unique("amy"), unique("conversation:redis")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        s, hello = await opted_in(raw, relay, user, [room])
        await send_ticks(bob, room, 1, 2)
        await s.wait_for(lambda: tick_numbers(s.events) == [1, 2], "ticks 1, 2")
        offset = last_offset(s)
        await s.drop()
        await send_ticks(bob, room, 3, 5)
        t, back = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "fits")
        assert back.get("recovered") is True, back
        await t.wait_for(lambda: tick_numbers(t.events) == [3, 4, 5], "ticks 3..5 replayed")
        # room:sync, paged, from tick 3.
        since = t.named("chat:tick")[0][1][-1]
        # One event per page until the end; presence events (amy's own leave and join) may
        # fall anywhere between the ticks, so only the ticks' order is asserted.
        ticks, pages, cursor, more = [], 0, since, True
        while more:
            page = await t.ok("room:sync", {"room": room, "offset": cursor, "limit": 1})
            assert len(page["events"]) <= 1, page
            ticks += [e[1]["n"] for e in page["events"] if e[0] == "chat:tick"]
            cursor, more, pages = page["offset"], page["more"], pages + 1
            assert pages <= 10, "room:sync pages did not end"
        assert ticks == [4, 5] and pages >= 2, (ticks, pages)

        offset = last_offset(t)
        await t.drop()
        await send_ticks(bob, room, 6, 25)
        before = await recoveries_of([relay])
        u, again = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "gone")
        await assert_new_session(u, again, hello, [room])
        assert grew(before, await recoveries_of([relay])) == {"history_gone": 1.0}
        await u.ok("room:join", {"room": room})
        await u.fails("room:sync", {"room": room, "offset": offset}, "history_unavailable")
    assert_no_cross_slot(redis, relay)


@async_test
async def test_no_recovery_without_redis(haproxy_cluster):
    redis, a, b, _ = haproxy_cluster
    await wait_linked(a, b)
    room = unique("conversation:outage")
    users = [unique("amy"), unique("ben")]
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, a, room)  # on node A: node-local delivery goes on without Redis
        sessions = []
        for user in users:
            s, hello = await opted_in(raw, a, user, [room], user)
            sessions.append((s, hello))
        await send_ticks(bob, room, 1, 2)
        for s, _ in sessions:
            await s.wait_for(lambda s=s: tick_numbers(s.events) == [1, 2], "ticks 1, 2")
        offsets = [last_offset(s) for s, _ in sessions]
        for s, _ in sessions:
            await s.drop()

        redis.kill()

        async def degraded():
            status, body = await http(a, "GET", "/admin/v1/ready", key=ADMIN_KEY)
            return status == 200 and body.get("redis") == "down"
        await eventually(degraded, what="node A sees Redis down")
        await send_ticks(bob, room, 3, 4)

        # While Redis is unreachable: not recovered, on the same node as before.
        before = await recoveries_of([a, b])
        (_, hello0), off0 = sessions[0], offsets[0]
        t, back = await reconnect(raw, a, mint_token(users[0]), hello0["pid"], off0, "during-outage")
        assert back.get("recovered") is not True, back
        assert back["sid"] != hello0["sid"] and not back.get("rooms"), back
        await t.barrier()
        assert tick_numbers(t.events) == [], f"nothing replayed: {t.events}"
        await t.fails("room:leave", {"room": room}, "not_in_room")
        moved = grew(before, await recoveries_of([a, b]))
        assert moved == {"unavailable": 1.0}, moved

        # Redis back, empty: a session from before is gone with Redis's data.
        redis.start()
        await wait_linked(a, b)
        (_, hello1), off1 = sessions[1], offsets[1]
        u, back = await reconnect(raw, b, mint_token(users[1]), hello1["pid"], off1, "after-outage")
        await assert_new_session(u, back, hello1, [room])
        # room:sync from an offset of the old epoch: history_unavailable.
        await u.ok("room:join", {"room": room})
        await u.fails("room:sync", {"room": room, "offset": off1}, "history_unavailable")
