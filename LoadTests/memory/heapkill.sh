#!/usr/bin/env bash
# heapkill.sh: what the relay's heap holds per idle socket. Runs the relay under heaptrack
# (127.0.0.1:$PORT), opens COUNT idle authenticated sockets (`relay-load connections
# --concurrency 64 --hold 20`), and SIGKILLs the relay once `ss` shows them established, so
# heaptrack's "leaked" allocations are exactly what was live while they were held.
#
# Usage: heapkill.sh RELAY TAG [COUNT] [extra relay flags...]
#   COUNT defaults to 3000. Env: RELAY_LOAD (default: the relay-load next to RELAY),
#   OUT_ROOT (default /tmp/relay-memory), PORT (default 18741).
# Prints the relay's pid, the sockets established and the relay's VmRSS at the kill, and the files
# in $OUT_ROOT/heap-TAG (ht.zst: heaptrack's data; load.txt, server.log). Then see README.md for
# heaptrack_print, leaks.py and categorize.py.
set -u
[ $# -ge 2 ] || { grep -m1 '^# Usage:' "$0" | sed 's/^# //' >&2; exit 2; }
. "$(dirname "$0")/common.sh"
RELAY=$1; TAG=$2; COUNT=${3:-3000}; check_relay; LOAD=$(resolve_load) || exit 2
shift 3 || shift $#
command -v heaptrack >/dev/null || die "heaptrack not found (Debian package heaptrack)"
PORT=${PORT:-18741}; check_port "$PORT"
OUT=$OUT_ROOT/heap-$TAG; rm -rf "$OUT"; mkdir -p "$OUT"
heaptrack -o "$OUT/ht" "$RELAY" --port "$PORT" --db "$OUT/relay.sqlite" "${RELAY_FLAGS[@]}" "$@" > "$OUT/server.log" 2>&1 &
HPID=$!; started $HPID
wait_listening "$OUT/server.log" 300 || { stop_relay $HPID; exit 1; }
PID=$(child_running "$RELAY" $HPID) || { echo "relay process under heaptrack $HPID not found" >&2; stop_relay $HPID; exit 1; }
started $PID
echo "relay pid $PID (heaptrack $HPID) $(cat /proc/$PID/comm)"
sleep 2
start_connections "$COUNT" 20 64 $PID "$OUT/load.txt"
wait_established "$PORT" "$COUNT" 600
sleep 3
echo "established $N; rss $(grep VmRSS /proc/$PID/status)"
kill -KILL $PID; forget $PID
wait $HPID 2>/dev/null; forget $HPID
kill $LPID 2>/dev/null; wait $LPID 2>/dev/null; forget $LPID
ls "$OUT"
