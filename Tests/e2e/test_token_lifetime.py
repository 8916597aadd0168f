"""Token lifetime, backend session ends and batched receipts, with python-socketio (default
options, a real relay process).

- a token close to its `exp` is announced (`auth:expiring`), `auth:refresh` extends the socket
  and leaves the rooms the new token no longer allows; without a refresh the socket is closed
  at `exp` + leeway (4005, after `auth:expired`);
- `POST /api/v1/users/{user}/disconnect` ends every socket of the user; with `revoke` the old
  token is refused (`token_revoked`) and a newer one connects;
- `message:read` with `items`: one ack listing each id, one grouped forward.
"""

from __future__ import annotations

import asyncio
import time

import socketio

from helpers import Clients, async_test, http, mint_token

RELAY_ARGS = ["--jwt-leeway", "0", "--token-expiry-notice-ms", "3000"]


@async_test
async def test_refresh_before_expiry_keeps_the_socket_and_rechecks_rooms(relay):
    async with Clients() as c:
        alice = await c.connect(relay, "alice", token=mint_token("alice", ttl=4))
        bob = await c.connect(relay, "bob")
        for cl in (alice, bob):
            await cl.join("conversation:1")
            await cl.join("conversation:2")
        notice = await alice.expect("auth:expiring", timeout=5)
        assert notice["expiresInMs"] <= 3000 and notice["exp"] > time.time() - 1
        fresh = mint_token("alice", ttl=3600, rooms=["conversation:2"])
        reply = await alice.ok("auth:refresh", {"token": fresh})
        assert reply["left"] == ["conversation:1"] and reply["exp"] > time.time() + 3000
        await bob.expect("presence:leave", user="alice", room="conversation:1")
        await asyncio.sleep(3)  # past the first token's exp: still connected
        assert alice.connected
        assert (await alice.call("auth:refresh", {"token": mint_token("mallory", ttl=60)}))["error"]["code"] == "token_subject_mismatch"


@async_test
async def test_expired_socket_is_closed_with_4005(relay):
    sio = socketio.AsyncClient(reconnection=False, handle_sigint=False)
    seen: list[str] = []
    gone = asyncio.Event()
    sio.on("auth:expiring", lambda data: seen.append("auth:expiring"))
    sio.on("auth:expired", lambda data: seen.append("auth:expired"))
    sio.on("disconnect", lambda *a: gone.set())
    await sio.connect(relay.url, transports=["websocket"], auth={"token": mint_token("carol", ttl=2)})
    started = time.monotonic()
    await asyncio.wait_for(gone.wait(), 10)
    assert 1.0 <= time.monotonic() - started <= 5, "closed around exp (+0 s leeway)"
    assert seen == ["auth:expiring", "auth:expired"], seen
    status, metrics = await http(relay, "GET", "/metrics", key=None)
    assert 'relay_disconnects_total{reason="token_expired"}' in metrics


@async_test
async def test_backend_ends_every_session_and_revokes(relay):
    old = mint_token("dave", ttl=3600, iat=int(time.time()) - 60)
    async with Clients() as c:
        phone = await c.connect(relay, "dave", token=old)
        laptop = await c.connect(relay, "dave", token=old)
        status, body = await http(relay, "POST", "/api/v1/users/dave/disconnect", body={"revoke": True})
        assert status == 200 and body == {"user": "dave", "disconnected": 2, "revoked": True}, body
        for cl in (phone, laptop):
            for _ in range(50):
                if not cl.connected:
                    break
                await asyncio.sleep(0.05)
            assert not cl.connected
    refused = socketio.AsyncClient(reconnection=False, handle_sigint=False)
    errors: list = []
    refused.on("connect_error", lambda data: errors.append(data))
    try:
        await refused.connect(relay.url, transports=["websocket"], auth={"token": old}, wait_timeout=5)
        raise AssertionError("a revoked token connected")
    except socketio.exceptions.ConnectionError:
        pass
    assert errors and errors[0]["data"]["code"] == "token_revoked", errors
    await asyncio.sleep(1.1)  # a token issued after the revocation's second
    async with Clients() as c:
        again = await c.connect(relay, "dave", token=mint_token("dave", ttl=3600))
        assert again.connected
    status, _ = await http(relay, "POST", "/api/v1/users/dave/disconnect", key="wrong-key-0123456789")
    assert status == 401


@async_test
async def test_batched_receipts_one_ack_one_forward(relay):
    async with Clients() as c:
        reader = await c.connect(relay, "erin")
        author = await c.connect(relay, "frank")
        for cl in (reader, author):
            await cl.join("conversation:9")
        items = [{"messageId": f"m{i}", "authorId": "frank"} for i in range(50)]
        reply = await reader.ok("message:read", {"room": "conversation:9", "items": items})
        assert [i["messageId"] for i in reply["items"]] == [f"m{i}" for i in range(50)]
        assert all(isinstance(i["id"], int) for i in reply["items"])
        forward = await author.expect("message:read")
        assert forward["from"] == "erin" and len(forward["items"]) == 50
        # Idempotent per item: the same batch again is acked, not forwarded again.
        again = await reader.ok("message:read", {"room": "conversation:9", "items": items[:5]})
        assert [i["id"] for i in again["items"]] == [i["id"] for i in reply["items"][:5]]
        await asyncio.sleep(0.3)
        assert [e for e, _ in author.history].count("message:read") == 1
