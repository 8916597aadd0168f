"""Nothing missed across a reconnect (issue #13, PROTOCOL §12): history and offsets, Socket.IO
connection state recovery with the stock browser client (socket.io-client 4.8.1, default options
but its auth) and by hand, rooms in CONNECT, and `room:sync` with python-socketio.

Senders are python-socketio members sending a numbered custom event, `chat:tick {room, n}`;
"nothing missed" means the numbers a client received are exactly 1..N, once each, in order.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest

from browser_client import BrowserPage, browser, page_server  # noqa: F401 - fixtures
from conftest import RelayProcess
from helpers import ADMIN_KEY, TIMEOUT, Client, Clients, async_test, emit_api, http, make_jwt, mint_token
from recovery_helpers import (PID, PID_SPEC, ArgsClient, RawSession, RawSessions, assert_increasing, grew, parse_offset,
                              recoveries, metric, room_tag, user_tag)
from redis_servers import assert_no_cross_slot, make_redis
from test_cluster import wait_linked
from test_stock_clients import sids_of

RATE_FLAGS = ["--events-per-second", "1000", "--event-burst", "1000", "--rate", "custom=1000:1000",
              "--packets-per-second", "2000"]  # the tests burst acked events faster than the default 250 packets/s
RELAY_ARGS = RATE_FLAGS

TICKS = 150
PACE = 0.02  # seconds between two ticks: 150 ticks over about 3-4 s
NOTES = 15  # backend notifications to the user meanwhile
ROUNDS, BURST = 20, 30  # test_events_during_the_recovery_handshake_arrive_once


def unique(prefix: str) -> str:
    """A room or user name no other test used (every stream starts empty)."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def send_ticks(sender: Client, room: str, first: int, last: int, pace: float = 0.0,
                     acked_at: dict[int, float] | None = None) -> None:
    """`chat:tick {room, n}` for n = first..last, each acked, `pace` seconds apart; `acked_at`
    gets each tick's ack time (ms since 1970)."""
    for n in range(first, last + 1):
        await sender.ok("chat:tick", {"room": room, "n": n})
        if acked_at is not None:
            acked_at[n] = time.time() * 1000
        if pace:
            await asyncio.sleep(pace)


async def notify(relay, user: str, count: int, pace: float) -> None:
    """`notification:new {n}` to `user` through the backend API, n = 1..count, `pace` s apart."""
    for n in range(1, count + 1):
        status, body = await emit_api(relay, "notification:new", {"user": user}, {"n": n})
        assert status == 200, body
        await asyncio.sleep(pace)


def tick_numbers(events) -> list[int]:
    return [args[0]["n"] for name, args in events if name == "chat:tick"]


def missing_report(got: list[int], expected: list[int]) -> str:
    missing = sorted(set(expected) - set(got))
    dups = sorted({n for n in got if got.count(n) > 1})
    disorder = [(a, b) for a, b in zip(got, got[1:]) if b <= a]
    return f"missing {missing}, duplicated {dups}, out of order at {disorder[:10]}; got {got}"


def page_timeline(seen: list[dict], got: list[int]) -> str:
    """For a failure: each duplicated or out-of-order tick's records (page index, time, offset)
    and the page's connection records, in order."""
    bad = {n for n in got if got.count(n) > 1} | {b for a, b in zip(got, got[1:]) if b <= a}
    rows = []
    for e in seen:
        if e["kind"] in ("connect", "disconnect", "engine_close", "engine_open", "upgrade", "reconnect_attempt"):
            rows.append(f"#{e['i']} t={e['t']} {e['kind']} {json.dumps(e.get('data'))[:120]}")
        elif e["kind"] == "event" and e["event"] == "chat:tick" and e["args"][0]["n"] in bad | {n - 1 for n in bad} | {n + 1 for n in bad}:
            rows.append(f"#{e['i']} t={e['t']} tick {e['args'][0]['n']} offset {e['args'][-1]}")
    return "\n--- page timeline ---\n" + "\n".join(rows)


async def recoveries_of(relays) -> dict[str, float]:
    total: dict[str, float] = {}
    for r in relays:
        for k, v in (await recoveries(r)).items():
            total[k] = total.get(k, 0.0) + v
    return total


@pytest.fixture(params=["memory", "redis", "redis-cluster1"])
def history_relay(request, start_relay, tmp_path):
    """Factory of relays (with RATE_FLAGS) whose history and kept sessions live in memory or,
    with `--redis`, in a real redis-server (plain, or a one-node cluster-mode one that refuses
    cross-slot scripts): `relay = await history_relay(*flags)`."""
    kind = {"redis": "single", "redis-cluster1": "cluster1"}.get(request.param)
    redis = make_redis(kind, tmp_path / "redis").start() if kind else None
    relays = []

    async def factory(*flags):
        relay = start_relay(*RATE_FLAGS, *(["--redis", redis.url] if redis else []), *flags)
        relays.append(relay)
        if redis:
            await wait_linked(relay)
        return relay

    try:
        yield factory
        if redis:
            assert_no_cross_slot(redis, *relays)
    finally:
        if redis:
            redis.stop()


# --------------------------------------------------------------------------------------------
# 1. The browser client recovers a dropped socket


@pytest.fixture(scope="module")
def web_relay(page_server, tmp_path_factory):  # noqa: F811 - the imported fixture
    relay = RelayProcess(tmp_path_factory.mktemp("relay"), ["--allowed-origins", page_server.origin, *RATE_FLAGS])
    relay.start()
    try:
        yield relay
    finally:
        relay.stop()


async def browser_recovery_scenario(page: BrowserPage, url: str, sender_relay, relays, user: str, room: str,
                                    rooms_in_auth: bool = False, drops: int = 1, ticks: int = TICKS) -> str:
    """socket.io-client with `auth: {token, recover: true}` joins `room` (with `room:join`, or
    with `rooms` in its auth); a python-socketio member (on `sender_relay`, or on
    `await sender_relay(sid)` when it is a function) sends `ticks` numbered events at a steady
    pace while the backend notifies the user; `drops` times along the way
    `socket.io.engine.close()` drops the transport and the Manager reconnects by itself (with
    `pid` and `offset`, and the same auth). The socket must come back recovered each time, with
    the same id, and must have received 1..ticks and every notification exactly once each, in
    order, each with its offset as the last argument. Returns the sid."""
    auth = {"token": mint_token(user), "recover": True, **({"rooms": [room]} if rooms_in_auth else {})}
    first = await page.connect("web", url, {"auth": auth})
    # socket.io-client sets `recovered` to false (not undefined) only when the answer has a pid.
    assert first["connected"] is True and first["recovered"] is False, first
    sid = first["id"]
    await page.expect("web", "upgrade", transport="websocket")  # default options: polling first
    if not rooms_in_auth:
        joined = await page.ok("web", "room:join", {"room": room})
        assert parse_offset(joined.get("offset"))[2] == room_tag(room), f"room:join ack carries the stream's offset: {joined}"

    if callable(sender_relay):
        sender_relay = await sender_relay(sid)
    notes_total = max(1, ticks // 10)
    async with Clients() as c:
        bob = await c.connect(sender_relay, unique("bob"))
        await bob.join(room)
        before = await recoveries_of(relays)
        acked_at: dict[int, float] = {}
        sender = asyncio.create_task(send_ticks(bob, room, 1, ticks, PACE, acked_at))
        # Meanwhile the backend notifies the user (the user's stream): two streams interleave
        # behind the one offset socket.io-client reports.
        notifier = asyncio.create_task(notify(sender_relay, user, notes_total, ticks * PACE / notes_total))
        try:
            since = 0
            for k in range(1, drops + 1):
                # Drop once tick k*ticks/(drops+2) arrived (or a later one, after the previous reconnection).
                point = k * ticks // (drops + 2)
                hit = await page.wait("web", "event", "chat:tick", since=0, timeout=TIMEOUT, n=point)
                assert hit is not None, f"tick {point} did not arrive before drop {k}: {json.dumps(await page.seen('web'))[-3000:]}"
                since = await page.mark()
                await page.force_close("web")
                await page.expect("web", "disconnect", since=since)
                again = await page.connected("web", since)
                assert again["recovered"] is True, f"drop {k}: not recovered: {again}"
                assert again["id"] == sid, f"drop {k}: the recovered socket has the old sid {sid}: {again}"
            await asyncio.wait_for(asyncio.shield(sender), ticks * (PACE + 0.2) + TIMEOUT)
            await asyncio.wait_for(asyncio.shield(notifier), TIMEOUT)
        finally:
            for task in (sender, notifier):
                if not task.done():
                    task.cancel()
            await asyncio.wait([sender, notifier], timeout=TIMEOUT)
        # The last tick arrives (or the comparison below says what is missing).
        await page.wait("web", "event", "chat:tick", since=0, timeout=TIMEOUT, n=ticks)
        await page.wait("web", "event", "notification:new", since=0, timeout=TIMEOUT, n=notes_total)

    seen = await page.seen("web")
    tick_events = [e for e in seen if e["kind"] == "event" and e["event"] == "chat:tick"]
    got = [e["args"][0]["n"] for e in tick_events]
    assert got == list(range(1, ticks + 1)), missing_report(got, list(range(1, ticks + 1))) + page_timeline(seen, got)
    assert all(len(e["args"]) == 2 for e in tick_events), f"the offset is the last argument: {[e['args'] for e in tick_events[:3]]}"
    assert_increasing([e["args"][1] for e in tick_events], room_tag(room))
    connects = [e for e in seen if e["kind"] == "connect"]
    assert len(connects) == drops + 1, f"{drops} reconnection(s): {connects}"
    for k, conn in enumerate(connects[1:], 1):
        # Ticks the relay had taken while the socket was away came after the reconnection: they
        # were replayed (the page's clock and ours are the same machine's).
        away = [e["args"][0]["n"] for e in tick_events
                if e["i"] > conn["i"] and acked_at[e["args"][0]["n"]] < conn["t"]]
        assert len(away) >= 3, f"drop {k}: only {away} were sent while the socket was away: the test did not test recovery"
    assert not [e for e in seen if e["kind"] == "connect_error"], "no refused CONNECT"
    notes = [e for e in seen if e["kind"] == "event" and e["event"] == "notification:new"]
    got = [e["args"][0]["n"] for e in notes]
    assert got == list(range(1, notes_total + 1)), f"the user's stream: {missing_report(got, list(range(1, notes_total + 1)))}"
    assert_increasing([e["args"][-1] for e in notes], user_tag(user))

    moved = grew(before, await recoveries_of(relays))
    assert moved == {"recovered": float(drops)}, f"relay_recoveries_total moved by {moved}"
    return sid


@async_test
async def test_browser_recovers_a_dropped_socket(web_relay, browser, page_server):  # noqa: F811
    user, room = unique("web"), unique("conversation:tick")
    page = await BrowserPage.open(browser, page_server)
    try:
        sid = await browser_recovery_scenario(page, web_relay.url, web_relay, [web_relay], user, room)
        assert await sids_of(web_relay, user) == [sid], "the recovered socket is the user's only session"
        # Still in the room, without room:join: a new event reaches it (with its offset).
        async with Clients() as c:
            carol = await c.connect(web_relay, unique("carol"))
            await carol.join(room)
            since = await page.mark()
            await carol.ok("chat:tick", {"room": room, "n": TICKS + 1})
            hit = await page.expect("web", "event", "chat:tick", since=since, n=TICKS + 1)
            assert len(hit["args"]) == 2 and parse_offset(hit["args"][1])[2] == room_tag(room), hit
        await page.disconnect("web")
    finally:
        await page.close()


PAYLOAD = bytes(range(256)) * 3 + b"\x00relay\xff"


@async_test
async def test_browser_recovery_replays_binary_receipts_and_backend_events(web_relay, browser, page_server):  # noqa: F811
    """What a browser misses while away — a custom event with a binary attachment, a receipt
    forward, a backend room event — is replayed after it recovers, bytes intact, in order; and
    `room:sync` returns the binary event to python-socketio (a binary ack)."""
    user, room = unique("web"), unique("conversation:bin")
    page = await BrowserPage.open(browser, page_server)
    try:
        async with Clients() as c:
            bob = await member(c, web_relay, room)
            first = await page.connect("web", web_relay.url, {"auth": {"token": mint_token(user), "recover": True}})
            await page.expect("web", "upgrade", transport="websocket")
            joined = await page.ok("web", "room:join", {"room": room})
            since = await page.mark()
            await page.force_close("web")
            await page.expect("web", "disconnect", since=since)
            # While it is away (socket.io-client waits at least 500 ms before reconnecting).
            assert await bob.ok("file:chunk", {"room": room, "name": "away.bin", "data": PAYLOAD}) == {"ok": True}
            receipt = await bob.ok("message:delivered", {"room": room, "messageId": "m-away", "authorId": user})
            status, body = await emit_api(web_relay, "message:new", {"room": room}, {"text": "while away"})
            assert status == 200, body
            sent_at = time.time() * 1000
            again = await page.connected("web", since)
            assert again["recovered"] is True and again["id"] == first["id"], again
            assert again_connect_after(await page.seen("web"), since) > sent_at, \
                "the browser came back before everything was sent: the test did not test recovery"
            chunk = await page.expect_event("web", "file:chunk", since=since, name="away.bin")
            assert chunk["data"] == PAYLOAD and chunk["from"] == bob.name, chunk
            fwd = await page.expect_event("web", "message:delivered", since=since, messageId="m-away")
            assert fwd["id"] == receipt["id"] and fwd["userId"] == bob.name, fwd
            await page.expect_event("web", "message:new", since=since, text="while away")
            # (Presence across a recovery: test_presence_across_a_recovery.)
            replayed = [e for e in await page.seen("web") if e["kind"] == "event" and e["i"] >= since
                        and not e["event"].startswith("presence:")]
            order = [e["event"] for e in replayed]
            assert order == ["file:chunk", "message:delivered", "message:new"], \
                f"{order}: {json.dumps([[e['event']] + e['args'] for e in replayed])[:3000]}"

            # room:sync returns the binary event with its bytes (a binary ack).
            cat = ArgsClient("cat")
            await cat.connect(web_relay, {"token": mint_token(unique("cat")), "rooms": [room]})
            try:
                reply = await cat.ok("room:sync", {"room": room, "offset": joined["offset"]})
                names = [e[0] for e in reply["events"] if not e[0].startswith("presence:")]
                assert names == ["file:chunk", "message:delivered", "message:new"], reply
                synced = next(e for e in reply["events"] if e[0] == "file:chunk")
                assert synced[1]["data"] == PAYLOAD and synced[1]["name"] == "away.bin", synced
                assert parse_offset(synced[-1])[2] == room_tag(room), synced
            finally:
                await cat.disconnect()
        await page.disconnect("web")
    finally:
        await page.close()


def again_connect_after(seen: list[dict], since: int) -> float:
    """The page time (ms) of the first `connect` at or after `since`."""
    return next(e["t"] for e in seen if e["kind"] == "connect" and e["i"] >= since)


@async_test
async def test_browser_with_rooms_in_auth_recovers_three_drops(web_relay, browser, page_server):  # noqa: F811
    """`io(url, {auth: {token, recover: true, rooms: [room]}})`: the app names its room in the
    auth, which socket.io-client sends again (with pid and offset) on every reconnection. Three
    drops under steady traffic, each recovered, nothing missed or repeated."""
    user, room = unique("web"), unique("conversation:three")
    page = await BrowserPage.open(browser, page_server)
    try:
        sid = await browser_recovery_scenario(page, web_relay.url, web_relay, [web_relay], user, room,
                                              rooms_in_auth=True, drops=3, ticks=2 * TICKS)
        assert await sids_of(web_relay, user) == [sid]
        await page.disconnect("web")
    finally:
        await page.close()


# --------------------------------------------------------------------------------------------
# Recovery by hand: every stream, in order, before anything new


async def member(c: Clients, relay, room: str, prefix: str = "bob") -> Client:
    m = await c.connect(relay, unique(prefix))
    await m.join(room)
    return m


async def opted_in(raw: RawSessions, relay, user: str, rooms: list[str], name: str = "a", token: str | None = None):
    """A raw socket that opted in (`recover: true`) with `rooms` in its CONNECT auth; its answer."""
    s = await raw.open(relay, name)
    answer = await s.connect_ok({"token": token or mint_token(user), "recover": True, "rooms": rooms})
    assert isinstance(answer.get("sid"), str) and answer["sid"], answer
    assert PID.match(answer.get("pid") or ""), f"pid: a base64url id: {answer}"
    assert answer.get("recovered") is False, answer
    assert sorted(answer.get("rooms", {})) == sorted(rooms), answer
    return s, answer


async def reconnect(raw: RawSessions, relay, user_token: str, pid: str, offset: str | None, name: str, **extra) -> tuple[RawSession, dict]:
    """What socket.io-client sends when it comes back: `{token, recover, pid, offset}`."""
    s = await raw.open(relay, name)
    auth = {"token": user_token, "recover": True, "pid": pid, **extra}
    if offset is not None:
        auth["offset"] = offset
    return s, await s.connect_ok(auth)


def last_offset(s: RawSession) -> str:
    offsets = [args[-1] for _, args in s.events if len(args) == 2]
    assert offsets, f"{s.name} received no event with an offset: {s.events}"
    return offsets[-1]


async def assert_new_session(s: RawSession, answer: dict, old: dict, rooms: list[str]) -> None:
    """A new session: new sid and pid, `recovered:false`, in none of `rooms`, nothing replayed."""
    assert answer.get("recovered") is False, answer
    assert answer["sid"] != old["sid"], f"a new sid: {answer} (old {old})"
    assert answer.get("pid") != old["pid"] and PID.match(answer.get("pid") or ""), f"a new pid: {answer} (old {old})"
    assert not answer.get("rooms"), f"no rooms restored: {answer}"
    await s.barrier()
    assert s.events == [], f"nothing replayed: {s.events}"
    for room in rooms:
        await s.fails("room:leave", {"room": room}, "not_in_room")


@async_test
async def test_recovery_replays_every_stream_in_order_before_new_events(history_relay):
    relay = await history_relay()
    user, room, room2 = unique("amy"), unique("conversation:a"), unique("conversation:b")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        await bob.join(room2)
        a, hello = await opted_in(raw, relay, user, [room, room2])
        assert set(hello["rooms"]) == {room, room2}
        await send_ticks(bob, room, 1, 3)
        await a.wait_for(lambda: tick_numbers(a.events) == [1, 2, 3], "ticks 1..3")
        offset = last_offset(a)
        before = await recoveries(relay)

        await a.drop()
        # While it is away: ticks in both rooms, a backend event to the user, a reaction, and
        # typing (not recoverable). A watcher sees the typing flush, so it has happened.
        await send_ticks(bob, room, 4, 10)
        await bob.ok("chat:tick", {"room": room2, "n": 100})
        status, body = await emit_api(relay, "notification:new", {"user": user}, {"title": "while away"})
        assert status == 200, body
        await bob.ok("message:reaction", {"room": room, "messageId": "m1", "emoji": "👍", "action": "add"})
        watcher = await member(c, relay, room, "watcher")
        await bob.ok("typing:start", {"room": room})
        await watcher.expect("typing:start", room=room)

        b, back = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "a-again")
        assert back.get("recovered") is True, f"not recovered: {back}"
        assert back["sid"] == hello["sid"] and back["pid"] == hello["pid"], (back, hello)
        assert set(back.get("rooms", {})) == {room, room2}, back
        # New events after the CONNECT answer come after every replayed one.
        await bob.ok("chat:tick", {"room": room, "n": 11})
        await b.wait_for(lambda: 11 in tick_numbers(b.events), "the new tick 11")
        await b.barrier()

        replayed = [(n, args) for n, args in b.events if not n.startswith(("typing:", "presence:"))]
        in_room = [(n, args) for n, args in replayed if args[0].get("room") == room]
        assert [n for n, _ in in_room] == ["chat:tick"] * 7 + ["message:reaction", "chat:tick"], \
            f"room {room}: the missed ticks, the reaction, then the new tick; got {b.events}"
        assert tick_numbers(in_room) == [4, 5, 6, 7, 8, 9, 10, 11], b.events
        assert_increasing([args[-1] for _, args in in_room], room_tag(room))
        assert parse_offset(in_room[0][1][-1])[:2] > parse_offset(offset)[:2], "nothing already received"
        assert [args[0]["n"] for n, args in replayed if args[0].get("room") == room2] == [100], b.events
        notes = b.named("notification:new")
        assert [args[0]["title"] for _, args in notes] == ["while away"], b.events
        assert parse_offset(notes[0][1][-1])[2] == user_tag(user), notes
        # Presence is live only (§12): the watcher's presence:join, sent while the socket was
        # away, is not replayed; presence:list says who is there now.
        assert not b.named("presence:join", "presence:leave"), f"presence is not recoverable: {b.events}"
        listed = await b.ok("presence:list", {"room": room})
        assert {"user": watcher.name, "devices": 1} in listed["presence"], listed
        assert not b.named("typing:start", "typing:stop"), f"typing is not recoverable: {b.events}"
        # The new tick (sent after the CONNECT answer) comes after everything replayed.
        assert [e for e in b.events if not e[0].startswith("typing:")][-1] == in_room[-1], \
            f"every replayed event before any new one: {b.events}"
        assert all(len(args) == 2 for _, args in b.events), f"every event with its offset: {b.events}"

        assert grew(before, await recoveries(relay)) == {"recovered": 1.0}
        assert await sids_of(relay, user) == [hello["sid"]]
        # Dropped again, it is kept again and recovers again.
        offset = last_offset(b)
        await b.drop()
        await send_ticks(bob, room, 12, 13)
        d, again = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "a-third")
        assert again.get("recovered") is True and again["sid"] == hello["sid"], again
        await d.wait_for(lambda: tick_numbers(d.events) == [12, 13], "ticks 12, 13")


@async_test
async def test_receipt_forward_is_replayed_once(history_relay):
    """§4.5: a receipt reaches each socket once. The author's socket, a member of the room,
    misses a receipt on its message while away: it gets it once after recovering — not once
    from the room's stream and again from its user's stream."""
    relay = await history_relay()
    user, room = unique("author"), unique("conversation:rcpt")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        a, hello = await opted_in(raw, relay, user, [room])
        await bob.ok("chat:tick", {"room": room, "n": 1})
        await a.wait_for(lambda: tick_numbers(a.events) == [1], "tick 1")
        # Live, the author's socket in the room gets a receipt once.
        live = await bob.ok("message:read", {"room": room, "messageId": "m-live", "authorId": user})
        await a.wait_for(lambda: a.named("message:read"), "the live receipt")
        await a.barrier()
        assert [args[0]["id"] for _, args in a.named("message:read")] == [live["id"]], f"live: once: {a.events}"
        offset = last_offset(a)
        await a.drop()
        receipt = await bob.ok("message:delivered", {"room": room, "messageId": "m-away", "authorId": user})
        await bob.ok("chat:tick", {"room": room, "n": 2})
        b, back = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "author-again")
        assert back.get("recovered") is True, back
        await b.wait_for(lambda: tick_numbers(b.events) == [2], "tick 2")
        await b.barrier()
        got = b.named("message:delivered")
        assert [args[0]["id"] for _, args in got] == [receipt["id"]], \
            f"the missed receipt once, got {len(got)}: {[p for p in b.packets if 'message:delivered' in p]}"


@async_test
async def test_presence_across_a_recovery(history_relay):
    """§12: presence is live only, so the missed events are the room's chat events and not its
    own user's presence:leave (the other members saw it when the socket dropped); the others see
    the user join again, and presence:list lists it."""
    relay = await history_relay()
    user, room = unique("amy"), unique("conversation:here")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        a, hello = await opted_in(raw, relay, user, [room])
        await bob.expect("presence:join", user=user, room=room)
        await bob.ok("chat:tick", {"room": room, "n": 1})
        await a.wait_for(lambda: tick_numbers(a.events) == [1], "tick 1")
        offset = last_offset(a)
        await a.drop()
        await bob.expect("presence:leave", user=user, room=room)
        await bob.ok("chat:tick", {"room": room, "n": 2})
        b, back = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "again")
        assert back.get("recovered") is True, back
        await b.wait_for(lambda: tick_numbers(b.events) == [2], "tick 2")
        await b.barrier()
        assert not [n for n, _ in b.events if n.startswith("presence:")], \
            f"presence is not replayed: {[p for p in b.packets if 'presence:' in p]}"
        assert [n for n, _ in b.events] == ["chat:tick"], f"only the missed chat event: {b.events}"
        await bob.expect("presence:join", user=user, room=room)
        listed = await b.ok("presence:list", {"room": room})
        assert {"user": user, "devices": 1} in listed["presence"], listed


@async_test
async def test_ping_timeout_is_recoverable(history_relay):
    """A socket that stops answering pings (a dead network the relay notices by itself) is
    closed with 4000 and kept: it recovers."""
    relay = await history_relay("--ping-interval", "300", "--ping-timeout", "300")
    user, room = unique("amy"), unique("conversation:ping")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        a, hello = await opted_in(raw, relay, user, [room])
        await bob.ok("chat:tick", {"room": room, "n": 1})
        await a.wait_for(lambda: tick_numbers(a.events) == [1], "tick 1")
        offset = last_offset(a)
        a.answer_pings = False
        closed = await asyncio.wait_for(asyncio.shield(a.closed), TIMEOUT)
        assert getattr(getattr(closed, "rcvd", None), "code", None) == 4000, f"closed for the missing pong: {closed!r}"
        await bob.ok("chat:tick", {"room": room, "n": 2})
        b, back = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "again")
        assert back.get("recovered") is True and back["sid"] == hello["sid"], back
        await b.wait_for(lambda: tick_numbers(b.events) == [2], "tick 2 replayed")


@async_test
async def test_recovery_edges_no_offset_left_room_own_events(history_relay):
    """socket.io-client sends no `offset` when it received nothing yet: everything since the
    CONNECT is replayed. A room left before the drop is not restored and its events are not
    replayed. The socket's own events are never sent back to it."""
    relay = await history_relay()
    user, room, gone = unique("amy"), unique("conversation:stay"), unique("conversation:gone")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        await bob.join(gone)
        # Received nothing: no offset.
        a, hello = await opted_in(raw, relay, user, [room])
        await a.drop()
        await send_ticks(bob, room, 1, 2)
        b, back = await reconnect(raw, relay, mint_token(user), hello["pid"], None, "no-offset")
        assert back.get("recovered") is True and back["sid"] == hello["sid"], back
        await b.wait_for(lambda: tick_numbers(b.events) == [1, 2], "ticks 1, 2 replayed")

        # Joins `gone`, leaves it; sends an event of its own; drops.
        await b.ok("room:join", {"room": gone})
        await b.ok("room:leave", {"room": gone})
        await b.ok("chat:tick", {"room": room, "n": 100})
        await bob.expect("chat:tick", n=100)
        offset = last_offset(b)
        await b.drop()
        await bob.ok("chat:tick", {"room": gone, "n": 200})
        await send_ticks(bob, room, 3, 4)
        d, again = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "edges")
        assert again.get("recovered") is True, again
        assert list(again.get("rooms", {})) == [room], f"the room it left is not restored: {again}"
        await d.wait_for(lambda: tick_numbers(d.events) == [3, 4], "ticks 3, 4")
        await d.barrier()
        assert tick_numbers(d.events) == [3, 4], f"not its own tick 100, not the left room's 200: {d.events}"
        await d.fails("room:leave", {"room": gone}, "not_in_room")


@async_test
async def test_room_sync_after_the_history_ttl(history_relay):
    ttl_ms = 400
    relay = await history_relay("--history-ttl-ms", str(ttl_ms), "--recovery-window-ms", str(ttl_ms))
    user, room = unique("py"), unique("conversation:ttl")
    async with Clients() as c:
        bob = await member(c, relay, room)
        amy = ArgsClient("amy")
        await amy.connect(relay, {"token": mint_token(user), "recover": True, "rooms": [room]})
        try:
            await send_ticks(bob, room, 1, 3)
            await amy.wait_for(lambda: tick_numbers(amy.named("chat:tick")) == [1, 2, 3], "ticks 1..3")
            first = amy.named("chat:tick")[0][1][1]
            reply = await amy.ok("room:sync", {"room": room, "offset": first})
            assert [e[1]["n"] for e in reply["events"] if e[0] == "chat:tick"] == [2, 3], reply
            # The condition is time itself: let the history expire.
            await asyncio.sleep(3 * ttl_ms / 1000)
            await bob.ok("chat:tick", {"room": room, "n": 4})
            await amy.wait_for(lambda: 4 in tick_numbers(amy.named("chat:tick")), "tick 4")
            await amy.fails("room:sync", {"room": room, "offset": first}, "history_unavailable")
        finally:
            await amy.disconnect()


@async_test
async def test_engine_io_close_packet_is_a_transport_close(history_relay):
    """Engine.IO `1` (what socket.io-client's polling transport sends on `engine.close()`) closes
    the transport, not the Socket.IO session: only `41` is the client's own disconnect (§12)."""
    relay = await history_relay()
    user, room = unique("amy"), unique("conversation:eio1")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        a, hello = await opted_in(raw, relay, user, [room])
        await bob.ok("chat:tick", {"room": room, "n": 1})
        await a.wait_for(lambda: tick_numbers(a.events) == [1], "tick 1")
        offset = last_offset(a)
        await a.sock.send("1")
        await asyncio.wait_for(asyncio.shield(a.closed), TIMEOUT)
        await bob.ok("chat:tick", {"room": room, "n": 2})
        b, back = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "again")
        assert back.get("recovered") is True, f"Engine.IO `1` ended the session for good: {back}"
        await b.wait_for(lambda: tick_numbers(b.events) == [2], "tick 2 replayed")


@async_test
async def test_a_live_session_cannot_be_taken_over(history_relay):
    """A pid presented while its socket is still connected and younger than
    `--recovery-takeover-after-ms` (default 1 s: two sockets racing with one pid) recovers
    nothing: a new session; the live socket goes on undisturbed."""
    relay = await history_relay()
    user, room = unique("amy"), unique("conversation:live")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        a, hello = await opted_in(raw, relay, user, [room])
        await bob.ok("chat:tick", {"room": room, "n": 1})
        await a.wait_for(lambda: tick_numbers(a.events) == [1], "tick 1")
        b, back = await reconnect(raw, relay, mint_token(user), hello["pid"], last_offset(a), "twin")
        await assert_new_session(b, back, hello, [room])
        await bob.ok("chat:tick", {"room": room, "n": 2})
        await a.wait_for(lambda: tick_numbers(a.events) == [1, 2], "tick 2 on the live socket")
        assert sorted(await sids_of(relay, user)) == sorted([hello["sid"], back["sid"]])


FORGED = ["future", "other-stream", "malformed", "not-a-string"]


@pytest.mark.parametrize("forged", FORGED)
@async_test
async def test_forged_offsets_recover_nothing(history_relay, forged):
    """A socket received tick 1 and dropped; it comes back with an offset it never received —
    from the future, of a stream it does not follow, malformed, not a string. That never
    yields a recovery (which would replay tick 1 again, or skip what it missed): a new session
    or a refusal."""
    relay = await history_relay()
    user, room = unique("amy"), unique("conversation:forged")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        a, hello = await opted_in(raw, relay, user, [room])
        await bob.ok("chat:tick", {"room": room, "n": 1})
        await a.wait_for(lambda: tick_numbers(a.events) == [1], "tick 1")
        ms, seq, tag = parse_offset(last_offset(a))
        offset = {"future": f"{ms + 10**9}-0:{tag}", "other-stream": f"{ms}-{seq}:{room_tag('conversation:elsewhere')}",
                  "malformed": "not-an-offset", "not-a-string": 12}[forged]
        await a.drop()
        await bob.ok("chat:tick", {"room": room, "n": 2})
        s = await raw.open(relay, forged)
        answer = await s.connect({"token": mint_token(user), "recover": True, "pid": hello["pid"], "offset": offset})
        if answer.startswith("44"):
            return  # refused: nothing recovered
        body = json.loads(answer[2:])
        await s.barrier()
        assert body.get("recovered") is not True, \
            f"{forged} offset {offset!r} recovered the session: {body}; then replayed {s.packets[1:-1]}"
        assert tick_numbers(s.events) == [], f"{forged}: nothing replayed: {s.events}"


@async_test
async def test_slow_consumer_close_is_never_recovered(history_relay):
    """§12: a slow-consumer close (4008) ends the session for good."""
    # One sender bursting ~24 MB: over its default event-bytes budget, which this test lifts.
    relay = await history_relay("--max-event-bytes", "65536", "--event-bytes-per-second", "100000000",
                                "--inbound-bytes-per-second", "100000000")
    user, room = unique("amy"), unique("conversation:slow")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        a, hello = await opted_in(raw, relay, user, [room])
        await bob.ok("chat:tick", {"room": room, "n": 1})
        await a.wait_for(lambda: tick_numbers(a.events) == [1], "tick 1")
        offset = last_offset(a)
        a.reading.clear()  # stops reading: the relay's queue for it grows
        blob = "x" * 60000
        for n in range(2, 400):  # bounded: ~24 MB, far over the 1 MiB hard limit plus socket buffers
            await bob.ok("chat:tick", {"room": room, "n": n, "blob": blob})
            if await metric(relay, "relay_slow_consumer_closes_total") >= 1:
                break
        assert await metric(relay, "relay_slow_consumer_closes_total") >= 1, "the reader was never closed as slow"
        a.reading.set()
        closed = await asyncio.wait_for(asyncio.shield(a.closed), TIMEOUT)
        assert getattr(getattr(closed, "rcvd", None), "code", None) == 4008, f"closed as a slow consumer: {closed!r}"
        b, back = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "again")
        await assert_new_session(b, back, hello, [room])


@async_test
async def test_events_during_the_recovery_handshake_arrive_once(history_relay):
    """Events published while the relay is recovering a socket (between its reading of the
    history and its answer) reach the socket exactly once: replayed or live, never both. Up to
    ROUNDS drop/recover rounds with a sender bursting meanwhile. A reconnect that reaches the
    relay before it noticed the drop takes the connection over, whatever its age."""
    relay = await history_relay("--recovery-takeover-after-ms", "0")
    user, room = unique("amy"), unique("conversation:race")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        s, hello = await opted_in(raw, relay, user, [room])
        received: list[tuple[int, str]] = []  # (n, offset) over every socket of the session
        n = 0
        for round_no in range(ROUNDS):
            n += 1
            await bob.ok("chat:tick", {"room": room, "n": n})
            await s.wait_for(lambda: n in tick_numbers(s.events), f"tick {n}")
            received += [(args[0]["n"], args[-1]) for name, args in s.events if name == "chat:tick"]
            offset = received[-1][1]
            await s.drop()
            first = n + 1
            n += BURST
            burst = asyncio.create_task(send_ticks(bob, room, first, n))
            s, back = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, f"round-{round_no}")
            assert back.get("recovered") is True, f"round {round_no}: {back}"
            await asyncio.wait_for(burst, TIMEOUT)
            await s.wait_for(lambda: n in tick_numbers(s.events), f"round {round_no}: tick {n}")
            await s.barrier()
            got = tick_numbers(s.events)
            if got != list(range(got[0] if got else first, n + 1)) or len(set(got)) != len(got):
                dups = [p for p in s.packets if p.startswith('42["chat:tick"')]
                raise AssertionError(f"round {round_no}: ticks {got}; packets {dups}")
            s.events = [e for e in s.events if e[0] == "chat:tick" and e[1][0]["n"] == n]
        all_n = [k for k, _ in received]
        assert all_n == sorted(set(all_n)), missing_report(all_n, list(range(1, n + 1)))


@async_test
async def test_a_reconnect_takes_over_a_connection_that_still_looks_alive(history_relay):
    """A phone whose network went away sends nothing: the relay still holds its old connection
    when the phone comes back with its pid. The old connection is closed (4009) and its session
    recovered by the reconnect, with what it missed, instead of a new session. (Taken over at
    any age here; the default 1 s minimum age is the test below.)"""
    relay = await history_relay("--recovery-takeover-after-ms", "0")
    user, room = unique("amy"), unique("conversation:takeover")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        old, hello = await opted_in(raw, relay, user, [room], name="old")
        await send_ticks(bob, room, 1, 2)
        await old.wait_for(lambda: tick_numbers(old.events) == [1, 2], "ticks 1, 2")
        offset = last_offset(old)
        old.reading.clear()  # gone silent: reads nothing, says nothing, the TCP connection stays
        await send_ticks(bob, room, 3, 4)
        before = await recoveries(relay)
        s, back = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "back")
        assert back.get("recovered") is True, back
        assert back["sid"] == hello["sid"] and back["pid"] == hello["pid"], (back, hello)
        await send_ticks(bob, room, 5, 5)
        await s.wait_for(lambda: tick_numbers(s.events) == [3, 4, 5], "3, 4 replayed, then 5 live")
        await s.barrier()
        assert tick_numbers(s.events) == [3, 4, 5], missing_report(tick_numbers(s.events), [3, 4, 5])
        assert grew(before, await recoveries(relay)) == {"recovered": 1}
        old.reading.set()
        closed = await asyncio.wait_for(asyncio.shield(old.closed), TIMEOUT)
        assert getattr(getattr(closed, "rcvd", None), "code", None) == 4009, f"the old connection closed as replaced: {closed!r}"


@async_test
async def test_another_users_token_does_not_take_over_a_live_connection(history_relay):
    """The pid alone is not enough: with another user's valid token the reconnect is a new
    session, and the live connection keeps its session."""
    relay = await history_relay()
    user, room = unique("amy"), unique("conversation:not-yours")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        a, hello = await opted_in(raw, relay, user, [room], name="amy")
        await send_ticks(bob, room, 1, 1)
        await a.wait_for(lambda: tick_numbers(a.events) == [1], "tick 1")
        s, answer = await reconnect(raw, relay, mint_token(unique("mallory"), rooms=[room]), hello["pid"], last_offset(a), "mallory")
        await assert_new_session(s, answer, hello, [room])
        await send_ticks(bob, room, 2, 2)
        await a.wait_for(lambda: tick_numbers(a.events) == [1, 2], "amy still gets tick 2")
        assert not a.closed.done(), a.closed


@async_test
async def test_a_session_is_recovered_at_most_once(history_relay):
    relay = await history_relay()
    user, room = unique("amy"), unique("conversation:once")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        a, hello = await opted_in(raw, relay, user, [room])
        await send_ticks(bob, room, 1, 2)
        await a.wait_for(lambda: tick_numbers(a.events) == [1, 2], "ticks 1, 2")
        offset = last_offset(a)
        await a.drop()
        await send_ticks(bob, room, 3, 4)
        # Two sockets come back with the same pid at once: one recovers, the other is new.
        s1, s2 = await raw.open(relay, "first"), await raw.open(relay, "second")
        auth = {"token": mint_token(user), "recover": True, "pid": hello["pid"], "offset": offset}
        answers = await asyncio.gather(s1.connect_ok(auth), s2.connect_ok(auth))
        flags = sorted(ans.get("recovered") for ans in answers)
        assert flags == [False, True], f"recovered exactly once: {answers}"
        winner, loser = (s1, s2) if answers[0]["recovered"] else (s2, s1)
        await winner.wait_for(lambda: tick_numbers(winner.events) == [3, 4], "ticks 3, 4 replayed")
        await assert_new_session(loser, answers[1] if winner is s1 else answers[0], hello, [room])


@async_test
async def test_reconnect_after_the_window_is_a_new_session(history_relay):
    window_ms = 500
    relay = await history_relay("--recovery-window-ms", str(window_ms))
    user, room = unique("amy"), unique("conversation:late")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        a, hello = await opted_in(raw, relay, user, [room])
        await send_ticks(bob, room, 1, 1)
        await a.wait_for(lambda: tick_numbers(a.events) == [1], "tick 1")
        offset = last_offset(a)
        before = await recoveries(relay)
        await a.drop()
        await send_ticks(bob, room, 2, 4)
        # The condition is time itself: stay away for three windows.
        await asyncio.sleep(3 * window_ms / 1000)
        b, back = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "late")
        await assert_new_session(b, back, hello, [room])
        assert grew(before, await recoveries(relay)) == {"unknown_session": 1.0}
        assert await sids_of(relay, user) == [back["sid"]], "the old session is gone"
        # And it is a working session: it can join and receive.
        await b.ok("room:join", {"room": room})
        await bob.ok("chat:tick", {"room": room, "n": 5})
        await b.wait_for(lambda: tick_numbers(b.events) == [5], "tick 5, live")


@async_test
async def test_not_recovered_when_history_no_longer_reaches_back(history_relay):
    relay = await history_relay("--history-size", "5")
    async with Clients() as c, RawSessions() as raw:
        # Control: 3 missed events fit in a history of 5 — recovered.
        user, room = unique("amy"), unique("conversation:fits")
        bob = await member(c, relay, room)
        a, hello = await opted_in(raw, relay, user, [room], "fits")
        await send_ticks(bob, room, 1, 2)
        await a.wait_for(lambda: tick_numbers(a.events) == [1, 2], "ticks 1, 2")
        offset = last_offset(a)
        await a.drop()
        await send_ticks(bob, room, 3, 5)
        b, back = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "fits-again")
        assert back.get("recovered") is True, back
        await b.wait_for(lambda: tick_numbers(b.events) == [3, 4, 5], "ticks 3..5 replayed")

        # 20 missed events, history of 5: not recovered, nothing replayed, no rooms.
        user, room = unique("amy"), unique("conversation:gone")
        bob = await member(c, relay, room)
        a, hello = await opted_in(raw, relay, user, [room], "gone")
        await send_ticks(bob, room, 1, 2)
        await a.wait_for(lambda: tick_numbers(a.events) == [1, 2], "ticks 1, 2")
        offset = last_offset(a)
        before = await recoveries(relay)
        await a.drop()
        await send_ticks(bob, room, 3, 22)
        b, back = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "gone-again")
        await assert_new_session(b, back, hello, [room])
        assert grew(before, await recoveries(relay)) == {"history_gone": 1.0}


@async_test
async def test_recovery_never_skips_authentication(history_relay):
    relay = await history_relay()
    user, other, room = unique("amy"), unique("eve"), unique("conversation:auth")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        a, hello = await opted_in(raw, relay, user, [room])
        await send_ticks(bob, room, 1, 1)
        await a.wait_for(lambda: tick_numbers(a.events) == [1], "tick 1")
        offset = last_offset(a)
        await a.drop()
        await send_ticks(bob, room, 2, 3)

        # The right pid with a token that does not verify: refused like any bad token.
        forged = make_jwt({"sub": user, "exp": 4102444800, "rooms": ["conversation:*"]}, sign_with="x" * 40)
        s = await raw.open(relay, "forged")
        code = await s.connect_error({"token": forged, "recover": True, "pid": hello["pid"], "offset": offset})
        assert code == "token_bad_signature", code
        expired = mint_token(user, ttl=-3600)
        s = await raw.open(relay, "expired")
        code = await s.connect_error({"token": expired, "recover": True, "pid": hello["pid"], "offset": offset})
        assert code == "token_expired", code
        s = await raw.open(relay, "no-token")
        code = await s.connect_error({"recover": True, "pid": hello["pid"], "offset": offset})
        assert code == "token_missing", code

        # Refused CONNECTs did not touch the session: its user recovers it.
        b, back = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, "rightful")
        assert back.get("recovered") is True and back["sid"] == hello["sid"], back
        await b.wait_for(lambda: tick_numbers(b.events) == [2, 3], "ticks 2, 3 replayed")

        # The right pid with another user's valid token: a new session of that other user.
        # (Whether that attempt also ends the kept session, §12 does not say; not checked.)
        offset = last_offset(b)
        await b.drop()
        await send_ticks(bob, room, 4, 5)
        before = await recoveries(relay)
        e, theirs = await reconnect(raw, relay, mint_token(other), hello["pid"], offset, "other-user")
        await assert_new_session(e, theirs, hello, [room])
        assert grew(before, await recoveries(relay)) == {"user_mismatch": 1.0}
        assert await sids_of(relay, other) == [theirs["sid"]]


@async_test
async def test_recovery_rechecks_rooms_against_the_new_token(history_relay):
    relay = await history_relay()
    user, kept, lost = unique("amy"), unique("conversation:kept"), unique("conversation:lost")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, kept)
        await bob.join(lost)
        a, hello = await opted_in(raw, relay, user, [kept, lost])
        await bob.ok("chat:tick", {"room": kept, "n": 1})
        await a.wait_for(lambda: tick_numbers(a.events) == [1], "tick 1")
        offset = last_offset(a)
        await a.drop()
        await bob.ok("chat:tick", {"room": kept, "n": 2})
        await bob.ok("chat:tick", {"room": lost, "n": 3})
        # The new token no longer allows `lost`.
        b, back = await reconnect(raw, relay, mint_token(user, rooms=[kept]), hello["pid"], offset, "narrower")
        assert back.get("recovered") is True and back["sid"] == hello["sid"], back
        assert list(back.get("rooms", {})) == [kept], f"a room it no longer may see is left out: {back}"
        await b.barrier()
        assert tick_numbers(b.events) == [2], f"only the allowed room's missed events: {b.events}"
        await b.fails("room:leave", {"room": lost}, "not_in_room")
        await bob.ok("chat:tick", {"room": lost, "n": 4})
        await bob.ok("chat:tick", {"room": kept, "n": 5})
        await b.wait_for(lambda: 5 in tick_numbers(b.events), "tick 5")
        assert tick_numbers(b.events) == [2, 5], b.events


@async_test
async def test_own_disconnect_and_kick_are_never_recovered(history_relay):
    relay = await history_relay()
    room = unique("conversation:bye")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        for how in ("disconnect", "kick"):
            user = unique(f"amy-{how}")
            a, hello = await opted_in(raw, relay, user, [room], how)
            await bob.ok("chat:tick", {"room": room, "n": 1})
            await a.wait_for(lambda: tick_numbers(a.events) == [1], "tick 1")
            offset = last_offset(a)
            if how == "disconnect":
                await a.send_disconnect()
            else:
                status, body = await http(relay, "DELETE", f"/admin/v1/connections/{hello['sid']}", key=ADMIN_KEY)
                assert status in (200, 204), body
                await asyncio.wait_for(asyncio.shield(a.closed), TIMEOUT)
            await bob.expect("presence:leave", user=user, room=room)
            await bob.ok("chat:tick", {"room": room, "n": 2})
            b, back = await reconnect(raw, relay, mint_token(user), hello["pid"], offset, f"{how}-again")
            await assert_new_session(b, back, hello, [room])


@async_test
async def test_history_size_zero_turns_recovery_off(history_relay):
    relay = await history_relay("--history-size", "0")
    user, room = unique("amy"), unique("conversation:off")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        s = await raw.open(relay, "a")
        hello = await s.connect_ok({"token": mint_token(user), "recover": True, "rooms": [room]})
        await bob.ok("chat:tick", {"room": room, "n": 1})
        await s.wait_for(lambda: tick_numbers(s.events) == [1], "tick 1")
        args = s.events[-1][1]
        offset = args[-1] if len(args) == 2 else None
        await s.drop()
        await bob.ok("chat:tick", {"room": room, "n": 2})
        b = await raw.open(relay, "again")
        auth = {"token": mint_token(user), "recover": True, "pid": hello.get("pid") or "A" * 24}
        if offset is not None:
            auth["offset"] = offset
        back = await b.connect_ok(auth)
        assert back.get("recovered") is not True and back["sid"] != hello["sid"], back
        await b.barrier()
        assert tick_numbers(b.events) == [], b.events


# --------------------------------------------------------------------------------------------
# Opting in, rooms in CONNECT


def only_own_join(synced: dict, user: str) -> bool:
    """A `room:sync` answer holds nothing, or only `user`'s own presence:join (whether the
    offset of a join is taken before or after the joiner's own presence:join, §12 does not say)."""
    return synced["more"] is False and all(
        e[0] == "presence:join" and e[1].get("user") == user for e in synced["events"]) and len(synced["events"]) <= 1


@async_test
async def test_rooms_in_connect_answer_and_offsets(history_relay):
    relay = await history_relay("--max-rooms-per-connection", "3")
    user, room, busy = unique("amy"), unique("conversation:fresh"), unique("conversation:busy")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, busy)
        await send_ticks(bob, busy, 1, 2)
        s = await raw.open(relay, "a")
        hello = await s.connect_ok({"token": mint_token(user), "rooms": [room, busy, "secret:1"]})
        assert set(hello) == {"sid", "rooms", "refused"}, f"not opted in: no pid, no recovered: {hello}"
        # The fresh room's stream holds at most this socket's own presence:join: its offset is
        # `0-0:<tag>` (empty) or that event's, and nothing but that event follows it.
        fresh = hello["rooms"][room]
        assert parse_offset(fresh)[2] == room_tag(room), hello
        synced = await s.ok("room:sync", {"room": room, "offset": fresh})
        assert only_own_join(synced, user), f"the answer's offset is the stream's head when it joined: {synced}"
        ms, seq, tag = parse_offset(hello["rooms"][busy])
        assert tag == room_tag(busy) and (ms, seq) > (0, 0), hello
        assert hello["refused"] == {"secret:1": "room_not_authorized"}, hello
        assert set(hello["rooms"]) == {room, busy}
        # In the rooms at once; events without offsets (not opted in).
        await bob.ok("chat:tick", {"room": busy, "n": 3})
        await s.wait_for(lambda: tick_numbers(s.events) == [3], "tick 3")
        assert s.events[-1][1] == [s.events[-1][1][0]], f"exactly one argument: {s.events[-1]}"
        presence = await s.ok("presence:list", {"room": busy})
        assert {e["user"] for e in presence["presence"]} >= {user}
        # room:join acks carry the stream's offset.
        other = unique("conversation:other")
        joined = await s.ok("room:join", {"room": other})
        assert parse_offset(joined.get("offset"))[2] == room_tag(other), joined
        synced = await s.ok("room:sync", {"room": other, "offset": joined["offset"]})
        assert only_own_join(synced, user), f"the ack's offset is the stream's head when it joined: {synced}"
        # Over --max-rooms-per-connection: too_many_rooms.
        t = await raw.open(relay, "many")
        rooms = [unique("conversation:m") for _ in range(4)]
        assert await t.connect_error({"token": mint_token(unique("amy")), "rooms": rooms}) == "too_many_rooms"


@async_test
async def test_clients_that_do_not_opt_in_get_no_offsets(relay):
    room = unique("conversation:plain")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        plain = ArgsClient("plain")
        await plain.connect(relay, {"token": mint_token(unique("py"))})
        try:
            await plain.ok("room:join", {"room": room})
            await send_ticks(bob, room, 1, 3)
            status, body = await emit_api(relay, "message:new", {"room": room}, {"text": "hi"})
            assert status == 200, body
            await plain.wait_for(lambda: plain.named("message:new"), "message:new")
            got = plain.named("chat:tick", "message:new")
            assert [len(args) for _, args in got] == [1, 1, 1, 1], f"exactly one argument: {got}"
            assert tick_numbers(got) == [1, 2, 3]
        finally:
            await plain.disconnect()
        # By hand: no pid, no recovered in the answer; events with exactly one argument.
        s = await raw.open(relay, "plain-raw")
        hello = await s.connect_ok({"token": mint_token(unique("raw"))})
        assert set(hello) == {"sid"}, hello
        await s.ok("room:join", {"room": room})
        await bob.ok("chat:tick", {"room": room, "n": 4})
        await s.wait_for(lambda: tick_numbers(s.events) == [4], "tick 4")
        assert len(s.events[-1][1]) == 1, f"exactly one argument: {s.events}"
        # Opted in by `recover: true`: a pid, recovered:false, offsets as the last argument.
        o = await raw.open(relay, "opted")
        hello = await o.connect_ok({"token": mint_token(unique("raw")), "recover": True})
        assert PID.match(hello.get("pid") or "") and hello.get("recovered") is False, hello
        await o.ok("room:join", {"room": room})
        await bob.ok("chat:tick", {"room": room, "n": 5})
        await o.wait_for(lambda: tick_numbers(o.events) == [5], "tick 5")
        assert len(o.events[-1][1]) == 2 and parse_offset(o.events[-1][1][1])[2] == room_tag(room), o.events


@async_test
async def test_recovery_offsets_always(history_relay):
    relay = await history_relay("--recovery-offsets", "always")
    room = unique("conversation:always")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, room)
        s = await raw.open(relay, "plain")
        hello = await s.connect_ok({"token": mint_token(unique("raw")), "rooms": [room]})
        assert PID.match(hello.get("pid") or "") and hello.get("recovered") is False, hello
        await bob.ok("chat:tick", {"room": room, "n": 1})
        await s.wait_for(lambda: tick_numbers(s.events) == [1], "tick 1")
        assert len(s.events[-1][1]) == 2 and parse_offset(s.events[-1][1][1])[2] == room_tag(room), s.events


@async_test
async def test_pid_format(relay):
    """§12: `pid`: a private session id, 22 base64url characters from 16 random bytes; a new one
    for every session."""
    async with RawSessions() as raw:
        s = await raw.open(relay, "a")
        hello = await s.connect_ok({"token": mint_token(unique("amy")), "recover": True})
        assert PID_SPEC.match(hello.get("pid") or ""), f"pid: 22 base64url characters (16 bytes), got {hello.get('pid')!r}"
        t = await raw.open(relay, "b")
        other = await t.connect_ok({"token": mint_token(unique("amy")), "recover": True})
        assert PID_SPEC.match(other.get("pid") or "") and other["pid"] != hello["pid"], (hello, other)


# --------------------------------------------------------------------------------------------
# python-socketio: rooms in CONNECT, offsets, room:sync


@async_test
async def test_python_socketio_rooms_in_connect_and_room_sync(history_relay):
    relay = await history_relay()
    user, room = unique("py"), unique("conversation:sync")
    async with Clients() as c:
        bob = await member(c, relay, room)
        amy = ArgsClient("amy")
        await amy.connect(relay, {"token": mint_token(user), "recover": True, "rooms": [room]})
        try:
            # In the room right after connect, without room:join; the offset is the last argument.
            await bob.ok("chat:tick", {"room": room, "n": 1})
            await amy.wait_for(lambda: tick_numbers(amy.named("chat:tick")) == [1], "tick 1")
            await send_ticks(bob, room, 2, 3)
            await amy.wait_for(lambda: tick_numbers(amy.named("chat:tick")) == [1, 2, 3], "ticks 1..3")
            ticks = amy.named("chat:tick")
            assert [len(args) for _, args in ticks] == [2, 2, 2], ticks
            assert_increasing([args[1] for _, args in ticks], room_tag(room))
            seen = ticks[-1][1][1]
        finally:
            await amy.disconnect()

        await send_ticks(bob, room, 4, 10)
        again = ArgsClient("amy-again")
        await again.connect(relay, {"token": mint_token(user), "recover": True, "rooms": [room]})
        try:
            pages, offset, events = [], seen, []
            for _ in range(20):  # bounded: 7 missed ticks and a few presence events, 3 per page
                reply = await again.ok("room:sync", {"room": room, "offset": offset, "limit": 3})
                assert reply["room"] == room and len(reply["events"]) <= 3, reply
                pages.append(reply)
                events += reply["events"]
                if reply["events"]:
                    assert reply["offset"] == reply["events"][-1][-1], f"offset: the last returned: {reply}"
                    offset = reply["offset"]
                if not reply["more"]:
                    break
            assert len(pages) >= 3 and [p["more"] for p in pages] == [True] * (len(pages) - 1) + [False], pages
            assert all(len(p["events"]) == 3 for p in pages[:-1]), pages
            assert_increasing([e[-1] for e in events], room_tag(room))
            assert parse_offset(events[0][-1])[:2] > parse_offset(seen)[:2], "only events after the offset"
            assert [e[1]["n"] for e in events if e[0] == "chat:tick"] == list(range(4, 11)), events
            assert {e[0] for e in events} <= {"chat:tick", "presence:join", "presence:leave"}, events
            assert [e[1]["user"] for e in events if e[0].startswith("presence:")] == [user] * len(
                [e for e in events if e[0].startswith("presence:")]), events

            # Errors: malformed offset, an offset of another stream.
            await again.fails("room:sync", {"room": room, "offset": "yesterday"}, "invalid_payload")
            other = unique("conversation:x")
            await again.fails("room:sync", {"room": room, "offset": f"0-0:{room_tag(other)}"}, "invalid_payload")
            await again.fails("room:sync", {"room": room, "offset": seen, "limit": 0}, "invalid_payload")
            await again.fails("room:sync", {"room": room, "offset": seen, "limit": 501}, "invalid_payload")
            await again.fails("room:sync", {"room": "secret:1", "offset": "0-0:" + room_tag("secret:1")}, "room_not_authorized")
            assert await metric(relay, "relay_room_sync_total", result="ok") >= len(pages)
        finally:
            await again.disconnect()


@async_test
async def test_room_sync_history_unavailable(history_relay):
    relay = await history_relay("--history-size", "5")
    user, room = unique("py"), unique("conversation:short")
    async with Clients() as c:
        bob = await member(c, relay, room)
        amy = ArgsClient("amy")
        await amy.connect(relay, {"token": mint_token(user), "recover": True, "rooms": [room]})
        try:
            await bob.ok("chat:tick", {"room": room, "n": 1})
            await amy.wait_for(lambda: tick_numbers(amy.named("chat:tick")) == [1], "tick 1")
            first = amy.named("chat:tick")[0][1][1]
            await send_ticks(bob, room, 2, 11)
            before = await metric(relay, "relay_room_sync_total", result="history_unavailable")
            await amy.fails("room:sync", {"room": room, "offset": first}, "history_unavailable")
            assert await metric(relay, "relay_room_sync_total", result="history_unavailable") == before + 1
            # The last five are still there.
            await amy.wait_for(lambda: len(amy.named("chat:tick")) == 11, "ticks 1..11")
            seventh = amy.named("chat:tick")[6][1][1]
            reply = await amy.ok("room:sync", {"room": room, "offset": seventh})
            assert [e[1]["n"] for e in reply["events"]] == [8, 9, 10, 11] and reply["more"] is False, reply
        finally:
            await amy.disconnect()
