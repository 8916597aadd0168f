#!/usr/bin/env bash
# Benchmark regression check (issues #15 and #32), run by scripts/test.sh: small fixed fan-out
# scenarios against the build the tests just used. Each run reads the relay's CPU per delivery
# and, over the same window, the generator's own (relay-load: the client side of the same
# traffic on the same machine). The check is on their ratio (median of ROUNDS runs) against
# the one recorded in LoadTests/baselines/fanout-check.json: the absolute figure moves ±30 %
# with how fast and how loaded the machine is (a busier machine batches more and costs *less*
# per delivery), the ratio a few per cent, and a relay that got slower moves only the relay's
# side. Fails when a ratio is more than its `tolerance` times the baseline, or when deliveries
# go missing. The absolute figures are printed, for the reader.
#
# The scenarios (both shapes a chat relay lives on):
#   large-room  1 room of 100 sockets, 1 sender at 200 messages/s (19 800 deliveries/s): the
#               per-delivery write path;
#   small-rooms 40 rooms of 5 sockets, 40 senders at 2 000 messages/s in all (8 000
#               deliveries/s): the per-event work (parse, validate, stamp, encode, history),
#               shared by only 4 recipients.
# It measures the debug build the test command builds (one build in CI); the release figures
# against the peers are in docs/BENCHMARKS.md. RECORD=1 writes the current medians as the new
# baselines (after an intended change to the relay or to relay-load).
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

# name|relay-load fanout arguments
SCENARIOS=(
  "large-room|--rooms 1 --members 100 --senders 1 --rate 200 --duration 3"
  "small-rooms|--rooms 40 --members 5 --senders 40 --rate 2000 --duration 3"
)
for s in "${SCENARIOS[@]}"; do
  name=${s%%|*}; args=${s#*|}
  for r in $(seq 1 "$ROUNDS"); do
    # shellcheck disable=SC2086
    "$BIN/relay-load" fanout --port $PORT --secret $SECRET --relay-pid $PID $args \
      --warmup 1 --max-error-rate 1 --json > "$WORK/$name-$r.json" 2>/dev/null || true
  done
done
python3 - "$WORK" "$ROUNDS" "$BASELINE" "${RECORD:-0}" "${SCENARIOS[@]}" <<'PY'
import json, os, statistics, sys, datetime
work, rounds, baseline_path, record = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
scenarios = [s.split("|", 1) for s in sys.argv[5:]]
measured = {}
for name, args in scenarios:
    runs = []
    for r in range(1, rounds + 1):
        try:
            with open(os.path.join(work, f"{name}-{r}.json")) as f: runs.append(json.load(f))
        except Exception as e:
            print(f"bench-check: {name} run {r} gave no result ({e})"); sys.exit(1)
    for d in runs:
        if d.get("deliveries", 0) < d.get("expected_deliveries_min", 1) or d.get("error_rate", 1) > 0:
            print(f"bench-check: {name}: deliveries missing or errors: {d}"); sys.exit(1)
        if not d.get("relay_cpu_us_per_delivery") or not d.get("generator_cpu_us_per_delivery"):
            print(f"bench-check: {name}: a run without the relay's or the generator's CPU: {d}"); sys.exit(1)
    cpu = statistics.median(d["relay_cpu_us_per_delivery"] for d in runs)
    each = ", ".join("%.2f" % d["relay_cpu_us_per_delivery"] for d in runs)
    gen = ", ".join("%.2f" % d["generator_cpu_us_per_delivery"] for d in runs)
    ratios = [d["relay_cpu_us_per_delivery"] / d["generator_cpu_us_per_delivery"] for d in runs]
    ratio = statistics.median(ratios)
    print(f"bench-check: {name}: relay CPU per delivery {cpu:.2f} µs (runs: {each}), generator's (runs: {gen})")
    print(f"bench-check: {name}: relay / generator {ratio:.3f} (runs: {', '.join('%.3f' % r for r in ratios)})")
    measured[name] = (args, cpu, ratio)
if record:
    # A scenario keeps the tolerance it has (its spread on a shared machine); a new one gets 1.3.
    try:
        with open(baseline_path) as f: old = {s["name"]: s for s in json.load(f).get("scenarios", [])}
    except Exception:
        old = {}
    out = {"build": "debug", "scenarios": [
        {"name": n, "fanout": a, "relay_per_generator": round(r, 3), "tolerance": old.get(n, {}).get("tolerance", 1.3),
         "cpu_us_per_delivery": round(c, 2), "recorded": datetime.date.today().isoformat()} for n, (a, c, r) in measured.items()]}
    with open(baseline_path, "w") as f:
        json.dump(out, f, indent=2); f.write("\n")
    print(f"bench-check: baselines recorded in {baseline_path}"); sys.exit(0)
with open(baseline_path) as f: base = {s["name"]: s for s in json.load(f)["scenarios"]}
failed = False
for name, (args, cpu, ratio) in measured.items():
    b = base.get(name)
    if b is None or "relay_per_generator" not in b:
        print(f"bench-check: FAILED: no baseline ratio for {name} (RECORD=1)"); failed = True; continue
    limit = b["relay_per_generator"] * b["tolerance"]
    print(f"bench-check: {name}: baseline {b['relay_per_generator']:.3f} × {b['tolerance']} = limit {limit:.3f}")
    if ratio > limit:
        print(f"bench-check: FAILED: {name}: the relay costs more CPU per delivery, against the generator beside it, than its recorded baseline allows"); failed = True
if failed: sys.exit(1)
print("bench-check: ok")
PY
