"""The official Socket.IO browser client (socket.io-client 4.8.1) in headless Chromium, driven
over CDP, and what the stock-client tests share.

**The bundle.** socket.io-client's browser bundle is not on PyPI or Debian by itself; it ships
inside PyPI's `nicegui==3.18.0` wheel as `nicegui/static/socket.io.min.js`. `socketio_bundle()`
downloads that wheel once (`pip download --no-deps`, pinned), extracts only that file into the
git-ignored `Tests/e2e/.cache/`, and checks it against the sha256 recorded below and its
`Socket.IO v4.8.1` banner before any test runs it. A cached copy is re-checked on every use.

**The page and its Origin.** `PageServer` serves a tiny page (and the bundle) from a Python
http.server on 127.0.0.1, on a port of its own. To Relay that page is a *cross-site* origin
(`http://127.0.0.1:<page port>` is not the relay's own host:port), which is how apps are
deployed (app.example.com talking to relay.example.com): the relay under test is started with
`--allowed-origins <page origin>`. So these tests also cover the Origin policy and, once
long-polling lands, its CORS answers (a cross-origin XHR poll needs
`Access-Control-Allow-Origin`).

**Driving it.** `BrowserPage` opens sockets with `io(url, opts)` in the page, emits (with
acks), reads `socket.connected`, `socket.id`, `socket.io.engine.transport.name`,
`socket.recovered`, forces `socket.io.engine.close()`, and waits for what the page saw. The
page records everything in `window.relay.seen`; waiting is a promise in the page that settles
when a matching record arrives or its deadline passes (no sleeps).

Binary data crosses the CDP boundary as `{"$bytes": "<base64>"}` both ways: an ArrayBuffer the
page receives is recorded so, and such an object in `emit` data becomes an ArrayBuffer.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import tempfile
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cdp import Browser, Page
from helpers import TIMEOUT, run

# --------------------------------------------------------------------------------------------
# The pinned bundle

BUNDLE_VERSION = "4.8.1"
BUNDLE_WHEEL = "nicegui==3.18.0"
BUNDLE_MEMBER = "nicegui/static/socket.io.min.js"
# sha256 of nicegui-3.18.0-py3-none-any.whl's nicegui/static/socket.io.min.js (46 831 bytes).
BUNDLE_SHA256 = "b0e735814f8dcfecd6cdb8a7ce95a297a7e1e5f2727a29e6f5901801d52fa0c5"
CACHE_DIR = Path(__file__).resolve().parent / ".cache"
PIP_TIMEOUT = 300


def _verified(data: bytes, where: str) -> bytes:
    digest = hashlib.sha256(data).hexdigest()
    assert digest == BUNDLE_SHA256, (
        f"{where}: sha256 {digest} is not the recorded {BUNDLE_SHA256} of socket.io-client {BUNDLE_VERSION}")
    assert f"Socket.IO v{BUNDLE_VERSION}".encode() in data[:200], f"{where}: no `Socket.IO v{BUNDLE_VERSION}` banner"
    return data


def socketio_bundle() -> Path:
    """The verified socket.io-client browser bundle, fetched into the cache on first use."""
    target = CACHE_DIR / f"socket.io-{BUNDLE_VERSION}.min.js"
    if target.exists():
        _verified(target.read_bytes(), str(target))
        return target
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="wheel-", dir=CACHE_DIR) as tmp:
        r = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
             "-q", BUNDLE_WHEEL, "-d", tmp],
            capture_output=True, text=True, timeout=PIP_TIMEOUT, stdin=subprocess.DEVNULL)
        wheels = sorted(Path(tmp).glob("nicegui-*.whl"))
        if r.returncode != 0 or not wheels:
            pytest.fail(f"could not download {BUNDLE_WHEEL} (it carries socket.io-client {BUNDLE_VERSION}): "
                        f"pip exited {r.returncode}\n{r.stdout}\n{r.stderr}", pytrace=False)
        with zipfile.ZipFile(wheels[0]) as wheel:
            data = _verified(wheel.read(BUNDLE_MEMBER), f"{wheels[0].name}:{BUNDLE_MEMBER}")
        partial = target.with_suffix(".part")
        partial.write_bytes(data)
        partial.replace(target)
    return target


# --------------------------------------------------------------------------------------------
# The test page

PAGE_HTML = """<!doctype html>
<meta charset="utf-8">
<title>relay: stock socket.io-client</title>
<script src="/socket.io.min.js"></script>
<script>
(() => {
  const seen = [], waiters = [], sockets = {};
  const toB64 = (u8) => { let s = ""; for (let i = 0; i < u8.length; i++) s += String.fromCharCode(u8[i]); return btoa(s); };
  const fromB64 = (b) => { const s = atob(b), u8 = new Uint8Array(s.length); for (let i = 0; i < s.length; i++) u8[i] = s.charCodeAt(i); return u8.buffer; };
  const encode = (v) => {
    if (v instanceof ArrayBuffer) return {$bytes: toB64(new Uint8Array(v))};
    if (ArrayBuffer.isView(v)) return {$bytes: toB64(new Uint8Array(v.buffer, v.byteOffset, v.byteLength))};
    if (Array.isArray(v)) return v.map(encode);
    if (v && typeof v === "object") { const o = {}; for (const k of Object.keys(v)) o[k] = encode(v[k]); return o; }
    return v;
  };
  const decode = (v) => {
    if (Array.isArray(v)) return v.map(decode);
    if (v && typeof v === "object") {
      if (typeof v.$bytes === "string" && Object.keys(v).length === 1) return fromB64(v.$bytes);
      const o = {}; for (const k of Object.keys(v)) o[k] = decode(v[k]); return o;
    }
    return v;
  };
  // Errors, close events and XHRs as plain data (what CDP can return by value).
  const describe = (d, depth = 0) => {
    if (d === undefined || d === null || typeof d !== "object") return d === undefined ? null : d;
    if (depth > 2) return String(d);
    const o = {};
    for (const k of ["message", "type", "code", "reason", "wasClean", "status", "statusText", "description", "data"]) {
      if (d[k] !== undefined && typeof d[k] !== "function") o[k] = describe(d[k], depth + 1);
    }
    if (d.context !== undefined) o.context = describe(d.context, depth + 1);
    if (typeof d.responseText === "string") o.responseText = d.responseText.slice(0, 500);
    return o;
  };
  const matches = (e, f) => {
    for (const k of ["socket", "kind", "event"]) {
      if (f[k] === undefined || f[k] === null) continue;
      if (Array.isArray(f[k]) ? !f[k].includes(e[k]) : e[k] !== f[k]) return false;
    }
    if (f.fields) {
      const d = e.kind === "event" ? (e.args || [])[0] : e.data;
      if (!d || typeof d !== "object") return false;
      for (const [k, v] of Object.entries(f.fields)) if (JSON.stringify(d[k]) !== JSON.stringify(v)) return false;
    }
    return true;
  };
  const record = (socket, kind, extra) => {
    const e = Object.assign({i: seen.length, t: Date.now(), socket, kind}, extra);
    seen.push(e);
    for (const w of waiters.slice()) {
      if (e.i >= w.from && matches(e, w.filter)) { waiters.splice(waiters.indexOf(w), 1); clearTimeout(w.timer); w.resolve(e); }
    }
  };
  window.addEventListener("error", (ev) => record(null, "page_error", {data: {message: String(ev.message)}}));
  window.addEventListener("unhandledrejection", (ev) => record(null, "page_error", {data: {message: String(ev.reason)}}));

  const state = (s) => {
    const eng = s.io.engine;
    return {connected: s.connected, active: s.active, id: s.id === undefined ? null : s.id,
            // undefined (null here) unless the server offered connection state recovery (a `pid`)
            recovered: s.recovered === undefined ? null : s.recovered,
            transport: eng && eng.transport ? eng.transport.name : null, readyState: eng ? eng.readyState : null};
  };

  window.relay = {
    seen,
    open(name, url, opts) {
      const s = io(url, decode(opts || {}));
      sockets[name] = s;
      const hookEngine = () => {
        const eng = s.io.engine;
        if (!eng || eng.__relayHooked) return;
        eng.__relayHooked = true;
        record(name, "engine_open", {data: {transport: eng.transport ? eng.transport.name : null}});
        eng.on("upgrade", (t) => record(name, "upgrade", {data: {transport: t.name}}));
        eng.on("upgradeError", (err) => record(name, "upgrade_error", {data: describe(err)}));
        eng.on("close", (reason, desc) => record(name, "engine_close", {data: {reason, description: describe(desc)}}));
      };
      s.io.on("open", hookEngine);
      s.io.on("reconnect_attempt", (n) => record(name, "reconnect_attempt", {data: {attempt: n}}));
      s.io.on("error", (err) => record(name, "manager_error", {data: describe(err)}));
      s.on("connect", () => { hookEngine(); record(name, "connect", {data: state(s)}); });
      s.on("connect_error", (err) => record(name, "connect_error", {data: describe(err)}));
      s.on("disconnect", (reason, details) => record(name, "disconnect", {data: {reason, details: describe(details)}}));
      s.onAny((event, ...args) => record(name, "event", {event, args: encode(args)}));
      return seen.length;
    },
    emit(name, event, data) { sockets[name].emit(event, decode(data)); return true; },
    emitAck(name, event, data, timeoutMs) {
      return new Promise((resolve) => sockets[name].timeout(timeoutMs).emit(event, decode(data), (err, reply) =>
        resolve(err ? {error: String(err && err.message || err)} : {reply: encode(reply)})));
    },
    state(name) { return state(sockets[name]); },
    forceClose(name) { sockets[name].io.engine.close(); return true; },
    disconnect(name) { sockets[name].disconnect(); return true; },
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


class PageServer:
    """Serves the test page at `/` and the verified bundle at `/socket.io.min.js` on
    127.0.0.1 (its own port: a cross-site origin for the relay). Stopped by `stop()`."""

    def __init__(self, bundle: Path):
        body = {"/": (PAGE_HTML.encode(), "text/html; charset=utf-8"),
                "/socket.io.min.js": (bundle.read_bytes(), "application/javascript; charset=utf-8")}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                if path not in body:
                    self.send_error(404)
                    return
                data, ctype = body[path]
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="page-server", daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.origin + "/"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


# --------------------------------------------------------------------------------------------
# Features Relay does not serve yet (see the xfail markers of the stock-client tests)


class PollingNotServed(AssertionError):
    """The relay answered a long-polling request with `transport_unsupported`."""


class BinaryNotServed(AssertionError):
    """The relay refused a binary attachment (`binary_not_supported`, or close 1003)."""


async def polling_refusal(base_url: str, origin: str | None = None) -> str | None:
    """The relay's refusal of a long-polling handshake (`"HTTP 400 transport_unsupported"`), or
    None when it serves one. Asked directly (not through a browser: a refusal without CORS
    headers is opaque to a cross-origin page)."""
    headers = {"Origin": origin} if origin else {}
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as session:
        async with session.get(f"{base_url}/socket.io/?EIO=4&transport=polling", headers=headers) as resp:
            text = await resp.text()
    try:
        code = json.loads(text)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None
    return f"HTTP {resp.status} {code}" if code == "transport_unsupported" else None


async def raise_if_polling_not_served(base_url: str, origin: str | None, what: str) -> None:
    refusal = await polling_refusal(base_url, origin)
    if refusal:
        raise PollingNotServed(f"{what}; GET /socket.io/?EIO=4&transport=polling answers {refusal}")


# --------------------------------------------------------------------------------------------
# Driving the page


def b64bytes(data: bytes) -> dict:
    """Bytes as the page's `{"$bytes": base64}`."""
    return {"$bytes": base64.b64encode(data).decode("ascii")}


def unbytes(value: Any) -> Any:
    """The page's `{"$bytes": base64}` objects back to bytes (recursively)."""
    if isinstance(value, list):
        return [unbytes(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return base64.b64decode(value["$bytes"])
        return {k: unbytes(v) for k, v in value.items()}
    return value


class BrowserPage:
    """One tab of the test page, with the sockets it opened (by name)."""

    def __init__(self, browser: Browser, page: Page, server: PageServer):
        self.browser = browser
        self.page = page
        self.server = server
        self.urls: dict[str, str] = {}

    @classmethod
    async def open(cls, browser: Browser, server: PageServer) -> "BrowserPage":
        page = await browser.new_page()
        try:
            await page.navigate(server.url)
            assert await page.evaluate("document.title") == "ready", "the test page did not initialise"
            assert await page.evaluate("typeof io") == "function", "socket.io.min.js did not load"
        except BaseException:
            await browser.close_page(page)
            raise
        return cls(browser, page, server)

    async def close(self) -> None:
        await self.browser.close_page(self.page)

    async def js(self, expression: str, timeout: float = TIMEOUT + 5):
        return await self.page.evaluate(expression, timeout=timeout)

    async def seen(self, socket: str | None = None) -> list[dict]:
        """Everything the page recorded (for one socket, or all)."""
        entries = await self.js("window.relay.seen")
        return [e for e in entries if socket is None or e.get("socket") == socket]

    async def wait(self, socket: str | None = None, kind: str | list[str] | None = None, event: str | None = None,
                   since: int = 0, timeout: float = TIMEOUT, **fields) -> dict | None:
        """The first record at index >= `since` that matches, or None after `timeout`."""
        flt = {"socket": socket, "kind": kind, "event": event, "fields": fields or None}
        expr = f"window.relay.wait({json.dumps(flt)}, {int(since)}, {int(timeout * 1000)})"
        return await self.js(expr, timeout=timeout + 5)

    async def expect(self, socket: str, kind: str | list[str] = "event", event: str | None = None,
                     since: int = 0, timeout: float = TIMEOUT, **fields) -> dict:
        hit = await self.wait(socket, kind, event, since, timeout, **fields)
        if hit is None:
            raise AssertionError(f"{socket}: no {kind} {event or ''} {fields or ''} within {timeout} s; "
                                 f"the page saw: {json.dumps(await self.seen(socket))[-4000:]}")
        return hit

    async def expect_event(self, socket: str, event: str, since: int = 0, timeout: float = TIMEOUT, **fields) -> Any:
        """The data (first argument, bytes decoded) of the next matching event."""
        hit = await self.expect(socket, "event", event, since, timeout, **fields)
        return unbytes(hit["args"][0] if hit["args"] else None)

    async def mark(self) -> int:
        """The index the next record will have (wait from here for what happens next)."""
        return await self.js("window.relay.seen.length")

    async def connect(self, name: str, url: str, opts: dict | None = None, timeout: float = TIMEOUT) -> dict:
        """`io(url, opts)` in the page; returns the socket's state once `connect` fired. A
        `connect_error` first fails (as `PollingNotServed` when the relay refuses polling)."""
        since = await self.js(f"window.relay.open({json.dumps(name)}, {json.dumps(url)}, {json.dumps(opts or {})})")
        self.urls[name] = url
        return await self.connected(name, since, timeout)

    async def connected(self, name: str, since: int, timeout: float = TIMEOUT) -> dict:
        hit = await self.wait(name, ["connect", "connect_error"], since=since, timeout=timeout)
        if hit is None or hit["kind"] != "connect":
            what = (f"browser socket {name}: connect_error {json.dumps(hit['data'])}" if hit
                    else f"browser socket {name}: no connect within {timeout} s")
            await raise_if_polling_not_served(self.urls[name], self.server.origin, what)
            raise AssertionError(f"{what}; the page saw: {json.dumps(await self.seen(name))[-4000:]}")
        return hit["data"]

    async def state(self, name: str) -> dict:
        return await self.js(f"window.relay.state({json.dumps(name)})")

    async def emit(self, name: str, event: str, data: Any = None) -> None:
        await self.js(f"window.relay.emit({json.dumps(name)}, {json.dumps(event)}, {json.dumps(data)})")

    async def call(self, name: str, event: str, data: Any = None, timeout: float = TIMEOUT) -> Any:
        """Emits with an ack; returns the ack's first argument (bytes decoded). Raises when no
        ack came within `timeout` (socket.io-client's own `timeout()`)."""
        result = await self.js(
            f"window.relay.emitAck({json.dumps(name)}, {json.dumps(event)}, {json.dumps(data)}, {int(timeout * 1000)})",
            timeout=timeout + 5)
        if "error" in result:
            raise AssertionError(f"browser socket {name}: {event} got no ack: {result['error']}; "
                                 f"the page saw: {json.dumps(await self.seen(name))[-4000:]}")
        return unbytes(result.get("reply"))

    async def ok(self, name: str, event: str, data: Any = None) -> dict:
        reply = await self.call(name, event, data)
        assert isinstance(reply, dict) and reply.get("ok") is True, f"browser socket {name}: {event} {data} -> {reply}"
        return reply

    async def force_close(self, name: str) -> None:
        """`socket.io.engine.close()`: the transport goes; the Manager reconnects by itself."""
        await self.js(f"window.relay.forceClose({json.dumps(name)})")

    async def disconnect(self, name: str) -> None:
        await self.js(f"window.relay.disconnect({json.dumps(name)})")


# --------------------------------------------------------------------------------------------
# Fixtures (import them into a test module: `from browser_client import browser, page_server`)


@pytest.fixture(scope="module")
def page_server():
    server = PageServer(socketio_bundle())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium per module (each test opens its own tab), stopped by pid."""
    b = Browser()
    try:
        run(b.start("about:blank"), timeout=90)
        yield b
    finally:
        b.stop()

