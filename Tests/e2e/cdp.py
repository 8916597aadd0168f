"""A tiny Chrome DevTools Protocol client for headless Chromium (Debian's `chromium`)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections import deque

import aiohttp
from websockets.asyncio.client import connect as ws_connect

DEVTOOLS = re.compile(r"DevTools listening on (ws://[^\s]+)")


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """Headless Chromium started by the test and stopped by its pid."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.profile = tempfile.mkdtemp(prefix="relay-chromium-")
        self.port: int | None = None
        # The last lines Chromium wrote to stderr (for failure messages). Read continuously
        # once it started, so a browser kept for a whole module never blocks on a full pipe.
        self.stderr_tail: deque[str] = deque(maxlen=200)

    def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.stderr_tail.append(raw.decode("utf-8", "replace").rstrip())

    async def start(self, url: str, timeout: float = 60) -> "Browser":
        binary = chromium_binary()
        assert binary, "chromium is not installed (apt-get install chromium)"
        args = [binary, "--headless=new", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1", f"--user-data-dir={self.profile}",
                "--window-size=1280,900", "--disable-extensions", "--disable-background-networking", url]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        stderr = self.proc.stderr
        while True:
            assert loop.time() < deadline, "chromium did not start"
            line = await asyncio.wait_for(loop.run_in_executor(None, stderr.readline), max(0.1, deadline - loop.time()))
            if not line:
                raise AssertionError(f"chromium exited with {self.proc.poll()}")
            m = DEVTOOLS.search(line.decode("utf-8", "replace"))
            if m:
                self.port = int(re.search(r":(\d+)/", m.group(1)).group(1))
                threading.Thread(target=self._drain_stderr, name=f"chromium-stderr-{self.proc.pid}", daemon=True).start()
                return self

    async def new_page(self, timeout: float = 30) -> "Page":
        """Opens a new tab (about:blank) and returns its page; close it with `close_page`."""
        async with aiohttp.ClientSession(trust_env=False, timeout=aiohttp.ClientTimeout(total=timeout)) as http:
            async with http.put(f"http://127.0.0.1:{self.port}/json/new?about:blank") as r:
                assert r.status == 200, f"/json/new: HTTP {r.status} {await r.text()}"
                target = await r.json()
        page = await Page.open(target["webSocketDebuggerUrl"])
        page.target_id = target["id"]
        return page

    async def close_page(self, page: "Page", timeout: float = 30) -> None:
        """Closes a tab opened by `new_page` (its sockets go with it)."""
        await page.close()
        if page.target_id is None:
            return
        async with aiohttp.ClientSession(trust_env=False, timeout=aiohttp.ClientTimeout(total=timeout)) as http:
            async with http.get(f"http://127.0.0.1:{self.port}/json/close/{page.target_id}") as r:
                await r.read()

    async def page(self, url_prefix: str, timeout: float = 30) -> "Page":
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        async with aiohttp.ClientSession(trust_env=False) as http:
            while True:
                async with http.get(f"http://127.0.0.1:{self.port}/json/list") as r:
                    targets = await r.json()
                for t in targets:
                    if t.get("type") == "page" and t.get("url", "").startswith(url_prefix):
                        return await Page.open(t["webSocketDebuggerUrl"])
                assert loop.time() < deadline, f"no page for {url_prefix}: {targets}"
                # The page target appears when navigation starts: ask again at the next tick.
                await asyncio.sleep(0.05)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.target_id: str | None = None

    @classmethod
    async def open(cls, url: str) -> "Page":
        return cls(await ws_connect(url, max_size=None, ping_interval=None))

    async def call(self, method: str, params: dict | None = None, timeout: float = 30) -> dict:
        self.next_id += 1
        my_id = self.next_id
        await self.ws.send(json.dumps({"id": my_id, "method": method, "params": params or {}}))
        while True:
            msg = json.loads(await asyncio.wait_for(self.ws.recv(), timeout))
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return msg["result"]

    async def navigate(self, url: str, timeout: float = 30) -> None:
        """Loads `url` and returns once its load event fired (so scripts run in a settled page)."""
        await self.call("Page.enable")
        self.next_id += 1
        nav_id = self.next_id
        await self.ws.send(json.dumps({"id": nav_id, "method": "Page.navigate", "params": {"url": url}}))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            msg = json.loads(await asyncio.wait_for(self.ws.recv(), max(0.1, deadline - loop.time())))
            if msg.get("id") == nav_id and "error" in msg:
                raise AssertionError(f"Page.navigate: {msg['error']}")
            if msg.get("method") == "Page.loadEventFired":
                return

    async def evaluate(self, expression: str, timeout: float = 30):
        """Evaluates JS in the page, awaiting a promise if it returns one; returns the value."""
        result = await self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}, timeout)
        if "exceptionDetails" in result:
            raise AssertionError(f"JS exception: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def screenshot(self, path: str) -> None:
        result = await self.call("Page.captureScreenshot", {"format": "png"})
        with open(path, "wb") as f:
            f.write(base64.b64decode(result["data"]))

    async def close(self) -> None:
        await self.ws.close()
