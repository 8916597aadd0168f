"""One gate decides what a socket may see (issue #40, criterion 4; `DeliveryGate`): every path by
which a room's events could reach a socket, walked with a socket whose token lacks the room.

mallory's token allows `user:<mallory>` only; `conversation:secret-…` is not hers. carol's token
allows `conversation:*`: she is the control of every path — the same events, the same requests,
at the same time — so each test proves the gate, not a blanket drop. bob is a member of the
room and does the talking. mallory and carol are sockets spoken by hand (recovery_helpers'
`RawSession`), so every packet they receive is kept.

1. live room delivery: `rooms` in CONNECT and `room:join` are refused (`room_not_authorized`);
   bob's custom event, `message:reaction`, typing, location share and presence never reach her;
2. `room:sync` with an offset bob got: refused, no events;
3. `presence:list`: refused;
4. receipts naming her as author (single and batch, read and delivered): not delivered live,
   and `receipt:sync` shows none (test_replay_gate.py walks them in depth, on Redis too);
5. recovery replay: she drops, bob sends receipts naming her and room events, she comes back
   with her `pid` and offset (naming the room in her auth too): recovered, nothing of the room;
6. backend emits: to the room (plain and coalesced) never reach her; to her user (`to.user`,
   `to.users`) do;
7. a token refresh that drops the room: from then on she is out of every path.

"Nothing arrives" is read after a later fenced event: a backend emit to both users reached
them (and carol got everything of the room before it), then a short quiet period bounded by
TIMEOUT (test_replay_gate.settle) and a round trip on her socket (`barrier`).
"""

from __future__ import annotations

import json

from helpers import Clients, async_test, http, mint_token
from recovery_helpers import RawSession, RawSessions, grew, parse_offset, recoveries, room_tag, user_tag
from test_cluster import eventually
from test_recovery import RATE_FLAGS, last_offset, member, reconnect, unique
from test_replay_gate import FLAGS, note, settle

RELAY_ARGS = [*RATE_FLAGS, *FLAGS]


# --------------------------------------------------------------------------------------------
# Helpers


def outsider_token(user: str) -> str:
    """A token that allows the user's own room only: never `conversation:*`."""
    return mint_token(user, rooms=[f"user:{user}"])


def insider_token(user: str) -> str:
    return mint_token(user, rooms=["conversation:*", f"user:{user}"])


async def pair(raw: RawSessions, relay, **auth) -> tuple[tuple[RawSession, str, dict], tuple[RawSession, str, dict]]:
    """mallory (the outsider) and carol (the control), each connected with `auth` next to her
    token; each (socket, user, CONNECT answer)."""
    out = []
    for prefix, token_of in (("mallory", outsider_token), ("carol", insider_token)):
        user = unique(prefix)
        s = await raw.open(relay, prefix)
        hello = await s.connect_ok({"token": token_of(user), **auth})
        out.append((s, user, hello))
    return out[0], out[1]


def names(s: RawSession) -> list[str]:
    return [name for name, _ in s.events]


def about(s: RawSession, room: str, since: int = 0) -> list[tuple[str, list]]:
    """Every event the socket received (from its `since`th) that names `room` anywhere."""
    return [(n, a) for n, a in s.events[since:] if room in json.dumps(a)]


def receipt_ids(s: RawSession, since: int = 0) -> list[tuple[str, str]]:
    """(kind, messageId) of every receipt forward the socket received, batches unrolled."""
    out = []
    for name, args in s.events[since:]:
        if name in ("message:read", "message:delivered"):
            body = args[0]
            for r in body.get("items", [body]):
                out.append((name, r["messageId"]))
    return out


async def refused(s: RawSession, event: str, data: dict, code: str = "room_not_authorized") -> None:
    """The documented error, and nothing else in the ack (no presence, no events, no offset)."""
    reply = await s.fails(event, data, code)
    assert set(reply) == {"ok", "error"} and set(reply["error"]) == {"code", "message"}, \
        f"{s.name}: a refusal carries nothing of the room: {reply}"


async def fence(relay, sockets: list[tuple[RawSession, str]], tag: str) -> None:
    """A backend emit to every user (room-less: always theirs) that each socket received; then
    each reads until quiet and makes a round trip, so whatever was sent before has arrived."""
    status, body = await http(relay, "POST", "/api/v1/emit", body={
        "event": "notification:new", "to": {"users": [user for _, user in sockets]}, "data": {"fence": tag}})
    assert status == 200, body
    for s, _ in sockets:
        await s.wait_for(lambda s=s: any(a[0].get("fence") == tag for _, a in s.named("notification:new")), f"fence {tag}")
    for s, _ in sockets:
        await settle(s)
        await s.barrier()


def fences(s: RawSession, since: int = 0) -> list:
    return [a[0].get("fence") for n, a in s.events[since:] if n == "notification:new"]


async def room_traffic(bob, dave_c: Clients, relay, room: str, carol: RawSession) -> list[str]:
    """bob (and dave, joining and leaving) make every kind of room event, each waited for at
    carol (a member): the event names carol must have received from now on, in order."""
    since = len(carol.events)

    def seen(name: str) -> bool:
        return name in names(carol)[since:]

    await bob.ok("chat:note", {"room": room, "n": 1})
    await carol.wait_for(lambda: seen("chat:note"), "chat:note")
    await bob.ok("message:reaction", {"room": room, "messageId": "m-1", "emoji": "👍", "action": "add"})
    await carol.wait_for(lambda: seen("message:reaction"), "message:reaction")
    await bob.ok("typing:start", {"room": room})
    await carol.wait_for(lambda: seen("typing:start"), "typing:start")
    await bob.ok("location:share-live", {"room": room, "durationSec": 60})
    await bob.ok("location:update", {"room": room, "lat": 48.85, "lng": 2.35})
    await bob.ok("location:stop", {"room": room})
    await carol.wait_for(lambda: seen("location:stop"), "location:stop")
    await bob.ok("typing:stop", {"room": room})
    await carol.wait_for(lambda: seen("typing:stop"), "typing:stop")
    dave = await member(dave_c, relay, room, "dave")
    await carol.wait_for(lambda: seen("presence:join"), "dave's presence:join")
    await dave.disconnect()
    await carol.wait_for(lambda: seen("presence:leave"), "dave's presence:leave")
    return ["chat:note", "message:reaction", "typing:start", "location:share-live", "location:update",
            "location:stop", "typing:stop", "presence:join", "presence:leave"]


# --------------------------------------------------------------------------------------------
# 1. Live room delivery


@async_test
async def test_live_room_events_never_reach_a_socket_whose_token_lacks_the_room(relay):
    secret = unique("conversation:secret")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, secret)
        # Rooms named in CONNECT: hers refused with its code, carol's joined.
        (m, mallory, m_hello), (k, carol, k_hello) = await pair(raw, relay, rooms=[secret])
        assert not m_hello.get("rooms") and m_hello.get("refused") == {secret: "room_not_authorized"}, m_hello
        assert list(k_hello.get("rooms", {})) == [secret] and not k_hello.get("refused"), k_hello
        # room:join: refused for her, a member already for carol (same answer as anyone allowed).
        await refused(m, "room:join", {"room": secret})
        joined = await k.ok("room:join", {"room": secret})
        assert joined["room"] == secret and {p["user"] for p in joined["presence"]} == {bob.name, carol}, joined

        expected = await room_traffic(bob, c, relay, secret, k)
        await fence(relay, [(m, mallory), (k, carol)], "live")

        got = [n for n in names(k) if n != "notification:new"]
        assert got == expected, f"carol (the control) gets every room event: {k.events}"
        assert all(a[0]["room"] == secret for n, a in k.events if n != "notification:new"), k.events
        assert names(m) == ["notification:new"] and fences(m) == ["live"], f"mallory got more than the fence: {m.events}"
        assert about(m, secret) == [], about(m, secret)
        # She is in no room: nothing to leave, nothing to send to.
        await m.fails("room:leave", {"room": secret}, "not_in_room")
        await m.fails("chat:note", {"room": secret, "n": 2}, "not_in_room")


# --------------------------------------------------------------------------------------------
# 2. room:sync


@async_test
async def test_room_sync_with_a_members_offset_is_refused(relay):
    secret = unique("conversation:secret")
    async with Clients() as c, RawSessions() as raw:
        bob = await c.connect(relay, unique("bob"))
        offset = (await bob.join(secret))["offset"]
        parse_offset(offset)
        sent = [("chat:note", {"room": secret, "n": n}) for n in (1, 2, 3)] + \
               [("message:reaction", {"room": secret, "messageId": "m-1", "emoji": "🔥", "action": "add"})]
        for event, data in sent:
            await bob.ok(event, data)
        (m, mallory, _), (k, carol, _) = await pair(raw, relay)

        # carol, not a member, is allowed by her token: the history after bob's offset.
        synced: dict = {}

        async def carol_syncs() -> bool:
            reply = await k.ok("room:sync", {"room": secret, "offset": offset})
            synced.update(reply)
            return [e[0] for e in reply["events"] if e[0] != "presence:join"] == [e for e, _ in sent]

        await eventually(carol_syncs, what="carol's room:sync returns bob's events")
        assert synced["room"] == secret and synced["more"] is False, synced
        # mallory, with the same offset, from the room's start, and paged: refused, every time.
        await refused(m, "room:sync", {"room": secret, "offset": offset})
        await refused(m, "room:sync", {"room": secret, "offset": "0-0:" + room_tag(secret)})
        await refused(m, "room:sync", {"room": secret, "offset": synced["offset"], "limit": 500})
        await fence(relay, [(m, mallory), (k, carol)], "sync")
        assert names(m) == ["notification:new"], m.events
        assert about(m, secret) == [] and about(k, secret) == [], (m.events, k.events)


# --------------------------------------------------------------------------------------------
# 3. presence:list


@async_test
async def test_presence_list_is_refused(relay):
    secret = unique("conversation:secret")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, secret)
        (m, mallory, _), (k, carol, _) = await pair(raw, relay)
        listed = await k.ok("presence:list", {"room": secret})
        assert listed["room"] == secret and [p["user"] for p in listed["presence"]] == [bob.name], listed
        await refused(m, "presence:list", {"room": secret})
        await fence(relay, [(m, mallory), (k, carol)], "presence")
        assert names(m) == ["notification:new"], m.events


# --------------------------------------------------------------------------------------------
# 4. Receipts naming her as author: live and receipt:sync


async def receipts_naming(bob, room: str, authors: list[str], tag: str) -> dict[str, list[int]]:
    """bob's receipts on messages he says `authors` wrote: per author a read and a delivered,
    then one batch with an item for each. Each author's receipt ids (acked: committed)."""
    ids: dict[str, list[int]] = {a: [] for a in authors}
    for a in authors:
        for kind in ("message:read", "message:delivered"):
            ack = await bob.ok(kind, {"room": room, "messageId": f"{tag}-{kind}-{a}", "authorId": a})
            ids[a].append(ack["id"])
    batch = await bob.ok("message:read", {"room": room, "items": [{"messageId": f"{tag}-batch-{a}", "authorId": a} for a in authors]})
    for item, a in zip(batch["items"], authors):
        assert item["messageId"] == f"{tag}-batch-{a}", batch
        ids[a].append(item["id"])
    return ids


def expected_receipts(author: str, tag: str) -> list[tuple[str, str]]:
    return [("message:read", f"{tag}-message:read-{author}"), ("message:delivered", f"{tag}-message:delivered-{author}"),
            ("message:read", f"{tag}-batch-{author}")]


@async_test
async def test_receipts_naming_her_are_neither_forwarded_nor_synced(relay):
    secret = unique("conversation:secret")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, secret)
        (m, mallory, _), (k, carol, _) = await pair(raw, relay)
        ids = await receipts_naming(bob, secret, [mallory, carol], "live")
        await k.wait_for(lambda: len(receipt_ids(k)) == 3, "carol's three receipt forwards")
        await fence(relay, [(m, mallory), (k, carol)], "receipts")
        assert receipt_ids(k) == expected_receipts(carol, "live"), f"carol (allowed, not a member) gets hers: {k.events}"
        assert names(m) == ["notification:new"], f"mallory got a receipt forward: {m.events}"

        # receipt:sync scans every receipt authored by her and shows none; carol's shows hers.
        mine = await m.ok("receipt:sync", {"since": 0, "limit": 1000})
        assert mine["receipts"] == [] and mine["next"] >= max(ids[mallory]), f"scanned, none shown: {mine} (ids {ids})"
        hers = await k.ok("receipt:sync", {"since": 0, "limit": 1000})
        assert sorted(r["id"] for r in hers["receipts"]) == sorted(ids[carol]), hers
        assert all(r["room"] == secret and r["authorId"] == carol for r in hers["receipts"]), hers
        assert about(m, secret) == [], about(m, secret)


# --------------------------------------------------------------------------------------------
# 5. Recovery replay


@async_test
async def test_recovery_replays_nothing_of_the_room(relay):
    secret = unique("conversation:secret")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, secret)
        (a_m, mallory, hello_m), (a_k, carol, hello_k) = await pair(raw, relay, recover=True)
        for hello in (hello_m, hello_k):
            assert hello.get("recovered") is False and hello.get("pid") and not hello.get("rooms"), hello
        # An offset of her user stream each (a backend event to the user), then the drop.
        offsets = {}
        for s, user in ((a_m, mallory), (a_k, carol)):
            await note(relay, user, 0)
            await s.wait_for(lambda s=s: s.named("notification:new"), "notification 0")
            await settle(s)
            await s.barrier()
            offsets[user] = last_offset(s)
            assert parse_offset(offsets[user])[2] == user_tag(user), s.events
        before = await recoveries(relay)
        await a_m.drop()
        await a_k.drop()

        # While both are away: receipts naming each, room events, a backend room emit, then the
        # control, a backend event to each user.
        ids = await receipts_naming(bob, secret, [mallory, carol], "away")
        await bob.ok("chat:note", {"room": secret, "n": 1})
        await bob.ok("message:reaction", {"room": secret, "messageId": "m-1", "emoji": "👀", "action": "add"})
        status, body = await http(relay, "POST", "/api/v1/emit", body={"event": "message:new", "to": {"room": secret}, "data": {"room": secret}})
        assert status == 200, body
        await note(relay, mallory, 1)
        await note(relay, carol, 1)

        # She comes back with her pid and offset, naming the room in her auth as well.
        b_m, back_m = await reconnect(raw, relay, outsider_token(mallory), hello_m["pid"], offsets[mallory], "mallory-again", rooms=[secret])
        b_k, back_k = await reconnect(raw, relay, insider_token(carol), hello_k["pid"], offsets[carol], "carol-again")
        for back, hello in ((back_m, hello_m), (back_k, hello_k)):
            assert back.get("recovered") is True and back["sid"] == hello["sid"], (back, hello)
        assert secret not in (back_m.get("rooms") or {}), f"a recovering CONNECT restores no room she may not see: {back_m}"
        for s in (b_m, b_k):
            await s.wait_for(lambda s=s: s.named("notification:new"), "notification 1, replayed")
            await settle(s)
            await s.barrier()
        assert grew(before, await recoveries(relay)) == {"recovered": 2.0}

        assert receipt_ids(b_k) == expected_receipts(carol, "away"), f"carol's receipts replayed: {b_k.events}"
        assert names(b_k)[-1] == "notification:new" and all(len(args) == 2 for _, args in b_k.events), b_k.events
        assert [a[0]["n"] for _, a in b_m.named("notification:new")] == [1], b_m.events
        assert names(b_m) == ["notification:new"], f"replayed to mallory beyond the control: {b_m.events}"

        # Live after the recovery: one more receipt naming each; then the fence.
        more = await receipts_naming(bob, secret, [mallory, carol], "after")
        await b_k.wait_for(lambda: len(receipt_ids(b_k)) == 6, "carol's receipts after the recovery")
        await fence(relay, [(b_m, mallory), (b_k, carol)], "after")
        assert receipt_ids(b_k) == expected_receipts(carol, "away") + expected_receipts(carol, "after"), b_k.events
        assert names(b_m) == ["notification:new", "notification:new"], b_m.events
        assert about(a_m, secret) == [] and about(b_m, secret) == [], (a_m.events, b_m.events)
        await b_m.fails("room:leave", {"room": secret}, "not_in_room")
        mine = await b_m.ok("receipt:sync", {"since": 0, "limit": 1000})
        assert mine["receipts"] == [] and mine["next"] >= max(more[mallory]), (mine, ids, more)


# --------------------------------------------------------------------------------------------
# 6. Backend emits


@async_test
async def test_backend_room_emits_skip_her_and_her_own_emits_reach_her(relay):
    """PROTOCOL §5: `to` is a user, users or a room. No per-user emit carries a room: a user emit
    goes to every socket of the user (the backend addressed her; `data` is its own, not read by
    the relay), so there is nothing to filter by her token there. The only per-user deliveries
    that carry a room are receipt forwards to the author's devices (§4.5), walked above."""
    secret = unique("conversation:secret")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, secret)
        (m, mallory, _), (k, carol, _) = await pair(raw, relay)
        await k.ok("room:join", {"room": secret})

        async def emit(to: dict, data: dict, **extra) -> dict:
            status, body = await http(relay, "POST", "/api/v1/emit", body={
                "event": "message:new", "to": to, "data": data, "recipientsByUser": True, **extra})
            assert status == 200, body
            return body

        to_room = await emit({"room": secret}, {"room": secret, "n": 1})
        assert to_room["users"] == {bob.name: 1, carol: 1} and to_room["recipients"] == 2, to_room
        coalesced = await emit({"room": secret}, {"room": secret, "n": 2}, coalesce={"key": unique("k"), "windowMs": 10})
        assert mallory not in coalesced["users"], coalesced
        await k.wait_for(lambda: [a[0]["n"] for _, a in k.named("message:new")] == [1, 2], "carol: both room emits")
        # Her own: to her user, and among users.
        to_her = await emit({"user": mallory}, {"n": 3})
        assert to_her == {"recipients": 1, "users": {mallory: 1}}, to_her
        await m.wait_for(lambda: m.named("message:new"), "the emit to her user")
        among = await emit({"users": [mallory, carol]}, {"n": 4})
        assert among == {"recipients": 2, "users": {mallory: 1, carol: 1}}, among
        await fence(relay, [(m, mallory), (k, carol)], "emits")

        assert [a[0]["n"] for _, a in m.named("message:new")] == [3, 4], f"mallory: her own emits only: {m.events}"
        assert [a[0]["n"] for _, a in k.named("message:new")] == [1, 2, 4], k.events
        assert names(m) == ["message:new", "message:new", "notification:new"], m.events
        assert about(m, secret) == [], about(m, secret)


# --------------------------------------------------------------------------------------------
# 7. A token refresh that drops the room


@async_test
async def test_a_refresh_that_drops_the_room_closes_every_path(relay):
    secret = unique("conversation:secret")
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, secret)
        mallory, carol = unique("mallory"), unique("carol")
        m = await raw.open(relay, "mallory")
        await m.connect_ok({"token": mint_token(mallory, rooms=[f"user:{mallory}", secret])})
        await m.ok("room:join", {"room": secret})
        k = await raw.open(relay, "carol")
        await k.connect_ok({"token": insider_token(carol), "rooms": [secret]})
        await settle(m)
        reply = await m.ok("auth:refresh", {"token": outsider_token(mallory)})
        assert reply["left"] == [secret], reply
        start = len(m.events)
        # She left the room: carol (a member) is told.
        await k.wait_for(lambda: any(n == "presence:leave" and a[0]["user"] == mallory for n, a in k.events), "mallory's presence:leave")
        k_start = len(k.events)

        expected = await room_traffic(bob, c, relay, secret, k)
        await receipts_naming(bob, secret, [mallory], "refreshed")
        await refused(m, "room:sync", {"room": secret, "offset": "0-0:" + room_tag(secret)})
        await refused(m, "presence:list", {"room": secret})
        await refused(m, "room:join", {"room": secret})
        await fence(relay, [(m, mallory), (k, carol)], "refreshed")

        assert [n for n in names(k)[k_start:] if n not in ("notification:new", "message:read", "message:delivered")] == expected, k.events
        assert len(receipt_ids(k, k_start)) == 3, f"carol, a member, gets bob's receipts through the room: {k.events}"
        assert names(m)[start:] == ["notification:new"], f"after the refresh: {m.events[start:]}"
        assert about(m, secret, since=start) == [], about(m, secret, since=start)
        mine = await m.ok("receipt:sync", {"since": 0, "limit": 1000})
        assert mine["receipts"] == [], mine
