"""permessage-deflate (RFC 7692) and TLS, with clients nobody here wrote: python `websockets`
(its own deflate implementation) and python-socketio on aiohttp (zlib through aiohttp)."""

from __future__ import annotations

import json
import ssl
import subprocess

import pytest
import socketio
from websockets.asyncio.client import connect as ws_connect

from helpers import ROOM, TIMEOUT, Clients, RawSocket, async_test, mint_token

BIG = "x" * 3000 + "".join(chr(0x41 + i % 26) for i in range(3000))


async def socketio_ws(relay, token: str, *, compression: str | None, scheme: str = "ws", ssl_context=None):
    """A Socket.IO session over a raw `websockets` connection (deflate on or off)."""
    url = f"{scheme}://127.0.0.1:{relay.port}/socket.io/?EIO=4&transport=websocket"
    ws = await ws_connect(url, compression=compression, ssl=ssl_context, open_timeout=TIMEOUT, ping_interval=None, max_size=None)
    assert (await ws.recv()).startswith("0{")
    await ws.send("40" + json.dumps({"token": token}))
    assert (await ws.recv()).startswith("40{")
    await ws.send('421["room:join",{"room":"%s"}]' % ROOM)
    assert (await ws.recv()).startswith('431[{"ok":true')
    return ws


@async_test
async def test_websockets_client_negotiates_deflate_and_gets_big_events_intact(relay):
    ws = await socketio_ws(relay, mint_token("dana"), compression="deflate")
    ext = ws.response.headers.get("Sec-WebSocket-Extensions", "")
    assert ext.startswith("permessage-deflate"), ext
    assert "server_no_context_takeover" in ext and "client_no_context_takeover" in ext
    plain = await socketio_ws(relay, mint_token("erin"), compression=None)
    assert plain.response.headers.get("Sec-WebSocket-Extensions") is None
    async with Clients() as c:
        sender = await c.connect(relay, "frank")
        await sender.join()
        # Over the 1 KiB threshold: compressed once for the deflate client, plain for the other.
        await sender.ok("note:share", {"room": ROOM, "body": BIG})
        for sock in (ws, plain):
            while True:
                msg = await sock.recv()
                if msg.startswith('42["note:share"'):
                    break
            payload = json.loads(msg[2:])[1]
            assert payload["body"] == BIG and payload["from"] == "frank"
        # A compressed message from the deflate client is inflated by the relay.
        await ws.send('422["note:share",%s]' % json.dumps({"room": ROOM, "body": BIG}))
        while True:
            msg = await ws.recv()
            if msg.startswith("432"):
                assert '"ok":true' in msg, msg
                break
        got = await sender.expect("note:share", where=lambda d: d.get("from") == "dana")
        assert got["body"] == BIG
    await ws.close()
    await plain.close()


@async_test
async def test_python_socketio_with_and_without_compression(relay):
    async with Clients() as c:
        zipped = c.new("zipped")
        zipped.sio = socketio.AsyncClient(reconnection=False, handle_sigint=False, websocket_extra_options={"compress": 15})
        zipped.sio.on("*", zipped._on_any)
        await zipped.connect(relay, mint_token("gina"))
        await zipped.join()
        plain = await c.connect(relay, "hank")
        await plain.join()
        await plain.ok("note:share", {"room": ROOM, "body": BIG})
        got = await zipped.expect("note:share")
        assert got["body"] == BIG
        await zipped.ok("note:share", {"room": ROOM, "body": BIG[::-1]})
        got = await plain.expect("note:share", where=lambda d: d.get("from") == "gina")
        assert got["body"] == BIG[::-1]


@async_test
async def test_decompression_bomb_is_closed_with_1009(start_relay):
    relay = start_relay("--max-payload", "100000")
    ws = await socketio_ws(relay, mint_token("ivan"), compression="deflate")
    # 5 MB of one letter compresses to a few KB: well under maxPayload on the wire.
    await ws.send('42["note:share",{"room":"%s","body":"%s"}]' % (ROOM, "a" * 5_000_000))
    sock = RawSocket(ws)
    code, _ = await sock.wait_closed()
    assert code == 1009


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60)
    return cert, key


@async_test
async def test_wss_with_a_self_signed_certificate(start_relay, certificate):
    cert, key = certificate
    relay = start_relay("--tls-cert", str(cert), "--tls-key", str(key))
    ctx = ssl.create_default_context(cafile=str(cert))
    ws = await socketio_ws(relay, mint_token("judy"), compression="deflate", scheme="wss", ssl_context=ctx)
    await ws.send('423["presence:list",{"room":"%s"}]' % ROOM)
    reply = await ws.recv()
    assert reply.startswith('433[{"ok":true') and '"judy"' in reply
    await ws.close()
    # python-socketio over https/wss, verifying the certificate.
    sio = socketio.AsyncClient(reconnection=False, handle_sigint=False, websocket_extra_options={"ssl": ctx})
    await sio.connect(f"https://127.0.0.1:{relay.port}", transports=["websocket"], auth={"token": mint_token("kim")}, wait_timeout=TIMEOUT)
    ack = await sio.call("room:join", {"room": ROOM}, timeout=TIMEOUT)
    assert ack["ok"] is True
    await sio.disconnect()
    # Plain ws:// to a TLS port does not get a WebSocket.
    with pytest.raises(Exception):
        await ws_connect(f"ws://127.0.0.1:{relay.port}/socket.io/?EIO=4&transport=websocket", open_timeout=5)
