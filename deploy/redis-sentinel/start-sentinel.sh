#!/bin/sh
# Starts one Sentinel (docker-compose.yml, k8s/redis-sentinel.yaml, which carries a copy: keep
# them identical; Tests/e2e/test_deploy_files.py checks that and starts the test's Sentinels
# with this script).
#   REDIS_PASSWORD     the master's password (sentinel auth-pass)
#   REDIS_MASTER_HOST  the initial master's DNS name (the Sentinels follow it from there)
#   REDIS_MASTER_PORT  its port (default 6379)
#   SENTINEL_TEMPLATE  sentinel.conf (default /usr/local/etc/redis/sentinel.conf)
#   SENTINEL_DATA      the data volume (default /data), redis-sentinel's --dir
# Further arguments are passed on to redis-sentinel (they apply after the file).
# The configuration is made on the first start only: a Sentinel rewrites it with what it
# learned (the current master, replicas, other Sentinels, the epoch), and must keep that.
set -eu
: "${REDIS_PASSWORD:?}" "${REDIS_MASTER_HOST:?}"
template=${SENTINEL_TEMPLATE:-/usr/local/etc/redis/sentinel.conf}
data=${SENTINEL_DATA:-/data}
conf=$data/sentinel.conf
if [ ! -f "$conf" ]; then
    sed -e "s/__REDIS_MASTER_HOST__ 6379/$REDIS_MASTER_HOST ${REDIS_MASTER_PORT:-6379}/" "$template" > "$conf.new"
    mv "$conf.new" "$conf"
fi
# The master's name must resolve before the Sentinel reads it (containers and pods start in
# any order): wait up to 2 minutes.
tries=0
until getent hosts "$REDIS_MASTER_HOST" > /dev/null; do
    tries=$((tries + 1))
    if [ "$tries" -ge 60 ]; then
        echo "start-sentinel: cannot resolve $REDIS_MASTER_HOST" >&2
        exit 1
    fi
    sleep 2
done
exec redis-sentinel "$conf" --dir "$data" --sentinel auth-pass relay "$REDIS_PASSWORD" "$@"
