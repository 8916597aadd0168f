#!/usr/bin/env bash
# Builds the libFuzzer targets in Fuzz/ against Sources/RelayCore and runs each for a bounded
# time. Usage:
#
#     scripts/fuzz.sh                  # every target, FUZZ_SECONDS (default 20) each
#     FUZZ_SECONDS=60 scripts/fuzz.sh FuzzJSON FuzzPackets
#     FUZZ_RUNS=10000000 FUZZ_SECONDS=3600 scripts/fuzz.sh FuzzJWT   # stop at N runs or the time
#
# Binaries, working corpora, logs and crash artifacts go to .build-fuzz/ (ignored by git).
# Seeds are committed in Fuzz/corpus/<target>/ and copied into .build-fuzz/corpus-<target>/
# before each run, so the committed corpus stays small. A dictionary Fuzz/<target>.dict is
# passed to libFuzzer when it exists. Exits non-zero if any target fails to build or finds a
# crash, an invariant violation (fatalError), a timeout or an out-of-memory.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

FUZZ_SECONDS="${FUZZ_SECONDS:-20}"
# fuzzer,address (default): AddressSanitizer on top of Swift's own checks. FUZZ_SANITIZE=fuzzer
# builds without it, 3-5x faster, for long campaigns over code that uses no unsafe pointers
# (Swift's bounds and overflow traps stay on); its binaries and corpora go to .build-fuzz-noasan/.
SANITIZE="${FUZZ_SANITIZE:-fuzzer,address}"
OUT=.build-fuzz
[ "$SANITIZE" = "fuzzer,address" ] || OUT=.build-fuzz-noasan
ALL_TARGETS=(FuzzJSON FuzzPackets FuzzEventName FuzzOutboundQueue FuzzFrameScanner FuzzUpgrade FuzzJWT FuzzProxyProtocol FuzzSession FuzzBinaryPackets FuzzRecovery FuzzPollingBody FuzzAttachmentStream FuzzTextValidator FuzzFragments)
if [ $# -gt 0 ]; then TARGETS=("$@"); else TARGETS=("${ALL_TARGETS[@]}"); fi

# Swift's crash backtracer would attach to the fuzzer on fatalError and can stall the run;
# libFuzzer prints its own report and saves the input.
export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}symbolize=1"

mkdir -p "$OUT/logs" "$OUT/artifacts"

# 1. The toolchain must have the libFuzzer runtime.
probe_dir="$OUT/probe"
mkdir -p "$probe_dir"
cat >"$probe_dir/probe.swift" <<'SWIFT'
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt { 0 }
SWIFT
if ! swiftc -sanitize=fuzzer -parse-as-library "$probe_dir/probe.swift" -o "$probe_dir/probe" >"$probe_dir/build.log" 2>&1; then
    echo "error: this Swift toolchain cannot build with -sanitize=fuzzer (no libFuzzer runtime):" >&2
    tail -n 20 "$probe_dir/build.log" >&2
    exit 2
fi
echo "toolchain: $(swiftc --version 2>&1 | head -n 1); libFuzzer runtime available"

# 2. Build every target: all of RelayCore, Fuzz/Support and the target file, as one module.
mapfile -t SOURCES < <(find Sources/RelayCore -name '*.swift' | LC_ALL=C sort)
for target in "${TARGETS[@]}"; do
    if [ ! -f "Fuzz/$target.swift" ]; then
        echo "error: no such target Fuzz/$target.swift" >&2
        exit 2
    fi
    echo "building $target ..."
    if ! swiftc -O -sanitize="$SANITIZE" -parse-as-library -module-name "$target" \
        "${SOURCES[@]}" Fuzz/Support/*.swift "Fuzz/$target.swift" -o "$OUT/$target" >"$OUT/logs/$target.build.log" 2>&1; then
        grep -v "warning: Cannot export local symbol" "$OUT/logs/$target.build.log" | tail -n 40 >&2
        echo "error: building $target failed (full log: $OUT/logs/$target.build.log)" >&2
        exit 1
    fi
done

# 3. Run each target for FUZZ_SECONDS.
failed=()
summary=()
for target in "${TARGETS[@]}"; do
    corpus="$OUT/corpus-$target"
    mkdir -p "$corpus"
    if [ -d "Fuzz/corpus/$target" ]; then cp -f "Fuzz/corpus/$target"/* "$corpus"/ 2>/dev/null || true; fi
    args=(
        -max_total_time="$FUZZ_SECONDS"
        -rss_limit_mb=2048
        -max_len=65536
        -timeout=10
        -print_final_stats=1
        -artifact_prefix="$OUT/artifacts/$target-"
    )
    if [ -n "${FUZZ_RUNS:-}" ]; then args+=(-runs="$FUZZ_RUNS"); fi
    if [ -f "Fuzz/$target.dict" ]; then args+=(-dict="Fuzz/$target.dict"); fi
    log="$OUT/logs/$target.log"
    echo "running $target for ${FUZZ_SECONDS}s (log: $log) ..."
    start=$(date +%s)
    set +e
    "$OUT/$target" "${args[@]}" "$corpus" >"$log" 2>&1
    status=$?
    set -e
    elapsed=$(($(date +%s) - start))
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)
    units=$(find "$corpus" -type f | wc -l)
    line="$target: exit $status, ${elapsed}s, ${runs:-?} runs, ${speed:-?} exec/s, peak RSS ${rss:-?} MB, corpus $units files"
    summary+=("$line")
    if [ "$status" -ne 0 ]; then
        failed+=("$target")
        echo "FAILED $line" >&2
        grep -E "Fatal error|ERROR: libFuzzer|ERROR: AddressSanitizer|SUMMARY|Test unit written|ALARM" "$log" | head -n 20 >&2 || true
    else
        echo "ok     $line"
    fi
done

echo
echo "summary:"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzzing found failures in: ${failed[*]} (inputs in $OUT/artifacts/, logs in $OUT/logs/)" >&2
    exit 1
fi
echo "no crashes found"
