"""Room and user names that Redis Cluster would read as hash tags, or that aim at Relay's own
keys, on a real Redis Cluster (3 masters and 3 replicas) with two relay nodes: every event
reaches exactly the room or user it names, presence and the presence API answer the same from
both nodes, and no other stream, presence or Relay key is touched.

Relay names a room's or user's keys and channel with the name as hash tag: `relay:room:{<room>}`,
`relay:history:r:{<room>}`, `relay:presence:{<room>}`, `relay:presence-users:{<room>}`,
`relay:user:{<user>}`, `relay:history:u:{<user>}`, `relay:directory:{<user>}`,
`relay:user-rooms:{<user>}`; a name that starts with `}` gets a U+001F first (`{\\x1f}…}`: no
valid name has a control character, so no two names meet). Its own keys are `relay:nodes`,
`relay:revoked`, `relay:receipts`, `relay:history-gap` (and the channel `relay:control`), and
per node `relay:node-rooms:{<node>}` / `relay:node-users:{<node>}` (docs/PROTOCOL.md, section
"Cluster", and Sources/RelayCluster).

The names:

- braces inside a name: `conversation:{relay}`, `conversation:a}b{c` (its keys' hash tag is
  `conversation:a`, the same slot as room `conversation:a`), `conversation:{}`,
  `conversation:{x`, user `bob{relay}` — each beside its look-alikes (`conversation:relay`,
  `conversation:a`, user `bob`, user `relay`, …);
- names that a naive concatenation would turn into another name's keys: room
  `{conversation:relay}` (`"relay:room:" + name` is the channel of `conversation:relay`, and so
  for its history and presence keys), user `{bob}` (bob's channel, history and directory);
- names whose hash tag is one of Relay's own keys or a node's id: rooms and users named
  `relay:nodes`, `relay:revoked`, `relay:receipts`, `relay:history-gap`, `relay:control`,
  `node-a`, `node-b` (their keys share those keys' slots);
- a leading `}` (the U+001F escape) and what the escape must not be confused with;
- Unicode at the braces: a `}` followed by a combining mark (`}\\u0301…`: a `}` byte first,
  one extended grapheme cluster), a name starting with a combining mark (`\\u0301…`: `{` and the
  mark are one grapheme), a name ending in a prepended concatenation mark (`…\\u0600`: the mark
  and `}` are one grapheme). All are valid names (NFC, no control character). Relay once
  mis-delivered all three (tags and channels were cut by Character, not by byte).

Each case connects its names at once, the listeners on node A (and B), the sender and the
backend API on node B (and A): an event for one name must reach that name's sockets, and none
for another name may reach them. "None" is proved without sleeping: every socket first waits
for its own event of a round (so both nodes have handled every publication of the round), then
for its own event of a later round; anything misdelivered from the first round would have been
written to the socket before that.

One cluster and one pair of nodes serve the whole module (each case starts with its names'
presence empty, and checks only what it sent: its own nonces). Redis's refusals of cross-slot
commands and changes to Relay's own keys are checked inside each test (not at teardown), so a
case fails in its own body.
"""

from __future__ import annotations

import asyncio
import urllib.parse
import uuid
from collections import Counter

import pytest

from conftest import RelayProcess, _active_relays
from helpers import Clients, async_test, emit_api, http, mint_token, refused_code
from redis_servers import CROSS_SLOT_MARKERS, cli_at, make_redis
from test_cluster import eventually, wait_linked

HEARTBEAT_MS = 300
NODES = ("node-a", "node-b")

# Relay's keys of its own, whatever the names in use are: the global ones keep their type
# (`relay:nodes` a sorted set of the two nodes; nothing here revokes, stores a receipt or loses
# Redis, so the others stay as they were), each node's sets stay sets (or absent).
RELAY_KEYS = ["relay:nodes", "relay:revoked", "relay:receipts", "relay:history-gap"]
NODE_KEYS = [*[f"relay:node-rooms:{{{n}}}" for n in NODES], *[f"relay:node-users:{{{n}}}" for n in NODES]]

# Names whose hash tag is one of Relay's own keys (or a node id).
AIMED_AT_RELAY_KEYS = ["relay:nodes", "relay:revoked", "relay:receipts", "relay:history-gap", "relay:control", *NODES]

# Names that are one `Character` with the tag's brace in Swift but separate bytes to Redis: a
# `}` then a combining mark, a leading combining mark, a trailing U+0600. Once mis-delivered
# (tags and channels were cut by Character); `ClusterKeys.tag`/`untag` now work on bytes.

ROOM_CASES = [
    pytest.param(["conversation:{relay}", "conversation:relay", "conversation:{relay", "conversation:relay}"], id="braces-around"),
    pytest.param(["conversation:a}b{c", "conversation:a", "conversation:a}b{d", "conversation:a}b"], id="close-brace-first"),
    pytest.param(["conversation:{}", "conversation:", "conversation:{", "conversation:{}}"], id="empty-braces"),
    pytest.param(["conversation:{x", "conversation:x", "conversation:{x}", "conversation:x{"], id="open-brace-only"),
    pytest.param(["{conversation:relay}", "conversation:relay"], id="naively-the-channel-of-another-room"),
    pytest.param(["}conversation:relay", "conversation:relay", "}"], id="leading-close-brace"),
    pytest.param(AIMED_AT_RELAY_KEYS, id="tagged-as-relay-keys"),
    pytest.param(["}\u0301conversation:relay", "}conversation:relay"], id="close-brace-then-combining-mark"),
    pytest.param(["\u0301conversation:relay", "conversation:relay"], id="leading-combining-mark"),
    pytest.param(["conversation:relay\u0600", "conversation:relay"], id="trailing-prepended-mark"),
]

USER_CASES = [
    pytest.param(["bob{relay}", "bob", "relay", "{relay}", "bob{"], id="braces-inside"),
    pytest.param(["{bob}", "bob"], id="naively-the-keys-of-another-user"),
    pytest.param(["}bob", "bob", "}"], id="leading-close-brace"),
    pytest.param(AIMED_AT_RELAY_KEYS, id="tagged-as-relay-keys"),
    pytest.param(["}\u0301relay", "}\u0301bob", "}relay", "}bob"], id="close-brace-then-combining-mark"),
    pytest.param(["\u0301bob", "bob"], id="leading-combining-mark"),
    pytest.param(["bob\u0600", "bob"], id="trailing-prepended-mark"),
]


def tag(name: str) -> str:
    """The hash tag Relay puts around a name (docs/PROTOCOL.md; `ClusterKeys.tag`): `{name}`, and
    `{\\x1f}…}` for a name whose first byte is `}`."""
    return "{\x1f" + name + "}" if name.startswith("}") else "{" + name + "}"


def room_history_key(room: str) -> str:
    return "relay:history:r:" + tag(room)


def user_history_key(user: str) -> str:
    return "relay:history:u:" + tag(user)


# --------------------------------------------------------------------------------------------
# The cluster


@pytest.fixture(scope="module")
def names_cluster(tmp_path_factory):
    """A real Redis Cluster (3 masters, 3 replicas) and relay nodes a and b on it, for the
    module. Stopped with `kill()`: the cross-slot checks are each test's own (`Watch`)."""
    workdir = tmp_path_factory.mktemp("cluster-names")
    redis = make_redis("cluster3", workdir / "redis")
    nodes: list[RelayProcess] = []
    try:
        redis.start()
        for name in ("a", "b"):
            d = workdir / name
            d.mkdir()
            nodes.append(RelayProcess(d, ["--redis", redis.url, "--node-id", f"node-{name}",
                                          "--cluster-heartbeat-ms", str(HEARTBEAT_MS)]).start())
        yield redis, nodes[0], nodes[1]
    finally:
        for n in nodes:
            n.stop()
        redis.kill()


class Watch:
    """What a test must leave as it found it: no new cross-slot refusal (in the relays' logs or
    Redis's error statistics), Relay's own keys of the same types, `relay:nodes` naming the two
    nodes only, the nodes' own keys sets."""

    def __init__(self, redis, *relays: RelayProcess):
        self.redis = redis
        self.log_marks = [(r, len(r.log())) for r in relays]
        self.crossslot = self._crossslot_count()
        self.keys = self._relay_keys()

    def _crossslot_count(self) -> int:
        total = 0
        for node in self.redis.running():
            for line in cli_at(node.port, "INFO", "errorstats").splitlines():
                if line.startswith("errorstat_CROSSSLOT:count="):
                    total += int(line.split("=", 1)[1].split(",")[0])
        return total

    def _relay_keys(self) -> dict[str, str]:
        return {key: self.redis.cli("TYPE", key, key=key).strip() for key in RELAY_KEYS}

    def assert_clean(self) -> None:
        refused = [line for r, mark in self.log_marks for line in r.log()[mark:].splitlines()
                   if any(m in line for m in CROSS_SLOT_MARKERS)]
        assert not refused, "Redis refused cross-slot commands:\n" + "\n".join(refused[:20])
        assert self._crossslot_count() == self.crossslot, "Redis counted CROSSSLOT errors"
        assert self._relay_keys() == self.keys, "Relay's own keys changed type"
        assert self.keys["relay:nodes"] == "zset", self.keys
        members = self.redis.cli("ZRANGE", "relay:nodes", "0", "-1", key="relay:nodes").split()
        assert sorted(members) == sorted(NODES), f"relay:nodes: {members}"
        for key in NODE_KEYS:
            assert self.redis.cli("TYPE", key, key=key).strip() in ("set", "none"), key


@pytest.fixture
def cluster(names_cluster):
    """(redis, node a, node b, the test's `Watch`)."""
    redis, a, b = names_cluster
    _active_relays.extend([a, b])  # conftest attaches their logs' tails to a failure

    async def ready():
        await wait_linked(a, b)

        async def both_heartbeating():
            members = redis.cli("ZRANGE", "relay:nodes", "0", "-1", key="relay:nodes").split()
            return sorted(members) == sorted(NODES)
        await eventually(both_heartbeating, what="both nodes in relay:nodes")
    asyncio.run(asyncio.wait_for(ready(), 30))
    yield redis, a, b, Watch(redis, a, b)


def stream_nonces(redis, key: str, nonces: set[str]) -> set[str]:
    """Which of `nonces` are in the Redis stream `key` (each event's envelope holds its data)."""
    text = redis.cli("XRANGE", key, "-", "+", key=key)
    return {n for n in nonces if n in text}


# --------------------------------------------------------------------------------------------
# Presence


def by_user(presence: list[dict]) -> list[tuple[str, int]]:
    return sorted((e["user"], e["devices"]) for e in presence)


async def user_presence(relay, user: str) -> dict:
    status, body = await http(relay, "GET", f"/api/v1/users/{urllib.parse.quote(user, safe='')}/presence")
    assert status == 200, (user, status, body)
    assert body["user"] == user, body
    return body


async def devices_of(relay, users: list[str]) -> dict[str, int]:
    status, body = await http(relay, "POST", "/api/v1/presence", body={"users": users})
    assert status == 200, body
    assert set(body["users"]) == set(users), body
    return {u: v["devices"] for u, v in body["users"].items()}


async def devices_are(relays, expected: dict[str, int]) -> None:
    """Every node's directory has `expected` sockets per user."""
    async def check():
        for r in relays:
            if await devices_of(r, list(expected)) != expected:
                return False
        return True
    await eventually(check, what=f"directory shows {expected}")


async def rooms_empty(probe, rooms: list[str]) -> None:
    """Nobody is present in `rooms` (a previous case's sockets are gone)."""
    async def check():
        for room in rooms:
            if (await probe.ok("presence:list", {"room": room}))["presence"]:
                return False
        return True
    await eventually(check, what=f"no presence left in {rooms}")


# --------------------------------------------------------------------------------------------
# Rooms


@pytest.mark.parametrize("rooms", ROOM_CASES)
@async_test
async def test_room_events_reach_only_their_room(cluster, rooms):
    redis, a, b, watch = cluster
    run = uuid.uuid4().hex[:8]
    sender_user = f"sender-{run}"

    def nonce(i: int, kind: str) -> str:
        return f"n-{run}-{i}-{kind}"

    async with Clients() as c:
        probe = await c.connect(a, f"probe-{run}", token=mint_token(f"probe-{run}", rooms=rooms))
        await rooms_empty(probe, rooms)

        # Per room: a listener on node A and one on node B, each with a token for that room
        # only; the sender, on node B, is allowed (and joins) every room of the case.
        on_a, on_b, offsets = [], [], []
        for i, room in enumerate(rooms):
            la = await c.connect(a, f"a{i}-{run}", token=mint_token(f"a{i}-{run}", rooms=[room]), name=f"{room}@a")
            joined = await la.join(room)
            offsets.append(joined["offset"])
            lb = await c.connect(b, f"b{i}-{run}", token=mint_token(f"b{i}-{run}", rooms=[room]), name=f"{room}@b")
            joined = await lb.join(room)
            assert {e["user"] for e in joined["presence"]} <= {f"a{i}-{run}", f"b{i}-{run}"}, (room, joined)
            on_a.append(la)
            on_b.append(lb)
        sender = await c.connect(b, sender_user, token=mint_token(sender_user, rooms=rooms), name="sender@b")
        for room in rooms:
            await sender.join(room)

        # Cluster presence, from either node: each room has its own three users.
        for i, room in enumerate(rooms):
            expected = sorted([(f"a{i}-{run}", 1), (f"b{i}-{run}", 1), (sender_user, 1)])
            for listener in (on_a[i], on_b[i]):
                listed = await listener.ok("presence:list", {"room": room})
                assert listed["room"] == room and by_user(listed["presence"]) == expected, (room, listed)
            await on_a[i].expect("presence:join", room=room, user=sender_user)

        # Round 1, from node B: a custom event by the sender and a backend room emit.
        for i, room in enumerate(rooms):
            await sender.ok("chat:tick", {"room": room, "tag": room, "nonce": nonce(i, "tick")})
            assert await emit_api(b, "message:new", {"room": room}, {"tag": room, "nonce": nonce(i, "new")}) \
                == (200, {"recipients": 3}), room
        for i, room in enumerate(rooms):
            for listener in (on_a[i], on_b[i]):
                got = await listener.expect("chat:tick", tag=room)
                assert got["room"] == room and got["from"] == sender_user, got
                await listener.expect("message:new", tag=room)
            await sender.expect("message:new", tag=room)
        # Round 2 (the fence), from node B too.
        for i, room in enumerate(rooms):
            await sender.ok("chat:fence", {"room": room, "tag": room, "nonce": nonce(i, "fence")})
        for i, room in enumerate(rooms):
            for listener in (on_a[i], on_b[i]):
                await listener.expect("chat:fence", tag=room)

        # Exactly its own room's events, once each.
        for i, room in enumerate(rooms):
            for listener in (on_a[i], on_b[i]):
                got = [(n, d.get("tag")) for n, d in listener.history if n in ("chat:tick", "message:new", "chat:fence")]
                assert got == [("chat:tick", room), ("message:new", room), ("chat:fence", room)], (listener.name, got)
                rooms_seen = {d.get("room") for n, d in listener.history if n.startswith("presence:")}
                assert rooms_seen <= {room}, (listener.name, rooms_seen)
        assert sorted(d["tag"] for _, d in sender.events("message:new")) == sorted(rooms)
        assert not sender.events("chat:tick", "chat:fence"), "the sending socket is skipped"

        # The room's history, from either node: its own events only.
        for i, room in enumerate(rooms):
            for listener in (on_a[i], on_b[i]):
                reply = await listener.ok("room:sync", {"room": room, "offset": offsets[i]})
                events = [(e[0], e[1].get("tag")) for e in reply["events"] if e[0] in ("chat:tick", "message:new", "chat:fence")]
                assert Counter(events) == Counter([("chat:tick", room), ("message:new", room), ("chat:fence", room)]), \
                    (listener.name, reply)
                assert all(e[1].get("room") == room for e in reply["events"] if e[0].startswith("presence:")), reply

        # In Redis: each room's stream holds its own nonces and no other room's.
        mine = {room: {nonce(i, k) for k in ("tick", "new", "fence")} for i, room in enumerate(rooms)}
        every = set().union(*mine.values())
        for room in rooms:
            assert stream_nonces(redis, room_history_key(room), every) == mine[room], room

    # Everyone left: nobody is present any more, from either node.
    async with Clients() as c:
        for node in (a, b):
            probe = await c.connect(node, f"probe-{run}", token=mint_token(f"probe-{run}", rooms=rooms))
            await rooms_empty(probe, rooms)
    watch.assert_clean()


# --------------------------------------------------------------------------------------------
# Users


@pytest.mark.parametrize("users", USER_CASES)
@async_test
async def test_user_events_reach_only_their_user(cluster, users):
    redis, a, b, watch = cluster
    run = uuid.uuid4().hex[:8]

    def home(user: str) -> str:
        return f"conversation:home:{user}"

    def nonce(i: int, rnd: int) -> str:
        return f"n-{run}-{i}-{rnd}"

    await devices_are([a, b], {u: 0 for u in users})
    async with Clients() as c:
        # Each user: a device on node A (in a room of its own) and one on node B.
        devices: dict[str, tuple] = {}
        for u in users:
            on_a = await c.connect(a, u, token=mint_token(u), name=f"{u}@a")
            await on_a.join(home(u))
            on_b = await c.connect(b, u, token=mint_token(u), name=f"{u}@b")
            devices[u] = (on_a, on_b)
        await devices_are([a, b], {u: 2 for u in users})
        for node in (a, b):
            for u in users:
                p = await user_presence(node, u)
                assert (p["online"], p["devices"], p["rooms"]) == (True, 2, [home(u)]), (node.port, p)

        # Round 1 from node B's backend API, round 2 (the fence) from node A's.
        for rnd, via in ((1, b), (2, a)):
            for i, u in enumerate(users):
                assert await emit_api(via, "notification:new", {"user": u}, {"tag": u, "round": rnd, "nonce": nonce(i, rnd)}) \
                    == (200, {"recipients": 2}), (u, rnd)
            for u in users:
                for device in devices[u]:
                    await device.expect("notification:new", tag=u, round=rnd)
        for u in users:
            for device in devices[u]:
                got = [(d.get("tag"), d.get("round")) for _, d in device.events("notification:new")]
                assert got == [(u, 1), (u, 2)], (device.name, got)

        # In Redis: each user's stream holds its own nonces and no other user's.
        mine = {u: {nonce(i, r) for r in (1, 2)} for i, u in enumerate(users)}
        every = set().union(*mine.values())
        for u in users:
            assert stream_nonces(redis, user_history_key(u), every) == mine[u], u

        # The first user goes offline: the presence API says so from either node, and nothing
        # of the others' changes.
        target, others = users[0], users[1:]
        for device in devices[target]:
            await device.disconnect()

        async def target_offline():
            for node in (a, b):
                p = await user_presence(node, target)
                if (p["online"], p["devices"], p["rooms"]) != (False, 0, []):
                    return False
                assert isinstance(p["lastSeen"], int), p
            return True
        await eventually(target_offline, what=f"{target!r} offline on both nodes")
        for node in (a, b):
            assert await devices_of(node, others) == {u: 2 for u in others}
            for u in others:
                p = await user_presence(node, u)
                assert (p["online"], p["devices"], p["rooms"]) == (True, 2, [home(u)]), (node.port, p)
            assert await emit_api(node, "notification:new", {"user": target}, {"tag": target, "round": 3}) \
                == (200, {"recipients": 0})

    await devices_are([a, b], {u: 0 for u in users})
    watch.assert_clean()


# --------------------------------------------------------------------------------------------
# The escape


@async_test
async def test_the_escape_of_a_leading_close_brace_is_no_valid_name(cluster):
    """`}bob` is tagged `{\\x1f}bob}`: that is also what `\\x1f}bob` would give, so no token,
    room or API call may carry a name with U+001F."""
    redis, a, b, watch = cluster
    for node in (a, b):
        code, _ = await refused_code(node, mint_token("\x1f}bob"))
        assert code == "token_invalid_claims"
        code, _ = await refused_code(node, mint_token("carol", rooms=["\x1f}conversation:relay"]))
        assert code == "token_invalid_claims"
        async with Clients() as c:
            carol = await c.connect(node, "carol", token=mint_token("carol", rooms=["*"]))
            await carol.fails("room:join", {"room": "\x1f}conversation:relay"}, "invalid_payload")
        for to in ({"user": "\x1f}bob"}, {"room": "\x1f}conversation:relay"}):
            status, body = await emit_api(node, "notification:new", to, {"x": 1})
            assert status == 400 and body["error"]["code"] == "invalid_payload", (to, status, body)
        status, body = await http(node, "GET", f"/api/v1/users/{urllib.parse.quote(chr(0x1f) + '}bob', safe='')}/presence")
        assert status == 400 and body["error"]["code"] == "invalid_payload", (status, body)
    watch.assert_clean()
