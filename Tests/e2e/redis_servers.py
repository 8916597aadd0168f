"""The Redis servers of the end-to-end suite, on 127.0.0.1, started and stopped by the test
(by pid).

Every kind has one interface: ``url`` (what ``--redis`` takes), ``start()`` (also after a
``kill()``: back on the same port, empty), ``kill()`` (SIGKILL, like a crash), ``stop()`` (the
end of the test: killed, then checked) and ``cli(*args, key=...)`` (redis-cli against the node
that owns ``key`` — a key or a sharded channel — or any node without one).

Kinds (``KINDS``, the ``redis_kind`` fixture's params):

- ``single``: one plain redis-server (``RedisServer``).
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

import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

KINDS = ["single", "cluster1"]
START_TIMEOUT = 15.0

# Redis's answers when a script's keys (or the keys it touches) are not in one slot.
CROSS_SLOT_MARKERS = ("CROSSSLOT", "do not hash to the same slot", "non local key")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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

    def start(self) -> "RedisServer":
        self.proc = subprocess.Popen(
            [_binary("redis-server"), *self.server_args()],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
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


def make_redis(kind: str, workdir, port: int | None = None) -> RedisServer:
    """A server of `kind` (not started), its files in `workdir`."""
    Path(workdir).mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    if kind == "single":
        return RedisServer(port, workdir)
    if kind == "cluster1":
        return ClusterModeRedis(port, workdir)
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
