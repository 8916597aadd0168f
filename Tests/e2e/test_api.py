"""The backend HTTP API: `POST /api/v1/emit`, its authentication and its validation."""

from __future__ import annotations

import time

from helpers import (
    ADMIN_KEY,
    Clients,
    async_test,
    emit_api,
    http,
)


def assert_error(status: int, body, expected_status: int, code: str) -> None:
    assert status == expected_status, (status, body)
    assert isinstance(body, dict) and set(body) == {"error"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body


@async_test
async def test_emit_requires_the_api_key(relay):
    to, data = {"user": "nobody"}, {"x": 1}
    assert_error(*await emit_api(relay, "notification:new", to, data, key=None), 401, "unauthorized")
    assert_error(*await emit_api(relay, "notification:new", to, data, key="wrong-key-0123456789"), 401, "unauthorized")
    assert_error(*await emit_api(relay, "notification:new", to, data, key=ADMIN_KEY), 401, "unauthorized")
    body = {"event": "notification:new", "to": to, "data": data}
    status, reply = await http(relay, "POST", "/api/v1/emit", body=body, key=None,
                               headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert_error(status, reply, 401, "unauthorized")
    # The right key works.
    assert await emit_api(relay, "notification:new", to, data) == (200, {"recipients": 0})


@async_test
async def test_emit_rejects_bad_requests(relay):
    assert_error(*await http(relay, "POST", "/api/v1/emit", raw=b"{not json"), 400, "invalid_json")
    assert_error(*await http(relay, "POST", "/api/v1/emit", raw=b""), 400, "invalid_json")
    bad_bodies = [
        {"to": {"user": "bob"}, "data": {}},                                   # no event
        {"event": 5, "to": {"user": "bob"}},                                   # event not a string
        {"event": "Bad_Name", "to": {"user": "bob"}},                          # event outside the grammar
        {"event": "notification:new", "data": {}},                             # no recipient
        {"event": "notification:new", "to": {}},                               # empty recipient
        {"event": "notification:new", "to": {"user": ""}},                     # empty user
        {"event": "notification:new", "to": "bob"},                            # recipient not an object
        {"event": "notification:new", "to": {"room": "has space"}},            # invalid room
        {"event": "notification:new", "to": {"user": "bob"}, "data": [1, 2]},  # data not an object
        ["notification:new"],                                                  # not an object
    ]
    for body in bad_bodies:
        status, reply = await http(relay, "POST", "/api/v1/emit", body=body)
        assert status == 400, (body, status, reply)
        assert isinstance(reply, dict) and set(reply) == {"error"}, (body, reply)
        assert isinstance(reply["error"]["code"], str) and reply["error"]["code"], (body, reply)
        assert isinstance(reply["error"]["message"], str) and reply["error"]["message"], (body, reply)
    status, reply = await http(relay, "POST", "/api/v1/emit", body={"event": "Bad_Name", "to": {"user": "bob"}})
    assert reply["error"]["code"] == "invalid_event_name"
    status, reply = await http(relay, "GET", "/api/v1/emit")
    assert_error(status, reply, 405, "method_not_allowed")
    status, reply = await http(relay, "GET", "/api/v1/nothing")
    assert_error(status, reply, 404, "not_found")


@async_test
async def test_health(relay):
    assert await http(relay, "GET", "/healthz", key=None) == (200, {"status": "ok"})


@async_test
async def test_emit_to_a_user_reaches_every_device(relay):
    async with Clients() as clients:
        hana = [await clients.connect(relay, "hana", name=f"hana{i}") for i in range(3)]
        igor = await clients.connect(relay, "igor")
        for c in (*hana, igor):
            await c.join("conversation:api-user")
        status, body = await emit_api(relay, "notification:new", {"user": "hana"},
                                      {"title": "New message", "conversationId": "c1"})
        assert (status, body) == (200, {"recipients": 3})
        for c in hana:
            note = await c.expect("notification:new")
            assert note["title"] == "New message" and note["conversationId"] == "c1"
            assert note["from"] == "server"
            assert isinstance(note["ts"], int) and abs(note["ts"] - time.time() * 1000) < 300_000
        # Barrier: a later room emit; igor got no notification.
        assert await emit_api(relay, "message:new", {"room": "conversation:api-user"}, {"id": "m1"}) == \
            (200, {"recipients": 4})
        await igor.expect("message:new", id="m1")
        assert igor.events("notification:new") == []
        # One device gone: two recipients. The end of hana0's live share (its disconnect's
        # last step) tells when the relay has dropped the socket.
        await hana[0].ok("location:share-live", {"room": "conversation:api-user", "durationSec": 60})
        await igor.expect("location:share-live", **{"from": "hana"})
        await hana[0].disconnect()
        stop = await igor.expect("location:stop", **{"from": "hana"})
        assert stop["reason"] == "disconnected"
        status, body = await emit_api(relay, "notification:new", {"user": "hana"}, {"title": "Again"})
        assert (status, body) == (200, {"recipients": 2})
        for c in hana[1:]:
            await c.expect("notification:new", title="Again")


@async_test
async def test_emit_to_a_room(relay):
    room = "conversation:api-room"
    async with Clients() as clients:
        jack = await clients.connect(relay, "jack")
        jack2 = await clients.connect(relay, "jack", name="jack2")
        kate = await clients.connect(relay, "kate")
        outside = await clients.connect(relay, "liam")
        for c in (jack, jack2, kate):
            await c.join(room)
        status, body = await emit_api(relay, "message:new", {"room": room},
                                      {"id": "m9", "text": "hello", "from": "backend-bot"})
        assert (status, body) == (200, {"recipients": 3})
        for c in (jack, jack2, kate):
            msg = await c.expect("message:new", id="m9")
            assert msg["text"] == "hello" and msg["from"] == "backend-bot"
            assert isinstance(msg["ts"], int)
        # Barrier for the outsider: a user emit that reaches it after the room emit.
        assert await emit_api(relay, "notification:new", {"user": "liam"}, {"n": 1}) == (200, {"recipients": 1})
        await outside.expect("notification:new", n=1)
        assert outside.events("message:new") == []
        # A room nobody is in.
        assert await emit_api(relay, "message:new", {"room": "conversation:empty-api"}, {"id": "x"}) == \
            (200, {"recipients": 0})
