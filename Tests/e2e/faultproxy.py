"""A fault-injecting TCP proxy the tests own (issue #31): the kernel here has no `netem`, so delay
and loss on a link come from this proxy.

It runs on an asyncio loop of its own, in a thread of the test process (`FaultProxy(...).start()`),
and is controlled in-process: `proxy.set(mode, direction=...)` from any thread. Each accepted
connection opens one upstream connection; bytes go through two pipes, `up` (client → upstream)
and `down` (upstream → client), each with its own mode:

- `pass`              forward as read;
- `blackhole`         keep the connections open, forward nothing: read and discard (a dead link,
                      the peer's TCP sees its segments acknowledged and nothing more). A byte
                      stream that lost bytes can never be resumed (TCP would not either: it
                      retransmits or gives up), so a connection that discarded anything is
                      aborted (RST) when its direction leaves `blackhole`: what a peer sees
                      when its TCP finally times out. New connections during a blackhole are
                      accepted and held, and aborted the same way;
- `delay(ms)`         each chunk forwarded `ms` after it was read, order kept;
- `stall(fraction)`   a `fraction` of the chunks is held back `stall_ms` (default a random
                      200–600 ms, a retransmission timeout) before it is forwarded, and the chunks
                      behind it wait (order kept): the effect of lost-and-retransmitted segments;
- `reset`             (both directions) every connection is aborted with an RST and new ones are
                      refused (accepted and reset at once) until the mode changes.

Memory is bounded: each pipe holds at most `max_buffered` bytes (default 1 MiB) between reading
and writing; beyond, it stops reading, so the sender's TCP window closes (backpressure). A
blackholed pipe reads and discards, holding nothing.
"""

from __future__ import annotations

import asyncio
import collections
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

DIRECTIONS = ("up", "down")
READ_SIZE = 16 * 1024


@dataclass(frozen=True)
class Mode:
    kind: str  # pass | blackhole | delay | stall | reset
    delay_ms: float = 0.0
    fraction: float = 0.0
    stall_ms: tuple[float, float] = (200.0, 600.0)

    def __str__(self) -> str:
        if self.kind == "delay":
            return f"delay({self.delay_ms:g})"
        if self.kind == "stall":
            return f"stall({self.fraction:g})"
        return self.kind


PASS = Mode("pass")
BLACKHOLE = Mode("blackhole")
RESET = Mode("reset")


def delay(ms: float) -> Mode:
    return Mode("delay", delay_ms=float(ms))


def stall(fraction: float, stall_ms: tuple[float, float] = (200.0, 600.0)) -> Mode:
    assert 0.0 <= fraction <= 1.0
    return Mode("stall", fraction=float(fraction), stall_ms=stall_ms)


def _abort(writer: asyncio.StreamWriter | None) -> None:
    """Closes with an RST (SO_LINGER 0), not a FIN."""
    if writer is None:
        return
    try:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort()


@dataclass
class Stats:
    connections: int = 0
    refused: int = 0
    forwarded: dict = field(default_factory=lambda: {"up": 0, "down": 0})
    discarded: dict = field(default_factory=lambda: {"up": 0, "down": 0})
    stalled_chunks: dict = field(default_factory=lambda: {"up": 0, "down": 0})
    max_buffered: dict = field(default_factory=lambda: {"up": 0, "down": 0})
    aborted: int = 0


class _Pipe:
    """One direction of one connection: a reader task fills a bounded queue of
    (release time, chunk); a writer task forwards each chunk at its release time, in order."""

    def __init__(self, proxy: "FaultProxy", conn: "_Conn", direction: str,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.proxy, self.conn, self.direction = proxy, conn, direction
        self.reader, self.writer = reader, writer
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self.buffered = 0
        self.room = asyncio.Event()  # set when the queue has room
        self.room.set()
        self.ready = asyncio.Event()  # set when the queue is not empty (or EOF)
        self.eof = False
        self.discarded = False  # bytes were dropped: this stream can never be resumed
        self.last_release = 0.0

    async def read_loop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                await self.room.wait()
                chunk = await self.reader.read(READ_SIZE)
                if not chunk:
                    break
                mode = self.proxy.mode(self.direction)
                stats = self.proxy.stats
                if mode.kind in ("blackhole", "reset"):
                    self.discarded = True
                    stats.discarded[self.direction] += len(chunk)
                    continue
                now = loop.time()
                release = now
                if mode.kind == "delay":
                    release = now + mode.delay_ms / 1000
                elif mode.kind == "stall" and self.proxy.rng.random() < mode.fraction:
                    release = now + self.proxy.rng.uniform(*mode.stall_ms) / 1000
                    stats.stalled_chunks[self.direction] += 1
                # Order kept: nothing leaves before the chunk read before it.
                release = max(release, self.last_release)
                self.last_release = release
                self.queue.append((release, chunk))
                self.buffered += len(chunk)
                stats.max_buffered[self.direction] = max(stats.max_buffered[self.direction], self.buffered)
                if self.buffered >= self.proxy.max_buffered:
                    self.room.clear()
                self.ready.set()
        except (ConnectionError, OSError):
            pass
        finally:
            self.eof = True
            self.ready.set()

    async def write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                if not self.queue:
                    if self.eof:
                        break
                    self.ready.clear()
                    await self.ready.wait()
                    continue
                release, chunk = self.queue[0]
                wait = release - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                self.queue.popleft()
                self.buffered -= len(chunk)
                if self.buffered < self.proxy.max_buffered:
                    self.room.set()
                self.writer.write(chunk)
                await self.writer.drain()
                self.proxy.stats.forwarded[self.direction] += len(chunk)
            if self.writer.can_write_eof():
                self.writer.write_eof()
        except (ConnectionError, OSError):
            pass


class _Conn:
    def __init__(self, proxy: "FaultProxy"):
        self.proxy = proxy
        self.client_writer: asyncio.StreamWriter | None = None
        self.upstream_writer: asyncio.StreamWriter | None = None
        self.pipes: dict[str, _Pipe] = {}
        self.tasks: list[asyncio.Task] = []
        self.held = False  # accepted during a blackhole: no upstream yet, everything discarded

    def abort(self) -> None:
        _abort(self.client_writer)
        _abort(self.upstream_writer)
        for t in self.tasks:
            t.cancel()


class FaultProxy:
    """`FaultProxy(listen_host, upstream_host, upstream_port).start()`; `.port` is where it
    listens. `set(mode, direction="both")` changes a direction's mode (thread-safe);
    `stop()` closes everything."""

    def __init__(self, listen_host: str, upstream_host: str, upstream_port: int, *, listen_port: int = 0,
                 max_buffered: int = 1 << 20, seed: int | None = None):
        self.listen_host, self.listen_port = listen_host, listen_port
        self.upstream = (upstream_host, upstream_port)
        self.max_buffered = max_buffered
        self.rng = random.Random(seed)
        self.stats = Stats()
        self._modes = {"up": PASS, "down": PASS}
        self._conns: set[_Conn] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self.port: int | None = None
        self.log: list[tuple[float, str]] = []  # (time.time(), what): mode changes

    # ---- control (any thread)

    def mode(self, direction: str) -> Mode:
        return self._modes[direction]

    def set(self, mode: Mode | str, direction: str = "both") -> None:
        if isinstance(mode, str):
            mode = {"pass": PASS, "blackhole": BLACKHOLE, "reset": RESET}[mode]
        assert direction in ("both", *DIRECTIONS), direction
        dirs = DIRECTIONS if direction == "both" or mode.kind == "reset" else (direction,)
        self._call(self._apply, mode, dirs)

    def _apply(self, mode: Mode, dirs) -> None:
        before = dict(self._modes)
        for d in dirs:
            self._modes[d] = mode
        self.log.append((time.time(), f"{'/'.join(dirs)} -> {mode}"))
        if mode.kind == "reset":
            for c in list(self._conns):
                self._drop(c)
            return
        # Leaving a blackhole: streams that lost bytes cannot go on.
        for d in dirs:
            if before[d].kind in ("blackhole", "reset") and mode.kind not in ("blackhole", "reset"):
                for c in list(self._conns):
                    if c.held or (d in c.pipes and c.pipes[d].discarded):
                        self._drop(c)

    def _drop(self, conn: _Conn) -> None:
        self._conns.discard(conn)
        self.stats.aborted += 1
        conn.abort()

    def connections(self) -> int:
        return len(self._conns)

    def _call(self, fn, *args):
        loop = self._loop
        if loop is None:
            return fn(*args)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            return fn(*args)
        done = threading.Event()
        box: list = []

        def run():
            try:
                box.append(fn(*args))
            finally:
                done.set()

        loop.call_soon_threadsafe(run)
        assert done.wait(10), "fault proxy loop did not answer"
        return box[0] if box else None

    # ---- lifecycle

    def start(self) -> "FaultProxy":
        """Runs the proxy on a loop of its own in a daemon thread; returns once it listens."""
        started = threading.Event()
        errors: list[BaseException] = []

        def main():
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                loop.run_until_complete(self._listen())
            except BaseException as exc:  # noqa: BLE001 - reported to start()
                errors.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()
            # stop(): close what is left.
            for c in list(self._conns):
                c.abort()
            pending = [t for t in asyncio.all_tasks(loop)]
            for t in pending:
                t.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

        self._thread = threading.Thread(target=main, name=f"faultproxy-{self.listen_host}", daemon=True)
        self._thread.start()
        assert started.wait(10), "fault proxy did not start"
        if errors:
            raise errors[0]
        return self

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.listen_host, self.listen_port,
                                                  limit=READ_SIZE * 4)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        loop = self._loop
        if loop is None or self._thread is None:
            return

        def close():
            if self._server is not None:
                self._server.close()
            for c in list(self._conns):
                self._drop(c)
            loop.stop()

        loop.call_soon_threadsafe(close)
        self._thread.join(10)
        self._loop = None

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- connections

    async def _handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        if "reset" in (self._modes["up"].kind, self._modes["down"].kind):
            self.stats.refused += 1
            _abort(client_writer)
            return
        conn = _Conn(self)
        conn.client_writer = client_writer
        self._conns.add(conn)
        try:
            if self._modes["up"].kind == "blackhole":
                # A dead link: the client's connect "succeeds" (the proxy accepted it) and
                # nothing it sends goes anywhere.
                conn.held = True
                while conn in self._conns:
                    chunk = await client_reader.read(READ_SIZE)
                    if not chunk:
                        break
                    self.stats.discarded["up"] += len(chunk)
                if conn in self._conns:
                    self._drop(conn)
                return
            try:
                up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*self.upstream, limit=READ_SIZE * 4), 5)
            except (OSError, asyncio.TimeoutError):
                self._drop(conn)
                return
            conn.upstream_writer = up_writer
            if conn not in self._conns:  # reset meanwhile
                _abort(up_writer)
                return
            up = _Pipe(self, conn, "up", client_reader, up_writer)
            down = _Pipe(self, conn, "down", up_reader, client_writer)
            conn.pipes = {"up": up, "down": down}
            conn.tasks = [asyncio.create_task(p.read_loop()) for p in (up, down)] + \
                         [asyncio.create_task(p.write_loop()) for p in (up, down)]
            await asyncio.gather(*conn.tasks, return_exceptions=True)
        finally:
            if conn in self._conns:
                self._conns.discard(conn)
                for w in (conn.client_writer, conn.upstream_writer):
                    if w is not None:
                        w.close()
