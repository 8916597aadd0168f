#!/usr/bin/env bash
# The bench-check scenarios (large-room, small-rooms) against several relay binaries, interleaved
# round by round, with one load generator: for before/after comparisons of builds (a manifest
# setting, a refactor). Prints each run's relay CPU per delivery and its ratio to the generator's.
#
#     scripts/bench-builds.sh cmo=/tmp/relay-cmo/relay nocmo=.build-release/release/relay
#
# LOAD: the relay-load binary (default: the release one in .build-release); ROUNDS (default 3);
# DURATION seconds per run (default 5). Everything on 127.0.0.1, each run bounded in time.
set -euo pipefail
cd "$(dirname "$0")/.."
LOAD=${LOAD:-.build-release/release/relay-load}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
SECRET=bench-secret-0123456789abcdef0123456789
SCENARIOS=(
  "large-room|--rooms 1 --members 100 --senders 1 --rate 200"
  "small-rooms|--rooms 40 --members 5 --senders 40 --rate 2000"
)
[ $# -ge 1 ] || { echo "usage: $0 NAME=RELAY_BINARY..." >&2; exit 2; }
WORK=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
printf '%-8s %-12s %5s %12s %12s %8s\n' build scenario round relay_us gen_us ratio
for round in $(seq 1 "$ROUNDS"); do
  for spec in "$@"; do
    name=${spec%%=*}; bin=${spec#*=}
    PORT=$((18900 + RANDOM % 100))
    "$bin" --port $PORT --jwt-secret $SECRET --api-key bench-api-key-0123456789 --admin-key bench-admin-key-0123456789 \
      --db "$WORK/relay-$name.sqlite" --log-level notice --events-per-second 1000000 --event-burst 1000000 \
      --rate custom=1000000:1000000 --max-connections-per-ip 1000000 --max-connections-per-user 1000000 > "$WORK/relay.log" 2>&1 &
    PID=$!
    for _ in $(seq 1 300); do grep -q "relay listening" "$WORK/relay.log" && break; sleep 0.1; done
    for s in "${SCENARIOS[@]}"; do
      scenario=${s%%|*}; args=${s#*|}
      # shellcheck disable=SC2086
      "$LOAD" fanout --port $PORT --secret $SECRET --relay-pid $PID $args --duration "$DURATION" \
        --warmup 1 --max-error-rate 1 --json > "$WORK/run.json" 2>/dev/null || true
      python3 - "$WORK/run.json" "$name" "$scenario" "$round" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    r, g = d["relay_cpu_us_per_delivery"], d["generator_cpu_us_per_delivery"]
    print(f"{sys.argv[2]:8} {sys.argv[3]:12} {sys.argv[4]:>5} {r:12.2f} {g:12.2f} {r / g:8.3f}")
except Exception as e:
    print(f"{sys.argv[2]:8} {sys.argv[3]:12} {sys.argv[4]:>5} no result ({e})")
PY
    done
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
  done
done
