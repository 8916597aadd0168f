#!/usr/bin/env bash
# Builds the relay and runs every test: the XCTest targets and, through EndToEndTests, the
# Python end-to-end suite in Tests/e2e. Installs what the tests need first: the system packages
# (scripts/install-test-deps.sh) and the Python clients (.venv). The build must have no
# compiler warnings in the project's own code. A full run ends with the benchmark regression
# check (scripts/bench-check.sh: fan-out CPU per delivery against its baseline). Arguments are passed on to `swift test`
# (e.g. --filter EndToEndTests).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-test-deps.sh

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q -r Tests/e2e/requirements.txt
.venv/bin/python -m pip install -q -r Tests/conformance/requirements.txt

# Zero warnings in our own sources (dependencies' warnings are not ours to fix).
build_log=$(mktemp)
swift build --build-tests 2>&1 | tee "$build_log"
if grep -E "^$(pwd)/(Sources|Tests|LoadTests|Fuzz)/.*: warning:" "$build_log" | sort -u | grep .; then
    echo "error: the build has compiler warnings (above); fix them" >&2
    rm -f "$build_log"
    exit 1
fi
rm -f "$build_log"
swift test "$@"

# The fan-out cost against its recorded baseline (a full run only, not a filtered one).
if [ $# -eq 0 ]; then
    bash scripts/bench-check.sh
fi
