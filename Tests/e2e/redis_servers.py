"""The Redis servers of the end-to-end suite, on 127.0.0.1, started and stopped by the test
(by pid).

Every kind has one interface: ``url`` (what ``--redis`` takes), ``start()`` (also after a
``kill()``: back on the same port, empty), ``kill()`` (SIGKILL, like a crash), ``stop()`` (the
end of the test: killed, then checked) and ``cli(*args, key=...)`` (redis-cli against the node
that owns ``key`` — a key or a sharded channel — or any node without one).

Kinds (``KINDS``, the ``redis_kind`` fixture's params):

- ``single``: one plain redis-server (``RedisServer``).
- ``cluster3``: a real Redis Cluster of 3 masters and 3 replicas (``RedisClusterServers``):
  commands and sharded subscriptions spread over the masters, redirects, failover.
- ``cluster1``: one redis-server in cluster mode that owns every slot (``ClusterModeRedis``).
  It refuses a script whose declared keys are in several slots (CROSSSLOT), which a plain
  Redis runs; the relay's client talks to it without redirects. At ``stop()`` (and before
  each ``kill()``) its error statistics are read: a CROSSSLOT or cross-slot script error fails
  the test (``cross_slot_errors``).

A real multi-node cluster can be added as another kind: a class with the same interface whose
``cli`` finds the owner of ``key`` (``CLUSTER KEYSLOT`` then ``CLUSTER SHARDS``), and a branch
in ``make_redis``.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

KINDS = ["single", "cluster1", "cluster3"]
START_TIMEOUT = 15.0

# Redis's answers when a script's keys (or the keys it touches) are not in one slot.
CROSS_SLOT_MARKERS = ("CROSSSLOT", "do not hash to the same slot", "non local key")


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A free port below the kernel's ephemeral range: a server restarted on it (a Redis kill
    and restart) cannot find it taken by some outgoing connection's local port meanwhile —
    the relays reconnect in a loop while it is down, each attempt from a new ephemeral port."""
    low, _ = _ephemeral_range()
    for _ in range(1000):
        port = random.randrange(20000, max(20001, low))
        # Never the same port twice in one run: a cluster picks a dozen at once, none bound yet.
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise AssertionError("no free port below the ephemeral range")


_handed_out: set[int] = set()


def cli_at(port: int, *args) -> str:
    """redis-cli against 127.0.0.1:`port`; its output, or "" when it failed (a node that is down)."""
    out = subprocess.run([_binary("redis-cli"), "-h", "127.0.0.1", "-p", str(port), *map(str, args)],
                         capture_output=True, text=True, timeout=10)
    return out.stdout if out.returncode == 0 else ""


def _binary(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is not installed: run scripts/test.sh (CI installs Debian's redis-server)"
    return path


class RedisServer:
    """A plain redis-server on 127.0.0.1."""

    kind = "single"

    def __init__(self, port: int, workdir):
        self.port = port
        self.workdir = Path(workdir)
        self.proc: subprocess.Popen | None = None

    def server_args(self) -> list[str]:
        return ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(self.workdir)]

    def _spawn(self, args: list[str]) -> subprocess.Popen:
        """Starts the process (a subclass may start it elsewhere, e.g. in a network namespace)."""
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def start(self) -> "RedisServer":
        self.proc = self._spawn([_binary("redis-server"), *self.server_args()])
        ready = threading.Event()

        def drain():
            for line in self.proc.stdout:
                if b"Ready to accept connections" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        assert ready.wait(START_TIMEOUT) and self.proc.poll() is None, "redis-server did not start"
        return self

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self):
        self.kill()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def node_port(self, key: str | None = None) -> int:
        """The port of the node that owns `key` (one node here)."""
        return self.port

    def cli(self, *args, key: str | None = None) -> str:
        """Runs redis-cli on the node that owns `key`; returns its output (raises on failure)."""
        out = subprocess.run([_binary("redis-cli"), "-h", "127.0.0.1", "-p", str(self.node_port(key)), *map(str, args)],
                             capture_output=True, text=True, timeout=10)
        assert out.returncode == 0, f"redis-cli {args}: {out.stderr}"
        return out.stdout

    def __repr__(self) -> str:
        return f"{type(self).__name__}(port={self.port})"


class ClusterModeRedis(RedisServer):
    """One redis-server with `--cluster-enabled yes` that owns all 16384 slots."""

    kind = "cluster1"

    def __init__(self, port: int, workdir):
        super().__init__(port, workdir)
        self.errors: dict[str, int] = {}
        # The cluster bus port (by default port + 10000, which may be taken or past 65535).
        self.bus_port = free_port()

    def server_args(self) -> list[str]:
        return [*super().server_args(), "--cluster-enabled", "yes", "--cluster-port", str(self.bus_port),
                "--cluster-config-file", str(self.workdir / f"nodes-{self.port}.conf")]

    def start(self) -> "ClusterModeRedis":
        super().start()
        # A restart keeps its slots (nodes.conf); a first start is given them all.
        if "cluster_slots_assigned:16384" not in self.cli("CLUSTER", "INFO"):
            self.cli("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        deadline = time.monotonic() + START_TIMEOUT
        while "cluster_state:ok" not in self.cli("CLUSTER", "INFO"):
            assert time.monotonic() < deadline, "the one-node cluster did not reach cluster_state:ok"
            time.sleep(0.05)
        return self

    def errorstats(self) -> dict[str, int]:
        """`INFO errorstats` of the running server: error prefix → count."""
        stats = {}
        for line in self.cli("INFO", "errorstats").splitlines():
            if line.startswith("errorstat_") and ":count=" in line:
                name, count = line[len("errorstat_"):].split(":count=", 1)
                stats[name] = int(count.strip())
        return stats

    def _collect(self):
        if self.proc and self.proc.poll() is None:
            for name, count in self.errorstats().items():
                self.errors[name] = self.errors.get(name, 0) + count

    def kill(self):
        self._collect()
        super().kill()

    def stop(self):
        super().stop()
        assert "CROSSSLOT" not in self.errors, f"Redis refused cross-slot commands: {self.errors}"


class RedisClusterServers:
    """A real Redis Cluster: 3 masters and 3 replicas (`redis-cli --cluster create`), short
    node timeout so a replica takes over in about two seconds. ``start()`` after ``kill()``
    makes the whole cluster again, empty, on the same ports (as a restarted plain Redis)."""

    kind = "cluster3"
    NODE_TIMEOUT_MS = 1000

    def __init__(self, workdir, masters: int = 3):
        self.workdir = Path(workdir)
        self.nodes = [RedisServer(free_port(), self.workdir / f"node-{i}") for i in range(masters * 2)]
        self.masters = masters
        self.errors: dict[str, int] = {}
        self.bus_ports = [free_port() for _ in self.nodes]

    def _node_args(self, i: int) -> list[str]:
        node = self.nodes[i]
        return [*RedisServer.server_args(node), "--cluster-enabled", "yes", "--cluster-port", str(self.bus_ports[i]),
                "--cluster-config-file", str(node.workdir / "nodes.conf"),
                "--cluster-node-timeout", str(self.NODE_TIMEOUT_MS), "--cluster-replica-validity-factor", "0"]

    def start(self) -> "RedisClusterServers":
        for i, node in enumerate(self.nodes):
            node.workdir.mkdir(parents=True, exist_ok=True)
            (node.workdir / "nodes.conf").unlink(missing_ok=True)
            node.server_args = (lambda i=i: self._node_args(i))
            node.start()
        for attempt in range(3):
            out = subprocess.run([_binary("redis-cli"), "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in self.nodes],
                                  "--cluster-replicas", "1", "--cluster-yes"], capture_output=True, text=True, timeout=60)
            if out.returncode == 0 or "is not empty" not in out.stdout + out.stderr:
                break
            # Seen after a restart while relays were reconnecting: a node held a key or two before
            # the cluster existed. Start the nodes from nothing again (not the relays' business:
            # they are checked by what the test asserts afterwards).
            for n in self.nodes:
                cli_at(n.port, "FLUSHALL")
                cli_at(n.port, "CLUSTER", "RESET", "HARD")
        assert out.returncode == 0, f"cluster create failed: {out.stdout}{out.stderr}"
        deadline = time.monotonic() + 30
        while not all("cluster_state:ok" in cli_at(n.port, "CLUSTER", "INFO") for n in self.nodes):
            assert time.monotonic() < deadline, "the cluster did not reach cluster_state:ok"
            time.sleep(0.05)
        return self

    def running(self) -> list[RedisServer]:
        return [n for n in self.nodes if n.proc and n.proc.poll() is None]

    def node_port(self, key: str | None = None) -> int:
        """The port of the master that serves `key`'s slot now (any running node without a key)."""
        alive = self.running()
        assert alive, "no cluster node is running"
        if key is None:
            return alive[0].port
        slot = int(cli_at(alive[0].port, "CLUSTER", "KEYSLOT", key).strip())
        for line in cli_at(alive[0].port, "CLUSTER", "NODES").splitlines():
            fields = line.split()
            if len(fields) < 9 or "master" not in fields[2] or "fail" in fields[2]:
                continue
            port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
            for r in fields[8:]:
                if r.startswith("["):
                    continue
                lo, _, hi = r.partition("-")
                if int(lo) <= slot <= int(hi or lo):
                    return port
        raise AssertionError(f"no master serves slot {slot}")

    def master_of(self, key: str) -> RedisServer:
        port = self.node_port(key)
        return next(n for n in self.nodes if n.port == port)

    def cli(self, *args, key: str | None = None) -> str:
        out = subprocess.run([_binary("redis-cli"), "-h", "127.0.0.1", "-p", str(self.node_port(key)), *map(str, args)],
                             capture_output=True, text=True, timeout=10)
        assert out.returncode == 0, f"redis-cli {args}: {out.stderr}"
        return out.stdout

    @property
    def url(self) -> str:
        return "redis://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def _collect(self):
        for n in self.running():
            for line in cli_at(n.port, "INFO", "errorstats").splitlines():
                if line.startswith("errorstat_") and ":count=" in line:
                    name, count = line[len("errorstat_"):].split(":count=", 1)
                    self.errors[name] = self.errors.get(name, 0) + int(count.strip())

    def kill(self):
        self._collect()
        for n in self.nodes:
            n.kill()

    def stop(self):
        self.kill()
        assert "CROSSSLOT" not in self.errors, f"Redis refused cross-slot commands: {self.errors}"

    def __repr__(self) -> str:
        return f"RedisClusterServers(ports={[n.port for n in self.nodes]})"


class RedisSentinelServers:
    """A master, two replicas and three Redis Sentinels watching it as `relay` (quorum 2,
    down-after 1 s): ``kill_master()`` SIGKILLs the master, and a replica is promoted."""

    kind = "sentinel"
    DOWN_AFTER_MS = 1000

    def __init__(self, workdir):
        self.workdir = Path(workdir)
        self.master = RedisServer(free_port(), self.workdir / "master")
        self.replicas = [RedisServer(free_port(), self.workdir / f"replica-{i}") for i in range(2)]
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.sentinels: list[subprocess.Popen] = []

    @property
    def servers(self) -> list[RedisServer]:
        return [self.master, *self.replicas]

    def start(self) -> "RedisSentinelServers":
        for server in self.servers:
            server.workdir.mkdir(parents=True, exist_ok=True)
        self.master.start()
        for replica in self.replicas:
            base = RedisServer.server_args(replica)
            replica.server_args = (lambda base=base: [*base, "--replicaof", "127.0.0.1", str(self.master.port)])
            replica.start()
        binary = _binary("redis-sentinel")
        for port in self.sentinel_ports:
            conf = self.workdir / f"sentinel-{port}.conf"
            conf.write_text(f"port {port}\nbind 127.0.0.1\ndir {self.workdir}\n"
                            f"sentinel monitor relay 127.0.0.1 {self.master.port} 2\n"
                            f"sentinel down-after-milliseconds relay {self.DOWN_AFTER_MS}\n"
                            "sentinel failover-timeout relay 5000\nsentinel parallel-syncs relay 1\n")
            self.sentinels.append(subprocess.Popen([binary, str(conf)], stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + 30
        while not all(str(self.replicas[-1].port) in cli_at(p, "SENTINEL", "replicas", "relay") for p in self.sentinel_ports):
            assert time.monotonic() < deadline, "the sentinels did not see the replicas"
            time.sleep(0.05)
        return self

    def current_master_port(self) -> int | None:
        lines = cli_at(self.sentinel_ports[0], "SENTINEL", "get-master-addr-by-name", "relay").split()
        return int(lines[-1]) if lines and lines[-1].isdigit() else None

    def kill_master(self) -> RedisServer:
        port = self.current_master_port()
        victim = next(s for s in self.servers if s.port == port)
        victim.kill()
        return victim

    def node_port(self, key: str | None = None) -> int:
        port = self.current_master_port()
        assert port, "the sentinels name no master"
        return port

    def cli(self, *args, key: str | None = None) -> str:
        out = subprocess.run([_binary("redis-cli"), "-h", "127.0.0.1", "-p", str(self.node_port(key)), *map(str, args)],
                             capture_output=True, text=True, timeout=10)
        assert out.returncode == 0, f"redis-cli {args}: {out.stderr}"
        return out.stdout

    @property
    def url(self) -> str:
        return "redis+sentinel://" + ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports) + "/relay"

    def kill(self):
        for p in self.sentinels:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        self.sentinels = []
        for server in self.servers:
            server.kill()

    def stop(self):
        self.kill()

    def __repr__(self) -> str:
        return f"RedisSentinelServers(master={self.master.port}, sentinels={self.sentinel_ports})"


def make_redis(kind: str, workdir, port: int | None = None) -> RedisServer:
    """A server of `kind` (not started), its files in `workdir`."""
    Path(workdir).mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    if kind == "single":
        return RedisServer(port, workdir)
    if kind == "cluster1":
        return ClusterModeRedis(port, workdir)
    if kind == "cluster3":
        return RedisClusterServers(workdir)
    if kind == "sentinel":
        return RedisSentinelServers(workdir)
    raise ValueError(f"unknown Redis kind {kind!r}")


def cross_slot_errors(*relays) -> list[str]:
    """Lines of the relays' logs where Redis refused a command for its slots."""
    return [line for r in relays for line in r.log().splitlines() if any(m in line for m in CROSS_SLOT_MARKERS)]


def assert_no_cross_slot(redis: RedisServer, *relays):
    """No relay logged a cross-slot refusal (each kind; a plain Redis never refuses one)."""
    bad = cross_slot_errors(*relays)
    assert not bad, f"Redis ({redis.kind}) refused cross-slot commands:\n" + "\n".join(bad[:20])


@pytest.fixture(params=KINDS)
def redis_kind(request) -> str:
    """Which Redis the test runs against: each test that takes it runs once per kind."""
    return request.param


@pytest.fixture
def redis_server(redis_kind, tmp_path):
    """A started Redis of `redis_kind`; stopped (and checked) at the end of the test."""
    server = make_redis(redis_kind, tmp_path / f"redis-{redis_kind}").start()
    try:
        yield server
    finally:
        server.stop()
