#!/usr/bin/env bash
# Server CPU per delivery, side by side, measured by an independent probe (LoadTests/probe/probe.js,
# Node, not relay-load): for each room size and window W (messages kept in flight by one sender,
# the next sent when the last member has the oldest), each server in turn, a fresh server per
# run, rounds alternating the server order (drift on a shared machine then hits all alike).
# Prints a table of medians over the rounds and writes every run's JSON (and the probe's log) to
# $OUT. Servers whose binary or script is missing are skipped.
#
#   SERVERS ["relay uws ws socketio-node"]  also: python (python-socketio, LoadTests/peers/socketio_server.py),
#   relay-before (RELAY_BEFORE: an earlier relay binary, for a before/after in the same run),
#   relay-1loop (the relay with --threads 1), nio and nio-2loops (LoadTests/peers/nio-broadcast, a
#   bare SwiftNIO broadcast with one and two event loops: NIO's own floor; built as its
#   Package.swift says, binary NIO_BROADCAST)
#   SIZES ["2 10 100 1000 10000"] members of the one room   WINDOWS ["1 8 64"] messages in flight
#   ROUNDS [2]  DURATION [5 s measured]  WARMUP [2 s]  DEVICES [10] sockets per user (Relay:
#   presence is announced per user, so 10 000 single-device users would cost 50 M setup events)
#   OUT [bench-results/probe]  PORT [18400] first port (each run takes the next one)
#   SETUP_TIMEOUT [600 s] connect, join and settle, each
#   ACCOUNTING [drained] the probe's --accounting: drained reads the CPU with nothing in flight at
#   both ends (exact for any W × N); steady reads it mid-stream
#   RELAY [.build-release/release/relay]  UWS [/work/peers/uws/uws-broadcast] (see docs/BENCHMARKS.md)
#   WS_NODE_PATH [/usr/share/nodejs] holds Debian's node-ws, for LoadTests/peers/ws-broadcast.js
#   SIO_NODE_MODULES [/work/peers/socketio-node/node_modules] holds socket.io 4.8, for
#   LoadTests/peers/socketio-node-server.js   PYTHON [.venv/bin/python] with python-socketio
#   NODE [node]
set -euo pipefail
cd "$(dirname "$0")/.."
SERVERS=${SERVERS:-"relay uws ws socketio-node"}
SIZES=${SIZES:-"2 10 100 1000 10000"}; WINDOWS=${WINDOWS:-"1 8 64"}; ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-5}; WARMUP=${WARMUP:-2}; DEVICES=${DEVICES:-10}; OUT=${OUT:-bench-results/probe}
PORT=${PORT:-18400}; SETUP_TIMEOUT=${SETUP_TIMEOUT:-600}; ACCOUNTING=${ACCOUNTING:-drained}
RELAY=${RELAY:-.build-release/release/relay}; UWS=${UWS:-/work/peers/uws/uws-broadcast}
WS_NODE_PATH=${WS_NODE_PATH:-/usr/share/nodejs}; SIO_NODE_MODULES=${SIO_NODE_MODULES:-/work/peers/socketio-node/node_modules}
PYTHON=${PYTHON:-.venv/bin/python}; NODE=${NODE:-node}
NIO_BROADCAST=${NIO_BROADCAST:-/work/peers/nio-broadcast-build/release/nio-broadcast}
SECRET=bench-secret-0123456789abcdef0123456789
# shellcheck source=bench-relay-flags.sh
source scripts/bench-relay-flags.sh
PROBE=LoadTests/probe/probe.js
mkdir -p "$OUT"

# Which servers can run here.
available() {
  case $1 in
    relay) [ -x "$RELAY" ] ;;
    relay-before) [ -n "${RELAY_BEFORE:-}" ] && [ -x "$RELAY_BEFORE" ] ;;
    relay-1loop) [ -x "$RELAY" ] ;;
    nio|nio-2loops) [ -x "$NIO_BROADCAST" ] ;;
    uws) [ -x "$UWS" ] ;;
    ws) [ -f "$WS_NODE_PATH/ws/package.json" ] ;;
    socketio-node) [ -f LoadTests/peers/socketio-node-server.js ] && [ -d "$SIO_NODE_MODULES/socket.io" ] ;;
    python) [ -x "$PYTHON" ] && "$PYTHON" -c 'import socketio, uvicorn' 2>/dev/null ;;
    *) return 1 ;;
  esac
}
KINDS=
for k in $SERVERS; do
  if available "$k"; then KINDS="$KINDS $k"; else echo "skipping $k: not found (see the variables at the top of $0)" >&2; fi
done
KINDS=${KINDS# }
[ -n "$KINDS" ] || { echo "no server to run" >&2; exit 1; }
{
  echo "date: $(date -u +%FT%TZ)  host: $(uname -n)  cores: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')  servers: $KINDS"
  echo "relay: $RELAY  uws: $UWS  node: $($NODE --version)"
  echo "SIZES=$SIZES WINDOWS=$WINDOWS ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP DEVICES=$DEVICES ACCOUNTING=$ACCOUNTING"
} > "$OUT/meta.txt"

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
trap 'stop; exit 130' INT TERM

# start KIND PORT LOG: the server in the background (SERVER_PID is the server itself, not a
# wrapper: its /proc/PID/stat is what the probe reads), then waits (bounded) for its port.
start() {
  local kind=$1 port=$2 log=$3
  case $kind in
    relay|relay-before|relay-1loop)
      local bin=$RELAY extra=(); [ "$kind" = relay-before ] && bin=$RELAY_BEFORE; [ "$kind" = relay-1loop ] && extra=(--threads 1)
      "$bin" --port "$port" --db "$OUT/relay.sqlite" "${BENCH_RELAY_FLAGS[@]}" --max-connections 100000 "${extra[@]}" > "$log" 2>&1 & ;;
    nio) "$NIO_BROADCAST" "$port" 1 > "$log" 2>&1 & ;;
    nio-2loops) "$NIO_BROADCAST" "$port" 2 > "$log" 2>&1 & ;;
    uws) "$UWS" "$port" > "$log" 2>&1 & ;;
    ws) NODE_PATH=$WS_NODE_PATH "$NODE" LoadTests/peers/ws-broadcast.js "$port" > "$log" 2>&1 & ;;
    socketio-node) NODE_PATH=$SIO_NODE_MODULES "$NODE" LoadTests/peers/socketio-node-server.js "$port" > "$log" 2>&1 & ;;
    python) "$PYTHON" LoadTests/peers/socketio_server.py "$port" > "$log" 2>&1 & ;;
  esac
  SERVER_PID=$!
  for _ in $(seq 1 150); do
    kill -0 "$SERVER_PID" 2>/dev/null || return 1
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

protocol() { case $1 in uws|ws|nio|nio-2loops) echo raw ;; *) echo socketio ;; esac; }

RUN=0
# one KIND SIZE W ROUND: a fresh server, one probe run, $OUT/KIND-nSIZE-wW-rROUND.json (+ .log)
one() {
  local kind=$1 size=$2 w=$3 r=$4 port base
  port=$((PORT + RUN % 200)); RUN=$((RUN + 1))
  base="$OUT/$kind-n$size-w$w-r$r"
  if ! start "$kind" "$port" "$base.server.log"; then
    echo "$kind did not start on port $port (log: $base.server.log)" >&2
    echo '{"error":"server did not start"}' > "$base.json"; stop; return 0
  fi
  printf '%-14s n=%-6s w=%-3s round %s … ' "$kind" "$size" "$w" "$r" >&2
  # The probe bounds itself; timeout is the backstop.
  timeout --kill-after=10 $((3 * SETUP_TIMEOUT + WARMUP + DURATION + 120)) \
    "$NODE" "$PROBE" --port "$port" --protocol "$(protocol "$kind")" --members "$size" --window "$w" \
      --duration "$DURATION" --warmup "$WARMUP" --accounting "$ACCOUNTING" --server-pid "$SERVER_PID" --secret $SECRET --devices-per-user "$DEVICES" \
      --setup-timeout "$SETUP_TIMEOUT" --settle-timeout "$SETUP_TIMEOUT" --label "$kind" \
    > "$base.json" 2> "$base.log" || true
  python3 -c 'import json,sys
try: d=json.load(open(sys.argv[1]))
except Exception: print("no result"); sys.exit()
print("FAILED: "+d["error"] if "error" in d else "%.3f µs/delivery, p99 %s ms, %s deliveries/s" % (d.get("cpu_us_per_delivery") or float("nan"), d.get("latency_p99_ms"), d.get("deliveries_per_s")))' "$base.json" >&2
  stop
  # Keep the server's log only when something went wrong.
  if grep -q '"error"' "$base.json" 2>/dev/null || [ ! -s "$base.json" ]; then :; else rm -f "$base.server.log"; fi
  rm -f "$OUT"/relay.sqlite*
}

for r in $(seq 1 "$ROUNDS"); do
  order=$KINDS
  [ $((r % 2)) -eq 0 ] && order=$(echo "$KINDS" | tr ' ' '\n' | tac | tr '\n' ' ')
  for size in $SIZES; do for w in $WINDOWS; do for kind in $order; do one "$kind" "$size" "$w" "$r"; done; done; done
done

python3 - "$OUT" "$ROUNDS" "$SIZES" "$WINDOWS" "$KINDS" <<'PY'
import json, os, statistics, sys
out, rounds, sizes, windows, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5].split()
def runs(k, s, w):
    res = []
    for r in range(1, rounds + 1):
        try:
            d = json.load(open(os.path.join(out, f"{k}-n{s}-w{w}-r{r}.json")))
        except Exception:
            d = {"error": "no result"}
        res.append(d)
    return res
def med(rs, key):
    v = [x[key] for x in rs if "error" not in x and x.get(key) is not None]
    return statistics.median(v) if v else None
def fmt(v, d=2):
    if v is None: return "-"
    return f"{v:,.{d}f}" if abs(v) < 1000 else f"{v:,.0f}"
bad = [(k, s, w, i + 1, d.get("error")) for k in kinds for s in sizes for w in windows for i, d in enumerate(runs(k, s, w)) if "error" in d]
for k, s, w, r, e in bad: print(f"WARNING {k} n={s} w={w} round {r}: {e}")
print(f"server CPU (user+system) per delivery and per event in µs, p99 delivery latency in ms; median of {rounds} round(s)")
print("(probe.js: one room of n members, one sender keeping w messages in flight; see the JSONs in " + out + ")")
cols = "".join(f" | {k[:13]:>13} µs/del  µs/event  p99 ms" for k in kinds)
ratio = "relay" in kinds and "uws" in kinds
print(f"{'n':>6} {'w':>3}{cols}" + (" | relay/uws" if ratio else ""))
for s in sizes:
    for w in windows:
        row = f"{s:>6} {w:>3}"
        v = {}
        for k in kinds:
            rs = runs(k, s, w)
            v[k] = med(rs, "cpu_us_per_delivery")
            row += f" | {fmt(v[k]):>20} {fmt(med(rs, 'cpu_us_per_event'), 1):>9} {fmt(med(rs, 'latency_p99_ms')):>7}"
        if ratio:
            row += f" | {v['relay'] / v['uws']:>8.2f}x" if v["relay"] and v["uws"] else " |        -"
        print(row)
print()
print("rounds: µs per delivery (user + system), deliveries/s, the probe's CPU, and how busy the machine was (cores used by other processes)")
for s in sizes:
    for w in windows:
        for k in kinds:
            rs = runs(k, s, w)
            parts = []
            for d in rs:
                if "error" in d: parts.append("failed"); continue
                parts.append(f"{fmt(d.get('cpu_us_per_delivery'))} ({fmt(d.get('user_us_per_delivery'))}+{fmt(d.get('system_us_per_delivery'))})"
                             f" {fmt(d.get('deliveries_per_s'), 0)}/s probe {fmt(d.get('probe_cpu_percent'), 0)}% other {fmt(d.get('host_other_cores'))}")
            print(f"{s:>6} {w:>3} {k:>13}: " + "; ".join(parts))
PY
