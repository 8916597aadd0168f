"""Core end-to-end tests: the issue's acceptance scenario, rooms and presence, event names,
reactions, live location, custom events and typing, against one relay per module.

Each test uses its own room and user names, so the tests of the module do not see each other.
"""

from __future__ import annotations

import time

import pytest
import socketio

from helpers import (
    ROOM,
    Clients,
    RawSocket,
    async_test,
    cli_token,
    emit_api,
    make_jwt,
    mint_token,
    refused_code,
)

MAX_PAYLOAD = 65536
RELAY_ARGS = ["--max-payload", str(MAX_PAYLOAD)]


def assert_ts(data: dict) -> None:
    """`ts` is a server wall-clock timestamp in milliseconds."""
    ts = data.get("ts")
    assert isinstance(ts, int), data
    assert abs(ts - time.time() * 1000) < 5 * 60 * 1000, data


def presence(*entries: tuple[str, int]) -> list[dict]:
    return [{"user": u, "devices": n} for u, n in entries]


# --------------------------------------------------------------------------------------------
# The acceptance scenario of the issue


@async_test
async def test_acceptance_scenario(relay):
    alice_t, bob_t, carol_t = cli_token("alice"), cli_token("bob"), cli_token("carol")
    async with Clients() as clients:
        # A bad token is refused at connect.
        bad = make_jwt({"sub": "mallory", "exp": int(time.time()) + 3600, "rooms": ["conversation:*"]},
                       sign_with="not-the-relay-secret-0123456789abcdef")
        intruder = clients.new("mallory")
        with pytest.raises(socketio.exceptions.ConnectionError):
            await intruder.connect(relay, bad)
        assert not intruder.connected
        assert await refused_code(relay, bad) == ("token_bad_signature", "open")

        # Three users join; bob with two devices.
        alice = await clients.connect(relay, "alice", alice_t)
        reply = await alice.join(ROOM)
        assert reply["presence"] == presence(("alice", 1))

        bob1 = await clients.connect(relay, "bob", bob_t, name="bob1")
        reply = await bob1.join(ROOM)
        assert reply["presence"] == presence(("alice", 1), ("bob", 1))
        join = await alice.expect("presence:join", user="bob")
        assert set(join) == {"room", "user", "from", "ts"}
        assert join["room"] == ROOM and join["from"] == "bob"
        assert_ts(join)

        bob2 = await clients.connect(relay, "bob", bob_t, name="bob2")
        reply = await bob2.join(ROOM)
        assert reply["presence"] == presence(("alice", 1), ("bob", 2))

        carol = await clients.connect(relay, "carol", carol_t)
        reply = await carol.join(ROOM)
        assert reply["presence"] == presence(("alice", 1), ("bob", 2), ("carol", 1))
        for c in (alice, bob1, bob2):
            await c.expect("presence:join", user="carol", room=ROOM)
        # carol's join is the barrier: bob's second device announced nothing.
        assert [d["user"] for _, d in alice.events("presence:join")] == ["bob", "carol"]
        assert [d["user"] for _, d in bob1.events("presence:join")] == ["carol"]
        assert [d["user"] for _, d in bob2.events("presence:join")] == ["carol"]
        assert carol.events("presence:join") == []

        listed = await carol.ok("presence:list", {"room": ROOM})
        assert listed["room"] == ROOM
        assert listed["presence"] == presence(("alice", 1), ("bob", 2), ("carol", 1))

        # Typing is coalesced: three starts make one typing:start, then one typing:stop.
        for _ in range(3):
            await alice.ok("typing:start", {"room": ROOM})
        for c in (bob1, bob2, carol):
            start = await c.expect("typing:start", **{"from": "alice"})
            assert set(start) == {"room", "from", "ts"} and start["room"] == ROOM
            assert_ts(start)
        await alice.ok("typing:stop", {"room": ROOM})
        for c in (bob1, bob2, carol):
            await c.expect("typing:stop", **{"from": "alice", "room": ROOM})
        for c in (bob1, bob2, carol):
            assert [(n, d["from"]) for n, d in c.events("typing:start", "typing:stop")] == \
                [("typing:start", "alice"), ("typing:stop", "alice")], c.history

        # Reactions fan out to everyone but the sending socket, stamped by the server.
        reaction = {"room": ROOM, "messageId": "m-1", "emoji": "👍", "action": "add", "from": "mallory", "ts": 1}
        await carol.ok("message:reaction", reaction)
        for c in (alice, bob1, bob2):
            got = await c.expect("message:reaction", messageId="m-1")
            assert got["from"] == "carol" and got["emoji"] == "👍" and got["action"] == "add" and got["room"] == ROOM
            assert_ts(got)
            assert got["ts"] != 1
        # bob's reaction reaches his other device, not the socket that sent it.
        await bob1.ok("message:reaction", {"room": ROOM, "messageId": "m-1", "emoji": "🎉", "action": "add"})
        for c in (alice, bob2, carol):
            got = await c.expect("message:reaction", emoji="🎉")
            assert got["from"] == "bob"

        # Live location is fanned out.
        await alice.fails("location:update", {"room": ROOM, "lat": 48.85, "lng": 2.35}, "no_live_share")
        await alice.ok("location:share-live", {"room": ROOM, "durationSec": 600})
        for c in (bob1, bob2, carol):
            share = await c.expect("location:share-live", **{"from": "alice"})
            assert share["room"] == ROOM and share["durationSec"] == 600
            assert_ts(share)
        await alice.ok("location:update", {"room": ROOM, "lat": 48.8566, "lng": 2.3522, "accuracy": 12, "heading": 90})
        for c in (bob1, bob2, carol):
            update = await c.expect("location:update", **{"from": "alice"})
            assert update["room"] == ROOM
            assert update["lat"] == pytest.approx(48.8566) and update["lng"] == pytest.approx(2.3522)
            assert update["accuracy"] == pytest.approx(12) and update["heading"] == pytest.approx(90)
        await alice.ok("location:stop", {"room": ROOM})
        for c in (bob1, bob2, carol):
            stop = await c.expect("location:stop", **{"from": "alice"})
            assert stop["room"] == ROOM

        # notification:new over HTTP reaches both of bob's devices.
        status, body = await emit_api(relay, "notification:new", {"user": "bob"}, {"title": "hi", "messageId": "m-2"})
        assert status == 200, body
        assert body == {"recipients": 2}
        for c in (bob1, bob2):
            note = await c.expect("notification:new", messageId="m-2")
            assert note["title"] == "hi"
            assert_ts(note)
        # A later room event is the barrier: alice and carol got no notification.
        await bob1.ok("message:reaction", {"room": ROOM, "messageId": "m-3", "emoji": "✅", "action": "add"})
        for c in (alice, carol):
            await c.expect("message:reaction", messageId="m-3")
            assert c.events("notification:new") == []

        # The sending sockets never got their own events back (m-3 was the last one sent).
        await bob2.expect("message:reaction", messageId="m-3")
        assert [(d["from"], d["emoji"]) for _, d in bob1.events("message:reaction")] == [("carol", "👍")]
        assert [(d["from"], d["emoji"]) for _, d in bob2.events("message:reaction")] == \
            [("carol", "👍"), ("bob", "🎉"), ("bob", "✅")]
        assert [(d["from"], d["emoji"]) for _, d in carol.events("message:reaction")] == [("bob", "🎉"), ("bob", "✅")]
        assert alice.events("typing:start", "typing:stop", "location:share-live", "location:update",
                            "location:stop") == []

        # A room outside the token is refused.
        await alice.fails("room:join", {"room": "team:secret"}, "room_not_authorized")

        # A bad event name is answered with its error code.
        await alice.fails("Bad_Event", {"room": ROOM}, "invalid_event_name")

        # An oversized message is closed with 1009.
        raw = await RawSocket.open(relay)
        try:
            await raw.connect_ok(carol_t)
            await raw.send('42["chat:big",{"room":"' + ROOM + '","blob":"' + "x" * 70000 + '"}]')
            code, _ = await raw.wait_closed()
            assert code == 1009
        finally:
            await raw.close()

        # bob's first device disconnecting announces nothing. Its live share ends with the
        # disconnect, after its rooms were left: that location:stop is the barrier.
        await bob2.ok("location:share-live", {"room": ROOM, "durationSec": 600})
        await alice.expect("location:share-live", **{"from": "bob"})
        await bob2.disconnect()
        stop = await alice.expect("location:stop", **{"from": "bob"})
        assert stop["reason"] == "disconnected"
        assert alice.events("presence:leave") == []
        listed = await alice.ok("presence:list", {"room": ROOM})
        assert listed["presence"] == presence(("alice", 1), ("bob", 1), ("carol", 1))
        # His last device disconnecting does.
        await bob1.disconnect()
        leave = await alice.expect("presence:leave", user="bob")
        assert leave["room"] == ROOM and leave["from"] == "bob"
        assert_ts(leave)
        await carol.expect("presence:leave", user="bob")


# --------------------------------------------------------------------------------------------
# Rooms and presence


@async_test
async def test_join_leave_and_presence_list(relay):
    room = "conversation:presence"
    async with Clients() as clients:
        dora = await clients.connect(relay, "dora")
        ed = await clients.connect(relay, "ed")
        ed2 = await clients.connect(relay, "ed", name="ed2")
        assert (await dora.join(room))["presence"] == presence(("dora", 1))
        await ed.join(room)
        await dora.expect("presence:join", user="ed", room=room)
        await ed2.join(room)
        # Joining twice is harmless and changes nothing.
        assert (await ed2.join(room))["presence"] == presence(("dora", 1), ("ed", 2))
        assert (await dora.ok("presence:list", {"room": room}))["presence"] == presence(("dora", 1), ("ed", 2))

        # The first of ed's devices leaving keeps ed present.
        assert await ed.call("room:leave", {"room": room}) == {"ok": True}
        await ed.fails("room:leave", {"room": room}, "not_in_room")
        assert (await dora.ok("presence:list", {"room": room}))["presence"] == presence(("dora", 1), ("ed", 1))
        # His last device leaving removes him.
        await ed2.ok("room:leave", {"room": room})
        leave = await dora.expect("presence:leave", user="ed", room=room)
        assert leave["from"] == "ed"
        assert_ts(leave)
        assert [d["user"] for _, d in dora.events("presence:leave")] == ["ed"]
        assert (await dora.ok("presence:list", {"room": room}))["presence"] == presence(("dora", 1))
        # A room nobody is in has an empty presence list.
        assert (await dora.ok("presence:list", {"room": "conversation:empty"}))["presence"] == []
        # Rejoining announces ed again.
        await ed.join(room)
        await dora.expect("presence:join", user="ed", room=room)


@async_test
async def test_room_authorization(relay):
    async with Clients() as clients:
        exact = await clients.connect(relay, "frank", mint_token("frank", rooms=["conversation:7", "team:*"]))
        await exact.join("conversation:7")
        await exact.join("team:blue")
        await exact.fails("room:join", {"room": "conversation:8"}, "room_not_authorized")
        await exact.fails("room:join", {"room": "conversation:77"}, "room_not_authorized")
        await exact.fails("room:join", {"room": "other:1"}, "room_not_authorized")
        await exact.fails("presence:list", {"room": "other:1"}, "room_not_authorized")
        nobody = await clients.connect(relay, "gina", mint_token("gina", rooms=[]))
        await nobody.fails("room:join", {"room": "conversation:7"}, "room_not_authorized")
        # Invalid room names.
        for payload in ({}, {"room": ""}, {"room": 5}, {"room": "has space"}, {"room": "r" * 129}, None, "conversation:7"):
            await exact.fails("room:join", payload, "invalid_payload")


@async_test
async def test_event_name_grammar(relay):
    room = "conversation:names"
    async with Clients() as clients:
        hal = await clients.connect(relay, "hal")
        await hal.join(room)
        for name in ("Bad_Event", "nocolon", "a:b:c", "a-:b", "-a:b", "a:b-", "a--b:c", "A:b", "a:B", "a :b",
                     "a_b:c", ":b", "a:", "a:b c", "é:b", "a" * 60 + ":bcdef"):
            await hal.fails(name, {"room": room}, "invalid_event_name")
        for name in ("chat:ping", "a1:b2", "entity-x:action-word-2", "x:y"):
            await hal.ok(name, {"room": room})


@async_test
async def test_errors_without_ack_come_as_error_events(relay):
    async with Clients() as clients:
        ivy = await clients.connect(relay, "ivy")
        await ivy.emit("Bad_Name", {"room": ROOM})
        err = await ivy.expect("error")
        assert err["code"] == "invalid_event_name" and err["event"] == "Bad_Name" and err["message"]
        await ivy.emit("room:join", {"room": "secret:1"})
        err = await ivy.expect("error")
        assert err == {"code": "room_not_authorized", "message": err["message"], "event": "room:join"}
        await ivy.emit("typing:start", {"room": "conversation:not-joined"})
        err = await ivy.expect("error")
        assert err["code"] == "not_in_room" and err["event"] == "typing:start"


@async_test
async def test_server_only_events_are_refused(relay):
    room = "conversation:server-only"
    async with Clients() as clients:
        jo = await clients.connect(relay, "jo")
        await jo.join(room)
        for name in ("notification:new", "presence:join", "presence:leave", "message:new"):
            await jo.fails(name, {"room": room, "user": "jo"}, "event_not_allowed")


# --------------------------------------------------------------------------------------------
# Reactions


@async_test
async def test_reactions(relay):
    room = "conversation:reactions"
    async with Clients() as clients:
        kim = await clients.connect(relay, "kim")
        kim2 = await clients.connect(relay, "kim", name="kim2")
        lou = await clients.connect(relay, "lou")
        outsider = await clients.connect(relay, "max")
        for c in (kim, kim2, lou):
            await c.join(room)

        await kim.ok("message:reaction", {"room": room, "messageId": "r1", "emoji": "❤️", "action": "add",
                                          "from": "lou", "extra": "dropped"})
        for c in (kim2, lou):
            got = await c.expect("message:reaction", messageId="r1")
            assert {k: v for k, v in got.items() if k != "ts"} == \
                {"room": room, "messageId": "r1", "emoji": "❤️", "action": "add", "from": "kim"}
            assert_ts(got)
        await kim.ok("message:reaction", {"room": room, "messageId": "r1", "emoji": "❤️", "action": "remove"})
        got = await lou.expect("message:reaction", action="remove")
        assert got["from"] == "kim"
        # Barrier: lou's reaction reaches kim after kim's own would have; kim got none of his.
        await lou.ok("message:reaction", {"room": room, "messageId": "r2", "emoji": "👀", "action": "add"})
        await kim.expect("message:reaction", messageId="r2")
        assert [d["from"] for _, d in kim.events("message:reaction")] == ["lou"]
        assert outsider.events("message:reaction") == []

        base = {"room": room, "messageId": "r1", "emoji": "👍", "action": "add"}
        for bad in ({**base, "action": "toggle"}, {**base, "emoji": ""}, {**base, "emoji": "x" * 65},
                    {**base, "messageId": ""}, {**base, "messageId": 7}, {k: v for k, v in base.items() if k != "emoji"},
                    {k: v for k, v in base.items() if k != "room"}, {**base, "room": ""}, None):
            await kim.fails("message:reaction", bad, "invalid_payload")
        await outsider.fails("message:reaction", base, "not_in_room")


# --------------------------------------------------------------------------------------------
# Live location


@async_test
async def test_live_location(relay):
    room = "conversation:location"
    async with Clients() as clients:
        ned = await clients.connect(relay, "ned")
        olga = await clients.connect(relay, "olga")
        await ned.join(room)
        await olga.join(room)

        await ned.fails("location:update", {"room": room, "lat": 1, "lng": 2}, "no_live_share")
        await ned.fails("location:stop", {"room": room}, "no_live_share")
        await ned.ok("location:share-live", {"room": room, "durationSec": 60, "from": "olga"})
        share = await olga.expect("location:share-live")
        assert set(share) == {"room", "durationSec", "from", "ts"}
        assert share["from"] == "ned" and share["durationSec"] == 60
        # olga has no share of her own.
        await olga.fails("location:update", {"room": room, "lat": 1, "lng": 2}, "no_live_share")
        await ned.ok("location:update", {"room": room, "lat": -33.5, "lng": 151.25})
        update = await olga.expect("location:update")
        assert update["from"] == "ned" and update["lat"] == -33.5 and update["lng"] == 151.25
        assert "accuracy" not in update and "heading" not in update
        await ned.ok("location:stop", {"room": room})
        stop = await olga.expect("location:stop")
        assert stop["from"] == "ned" and stop["room"] == room
        await ned.fails("location:update", {"room": room, "lat": 1, "lng": 2}, "no_live_share")
        # Barrier: ned got none of his own location events.
        await olga.ok("location:share-live", {"room": room, "durationSec": 60})
        await ned.expect("location:share-live", **{"from": "olga"})
        assert [d["from"] for n, d in ned.history if n.startswith("location:")] == ["olga"]


@async_test
async def test_live_location_payload_validation(relay):
    room = "conversation:location-validation"
    async with Clients() as clients:
        # Location events have a small per-socket burst (20): one socket per batch of checks.
        sharer = await clients.connect(relay, "uli", name="uli-share")
        updater = await clients.connect(relay, "vic", name="vic-update")
        await sharer.join(room)
        await updater.join(room)
        for bad in ({"room": room, "durationSec": 0}, {"room": room, "durationSec": -5},
                    {"room": room, "durationSec": "60"}, {"room": room}, {"room": room, "durationSec": 10 ** 9},
                    {"durationSec": 60}, None):
            await sharer.fails("location:share-live", bad, "invalid_payload")
        await sharer.fails("location:share-live", {"room": "conversation:elsewhere", "durationSec": 60}, "not_in_room")

        await updater.ok("location:share-live", {"room": room, "durationSec": 60})
        for bad in ({"room": room, "lat": 91, "lng": 0}, {"room": room, "lat": 0, "lng": -181},
                    {"room": room, "lng": 0}, {"room": room, "lat": "1", "lng": 0},
                    {"room": room, "lat": 0, "lng": 0, "heading": 361}, {"room": room, "lat": 0, "lng": 0, "accuracy": -1},
                    {"lat": 0, "lng": 0}):
            await updater.fails("location:update", bad, "invalid_payload")
        await updater.fails("location:update", {"room": "conversation:elsewhere", "lat": 0, "lng": 0}, "not_in_room")
        await updater.ok("location:update", {"room": room, "lat": 90, "lng": -180, "accuracy": 0, "heading": 360})


@async_test
async def test_live_location_expires(relay):
    room = "conversation:location-expiry"
    async with Clients() as clients:
        pia = await clients.connect(relay, "pia")
        quinn = await clients.connect(relay, "quinn")
        await pia.join(room)
        await quinn.join(room)
        await pia.ok("location:share-live", {"room": room, "durationSec": 1})
        await quinn.expect("location:share-live", **{"from": "pia"})
        stop = await quinn.expect("location:stop", **{"from": "pia"})
        assert set(stop) == {"room", "from", "ts", "reason"}
        assert stop["room"] == room and stop["reason"] == "expired"
        assert_ts(stop)
        await pia.fails("location:update", {"room": room, "lat": 1, "lng": 2}, "no_live_share")


@async_test
async def test_live_location_ends_when_sharer_leaves_or_disconnects(relay):
    room = "conversation:location-end"
    async with Clients() as clients:
        rae = await clients.connect(relay, "rae")
        sam = await clients.connect(relay, "sam")
        await rae.join(room)
        await sam.join(room)
        await rae.ok("location:share-live", {"room": room, "durationSec": 600})
        await sam.expect("location:share-live")
        await rae.ok("room:leave", {"room": room})
        stop = await sam.expect("location:stop", **{"from": "rae"})
        assert stop["reason"] == "left"
        await rae.join(room)
        await rae.ok("location:share-live", {"room": room, "durationSec": 600})
        await sam.expect("location:share-live")
        await rae.disconnect()
        stop = await sam.expect("location:stop", **{"from": "rae"})
        assert stop["reason"] == "disconnected"


# --------------------------------------------------------------------------------------------
# Custom events


@async_test
async def test_custom_events_fan_out(relay):
    room = "conversation:custom"
    async with Clients() as clients:
        tia = await clients.connect(relay, "tia")
        tia2 = await clients.connect(relay, "tia", name="tia2")
        uma = await clients.connect(relay, "uma")
        for c in (tia, tia2, uma):
            await c.join(room)
        payload = {"room": room, "pollId": "p1", "choice": [1, 2], "nested": {"a": None}, "from": "forged", "ts": 5}
        await tia.ok("poll:vote-cast", payload)
        for c in (tia2, uma):
            got = await c.expect("poll:vote-cast")
            assert got["from"] == "tia" and got["ts"] != 5
            assert_ts(got)
            assert {k: v for k, v in got.items() if k not in ("from", "ts")} == \
                {"room": room, "pollId": "p1", "choice": [1, 2], "nested": {"a": None}}
        await uma.ok("poll:vote-cast", {"room": room, "pollId": "p2"})
        await tia.expect("poll:vote-cast", pollId="p2")
        assert [d["from"] for _, d in tia.events("poll:vote-cast")] == ["uma"]

        await uma.fails("poll:vote-cast", {"room": "conversation:not-joined"}, "not_in_room")
        await uma.fails("poll:vote-cast", {"pollId": "p3"}, "invalid_payload")
        await uma.fails("poll:vote-cast", [room], "invalid_payload")
        await uma.fails("poll:vote-cast", None, "invalid_payload")


@async_test
async def test_custom_events_can_be_disabled(start_relay):
    relay = start_relay("--disable-custom-events")
    room = "conversation:no-custom"
    async with Clients() as clients:
        val = await clients.connect(relay, "val")
        await val.join(room)
        await val.fails("poll:vote-cast", {"room": room}, "custom_events_disabled")
        # Known events still work.
        await val.ok("typing:start", {"room": room})
        await val.ok("message:reaction", {"room": room, "messageId": "m", "emoji": "👍", "action": "add"})


# --------------------------------------------------------------------------------------------
# Typing


@async_test
async def test_typing_repeated_starts_collapse(relay):
    room = "conversation:typing"
    async with Clients() as clients:
        wes = await clients.connect(relay, "wes")
        wes2 = await clients.connect(relay, "wes", name="wes2")
        xia = await clients.connect(relay, "xia")
        for c in (wes, wes2, xia):
            await c.join(room)
        for _ in range(3):
            await wes.ok("typing:start", {"room": room})
        start = await xia.expect("typing:start")
        assert start["from"] == "wes" and start["room"] == room
        assert_ts(start)
        await wes.ok("typing:stop", {"room": room})
        stop = await xia.expect("typing:stop")
        assert stop["from"] == "wes" and stop["room"] == room
        # Barrier: a later room event; the typing user's own devices were told nothing.
        await xia.ok("custom:barrier", {"room": room})
        for c in (wes, wes2):
            await c.expect("custom:barrier")
            assert c.events("typing:start", "typing:stop") == [], c.history
        assert [n for n, _ in xia.events("typing:start", "typing:stop")] == ["typing:start", "typing:stop"]


@async_test
async def test_typing_requires_membership_and_stops_on_disconnect(relay):
    room = "conversation:typing-disconnect"
    async with Clients() as clients:
        yan = await clients.connect(relay, "yan")
        zed = await clients.connect(relay, "zed")
        await yan.fails("typing:start", {"room": room}, "not_in_room")
        await yan.fails("typing:stop", {"room": room}, "not_in_room")
        await yan.fails("typing:start", {}, "invalid_payload")
        await yan.join(room)
        await zed.join(room)
        await yan.ok("typing:start", {"room": room})
        await zed.expect("typing:start", **{"from": "yan"})
        await yan.disconnect()
        stop = await zed.expect("typing:stop", **{"from": "yan"})
        assert stop["room"] == room
        # The presence:leave went out at the disconnect, before the typing window closed.
        assert [d["user"] for _, d in zed.events("presence:leave")] == ["yan"]


# --------------------------------------------------------------------------------------------
# Connecting


@async_test
async def test_connect_token_from_query_or_bearer_header(relay):
    token = mint_token("amy")
    sock = await RawSocket.open(relay, query=f"&token={token}")
    try:
        reply = await sock.connect(None)
        assert reply.startswith("40{") and "sid" in reply, reply
    finally:
        await sock.close()
    sock = await RawSocket.open(relay, headers={"Authorization": f"Bearer {token}"})
    try:
        reply = await sock.connect(None)
        assert reply.startswith("40{"), reply
        # Connected: events are served.
        await sock.send('420["room:join",{"room":"conversation:header"}]')
        ack = await sock.recv_packet()
        assert ack.startswith("430[") and '"ok":true' in ack, ack
    finally:
        await sock.close()
