"""Typing coalescing with non-default windows: cancellation inside a window, and expiry.

Timing flags are chosen so that the tests only need the relay to be *roughly* on time on a
loaded machine: the client steps that must fall inside one window take a few round trips,
far less than the window.
"""

from __future__ import annotations

from helpers import Clients, async_test

ROOM = "conversation:typing"


def typing_events(client):
    return [(name, data["from"]) for name, data in client.events("typing:start", "typing:stop")]


@async_test
async def test_start_then_stop_inside_one_window_cancel(start_relay):
    relay = start_relay("--typing-window-ms", "2000")
    async with Clients() as clients:
        a = await clients.connect(relay, "ada")
        b = await clients.connect(relay, "bea")
        c = await clients.connect(relay, "cyd")
        for client in (a, b, c):
            await client.join(ROOM)
        # All three inside the window that ada's start opens.
        await a.ok("typing:start", {"room": ROOM})
        await a.ok("typing:stop", {"room": ROOM})
        await c.ok("typing:start", {"room": ROOM})
        start = await b.expect("typing:start")
        assert start["from"] == "cyd" and start["room"] == ROOM
        # Nothing from ada came before cyd's start.
        assert typing_events(b) == [("typing:start", "cyd")], b.history
        await a.expect("typing:start", **{"from": "cyd"})
        assert typing_events(a) == [("typing:start", "cyd")], a.history
        # cyd stops: the next window carries the stop.
        await c.ok("typing:stop", {"room": ROOM})
        await b.expect("typing:stop", **{"from": "cyd"})
        assert typing_events(b) == [("typing:start", "cyd"), ("typing:stop", "cyd")], b.history
        assert typing_events(c) == []


@async_test
async def test_unrefreshed_start_expires_as_stop(start_relay):
    # Window 100 ms, expiry 1 s: the start goes out at ~100 ms, the expiry stop at ~1.1 s.
    relay = start_relay("--typing-expiry-ms", "1000")
    async with Clients() as clients:
        a = await clients.connect(relay, "dee")
        b = await clients.connect(relay, "eli")
        for client in (a, b):
            await client.join(ROOM)
        await a.ok("typing:start", {"room": ROOM})
        await b.expect("typing:start", **{"from": "dee"})
        stop = await b.expect("typing:stop", **{"from": "dee"})
        assert stop["room"] == ROOM
        assert typing_events(b) == [("typing:start", "dee"), ("typing:stop", "dee")]
        # Typing again after the expiry is announced again.
        await a.ok("typing:start", {"room": ROOM})
        await b.expect("typing:start", **{"from": "dee"})
        assert typing_events(b) == [("typing:start", "dee"), ("typing:stop", "dee"), ("typing:start", "dee")]
