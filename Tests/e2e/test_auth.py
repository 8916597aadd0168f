"""Authentication at CONNECT: every token error code, the CONNECT_ERROR packet (the Engine.IO
session stays open for another CONNECT; the `connect-refusals`th closes 4003), namespaces.

The relay rate-limits failed authentications per client IP (a burst of 10): this module has
its own relay and stays under that burst (9 failures).
"""

from __future__ import annotations

import json
import time

import pytest
import socketio

from helpers import (
    Clients,
    RawSocket,
    async_test,
    cli_token,
    make_jwt,
    mint_token,
    parse_connect_error,
    refused_code,
)


def _claims(**overrides):
    now = int(time.time())
    claims = {"sub": "nina", "iat": now, "exp": now + 3600, "rooms": ["conversation:*"]}
    claims.update(overrides)
    return {k: v for k, v in claims.items() if v is not None}


BAD_TOKENS = {
    "token_missing": None,
    "token_malformed": "not-a-jwt",
    "token_alg_none": make_jwt(_claims(), header={"alg": "none", "typ": "JWT"}),
    "token_alg_mismatch": make_jwt(_claims(), alg="HS512"),
    "token_bad_signature": make_jwt(_claims(), sign_with="another-secret-that-is-long-enough-0123"),
    "token_expired": make_jwt(_claims(exp=int(time.time()) - 3600)),
    "token_invalid_claims/no-exp": make_jwt(_claims(exp=None)),
    "token_invalid_claims/no-sub": make_jwt(_claims(sub=None)),
}


@pytest.mark.parametrize("expected", list(BAD_TOKENS))
@async_test
async def test_bad_token_is_refused_with_its_code(relay, expected):
    code, state = await refused_code(relay, BAD_TOKENS[expected])
    assert code == expected.split("/")[0]
    assert state == "open", "a refusal leaves the session open for another CONNECT"


@async_test
async def test_python_socketio_client_sees_connection_error(relay):
    async with Clients() as clients:
        client = clients.new("nina")
        with pytest.raises(socketio.exceptions.ConnectionError):
            await client.connect(relay, BAD_TOKENS["token_expired"])
        assert not client.connected
        # A good token from `relay token` connects.
        good = clients.new("nina-ok")
        await good.connect(relay, cli_token("nina"))
        assert good.connected
        assert (await good.join("conversation:auth"))["presence"] == [{"user": "nina", "devices": 1}]


@async_test
async def test_connect_ack_carries_a_socket_sid(relay):
    sock = await RawSocket.open(relay)
    try:
        reply = await sock.connect_ok(mint_token("oscar"))
        assert set(reply) == {"sid"} and isinstance(reply["sid"], str) and reply["sid"]
        # A second CONNECT on a connected socket answers with the same sid.
        again = await sock.connect(mint_token("oscar"))
        assert json.loads(again[2:]) == reply
    finally:
        await sock.close()


@async_test
async def test_other_namespaces_are_refused(relay):
    token = mint_token("paula")
    sock = await RawSocket.open(relay)
    try:
        reply = await sock.connect(token, namespace="/chat")
        namespace, payload = parse_connect_error(reply)
        assert namespace == "/chat"
        assert payload == {"message": "Invalid namespace"}, payload  # the protocol's words
        # The socket stays usable for the main namespace.
        await sock.connect_ok(token)
        await sock.send('421["room:join",{"room":"conversation:ns"}]')
        ack = await sock.recv_packet()
        assert ack.startswith("431[") and json.loads(ack[3:])[0]["ok"] is True, ack
    finally:
        await sock.close()
