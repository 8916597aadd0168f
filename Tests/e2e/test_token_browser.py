"""Token lifetime with the official browser client (socket.io-client 4.8.1 in headless
Chromium, default options): `auth:expiring` arrives, `emitWithAck("auth:refresh")` extends the
socket past the first token's `exp`; a socket that does not refresh is closed at `exp` and the
client reports the transport close."""

from __future__ import annotations

import asyncio

import pytest

from browser_client import BrowserPage, browser, page_server  # noqa: F401 - fixtures
from conftest import RelayProcess
from helpers import async_test, mint_token


@pytest.fixture(scope="module")
def token_relay(page_server, tmp_path_factory):  # noqa: F811 - the imported fixture
    relay = RelayProcess(tmp_path_factory.mktemp("relay"), [
        "--allowed-origins", page_server.origin, "--jwt-leeway", "0", "--token-expiry-notice-ms", "2000"])
    relay.start()
    try:
        yield relay
    finally:
        relay.stop()


@async_test
async def test_browser_refreshes_its_token_and_stays(token_relay, browser, page_server):  # noqa: F811
    page = await BrowserPage.open(browser, page_server)
    try:
        await page.connect("web", token_relay.url, {"auth": {"token": mint_token("web-refresh", ttl=3)}})
        notice = await page.expect_event("web", "auth:expiring", timeout=5)
        assert notice["expiresInMs"] <= 2000, notice
        reply = await page.ok("web", "auth:refresh", {"token": mint_token("web-refresh", ttl=3600)})
        assert reply["left"] == [], reply
        await asyncio.sleep(3)  # past the first token's exp
        state = await page.state("web")
        assert state["connected"] is True, state

        # Another socket that does not refresh is closed at exp; the client sees a transport close.
        since = await page.mark()
        await page.connect("stale", token_relay.url, {"auth": {"token": mint_token("web-stale", ttl=2)}})
        await page.expect_event("stale", "auth:expired", since=since, timeout=6)
        gone = await page.wait("stale", "disconnect", since=since, timeout=5)
        assert gone is not None and gone["data"]["reason"] == "transport close", gone
        assert gone["data"]["details"]["context"]["code"] == 4005, gone
        # Default options: the client reconnects by itself, with its stale token: refused.
        refused = await page.wait("stale", "connect_error", since=since, timeout=10)
        assert refused is not None and "expired" in str(refused["data"]), refused
    finally:
        await page.close()
