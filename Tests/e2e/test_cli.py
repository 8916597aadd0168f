"""The command line: `relay check-config`, `relay token`, and configuration precedence."""

from __future__ import annotations

import json
import os
import subprocess

from helpers import JWT_SECRET, relay_binary


def relay(*args, env=None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_") or k == "RELAY_BIN"}
    full_env.update(env or {})
    return subprocess.run([relay_binary(), *args], capture_output=True, text=True, timeout=60, env=full_env)


def test_check_config_accepts_a_good_file_and_redacts_secrets(tmp_path):
    f = tmp_path / "relay.json"
    f.write_text(json.dumps({"port": 9001, "jwt-secret": JWT_SECRET, "api-key": "k" * 20, "admin-key": "a" * 20, "rate": ["typing=5:10"]}))
    r = relay("check-config", str(f), env={"RELAY_MAX_PAYLOAD": "2048"})
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout
    assert "port = 9001  (file)" in r.stdout
    assert "max-payload = 2048  (env)" in r.stdout, "the environment applies over the file"
    assert JWT_SECRET not in r.stdout and "k" * 20 not in r.stdout and "<redacted>" in r.stdout


def test_check_config_reports_problems_and_fails(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"port": 99999, "jwt-secret": "short"}))
    r = relay("check-config", str(f))
    assert r.returncode == 1
    assert "port" in r.stderr and "jwt-secret" in r.stderr and "api-key" in r.stderr
    f.write_text('{"prot": 1}')
    r = relay("check-config", str(f))
    assert r.returncode == 1 and 'unknown setting "prot"' in r.stderr


def test_token_command_signs_and_validates_input():
    r = relay("token", "--secret", JWT_SECRET, "--sub", "alice", "--rooms", "conversation:*,user:alice", "--ttl", "60")
    assert r.returncode == 0
    token = r.stdout.strip()
    assert token.count(".") == 2
    import base64
    payload = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert payload["sub"] == "alice" and payload["rooms"] == ["conversation:*", "user:alice"] and isinstance(payload["exp"], int)
    r = relay("token", "--secret", "short", "--sub", "alice")
    assert r.returncode != 0 and "32 bytes" in r.stderr


def test_serve_refuses_an_invalid_configuration_before_listening(tmp_path):
    r = relay("serve", "--port", "0", "--jwt-secret", JWT_SECRET, "--db", str(tmp_path / "x.sqlite"))
    assert r.returncode != 0
    assert "api-key" in r.stderr and "required outside dev mode" in r.stderr
