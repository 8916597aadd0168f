#!/bin/sh
# Starts one Redis of the Sentinel setup (docker-compose.yml, k8s/redis-sentinel.yaml, which
# carries a copy: keep them identical; Tests/e2e/test_deploy_files.py checks that and starts
# the test's master and replicas with this script).
#   REDIS_PASSWORD   the password (requirepass and masterauth)
#   REDIS_ANNOUNCE   this node's DNS name, announced to the master and so to the Sentinels
#   REDIS_REPLICAOF  "host port" of the initial master; empty on the initial master itself
#   REDIS_TEMPLATE   redis.conf (default /usr/local/etc/redis/redis.conf)
#   REDIS_DATA       the data volume (default /data), redis-server's --dir
# Further arguments are passed on to redis-server (they apply after the file).
# The configuration is copied to the volume on the first start only: Sentinels rewrite it at
# failovers (which master this node replicates), and later starts must keep that.
set -eu
: "${REDIS_PASSWORD:?}" "${REDIS_ANNOUNCE:?}"
template=${REDIS_TEMPLATE:-/usr/local/etc/redis/redis.conf}
data=${REDIS_DATA:-/data}
conf=$data/redis.conf
if [ ! -f "$conf" ]; then
    cp "$template" "$conf.new"
    if [ -n "${REDIS_REPLICAOF:-}" ]; then
        echo "replicaof $REDIS_REPLICAOF" >> "$conf.new"
    fi
    mv "$conf.new" "$conf"
fi
exec redis-server "$conf" --dir "$data" --requirepass "$REDIS_PASSWORD" --masterauth "$REDIS_PASSWORD" \
    --replica-announce-ip "$REDIS_ANNOUNCE" "$@"
