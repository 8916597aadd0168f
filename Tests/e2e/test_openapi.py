"""docs/admin-openapi.yaml is a valid OpenAPI 3 document that covers every admin route, and the
relay's real answers match its schemas."""

from __future__ import annotations

import jsonschema
import yaml
from openapi_spec_validator import validate

from helpers import ADMIN_KEY, REPO_ROOT, Clients, async_test, http

SPEC = yaml.safe_load((REPO_ROOT / "docs" / "admin-openapi.yaml").read_text())


def to_json_schema(node):
    """OpenAPI 3.0 schema → JSON Schema: `nullable: true` becomes a type that allows null."""
    if isinstance(node, dict):
        out = {k: to_json_schema(v) for k, v in node.items() if k != "nullable"}
        if node.get("nullable") and "type" in out:
            out["type"] = [out["type"], "null"]
        elif node.get("nullable"):
            out = {"anyOf": [out, {"type": "null"}]}
        return out
    if isinstance(node, list):
        return [to_json_schema(v) for v in node]
    return node


def schema(name: str) -> dict:
    # Resolve `#/components/schemas/...` references for jsonschema.
    s = to_json_schema(SPEC["components"]["schemas"][name])
    s["components"] = to_json_schema(SPEC["components"])
    return s


def test_spec_is_valid_openapi_3():
    validate(SPEC)


def test_spec_covers_every_route():
    paths = set(SPEC["paths"])
    for route in ["/healthz", "/readyz", "/metrics", "/dashboard", "/api/v1/emit", "/api/v1/receipts",
                  "/api/v1/users/{user}/presence", "/api/v1/presence", "/api/v1/users/{user}/disconnect",
                  "/admin/v1/health", "/admin/v1/ready", "/admin/v1/stats", "/admin/v1/stream", "/admin/v1/rooms",
                  "/admin/v1/rooms/{room}", "/admin/v1/users/{user}/connections", "/admin/v1/connections/{sid}",
                  "/admin/v1/emit", "/admin/v1/receipts"]:
        assert route in paths, route


@async_test
async def test_real_answers_match_the_spec(relay):
    async with Clients() as c:
        a = await c.connect(relay, "spec-user")
        await a.join("conversation:spec")
        await a.ok("message:read", {"room": "conversation:spec", "messageId": "spec-1", "authorId": "x"})
        status, stats = await http(relay, "GET", "/admin/v1/stats", key=ADMIN_KEY)
        assert status == 200
        jsonschema.validate(stats, schema("Stats"))
        status, body = await http(relay, "GET", "/admin/v1/receipts?messageId=spec-1", key=ADMIN_KEY)
        for r in body["receipts"]:
            jsonschema.validate(r, schema("Receipt"))
        status, err = await http(relay, "GET", "/admin/v1/stats", key="nope-nope-nope-nope")
        assert status == 401
        jsonschema.validate(err, schema("Error"))
        status, body = await http(relay, "POST", "/admin/v1/emit", key=ADMIN_KEY, body={"event": "notification:new", "to": {"user": "spec-user"}})
        jsonschema.validate(body, schema("EmitResponse"))


@async_test
async def test_backend_answers_match_the_spec(relay):
    async with Clients() as c:
        a = await c.connect(relay, "spec-bob")
        await a.join("conversation:spec-api")
        for body in [
            {"event": "notification:new", "to": {"user": "spec-bob"}},
            {"event": "notification:new", "to": {"user": "spec-bob"}, "recipientsByUser": True},
            {"event": "notification:new", "to": {"users": ["spec-bob", "spec-nobody"]}, "recipientsByUser": True},
            {"event": "message:new", "to": {"room": "conversation:spec-api"}, "recipientsByUser": True},
            {"event": "unread:update", "to": {"user": "spec-bob"}, "coalesce": {"key": "unread", "windowMs": 10}},
        ]:
            jsonschema.validate(body, schema("EmitRequest"))
            status, answer = await http(relay, "POST", "/api/v1/emit", body=body)
            assert status == 200, answer
            jsonschema.validate(answer, schema("EmitResponse"))
        status, answer = await http(relay, "GET", "/api/v1/users/spec-bob/presence")
        assert status == 200 and answer["devices"] == 1, answer
        jsonschema.validate(answer, schema("UserPresence"))
        status, answer = await http(relay, "POST", "/api/v1/presence", body={"users": ["spec-bob", "spec-nobody"]})
        assert status == 200, answer
        jsonschema.validate(answer, schema("PresenceBatch"))
        status, err = await http(relay, "POST", "/api/v1/presence", body={"users": []})
        assert status == 400
        jsonschema.validate(err, schema("Error"))
        body = {"revoke": False}
        jsonschema.validate(body, schema("EndSessionsRequest"))
        status, answer = await http(relay, "POST", "/api/v1/users/spec-bob/disconnect", body=body)
        assert status == 200 and answer["disconnected"] == 1, answer
        jsonschema.validate(answer, schema("EndSessionsResponse"))
        status, err = await http(relay, "GET", "/api/v1/users/spec-bob/disconnect")
        assert status == 405
        jsonschema.validate(err, schema("Error"))
