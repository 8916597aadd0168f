#!/usr/bin/env bash
# measure.sh: the relay's RSS with COUNT idle authenticated sockets open. Starts one fresh relay
# (bench-fanout-scan flags, 127.0.0.1:$PORT), runs one `relay-load connections` (COUNT sockets,
# held 5 s, from 4 loopback source addresses), stops the relay.
#
# Usage: measure.sh RELAY LOAD TAG [COUNT] [extra relay flags...]
#   LOAD: the relay-load binary; "-" (or "") = $RELAY_LOAD, else the relay-load next to RELAY.
#   COUNT defaults to 19000. Env: OUT_ROOT (default /tmp/relay-memory), PORT (default 18731),
#   RELAY_ENV (e.g. "MALLOC_ARENA_MAX=2", set for the relay only).
# Prints relay-load's rss / connected / failures / still_open lines (and rc=); the full report is
# in $OUT_ROOT/TAG/load.txt, the relay's log in $OUT_ROOT/TAG/server.log.
set -u
[ $# -ge 3 ] || { grep -m1 '^# Usage:' "$0" | sed 's/^# //' >&2; exit 2; }
. "$(dirname "$0")/common.sh"
RELAY=$1; TAG=$3; COUNT=${4:-19000}; check_relay; LOAD=$(resolve_load "$2") || exit 2
shift 4 || shift $#
PORT=${PORT:-18731}; check_port "$PORT"
OUT=$OUT_ROOT/$TAG; mkdir -p "$OUT"; rm -f "$OUT"/relay.sqlite*
env ${RELAY_ENV:-} "$RELAY" --port "$PORT" --db "$OUT/relay.sqlite" "${RELAY_FLAGS[@]}" "$@" > "$OUT/server.log" 2>&1 &
PID=$!; started $PID
wait_listening "$OUT/server.log" 100 || { stop_relay $PID; exit 1; }
sleep 1
timeout 300 "$LOAD" connections --count "$COUNT" --hold 5 --source-addresses 4 --concurrency 512 \
  --host 127.0.0.1 --port "$PORT" --secret "$SECRET" --relay-pid $PID > "$OUT/load.txt" 2>&1
echo "rc=$?" >> "$OUT/load.txt"
grep -E "rss|connected|failures|still_open|^rc=" "$OUT/load.txt"
stop_relay $PID
rm -f "$OUT"/relay.sqlite*
