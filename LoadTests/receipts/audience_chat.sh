#!/usr/bin/env bash
# Receipt audiences in the chat shape (#42, criterion 4): for each audience a fresh release relay
# and one `relay-load chat` run (10 000 sockets of 5 000 users, 20 rooms each, one message per
# user per INTERVAL s, 1 %/s churn, receipts on), ROUNDS times interleaved. Prints deliveries
# per chat message by kind, the relay's CPU and the latencies, one line per run.
#
#   ROUNDS=2 INTERVAL=60 DURATION=20 LoadTests/receipts/audience_chat.sh [RELAY] [RELAY_LOAD]
#
# Loopback only (port 19431); every run bounded by relay-load's duration and a timeout; only the
# relay this script started is stopped.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
RELAY=${1:-.build-release/release/relay}
LOAD=${2:-.build-release/release/relay-load}
SECRET=audience-bench-jwt-secret-0123456789abcdef-01
source scripts/bench-relay-flags.sh
AUDIENCES=${AUDIENCES:-"delivered=room,read=room delivered=devices,read=devices"}
for ROUND in $(seq "${ROUNDS:-1}"); do
  for AUD in $AUDIENCES; do
    DIR=$(mktemp -d)
    "$RELAY" --port 19431 --db "$DIR/r.sqlite" "${BENCH_RELAY_FLAGS[@]}" --receipt-audience "$AUD" ${EXTRA_RELAY_FLAGS:-} > "$DIR/log" 2>&1 &
    PID=$!
    for _ in $(seq 100); do grep -q "relay listening" "$DIR/log" && break; sleep 0.1; done
    timeout 900 "$LOAD" chat --port 19431 --secret "$SECRET" --relay-pid $PID --source-addresses 16 \
      --message-interval "${INTERVAL:-60}" --duration "${DURATION:-20}" --json > "$DIR/out.json" || true
    kill $PID; wait $PID 2>/dev/null || true
    python3 - "$ROUND" "$AUD" "$DIR/out.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[3]))
v = lambda k: (r.get(k) or {}).get("value") if isinstance(r.get(k), dict) else r.get(k)
m = max(1, v("messages_sent") or 0)
print(f"round {sys.argv[1]} {sys.argv[2]:32} messages {m:5d} | deliveries per message: all {v('deliveries') / m:6.1f}, "
      f"receipt {v('deliveries.receipt') / m:6.1f}, message {v('deliveries.message') / m:5.1f}, typing {v('deliveries.typing') / m:5.1f}, "
      f"presence {v('deliveries.presence') / m:5.1f} | relay {v('relay_cpu_cores'):.3f} cores, {v('relay_cpu_us_per_message'):6.0f} µs/message | "
      f"message p50/p99 {v('latency_p50_ms')}/{v('latency_p99_ms')} ms, receipt ack p50/p99 {v('receipt_ack_p50_ms')}/{v('receipt_ack_p99_ms')} ms, "
      f"reconnect p99 {v('reconnect_p99_ms')} ms, RSS {v('relay_rss_mb'):.0f} MiB", flush=True)
PY
    rm -rf "$DIR"
  done
done
