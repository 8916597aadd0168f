"""A seconds-long smoke run of every relay-load scenario with tiny sizes, so the load generator
cannot rot. The real benchmark runs are documented commands (docs/BENCHMARKS.md), not tests."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading

import pytest
from websockets.asyncio.server import serve

from helpers import JWT_SECRET, REPO_ROOT, relay_binary

FLAGS = ["--events-per-second", "100000", "--event-burst", "100000", "--rate", "custom=100000:100000",
         "--rate", "typing=100000:100000", "--rate", "location=100000:100000", "--rate", "receipt=100000:100000",
         "--packets-per-second", "100000", "--receipts-per-user-per-second", "100000"]
RELAY_ARGS = FLAGS


def load_binary() -> str:
    return os.environ.get("RELAY_LOAD_BIN") or os.path.join(os.path.dirname(relay_binary()), "relay-load")


def run_load(*args, timeout=120) -> dict:
    binary = load_binary()
    assert os.access(binary, os.X_OK), f"relay-load not built at {binary} (swift build)"
    r = subprocess.run([binary, *map(str, args), "--json"], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"relay-load {' '.join(map(str, args))} exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def common(relay):
    return ["--port", relay.port, "--secret", JWT_SECRET, "--relay-pid", relay.proc.pid]


def test_connections(relay):
    out = run_load("connections", *common(relay), "--count", 50, "--hold", 0.2, "--source-addresses", 2)
    assert out["connected"] == 50 and out["connect_failures"] == 0 and out["relay_rss_per_socket_kib"] > 0


def test_fanout(relay):
    out = run_load("fanout", *common(relay), "--rooms", 2, "--members", 4, "--senders", 2, "--rate", 100, "--duration", 1, "--warmup", 0.2)
    assert out["deliveries"] >= out["sent"] * 3 > 0 and out["latency_samples"] > 0
    assert out["sockets"] == 8 and out["connect_failures"] == 0 and "settle_seconds" in out
    # Both sides of bench-check's ratio, over the same window.
    assert out["relay_cpu_us_per_delivery"] > 0 and out["generator_cpu_us_per_delivery"] > 0


def test_fanout_counts_sockets_past_the_setup_deadline_as_failures(relay):
    # 256 handshakes start at once; with no time for more, the other 4 are never opened. A run
    # with fewer members than asked must say so (it used to pass for a full room).
    out = run_load("fanout", *common(relay), "--rooms", 1, "--members", 260, "--senders", 1, "--rate", 10, "--duration", 0.5,
                   "--warmup", 0, "--setup-timeout", 0, "--source-addresses", 4, "--max-error-rate", 1)
    assert out["sockets"] == 256 and out["connect_failures"] == 4
    assert out["connect_error[not opened by the setup deadline]"] == 4 and out["error_rate"] > 0


def test_fanout_with_several_devices_per_user_reaches_every_socket(relay):
    # 6 sockets of 2 users in one room: every socket but the sender's gets each message, and
    # the measured window opened only once the setup's presence events had stopped.
    out = run_load("fanout", *common(relay), "--rooms", 1, "--members", 6, "--senders", 1, "--rate", 50, "--duration", 1,
                   "--warmup", 0.2, "--devices-per-user", 3)
    assert out["sockets"] == 6 and out["deliveries"] >= out["sent"] * 5 > 0 and out["settle_seconds"] >= 0.5


def test_typing(relay):
    out = run_load("typing", *common(relay), "--rooms", 2, "--members", 3, "--rate", 100, "--duration", 1)
    assert out["typing_events_received"] > 0 and out["coalescing_violations"] == 0


def test_location(relay):
    out = run_load("location", *common(relay), "--rooms", 2, "--members", 3, "--rate", 50, "--duration", 1)
    assert out["updates_acked"] == out["updates_sent"] > 0 and out["deliveries"] > 0


def test_receipts(relay):
    out = run_load("receipts", *common(relay), "--clients", 4, "--window", 4, "--duration", 1)
    assert out["receipts_acked"] > 0 and out["ack_samples"] > 0 and out["receipts_unanswered"] == 0
    assert not [k for k in out if k.startswith("closed_by_server")]


def test_receipts_fails_a_run_whose_sockets_the_relay_closed(start_relay):
    # At 5 packets a second (burst 10) the relay closes each socket (1008) after a few
    # receipts: the run must fail, not report the survivors' rate.
    relay = start_relay("--packets-per-second", "5")
    binary = load_binary()
    r = subprocess.run([binary, "receipts", *map(str, common(relay)), "--clients", "2", "--window", "4", "--duration", "1", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, f"exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["failed"] and out["closed_by_server[1008]"] == 2 and out["receipts_unanswered"] > 0


def test_slow_consumer(relay):
    out = run_load("slow-consumer", *common(relay), "--rooms", 2, "--members", 4, "--senders", 2, "--rate", 100,
                   "--duration", 1, "--warmup", 0.2, "--stalled", 1)
    assert "others_p99_change_percent" in out and out["baseline.deliveries"] > 0 and out["stalled.deliveries"] > 0


def test_chat(relay):
    # 40 sockets of 20 users (2 devices each) in rooms of 2–20: messages with typing bursts,
    # batched delivered/read receipts acked, and a churn of reconnects with their rooms.
    out = run_load("chat", *common(relay), "--users", 20, "--rooms-per-user", 4, "--message-interval", 0.5, "--typing-ms", 200,
                   "--delivered-delay-ms", 100, "--read-delay-ms", 300, "--churn", 0.1, "--offline-ms", 100,
                   "--duration", 1, "--warmup", 0.5, "--drain", 0.5, "--max-error-rate", 0.05)
    assert out["sockets"] == 40 and out["connect_failures"] == 0 and out["rooms_per_user_mean"] >= 3
    assert out["messages_sent"] > 0 and out["latency_samples"] > 0 and out["message_delivery_ratio"] > 0.9
    assert out["receipt_items_acked"] > 0 and out["receipt_ack_samples"] > 0 and out["deliveries.receipt"] > 0
    assert out["deliveries.typing"] > 0 and out["reconnects_done"] > 0 and out["relay_cpu_us_per_delivery"] > 0


def test_store_receipts(tmp_path):
    out = run_load("store-receipts", "--dir", tmp_path, "--producers", 10, "--window", 2, "--duration", 0.5)
    assert out["group_commit.receipts_per_second"] > 0 and out["one_tx_per_receipt.receipts_per_second"] > 0


def test_hub_locks():
    out = run_load("hub-locks", "--connections", 64, "--events", 2000, "--rounds", 1, "--threads", "1,2", "--shards", "1,64")
    for shards in (1, 64):
        for threads in (1, 2):
            assert out[f"shards_{shards}.threads_{threads}.events_per_second"] > 0


def test_raw_protocol_against_a_plain_websocket_server():
    """`--protocol raw` drives a plain room-broadcast WebSocket server (here a tiny Python one,
    the same protocol as LoadTests/peers/ws-broadcast.js)."""
    rooms: dict[str, set] = {}
    ready = threading.Event()
    stop: asyncio.Future | None = None
    port_box = {}

    async def handler(ws):
        room = None
        try:
            async for text in ws:
                msg = json.loads(text)
                if "join" in msg:
                    room = msg["join"]
                    rooms.setdefault(room, set()).add(ws)
                    continue
                for peer in list(rooms.get(msg["room"], ())):
                    if peer is not ws:
                        await peer.send(text)
        finally:
            if room:
                rooms[room].discard(ws)

    def server_thread():
        nonlocal stop

        async def main():
            nonlocal stop
            stop = asyncio.get_running_loop().create_future()
            async with serve(handler, "127.0.0.1", 0) as server:
                port_box["port"] = server.sockets[0].getsockname()[1]
                ready.set()
                await stop

        asyncio.run(main())

    t = threading.Thread(target=server_thread, daemon=True)
    t.start()
    assert ready.wait(10)
    try:
        out = run_load("fanout", "--port", port_box["port"], "--protocol", "raw", "--rooms", 2, "--members", 3,
                       "--senders", 2, "--rate", 50, "--duration", 1, "--warmup", 0.2)
        assert out["protocol"] == "raw" and out["deliveries"] > 0
    finally:
        loop_stop = stop
        if loop_stop is not None:
            loop_stop.get_loop().call_soon_threadsafe(loop_stop.set_result, None)
        t.join(10)


def test_connections_over_several_generator_processes(relay):
    out = run_load("connections", *common(relay), "--count", 40, "--processes", 2, "--hold", 0.2, "--source-addresses", 2)
    assert out["processes"] == 2 and out["connected"] == 40 and out["connect_failures"] == 0
