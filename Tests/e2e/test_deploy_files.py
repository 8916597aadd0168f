"""deploy/ cannot run here (no Docker engine, no Kubernetes), so each file is at least checked
by a tool that understands it: Kubernetes schemas, the Compose spec, HAProxy's and nginx's own
config checks, systemd's unit verifier, and the Dockerfile's essentials."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import REPO_ROOT, relay_binary

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


def test_sysctl_file_parses():
    for line in (DEPLOY / "sysctl-relay.conf").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            assert re.fullmatch(r"[a-z0-9_.-]+ = [0-9 ]+", line), line
