"""The client guides' samples run against Relay: docs/clients/javascript.md in the official
browser client (socket.io-client 4.8.1 in headless Chromium, see browser_client.py) and
docs/clients/python.md with python-socketio.

**Samples.** Every fenced block of a guide follows an HTML comment `<!-- sample: NAME -->`
(a block without one fails `test_every_code_block_is_a_sample`), and every sample is run by a
test below (`test_every_sample_runs`: the scenarios' lists cover them all). A test composes a
scenario from samples as the guide's reader would (e.g. fetch a token, connect, handle errors)
and then drives the relay so that what each sample claims happens: a CONNECT is refused, a token
expires, the socket drops, a room gets events while it is away.

**What the samples take from their app.** `RELAY_URL`; `fetchToken()` / `fetch_token()` call
`/api/relay-token` of the app's backend: here `TokenDesk`, an HTTP server on 127.0.0.1 (it also
serves the browser page, so the page's `fetch` is same-origin) that mints a token for the
test's user, or what the test planned (an expired token, a malformed one, an old `iat`).
`showError`/`show_error`, `showMessage`/`show_message` and `loadRoom`/`load_room` record what
the user would see.

**Running them.** JavaScript: the scenario's samples are concatenated into one async function
evaluated in a fresh tab (module code: top-level `await` works); `io` there records every
socket's connects, disconnects, refusals and events (`window.guide.seen`), and
`window.app(src)` evaluates an expression in the samples' scope (`socket.connected`,
`send(...)`). Python: each sample is compiled with top-level `await` allowed and run in one
namespace, in the test's event loop; the client the samples create is traced (every event it
handles, after its handler ran).

Waiting is always for a recorded event or condition, bounded in time.

**A join racing a message** (`test_an_event_sent_as_a_socket_joins_is_never_lost`). For a socket
that takes offsets (`recover: true`, as the join-and-sync samples opt in), an event another member
sends while the socket's `room:join` is completing used to be lost: Relay read the room's offset
for the ack after the event entered the history, and the event's live delivery was then dropped
as a duplicate (found by these tests; fixed with `RecoveryLog.join`). The join-and-sync tests
send their first message once the join's ack came back, so they show the sample's own logic.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import inspect
import json
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import pytest
import socketio

from browser_client import BrowserPage, browser, socketio_bundle  # noqa: F401 - fixtures
from helpers import ADMIN_KEY, REPO_ROOT, TIMEOUT, Clients, async_test, http, mint_token, refused_code
from recovery_helpers import metric

GUIDES = REPO_ROOT / "docs" / "clients"
JS_GUIDE = GUIDES / "javascript.md"
PY_GUIDE = GUIDES / "python.md"

# Short token lifetimes: no leeway, `auth:expiring` 2 s before exp.
TOKEN_FLAGS = ["--jwt-leeway", "0", "--token-expiry-notice-ms", "2000"]

ROOM = "conversation:42"  # the guides' room
PNG = b"\x89PNG\r\n\x1a\n"  # the guides' bytes


# --------------------------------------------------------------------------------------------
# The guides' samples

SAMPLE = re.compile(r"<!--\s*sample:\s*([a-z0-9-]+)\s*-->\s*\n```([a-z]+)\n(.*?)\n```", re.S)
FENCE = re.compile(r"^```([a-z]*)\s*$", re.M)


def samples(path: Path) -> dict[str, tuple[str, str]]:
    """name -> (language, code) of every `<!-- sample: NAME -->` block of a guide."""
    text = path.read_text(encoding="utf-8")
    found: dict[str, tuple[str, str]] = {}
    for m in SAMPLE.finditer(text):
        name, lang, code = m.group(1), m.group(2), m.group(3)
        assert name not in found, f"{path.name}: sample {name} twice"
        found[name] = (lang, code)
    return found


JS = samples(JS_GUIDE)
PY = samples(PY_GUIDE)

# The scenarios: which samples each test runs, in order (the order a reader puts them in).
JS_BASE = ["js-fetch-token", "js-connect", "js-errors", "js-send"]
JS_REFRESH = [*JS_BASE, "js-refresh"]
JS_ROOMS_IN_AUTH = ["js-fetch-token", "js-rooms-in-auth", "js-errors"]
JS_JOIN_AND_SYNC = ["js-fetch-token", "js-join-and-sync", "js-errors"]
JS_BINARY = [*JS_BASE, "js-binary"]
PY_BASE = ["py-fetch-token", "py-client", "py-errors"]
PY_CONNECT = [*PY_BASE, "py-connect"]
PY_REFRESH = [*PY_BASE, "py-refresh", "py-connect"]
PY_ROOMS_IN_AUTH = [*PY_BASE, "py-rooms-in-auth", "py-connect"]
PY_JOIN_AND_SYNC = [*PY_BASE, "py-join-and-sync", "py-connect"]
PY_BINARY = [*PY_CONNECT, "py-binary"]
PY_SYNC = ["py-sync-client"]
SCENARIOS = [JS_BASE, JS_REFRESH, JS_ROOMS_IN_AUTH, JS_JOIN_AND_SYNC, JS_BINARY,
             PY_CONNECT, PY_REFRESH, PY_ROOMS_IN_AUTH, PY_JOIN_AND_SYNC, PY_BINARY, PY_SYNC]


def test_every_code_block_is_a_sample():
    for path, found, lang in ((JS_GUIDE, JS, "js"), (PY_GUIDE, PY, "python")):
        fences = FENCE.findall(path.read_text(encoding="utf-8"))
        opening = fences[0::2]
        assert len(fences) % 2 == 0, f"{path.name}: an unclosed code fence"
        assert len(opening) == len(found), \
            f"{path.name}: {len(opening)} code blocks, {len(found)} of them marked `<!-- sample: NAME -->`"
        assert {lng for lng, _ in found.values()} == {lang}, f"{path.name}: samples in {set(found.values())}"
    for name, (_, code) in PY.items():
        compile(code, f"python.md:{name}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_every_sample_runs():
    run = {name for scenario in SCENARIOS for name in scenario}
    assert run == set(JS) | set(PY), f"not run: {(set(JS) | set(PY)) - run}; unknown: {run - set(JS) - set(PY)}"


# --------------------------------------------------------------------------------------------
# The app's backend: the token endpoint (and the browser page)


PAGE = """<!doctype html>
<meta charset="utf-8">
<title>loading</title>
<script src="/socket.io.min.js"></script>
<script>
(() => {
  const seen = [], waiters = [];
  const toB64 = (u8) => { let s = ""; for (let i = 0; i < u8.length; i++) s += String.fromCharCode(u8[i]); return btoa(s); };
  const encode = (v) => {
    if (v instanceof ArrayBuffer) return {$bytes: toB64(new Uint8Array(v))};
    if (ArrayBuffer.isView(v)) return {$bytes: toB64(new Uint8Array(v.buffer, v.byteOffset, v.byteLength))};
    if (Array.isArray(v)) return v.map(encode);
    if (v && typeof v === "object") { const o = {}; for (const k of Object.keys(v)) o[k] = encode(v[k]); return o; }
    return v === undefined ? null : v;
  };
  const matches = (e, f) => {
    if (f.kind && e.kind !== f.kind) return false;
    if (f.event && e.event !== f.event) return false;
    for (const [k, v] of Object.entries(f.fields || {})) {
      if (!e.data || JSON.stringify(e.data[k]) !== JSON.stringify(v)) return false;
    }
    return true;
  };
  const record = (kind, extra) => {
    const e = Object.assign({i: seen.length, t: Date.now(), kind}, extra);
    seen.push(e);
    for (const w of waiters.slice()) {
      if (e.i >= w.from && matches(e, w.filter)) { waiters.splice(waiters.indexOf(w), 1); clearTimeout(w.timer); w.resolve(e); }
    }
  };
  window.addEventListener("error", (ev) => record("page_error", {data: {message: String(ev.message)}}));
  window.addEventListener("unhandledrejection", (ev) => record("page_error", {data: {message: String(ev.reason)}}));
  // What the guide's samples call "your UI" and "your backend".
  window.showError = (code, message) => record("shown", {data: {code, message}});
  window.showMessage = (msg) => record("message", {data: encode(msg)});
  window.loadRoom = (room) => record("load", {data: {room}});
  window.guide = {
    seen,
    // io() as the samples call it, recording what each socket goes through.
    io(...args) {
      const s = window.io(...args);
      s.on("connect", () => record("connect", {data: {id: s.id, recovered: s.recovered === undefined ? null : s.recovered}}));
      s.on("disconnect", (reason, details) => record("disconnect", {data: {reason,
        code: details && details.context && details.context.code !== undefined ? details.context.code : null}}));
      s.on("connect_error", (err) => record("connect_error", {data: {message: err.message, data: err.data === undefined ? null : err.data, active: s.active}}));
      s.onAny((event, ...args) => record("event", {event, data: encode(args[0]), args: encode(args)}));
      return s;
    },
    wait(filter, from, timeoutMs) {
      const hit = seen.find((e) => e.i >= from && matches(e, filter));
      if (hit) return Promise.resolve(hit);
      return new Promise((resolve) => {
        const w = {filter, from, resolve};
        w.timer = setTimeout(() => { waiters.splice(waiters.indexOf(w), 1); resolve(null); }, timeoutMs);
        waiters.push(w);
      });
    },
  };
  document.title = "ready";
})();
</script>
"""


class TokenDesk:
    """The app backend of the samples, on 127.0.0.1: `GET /api/relay-token` answers
    `{"token"}` for `user` (the next planned token, else a valid one for `ttl` seconds), `/`
    the browser page and `/socket.io.min.js` the verified bundle. Stopped by `stop()`."""

    def __init__(self, bundle: bytes):
        self.lock = threading.Lock()
        self.user = "nobody"
        self.ttl = 3600
        self.plan: deque = deque()
        self.issued: list[str] = []
        desk = self
        files = {"/": (PAGE.encode(), "text/html; charset=utf-8"),
                 "/socket.io.min.js": (bundle, "application/javascript; charset=utf-8")}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                if path == "/api/relay-token":
                    body, ctype = json.dumps({"token": desk.mint()}).encode(), "application/json"
                elif path in files:
                    body, ctype = files[path]
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="token-desk", daemon=True)
        self.thread.start()

    def serve(self, user: str, *plan: str, ttl: int = 3600) -> None:
        """From now on: tokens of `user`, first the `plan`ned ones, then valid for `ttl` s."""
        with self.lock:
            self.user, self.ttl, self.plan, self.issued = user, ttl, deque(plan), []

    def mint(self) -> str:
        with self.lock:
            token = self.plan.popleft() if self.plan else mint_token(self.user, ttl=self.ttl)
            self.issued.append(token)
            return token

    @property
    def fetched(self) -> int:
        with self.lock:
            return len(self.issued)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        return self.origin + "/"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture(scope="module")
def desk():
    d = TokenDesk(socketio_bundle().read_bytes())
    try:
        yield d
    finally:
        d.stop()


def claims(token: str) -> dict:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def old_token(user: str) -> str:
    """A valid token issued a while ago (`iat` 10 s back: before a revocation made now)."""
    return mint_token(user, iat=int(time.time()) - 10)


async def sleep_past_exp(token: str) -> None:
    """Sleeps until the token's `exp` has passed (the relay runs with no leeway)."""
    await asyncio.sleep(max(0.0, claims(token)["exp"] - time.time()) + 0.3)


async def sids_of(relay, user: str) -> list[str]:
    status, body = await http(relay, "GET", f"/admin/v1/users/{user}/connections", key=ADMIN_KEY)
    assert status == 200, body
    return [c["sid"] for c in body["connections"]]


async def kick(relay, user: str) -> None:
    """Closes the user's sockets from the relay's side (admin API, close 4004): to a stock client
    a transport close, after which it reconnects on its own as a new session."""
    sids = await sids_of(relay, user)
    assert len(sids) == 1, f"{user}: {sids}"
    status, body = await http(relay, "DELETE", f"/admin/v1/connections/{sids[0]}", key=ADMIN_KEY)
    assert status in (200, 204), (status, body)


async def member(c: Clients, relay, user: str) -> Any:
    """A python-socketio member of the guides' room (helpers.Client)."""
    m = await c.connect(relay, user)
    await m.join(ROOM)
    return m


# --------------------------------------------------------------------------------------------
# JavaScript samples in the browser


class JsApp:
    """A fresh tab running a scenario of javascript.md's samples."""

    def __init__(self, page: BrowserPage):
        self.page = page

    @classmethod
    async def start(cls, browser, desk: TokenDesk, relay, names: list[str]) -> "JsApp":  # noqa: F811
        page = await BrowserPage.open(browser, desk)
        app = cls(page)
        body = "\n".join(f"// --- javascript.md sample: {n}\n{JS[n][1]}" for n in names)
        source = (f"(async () => {{\nconst io = window.guide.io;\nconst RELAY_URL = {json.dumps(relay.url)};\n"
                  f"{body}\nwindow.app = (src) => eval(src);\nreturn true;\n}})()")
        try:
            assert await page.js(source) is True
        except BaseException:
            await page.close()
            raise
        return app

    async def close(self) -> None:
        await self.page.close()

    async def eval(self, src: str, timeout: float = TIMEOUT) -> Any:
        """`src` evaluated in the samples' scope (a promise is awaited)."""
        # As JSON: a socket (or anything circular) comes back as null.
        expr = (f"Promise.resolve(window.app({json.dumps(src)})).then((v) => "
                "{ try { return JSON.parse(JSON.stringify(v === undefined ? null : v)); } catch (e) { return null; } })")
        return await self.page.js(expr, timeout=timeout + 5)

    async def mark(self) -> int:
        return await self.page.js("window.guide.seen.length")

    async def seen(self, kind: str | None = None, since: int = 0) -> list[dict]:
        return [e for e in await self.page.js("window.guide.seen") if e["i"] >= since and (kind is None or e["kind"] == kind)]

    async def expect(self, kind: str, event: str | None = None, since: int = 0, timeout: float = TIMEOUT,
                     **fields) -> dict:
        flt = {"kind": kind, "event": event, "fields": fields}
        hit = await self.page.js(f"window.guide.wait({json.dumps(flt)}, {since}, {int(timeout * 1000)})",
                                 timeout=timeout + 5)
        if hit is None:
            raise AssertionError(f"no {kind} {event or ''} {fields or ''} within {timeout} s; "
                                 f"the page saw: {json.dumps(await self.seen())[-4000:]}")
        return hit

    async def shown(self, since: int = 0) -> list[tuple[str, str]]:
        """What `showError` showed: (code, message)."""
        return [(e["data"]["code"], e["data"]["message"]) for e in await self.seen("shown", since)]

    async def no_page_errors(self) -> None:
        errors = await self.seen("page_error")
        assert not errors, f"uncaught errors in the page: {errors}"


# A bounded wait in the page: `${JS_UNTIL}(() => cond)` resolves to cond's value, or null after 10 s.
JS_UNTIL = ("((cond) => new Promise((resolve) => { const end = Date.now() + 10000; "
            "const check = () => { const v = cond(); if (v || Date.now() > end) resolve(v || null); else setTimeout(check, 20); }; "
            "check(); }))")


def js_relay(start_relay, desk: TokenDesk, *flags: str):
    """A relay that admits the page's (cross-site) origin."""
    return start_relay("--allowed-origins", desk.origin, *TOKEN_FLAGS, *flags)


@async_test
async def test_js_connect_and_show_each_kind_of_error(start_relay, desk, browser):  # noqa: F811
    """js-connect sends the token in the CONNECT auth; js-errors shows a refused CONNECT's
    `err.data.code` and `err.message` (malformed; revoked, after the backend ended the session),
    recovers from an expired token by fetching a new one, and shows `error` events; js-send
    shows error acks."""
    relay = js_relay(start_relay, desk)

    # A malformed token: refused, shown, and the client stops (socket.active is false).
    desk.serve("js-malformed", "not-a-jwt")
    app = await JsApp.start(browser, desk, relay, JS_BASE)
    try:
        refused = await app.expect("connect_error")
        assert refused["data"]["data"] == {"code": "token_malformed"} and refused["data"]["active"] is False, refused
        await app.expect("shown", code="token_malformed")
        (code, message), = await app.shown()
        assert message == refused["data"]["message"] and message, message
        assert await app.eval("socket.active") is False
        assert desk.fetched == 1
        await app.no_page_errors()
    finally:
        await app.close()

    # An expired token (the tab slept): connect_error fetches a new one and connects; nothing shown.
    desk.serve("js-expired", mint_token("js-expired", ttl=-60))
    app = await JsApp.start(browser, desk, relay, JS_BASE)
    try:
        refused = await app.expect("connect_error")
        assert refused["data"]["data"] == {"code": "token_expired"}, refused
        connected = await app.expect("connect")
        assert await sids_of(relay, "js-expired") == [connected["data"]["id"]]
        assert desk.fetched == 2 and await app.shown() == []
        await app.no_page_errors()
    finally:
        await app.close()

    # A connected user: an `error` event, an error ack, then the backend revokes the session.
    desk.serve("js-revoked", old_token("js-revoked"))
    app = await JsApp.start(browser, desk, relay, JS_BASE)
    try:
        first = await app.expect("connect")
        assert await sids_of(relay, "js-revoked") == [first["data"]["id"]], "connected with the fetched token"
        await app.eval('socket.emit("Bad_Name", { room: "conversation:42" })')
        await app.expect("shown", code="invalid_event_name")
        reply = await app.eval('send("room:join", { room: "secret:1" })')
        assert reply["ok"] is False and reply["error"]["code"] == "room_not_authorized", reply
        assert (await app.shown())[-1] == ("room_not_authorized", reply["error"]["message"])
        since = await app.mark()
        status, body = await http(relay, "POST", "/api/v1/users/js-revoked/disconnect", body={"revoke": True})
        assert status == 200 and body["disconnected"] == 1, body
        gone = await app.expect("disconnect", since=since)
        assert gone["data"]["reason"] == "transport close" and gone["data"]["code"] in (4004, None), gone
        # The client reconnects on its own with its token, which the relay now refuses.
        refused = await app.expect("connect_error", since=since)
        assert refused["data"]["data"] == {"code": "token_revoked"} and refused["data"]["active"] is False, refused
        shown = await app.shown(since)
        assert shown == [("token_revoked", refused["data"]["message"])], shown
        await app.no_page_errors()
    finally:
        await app.close()


@async_test
async def test_js_refresh_on_auth_expiring_and_reconnect_with_the_new_token(start_relay, desk, browser):  # noqa: F811
    """js-refresh: `auth:expiring` -> a new token from the backend -> `auth:refresh` (acked ok);
    the socket outlives the first token, and a reconnect after its exp succeeds because the
    `auth` function sends the new token (the old one is refused by then)."""
    relay = js_relay(start_relay, desk)
    desk.serve("js-refresh", ttl=3)
    app = await JsApp.start(browser, desk, relay, JS_REFRESH)
    try:
        first = await app.expect("connect")
        first_token = desk.issued[0]
        desk.serve("js-refresh", ttl=3600)  # what the backend mints from now on
        notice = await app.expect("event", "auth:expiring", timeout=5)
        assert 0 < notice["data"]["expiresInMs"] <= 2000, notice
        await sleep_past_exp(first_token)
        assert await metric(relay, "relay_token_refreshes_total", result="ok") == 1
        assert desk.fetched == 1, "auth:expiring fetched one new token"
        new_token = desk.issued[0]
        assert claims(new_token)["exp"] > time.time() + 600
        assert await app.eval("socket.connected") is True, "the socket outlived its first token"
        assert await app.eval("currentToken") == new_token

        since = await app.mark()
        await app.eval("socket.io.engine.close()")  # the transport drops; the client reconnects
        again = await app.expect("connect", since=since)
        assert again["data"]["id"] != first["data"]["id"]
        assert await sids_of(relay, "js-refresh") == [again["data"]["id"]]
        assert await app.seen("connect_error") == [] and await app.shown() == []
        assert desk.fetched == 1, "the reconnect used the refreshed token, no new fetch"
        # The reconnect could only succeed with the new token: the old one is refused now.
        assert (await refused_code(relay, first_token))[0] == "token_expired"
        await app.no_page_errors()
    finally:
        await app.close()


@async_test
async def test_js_rooms_in_auth_with_recovery(start_relay, desk, browser):  # noqa: F811
    """js-rooms-in-auth: in the room at connect without room:join; `loadRoom` on the first
    connect only; after a dropped transport the socket is recovered (same id, still in the room)
    and what was sent meanwhile is replayed."""
    relay = js_relay(start_relay, desk)
    desk.serve("js-rooms")
    async with Clients() as c:
        bob = await member(c, relay, "bob-rooms")
        app = await JsApp.start(browser, desk, relay, JS_ROOMS_IN_AUTH)
        try:
            first = await app.expect("connect")
            assert first["data"]["recovered"] is False, first
            await app.expect("load", room=ROOM)
            await bob.ok("chat:message", {"room": ROOM, "text": "before"})
            await app.expect("event", "chat:message", text="before")

            since = await app.mark()
            await app.eval("socket.io.engine.close()")
            await app.expect("disconnect", since=since)
            for text in ("away 1", "away 2"):  # socket.io-client waits >= 500 ms before reconnecting
                await bob.ok("chat:message", {"room": ROOM, "text": text})
            sent_at = time.time() * 1000
            again = await app.expect("connect", since=since)
            assert again["data"] == {"id": first["data"]["id"], "recovered": True}, again
            assert again["t"] > sent_at, "the page came back before the events were sent: recovery not tested"
            await app.expect("event", "chat:message", since=since, text="away 2")
            await bob.ok("chat:message", {"room": ROOM, "text": "after"})
            await app.expect("event", "chat:message", since=since, text="after")
            texts = [e["data"]["text"] for e in await app.seen("event") if e["event"] == "chat:message"]
            assert texts == ["before", "away 1", "away 2", "after"], texts
            assert len(await app.seen("load")) == 1, "no reload after a recovered reconnect"
            assert await app.shown() == []
            await app.no_page_errors()
        finally:
            await app.close()


@async_test
async def test_js_join_and_sync_after_a_reconnect(start_relay, desk, browser):  # noqa: F811
    """js-join-and-sync: after a reconnect that is a new session (kicked: never recovered) the
    connect handler rejoins and `room:sync`s from the last offset to the join's: every message
    is shown exactly once, in order."""
    relay = js_relay(start_relay, desk)
    desk.serve("js-sync")
    async with Clients() as c:
        bob = await member(c, relay, "bob-sync")
        app = await JsApp.start(browser, desk, relay, JS_JOIN_AND_SYNC)
        try:
            await app.expect("connect")
            # The join's ack came back (it set lastOffset); the race of a message with the join
            # itself is the last test's.
            joined_at = await app.eval(f"{JS_UNTIL}(() => lastOffset[{json.dumps(ROOM)}])")
            assert joined_at, "the room:join ack"
            await bob.ok("chat:message", {"room": ROOM, "text": "m1"})
            await app.expect("message", text="m1")
            assert await app.eval(f"lastOffset[{json.dumps(ROOM)}]") not in (None, joined_at), "the offset came with m1"

            since = await app.mark()
            await kick(relay, "js-sync")
            await app.expect("disconnect", since=since)
            for text in ("m2", "m3"):  # while it is away
                await bob.ok("chat:message", {"room": ROOM, "text": text})
            sent_at = time.time() * 1000
            again = await app.expect("connect", since=since)
            assert again["data"]["recovered"] is False, again
            assert again["t"] > sent_at, "the page came back before m2, m3 were sent: room:sync not tested"
            await app.expect("message", since=since, text="m3")
            await bob.expect("presence:join", user="js-sync")
            await bob.ok("chat:message", {"room": ROOM, "text": "m4"})
            await app.expect("message", since=since, text="m4")
            shown = [e["data"]["text"] for e in await app.seen("message")]
            assert shown == ["m1", "m2", "m3", "m4"], shown
            assert await app.seen("load") == [] and await app.shown() == []
            await app.no_page_errors()
        finally:
            await app.close()


@async_test
async def test_js_binary(start_relay, desk, browser):  # noqa: F811
    """js-binary: the Uint8Array reaches a python member as the same bytes; bytes from python
    reach the page as an ArrayBuffer."""
    relay = js_relay(start_relay, desk)
    desk.serve("js-bin")
    async with Clients() as c:
        bob = await member(c, relay, "bob-bin")
        app = await JsApp.start(browser, desk, relay, JS_BINARY)
        try:
            got = await bob.expect("file:chunk", name="photo.png")
            assert got["data"] == PNG and got["seq"] == 0 and got["from"] == "js-bin", got
            await bob.ok("file:chunk", {"room": ROOM, "name": "reply.bin", "seq": 0, "data": bytes(range(256)) * 4})
            shown = await app.expect("message", text="reply.bin: 1024 bytes")
            assert shown["data"]["from"] == "bob-bin", shown
            event = await app.expect("event", "file:chunk", name="reply.bin")
            assert base64.b64decode(event["data"]["data"]["$bytes"]) == bytes(range(256)) * 4
            assert await app.shown() == []
            await app.no_page_errors()
        finally:
            await app.close()


# --------------------------------------------------------------------------------------------
# Python samples with python-socketio


class PyApp:
    """python.md's samples run in one namespace, as the reader's module would be."""

    def __init__(self, relay, desk: TokenDesk):
        self.relay = relay
        self.shown: list[tuple[str, str]] = []
        self.messages: list[dict] = []
        self.loaded: list[str] = []
        self.events: list[tuple[str, tuple, float]] = []  # (event, args, time) the samples' client handled
        self.changed = asyncio.Event()
        self.ns: dict[str, Any] = {
            "__name__": "python_md", "RELAY_URL": relay.url, "BACKEND_URL": desk.origin,
            "show_error": lambda code, message: self._note(self.shown, (code, message)),
            "show_message": lambda msg: self._note(self.messages, msg),
            "load_room": lambda room: self._note(self.loaded, room),
        }

    def _note(self, where: list, item: Any) -> None:
        where.append(item)
        self.changed.set()

    async def run(self, *names: str) -> None:
        for name in names:
            code = compile(PY[name][1], f"python.md:{name}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(code, self.ns)  # noqa: S307 - the guide's own sample
            if inspect.iscoroutine(result):
                await asyncio.wait_for(result, TIMEOUT + 5)
            if name == "py-client":
                self._trace(self.ns["sio"])

    def _trace(self, sio) -> None:
        """Records every event the client handles (connect, connect_error, disconnect, and the
        relay's events), after its handler ran."""
        handle = sio._trigger_event

        async def traced(event, namespace, *args):
            try:
                return await handle(event, namespace, *args)
            finally:
                self._note(self.events, (event, args, time.time()))

        sio._trigger_event = traced

    def named(self, event: str) -> list[tuple]:
        return [args for e, args, _ in self.events if e == event]

    def times(self, event: str) -> list[float]:
        return [t for e, _, t in self.events if e == event]

    async def until(self, what: str, cond: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not (value := cond()):
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"no {what} within {timeout} s; events {self.events}; shown {self.shown}; "
                                     f"messages {self.messages}")
            self.changed.clear()
            try:  # woken by what the client handles or the UI shows; state such as
                # `last_offset` is looked at again every 50 ms
                await asyncio.wait_for(self.changed.wait(), min(remaining, 0.05))
            except asyncio.TimeoutError:
                pass
        return value

    async def close(self) -> None:
        sio = self.ns.get("sio")
        if sio is not None:
            await asyncio.wait_for(sio.shutdown(), TIMEOUT)


@async_test
async def test_python_connect_and_show_each_kind_of_error(start_relay, desk):
    """py-connect sends the token in the CONNECT auth; py-errors shows a refused CONNECT's code
    and message (malformed: `connect()` raises; revoked: the automatic reconnect is refused and
    stopped), an `error` event and an error ack; an expired token during reconnection is
    replaced by a fresh one and the client comes back."""
    relay = start_relay(*TOKEN_FLAGS)

    desk.serve("py-malformed", "not-a-jwt")
    app = PyApp(relay, desk)
    try:
        await app.run(*PY_BASE)
        with pytest.raises(socketio.exceptions.ConnectionError):
            await app.run("py-connect")
        assert [code for code, _ in app.shown] == ["token_malformed"], app.shown
        assert app.shown[0][1] and app.named("connect_error")[0][0]["message"] == app.shown[0][1]
    finally:
        await app.close()

    desk.serve("py-revoked", old_token("py-revoked"))
    app = PyApp(relay, desk)
    try:
        await app.run(*PY_CONNECT)
        assert app.ns["sio"].connected and await sids_of(relay, "py-revoked") == [app.ns["sio"].get_sid()]
        await app.ns["sio"].emit("Bad_Name", {"room": ROOM})
        await app.until("invalid_event_name shown", lambda: [s for s in app.shown if s[0] == "invalid_event_name"])
        reply = await app.ns["call"]("room:join", {"room": "secret:1"})
        assert reply["ok"] is False and app.shown[-1] == ("room_not_authorized", reply["error"]["message"]), app.shown
        status, body = await http(relay, "POST", "/api/v1/users/py-revoked/disconnect", body={"revoke": True})
        assert status == 200 and body["disconnected"] == 1, body
        await app.until("token_revoked shown", lambda: [s for s in app.shown if s[0] == "token_revoked"])
        # The handler stopped the reconnection: nothing more is tried.
        await app.until("the final disconnect", lambda: app.named("__disconnect_final"), timeout=TIMEOUT)
        assert [s[0] for s in app.shown].count("token_revoked") == 1, app.shown
        assert not app.ns["sio"].connected and await sids_of(relay, "py-revoked") == []
    finally:
        await app.close()

    # The token expires on a live socket that does not refresh it: closed (4005), the automatic
    # reconnect is refused (token_expired), the handler fetches a new token, the next attempt
    # connects.
    desk.serve("py-expired", ttl=2)
    app = PyApp(relay, desk)
    try:
        await app.run(*PY_CONNECT)
        desk.serve("py-expired", ttl=3600)
        await app.until("auth:expired", lambda: app.named("auth:expired"), timeout=5)
        await app.until("token_expired refusal", lambda: [a for a in app.named("connect_error")
                                                          if a and isinstance(a[0], dict)], timeout=TIMEOUT)
        assert app.named("connect_error")[-1][0]["data"] == {"code": "token_expired"}
        await app.until("the second connect", lambda: len(app.named("connect")) == 2, timeout=TIMEOUT)
        assert await sids_of(relay, "py-expired") == [app.ns["sio"].get_sid()]
        assert desk.fetched == 1 and app.shown == [], app.shown
    finally:
        await app.close()


@async_test
async def test_python_refresh_on_auth_expiring_and_reconnect_with_the_new_token(start_relay, desk):
    """py-refresh: `auth:expiring` -> a new token -> `auth:refresh` acked ok; the socket outlives
    the first token, and after the relay drops it the automatic reconnect succeeds because
    `auth()` returns the new token (the old one is refused by then)."""
    relay = start_relay(*TOKEN_FLAGS)
    desk.serve("py-refresh", ttl=3)
    app = PyApp(relay, desk)
    try:
        await app.run(*PY_REFRESH)
        first_token = desk.issued[0]
        desk.serve("py-refresh", ttl=3600)
        notice = (await app.until("auth:expiring", lambda: app.named("auth:expiring"), timeout=5))[0][0]
        assert 0 < notice["expiresInMs"] <= 2000, notice
        await sleep_past_exp(first_token)
        assert await metric(relay, "relay_token_refreshes_total", result="ok") == 1
        assert desk.fetched == 1 and app.ns["current_token"] == desk.issued[0]
        assert app.ns["sio"].connected, "the socket outlived its first token"

        await kick(relay, "py-refresh")
        await app.until("the reconnect", lambda: len(app.named("connect")) == 2)
        assert await sids_of(relay, "py-refresh") == [app.ns["sio"].get_sid()]
        assert app.named("connect_error") == [] and app.shown == []
        assert desk.fetched == 1, "the reconnect used the refreshed token"
        assert (await refused_code(relay, first_token))[0] == "token_expired"
    finally:
        await app.close()


@async_test
async def test_python_rooms_in_auth(start_relay, desk):
    """py-rooms-in-auth: in the room when connect() returns, without room:join, and again after
    an automatic reconnect; `load_room` on each connect."""
    relay = start_relay(*TOKEN_FLAGS)
    desk.serve("py-rooms")
    async with Clients() as c:
        bob = await member(c, relay, "bob-py-rooms")
        app = PyApp(relay, desk)
        try:
            await app.run(*PY_ROOMS_IN_AUTH)
            assert app.loaded == [ROOM]
            await bob.ok("chat:message", {"room": ROOM, "text": "hello"})
            await app.until("hello", lambda: [a for a in app.named("chat:message") if a[0]["text"] == "hello"])
            await kick(relay, "py-rooms")
            await app.until("the reconnect", lambda: len(app.named("connect")) == 2)
            assert app.loaded == [ROOM, ROOM]
            await bob.expect("presence:join", user="py-rooms")
            await bob.ok("chat:message", {"room": ROOM, "text": "again"})
            await app.until("again", lambda: [a for a in app.named("chat:message") if a[0]["text"] == "again"])
            assert app.shown == []
        finally:
            await app.close()


@async_test
async def test_python_join_and_sync_after_a_reconnect(start_relay, desk):
    """py-join-and-sync: events carry offsets (`recover: True`); after a reconnect the connect
    handler rejoins and `room:sync`s what was missed: every message shown once, in order."""
    relay = start_relay(*TOKEN_FLAGS)
    desk.serve("py-sync")
    async with Clients() as c:
        bob = await member(c, relay, "bob-py-sync")
        app = PyApp(relay, desk)
        try:
            await app.run(*PY_JOIN_AND_SYNC)
            # The join's ack came back (it set last_offset); the race is the last test's.
            joined_at = await app.until("the room:join ack", lambda: app.ns["last_offset"].get(ROOM))
            await bob.ok("chat:message", {"room": ROOM, "text": "m1"})
            await app.until("m1", lambda: [m for m in app.messages if m["text"] == "m1"])
            assert app.ns["last_offset"][ROOM] != joined_at, "the offset came with m1"

            await kick(relay, "py-sync")
            await app.until("the disconnect", lambda: app.named("disconnect"))
            for text in ("m2", "m3"):  # python-socketio waits >= 0.5 s before reconnecting
                await bob.ok("chat:message", {"room": ROOM, "text": text})
            sent_at = time.time()
            await app.until("m3", lambda: [m for m in app.messages if m["text"] == "m3"])
            assert app.times("connect")[1] > sent_at, "came back before m2, m3 were sent: room:sync not tested"
            assert [m["text"] for m in app.messages] == ["m1", "m2", "m3"], "m2, m3 from room:sync"
            await bob.expect("presence:join", user="py-sync")
            await bob.ok("chat:message", {"room": ROOM, "text": "m4"})
            await app.until("m4", lambda: [m for m in app.messages if m["text"] == "m4"])
            assert [m["text"] for m in app.messages] == ["m1", "m2", "m3", "m4"], app.messages
            assert len(app.named("connect")) == 2 and app.loaded == [] and app.shown == []
        finally:
            await app.close()


@async_test
async def test_python_binary(start_relay, desk):
    """py-binary: the bytes reach another member unchanged; bytes sent back are received as
    bytes."""
    relay = start_relay(*TOKEN_FLAGS)
    desk.serve("py-bin")
    async with Clients() as c:
        bob = await member(c, relay, "bob-py-bin")
        app = PyApp(relay, desk)
        try:
            await app.run(*PY_BINARY)
            got = await bob.expect("file:chunk", name="photo.png")
            assert got["data"] == PNG and got["seq"] == 0 and got["from"] == "py-bin", got
            await bob.ok("file:chunk", {"room": ROOM, "name": "reply.bin", "seq": 0, "data": bytes(range(256)) * 4})
            await app.until("reply.bin", lambda: {"from": "bob-py-bin", "text": "reply.bin: 1024 bytes"} in app.messages)
            assert app.named("file:chunk")[0][0]["data"] == bytes(range(256)) * 4
            assert app.shown == []
        finally:
            await app.close()


@async_test
async def test_python_sync_client(start_relay, desk):
    """py-sync-client: socketio.Client with a callable auth connects and joins (in a thread)."""
    relay = start_relay(*TOKEN_FLAGS)
    desk.serve("py-sync-client")
    ns: dict[str, Any] = {"__name__": "python_md_sync", "RELAY_URL": relay.url, "BACKEND_URL": desk.origin}
    code = compile(PY["py-sync-client"][1], "python.md:py-sync-client", "exec")
    await asyncio.wait_for(asyncio.to_thread(exec, code, ns), TIMEOUT + 5)
    assert ns["reply"]["ok"] is True and {"user": "py-sync-client", "devices": 1} in ns["reply"]["presence"], ns["reply"]
    assert not ns["client"].connected and desk.fetched == 1


# --------------------------------------------------------------------------------------------
# A message racing a join (module docstring)


@async_test
async def test_an_event_sent_as_a_socket_joins_is_never_lost(start_relay):
    """python-socketio opts in (`recover: True`) and joins in its connect handler, as
    py-join-and-sync does; a member sends a message as soon as it sees the joiner's
    presence:join. The joiner must get it live, or from `room:sync` after the join's offset.
    Up to 150 rounds, each with a fresh room; stops at the first loss."""
    relay = start_relay("--events-per-second", "1000", "--event-burst", "1000", "--rate", "control=1000:1000",
                        "--rate", "custom=1000:1000", "--packets-per-second", "2000")
    async with Clients() as c:
        bob = await c.connect(relay, "bob-race")
        for k in range(150):
            room = f"conversation:race-{k}"
            await bob.join(room)
            got = asyncio.Event()
            acks: list[dict] = []
            sio = socketio.AsyncClient(reconnection=False, handle_sigint=False)
            sio.on("chat:message", lambda msg, offset=None: got.set())

            async def join(sio=sio, room=room, acks=acks):
                acks.append(await sio.call("room:join", {"room": room}, timeout=TIMEOUT))

            sio.on("connect", lambda sio=sio, join=join: sio.start_background_task(join))
            await sio.connect(relay.url, auth={"token": mint_token(f"amy-race-{k}"), "recover": True},
                              transports=["websocket"], wait_timeout=TIMEOUT)
            try:
                await bob.expect("presence:join", user=f"amy-race-{k}", room=room)
                await bob.ok("chat:message", {"room": room, "text": f"m{k}"})
                try:
                    await asyncio.wait_for(got.wait(), 1.0)
                    continue
                except asyncio.TimeoutError:
                    pass
                assert acks and acks[0]["ok"], acks
                synced = await sio.call("room:sync", {"room": room, "offset": acks[0]["offset"]}, timeout=TIMEOUT)
                assert [e[1]["text"] for e in synced["events"] if e[0] == "chat:message"] == [f"m{k}"], (
                    f"round {k}: m{k} was neither delivered live nor in room:sync after the join's offset "
                    f"{acks[0]['offset']}: {synced}")
            finally:
                await sio.disconnect()
                await bob.ok("room:leave", {"room": room})  # under the 100 rooms a connection may hold
