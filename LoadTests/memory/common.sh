# common.sh: shared by measure.sh, heapkill.sh, fragment.sh and fanout.sh (sourced, not run).
# Sets OUT_ROOT (env, default /tmp/relay-memory), the relay's secret and flags, and helpers that
# start, wait for and stop only the processes the calling script started. Everything listens on
# and connects to 127.0.0.0/8: the relay binds 127.0.0.1, relay-load connects there from
# 127.0.0.2… (--source-addresses).

OUT_ROOT=${OUT_ROOT:-/tmp/relay-memory}
SECRET=bench-secret-0123456789abcdef0123456789
# The benchmark scripts' flags (scripts/bench-relay-flags.sh): limits out of the way so only
# memory (or CPU) is measured.
# shellcheck source=../../scripts/bench-relay-flags.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/bench-relay-flags.sh"
RELAY_FLAGS=(--host 127.0.0.1 "${BENCH_RELAY_FLAGS[@]}" --max-connections 100000)

die() { echo "$(basename "$0"): $*" >&2; exit 2; }

# resolve_load [LOAD]: LOAD if given (and not "-"), else $RELAY_LOAD, else relay-load next to $RELAY.
resolve_load() {
  local l=${1:-}
  [ "$l" = "-" ] && l=
  l=${l:-${RELAY_LOAD:-$(dirname "$RELAY")/relay-load}}
  [ -x "$l" ] || die "relay-load not found or not executable: $l (pass it, or set RELAY_LOAD)"
  printf '%s\n' "$l"
}

check_relay() { [ -x "$RELAY" ] || die "relay binary not found or not executable: $RELAY"; }

# check_port PORT: refuse a port something already listens on (we would measure someone else's relay).
check_port() {
  [ -z "$(ss -Htln "( sport = :$1 )" 2>/dev/null)" ] || die "port $1 already has a listener; choose another with PORT=…"
}

# Processes this script started, ended (TERM, then KILL) if the script exits early.
STARTED=()
started() { STARTED+=("$1"); }
forget() { local p keep=(); for p in "${STARTED[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done; STARTED=("${keep[@]}"); }
cleanup() {
  local p alive=()
  for p in "${STARTED[@]}"; do kill -0 "$p" 2>/dev/null && alive+=("$p"); done
  [ ${#alive[@]} -eq 0 ] && return 0
  kill -TERM "${alive[@]}" 2>/dev/null; sleep 1; kill -KILL "${alive[@]}" 2>/dev/null; wait "${alive[@]}" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_listening LOG TRIES: up to TRIES × 0.1 s for the relay's "listening" line in LOG.
wait_listening() {
  for _ in $(seq 1 "$2"); do grep -q "listening" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "$(basename "$0"): the relay did not report listening; last lines of $1:" >&2; tail -5 "$1" >&2; return 1
}

# wait_established PORT COUNT TRIES: up to TRIES × 0.2 s for COUNT established sockets on PORT; sets N.
wait_established() {
  N=0
  for _ in $(seq 1 "$3"); do
    N=$(ss -Htn state established "( sport = :$1 )" | wc -l)
    [ "${N:-0}" -ge "$2" ] && return 0; sleep 0.2
  done
  return 1
}

# stop_relay PID: SIGTERM, up to 10 s to exit, then SIGKILL; reaps it.
stop_relay() {
  local p=$1
  kill -TERM "$p" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; forget "$p"
}

# child_running EXE PARENT: the pid of PARENT's child running EXE (the relay under heaptrack).
child_running() {
  local want c; want=$(readlink -f "$1")
  for c in $(pgrep -P "$2"); do
    [ "$(readlink -f "/proc/$c/exe" 2>/dev/null)" = "$want" ] && { echo "$c"; return 0; }
  done
  return 1
}

# start_connections COUNT HOLD CONCURRENCY RELAY_PID OUTFILE: relay-load holds COUNT sockets for
# HOLD seconds on $PORT (from 4 loopback source addresses, bounded by `timeout 300`), in the
# background; sets LPID.
start_connections() {
  timeout 300 "$LOAD" connections --count "$1" --hold "$2" --source-addresses 4 --concurrency "$3" \
    --host 127.0.0.1 --port "$PORT" --secret "$SECRET" --relay-pid "$4" > "$5" 2>&1 &
  LPID=$!; started $LPID
}
