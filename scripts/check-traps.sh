#!/usr/bin/env bash
# Fails (exit 1, one file:line per hit) when code that parses network input could trap:
# `try!`, `as!`, a force unwrap, `fatalError(` or `preconditionFailure(` in the parsing and
# connection code (RelayCore; RelayServer Auth, Connection, WebSocket, HTTP, Compression, Polling,
# Backends, Delivery, Registry, Rooms, Presence, Recovery, Timers, Cluster, Webhooks). A line may carry a trailing `// trap-ok: <reason>` for a case that is
# provably safe; the reason is mandatory.
#
# This is a lint, not a parser: string literals on one line and `//` comments are blanked before
# matching, so `"!#~"` or a doc comment ending in `!` is not a hit; `!=` and prefix `!x` are not
# hits either. A force unwrap is an identifier, `)` or `]` directly followed by `!` and then
# anything but `=`. The fuzzers (scripts/fuzz.sh) catch the traps a lint cannot see (an index
# out of range, an overflow, a narrowing conversion).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DIRS=(Sources/RelayCore Sources/RelayServer/Auth Sources/RelayServer/Connection Sources/RelayServer/WebSocket Sources/RelayServer/HTTP Sources/RelayServer/HTTPTypes Sources/RelayServer/Compression Sources/RelayServer/Polling Sources/RelayBackends Sources/RelayServer/Delivery Sources/RelayServer/Registry Sources/RelayServer/Rooms Sources/RelayServer/Presence Sources/RelayServer/Recovery Sources/RelayServer/Timers Sources/RelayCluster Sources/RelayRedis Sources/RelayServer/Webhooks)
for d in "${DIRS[@]}"; do [ -d "$d" ] || { echo "check-traps: $d is gone: update DIRS" >&2; exit 1; }; done
PATTERN='try!|as!|[]A-Za-z0-9_)]!([^=]|$)|fatalError\(|preconditionFailure\('

hits=0
while IFS= read -r -d '' file; do
    # 1. lines with a justified `// trap-ok: reason` are blanked;
    # 2. one-line string literals are emptied (escaped quotes handled);
    # 3. `//` comments are dropped.
    while IFS=: read -r line _; do
        echo "$file:$line: $(sed -n "${line}p" "$file" | sed -E 's/^[[:space:]]+//')"
        hits=$((hits + 1))
    done < <(sed -E \
        -e '/\/\/ trap-ok: [^[:space:]]/ s/.*//' \
        -e 's/"([^"\\]|\\.)*"/""/g' \
        -e 's#//.*$##' \
        "$file" | grep -nE "$PATTERN" || true)
done < <(find "${DIRS[@]}" -name '*.swift' -print0 | LC_ALL=C sort -z)

if [ "$hits" -gt 0 ]; then
    echo "check-traps: $hits possible trap(s) on an input path; fix them or justify each with '// trap-ok: <reason>'" >&2
    exit 1
fi
echo "check-traps: no try!, as!, force unwrap, fatalError or preconditionFailure in ${DIRS[*]}"
