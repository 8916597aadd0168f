#!/usr/bin/env bash
# Installs the system packages the tests need when they are missing: the build's SQLite and
# zlib headers, openssl, redis-server and redis-sentinel, iproute2 (network namespaces), chromium,
# haproxy, nginx.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-packages.sh libsqlite3-dev zlib1g-dev openssl redis-server redis-sentinel iproute2 chromium haproxy nginx-light
