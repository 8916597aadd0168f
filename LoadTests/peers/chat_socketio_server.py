"""Relay's chat behaviour for `relay-load chat` (issue #32), written as an app on python-socketio
(uvicorn + uvloop, websocket transport only, like socketio_server.py), so the three servers can
be compared on the same wire.

What it does, as Relay does for this scenario (docs/PROTOCOL.md §2–§4, §12 "Rooms in CONNECT"):
- CONNECT: verifies the HS256 token (signature, `exp` with 30 s leeway), takes the user from
  `sub`, joins the rooms listed in the CONNECT auth that the token's `rooms` claim allows
  (exact names or `prefix*`); the others are left out.
- `room:join {room}` with an ack, for clients that join one room at a time.
- Any `entity:action` event with a `room` the socket is in (`chat:message`): stamped with
  `from` and `ts`, sent to the room except the sending socket, acked `{"ok":true}`.
- `typing:start` / `typing:stop {room}`: `{room, from, ts}` to the room except every socket of
  the typing user. Not coalesced (Relay sends one flush per room per 100 ms).
- `message:delivered` / `message:read` `{room, items:[{messageId, authorId}…]}` (or one
  `messageId`/`authorId`): idempotent per (messageId, user, kind), **kept in memory only** (a dict
  that grows for the life of the process; Relay commits them to SQLite before it acks), acked
  with each item's cursor, new ones forwarded as one `{room, from, kind, items}` event to the
  room except the sending socket.
- Presence: `presence:join` / `presence:leave {room, user, from, ts}` to the user's rooms on
  the user's first connect / last disconnect.
No rate limits, no history, no recovery, no backpressure limits beyond the libraries'.

Usage: RELAY_JWT_SECRET=… python chat_socketio_server.py PORT   (listens on 127.0.0.1 only)
"""
import base64
import hashlib
import hmac
import itertools
import json
import os
import sys
import time

import socketio
import uvicorn


class CompactJSON:
    """The library's json module, without the spaces after `:` and `,` (as Relay and Node send)."""

    @staticmethod
    def dumps(*args, **kwargs):
        kwargs.setdefault("separators", (",", ":"))
        return json.dumps(*args, **kwargs)

    loads = staticmethod(json.loads)


SECRET = os.environ.get("RELAY_JWT_SECRET", "").encode()
sio = socketio.AsyncServer(async_mode="asgi", transports=["websocket"], cors_allowed_origins=[], json=CompactJSON)
app = socketio.ASGIApp(sio)

sessions = {}  # sid -> (user, set of rooms, (exact rooms, prefixes))
devices = {}  # user -> set of sids
receipts = {}  # (messageId, user, kind) -> cursor
cursors = itertools.count(1)


def now_ms():
    return int(time.time() * 1000)


def b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verify(token):
    """The token's claims, or None when it is not a valid HS256 token of ours."""
    try:
        head, body, sig = token.split(".")
        if json.loads(b64url(head)).get("alg") != "HS256":
            return None
        expected = hmac.new(SECRET, f"{head}.{body}".encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(expected, b64url(sig)):
            return None
        claims = json.loads(b64url(body))
        if not isinstance(claims.get("sub"), str) or not isinstance(claims.get("exp"), (int, float)):
            return None
        if claims["exp"] + 30 < time.time():
            return None
        return claims
    except (ValueError, TypeError, AttributeError):
        return None


def allowed_rooms(claims):
    patterns = [p for p in claims.get("rooms") or [] if isinstance(p, str) and p]
    return {p for p in patterns if not p.endswith("*")}, [p[:-1] for p in patterns if p.endswith("*")]


def allows(allowed, room):
    exact, prefixes = allowed
    return isinstance(room, str) and (room in exact or any(room.startswith(p) for p in prefixes))


def error(code):
    return {"ok": False, "error": {"code": code, "message": code}}


def member_room(sid, data):
    """(user, room) when `data` names a room the socket is in, else None."""
    session = sessions.get(sid)
    room = data.get("room") if isinstance(data, dict) else None
    if session is None or room not in session[1]:
        return None
    return session[0], room


@sio.event
async def connect(sid, environ, auth):
    auth = auth if isinstance(auth, dict) else {}
    claims = verify(auth.get("token") or "")
    if claims is None:
        raise socketio.exceptions.ConnectionRefusedError("token_invalid")
    user = claims["sub"]
    allowed = allowed_rooms(claims)
    rooms = [r for r in (auth.get("rooms") or [])[:100] if allows(allowed, r)]
    first = user not in devices
    sessions[sid] = (user, set(rooms), allowed)
    devices.setdefault(user, set()).add(sid)
    ts = now_ms()
    for room in rooms:
        if first:
            await sio.emit("presence:join", {"room": room, "user": user, "from": user, "ts": ts}, room=room)
        await sio.enter_room(sid, room)


@sio.event
async def disconnect(sid, *reason):
    session = sessions.pop(sid, None)
    if session is None:
        return
    user, rooms, _ = session
    sids = devices.get(user, set())
    sids.discard(sid)
    if sids:
        return
    devices.pop(user, None)
    ts = now_ms()
    for room in rooms:
        await sio.emit("presence:leave", {"room": room, "user": user, "from": user, "ts": ts}, room=room, skip_sid=sid)


@sio.on("room:join")
async def room_join(sid, data):
    session = sessions.get(sid)
    room = data.get("room") if isinstance(data, dict) else None
    if session is None or not allows(session[2], room):
        return error("room_not_authorized")
    user, rooms, _ = session
    if room not in rooms:
        if not any(room in sessions[other][1] for other in devices.get(user, ())):
            await sio.emit("presence:join", {"room": room, "user": user, "from": user, "ts": now_ms()}, room=room)
        rooms.add(room)
        await sio.enter_room(sid, room)
    return {"ok": True, "room": room}


async def typing(event, sid, data):
    member = member_room(sid, data)
    if member is None:
        return error("not_in_room")
    user, room = member
    await sio.emit(event, {"room": room, "from": user, "ts": now_ms()}, room=room, skip_sid=list(devices.get(user, ())))
    return {"ok": True}


@sio.on("typing:start")
async def typing_start(sid, data):
    return await typing("typing:start", sid, data)


@sio.on("typing:stop")
async def typing_stop(sid, data):
    return await typing("typing:stop", sid, data)


async def receipt(kind, sid, data):
    member = member_room(sid, data)
    if member is None:
        return error("not_in_room")
    user, room = member
    single = "items" not in data
    items = [{"messageId": data.get("messageId"), "authorId": data.get("authorId")}] if single else data["items"]
    if not isinstance(items, list) or not 1 <= len(items) <= 100:
        return error("invalid_payload")
    ts = now_ms()
    acked, fresh, seen = [], [], set()
    for item in items:
        message_id, author = (item.get("messageId"), item.get("authorId")) if isinstance(item, dict) else (None, None)
        if not isinstance(message_id, str) or not isinstance(author, str) or not message_id or not author:
            return error("invalid_payload")
        if message_id in seen:
            continue
        seen.add(message_id)
        key = (message_id, user, kind)
        cursor = receipts.get(key)
        if cursor is None:
            cursor = receipts[key] = next(cursors)
            fresh.append({"id": cursor, "room": room, "messageId": message_id, "authorId": author, "userId": user, "kind": kind, "ts": ts})
        acked.append({"messageId": message_id, "id": cursor})
    if fresh:
        await sio.emit(f"message:{kind}", {"room": room, "from": user, "kind": kind, "items": fresh}, room=room, skip_sid=sid)
    return {"ok": True, "id": acked[0]["id"]} if single else {"ok": True, "items": acked}


@sio.on("message:delivered")
async def delivered(sid, data):
    return await receipt("delivered", sid, data)


@sio.on("message:read")
async def read(sid, data):
    return await receipt("read", sid, data)


@sio.on("*")
async def custom(event, sid, data):
    """Any other `entity:action` event (the chat messages): to the room but the sender."""
    member = member_room(sid, data)
    if member is None:
        return error("not_in_room")
    data["from"], data["ts"] = member[0], now_ms()
    await sio.emit(event, data, room=member[1], skip_sid=sid)
    return {"ok": True}


if __name__ == "__main__":
    if len(SECRET) < 32:
        sys.exit("RELAY_JWT_SECRET (at least 32 bytes) must be set")
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8084
    print(f"python-socketio chat listening on 127.0.0.1:{port}", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", loop="uvloop", ws="websockets")
