#!/usr/bin/env bash
# Runs the same `fanout` and `connections` scenarios of relay-load, in one run, against
#   - Relay (release build),
#   - a Node `ws` room-broadcast server (Debian's node-ws; LoadTests/peers/ws-broadcast.js),
#   - a python-socketio server on uvicorn + uvloop (LoadTests/peers/socketio_server.py),
#   - optionally Node's socket.io 4.8 server (LoadTests/peers/socketio-node-server.js): set
#     SOCKETIO_NODE to the node_modules folder holding a socket.io build (docs/BENCHMARKS.md says
#     how it was built); skipped when unset,
# all on 127.0.0.1, and prints each figure with the ratio Relay/peer.
# Every run is bounded (DURATION seconds each); servers are stopped by the pids this script started.
#
# Environment knobs (defaults in brackets): ROOMS [20] MEMBERS [50] SENDERS [20] RATE [16000 msg/s offered]
# DURATION [10 s] CONNS [5000 sockets for `connections`] OUT [bench-results/] SOCKETIO_NODE [unset].
set -euo pipefail
cd "$(dirname "$0")/.."

ROOMS=${ROOMS:-20}; MEMBERS=${MEMBERS:-50}; SENDERS=${SENDERS:-20}; RATE=${RATE:-16000}
DURATION=${DURATION:-10}; CONNS=${CONNS:-5000}; OUT=${OUT:-bench-results}
SOCKETIO_NODE=${SOCKETIO_NODE:-}
SECRET=bench-secret-0123456789abcdef0123456789
# shellcheck source=bench-relay-flags.sh
source scripts/bench-relay-flags.sh
mkdir -p "$OUT"

# --- prerequisites -------------------------------------------------------------------------
if [ ! -d /usr/share/nodejs/ws ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq node-ws
fi
if [ ! -x .venv-bench/bin/python ]; then python3 -m venv .venv-bench; fi
.venv-bench/bin/pip install -q -r LoadTests/peers/requirements.txt
swift build -c release --product relay
swift build -c release --product relay-load
BIN=$(swift build -c release --show-bin-path)
LOAD="$BIN/relay-load"

PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# start NAME PORT LOGLINE CMD... : starts a server, waits (bounded) for its listening line.
start() {
  local name=$1 port=$2 line=$3; shift 3
  "$@" > "$OUT/$name.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  for _ in $(seq 1 300); do
    grep -q "$line" "$OUT/$name.log" 2>/dev/null && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$OUT/$name.log"; return 1; }
    sleep 0.1
  done
  echo "$name did not start"; cat "$OUT/$name.log"; return 1
}

stop() {
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$SERVER_PID" 2>/dev/null || true
}

# run NAME PROTOCOL PORT : the two scenarios against one server, connections first (on a fresh
# process, so its RSS per socket is not hidden by memory the fan-out run left allocated).
run() {
  local name=$1 proto=$2 port=$3
  "$LOAD" connections --port "$port" --protocol "$proto" --secret "$SECRET" --relay-pid "$SERVER_PID" \
    --count "$CONNS" --hold 2 --max-error-rate 1 --json > "$OUT/$name-connections.json" || true
  "$LOAD" fanout --port "$port" --protocol "$proto" --secret "$SECRET" --relay-pid "$SERVER_PID" \
    --rooms "$ROOMS" --members "$MEMBERS" --senders "$SENDERS" --rate "$RATE" --duration "$DURATION" \
    --max-error-rate 1 --json > "$OUT/$name-fanout.json" || true
}

RELAY_FLAGS=(--db "$OUT/relay.sqlite" "${BENCH_RELAY_FLAGS[@]}")

start relay 18100 "relay listening" "$BIN/relay" --port 18100 "${RELAY_FLAGS[@]}"
run relay socketio 18100
# Latency at half of Relay's measured rate.
HALF=$(python3 -c "import json;d=json.load(open('$OUT/relay-fanout.json'));print(max(1,int(d['sent_per_second']/2)))")
"$LOAD" fanout --port 18100 --secret "$SECRET" --relay-pid "$SERVER_PID" --rooms "$ROOMS" --members "$MEMBERS" \
  --senders "$SENDERS" --rate "$HALF" --duration "$DURATION" --max-error-rate 1 --json > "$OUT/relay-fanout-half.json" || true
stop

start ws 18101 "ws listening" env NODE_PATH=/usr/share/nodejs node LoadTests/peers/ws-broadcast.js 18101
run ws raw 18101
stop

start socketio 18102 "python-socketio listening" .venv-bench/bin/python LoadTests/peers/socketio_server.py 18102
run socketio socketio 18102
stop

if [ -n "$SOCKETIO_NODE" ]; then
  [ -f "$SOCKETIO_NODE/socket.io/package.json" ] || { echo "SOCKETIO_NODE=$SOCKETIO_NODE holds no socket.io"; exit 1; }
  start socketio-node 18103 "socket.io listening" env NODE_PATH="$SOCKETIO_NODE" node LoadTests/peers/socketio-node-server.js 18103
  run socketio-node socketio 18103
  stop
fi

python3 - "$OUT" "$SOCKETIO_NODE" <<'PY'
import json, sys, os
out = sys.argv[1]
def load(name):
    try:
        with open(os.path.join(out, name)) as f: return json.load(f)
    except Exception: return {}
r, w, p = load("relay-fanout.json"), load("ws-fanout.json"), load("socketio-fanout.json")
rc, wc, pc = load("relay-connections.json"), load("ws-connections.json"), load("socketio-connections.json")
# Node socket.io: only when this run had SOCKETIO_NODE set (not a stale file of an earlier run).
node = sys.argv[2] if len(sys.argv) > 2 else ""
n, nc = (load("socketio-node-fanout.json"), load("socketio-node-connections.json")) if node else ({}, {})
half = load("relay-fanout-half.json")
def fmt(v): return "-" if v is None else (f"{v:,.1f}" if isinstance(v, float) else f"{v:,}")
def ratio(a, b, invert=False):
    if not a or not b: return "-"
    return f"{(b / a if invert else a / b):.2f}x"
rows = [
    ("fanout deliveries/s", "deliveries_per_second", r, w, p, n, False),
    ("fanout latency p50 ms", "latency_p50_ms", r, w, p, n, True),
    ("fanout latency p99 ms", "latency_p99_ms", r, w, p, n, True),
    ("fanout latency p999 ms", "latency_p999_ms", r, w, p, n, True),
    ("fanout server CPU µs/delivery", "relay_cpu_us_per_delivery", r, w, p, n, True),
    ("connections/s", "connects_per_second", rc, wc, pc, nc, False),
    ("server RSS KiB/socket", "relay_rss_per_socket_kib", rc, wc, pc, nc, True),
]
head = f"{'figure':32} {'relay':>12} {'node ws':>12} {'py-socketio':>12}"
head += f" {'node sio':>12}" if node else ""
head += f" {'relay/ws':>9} {'relay/py':>9}" + (f" {'relay/sio':>9}" if node else "")
print(head)
for label, key, a, b, c, d, inv in rows:
    line = f"{label:32} {fmt(a.get(key)):>12} {fmt(b.get(key)):>12} {fmt(c.get(key)):>12}"
    line += f" {fmt(d.get(key)):>12}" if node else ""
    line += f" {ratio(a.get(key), b.get(key), inv):>9} {ratio(a.get(key), c.get(key), inv):>9}"
    line += f" {ratio(a.get(key), d.get(key), inv):>9}" if node else ""
    print(line)
print("(for latency, CPU and memory the ratio is peer/relay: above 1x means Relay is better)")
if half:
    print(f"relay at half its rate ({half.get('sent_per_second', 0):.0f} msg/s): p50 {half.get('latency_p50_ms')} ms, p99 {half.get('latency_p99_ms')} ms, p999 {half.get('latency_p999_ms')} ms")
PY
