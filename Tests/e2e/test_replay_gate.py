"""Recovery replay asks the same gate as live delivery (PROTOCOL §4 "Who sees a receipt", §12).

A receipt's `authorId` is the sender's claim. A member of `conversation:secret` may name anyone
as the author of a message there; the relay stores the receipt but shows it only to sockets that
may see the room: its members, and the author's devices whose token allows the room (§4.5). The
forward to the author's devices goes through the author's user stream, so it is in that stream's
history, and a recovery replays that stream: the replay must ask the same question as live
delivery (`DeliveryGate`), or a device whose token lacks the room gets, on recovery, what it was
never sent live.

Each test: mallory opts in to recovery (`recover: true`), her token allowing `user:<mallory>`
(and, in the control case, the secret room too: allowed, never a member). bob, a member of the
secret room, sends one receipt naming her as author while she is connected (live), then she
drops (TCP abort: kept for recovery), bob sends RECEIPTS more, and the backend emits a
`notification:new` to her user (a room-less event: always hers, the control that the replay
happened). She comes back with her pid and offset: recovered; the control event is replayed;
then one more receipt and one more backend event go out live; finally `receipt:sync` is walked
one receipt at a time so that every receipt authored by her is scanned.

- token without the room: no receipt of the room reaches her — replayed, live, or through
  `receipt:sync` (it scans them all and shows none); no packet of hers even names the room;
- token allowing the room (the control): every receipt reaches her once — live, replayed in her
  user stream's order before the control event, and through `receipt:sync`.

Runs against memory history and Redis history (plain and one-node cluster mode).
"""

from __future__ import annotations

import asyncio

import pytest

from helpers import TIMEOUT, Clients, async_test, emit_api, mint_token
from recovery_helpers import RawSession, RawSessions, assert_increasing, grew, parse_offset, recoveries, user_tag
from test_cluster import eventually
from test_recovery import history_relay, last_offset, member, reconnect, unique  # noqa: F401 - fixture

RECEIPTS = 5  # sent while mallory is away
QUIET = 0.5  # seconds without a packet that end a read (each read is bounded by TIMEOUT)
# Taken over at any age: a reconnect that reaches the relay before it noticed the TCP abort
# recovers the session all the same (§12), so the test never depends on that timing.
FLAGS = ["--recovery-takeover-after-ms", "0"]


async def settle(s: RawSession, quiet: float = QUIET) -> None:
    """Reads until `quiet` seconds pass without a packet (pings aside), bounded by TIMEOUT."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    while True:
        seen = len(s.packets)
        s.changed.clear()
        try:
            await asyncio.wait_for(s.changed.wait(), quiet)
        except asyncio.TimeoutError:
            if len(s.packets) == seen:
                return
        assert loop.time() < deadline, f"{s.name}: still receiving after {TIMEOUT} s: {s.packets[-20:]}"


def notes(s: RawSession) -> list[int]:
    return [args[0]["n"] for name, args in s.named("notification:new")]


def reads(s: RawSession) -> list[tuple[str, int]]:
    """(messageId, id) of every `message:read` the socket received, in order."""
    return [(args[0].get("messageId"), args[0].get("id")) for _, args in s.named("message:read")]


def naming(s: RawSession, room: str) -> list[str]:
    """Every packet of the socket that names `room` (acks included)."""
    return [p for p in s.packets if room in p]


async def note(relay, user: str, n: int) -> None:
    status, body = await emit_api(relay, "notification:new", {"user": user}, {"n": n})
    assert status == 200, body


async def walk_receipt_sync(s: RawSession, count: int) -> list[list[dict]]:
    """Walks `receipt:sync` one receipt at a time from the start (`limit: 1`: each page scans
    exactly one receipt authored by the caller, visible or not, and `next` moves past it) until
    `count` were scanned; each page's visible receipts. Bounded: with Redis, receipts reach the
    cluster cursor a moment after their ack."""
    pages: list[list[dict]] = []
    since = 0

    async def step() -> bool:
        nonlocal since
        while len(pages) < count:
            reply = await s.ok("receipt:sync", {"since": since, "limit": 1})
            if reply["next"] == since:
                assert reply["receipts"] == [], f"a page that scanned nothing shows nothing: {reply}"
                return False  # not replicated yet: ask again
            assert isinstance(reply["next"], int) and reply["next"] > since, reply
            pages.append(reply["receipts"])
            since = reply["next"]
        return True

    await eventually(step, timeout=TIMEOUT, what=f"receipt:sync scanned {count} receipts authored by {s.name}")
    reply = await s.ok("receipt:sync", {"since": since, "limit": 1000})
    assert reply["receipts"] == [] and reply["next"] == since, f"nothing beyond the {count} receipts: {reply}"
    return pages


@pytest.mark.parametrize("allowed", [False, True], ids=["token-lacks-room", "token-allows-room"])
@async_test
async def test_receipts_naming_an_author_reach_her_replayed_only_if_her_token_allows_the_room(history_relay, allowed):
    relay = await history_relay(*FLAGS)
    mallory, secret = unique("mallory"), unique("conversation:secret")
    token = mint_token(mallory, rooms=[f"user:{mallory}", *([secret] if allowed else [])])
    async with Clients() as c, RawSessions() as raw:
        bob = await member(c, relay, secret)  # token: conversation:*
        a = await raw.open(relay, "mallory")
        hello = await a.connect_ok({"token": token, "recover": True})
        assert hello.get("recovered") is False and hello.get("pid"), hello
        assert not hello.get("rooms"), f"mallory is in no room: {hello}"

        # Live, while she is connected: one receipt naming her, then a backend event to her user.
        acks = [await bob.ok("message:read", {"room": secret, "messageId": "m-0", "authorId": mallory})]
        await note(relay, mallory, 0)
        await a.wait_for(lambda: notes(a) == [0], "notification 0")
        await settle(a)
        await a.barrier()
        expected_live = [("m-0", acks[0]["id"])] if allowed else []
        assert reads(a) == expected_live, f"live before the drop (allowed={allowed}): {a.packets}"
        offset = last_offset(a)
        assert parse_offset(offset)[2] == user_tag(mallory), f"her offset is of her user stream: {a.events}"
        before = await recoveries(relay)
        await a.drop()

        # While she is away: RECEIPTS receipts naming her as author, each acked once durable,
        # then the control, a backend event to her user (her own: always hers).
        away = [await bob.ok("message:read", {"room": secret, "messageId": f"m-{k}", "authorId": mallory})
                for k in range(1, RECEIPTS + 1)]
        assert all(isinstance(r.get("id"), int) for r in away), away
        acks += away
        await note(relay, mallory, 1)

        b, back = await reconnect(raw, relay, token, hello["pid"], offset, "mallory-again")
        assert back.get("recovered") is True, f"not recovered: {back}"
        assert back["sid"] == hello["sid"] and back["pid"] == hello["pid"], (back, hello)
        await b.wait_for(lambda: 1 in notes(b), "the control notification, replayed")
        await settle(b)
        await b.barrier()
        assert notes(b) == [1], f"the control event replayed once: {b.events}"
        replayed = list(b.events)
        expected_away = [(f"m-{k}", r["id"]) for k, r in enumerate(away, 1)] if allowed else []
        assert reads(b) == expected_away, \
            f"replayed receipts (allowed={allowed}): expected {expected_away}; got {[p for p in b.packets if 'message:read' in p]}"
        if allowed:
            # In her user stream's order, each with its offset, all before the control event.
            assert [n for n, _ in replayed] == ["message:read"] * RECEIPTS + ["notification:new"], replayed
            assert all(len(args) == 2 for _, args in replayed), f"every replayed event with its offset: {replayed}"
            assert_increasing([args[-1] for _, args in replayed], user_tag(mallory))
            assert parse_offset(replayed[0][1][-1])[:2] > parse_offset(offset)[:2], "nothing already received"
            for (_, args), ack in zip(replayed, away):
                r = args[0]
                assert (r["room"], r["authorId"], r["userId"], r["kind"], r["id"], r["from"]) == \
                    (secret, mallory, bob.name, "read", ack["id"], bob.name), r
        assert grew(before, await recoveries(relay)) == {"recovered": 1.0}

        # Live again, after the recovery: one more receipt, then a backend event.
        acks.append(await bob.ok("message:read", {"room": secret, "messageId": f"m-{RECEIPTS + 1}", "authorId": mallory}))
        await note(relay, mallory, 2)
        await b.wait_for(lambda: 2 in notes(b), "notification 2, live")
        await settle(b)
        await b.barrier()
        expected_after = expected_away + ([(f"m-{RECEIPTS + 1}", acks[-1]["id"])] if allowed else [])
        assert reads(b) == expected_after, f"live after the recovery (allowed={allowed}): {b.packets}"
        assert notes(b) == [1, 2], b.events

        # receipt:sync scans every receipt authored by her (the live one, the missed ones, the
        # last one) and shows them only when her token allows the room.
        pages = await walk_receipt_sync(b, len(acks))
        shown = [r["messageId"] for page in pages for r in page]
        expected_sync = [f"m-{k}" for k in range(len(acks))] if allowed else []
        assert shown == expected_sync, f"receipt:sync (allowed={allowed}): {pages}"
        assert all(len(page) == (1 if allowed else 0) for page in pages), pages

        if not allowed:
            # Nothing of the room, in any form (single, batch, ack), on either of her sockets.
            leaked = naming(a, secret) + naming(b, secret)
            assert leaked == [], f"packets naming {secret} reached mallory: {leaked}"
        # bob's receipts were all stored (the backend can judge them), whoever may see them.
        assert len({r["id"] for r in acks}) == len(acks), acks
