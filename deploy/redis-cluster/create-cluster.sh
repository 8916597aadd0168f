#!/bin/sh
# Creates Relay's Redis Cluster (3 masters, 3 replicas) from six empty nodes, once: a node that
# already has slots means it was created, and the script exits 0. The one-shot job of
# docker-compose.yml and k8s/redis-cluster.yaml (which carries a copy: keep them identical;
# Tests/e2e/test_deploy_files.py checks that and runs this script against six local nodes).
#   REDIS_NODES   the six nodes, "host:port" separated by spaces; the first three become the
#                 masters (redis-cli pairs each with a replica on another node)
#   REDISCLI_AUTH the cluster's password (redis-cli reads it from the environment)
set -eu
: "${REDIS_NODES:?REDIS_NODES: the six nodes as host:port, separated by spaces}"

addresses=""
for node in $REDIS_NODES; do
    host=${node%:*}
    port=${node##*:}
    # Nodes start in any order: wait for each, up to 5 minutes.
    tries=0
    until redis-cli -h "$host" -p "$port" ping 2>/dev/null | grep -q PONG; do
        tries=$((tries + 1))
        if [ "$tries" -ge 150 ]; then
            echo "create-cluster: $node does not answer" >&2
            exit 1
        fi
        sleep 2
    done
    # CLUSTER MEET (which redis-cli sends) takes addresses, not names.
    ip=$(getent ahostsv4 "$host" | awk 'NR == 1 { print $1 }')
    if [ -z "$ip" ]; then
        echo "create-cluster: cannot resolve $host" >&2
        exit 1
    fi
    addresses="$addresses $ip:$port"
done

first=${REDIS_NODES%% *}
assigned=$(redis-cli -h "${first%:*}" -p "${first##*:}" cluster info | tr -d '\r' | sed -n 's/^cluster_slots_assigned://p')
if [ "$assigned" != "0" ]; then
    echo "create-cluster: $first already has $assigned slots assigned; nothing to do"
    exit 0
fi

# shellcheck disable=SC2086 # one argument per address
redis-cli --cluster create $addresses --cluster-replicas 1 --cluster-yes
