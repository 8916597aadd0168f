"""Operators: Prometheus metrics, the admin API, the live dashboard in headless Chromium, and
graceful shutdown."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cdp import Browser
from conftest import RelayProcess
from helpers import ADMIN_KEY, API_KEY, REPO_ROOT, ROOM, TIMEOUT, Clients, RawSocket, async_test, http, mint_token, run

RELAY_ARGS = ["--events-per-second", "1000", "--event-burst", "1000"]


async def scrape(relay) -> dict[tuple[str, tuple], float]:
    status, text = await http(relay, "GET", "/metrics", key=None)
    assert status == 200
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples, name, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@async_test
async def test_metrics_parse_and_move_with_traffic(relay):
    before = await scrape(relay)
    async with Clients() as c:
        a = await c.connect(relay, "mia")
        b = await c.connect(relay, "max")
        await a.join()
        await b.join()
        for _ in range(5):
            await a.ok("note:new", {"room": ROOM, "text": "hi"})
        await a.ok("message:delivered", {"room": ROOM, "messageId": "metrics-1", "authorId": "max"})
        await b.expect("message:delivered")
        await a.fails("Bad_Name", {}, "invalid_event_name")
        during = await scrape(relay)
        assert value(during, "relay_connections") >= 2
        assert value(during, "relay_events_in_total", event="custom") - value(before, "relay_events_in_total", event="custom") == 5
        assert value(during, "relay_events_in_total", event="invalid") > value(before, "relay_events_in_total", event="invalid")
        assert value(during, "relay_events_out_total", event="custom") - value(before, "relay_events_out_total", event="custom") >= 5
        assert value(during, "relay_deliveries_total") > value(before, "relay_deliveries_total")
        assert value(during, "relay_receipt_commit_seconds_count") > value(before, "relay_receipt_commit_seconds_count")
        assert value(during, "relay_receipt_batch_size_count") > value(before, "relay_receipt_batch_size_count")
        assert value(during, "relay_connects_total", result="ok") - value(before, "relay_connects_total", result="ok") == 2
        assert value(during, "relay_rooms") >= 1
        assert value(during, "relay_room_members_count") >= 1
        assert value(during, "relay_fanout_seconds_count") > value(before, "relay_fanout_seconds_count")
    code, _ = await refused_code_quick(relay)
    after = await scrape(relay)
    assert value(after, "relay_auth_failures_total", code="token_bad_signature") > value(before, "relay_auth_failures_total", code="token_bad_signature")
    assert value(after, "relay_disconnects_total", reason="client") > value(before, "relay_disconnects_total", reason="client")


async def refused_code_quick(relay):
    sock = await RawSocket.open(relay)
    reply = await sock.connect(mint_token("eve") + "x")
    await sock.close()  # as the stock clients do after a refusal: the session stays open for them
    return reply, None


@async_test
async def test_admin_api(relay):
    status, body = await http(relay, "GET", "/admin/v1/stats", key="wrong-key-0000000000")
    assert status == 401 and body["error"]["code"] == "unauthorized"
    status, body = await http(relay, "GET", "/admin/v1/stats", key=API_KEY)
    assert status == 401, "the backend key is not the admin key"
    async with Clients() as c:
        a = await c.connect(relay, "ola", name="ola-phone")
        a2 = await c.connect(relay, "ola", name="ola-laptop")
        b = await c.connect(relay, "pia")
        await a.join("conversation:admin-1")
        await a2.join("conversation:admin-1")
        await b.join("conversation:admin-1")
        await b.join("conversation:admin-2")
        assert (await http(relay, "GET", "/admin/v1/health", key=ADMIN_KEY))[0] == 200
        status, ready = await http(relay, "GET", "/admin/v1/ready", key=ADMIN_KEY)
        assert status == 200 and ready["ready"] is True and ready["store"] == "ok"
        status, stats = await http(relay, "GET", "/admin/v1/stats", key=ADMIN_KEY)
        assert status == 200 and stats["connections"] >= 3 and stats["rooms"] >= 2
        status, rooms = await http(relay, "GET", "/admin/v1/rooms?prefix=conversation:admin-&limit=1", key=ADMIN_KEY)
        assert status == 200 and rooms["total"] == 2
        assert rooms["rooms"][0] == {"room": "conversation:admin-1", "members": 3, "users": 2}, "busiest first"
        status, page2 = await http(relay, "GET", f"/admin/v1/rooms?prefix=conversation:admin-&limit=1&cursor={rooms['next']}", key=ADMIN_KEY)
        assert [r["room"] for r in page2["rooms"]] == ["conversation:admin-2"] and page2["next"] is None
        status, room = await http(relay, "GET", "/admin/v1/rooms/conversation%3Aadmin-1", key=ADMIN_KEY)
        assert status == 200 and room["presence"] == [{"user": "ola", "devices": 2}, {"user": "pia", "devices": 1}]
        assert (await http(relay, "GET", "/admin/v1/rooms/conversation%3Anobody", key=ADMIN_KEY))[0] == 404
        status, conns = await http(relay, "GET", "/admin/v1/users/ola/connections", key=ADMIN_KEY)
        assert status == 200 and len(conns["connections"]) == 2
        assert all(c["rooms"] == ["conversation:admin-1"] and c["user"] == "ola" for c in conns["connections"])
        status, emitted = await http(relay, "POST", "/admin/v1/emit", key=ADMIN_KEY,
                                     body={"event": "notification:new", "to": {"user": "ola"}, "data": {"title": "ops"}})
        assert status == 200 and emitted == {"recipients": 2}
        await a.expect("notification:new", title="ops")
        # Kick one device: it is closed with 4004, the other stays.
        raw = await RawSocket.open(relay)
        sid = (await raw.connect_ok(mint_token("ola")))["sid"]
        status, kicked = await http(relay, "DELETE", f"/admin/v1/connections/{sid}", key=ADMIN_KEY)
        assert status == 200 and kicked["kicked"] is True
        code, _ = await raw.wait_closed()
        assert code == 4004
        assert (await http(relay, "DELETE", f"/admin/v1/connections/{sid}", key=ADMIN_KEY))[0] == 404
        await a.ok("message:read", {"room": "conversation:admin-1", "messageId": "admin-m1", "authorId": "pia"})
        status, receipts = await http(relay, "GET", "/admin/v1/receipts?messageId=admin-m1", key=ADMIN_KEY)
        assert status == 200 and [r["userId"] for r in receipts["receipts"]] == ["ola"]
        assert (await http(relay, "GET", "/admin/v1/nope", key=ADMIN_KEY))[0] == 404
        assert (await http(relay, "POST", "/admin/v1/stats", key=ADMIN_KEY))[0] == 405


@async_test
async def test_dashboard_updates_live_in_chromium(relay):
    async with Clients() as c:
        clients = [await c.connect(relay, f"dash{i}") for i in range(3)]
        for cl in clients:
            await cl.join("conversation:dashboard")
        stop = asyncio.Event()

        async def traffic():
            # A little load for as long as the page watches (stopped after the assertions read
            # the page; bounded at 120 s): a slow Chromium start on a loaded machine once outlived
            # a 12-s loop, and the page read an in-rate of 0.
            for i in range(6000):
                if stop.is_set():
                    return
                await clients[i % 3].emit("note:new", {"room": "conversation:dashboard", "i": i})
                await asyncio.sleep(0.02)

        load = asyncio.create_task(traffic())
        browser = await Browser().start("about:blank")
        try:
            page = await browser.page("about:blank")
            await page.navigate(f"{relay.url}/dashboard")
            # The page asks for the key once; type it and submit like a person would.
            await page.evaluate("""new Promise((resolve) => {
                const ready = () => document.getElementById('login') && !document.getElementById('login').classList.contains('hidden');
                if (ready()) return resolve(true);
                new MutationObserver((m, o) => { if (ready()) { o.disconnect(); resolve(true); } }).observe(document.documentElement, {subtree: true, attributes: true, childList: true});
            })""")
            await page.evaluate(f"document.getElementById('key').value = {json.dumps(ADMIN_KEY)}; document.getElementById('login').requestSubmit(); true")
            # Wait (event-driven, in the page) for three live updates.
            updates = await page.evaluate("""new Promise((resolve) => {
                const done = () => Number(document.body.dataset.updates || 0) >= 3;
                if (done()) return resolve(document.body.dataset.updates);
                new MutationObserver((m, o) => { if (done()) { o.disconnect(); resolve(document.body.dataset.updates); } }).observe(document.body, {attributes: true});
            })""", timeout=60)
            assert int(updates) >= 3
            shown = await page.evaluate("""({
                connections: document.getElementById('connections').textContent,
                rooms: document.getElementById('rooms').textContent,
                inRate: document.getElementById('events-in-rate').textContent,
                busiest: [...document.querySelectorAll('#busiest tr td:first-child')].map(td => td.textContent),
                status: document.getElementById('status').textContent,
                url: location.href,
                stored: sessionStorage.getItem('relay.adminKey') !== null,
            })""")
            assert int(shown["connections"].replace(",", "")) >= 3, shown
            assert int(shown["rooms"].replace(",", "")) >= 1, shown
            assert "conversation:dashboard" in shown["busiest"], shown
            assert shown["status"] == "live", shown
            assert ADMIN_KEY not in shown["url"] and shown["stored"], shown
            assert int(shown["inRate"].replace(",", "")) > 0, shown
            artifacts = REPO_ROOT / ".build" / "test-artifacts"
            artifacts.mkdir(parents=True, exist_ok=True)
            await page.screenshot(str(artifacts / "dashboard.png"))
            assert (artifacts / "dashboard.png").stat().st_size > 10_000
            await page.close()
        finally:
            stop.set()
            browser.stop()
            await load


def test_sigterm_on_a_node_alone_tells_every_socket_at_once(tmp_path):
    """Without Redis no other node takes the sockets: spreading them over seconds would only
    keep the port closed while the clients back off. 250 sockets (more than one batch of the
    clustered rate, 200 a tenth of a second) go in one round."""
    relay = RelayProcess(tmp_path, ["--max-connections-per-ip", "1000", "--threads", "1"]).start()

    async def scenario():
        socks = [await RawSocket.open(relay) for _ in range(250)]
        for i, s in enumerate(socks):
            await s.connect_ok(mint_token(f"alone{i}"))
        os.kill(relay.proc.pid, signal.SIGTERM)
        return await asyncio.gather(*(s.wait_closed(timeout=20, answer_pings=True) for s in socks))

    results = run(scenario(), timeout=90)
    assert relay.proc.wait(30) == 0, "graceful shutdown exits 0"
    assert all(code == 1001 for code, _ in results), [r[0] for r in results]
    assert all("1" in msgs for _, msgs in results), "Engine.IO close packet before the close frame"
    drained = [line for line in relay.log().splitlines() if "drained sockets" in line]
    assert drained and "count=250" in drained[-1] and "rounds=1" in drained[-1], drained
    relay.stop()


def test_sigterm_drains_in_batches_and_keeps_acked_receipts(tmp_path):
    flags = ["--drain-rate", "20", "--shutdown-timeout", "20000"]
    relay = RelayProcess(tmp_path, flags).start()
    acked: dict[str, int] = {}

    async def scenario():
        socks = []
        for i in range(20):
            s = await RawSocket.open(relay)
            await s.connect_ok(mint_token(f"drain{i}"))
            await s.send('421["room:join",{"room":"conversation:drain"}]')
            assert (await s.recv_packet()).startswith("431[{\"ok\":true")
            socks.append(s)
        for n in range(50):
            await socks[0].send('42%d["message:delivered",{"room":"conversation:drain","messageId":"d-%d","authorId":"a"}]' % (n + 2, n))
        while len(acked) < 50:
            pkt = await socks[0].recv_packet(answer_pings=True)
            if pkt.startswith("43"):
                i = 2
                while pkt[i].isdigit():
                    i += 1
                acked[f"d-{int(pkt[2:i]) - 2}"] = json.loads(pkt[i:])[0]["id"]
        os.kill(relay.proc.pid, signal.SIGTERM)
        loop = asyncio.get_running_loop()

        async def closed(s):
            code, msgs = await s.wait_closed(timeout=20, answer_pings=True)
            return code, msgs, loop.time()

        return await asyncio.gather(*(closed(s) for s in socks))

    results = run(scenario(), timeout=60)
    assert relay.proc.wait(30) == 0, "graceful shutdown exits 0"
    assert all(code == 1001 for code, _, _ in results), [r[0] for r in results]
    assert all("1" in msgs for _, msgs, _ in results), "Engine.IO close packet before the close frame"
    times = sorted(t for _, _, t in results)
    assert times[-1] - times[0] >= 0.5, "20 sockets at 20/s are told to go over about a second, not all at once"
    relay.stop()

    restarted = RelayProcess(tmp_path, []).start()
    try:
        status, body = run(http(restarted, "GET", "/api/v1/receipts?messageId=d-49"))
        assert status == 200 and [r["id"] for r in body["receipts"]] == [acked["d-49"]]
        for key, cursor in acked.items():
            status, body = run(http(restarted, "GET", f"/api/v1/receipts?messageId={key}"))
            assert [r["id"] for r in body["receipts"]] == [cursor], key
    finally:
        restarted.stop()
