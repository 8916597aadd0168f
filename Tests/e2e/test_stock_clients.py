"""Stock Socket.IO clients as users run them: the official browser client (socket.io-client
4.8.1 in headless Chromium, see browser_client.py) and python-socketio's AsyncClient, with
their **default options** and with each transport forced.

Binary attachments are checked byte for byte, from the browser (an `ArrayBuffer`) and from
python-socketio (`bytes`), over WebSocket and with the default transports (polling carries
them as `b<base64>` until the upgrade).
"""

from __future__ import annotations

import pytest
import socketio

from browser_client import (BinaryNotServed, BrowserPage, b64bytes, browser, page_server,  # noqa: F401 - fixtures
                            raise_if_polling_not_served)
from conftest import RelayProcess
from helpers import ADMIN_KEY, ROOM, TIMEOUT, Client, Clients, async_test, http, mint_token


# Short heartbeats: a client whose close packet is lost (python-engineio over polling, once in a
# CI run) is still noticed well within the tests' 10 s waits.
RELAY_FLAGS = ["--events-per-second", "1000", "--event-burst", "1000", "--ping-interval", "3000", "--ping-timeout", "3000"]


@pytest.fixture(scope="module")
def web_relay(page_server, tmp_path_factory):  # noqa: F811 - the imported fixture
    """A relay that admits the test page's (cross-site) origin, as a deployment admits its app's."""
    relay = RelayProcess(tmp_path_factory.mktemp("relay"), ["--allowed-origins", page_server.origin, *RELAY_FLAGS])
    relay.start()
    try:
        yield relay
    finally:
        relay.stop()


async def sids_of(relay, user: str) -> list[str]:
    status, body = await http(relay, "GET", f"/admin/v1/users/{user}/connections", key=ADMIN_KEY)
    assert status == 200, body
    return sorted(c["sid"] for c in body["connections"])


# --------------------------------------------------------------------------------------------
# The browser client


async def browser_scenario(relay, browser, page_server, opts: dict, transport: str, tag: str) -> None:  # noqa: F811
    """The browser joins a room with a python-socketio member, exchanges reactions both ways
    (with and without acks), stores a durable receipt, ends on `transport`, survives a forced
    transport close (the Manager reconnects by itself) and disconnects cleanly."""
    web_user, py_user = f"web-{tag}", f"py-{tag}"
    page = await BrowserPage.open(browser, page_server)
    try:
        async with Clients() as c:
            bob = await c.connect(relay, py_user)
            await bob.join(ROOM)

            state = await page.connect("web", relay.url, {**opts, "auth": {"token": mint_token(web_user)}})
            # `recovered` stays unset (no pid) for a socket that did not opt in to recovery (PROTOCOL §12).
            assert state["connected"] is True and not state["recovered"], state
            assert isinstance(state["id"], str) and state["id"], state
            assert await sids_of(relay, web_user) == [state["id"]], "socket.id is the relay's sid"
            opened = await page.expect("web", "engine_open")
            first = "websocket" if opts.get("transports") == ["websocket"] else "polling"
            assert opened["data"]["transport"] == first, opened

            joined = await page.ok("web", "room:join", {"room": ROOM})
            assert joined["room"] == ROOM and {"user": web_user, "devices": 1} in joined["presence"], joined
            await bob.expect("presence:join", user=web_user, room=ROOM)

            # python-socketio -> browser.
            since = await page.mark()
            await bob.ok("message:reaction", {"room": ROOM, "messageId": f"m-{tag}", "emoji": "👍", "action": "add"})
            got = await page.expect_event("web", "message:reaction", since=since, messageId=f"m-{tag}")
            assert got["from"] == py_user and got["emoji"] == "👍" and got["action"] == "add" and isinstance(got["ts"], int), got

            # browser -> python-socketio, with an ack round trip and without.
            assert await page.ok("web", "message:reaction",
                                 {"room": ROOM, "messageId": f"m-{tag}", "emoji": "❤️", "action": "add"}) == {"ok": True}
            got = await bob.expect("message:reaction", messageId=f"m-{tag}", emoji="❤️")
            assert got["from"] == web_user, got
            await page.emit("web", "note:new", {"room": ROOM, "text": f"no ack {tag}"})
            assert (await bob.expect("note:new", text=f"no ack {tag}"))["from"] == web_user

            # A durable receipt, acked after commit, forwarded to the room.
            receipt = await page.ok("web", "message:delivered", {"room": ROOM, "messageId": f"m-{tag}", "authorId": py_user})
            assert isinstance(receipt["id"], int), receipt
            fwd = await bob.expect("message:delivered", messageId=f"m-{tag}")
            assert fwd["userId"] == web_user and fwd["authorId"] == py_user, fwd

            # Refusals reach the browser as acks, and an ack-less failure as an `error` event.
            refused = await page.call("web", "room:join", {"room": "secret:1"})
            assert refused["ok"] is False and refused["error"]["code"] == "room_not_authorized", refused
            since = await page.mark()
            await page.emit("web", "Bad_Name", {"room": ROOM})
            err = await page.expect_event("web", "error", since=since)
            assert err["code"] == "invalid_event_name", err

            # The transport it ends on: upgraded to websocket, or staying on what it was told.
            if transport == "websocket" and first == "polling":
                await page.expect("web", "upgrade", transport="websocket")
            final = await page.state("web")
            assert final["transport"] == transport and final["connected"] is True, final
            assert final["id"] == state["id"], final
            if transport == "polling":
                assert not [e for e in await page.seen("web") if e["kind"] in ("upgrade", "upgrade_error")]

            # socket.io.engine.close(): the socket disconnects, reconnects with a new id on its
            # own, and works again once it rejoined (Relay keeps no rooms across connections).
            since = await page.mark()
            await page.force_close("web")
            gone = await page.expect("web", "disconnect", since=since)
            assert gone["data"]["reason"] == "forced close", gone  # socket.io-client's reason for engine.close()
            again = await page.connected("web", since)
            assert again["id"] != state["id"] and not again["recovered"], again
            assert await sids_of(relay, web_user) == [again["id"]], "the old session is gone from the relay"
            await page.ok("web", "room:join", {"room": ROOM})
            since = await page.mark()
            await bob.ok("message:reaction", {"room": ROOM, "messageId": f"m2-{tag}", "emoji": "🎉", "action": "add"})
            await page.expect_event("web", "message:reaction", since=since, messageId=f"m2-{tag}")

            # socket.disconnect(): the relay sees the socket go and tells the room.
            await page.disconnect("web")
            await bob.expect("presence:leave", user=web_user, room=ROOM)
            assert (await page.state("web"))["connected"] is False
    finally:
        await page.close()


@async_test
async def test_browser_default_options_upgrade_to_websocket(web_relay, browser, page_server):  # noqa: F811
    await browser_scenario(web_relay, browser, page_server, {}, "websocket", "default")


@async_test
async def test_browser_polling_only(web_relay, browser, page_server):  # noqa: F811
    await browser_scenario(web_relay, browser, page_server, {"transports": ["polling"]}, "polling", "polling")


@async_test
async def test_browser_websocket_only(web_relay, browser, page_server):  # noqa: F811
    await browser_scenario(web_relay, browser, page_server, {"transports": ["websocket"]}, "websocket", "ws")


# --------------------------------------------------------------------------------------------
# python-socketio


async def connect_python(client: Client, relay, token: str, transports: list[str] | None) -> None:
    """`AsyncClient.connect` with `auth={"token"}` and the given transports (None: the default,
    polling then upgrade)."""
    kwargs = {} if transports is None else {"transports": transports}
    try:
        await client.sio.connect(relay.url, auth={"token": token}, wait_timeout=TIMEOUT, **kwargs)
    except socketio.exceptions.ConnectionError as exc:
        await raise_if_polling_not_served(relay.url, None, f"python-socketio transports={transports}: {exc!r}")
        raise


async def python_scenario(relay, transports: list[str] | None, transport: str, tag: str) -> None:
    user, peer = f"pyamy-{tag}", f"pybob-{tag}"
    async with Clients() as c:
        bob = await c.connect(relay, peer)
        await bob.join(ROOM)
        amy = c.new(user)
        await connect_python(amy, relay, mint_token(user), transports)
        assert amy.connected and amy.sio.transport() == transport, amy.sio.transport()
        assert await sids_of(relay, user) == [amy.sio.get_sid()], "the CONNECT sid is the relay's"

        joined = await amy.join(ROOM)
        assert {"user": user, "devices": 1} in joined["presence"], joined
        await bob.expect("presence:join", user=user)

        await bob.ok("message:reaction", {"room": ROOM, "messageId": f"m-{tag}", "emoji": "👍", "action": "add"})
        assert (await amy.expect("message:reaction", messageId=f"m-{tag}"))["from"] == peer
        assert await amy.ok("message:reaction", {"room": ROOM, "messageId": f"m-{tag}", "emoji": "👀", "action": "add"}) == {"ok": True}
        assert (await bob.expect("message:reaction", messageId=f"m-{tag}", emoji="👀"))["from"] == user
        await amy.emit("note:new", {"room": ROOM, "text": f"no ack {tag}"})
        await bob.expect("note:new", text=f"no ack {tag}")

        # A backend event, and a durable receipt acked after commit.
        status, body = await http(relay, "POST", "/api/v1/emit", body={"event": "notification:new", "to": {"user": user}, "data": {"title": tag}})
        assert status == 200 and body == {"recipients": 1}, body
        await amy.expect("notification:new", title=tag)
        receipt = await amy.ok("message:delivered", {"room": ROOM, "messageId": f"m-{tag}", "authorId": peer})
        assert isinstance(receipt["id"], int)
        fwd = await bob.expect("message:delivered", messageId=f"m-{tag}")
        assert fwd["userId"] == user and fwd["id"] == receipt["id"], fwd
        again = await amy.ok("message:delivered", {"room": ROOM, "messageId": f"m-{tag}", "authorId": peer})
        assert again["id"] == receipt["id"], "idempotent"
        assert amy.sio.transport() == transport

        await amy.disconnect()
        await bob.expect("presence:leave", user=user)


@async_test
async def test_python_socketio_default_transports(web_relay):
    await python_scenario(web_relay, None, "websocket", "default")


@async_test
async def test_python_socketio_polling_only(web_relay):
    await python_scenario(web_relay, ["polling"], "polling", "polling")


@async_test
async def test_python_socketio_websocket_only(web_relay):
    await python_scenario(web_relay, ["websocket"], "websocket", "ws")


# --------------------------------------------------------------------------------------------
# Binary attachments


PAYLOAD = bytes(range(256)) * 3 + b"\x00relay\xff"


def binary_refusals(reply, errors: list) -> list:
    """What of Relay's refusal of attachments a sender saw: an ack or `error` event with
    `binary_not_supported`, or a close 1003 ("binary messages are not supported")."""
    found = [e for e in errors if isinstance(e, dict) and e.get("code") == "binary_not_supported"]
    if isinstance(reply, dict) and (reply.get("error") or {}).get("code") == "binary_not_supported":
        found.append(reply)
    return found


async def browser_binary_refusals(page: BrowserPage, reply=None) -> list:
    seen = await page.seen("web")
    errors = [e["args"][0] for e in seen if e["kind"] == "event" and e.get("event") == "error" and e["args"]]
    closes = [e["data"] for e in seen if e["kind"] == "disconnect"
              and ((e["data"].get("details") or {}).get("context") or {}).get("code") == 1003]
    return binary_refusals(reply, errors) + closes


async def binary_scenario(relay, browser, page_server, websocket_only: bool, tag: str) -> None:  # noqa: F811
    """The browser sends an ArrayBuffer and python-socketio sends bytes in a custom event; the
    other members receive the same bytes."""
    transports = ["websocket"] if websocket_only else None
    web_user, bob_user, cat_user = f"binweb-{tag}", f"binbob-{tag}", f"bincat-{tag}"
    page = await BrowserPage.open(browser, page_server)
    try:
        async with Clients() as c:
            bob, cat = c.new(bob_user), c.new(cat_user)
            await connect_python(bob, relay, mint_token(bob_user), transports)
            await connect_python(cat, relay, mint_token(cat_user), transports)
            await bob.join(ROOM)
            await cat.join(ROOM)
            await page.connect("web", relay.url, {**({"transports": transports} if transports else {}),
                                                   "auth": {"token": mint_token(web_user)}})
            await page.ok("web", "room:join", {"room": ROOM})

            # Browser ArrayBuffer -> python members.
            try:
                reply = await page.call("web", "file:chunk", {"room": ROOM, "name": f"a-{tag}.bin", "data": b64bytes(PAYLOAD)})
            except AssertionError:
                refusals = await browser_binary_refusals(page)
                if refusals:
                    raise BinaryNotServed(f"the browser's ArrayBuffer got no ack; the relay refused it: {refusals}") from None
                raise
            if refusals := await browser_binary_refusals(page, reply):
                raise BinaryNotServed(f"the browser's ArrayBuffer was refused: {refusals}")
            assert reply == {"ok": True}, reply
            for member in (bob, cat):
                got = await member.expect("file:chunk", name=f"a-{tag}.bin")
                assert got["data"] == PAYLOAD and got["from"] == web_user, got

            # python-socketio bytes -> the browser and the other python member.
            since = await page.mark()
            try:
                reply = await bob.call("file:chunk", {"room": ROOM, "name": f"b-{tag}.bin", "data": PAYLOAD})
            except socketio.exceptions.SocketIOError:
                refusals = binary_refusals(None, [d for n, d in bob.history if n == "error"])
                if refusals:
                    raise BinaryNotServed(f"python-socketio's bytes got no ack; the relay refused them: {refusals}") from None
                raise
            if refusals := binary_refusals(reply, [d for n, d in bob.history if n == "error"]):
                raise BinaryNotServed(f"python-socketio's bytes were refused: {refusals}")
            assert reply == {"ok": True}, reply
            got = await page.expect_event("web", "file:chunk", since=since, name=f"b-{tag}.bin")
            assert got["data"] == PAYLOAD and got["from"] == bob_user, got
            got = await cat.expect("file:chunk", name=f"b-{tag}.bin")
            assert got["data"] == PAYLOAD, got
    finally:
        await page.close()


@async_test
async def test_binary_attachments_over_websocket(web_relay, browser, page_server):  # noqa: F811
    await binary_scenario(web_relay, browser, page_server, True, "ws")


@async_test
async def test_binary_attachments_with_default_transports(web_relay, browser, page_server):  # noqa: F811
    await binary_scenario(web_relay, browser, page_server, False, "default")
