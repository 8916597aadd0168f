#!/usr/bin/env bash
# The same relay-load fan-out against two relay release binaries, alternating, ROUNDS rounds,
# at a moderate and a saturating offered rate: a before/after check of a change to the fast path.
#   scripts/bench-before-after.sh OLD_RELAY NEW_RELAY RELAY_LOAD
# OLD and NEW may be the same binary with different flags: OLD_ARGS / NEW_ARGS are extra relay
# flags for each side (split on spaces), e.g. the cost of history on one build:
#   OLD_ARGS="--history-size 0" scripts/bench-before-after.sh R/relay R/relay R/relay-load
# Other knobs (env): ROUNDS (2), RATES ("4000 16000"), DURATION (10 s), PORT (18200),
# OUT (bench-results/before-after), SWAP=1 (run "after" first in even rounds). The load average
# is written before and after every run ($OUT/uptime.log), and the CPU that processes other
# than the relay and relay-load used during it ("others", in cores, from /proc/stat; and the
# hypervisor's steal) is printed with each result, so a disturbed round can be seen and rerun.
# QUIET=0.2 waits before each relay start (at most QUIET_TIMEOUT s, default 1800) until the
# machine used less than that many cores over 3 s (other engineers' builds on a shared box).
# Everything on 127.0.0.1, every run bounded (DURATION s); the relays are stopped by their pids.
set -euo pipefail
OLD=$1; NEW=$2; LOAD=$3
ROUNDS=${ROUNDS:-2}; OUT=${OUT:-bench-results/before-after}
RATES=${RATES:-4000 16000}; DURATION=${DURATION:-10}; PORT=${PORT:-18200}
read -r -a OLD_EXTRA <<< "${OLD_ARGS:-}"
read -r -a NEW_EXTRA <<< "${NEW_ARGS:-}"
SECRET=bench-secret-0123456789abcdef0123456789
# shellcheck source=bench-relay-flags.sh
source "$(dirname "$0")/bench-relay-flags.sh"
mkdir -p "$OUT"
echo "# $(date -Is) OLD=$OLD ${OLD_ARGS:-} NEW=$NEW ${NEW_ARGS:-}" >> "$OUT/uptime.log"
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8, $9}' /proc/stat; }  # busy jiffies (user nice system irq softirq), steal
cputicks() { awk '{print $14+$15}' "/proc/$1/stat"; }
wait_quiet() {
  [ -n "${QUIET:-}" ] || return 0
  local until=$(( $(date +%s) + ${QUIET_TIMEOUT:-1800} )) b0 b1 s
  while :; do
    read -r b0 s < <(busy); sleep 3; read -r b1 s < <(busy)
    if awk -v d=$((b1 - b0)) -v q="$QUIET" 'BEGIN { exit !(d / 300 < q) }'; then return 0; fi
    if [ "$(date +%s)" -ge "$until" ]; then echo "not quiet after ${QUIET_TIMEOUT:-1800} s: going on" >> "$OUT/uptime.log"; return 0; fi
    sleep 10
  done
}
for round in $(seq 1 "$ROUNDS"); do
  order="before after"; [ "${SWAP:-0}" = 1 ] && [ $((round % 2)) = 0 ] && order="after before"
  for which in $order; do
    bin=$OLD; extra=("${OLD_EXTRA[@]}")
    if [ "$which" = after ]; then bin=$NEW; extra=("${NEW_EXTRA[@]}"); fi
    rm -f "$OUT"/r.sqlite*
    wait_quiet
    "$bin" --port "$PORT" --db "$OUT/r.sqlite" "${BENCH_RELAY_FLAGS[@]}" ${extra[@]+"${extra[@]}"} > "$OUT/$which.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do grep -q "relay listening" "$OUT/$which.log" 2>/dev/null && break; sleep 0.1; done
    for rate in $RATES; do
      echo "round $round $which $rate before: $(cat /proc/loadavg)" >> "$OUT/uptime.log"
      read -r b0 s0 < <(busy); r0=$(cputicks "$pid"); t0=$(date +%s.%N)
      /usr/bin/time -f "%U %S" -o "$OUT/time.txt" \
        "$LOAD" fanout --port "$PORT" --secret "$SECRET" --relay-pid "$pid" --rooms 20 --members 50 --senders 20 \
        --rate "$rate" --duration "$DURATION" --max-error-rate 1 --json > "$OUT/$which-$round-$rate.json" || true
      read -r b1 s1 < <(busy); r1=$(cputicks "$pid"); t1=$(date +%s.%N)
      read -r lu ls < <(tail -1 "$OUT/time.txt")
      # Cores used by everything but this relay and this relay-load during the run, and steal.
      awk -v b=$((b1 - b0)) -v s=$((s1 - s0)) -v r=$((r1 - r0)) -v l="$lu + $ls" -v w="$t1 - $t0" 'BEGIN {
        split(l, a, " + "); split(w, x, " - "); wall = x[1] - x[2]
        printf "{\"others_cores\": %.3f, \"steal_cores\": %.3f, \"relay_cores\": %.3f, \"load_cores\": %.3f}\n",
          (b / 100 - r / 100 - a[1] - a[2]) / wall, s / 100 / wall, r / 100 / wall, (a[1] + a[2]) / wall }' \
        > "$OUT/$which-$round-$rate.cpu.json"
      echo "round $round $which $rate after:  $(cat /proc/loadavg)" >> "$OUT/uptime.log"
    done
    if [ -n "${METRICS_GREP:-}" ]; then
      curl -s "http://127.0.0.1:$PORT/metrics" | grep -E "$METRICS_GREP" > "$OUT/$which-$round-metrics.txt" || true
    fi
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  done
done
python3 - "$OUT" "$ROUNDS" $RATES <<'PY'
import json, statistics, sys
out, rounds, rates = sys.argv[1], int(sys.argv[2]), [int(r) for r in sys.argv[3:]]
for rate in rates:
    cpu = {"before": [], "after": []}
    for r in range(1, rounds + 1):
        for w in ("before", "after"):
            try:
                d = json.load(open(f"{out}/{w}-{r}-{rate}.json"))
            except (OSError, ValueError):
                print(f"{rate} msg/s round {r} {w:6}: no result"); continue
            if d.get("relay_cpu_us_per_delivery") is not None:
                cpu[w].append(d["relay_cpu_us_per_delivery"])
            try:
                c = json.load(open(f"{out}/{w}-{r}-{rate}.cpu.json"))
                noise = f", others {c['others_cores']:.2f} cores, steal {c['steal_cores']:.2f}"
            except (OSError, ValueError, KeyError):
                noise = ""
            print(f"{rate} msg/s round {r} {w:6}: {d.get('deliveries_per_second', 0):,.0f} deliveries/s, "
                  f"{d.get('relay_cpu_us_per_delivery')} us CPU/delivery, p50 {d.get('latency_p50_ms')} ms, p99 {d.get('latency_p99_ms')} ms{noise}")
    if cpu["before"] and cpu["after"]:
        b, a = statistics.median(cpu["before"]), statistics.median(cpu["after"])
        print(f"{rate} msg/s median us CPU/delivery: before {b:.3f}, after {a:.3f}, after/before {a / b:.3f}")
PY
