#!/usr/bin/env bash
# fanout.sh: the relay's CPU per delivery in one room of SIZE members. One `relay-load fanout` run
# (1 room, 1 sender at ~100 000 deliveries/s, 6 s, 10 devices per user) against a fresh relay
# (127.0.0.1:$PORT).
#
# Usage: fanout.sh RELAY TAG SIZE
#   SIZE ≥ 2. Env: RELAY_LOAD (default: the relay-load next to RELAY), OUT_ROOT (default
#   /tmp/relay-memory), PORT (default 18761).
# Prints one line: TAG SIZE {the report's cpu / deliver / p50 / p99 metrics}; the JSON report is
# in $OUT_ROOT/fan-TAG-SIZE/out.json.
set -u
[ $# -ge 3 ] || { grep -m1 '^# Usage:' "$0" | sed 's/^# //' >&2; exit 2; }
. "$(dirname "$0")/common.sh"
RELAY=$1; TAG=$2; SIZE=$3; check_relay; LOAD=$(resolve_load) || exit 2
[[ "$SIZE" =~ ^[0-9]+$ ]] && [ "$SIZE" -ge 2 ] || die "SIZE must be a number ≥ 2"
PORT=${PORT:-18761}; check_port "$PORT"
OUT=$OUT_ROOT/fan-$TAG-$SIZE; rm -rf "$OUT"; mkdir -p "$OUT"
"$RELAY" --port "$PORT" --db "$OUT/relay.sqlite" "${RELAY_FLAGS[@]}" > "$OUT/server.log" 2>&1 &
PID=$!; started $PID
wait_listening "$OUT/server.log" 100 || { stop_relay $PID; exit 1; }
RATE=$(python3 -c "print(max(1, round(100000 / ($SIZE - 1))))")
timeout 300 "$LOAD" fanout --host 127.0.0.1 --port "$PORT" --protocol socketio --secret "$SECRET" --relay-pid $PID \
  --rooms 1 --members "$SIZE" --senders 1 --rate "$RATE" --duration 6 --source-addresses 4 --max-error-rate 1 \
  --json --devices-per-user 10 > "$OUT/out.json" 2>/dev/null
stop_relay $PID
python3 - "$OUT/out.json" "$TAG" "$SIZE" <<'PY'
import json, sys
try: d = json.load(open(sys.argv[1]))
except Exception as e: print(sys.argv[2], sys.argv[3], 'no json', e); sys.exit()
m = d.get('metrics', d)
keys = [k for k in m if 'cpu' in k.lower() or 'deliver' in k.lower() or 'p50' in k or 'p99' in k]
print(sys.argv[2], sys.argv[3], {k: m[k] for k in keys})
PY
