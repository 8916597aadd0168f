"""The fault-injecting TCP proxy (faultproxy.py) against a local echo server on 127.0.0.1: every
mode, per direction, order and integrity of the bytes, and bounded buffers."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

import faultproxy
from faultproxy import BLACKHOLE, PASS, RESET, FaultProxy, delay, stall
from helpers import run


class EchoServer:
    """Echoes what it reads; `sink=True` reads nothing at all (a stuck peer); `received` counts
    the bytes it got."""

    def __init__(self, sink: bool = False):
        self.sink = sink
        self.received = 0
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader, writer):
        self.writers.append(writer)
        if self.sink:
            await asyncio.sleep(3600)
            return
        try:
            while chunk := await reader.read(65536):
                self.received += len(chunk)
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> "EchoServer":
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc):
        for w in self.writers:
            w.transport.abort()
        self.server.close()


async def connect(proxy: FaultProxy):
    return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", proxy.port), 5)


async def read_exactly(reader, n: int, timeout: float = 10) -> bytes:
    return await asyncio.wait_for(reader.readexactly(n), timeout)


async def nothing_within(reader, seconds: float) -> bool:
    try:
        data = await asyncio.wait_for(reader.read(1), seconds)
    except asyncio.TimeoutError:
        return True
    raise AssertionError(f"read {data!r} through a blackhole")


async def is_reset(reader, timeout: float = 5) -> bool:
    """The connection ends (RST or EOF) within `timeout`."""
    try:
        data = await asyncio.wait_for(reader.read(1), timeout)
    except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
        return True
    return data == b""


def test_pass_keeps_every_byte_in_order():
    async def main():
        async with EchoServer() as echo:
            with FaultProxy("127.0.0.1", "127.0.0.1", echo.port) as proxy:
                r, w = await connect(proxy)
                payload = os.urandom(3 << 20)
                w.write(payload)
                got = await read_exactly(r, len(payload), 20)
                assert got == payload
                # The counters move after each write has drained: poll them, bounded.
                deadline = time.monotonic() + 5
                while proxy.stats.forwarded != {"up": len(payload), "down": len(payload)} and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                assert proxy.stats.forwarded == {"up": len(payload), "down": len(payload)}
                w.close()
    run(main(), 60)


def test_delay_per_direction_and_order():
    async def main():
        async with EchoServer() as echo:
            with FaultProxy("127.0.0.1", "127.0.0.1", echo.port) as proxy:
                r, w = await connect(proxy)
                proxy.set(delay(300), "up")
                t0 = time.monotonic()
                w.write(b"ping")
                assert await read_exactly(r, 4) == b"ping"
                one_way = time.monotonic() - t0
                assert 0.29 <= one_way < 2.0, one_way
                proxy.set(delay(300))  # both directions
                t0 = time.monotonic()
                msgs = [f"<{i}>".encode() for i in range(50)]
                for m in msgs:
                    w.write(m)
                    await w.drain()
                    await asyncio.sleep(0.005)
                got = await read_exactly(r, sum(map(len, msgs)))
                both = time.monotonic() - t0
                assert got == b"".join(msgs), "order kept"
                assert both >= 0.59, both
                proxy.set(PASS)
                t0 = time.monotonic()
                w.write(b"x")
                assert await read_exactly(r, 1) == b"x"
                assert time.monotonic() - t0 < 0.25
                w.close()
    run(main(), 60)


def test_stall_holds_some_chunks_back_in_order():
    async def main():
        async with EchoServer() as echo:
            with FaultProxy("127.0.0.1", "127.0.0.1", echo.port, seed=7) as proxy:
                r, w = await connect(proxy)
                proxy.set(stall(0.3, (100, 200)), "up")
                expected = b""
                t0 = time.monotonic()
                for i in range(60):
                    m = f"[{i:03d}]".encode()
                    expected += m
                    w.write(m)
                    await w.drain()
                    await asyncio.sleep(0.01)  # separate chunks
                got = await read_exactly(r, len(expected), 30)
                elapsed = time.monotonic() - t0
                assert got == expected, "every byte, in order"
                stalled = proxy.stats.stalled_chunks["up"]
                # 30 % of about 60 chunks, give or take what the reads coalesced.
                assert 5 <= stalled <= 40, stalled
                assert elapsed >= 0.6 + 0.1, elapsed
                assert proxy.stats.stalled_chunks["down"] == 0
                w.close()
    run(main(), 60)


def test_blackhole_keeps_connections_open_then_resets_them_on_heal():
    async def main():
        async with EchoServer() as echo:
            with FaultProxy("127.0.0.1", "127.0.0.1", echo.port) as proxy:
                r, w = await connect(proxy)
                w.write(b"a")
                assert await read_exactly(r, 1) == b"a"
                proxy.set(BLACKHOLE)
                w.write(b"lost" * 1000)
                await w.drain()
                assert await nothing_within(r, 0.5)
                assert not r.at_eof() and proxy.connections() == 1, "the connection stays open"
                assert proxy.stats.discarded["up"] == 4000
                # A connection made during the blackhole: accepted, and nothing goes through.
                r2, w2 = await connect(proxy)
                w2.write(b"hello?")
                assert await nothing_within(r2, 0.3)
                assert echo.received == 1, "nothing reached the server"
                proxy.set(PASS)
                # Streams that lost bytes cannot go on: both are reset.
                assert await is_reset(r) and await is_reset(r2)
                r3, w3 = await connect(proxy)
                w3.write(b"back")
                assert await read_exactly(r3, 4) == b"back"
                w3.close()
    run(main(), 60)


def test_blackhole_of_one_direction():
    async def main():
        async with EchoServer() as echo:
            with FaultProxy("127.0.0.1", "127.0.0.1", echo.port) as proxy:
                r, w = await connect(proxy)
                proxy.set(BLACKHOLE, "down")
                w.write(b"12345")
                await w.drain()
                assert await nothing_within(r, 0.5)
                assert echo.received == 5, "the other direction still carries"
                assert proxy.stats.discarded == {"up": 0, "down": 5}
                w.close()
    run(main(), 60)


def test_reset_closes_everything_and_refuses_new_connections():
    async def main():
        async with EchoServer() as echo:
            with FaultProxy("127.0.0.1", "127.0.0.1", echo.port) as proxy:
                conns = [await connect(proxy) for _ in range(3)]
                for r, w in conns:
                    w.write(b"z")
                    assert await read_exactly(r, 1) == b"z"
                proxy.set(RESET)
                for r, _ in conns:
                    assert await is_reset(r)
                assert proxy.connections() == 0
                # Accepted by the kernel, reset by the proxy (the connect may already see it).
                try:
                    r, w = await connect(proxy)
                    assert await is_reset(r)
                except ConnectionResetError:
                    pass
                assert proxy.stats.refused == 1
                proxy.set(PASS)
                r, w = await connect(proxy)
                w.write(b"ok")
                assert await read_exactly(r, 2) == b"ok"
                w.close()
    run(main(), 60)


def test_buffers_are_bounded_with_backpressure():
    """An upstream that reads nothing, and a long delay: the proxy holds at most its cap (plus
    one read), and the writer feels backpressure instead of the proxy's memory growing."""
    cap = 256 * 1024

    async def main():
        for sink, mode in ((True, PASS), (False, delay(5000))):
            async with EchoServer(sink=sink) as echo:
                with FaultProxy("127.0.0.1", "127.0.0.1", echo.port, max_buffered=cap) as proxy:
                    proxy.set(mode, "up")
                    r, w = await connect(proxy)
                    chunk = b"\0" * 65536
                    sent = 0
                    blocked = False
                    deadline = time.monotonic() + 5
                    while time.monotonic() < deadline and sent < (64 << 20):
                        w.write(chunk)
                        try:
                            await asyncio.wait_for(w.drain(), 0.5)
                        except asyncio.TimeoutError:
                            blocked = True
                            break
                        sent += len(chunk)
                    assert blocked, f"the writer never felt backpressure ({sent} bytes sent, mode {mode})"
                    assert proxy.stats.max_buffered["up"] <= cap + faultproxy.READ_SIZE, proxy.stats
                    w.transport.abort()
    run(main(), 60)


def test_modes_parse_and_print():
    assert str(delay(500)) == "delay(500)" and str(stall(0.3)) == "stall(0.3)" and str(BLACKHOLE) == "blackhole"
    with pytest.raises(AssertionError):
        stall(1.5)
