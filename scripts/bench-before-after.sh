#!/usr/bin/env bash
# The same relay-load fan-out against two relay release binaries, alternating, ROUNDS rounds,
# at a moderate and a saturating offered rate: a before/after check of a change to the fast path.
#   scripts/bench-before-after.sh OLD_RELAY NEW_RELAY RELAY_LOAD
# Everything on 127.0.0.1, every run bounded (10 s); the relays are stopped by their pids.
set -euo pipefail
OLD=$1; NEW=$2; LOAD=$3
ROUNDS=${ROUNDS:-2}; OUT=${OUT:-bench-results/before-after}
SECRET=bench-secret-0123456789abcdef0123456789
mkdir -p "$OUT"
for round in $(seq 1 "$ROUNDS"); do
  for which in before after; do
    bin=$OLD; [ "$which" = after ] && bin=$NEW
    rm -f "$OUT"/r.sqlite*
    "$bin" --port 18200 --jwt-secret "$SECRET" --api-key bench-api-key-0123456789 --admin-key bench-admin-key-0123456789 \
      --db "$OUT/r.sqlite" --log-level notice --events-per-second 1000000 --event-burst 1000000 --rate custom=1000000:1000000 \
      --max-connections-per-ip 1000000 --max-connections-per-user 1000000 > "$OUT/$which.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do grep -q "relay listening" "$OUT/$which.log" 2>/dev/null && break; sleep 0.1; done
    for rate in 4000 16000; do
      "$LOAD" fanout --port 18200 --secret "$SECRET" --relay-pid "$pid" --rooms 20 --members 50 --senders 20 \
        --rate "$rate" --duration 10 --max-error-rate 1 --json > "$OUT/$which-$round-$rate.json" || true
    done
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  done
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for rate in (4000, 16000):
    for r in range(1, rounds + 1):
        for w in ("before", "after"):
            d = json.load(open(f"{out}/{w}-{r}-{rate}.json"))
            print(f"{rate} msg/s round {r} {w:6}: {d.get('deliveries_per_second', 0):,.0f} deliveries/s, "
                  f"{d.get('relay_cpu_us_per_delivery')} us CPU/delivery, p50 {d.get('latency_p50_ms')} ms, p99 {d.get('latency_p99_ms')} ms")
PY
