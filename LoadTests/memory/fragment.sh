#!/usr/bin/env bash
# fragment.sh: how much of the relay's RSS with COUNT sockets open is free heap glibc keeps.
# Opens COUNT sockets (`relay-load connections --hold 25`) against a fresh relay (127.0.0.1:$PORT)
# and, while they are held, reads VmRSS, calls glibc's malloc_stats() (in use vs system bytes,
# per arena) and malloc_trim(0) in the relay through gdb, and reads VmRSS again.
#
# Usage: fragment.sh RELAY TAG [COUNT]
#   COUNT defaults to 19000. Env: RELAY_LOAD (default: the relay-load next to RELAY),
#   OUT_ROOT (default /tmp/relay-memory), PORT (default 18751), RELAY_ENV (set for the relay only).
# Prints "open:" VmRSS, "after trim:" VmRSS, relay-load's rss/connected lines, and malloc_stats'
# per-arena lines (written to the relay's stderr, $OUT_ROOT/frag-TAG/server.log); gdb's output in gdb.txt.
set -u
[ $# -ge 2 ] || { grep -m1 '^# Usage:' "$0" | sed 's/^# //' >&2; exit 2; }
. "$(dirname "$0")/common.sh"
RELAY=$1; TAG=$2; COUNT=${3:-19000}; check_relay; LOAD=$(resolve_load) || exit 2
command -v gdb >/dev/null || die "gdb not found (Debian package gdb)"
PORT=${PORT:-18751}; check_port "$PORT"
OUT=$OUT_ROOT/frag-$TAG; rm -rf "$OUT"; mkdir -p "$OUT"
env ${RELAY_ENV:-} "$RELAY" --port "$PORT" --db "$OUT/relay.sqlite" "${RELAY_FLAGS[@]}" > "$OUT/server.log" 2>&1 &
PID=$!; started $PID
wait_listening "$OUT/server.log" 100 || { stop_relay $PID; exit 1; }
sleep 1
start_connections "$COUNT" 25 512 $PID "$OUT/load.txt"
wait_established "$PORT" "$COUNT" 600
sleep 2
echo "open: $(grep VmRSS /proc/$PID/status)"
timeout 60 gdb -p $PID -batch -ex 'call (void)malloc_stats()' -ex 'call (int)malloc_trim(0)' > "$OUT/gdb.txt" 2>&1
sleep 1
echo "after trim: $(grep VmRSS /proc/$PID/status)"
wait $LPID; forget $LPID
grep -E "rss|connected " "$OUT/load.txt"
stop_relay $PID
grep -E "Arena|system bytes|in use bytes|Total" "$OUT/server.log" | head -60
