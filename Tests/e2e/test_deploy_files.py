"""deploy/ cannot run here (no Docker engine, no Kubernetes), so each file is at least checked
by a tool that understands it: Kubernetes schemas, the Compose spec, HAProxy's and nginx's own
config checks, systemd's unit verifier, and the Dockerfile's essentials."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from helpers import REPO_ROOT, relay_binary
# Below the ephemeral range and never twice: a port picked here is not taken by an outgoing
# connection before the server binds it.
from redis_servers import free_port

DEPLOY = REPO_ROOT / "deploy"
VENV_BIN = Path(sys.executable).parent


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120, **kwargs)


def test_kubernetes_manifests_match_the_api_schemas():
    files = sorted((DEPLOY / "k8s").glob("*.yaml"))
    assert len(files) >= 4
    r = run(VENV_BIN / "kubernetes-validate", "--strict", "-k", "1.30.0", *files)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (DEPLOY / "k8s" / "deployment.yaml").read_text()
    for needed in ("readinessProbe", "livenessProbe", "terminationGracePeriodSeconds", "preStop", "runAsNonRoot"):
        assert needed in text, needed
    assert "PodDisruptionBudget" in (DEPLOY / "k8s" / "pdb.yaml").read_text()


def test_compose_file_matches_the_compose_spec():
    r = run(VENV_BIN / "check-jsonschema", "--builtin-schema", "vendor.compose-spec", DEPLOY / "docker-compose.yml")
    assert r.returncode == 0, r.stdout + r.stderr
    text = (DEPLOY / "docker-compose.yml").read_text()
    assert "relay1:" in text and "relay2:" in text and "redis:" in text and "haproxy" in text


def test_haproxy_config_passes_haproxy_check():
    haproxy = shutil.which("haproxy")
    assert haproxy, "haproxy is not installed (CI installs Debian's haproxy)"
    r = run(haproxy, "-c", "-f", DEPLOY / "haproxy.cfg")
    assert r.returncode == 0 and "Configuration file is valid" in r.stdout + r.stderr, r.stdout + r.stderr


def test_nginx_config_passes_nginx_test(tmp_path):
    nginx = shutil.which("nginx")
    assert nginx, "nginx is not installed (CI installs Debian's nginx-light)"
    # nginx resolves upstream names when it loads: point them at loopback for the check.
    conf = tmp_path / "nginx.conf"
    conf.write_text(re.sub(r"server relay\d:8080", "server 127.0.0.1:8080", (DEPLOY / "nginx.conf").read_text()))
    r = run(nginx, "-t", "-c", conf, "-e", tmp_path / "error.log")
    assert r.returncode == 0, r.stdout + r.stderr


def test_systemd_unit_verifies(tmp_path):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing"
    # Point ExecStart at the binary built here (the unit's path is the install location).
    unit = tmp_path / "relay.service"
    unit.write_text((DEPLOY / "relay.service").read_text().replace("/usr/local/bin/relay", relay_binary()))
    r = run(analyze, "verify", unit)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (DEPLOY / "relay.service").read_text()
    assert "LimitNOFILE=1048576" in text and "TimeoutStopSec" in text


def test_dockerfile_is_multistage_non_root_with_healthcheck():
    text = (DEPLOY / "Dockerfile").read_text()
    assert len(re.findall(r"^FROM ", text, re.M)) >= 2, "multi-stage"
    assert re.search(r"^USER relay$", text, re.M), "runs as a non-root user"
    assert "HEALTHCHECK" in text and "/healthz" in text
    assert "--static-swift-stdlib" in text
    assert re.search(r"^ENV RELAY_CROSS_MODULE_OPTIMIZATION=1$", text, re.M), "the shipped binary keeps cross-module optimisation"


def test_sysctl_file_parses():
    for line in (DEPLOY / "sysctl-relay.conf").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            assert re.fullmatch(r"[a-z0-9_.-]+ = [0-9 ]+", line), line


# --------------------------------------------------------------------------------------------
# Redis Cluster (deploy/redis-cluster) and Redis Sentinel (deploy/redis-sentinel): the compose
# files and manifests by their schemas, the Redis and Sentinel configurations by redis-server
# and redis-sentinel themselves, started from them on 127.0.0.1 (redis-server and
# redis-sentinel refuse a bad configuration and exit non-zero).

CLUSTER = DEPLOY / "redis-cluster"
SENTINEL = DEPLOY / "redis-sentinel"
PASSWORD = "deploy-test-password-0123456789"


def redis_cli(port: int, *args, password: str | None = PASSWORD) -> str:
    env = {k: v for k, v in os.environ.items() if k != "REDISCLI_AUTH"}
    if password:
        env["REDISCLI_AUTH"] = password
    r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *map(str, args)],
                       capture_output=True, text=True, timeout=10, env=env)
    return r.stdout


def config_get(port: int, name: str) -> str:
    out = redis_cli(port, "CONFIG", "GET", name).splitlines()
    assert len(out) == 2 and out[0] == name, f"CONFIG GET {name}: {out}"
    return out[1]


def eventually(check, timeout: float, what: str):
    """Re-checks `check()` (a real round trip) until it holds, bounded by `timeout`."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} did not hold within {timeout} s"
        time.sleep(0.1)


class Processes:
    """The redis-server and redis-sentinel processes a test starts, each stopped by its pid."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.procs: list[subprocess.Popen] = []

    def start(self, name: str, args: list, env: dict | None = None) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "wb")
        proc = subprocess.Popen([str(a) for a in args], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
        log.close()
        self.procs.append(proc)
        return proc

    def wait_answering(self, name: str, proc: subprocess.Popen, port: int, password: str | None = PASSWORD):
        """Until the process answers PING; a process that exits (a refused configuration) fails."""
        def up() -> bool:
            assert proc.poll() is None, f"{name} exited {proc.returncode}: " + self.log(name)
            return redis_cli(port, "PING", password=password).strip() == "PONG"
        eventually(up, 15, f"{name} answering on {port}")

    def log(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")[-3000:]

    def kill(self, proc: subprocess.Popen):
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def stop_all(self):
        for proc in self.procs:
            self.kill(proc)


def need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    assert path, f"{tool} is not installed (CI installs Debian's {package})"
    return path


def compose_services(path: Path) -> dict:
    return yaml.safe_load(path.read_text())["services"]


def k8s_documents(directory: Path) -> list[dict]:
    docs = []
    for f in sorted(directory.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(f.read_text()) if d]
    return docs


@pytest.mark.parametrize("shape", ["redis-cluster", "redis-sentinel"])
def test_redis_shape_compose_file_matches_the_compose_spec(shape):
    path = DEPLOY / shape / "docker-compose.yml"
    r = run(VENV_BIN / "check-jsonschema", "--builtin-schema", "vendor.compose-spec", path)
    assert r.returncode == 0, r.stdout + r.stderr
    services = compose_services(path)
    assert {"relay1", "relay2", "lb"} <= services.keys()
    urls = {services[r]["environment"]["RELAY_REDIS"] for r in ("relay1", "relay2")}
    assert len(urls) == 1
    url = urls.pop()
    if shape == "redis-cluster":
        assert url == "redis://:${REDIS_PASSWORD}@redis-1:6379,redis-2:6379,redis-3:6379"
        nodes = [f"redis-{i}" for i in range(1, 7)]
        assert set(nodes) <= services.keys()
        for node in nodes:
            command = services[node]["command"]
            assert command[:2] == ["redis-server", "/usr/local/etc/redis/redis.conf"], command
            assert command[command.index("--cluster-announce-hostname") + 1] == node
            assert "--requirepass" in command and "--masterauth" in command
        job = services["cluster-create"]
        assert job["environment"]["REDIS_NODES"].split() == [f"{n}:6379" for n in nodes]
        for relay in ("relay1", "relay2"):
            assert services[relay]["depends_on"]["cluster-create"]["condition"] == "service_completed_successfully"
        assert "--cluster-replicas 1 --cluster-yes" in (CLUSTER / "create-cluster.sh").read_text()
    else:
        assert url == "redis+sentinel://:${REDIS_PASSWORD}@sentinel-1:26379,sentinel-2:26379,sentinel-3:26379/relay"
        assert {"redis-1", "redis-2", "redis-3", "sentinel-1", "sentinel-2", "sentinel-3"} <= services.keys()
        assert not services["redis-1"]["environment"].get("REDIS_REPLICAOF")
        for replica in ("redis-2", "redis-3"):
            assert services[replica]["environment"]["REDIS_REPLICAOF"] == "redis-1 6379"
        for sentinel in ("sentinel-1", "sentinel-2", "sentinel-3"):
            assert services[sentinel]["environment"]["REDIS_MASTER_HOST"] == "redis-1"


@pytest.mark.parametrize("shape", ["redis-cluster", "redis-sentinel"])
def test_redis_shape_kubernetes_manifests_match_the_api_schemas(shape):
    directory = DEPLOY / shape / "k8s"
    files = sorted(directory.glob("*.yaml"))
    assert files
    r = run(VENV_BIN / "kubernetes-validate", "--strict", "-k", "1.30.0", *files)
    assert r.returncode == 0, r.stdout + r.stderr
    docs = k8s_documents(directory)
    kinds = {d["kind"] for d in docs}
    assert {"StatefulSet", "Service", "PodDisruptionBudget", "ConfigMap", "NetworkPolicy"} <= kinds, kinds
    # The ConfigMaps carry the files of the directory above, unchanged.
    for config_map in (d for d in docs if d["kind"] == "ConfigMap"):
        for key, value in config_map["data"].items():
            assert value == (DEPLOY / shape / key).read_text(), f"{config_map['metadata']['name']}: {key} differs from deploy/{shape}/{key}"
    sets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "StatefulSet"}
    headless = {d["metadata"]["name"] for d in docs if d["kind"] == "Service" and d["spec"].get("clusterIP") == "None"}
    for name, stateful_set in sets.items():
        assert stateful_set["spec"]["serviceName"] in headless, name
    if shape == "redis-cluster":
        assert sets["redis-cluster"]["spec"]["replicas"] == 6
        assert "Job" in kinds
    else:
        assert sets["redis-node"]["spec"]["replicas"] == 3
        assert sets["redis-sentinel"]["spec"]["replicas"] == 3


def test_cluster_redis_conf_starts_with_the_intended_settings(tmp_path):
    need("redis-server", "redis-server")
    procs = Processes(tmp_path)
    port, bus = free_port(), free_port()
    try:
        node = procs.start("node", ["redis-server", CLUSTER / "redis.conf", "--port", port, "--cluster-port", bus,
                                    "--bind", "127.0.0.1", "--dir", tmp_path, "--requirepass", PASSWORD,
                                    "--masterauth", PASSWORD, "--cluster-announce-hostname", "127.0.0.1"])
        procs.wait_answering("node", node, port)
        expected = {
            "cluster-enabled": "yes",
            "cluster-node-timeout": "5000",
            "cluster-require-full-coverage": "no",
            "cluster-allow-reads-when-down": "no",
            "cluster-allow-pubsubshard-when-down": "yes",
            "cluster-preferred-endpoint-type": "hostname",
            "appendonly": "yes",
            "appendfsync": "everysec",
            "protected-mode": "yes",
            "maxmemory-policy": "noeviction",
            "save": "",
            "requirepass": PASSWORD,
            "masterauth": PASSWORD,
        }
        assert {k: config_get(port, k) for k in expected} == expected
        # Without the password nothing is answered.
        assert "NOAUTH" in redis_cli(port, "PING", password=None)
    finally:
        procs.stop_all()
    # The placeholders are never a password: every deployment overrides them.
    text = (CLUSTER / "redis.conf").read_text()
    assert "requirepass __REDIS_PASSWORD__" in text and "masterauth __REDIS_PASSWORD__" in text


def test_cluster_of_six_created_from_the_deploy_files(tmp_path):
    """Six nodes from redis-cluster/redis.conf joined by redis-cluster/create-cluster.sh (the
    compose and Kubernetes job) on 127.0.0.1: 3 masters, 3 replicas, every slot served."""
    need("redis-server", "redis-server")
    procs = Processes(tmp_path)
    ports = [free_port() for _ in range(6)]
    try:
        for i, port in enumerate(ports):
            d = tmp_path / f"node{i}"
            d.mkdir()
            node = procs.start(f"node{i}", ["redis-server", CLUSTER / "redis.conf", "--port", port,
                                            "--cluster-port", free_port(), "--bind", "127.0.0.1", "--dir", d,
                                            "--requirepass", PASSWORD, "--masterauth", PASSWORD,
                                            "--cluster-announce-hostname", "127.0.0.1"])
            procs.wait_answering(f"node{i}", node, port)
        job_env = {**os.environ, "REDIS_NODES": " ".join(f"127.0.0.1:{p}" for p in ports), "REDISCLI_AUTH": PASSWORD}
        r = subprocess.run(["sh", CLUSTER / "create-cluster.sh"], capture_output=True, text=True, timeout=120, env=job_env)
        assert r.returncode == 0, r.stdout + r.stderr

        def cluster_ok() -> bool:
            return all("cluster_state:ok" in redis_cli(p, "CLUSTER", "INFO") for p in ports)
        eventually(cluster_ok, 30, "cluster_state:ok on every node")

        def roles() -> list[str]:
            lines = redis_cli(ports[0], "CLUSTER", "NODES").splitlines()
            return sorted("master" if "master" in line.split()[2] else "replica" for line in lines)
        eventually(lambda: roles() == ["master"] * 3 + ["replica"] * 3, 30, "3 masters and 3 replicas")
        info = redis_cli(ports[0], "CLUSTER", "INFO")
        assert "cluster_slots_assigned:16384" in info and "cluster_slots_ok:16384" in info and "cluster_size:3" in info
        # Each master has one replica.
        nodes = [line.split() for line in redis_cli(ports[0], "CLUSTER", "NODES").splitlines()]
        masters = {n[0] for n in nodes if "master" in n[2]}
        assert sorted(n[3] for n in nodes if "slave" in n[2]) == sorted(masters)
        # Keys and sharded pub/sub (what Relay uses) served across the shards, redirects followed.
        for i in range(10):
            assert redis_cli(ports[i % 6], "-c", "SET", f"room:{i}", str(i)).strip() == "OK"
            assert redis_cli(ports[(i + 3) % 6], "-c", "SPUBLISH", f"room:{i}", "x").strip() == "0"
        assert [redis_cli(ports[(i + 1) % 6], "-c", "GET", f"room:{i}").strip() for i in range(10)] == [str(i) for i in range(10)]
        # The job again (a restarted compose, a re-run Job): nothing to do.
        r = subprocess.run(["sh", CLUSTER / "create-cluster.sh"], capture_output=True, text=True, timeout=60, env=job_env)
        assert r.returncode == 0 and "nothing to do" in r.stdout, r.stdout + r.stderr
    finally:
        procs.stop_all()


def test_sentinels_from_the_deploy_files_find_the_master_and_fail_over(tmp_path):
    """A master and two replicas from redis-sentinel/redis.conf and three Sentinels from
    sentinel.conf, each started by the deploy's start script, on 127.0.0.1."""
    need("redis-server", "redis-server")
    need("redis-sentinel", "redis-sentinel")
    procs = Processes(tmp_path)
    ports = [free_port() for _ in range(3)]
    sentinel_ports = [free_port() for _ in range(3)]
    try:
        nodes = []
        for i, port in enumerate(ports):
            d = tmp_path / f"redis{i}"
            d.mkdir()
            env = {"REDIS_PASSWORD": PASSWORD, "REDIS_ANNOUNCE": "127.0.0.1", "REDIS_TEMPLATE": str(SENTINEL / "redis.conf"),
                   "REDIS_DATA": str(d), "REDIS_REPLICAOF": "" if i == 0 else f"127.0.0.1 {ports[0]}"}
            node = procs.start(f"redis{i}", ["sh", SENTINEL / "start-redis.sh", "--port", port, "--bind", "127.0.0.1"], env)
            procs.wait_answering(f"redis{i}", node, port)
            nodes.append(node)
        expected = {
            "appendonly": "yes",
            "appendfsync": "everysec",
            "protected-mode": "yes",
            "min-replicas-to-write": "1",
            "min-replicas-max-lag": "10",
            "maxmemory-policy": "noeviction",
            "replica-announce-ip": "127.0.0.1",
            "requirepass": PASSWORD,
            "masterauth": PASSWORD,
        }
        assert {k: config_get(ports[0], k) for k in expected} == expected
        eventually(lambda: "connected_slaves:2" in redis_cli(ports[0], "INFO", "replication"), 20, "two replicas")

        for i, port in enumerate(sentinel_ports):
            d = tmp_path / f"sentinel{i}"
            d.mkdir()
            env = {"REDIS_PASSWORD": PASSWORD, "REDIS_MASTER_HOST": "127.0.0.1", "REDIS_MASTER_PORT": str(ports[0]),
                   "SENTINEL_TEMPLATE": str(SENTINEL / "sentinel.conf"), "SENTINEL_DATA": str(d)}
            sentinel = procs.start(f"sentinel{i}", ["sh", SENTINEL / "start-sentinel.sh", "--port", port, "--bind", "127.0.0.1"], env)
            procs.wait_answering(f"sentinel{i}", sentinel, port, password=None)

        def master_addr(port: int) -> list[str]:
            return redis_cli(port, "SENTINEL", "get-master-addr-by-name", "relay", password=None).split()

        for port in sentinel_ports:
            assert master_addr(port) == ["127.0.0.1", str(ports[0])]

        def master_state(port: int) -> dict:
            out = redis_cli(port, "SENTINEL", "MASTER", "relay", password=None).splitlines()
            return dict(zip(out[::2], out[1::2]))
        state = master_state(sentinel_ports[0])
        assert {k: state[k] for k in ("quorum", "down-after-milliseconds", "failover-timeout", "parallel-syncs")} == \
            {"quorum": "2", "down-after-milliseconds": "5000", "failover-timeout": "60000", "parallel-syncs": "1"}
        # The Sentinels authenticate to the master (auth-pass): they see its replicas (INFO) and
        # one another (hello messages through the master).
        eventually(lambda: all(master_state(p).get("num-slaves") == "2" and master_state(p).get("num-other-sentinels") == "2"
                               and master_state(p).get("flags") == "master" for p in sentinel_ports),
                   30, "every Sentinel sees 2 replicas, 2 other Sentinels and a healthy master")

        # The master dies: within down-after-milliseconds and an election, a replica is master.
        procs.kill(nodes[0])
        killed = time.monotonic()
        eventually(lambda: all(master_addr(p) and master_addr(p)[1] in (str(ports[1]), str(ports[2])) for p in sentinel_ports),
                   30, "a replica promoted")
        took = time.monotonic() - killed
        assert took >= 5.0, f"failover after {took:.1f} s, before down-after-milliseconds"
        new_master = int(master_addr(sentinel_ports[0])[1])
        eventually(lambda: "role:master" in redis_cli(new_master, "INFO", "replication"), 15, "the promoted replica is master")
        other = ports[1] if new_master == ports[2] else ports[2]
        eventually(lambda: f"master_port:{new_master}" in redis_cli(other, "INFO", "replication"), 30,
                   "the other replica follows the new master")
        # The Sentinels recorded the failover in their own files (why they run from a copy).
        assert f"sentinel monitor relay 127.0.0.1 {new_master} 2" in (tmp_path / "sentinel0" / "sentinel.conf").read_text()
    finally:
        procs.stop_all()
