#!/usr/bin/env bash
# Builds the relay and runs every test: the XCTest targets and, through EndToEndTests, the
# Python end-to-end suite in Tests/e2e (which needs .venv with Tests/e2e/requirements.txt).
# Arguments are passed on to `swift test` (e.g. --filter EndToEndTests).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q -r Tests/e2e/requirements.txt
.venv/bin/python -m pip install -q -r Tests/conformance/requirements.txt

swift build
swift test "$@"
