#!/usr/bin/env bash
# Starts the relay from source: installs the two system packages the build needs when they are
# missing (SQLite and zlib headers: GRDB and permessage-deflate link the system libraries), then
# `swift run -c release relay`. With no arguments it runs in dev mode on 127.0.0.1:8080
# (SQLite file relay.sqlite, no Redis); arguments go to the relay (`scripts/run.sh --help`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-packages.sh libsqlite3-dev zlib1g-dev
# Relay's own binary is built with cross-module optimisation of its library targets (Package.swift).
export RELAY_CROSS_MODULE_OPTIMIZATION=1
exec swift run -c release relay "$@"
