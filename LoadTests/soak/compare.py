#!/usr/bin/env python3
"""Others' latency with and without the attacker, from soak runs (LoadTests/soak/soak.py).

    compare.py WITH_DIR WITHOUT_DIR   two runs back to back: matched rounds of each scenario
    compare.py ALTERNATE_DIR          one run with --attacker-alternate: its rounds with the
                                      attacker against its rounds without, per scenario

Rounds with a fault (kill -9 of a node or of Redis) and rounds whose load generator failed are
left out; medians over the rounds that remain, per scenario (fan-out, slow consumer)."""
import json
import statistics
import sys


def load(d):
    rounds = {r["round"]: r for r in (json.loads(line) for line in open(f"{d}/loads.jsonl"))}
    summary = json.load(open(f"{d}/summary.json"))
    faults = {f["round"] for f in summary.get("faults", [])}
    return rounds, faults, summary


def p50(r):
    return r["report"].get("latency_p50_ms") or r["report"].get("stalled.latency_p50_ms")


def usable(r, faults):
    return r["round"] not in faults and r["exit"] == 0 and r.get("p99_ms") is not None


def report(scenario, pairs, label_a, label_b):
    if not pairs:
        return
    ma = statistics.median(a["p99_ms"] for a, _ in pairs)
    mb = statistics.median(b["p99_ms"] for _, b in pairs)
    pa = statistics.median(p50(a) for a, _ in pairs)
    pb = statistics.median(p50(b) for _, b in pairs)
    print(f"{scenario}: {len(pairs)} rounds")
    print(f"  p99 median {label_a} {ma:.2f} ms, {label_b} {mb:.2f} ms, ratio {ma / mb:.2f}")
    print(f"  p50 median {label_a} {pa:.3f} ms, {label_b} {pb:.3f} ms, ratio {pa / pb:.2f}")
    print("  p99 per round:", ", ".join(f"{a['round']}:{a['p99_ms']:.2f}/{b['round']}:{b['p99_ms']:.2f}" for a, b in pairs))


def main(argv):
    if len(argv) == 3:
        (a, fa, _), (b, fb, _) = load(argv[1]), load(argv[2])
        for scenario in ("fanout", "slow-consumer"):
            pairs = [(a[k], b[k]) for k in sorted(set(a) & set(b))
                     if a[k]["scenario"] == scenario and b[k]["scenario"] == scenario and usable(a[k], fa) and usable(b[k], fb)]
            report(scenario, pairs, "with", "without")
    elif len(argv) == 2:
        rounds, faults, summary = load(argv[1])
        active = set(summary.get("attacker_rounds") or [])
        for scenario in ("fanout", "slow-consumer"):
            mine = [r for k, r in sorted(rounds.items()) if r["scenario"] == scenario and usable(r, faults)]
            on = [r for r in mine if r["round"] in active]
            off = [r for r in mine if r["round"] not in active]
            # Unpaired medians; listed side by side in round order.
            n = min(len(on), len(off))
            if n == 0:
                continue
            ma, mb = statistics.median(r["p99_ms"] for r in on), statistics.median(r["p99_ms"] for r in off)
            pa, pb = statistics.median(p50(r) for r in on), statistics.median(p50(r) for r in off)
            print(f"{scenario}: {len(on)} rounds with the attacker, {len(off)} without")
            print(f"  p99 median with {ma:.2f} ms, without {mb:.2f} ms, ratio {ma / mb:.2f}")
            print(f"  p50 median with {pa:.3f} ms, without {pb:.3f} ms, ratio {pa / pb:.2f}")
            print("  p99 with:", ", ".join(f"{r['round']}:{r['p99_ms']:.2f}" for r in on))
            print("  p99 without:", ", ".join(f"{r['round']}:{r['p99_ms']:.2f}" for r in off))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
