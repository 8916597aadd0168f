"""Fixtures of the end-to-end suite: real relay processes on 127.0.0.1.

Each relay is started with ``--port 0``; its port is read from the log line
``relay listening on 127.0.0.1:PORT``. Secrets go in as flags. Every process a fixture
starts is stopped at teardown (SIGTERM, then SIGKILL after a bounded wait), by its pid.

A test module may set ``RELAY_ARGS = [...]`` for extra flags of its module-scoped ``relay``;
tests that need a relay of their own use the ``start_relay(*flags)`` factory.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path

import pytest

from helpers import ADMIN_KEY, API_KEY, JWT_SECRET, relay_binary

# Never send the suite's traffic through a proxy: everything goes to 127.0.0.1.
os.environ["NO_PROXY"] = "127.0.0.1,localhost"
os.environ["no_proxy"] = "127.0.0.1,localhost"

STARTUP_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


class RelayProcess:
    """One relay process, its port and its log."""

    def __init__(self, workdir: Path, extra_args: list[str], host: str = "127.0.0.1"):
        self.workdir = workdir
        self.host = host
        self._listening_line = re.compile(rf"relay listening on {re.escape(host)}:(\d+)")
        self.extra_args = [str(a) for a in extra_args]
        self.log_path = workdir / "relay.log"
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._listening = threading.Event()
        self._reader: threading.Thread | None = None

    @property
    def args(self) -> list[str]:
        return [
            relay_binary(),
            "--host", self.host,
            "--port", "0",
            "--jwt-secret", JWT_SECRET,
            "--api-key", API_KEY,
            "--admin-key", ADMIN_KEY,
            "--db", str(self.workdir / "relay.sqlite"),
            # Presence ends with the connection unless a test sets the grace (its own tests,
            # test_presence_grace.py, run on the default): a disconnect's leave and offline
            # webhook are then seen at once rather than `presence-grace-ms` (5 s) later.
            *([] if "--presence-grace-ms" in self.extra_args else ["--presence-grace-ms", "0"]),
            # Two event loops unless a test sets them: the default on a 2-core machine is one,
            # and the hand-off between loops (a room's members on both) must stay under test.
            *([] if "--threads" in self.extra_args else ["--threads", "2"]),
            *self.extra_args,
        ]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.port}/socket.io/?EIO=4&transport=websocket"

    def log(self) -> str:
        with self._lock:
            return "".join(self._lines)

    def _read_output(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with open(self.log_path, "w", encoding="utf-8") as f:
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", "replace")
                f.write(line)
                f.flush()
                with self._lock:
                    self._lines.append(line)
                if self.port is None:
                    m = self._listening_line.search(line)
                    if m:
                        self.port = int(m.group(1))
                        self._listening.set()
        # End of output: the process exited (or closed its output). Wake up start().
        self._listening.set()

    def start(self) -> "RelayProcess":
        binary = relay_binary()
        if not os.access(binary, os.X_OK):
            pytest.fail(
                f"relay binary not found at {binary}: build it with `swift build` "
                "(or run scripts/test.sh), or point RELAY_BIN at it", pytrace=False)
        self.proc = self._spawn(self.args)
        self._reader = threading.Thread(target=self._read_output, name=f"relay-log-{self.proc.pid}", daemon=True)
        self._reader.start()
        if not self._listening.wait(STARTUP_TIMEOUT) or self.port is None:
            self.stop()
            pytest.fail(
                f"relay did not report `relay listening on {self.host}:PORT` within {STARTUP_TIMEOUT:.0f} s "
                f"(exit code {self.proc.returncode}); command: {' '.join(self.args)}\n--- relay log ---\n{self.log()}",
                pytrace=False)
        return self

    def _spawn(self, args: list[str]) -> subprocess.Popen:
        """Starts the process (a subclass may start it elsewhere, e.g. in a network namespace)."""
        return subprocess.Popen(args, cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT)
        if self._reader is not None:
            self._reader.join(STOP_TIMEOUT)

    def __repr__(self) -> str:
        return f"RelayProcess(port={self.port}, args={self.extra_args})"


def _start(tmp_path_factory: pytest.TempPathFactory, extra_args, registry: list) -> RelayProcess:
    relay = RelayProcess(tmp_path_factory.mktemp("relay"), list(extra_args))
    registry.append(relay)
    relay.start()
    return relay


# Relays in use by the running test, so that a failure can show their logs.
_active_relays: list[RelayProcess] = []


@pytest.fixture(scope="module")
def relay(request, tmp_path_factory):
    """A relay shared by a module's tests, with the module's `RELAY_ARGS`."""
    started: list[RelayProcess] = []
    try:
        yield _start(tmp_path_factory, getattr(request.module, "RELAY_ARGS", []), started)
    finally:
        for r in started:
            r.stop()


@pytest.fixture
def start_relay(tmp_path_factory):
    """Factory: `start_relay("--typing-window-ms", "1000")` starts a relay for this test only."""
    started: list[RelayProcess] = []

    def factory(*extra_args) -> RelayProcess:
        relay = _start(tmp_path_factory, extra_args, started)
        _active_relays.append(relay)
        return relay

    try:
        yield factory
    finally:
        for r in started:
            r.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failure, attach the tail of every relay log the test used."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        relays = [v for v in item.funcargs.values() if isinstance(v, RelayProcess)] + list(_active_relays)
        for r in relays:
            tail = "".join(r.log().splitlines(keepends=True)[-80:])
            report.sections.append((f"relay log (port {r.port}, args {r.extra_args})", tail))
    if report.when == "teardown":
        _active_relays.clear()
