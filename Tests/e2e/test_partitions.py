"""Real network partitions (issue #31, criterion 4): relay nodes, Redis and clients in separate
network namespaces of this machine, joined by veth pairs (netns.py), with the fault-injecting TCP
proxy (faultproxy.py) on the node↔Redis path where the fault is delay or stalled segments.

    test namespace (clients, webhook receiver, fault proxy)
        │ link "ca"                     │ link "cb"                │ link "cr"
    ns a: node A ── link "ar" ──┐   ns b: node B ── link "br" ──┐  │
                                └──────────── ns r: redis-server ┴──┘

Clients reach the nodes over "ca"/"cb", never cut. Node B always reaches Redis over "br". Node A
reaches Redis over "ar" (the link that is cut) or, for the proxy scenarios, through the fault
proxy: node A → "ca" → proxy in the test namespace → "cr" → Redis.

Scenarios, each with its bounds (measured on a loaded 2-core machine, bound well above):
  a. node A cut off from Redis while its clients stay connected (link down; proxy blackhole),
     clients on both nodes writing acked receipts and room events, then the heal;
  b. node A's Redis path at 500 ms delay, then at 30 % stalled segments, under load;
  c. a socket that misses recoverable events during a partition reconnects with recovery.
After each: 0 acked receipts lost (`receipt:sync` on both nodes), presence the same on every node
and equal to who is really connected, `/admin/v1/ready` up and not degraded on both nodes,
`user:offline`/`user:online` webhooks once per real transition.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from websockets.exceptions import ConnectionClosed

import netns
from conftest import RelayProcess
from redis_servers import RedisServer
from faultproxy import BLACKHOLE, PASS, FaultProxy, delay, stall
from helpers import ADMIN_KEY, TIMEOUT, AckingSocket, Clients, http, mint_token, run
from recovery_helpers import RawSessions, parse_offset

HEARTBEAT_MS = 500  # a node silent for 3 heartbeats (1.5 s) is presumed dead
REDIS_PORT = 6379  # in its own namespace: no other Redis can be there
ROOM_FLAGS = ["--events-per-second", "100000", "--event-burst", "100000",
              "--rate", "custom=100000:100000,receipt=100000:100000,control=1000:1000",
              "--receipts-per-user-per-second", "100000", "--packets-per-second", "100000",
              "--recovery-takeover-after-ms", "0"]
WEBHOOK_SECRET = "whsec-partitions-0123456789abcdef-0123456789"

# Bounds (seconds), from the heal (the link up / the proxy back to `pass`):
HEAL_READY_S = 15.0  # both nodes report redis up and not degraded
HEAL_RECEIPTS_S = 10.0  # every acked receipt returned by receipt:sync on both nodes
HEAL_PRESENCE_S = 10.0  # presence equal on both nodes and to who is connected
HEAL_WEBHOOKS_S = 10.0  # the webhooks of the real transitions delivered
CROSS_S = 10.0  # a room event crosses between the nodes again (and, on a slow link, all of them)
# Measured (2-core box, other builds running): ready 0.2-3.7 s after the heal (node A's
# reconnect backoff), receipts on both nodes 0.5-0.95 s, presence < 0.1 s, webhooks at once,
# events cross again < 0.2 s; on the 500 ms / 30 %-stalled link the last events cross <= 0.6 s.
SETTLE_S = 3.0  # after convergence: time for a late duplicate to show up


# --------------------------------------------------------------------------------------------
# Processes in namespaces


class Node(RelayProcess):
    """A relay node in a namespace, listening on its client link's address."""

    def __init__(self, lab: netns.NetLab, ns: str, host: str, workdir: Path, name: str, redis_url: str, extra: list[str],
                 heartbeat_ms: int = HEARTBEAT_MS):
        workdir.mkdir(parents=True, exist_ok=True)
        super().__init__(workdir, ["--redis", redis_url, "--node-id", name, "--cluster-heartbeat-ms", str(heartbeat_ms), *extra], host=host)
        self.lab, self.ns, self.name = lab, ns, name
        self.heartbeat_ms = heartbeat_ms

    def _spawn(self, args: list[str]) -> subprocess.Popen:
        return self.lab.popen(self.ns, args, cwd=self.workdir, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Redis(RedisServer):
    """A redis-server inside the Redis namespace, bound to its end of every link."""

    def __init__(self, lab: netns.NetLab, ns: str, binds: list[str], workdir: Path):
        super().__init__(REDIS_PORT, workdir)
        self.lab, self.ns, self.binds = lab, ns, binds
        self.workdir.mkdir(parents=True, exist_ok=True)

    def server_args(self) -> list[str]:
        return ["--port", str(REDIS_PORT), "--bind", *self.binds, "127.0.0.1", "--protected-mode", "no",
                "--save", "", "--appendonly", "no", "--dir", str(self.workdir)]

    def _spawn(self, args: list[str]) -> subprocess.Popen:
        return self.lab.popen(self.ns, args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def cli(self, *args: str, key: str | None = None) -> str:
        return self.lab.run(self.ns, ["redis-cli", "-p", str(REDIS_PORT), *args]).stdout


class Receiver:
    """Webhook endpoint in the test namespace, on the test's end of each client link."""

    def __init__(self, hosts: list[str]):
        self.hosts = hosts
        self.requests: list[dict] = []
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.requests.append({"json": json.loads(body), "at": time.time()})
        return web.Response(status=200, text="ok")

    async def start(self) -> "Receiver":
        app = web.Application()
        app.router.add_post("/hook", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        for host in self.hosts:
            site = web.TCPSite(self.runner, host, self.port)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    def url(self, host: str) -> str:
        return f"http://{host}:{self.port}/hook"

    def events(self) -> list[dict]:
        """Every event once (deduplicated by id: delivery is at least once), in arrival order,
        with the node that sent it."""
        seen: dict[str, dict] = {}
        for r in self.requests:
            for e in r["json"]["events"]:
                seen.setdefault(e["id"], {**e, "node": r["json"]["node"], "at": r["at"]})
        return list(seen.values())

    def transitions(self, user: str, after: float = 0.0) -> list[tuple[str, str]]:
        """(type, node) of the user's online/offline events received after `after`."""
        return [(e["type"], e["node"]) for e in self.events()
                if e["type"] in ("user:online", "user:offline") and e["data"].get("user") == user and e["at"] > after]


# --------------------------------------------------------------------------------------------
# The lab


@dataclass
class Cluster:
    lab: netns.NetLab
    links: dict
    redis: Redis
    a: Node
    b: Node
    proxy: FaultProxy | None
    receiver: Receiver
    notes: list[str] = field(default_factory=list)

    def nodes(self) -> list[Node]:
        return [self.a, self.b]

    def note(self, text: str) -> None:
        """A measurement, printed with the test's output (pytest -s, or on failure)."""
        self.notes.append(text)
        print(f"[partitions] {text}", flush=True)


async def start_cluster(lab: netns.NetLab, tmp: Path, via_proxy: bool, webhooks: bool = True,
                        heartbeat_ms: int = HEARTBEAT_MS) -> Cluster:
    ns_a, ns_b, ns_r = lab.namespace("a"), lab.namespace("b"), lab.namespace("r")
    links = {
        "ca": lab.link("ca", None, ns_a),  # first: the addressing is probed on it
        "cb": lab.link("cb", None, ns_b),
        "ar": lab.link("ar", ns_a, ns_r),
        "br": lab.link("br", ns_b, ns_r),
        "cr": lab.link("cr", None, ns_r),
    }
    redis = Redis(lab, ns_r, [links["ar"].addr_b, links["br"].addr_b, links["cr"].addr_b], tmp / "redis").start()
    receiver = await Receiver([links["ca"].addr_a, links["cb"].addr_a]).start()
    proxy = None
    if via_proxy:
        proxy = FaultProxy(links["ca"].addr_a, links["cr"].addr_b, REDIS_PORT).start()
        a_redis = f"redis://{links['ca'].addr_a}:{proxy.port}"
    else:
        a_redis = f"redis://{links['ar'].addr_b}:{REDIS_PORT}"

    def hooks(link: str) -> list[str]:
        if not webhooks:
            return []
        return ["--webhook-url", receiver.url(links[link].addr_a), "--webhook-secret", WEBHOOK_SECRET,
                "--webhook-flush-ms", "50", "--webhook-max-backoff-ms", "400", "--webhook-max-attempts", "0"]

    a = Node(lab, ns_a, links["ca"].addr_b, tmp / "a", "node-a", a_redis, [*ROOM_FLAGS, *hooks("ca")], heartbeat_ms).start()
    b = Node(lab, ns_b, links["cb"].addr_b, tmp / "b", "node-b", f"redis://{links['br'].addr_b}:{REDIS_PORT}",
             [*ROOM_FLAGS, *hooks("cb")], heartbeat_ms).start()
    return Cluster(lab, links, redis, a, b, proxy, receiver)


async def stop_cluster(cluster: Cluster | None) -> None:
    if cluster is None:
        return
    for n in cluster.nodes():
        n.stop()
    if cluster.proxy is not None:
        cluster.proxy.stop()
    cluster.redis.stop()
    await cluster.receiver.stop()


def partition_test(via_proxy: bool, webhooks: bool = True, timeout: float = 150, heartbeat_ms: int = HEARTBEAT_MS):
    """Runs `body(cluster)` in a fresh lab, torn down whatever happens; fails (never skips)
    when namespaces cannot be made here."""

    def decorator(body):
        def test(tmp_path):
            try:
                netns.require_netns()
            except netns.NetnsUnavailable as error:
                pytest.fail(f"network namespaces are unavailable on this machine: {error}", pytrace=False)
            netns.cleanup_leftovers()
            lab = netns.NetLab()
            cluster = None

            async def main():
                nonlocal cluster
                try:
                    cluster = await start_cluster(lab, tmp_path, via_proxy, webhooks, heartbeat_ms)
                    await wait_ready(cluster, 30, "at start")
                    await body(cluster)
                except BaseException:
                    if cluster is not None:
                        for n in cluster.nodes():
                            tail = "".join(n.log().splitlines(keepends=True)[-60:])
                            print(f"--- {n.name} log (tail) ---\n{tail}")
                    raise
                finally:
                    await stop_cluster(cluster)

            try:
                run(main(), timeout)
            finally:
                lab.close()
                left = lab.leftovers()
                assert not left, f"namespaces/links left behind: {left}"

        test.__name__ = body.__name__
        test.__doc__ = body.__doc__
        return test

    return decorator


# --------------------------------------------------------------------------------------------
# Waiting, bounded


async def until(check, timeout: float, what: str, interval: float = 0.1):
    """Polls the async predicate `check()` until it holds; returns the seconds it took."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    last = None
    while True:
        try:
            last = await check()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ConnectionClosed, AssertionError) as error:
            last = error
        if last is True:
            return loop.time() - start
        if loop.time() - start > timeout:
            raise AssertionError(f"{what}: not within {timeout} s (last: {last!r})")
        await asyncio.sleep(interval)


async def ready(node: Node) -> dict:
    status, body = await http(node, "GET", "/admin/v1/ready", key=ADMIN_KEY)
    return body if status == 200 and isinstance(body, dict) else {"status": status, "body": body}


async def wait_ready(cluster: Cluster, timeout: float, what: str) -> float:
    async def both():
        states = [await ready(n) for n in cluster.nodes()]
        ok = all(s.get("redis") == "up" and s.get("degraded") is False for s in states)
        return True if ok else states
    return await until(both, timeout, f"both nodes ready (redis up, not degraded) {what}")


# --------------------------------------------------------------------------------------------
# Receipts, pipelined


class ReceiptWriter:
    """A raw Socket.IO client that writes `message:delivered` receipts for `author` in `room`,
    pipelined, recording every acked one."""

    def __init__(self, node: Node, user: str, room: str, author: str):
        self.node, self.user, self.room, self.author = node, user, room, author
        self.acked: dict[tuple[str, str, str], int] = {}
        self.refused: list[dict] = []
        self.timeouts = 0
        self.n = 0
        self.socket: AckingSocket | None = None
        self.task: asyncio.Task | None = None
        self.stop = asyncio.Event()

    async def open(self) -> "ReceiptWriter":
        self.socket = await AckingSocket.open(self.node.ws_url, mint_token(self.user), proxy=None, open_timeout=TIMEOUT)
        ack = await self.call("room:join", {"room": self.room})
        assert ack.get("ok"), ack
        return self

    async def call(self, event: str, data: dict, timeout: float = 30) -> dict:
        assert self.socket is not None
        return await self.socket.call(event, data, timeout)

    async def _one(self, message_id: str):
        try:
            ack = await self.call("message:delivered", {"room": self.room, "messageId": message_id, "authorId": self.author})
        except asyncio.TimeoutError:
            self.timeouts += 1
            return
        if ack.get("ok") is True:
            self.acked[(message_id, self.user, "delivered")] = ack["id"]
        else:
            self.refused.append(ack)

    async def _loop(self, per_second: float, in_flight: int):
        sem = asyncio.Semaphore(in_flight)
        pending: set[asyncio.Task] = set()
        while not self.stop.is_set():
            await sem.acquire()
            self.n += 1
            t = asyncio.create_task(self._one(f"{self.user}-m{self.n}"))
            t.add_done_callback(lambda _t: sem.release())
            pending.add(t)
            t.add_done_callback(pending.discard)
            try:
                await asyncio.wait_for(self.stop.wait(), 1 / per_second)
            except asyncio.TimeoutError:
                pass
        if pending:
            await asyncio.wait(pending, timeout=35)

    def start(self, per_second: float = 100, in_flight: int = 32) -> None:
        self.task = asyncio.create_task(self._loop(per_second, in_flight))

    async def finish(self):
        self.stop.set()
        if self.task is not None:
            await asyncio.wait_for(self.task, 40)

    async def close(self):
        if self.socket is not None:
            await self.socket.close()


async def synced_receipts(node: Node, author: str) -> list[dict]:
    """Every receipt on `author`'s messages, paged through `receipt:sync` on `node`."""
    async with Clients() as c:
        client = await c.connect(node, author, name=f"{author}@{node.name}")
        out, since = [], 0
        for _ in range(200):
            reply = await client.call("receipt:sync", {"since": since, "limit": 1000})
            assert reply["ok"], reply
            out += reply["receipts"]
            if not reply.get("more"):
                break
            since = reply["next"]
        return out


async def all_receipts_everywhere(cluster: Cluster, author: str, acked: dict) -> bool | str:
    """True when receipt:sync on both nodes returns every acked receipt, each once."""
    problems = []
    for node in cluster.nodes():
        got = await synced_receipts(node, author)
        keys = [(r["messageId"], r["userId"], r["kind"]) for r in got]
        dups = len(keys) - len(set(keys))
        missing = [k for k in acked if k not in set(keys)]
        if dups:
            problems.append(f"{node.name}: {dups} receipts returned twice")
        if missing:
            problems.append(f"{node.name}: {len(missing)} of {len(acked)} acked receipts missing, e.g. {missing[:3]}")
    return True if not problems else "; ".join(problems)


# --------------------------------------------------------------------------------------------
# Presence


async def presence_everywhere(cluster: Cluster, room: str, expected: dict[str, int], users: list[str]) -> bool | str:
    """presence:list of `room` and the presence API of `users` say the same on both nodes, and
    what they say is `expected` (user → devices really connected)."""
    problems = []
    async with Clients() as c:
        for node in cluster.nodes():
            probe = await c.connect(node, f"probe-{uuid.uuid4().hex[:6]}", name=f"probe@{node.name}")
            listed = await probe.ok("presence:list", {"room": room})
            got = {e["user"]: e["devices"] for e in listed["presence"]}
            if got != expected:
                problems.append(f"{node.name} presence:list {got} != {expected}")
            status, body = await http(node, "POST", "/api/v1/presence", body={"users": users})
            if status != 200 or body.get("degraded"):
                problems.append(f"{node.name} presence API {status} {body}")
                continue
            devices = {u: v["devices"] for u, v in body["users"].items()}
            want = {u: expected.get(u, 0) for u in users}
            # The probe itself is connected (not in the room): not among `users`.
            if devices != want:
                problems.append(f"{node.name} presence API {devices} != {want}")
    return True if not problems else "; ".join(problems)


# --------------------------------------------------------------------------------------------
# Room events across the nodes


async def crosses(sender, receiver, room: str, timeout: float) -> float:
    """Polls until a probe event sent by `sender` reaches `receiver`; seconds it took."""
    seq = [0]
    tag = uuid.uuid4().hex[:6]

    async def once():
        seq[0] += 1
        await sender.emit("probe:ping", {"room": room, "tag": tag, "n": seq[0]})
        try:
            await receiver.expect("probe:ping", where=lambda d: d.get("tag") == tag, timeout=0.5)
            return True
        except AssertionError:
            return False
    return await until(once, timeout, f"an event from {sender.name} reaching {receiver.name}", interval=0)


def fault_on(cluster: Cluster, fault: str) -> None:
    if fault == "link":
        cluster.lab.cut(cluster.links["ar"], "a")
    elif fault == "blackhole":
        cluster.proxy.set(BLACKHOLE)
    else:
        raise ValueError(fault)


def fault_off(cluster: Cluster, fault: str) -> None:
    if fault == "link":
        cluster.lab.heal(cluster.links["ar"], "a")
    else:
        cluster.proxy.set(PASS)


# --------------------------------------------------------------------------------------------
# a. Node A cut off from Redis, its clients still connected


async def cut_off_scenario(cluster: Cluster, fault: str, partition_s: float, swept: bool):
    """`swept`: the partition outlasts the dead-node bound (3 heartbeats), so node B sweeps node A
    (PROTOCOL §10, §13 "A dead node (SIGKILL, partition)"): the users that stayed on node A are
    reported offline once by node B, and online once by node A when it restates its presence
    after the heal — one pair, in that order, never more. Shorter than the bound, a user who
    stayed connected gets no webhook at all."""
    a, b, receiver = cluster.a, cluster.b, cluster.receiver
    room = f"conversation:part-{uuid.uuid4().hex[:6]}"
    author = "author"
    async with Clients() as c:
        stay_a = await c.connect(a, "stay-a")
        stay_b = await c.connect(b, "stay-b")
        leave_a = await c.connect(a, "leave-a")
        for cl in (stay_a, stay_b, leave_a):
            await cl.join(room)
        writers = [await ReceiptWriter(a, "writer-a", room, author).open(), await ReceiptWriter(b, "writer-b", room, author).open()]
        users = ["stay-a", "stay-b", "leave-a", "join-a", "join-b", "writer-a", "writer-b"]
        await crosses(stay_a, stay_b, room, CROSS_S)
        await until(lambda: _async(all(receiver.transitions(u) == [("user:online", n)] for u, n in
                                       (("stay-a", "node-a"), ("stay-b", "node-b"), ("leave-a", "node-a"),
                                        ("writer-a", "node-a"), ("writer-b", "node-b")))),
                    HEAL_WEBHOOKS_S, "the first user:online of everyone")
        for w in writers:
            w.start(per_second=60)
        await asyncio.sleep(0.5)  # receipts before the partition too (load, not a wait for a condition)
        baseline = time.time()

        # ---- the partition
        loop = asyncio.get_running_loop()
        cut_at = loop.time()
        fault_on(cluster, fault)
        degraded_seen: dict[str, float | None] = {"node-a": None, "node-b": None}
        clients: dict[str, object] = {}

        async def transitions():
            # Real transitions during the partition: leave-a goes from the cut-off node at once
            # (racing node A noticing the cut), join-a arrives on it, join-b on the healthy node.
            await leave_a.disconnect()
            clients["join-b"] = await c.connect(b, "join-b")
            await clients["join-b"].join(room)
            clients["join-a"] = await c.connect(a, "join-a")
            await clients["join-a"].join(room)
        moves = asyncio.create_task(transitions())
        events_sent = 0
        while loop.time() - cut_at < partition_s:
            await stay_a.emit("note:new", {"room": room, "during": events_sent})
            events_sent += 1
            for n in cluster.nodes():
                state = await ready(n)
                if state.get("degraded") is True and degraded_seen[n.name] is None:
                    degraded_seen[n.name] = loop.time() - cut_at
            await asyncio.sleep(0.1)
        # Node-local delivery went on on node A during the partition.
        assert stay_a.connected, "node A's clients stayed connected"
        assert a.alive() and b.alive()

        # ---- the heal
        fault_off(cluster, fault)
        healed_at = loop.time()
        cluster.note(f"{fault}: node A cut off from Redis for {healed_at - cut_at:.2f} s; it reported degraded "
                     f"after {secs(degraded_seen['node-a'])}; node B: {secs(degraded_seen['node-b'])}")
        await asyncio.wait_for(moves, 30)
        assert clients["join-a"].connected
        t_ready = await wait_ready(cluster, HEAL_READY_S, f"after the heal ({fault})")
        t_cross_ab = await crosses(stay_a, stay_b, room, CROSS_S)
        t_cross_ba = await crosses(stay_b, stay_a, room, CROSS_S)
        for w in writers:
            await w.finish()
        acked = {k: v for w in writers for k, v in w.acked.items()}
        assert acked, "no receipt was acked"
        assert not any(w.refused for w in writers), [w.refused[:3] for w in writers]
        problems: list[str] = []  # every bound is checked, so that one failure does not hide another
        t_receipts = await attempt(problems, until(lambda: all_receipts_everywhere(cluster, author, acked), HEAL_RECEIPTS_S,
                                                   "every acked receipt on both nodes", interval=0.3))
        expected = {"stay-a": 1, "stay-b": 1, "join-a": 1, "join-b": 1, "writer-a": 1, "writer-b": 1}
        t_presence = await attempt(problems, until(lambda: presence_everywhere(cluster, room, expected, users), HEAL_PRESENCE_S,
                                                   "presence the same on both nodes and true", interval=0.3))

        pair = [("user:offline", "node-b"), ("user:online", "node-a")] if swept else []
        want = {"stay-a": pair, "writer-a": pair, "stay-b": [], "writer-b": [],
                # Gone during the partition: once, by node B's sweep when node A was swept,
                # else by node A when it tells Redis after the heal.
                "leave-a": [("user:offline", "node-b" if swept else "node-a")],
                # Arrived on the cut-off node: announced by it once it reaches Redis again.
                "join-a": [("user:online", "node-a")],
                "join-b": [("user:online", "node-b")]}

        def webhooks_right() -> bool | str:
            got = {u: receiver.transitions(u, baseline) for u in users}
            return True if got == want else f"got {got}, expected {want}"
        t_hooks = await attempt(problems, until(lambda: _async(webhooks_right()), HEAL_WEBHOOKS_S, "one webhook per real transition"))
        # Nothing late: a duplicate or a spurious transition would show up within a few flushes
        # and heartbeats.
        await asyncio.sleep(SETTLE_S)
        if t_hooks is not None and webhooks_right() is not True:
            problems.append(f"after {SETTLE_S} s more: {webhooks_right()}")
        if t_presence is not None and (late := await presence_everywhere(cluster, room, expected, users)) is not True:
            problems.append(f"after {SETTLE_S} s more: {late}")
        await attempt(problems, wait_ready(cluster, 1, "still, after settling"))
        swept_log = "node presumed dead" in b.log()
        assert swept_log == swept, f"node B {'did not sweep' if swept else 'swept'} node A (partition {partition_s} s, " \
                                   f"heartbeat {b.heartbeat_ms} ms): the scenario did not test what it says"
        heal_total = loop.time() - healed_at
        cluster.note(f"{fault}: {len(acked)} receipts acked ({sum(w.timeouts for w in writers)} ack timeouts); "
                     f"{events_sent} events sent on node A during the partition; after the heal: ready {t_ready:.2f} s, "
                     f"events cross A→B {t_cross_ab:.2f} s, B→A {t_cross_ba:.2f} s, receipts everywhere {secs(t_receipts)}, "
                     f"presence {secs(t_presence)}, webhooks {secs(t_hooks)} (all within {heal_total:.1f} s)")
        assert not problems, f"{fault}, {healed_at - cut_at:.1f} s partition: " + " | ".join(problems)
        for w in writers:
            await w.close()


def secs(value: float | None) -> str:
    return "never/failed" if value is None else f"{value:.2f} s"


async def _async(value):
    return value


async def attempt(problems: list[str], check) -> float | None:
    """Awaits a bounded check; records its failure instead of raising (None)."""
    try:
        return await check
    except AssertionError as error:
        problems.append(str(error))
        return None


@partition_test(via_proxy=False, heartbeat_ms=4000)
async def test_short_link_down_within_the_dead_node_bound(cluster):
    """Node A's veth to Redis down for 2 s, well inside the dead-node bound (3 heartbeats of
    4 s): node A degrades and comes back, nobody is swept, no webhook for who stayed."""
    await cut_off_scenario(cluster, "link", partition_s=2.0, swept=False)


@partition_test(via_proxy=False)
async def test_node_cut_off_from_redis_by_link_down(cluster):
    """Node A's veth to Redis down (no RST, no FIN: packets go nowhere) for 5 s, beyond the
    dead-node bound (1.5 s)."""
    await cut_off_scenario(cluster, "link", partition_s=5.0, swept=True)


@partition_test(via_proxy=True)
async def test_node_cut_off_from_redis_by_blackhole(cluster):
    """The proxy on node A's Redis path black-holes both directions for 5 s (connections stay
    open, nothing goes through), beyond the dead-node bound."""
    await cut_off_scenario(cluster, "blackhole", partition_s=5.0, swept=True)


# --------------------------------------------------------------------------------------------
# b. A slow, lossy link under load


class Counter:
    """Counts `note:new` events of one sender received by a client, by number."""

    def __init__(self, client, tag: str):
        self.client, self.tag = client, tag

    def numbers(self) -> list[int]:
        return [d["n"] for e, d in self.client.history if e == "note:new" and isinstance(d, dict) and d.get("tag") == self.tag]


async def degraded_link_scenario(cluster: Cluster, mode, label: str, fault_s: float):
    a, b = cluster.a, cluster.b
    room = f"conversation:slow-{uuid.uuid4().hex[:6]}"
    async with Clients() as c:
        on_a = await c.connect(a, "slow-a")
        on_b = await c.connect(b, "slow-b")
        for cl in (on_a, on_b):
            await cl.join(room)
        await crosses(on_a, on_b, room, CROSS_S)
        writers = [await ReceiptWriter(a, "swriter-a", room, "author").open(), await ReceiptWriter(b, "swriter-b", room, "author").open()]
        for w in writers:
            w.start(per_second=50)
        tag_ab, tag_ba = uuid.uuid4().hex[:6], uuid.uuid4().hex[:6]
        loop = asyncio.get_running_loop()
        cluster.proxy.set(mode)
        start = loop.time()
        sent = 0
        while loop.time() - start < fault_s:
            sent += 1
            await on_a.ok("note:new", {"room": room, "tag": tag_ab, "n": sent})
            await on_b.ok("note:new", {"room": room, "tag": tag_ba, "n": sent})
            await asyncio.sleep(0.1)
        # Events still cross while the link is slow: every one, once, in order.
        ab, ba = Counter(on_b, tag_ab), Counter(on_a, tag_ba)
        t_ab = await until(lambda: _async(ab.numbers() == list(range(1, sent + 1)) or f"{len(ab.numbers())}/{sent}"),
                           CROSS_S, f"{label}: every event of node A reaching node B")
        t_ba = await until(lambda: _async(ba.numbers() == list(range(1, sent + 1)) or f"{len(ba.numbers())}/{sent}"),
                           CROSS_S, f"{label}: every event of node B reaching node A")
        stats = cluster.proxy.stats
        cluster.proxy.set(PASS)
        healed = loop.time()
        assert a.alive() and b.alive(), "a node crashed"
        for w in writers:
            await w.finish()
        acked = {k: v for w in writers for k, v in w.acked.items()}
        assert acked and not any(w.refused for w in writers), [w.refused[:3] for w in writers]
        t_ready = await wait_ready(cluster, HEAL_READY_S, f"after the {label} link")
        t_receipts = await until(lambda: all_receipts_everywhere(cluster, "author", acked), HEAL_RECEIPTS_S,
                                 "every acked receipt on both nodes", interval=0.3)
        expected = {"slow-a": 1, "slow-b": 1, "swriter-a": 1, "swriter-b": 1}
        t_presence = await until(lambda: presence_everywhere(cluster, room, expected, list(expected)), HEAL_PRESENCE_S,
                                 "presence the same on both nodes and true", interval=0.3)
        # No duplicates showed up late.
        assert ab.numbers() == list(range(1, sent + 1)) and ba.numbers() == list(range(1, sent + 1))
        assert "node presumed dead" not in a.log() + b.log(), "a slow link is not a dead node"
        cluster.note(f"{label}: {sent} events each way over {fault_s} s, the last ones crossed A→B after {t_ab:.2f} s, "
                     f"B→A after {t_ba:.2f} s; {len(acked)} receipts acked ({sum(w.timeouts for w in writers)} ack timeouts); "
                     f"proxy stalled chunks {stats.stalled_chunks}, max buffered {stats.max_buffered}; after the clean link: "
                     f"ready {t_ready:.2f} s, receipts everywhere {t_receipts:.2f} s, presence {t_presence:.2f} s "
                     f"({loop.time() - healed:.1f} s in all)")
        for w in writers:
            await w.close()


@partition_test(via_proxy=True, webhooks=False)
async def test_redis_link_with_500ms_delay(cluster):
    """Node A's Redis path delays every chunk 500 ms each way for 6 s, under load."""
    await degraded_link_scenario(cluster, delay(500), "delay(500 ms)", 6.0)


@partition_test(via_proxy=True, webhooks=False)
async def test_redis_link_with_30_percent_stalled_segments(cluster):
    """30 % of node A's Redis chunks held back 200–600 ms (order kept) for 6 s, under load."""
    await degraded_link_scenario(cluster, stall(0.3), "stall(30 %)", 6.0)


# --------------------------------------------------------------------------------------------
# c. Recovery of what a socket missed during a partition


def ticks_of(events, tag: str) -> list[int]:
    return [args[0]["n"] for name, args in events if name == "chat:tick" and args and args[0].get("tag") == tag]


@partition_test(via_proxy=True, webhooks=False)
async def test_recovery_across_a_partition(cluster):
    """A socket on node B drops; while it is away, node A is black-holed from Redis and its
    member sends events (they cannot reach Redis's history), and node B's member sends events
    too; then the heal, more events, and the socket reconnects with its pid and offset.
    Either it is recovered and gets every missed event exactly once, in order, or it is a new
    session and `room:sync` from its offset says `history_unavailable` (or returns them all):
    never a silent gap, never a duplicate."""
    a, b = cluster.a, cluster.b
    room = f"conversation:rec-{uuid.uuid4().hex[:6]}"
    user = f"amy-{uuid.uuid4().hex[:6]}"
    tag_a, tag_b = "from-a", "from-b"
    async with Clients() as c, RawSessions() as raw:
        sender_a = await c.connect(a, "sender-a")
        sender_b = await c.connect(b, "sender-b")
        for cl in (sender_a, sender_b):
            await cl.join(room)
        s = await raw.open(b, "amy-1")
        hello = await s.connect_ok({"token": mint_token(user), "recover": True, "rooms": [room]})
        await crosses(sender_a, sender_b, room, CROSS_S)
        for n in (1, 2, 3):
            await sender_a.ok("chat:tick", {"room": room, "tag": tag_a, "n": n})
            await sender_b.ok("chat:tick", {"room": room, "tag": tag_b, "n": n})
        await s.wait_for(lambda: ticks_of(s.events, tag_a) == [1, 2, 3] and ticks_of(s.events, tag_b) == [1, 2, 3], "ticks 1..3")
        offset = [args[-1] for _, args in s.events if len(args) == 2][-1]
        parse_offset(offset)
        await s.drop()

        cluster.proxy.set(BLACKHOLE)
        loop = asyncio.get_running_loop()
        cut = loop.time()
        n = 3
        while loop.time() - cut < 4.0:
            n += 1
            await sender_a.ok("chat:tick", {"room": room, "tag": tag_a, "n": n})
            await sender_b.ok("chat:tick", {"room": room, "tag": tag_b, "n": n})
            await asyncio.sleep(0.2)
        cluster.proxy.set(PASS)
        await wait_ready(cluster, HEAL_READY_S, "after the partition")
        await crosses(sender_a, sender_b, room, CROSS_S)
        for _ in range(3):
            n += 1
            await sender_a.ok("chat:tick", {"room": room, "tag": tag_a, "n": n})
            await sender_b.ok("chat:tick", {"room": room, "tag": tag_b, "n": n})
        last = n
        # What sender-b saw of node A's ticks: the events that really crossed.
        crossed_a = sorted({d["n"] for e, d in sender_b.history if e == "chat:tick" and d.get("tag") == tag_a})
        missed_a = [k for k in range(4, last + 1)]

        t = await raw.open(b, "amy-2")
        back = await t.connect_ok({"token": mint_token(user), "recover": True, "pid": hello["pid"], "offset": offset})
        await sender_b.ok("chat:tick", {"room": room, "tag": tag_b, "n": last + 1})
        await t.wait_for(lambda: (last + 1) in ticks_of(t.events, tag_b) or not back.get("recovered"), "a live tick after the reconnect")
        await t.barrier()
        got_a, got_b = ticks_of(t.events, tag_a), ticks_of(t.events, tag_b)
        cluster.note(f"recovery: recovered={back.get('recovered')}; node A's ticks 4..{last} "
                     f"(crossed live to node B: {crossed_a}); replayed from node A: {got_a}, from node B: {got_b}")
        if back.get("recovered"):
            assert back["sid"] == hello["sid"]
            assert got_b == list(range(4, last + 2)), f"node B's missed ticks exactly once, in order: {got_b}"
            assert got_a == missed_a, (f"a recovery must replay every missed event of node A exactly once "
                                       f"(or not recover): got {got_a}, expected {missed_a}")
        else:
            assert back["sid"] != hello["sid"] and got_a == [] and got_b == [], (back, got_a, got_b)
            await t.ok("room:join", {"room": room})
            reply = await t.call("room:sync", {"room": room, "offset": offset, "limit": 500})
            if reply.get("ok"):
                synced = [e for e in reply["events"] if e[0] == "chat:tick"]
                sa = [e[1]["n"] for e in synced if e[1].get("tag") == tag_a]
                sb = [e[1]["n"] for e in synced if e[1].get("tag") == tag_b]
                cluster.note(f"recovery: room:sync returned node A's {sa}, node B's {sb}")
                assert sa == missed_a and sb == list(range(4, last + 2)), \
                    f"room:sync after a partition: a silent gap or a duplicate (A {sa}, B {sb})"
            else:
                assert reply["error"]["code"] == "history_unavailable", reply
                cluster.note("recovery: room:sync -> history_unavailable")
