# Sourced (not run) by the benchmark scripts and LoadTests/memory: the relay flags that put every
# per-connection and per-user limit out of the way, so a benchmark measures the relay's work and
# not its refusals (a run that crosses a limit measures closed sockets: the durable-receipt
# figures of 2026-11-26 did, see docs/BENCHMARKS.md). The caller sets SECRET first and adds
# --port, --db and anything of its own.
BENCH_RELAY_FLAGS=(--jwt-secret "$SECRET" --api-key bench-api-key-0123456789 --admin-key bench-admin-key-0123456789
  --log-level notice --events-per-second 1000000 --event-burst 1000000 --packets-per-second 1000000
  --inbound-bytes-per-second 1000000000 --event-bytes-per-second 1000000000 --rate custom=1000000:1000000
  --max-connections-per-ip 1000000 --max-connections-per-user 1000000)
