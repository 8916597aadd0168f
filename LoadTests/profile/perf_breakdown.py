#!/usr/bin/env python3
"""Where a relay's CPU goes, per delivery, from a `perf record` of it.

Usage: perf_breakdown.py PERF_DATA [CPU_US_PER_DELIVERY]

Reads `perf report --no-children --sort dso,sym` (self time per symbol) and sums the samples
into the categories docs/BENCHMARKS.md reports: the kernel (syscalls and the loopback TCP path,
the receiver's side included), NIO (pipeline, pending writes, event loop), allocation, locking,
the Swift runtime (retain/release, exclusivity checks, casts), encoding and compression, and
Relay's own code. With the relay's CPU per delivery (from relay-load) each share is also
printed in µs per delivery.
"""
import re
import subprocess
import sys

CATEGORIES = [
    ("kernel (syscalls, loopback TCP, wakeups)", lambda dso, sym: dso.startswith("[kernel")),
    ("allocation (malloc/free, object alloc)", lambda dso, sym: re.search(
        r"^(malloc|free|cfree|_int_malloc|_int_free|malloc_consolidate|unlink_chunk|tcache|__libc_malloc|__libc_free|"
        r"swift_allocObject|swift_deallocObject|swift_slowAlloc|swift_slowDealloc|swift_deallocClassInstance|_swift_release_dealloc|"
        r"posix_memalign|aligned_alloc|realloc|_int_realloc|sysmalloc)", sym) is not None),
    ("locking (mutexes, futex, atomics)", lambda dso, sym: re.search(
        r"pthread_mutex|__lll_lock|__lll_unlock|futex|NIOLock|LockOperations|ManagedAtomic|swift_atomic", sym) is not None),
    ("Swift runtime (retain/release, exclusivity, casts)", lambda dso, sym: dso.startswith("libswiftCore") or re.search(
        r"^(swift_|swift::|_swift_)|RefCounts|AccessSet|tryCast|getCache|dynamicCast|__tls_get_addr", sym) is not None),
    ("encoding and compression (JSON, packets, frames, zlib)", lambda dso, sym: dso.startswith("libz") or re.search(
        r"RelayCore\d*(JSON|SocketPacket|EnginePacket|BinaryPacket)|PreparedFrames|MessageDeflater|deflate|crc32|adler32|"
        r"NIOWebSocket\w*Frame(En|De)coder", sym) is not None),
    ("NIO (pipeline, pending writes, event loop)", lambda dso, sym: re.search(r"^\$s\d+NIO", sym) is not None),
    ("Relay's own code", lambda dso, sym: re.search(r"^\$s\d+Relay", sym) is not None),
    ("libc (syscall wrappers, memcpy, other)", lambda dso, sym: dso.startswith("libc")),
]


def main():
    data = sys.argv[1]
    per_delivery = float(sys.argv[2]) if len(sys.argv) > 2 else None
    out = subprocess.run(
        ["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym", "-g", "none", "--percent-limit", "0", "--stdio"],
        capture_output=True, text=True, check=True).stdout
    totals = {name: 0.0 for name, _ in CATEGORIES}
    totals["other"] = 0.0
    line_re = re.compile(r"^\s+([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*)$")
    for line in out.splitlines():
        m = line_re.match(line)
        if not m:
            continue
        share, dso, sym = float(m.group(1)), m.group(2), m.group(3).strip()
        for name, test in CATEGORIES:
            if test(dso, sym):
                totals[name] += share
                break
        else:
            totals["other"] += share
    whole = sum(totals.values()) or 1.0
    print(f"{'where':56} {'share':>7}" + (f" {'µs/delivery':>12}" if per_delivery else ""))
    for name, share in sorted(totals.items(), key=lambda kv: -kv[1]):
        pct = 100 * share / whole
        extra = f" {per_delivery * pct / 100:12.2f}" if per_delivery else ""
        print(f"{name:56} {pct:6.1f}%{extra}")


if __name__ == "__main__":
    main()
