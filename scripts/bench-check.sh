#!/usr/bin/env bash
# Benchmark regression check (issue #15), run by scripts/test.sh: a small fixed fan-out scenario
# against the build the tests just used, its relay CPU per delivery (median of ROUNDS runs)
# compared with the recorded baseline in LoadTests/baselines/fanout-check.json. Fails when it is
# more than `tolerance` times the baseline, or when deliveries go missing.
#
# The scenario: 1 room of 100 sockets, 1 sender at 200 messages/s (19 800 deliveries/s), 3 s.
# It measures the debug build the test command builds (one build in CI); the release figures
# against the peers are in docs/BENCHMARKS.md. RECORD=1 writes the current median as the new
# baseline (after an intended change, on a quiet machine).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
BASELINE=LoadTests/baselines/fanout-check.json
SECRET=bench-secret-0123456789abcdef0123456789
swift build --product relay >/dev/null
swift build --product relay-load >/dev/null
BIN=$(swift build --show-bin-path)
WORK=$(mktemp -d)
PORT=$((18700 + RANDOM % 200))
"$BIN/relay" --port $PORT --jwt-secret $SECRET --api-key bench-api-key-0123456789 --admin-key bench-admin-key-0123456789 \
  --db "$WORK/relay.sqlite" --log-level notice --events-per-second 1000000 --event-burst 1000000 \
  --rate custom=1000000:1000000 --max-connections-per-ip 1000000 --max-connections-per-user 1000000 > "$WORK/relay.log" 2>&1 &
PID=$!
cleanup() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
for _ in $(seq 1 300); do grep -q "relay listening" "$WORK/relay.log" && break; kill -0 $PID 2>/dev/null || { cat "$WORK/relay.log"; exit 1; }; sleep 0.1; done
for r in $(seq 1 "$ROUNDS"); do
  "$BIN/relay-load" fanout --port $PORT --secret $SECRET --relay-pid $PID --rooms 1 --members 100 --senders 1 \
    --rate 200 --duration 3 --warmup 1 --max-error-rate 1 --json > "$WORK/run$r.json" 2>/dev/null || true
done
python3 - "$WORK" "$ROUNDS" "$BASELINE" "${RECORD:-0}" <<'PY'
import json, os, statistics, sys, datetime
work, rounds, baseline_path, record = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
runs = []
for r in range(1, rounds + 1):
    try:
        with open(os.path.join(work, f"run{r}.json")) as f: runs.append(json.load(f))
    except Exception as e:
        print(f"bench-check: run {r} gave no result ({e})"); sys.exit(1)
for d in runs:
    if d.get("deliveries", 0) < d.get("expected_deliveries_min", 1) or d.get("error_rate", 1) > 0:
        print(f"bench-check: deliveries missing or errors: {d}"); sys.exit(1)
cpu = statistics.median(d["relay_cpu_us_per_delivery"] for d in runs)
each = ", ".join("%.2f" % d["relay_cpu_us_per_delivery"] for d in runs)
print(f"bench-check: relay CPU per delivery {cpu:.2f} µs (runs: {each})")
if record:
    with open(baseline_path, "w") as f:
        json.dump({"scenario": "fanout --rooms 1 --members 100 --senders 1 --rate 200 --duration 3 (debug build)",
                   "cpu_us_per_delivery": round(cpu, 2), "tolerance": 1.35,
                   "recorded": datetime.date.today().isoformat()}, f, indent=2)
        f.write("\n")
    print(f"bench-check: baseline recorded in {baseline_path}"); sys.exit(0)
with open(baseline_path) as f: base = json.load(f)
limit = base["cpu_us_per_delivery"] * base["tolerance"]
print(f"bench-check: baseline {base['cpu_us_per_delivery']:.2f} µs × {base['tolerance']} = limit {limit:.2f} µs")
if cpu > limit:
    print("bench-check: FAILED: fan-out costs more CPU per delivery than the recorded baseline allows"); sys.exit(1)
print("bench-check: ok")
PY
