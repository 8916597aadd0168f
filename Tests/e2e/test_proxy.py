"""The real client address behind a load balancer.

A real HAProxy (Debian's binary) runs with a config derived from deploy/haproxy.cfg (same
backend and `send-proxy-v2` server lines; only addresses, ports and limits rewritten so that it
runs unprivileged on loopback) in front of a relay started with `--proxy-protocol
--trusted-proxies 127.0.0.1`. Clients connect through it from different loopback source
addresses (on Linux all of 127.0.0.0/8 is loopback), and the relay's per-IP cap and
failed-authentication budget apply to each of them, not to HAProxy.

Also: a connection without a PROXY header, or from an untrusted peer with a forged one, is
closed; `X-Forwarded-For` is believed from a trusted proxy and ignored from anyone else.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import aiohttp
import pytest
import socketio
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

from helpers import ADMIN_KEY, REPO_ROOT, TIMEOUT, async_test, make_jwt, mint_token, parse_connect_error
# Below the ephemeral range and never twice: a port picked here is not taken by an outgoing
# connection before the server binds it.
from redis_servers import free_port

HAPROXY_CFG = REPO_ROOT / "deploy" / "haproxy.cfg"
A = "127.0.0.2"
B = "127.0.0.3"
STRANGER = "127.0.0.5"  # not a trusted proxy
AUTH_BURST = 10  # failed authentications per client IP before auth_rate_limited (PROTOCOL §2)


def derived_haproxy_config(listen_port: int, relay_port: int) -> str:
    """deploy/haproxy.cfg with addresses, ports and limits rewritten for loopback. Every
    rewrite must apply, so a changed deploy file fails here instead of being tested stale."""
    text = HAPROXY_CFG.read_text()
    rewrites = [
        # One million connections needs a raised fd limit (root); a test needs a few.
        (r"maxconn 1000000", "maxconn 1000"),
        (r"maxconn 500000", "maxconn 500"),
        # Docker's resolver: the test uses IP addresses.
        (r"\nresolvers docker\n(?:    [^\n]*\n)+", "\n"),
        (r" resolvers docker", ""),
        (r"bind \*:8080", f"bind 127.0.0.1:{listen_port}"),
        (r"server relay1 relay1:8080", f"server relay1 127.0.0.1:{relay_port}"),
        (r"\n    server relay2 relay2:8080", ""),
    ]
    for pattern, replacement in rewrites:
        text, n = re.subn(pattern, replacement, text)
        assert n >= 1, f"deploy/haproxy.cfg no longer has {pattern!r}"
    assert re.search(r"^\s*default-server send-proxy-v2 ", text, re.M), "relays must get a PROXY v2 header"
    return text


class HAProxy:
    """Debian's haproxy in the foreground, stopped by its pid."""

    def __init__(self, workdir: Path, relay_port: int):
        self.port = free_port()
        self.config = workdir / "haproxy.cfg"
        self.config.write_text(derived_haproxy_config(self.port, relay_port))
        self.proc: subprocess.Popen | None = None
        self.lines: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/socket.io/?EIO=4&transport=websocket"

    def start(self) -> "HAProxy":
        binary = shutil.which("haproxy")
        assert binary, "haproxy is not installed (CI installs Debian's haproxy)"
        check = subprocess.run([binary, "-c", "-f", str(self.config)], capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stdout + check.stderr
        self.proc = subprocess.Popen([binary, "-db", "-f", str(self.config)], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

        def drain():
            assert self.proc is not None and self.proc.stdout is not None
            for raw in self.proc.stdout:
                self.lines.append(raw.decode("utf-8", "replace"))

        threading.Thread(target=drain, name=f"haproxy-{self.proc.pid}", daemon=True).start()
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


async def eventually(check, timeout: float = TIMEOUT, what: str = "condition"):
    """Re-runs the async predicate `check` (a real round trip) until it holds, bounded."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if await check():
            return
        assert loop.time() < deadline, f"{what} did not hold within {timeout} s"
        await asyncio.sleep(0.05)


async def get(base: str, path: str, *, source: str = "127.0.0.1", headers: dict | None = None) -> tuple[int, object]:
    """GET from `source`; (status, JSON or text), or (0, error) when the connection failed."""
    connector = aiohttp.TCPConnector(local_addr=(source, 0), force_close=True)
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    try:
        async with aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False) as session:
            async with session.get(base + path, headers=headers or {}) as resp:
                text = await resp.text()
                try:
                    return resp.status, json.loads(text)
                except ValueError:
                    return resp.status, text
    except aiohttp.ClientError as e:
        return 0, e


async def admin_connections(base: str, user: str) -> list[dict]:
    status, body = await get(base, f"/admin/v1/users/{user}/connections", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    assert status == 200, (status, body)
    return body["connections"]


class Socket:
    """A raw Engine.IO WebSocket opened from a chosen source address."""

    def __init__(self, ws):
        self.ws = ws

    @classmethod
    async def open(cls, ws_url: str, source: str, headers: dict | None = None) -> "Socket":
        ws = await ws_connect(ws_url, local_addr=(source, 0), compression=None, proxy=None, open_timeout=TIMEOUT,
                              ping_interval=None, close_timeout=TIMEOUT, additional_headers=headers)
        first = await asyncio.wait_for(ws.recv(), TIMEOUT)
        assert isinstance(first, str) and first.startswith("0{"), first
        return cls(ws)

    async def connect(self, token: str) -> str:
        """Sends CONNECT with `token`; the answer packet (pings skipped)."""
        await self.ws.send("40" + json.dumps({"token": token}))
        while True:
            msg = await asyncio.wait_for(self.ws.recv(), TIMEOUT)
            if msg != "2":
                return msg

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.ws.close(), TIMEOUT)
        except Exception:  # noqa: BLE001 - the relay may have closed it first
            pass


async def refused_status(ws_url: str, source: str, headers: dict | None = None) -> tuple[int, bytes]:
    """Opens a WebSocket that must be refused; (HTTP status, body)."""
    try:
        ws = await ws_connect(ws_url, local_addr=(source, 0), compression=None, proxy=None, open_timeout=TIMEOUT,
                              additional_headers=headers)
    except InvalidStatus as e:
        return e.response.status_code, bytes(e.response.body or b"")
    await ws.close()
    raise AssertionError(f"upgrade from {source} {headers or ''} was accepted")


def forged_token() -> str:
    """A well-formed token signed with the wrong secret: `token_bad_signature`."""
    # A fixed `exp`: the same token every time, as one client retrying it (the budget is per
    # address and token).
    return make_jwt({"sub": "mallory", "exp": 4_000_000_000}, sign_with="not-the-relay-secret-0123456789abcdef")


async def failed_auth_codes(ws_url: str, source: str, n: int, headers: dict | None = None) -> list[str]:
    codes = []
    for _ in range(n):
        sock = await Socket.open(ws_url, source, headers)
        reply = await sock.connect(forged_token())
        codes.append(parse_connect_error(reply)[1]["data"]["code"])
        await sock.close()
    return codes


@pytest.fixture
def behind_haproxy(start_relay, tmp_path):
    """(relay, haproxy): a relay that requires PROXY headers from 127.0.0.1, with a cap of 3
    connections per client IP, behind the deploy HAProxy config."""
    relay = start_relay("--proxy-protocol", "--trusted-proxies", "127.0.0.1", "--max-connections-per-ip", "3")
    lb = HAProxy(tmp_path, relay.port).start()
    try:
        async def ready():
            status, _ = await get(lb.url, "/healthz")
            return status == 200

        asyncio.run(eventually(ready, what="HAProxy forwarding to the relay"))
        yield relay, lb
    finally:
        lb.stop()


@async_test
async def test_auth_failure_budget_is_per_real_client_behind_haproxy(behind_haproxy):
    relay, lb = behind_haproxy
    codes = await failed_auth_codes(lb.ws_url, A, AUTH_BURST + 1)
    assert codes == ["token_bad_signature"] * AUTH_BURST + ["auth_rate_limited"], codes
    # A's bad token is refused unchecked now; a valid token from A is still checked (another
    # client at the same address)…
    sock = await Socket.open(lb.ws_url, A)
    assert parse_connect_error(await sock.connect(forged_token()))[1]["data"]["code"] == "auth_rate_limited"
    await sock.close()
    sock = await Socket.open(lb.ws_url, A)
    assert (await sock.connect(mint_token("alice"))).startswith("40{")
    await sock.close()
    # …and B, through the same HAProxy, has a budget of its own for the same bad token.
    assert await failed_auth_codes(lb.ws_url, B, 1) == ["token_bad_signature"]
    # B connects with a real Socket.IO client.
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=(B, 0)), trust_env=False)
    bob = socketio.AsyncClient(reconnection=False, handle_sigint=False, http_session=session)
    try:
        await bob.connect(lb.url, transports=["websocket"], auth={"token": mint_token("bob")}, wait_timeout=TIMEOUT)
        assert bob.connected
        # The relay knows B by its own address (admin API), not HAProxy's.
        assert [c["ip"] for c in await admin_connections(lb.url, "bob")] == [B]
    finally:
        await bob.disconnect()
        await session.close()
    assert re.search(r"ip=127\.0\.0\.2 .*auth failed", relay.log()), "logs show the real client"


@async_test
async def test_per_ip_cap_is_per_real_client_behind_haproxy(behind_haproxy):
    relay, lb = behind_haproxy
    a_sockets = [await Socket.open(lb.ws_url, A) for _ in range(3)]
    status, body = await refused_status(lb.ws_url, A)
    assert status == 503 and b"too_many_connections" in body, (status, body)
    b_socket = await Socket.open(lb.ws_url, B)  # B's first: its own budget
    await b_socket.close()
    # A closing a socket frees its slot.
    await a_sockets.pop().close()

    async def a_admitted():
        try:
            a_sockets.append(await Socket.open(lb.ws_url, A))
            return True
        except InvalidStatus:
            return False

    await eventually(a_admitted, what="A's freed slot")
    for s in a_sockets:
        await s.close()


@async_test
async def test_connections_without_a_trusted_proxy_header_are_closed(behind_haproxy):
    relay, lb = behind_haproxy

    async def raw(source: str, payload: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port, local_addr=(source, 0))
        try:
            writer.write(payload)
            await writer.drain()
            # b"" when the relay closes; closing with our bytes unread makes the kernel reset.
            return await asyncio.wait_for(reader.read(), TIMEOUT)
        except ConnectionResetError:
            return b""
        finally:
            writer.close()

    request = b"GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n"
    # Direct, without a header (from the trusted address itself): closed, not answered.
    assert await raw("127.0.0.1", request) == b""
    # An untrusted peer forging a header naming someone else: closed.
    forged = f"PROXY TCP4 198.51.100.1 127.0.0.1 4711 {relay.port}\r\n".encode()
    assert await raw(STRANGER, forged + request) == b""
    # A trusted peer with a v1 header (what `curl --haproxy-protocol` sends): served.
    v1 = f"PROXY TCP4 198.51.100.1 127.0.0.1 4711 {relay.port}\r\n".encode()
    answer = await raw("127.0.0.1", v1 + b"GET /healthz HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200"), answer
    # The relay still serves through HAProxy.
    assert (await get(lb.url, "/healthz"))[0] == 200


@async_test
async def test_x_forwarded_for_is_believed_only_from_trusted_proxies(start_relay):
    relay = start_relay("--trusted-proxies", "127.0.0.1", "--max-connections-per-ip", "1")
    url = relay.ws_url
    # From the trusted proxy: each forwarded client has its own cap of 1.
    first = await Socket.open(url, "127.0.0.1", {"X-Forwarded-For": "198.51.100.1"})
    second = await Socket.open(url, "127.0.0.1", {"X-Forwarded-For": "6.6.6.6, 198.51.100.2"})
    status, body = await refused_status(url, "127.0.0.1", {"X-Forwarded-For": "198.51.100.1"})
    assert status == 503 and b"too_many_connections" in body, (status, body)
    # From anyone else the header is ignored: both count as 127.0.0.5.
    third = await Socket.open(url, STRANGER, {"X-Forwarded-For": "198.51.100.3"})
    status, body = await refused_status(url, STRANGER, {"X-Forwarded-For": "198.51.100.4"})
    assert status == 503 and b"too_many_connections" in body, (status, body)
    for s in (first, second, third):
        await s.close()


@async_test
async def test_x_forwarded_for_auth_budget_and_admin_view(start_relay):
    relay = start_relay("--trusted-proxies", "127.0.0.1")
    url = relay.ws_url
    codes = await failed_auth_codes(url, "127.0.0.1", AUTH_BURST + 1, {"X-Forwarded-For": "198.51.100.7"})
    assert codes[-1] == "auth_rate_limited" and codes[:-1] == ["token_bad_signature"] * AUTH_BURST, codes
    # Another client behind the same proxy is not locked out, and is shown as itself.
    ok = await Socket.open(url, "127.0.0.1", {"X-Forwarded-For": "198.51.100.8"})
    assert (await ok.connect(mint_token("xena"))).startswith("40{")
    assert [c["ip"] for c in await admin_connections(relay.url, "xena")] == ["198.51.100.8"]
    # A stranger cannot borrow the locked-out client's budget nor pose as someone else.
    forger = await Socket.open(url, STRANGER, {"X-Forwarded-For": "198.51.100.9"})
    assert (await forger.connect(mint_token("fred"))).startswith("40{")
    assert [c["ip"] for c in await admin_connections(relay.url, "fred")] == [STRANGER]
    for s in (ok, forger):
        await s.close()
