#!/usr/bin/env bash
# Fan-out CPU per delivery, latency and saturation, room size by room size, for Relay and
# (optionally) a uWebSockets peer, side by side in one run (issue #15). Each figure is one
# relay-load `fanout` run against a fresh server; rounds alternate the servers so drift on a
# shared VM hits both alike. Prints a table and writes every JSON to $OUT.
#
#   UWS=/path/to/uws-broadcast  a uWebSockets raw broadcast server taking the port as its only
#                               argument (see docs/BENCHMARKS.md for how it was built; not in
#                               the repo); omitted: Relay alone.
#   SIZES ["10 100 1000 10000"] members per room   DPS [100000] deliveries/s offered (moderate)
#   SAT_SIZES ["100 1000"] sizes also run saturated ("" for none)  SAT_DPS [2000000] deliveries/s offered then
#   ROUNDS [2]  DURATION [6 s]  THREADS [relay's default]  OUT [bench-results/scan]
#   SETUP_TIMEOUT [900 s] for opening and joining.
#   DEVICES [10] sockets per user. Every join announces a user's first device to the whole
#   room, so N single-device users cost N²/2 presence events to set up: 50 M for 10 000, all
#   read by this one generator process on the server's cores, which then answers pings late
#   and loses sockets (4000). K devices per user cut that K-fold; fan-out reaches every socket
#   either way (it walks connections, not users).
#   RELAY / LOAD: binaries (default: release build of this checkout)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-"10 100 1000 10000"}; DPS=${DPS:-100000}; SAT_SIZES=${SAT_SIZES-"100 1000"}; SAT_DPS=${SAT_DPS:-2000000}
ROUNDS=${ROUNDS:-2}; DURATION=${DURATION:-6}; OUT=${OUT:-bench-results/scan}; UWS=${UWS:-}
SETUP_TIMEOUT=${SETUP_TIMEOUT:-900}; DEVICES=${DEVICES:-10}
SECRET=bench-secret-0123456789abcdef0123456789
# shellcheck source=bench-relay-flags.sh
source scripts/bench-relay-flags.sh
mkdir -p "$OUT"
if [ -z "${RELAY:-}" ] || [ -z "${LOAD:-}" ]; then
  swift build -c release --product relay
  swift build -c release --product relay-load
  BIN=$(swift build -c release --show-bin-path); RELAY=${RELAY:-$BIN/relay}; LOAD=${LOAD:-$BIN/relay-load}
fi

SERVER_PID=
stop() {
  [ -n "$SERVER_PID" ] || return 0
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
}
trap stop EXIT

# one KIND SIZE DPS TAG: a fresh server, one fanout run, its JSON in $OUT/KIND-SIZE-TAG.json
one() {
  local kind=$1 size=$2 dps=$3 tag=$4 port=18300 proto rooms senders rate
  # Rooms of 10 need many messages: spread them over 10 rooms and 10 senders.
  if [ "$size" -lt 100 ]; then rooms=10; senders=10; else rooms=1; senders=1; fi
  rate=$(python3 -c "print(max(1, round($dps / (($size - 1) * 1.0))))")
  if [ "$kind" = relay ]; then
    "$RELAY" --port $port --db "$OUT/relay.sqlite" "${BENCH_RELAY_FLAGS[@]}" \
      --max-connections 100000 ${THREADS:+--threads $THREADS} > "$OUT/server.log" 2>&1 &
    proto=socketio
  else
    "$UWS" $port > "$OUT/server.log" 2>&1 &
    proto=raw
  fi
  SERVER_PID=$!
  for _ in $(seq 1 100); do grep -q "listening" "$OUT/server.log" 2>/dev/null && break; sleep 0.1; done
  "$LOAD" fanout --port $port --protocol $proto --secret $SECRET --relay-pid "$SERVER_PID" --rooms $rooms --members "$size" \
    --senders $senders --rate "$rate" --duration "$DURATION" --source-addresses 4 --max-error-rate 1 --json \
    --setup-timeout "$SETUP_TIMEOUT" --devices-per-user "$DEVICES" \
    > "$OUT/$kind-$size-$tag.json" 2>/dev/null || true
  stop
  rm -f "$OUT"/relay.sqlite*
}

KINDS="relay"; [ -n "$UWS" ] && KINDS="relay uws"
for r in $(seq 1 "$ROUNDS"); do
  order=$KINDS; [ $((r % 2)) -eq 0 ] && [ -n "$UWS" ] && order="uws relay"
  for size in $SIZES; do for kind in $order; do one "$kind" "$size" "$DPS" "r$r"; done; done
  for size in $SAT_SIZES; do for kind in $order; do one "$kind" "$size" "$SAT_DPS" "sat$r"; done; done
done

python3 - "$OUT" "$ROUNDS" "$SIZES" "$SAT_SIZES" "$KINDS" <<'PY'
import json, os, statistics, sys
out, rounds, sizes, sat_sizes, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5].split()
def runs(kind, size, tag):
    res = []
    for r in range(1, rounds + 1):
        try:
            with open(os.path.join(out, f"{kind}-{size}-{tag}{r}.json")) as f: res.append(json.load(f))
        except Exception: pass
    return res
def med(rs, key):
    v = [x.get(key) for x in rs if x.get(key) is not None]
    return statistics.median(v) if v else None
def fmt(v, d=2): return "-" if v is None else f"{v:,.{d}f}"
print(f"moderate load ({' and '.join(kinds)}), median of {rounds} rounds; CPU per delivery in µs, latency in ms")
# A run whose room was short, or whose deliveries went missing, is no figure.
for f in sorted(os.listdir(out)):
    if f.endswith(".json"):
        try:
            d = json.load(open(os.path.join(out, f)))
        except Exception:
            print(f"WARNING {f}: no result"); continue
        want = d.get("rooms", 0) * d.get("members_per_room", 0)
        if d.get("sockets") != want or (d.get("error_rate", 0) > 0 and "-sat" not in f):
            print(f"WARNING {f}: {d.get('sockets')} of {want} sockets, error rate {d.get('error_rate')}")
print(f"{'members':>8} " + " ".join(f"{k+' cpu':>10} {k+' p50':>9} {k+' p99':>9} {k+' del/s':>10}" for k in kinds) + ("   relay/uws cpu  p99" if "uws" in kinds else ""))
for s in sizes:
    row = f"{s:>8} "
    vals = {}
    for k in kinds:
        rs = runs(k, s, "r")
        vals[k] = (med(rs, "relay_cpu_us_per_delivery"), med(rs, "latency_p50_ms"), med(rs, "latency_p99_ms"), med(rs, "deliveries_per_second"))
        row += f"{fmt(vals[k][0]):>10} {fmt(vals[k][1]):>9} {fmt(vals[k][2]):>9} {fmt(vals[k][3], 0):>10} "
    if "uws" in kinds and vals["relay"][0] and vals["uws"][0]:
        row += f"   {vals['relay'][0] / vals['uws'][0]:.2f}x"
        if vals["relay"][2] and vals["uws"][2]: row += f"  {vals['relay'][2] / vals['uws'][2]:.2f}x"
    print(row)
    for k in kinds:
        rs = runs(k, s, "r")
        print(f"{'':>8}   {k} rounds: " + ", ".join(fmt(x.get('relay_cpu_us_per_delivery')) for x in rs)
              + f"   user {fmt(med(rs, 'relay_user_us_per_delivery'))} + system {fmt(med(rs, 'relay_sys_us_per_delivery'))} µs")
# Flatness: each size's median CPU per delivery against the mean of the sizes' medians.
for k in kinds:
    meds = [m for m in (med(runs(k, s, "r"), "relay_cpu_us_per_delivery") for s in sizes) if m]
    if len(meds) > 1:
        mean = sum(meds) / len(meds)
        print(f"{k} across sizes: {min(meds):.2f}–{max(meds):.2f} µs, {100 * (min(meds) / mean - 1):+.0f} % to {100 * (max(meds) / mean - 1):+.0f} % of their mean")
print("saturated (offered far above capacity), median of rounds: deliveries/s and CPU per delivery")
for s in sat_sizes:
    row = f"{s:>8} "
    for k in kinds:
        rs = runs(k, s, "sat")
        row += f"{k}: {fmt(med(rs, 'deliveries_per_second'), 0):>10} del/s {fmt(med(rs, 'relay_cpu_us_per_delivery')):>6} µs   "
    print(row)
PY
