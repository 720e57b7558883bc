"""golem serve with JWTAuth: the token's subject owns the conversations it starts, another
subject gets 404 for them (REST, AG-UI, the chat stream, the inbox); tokens are checked
as the codec server checks them, with an HS key or a JWKS file."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from serve_support import DEADLINE, serving
from temporalio.testing import WorkflowEnvironment

from golem.serve import JWTAuth, TrustedHeaderAuth

TEXT, LISTED = {"type": "text", "text": "x"}, "conversations"
ISSUER, AUDIENCE, KEY = "https://idp.test/", "golem", "a-shared-secret-of-32-bytes-or-more"


def token(subject: str, *, expires_in: int = 600, key: object = KEY, **header: str) -> str:
    claims = {"sub": subject, "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + expires_in}
    algorithm = "HS256" if isinstance(key, str) else "RS256"
    return jwt.encode(claims, key, algorithm=algorithm, headers=header or None)  # type: ignore[arg-type]


def bearer(subject: str, **options: object) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(subject, **options)}"}  # type: ignore[arg-type]


async def test_another_subject_gets_404_for_a_conversation_in_every_protocol(
    temporal_env: WorkflowEnvironment,
) -> None:
    auth = JWTAuth(issuer=ISSUER, audience=AUDIENCE, hs_key=KEY)
    alice, bob = bearer("alice"), bearer("bob")
    async with (
        serving(temporal_env, auth=auth) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        mine = (await http.post("/conversations", json={"agent": "refunds"}, headers=alice)).json()
        url = f"/conversations/{mine['id']}"
        await http.post(f"{url}/messages", json={"text": "Refund 11"}, headers=alice)
        await http.get(f"{url}/events", headers=alice)  # until it waits
        answers = {
            "read": await http.get(url, headers=bob),
            "send": await http.post(f"{url}/messages", json={"text": "hi"}, headers=bob),
            "decide": await http.post(
                f"{url}/decisions", json={"decisions": {"refund-11": True}}, headers=bob
            ),
            "chat": await http.post(
                "/agents/refunds/chat",
                json={
                    "id": mine["id"],
                    "messages": [
                        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "x"}]}
                    ],
                },
                headers=bob,
            ),
        }
        agui = await http.post(
            "/agents/refunds/agui",
            json={"threadId": mine["id"], "runId": "r", "messages": []},
            headers=bob,
        )
        listed = {
            who: [
                c["id"]
                for c in (await http.get("/conversations", headers=h)).json()["conversations"]
            ]
            for who, h in (("alice", alice), ("bob", bob))
        }
        inbox = {
            who: [c["id"] for c in (await http.get("/pending", headers=h)).json()["pending"]]
            for who, h in (("alice", alice), ("bob", bob))
        }
        anonymous = await http.get("/conversations")
        expired = await http.get("/conversations", headers=bearer("alice", expires_in=-600))
        forged = await http.get("/conversations", headers=bearer("alice", key="another-key-" * 3))
        await http.post(f"{url}/decisions", json={"decisions": {"refund-11": False}}, headers=alice)

    gone = f"no conversation {mine['id']!r}"
    assert {name: (r.status_code, r.json()["error"]) for name, r in answers.items()} == {
        "read": (404, gone),
        "send": (404, gone),
        "decide": (404, gone),
        "chat": (404, gone),
    }
    data = [json.loads(line[6:]) for line in agui.text.splitlines() if line.startswith("data: ")]
    assert data[1:] == [{"type": "RUN_ERROR", "message": gone, "code": "not_found"}]
    assert data[0]["type"] == "RUN_STARTED"  # the run starts before Temporal is asked
    assert listed == {"alice": [mine["id"]], "bob": []}
    assert inbox == {"alice": ["refund-11"], "bob": []}
    assert (anonymous.status_code, anonymous.json()["error"]) == (
        401,
        "send Authorization: Bearer <access token>",
    )
    assert (expired.status_code, expired.json()["error"]) == (401, "the access token has expired")
    assert forged.status_code == 401
    assert forged.json()["error"].startswith("the access token is not valid: ")


async def test_a_jwks_file_verifies_tokens_by_their_key_id(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**public, "kid": "k1", "alg": "RS256", "use": "sig"}]}))
    auth = JWTAuth(issuer=ISSUER, audience=AUDIENCE, jwks_file=str(jwks))
    async with (
        serving(temporal_env, auth=auth) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        signed = await http.get("/conversations", headers=bearer("carol", key=private, kid="k1"))
        other = await http.get("/conversations", headers=bearer("carol", key=private, kid="k2"))

    assert (signed.status_code, signed.json()) == (200, {"conversations": []})
    assert (other.status_code, other.json()["error"]) == (
        401,
        f"the access token is not valid: no key 'k2' in {jwks}",
    )


def test_jwt_auth_takes_exactly_one_key_source() -> None:
    with pytest.raises(ValueError) as raised:
        JWTAuth(issuer=ISSUER, audience=AUDIENCE, hs_key=KEY, jwks_file="x.json")
    assert str(raised.value) == (
        "JWTAuth takes one of jwks_url, jwks_file or hs_key, not ['jwks_file', 'hs_key']"
    )


async def test_a_trusted_proxys_header_names_the_subject(
    temporal_env: WorkflowEnvironment,
) -> None:
    auth = TrustedHeaderAuth("x-forwarded-user")
    async with (
        serving(temporal_env, auth=auth) as server,
        httpx.AsyncClient(base_url=server.url, timeout=DEADLINE) as http,
    ):
        alice, bob = {"x-forwarded-user": "alice"}, {"x-forwarded-user": "bob"}
        mine = (await http.post("/conversations", json={"agent": "refunds"}, headers=alice)).json()
        hers = await http.get(f"/conversations/{mine['id']}", headers=alice)
        other = await http.get(f"/conversations/{mine['id']}", headers=bob)
        nobody = await http.get(f"/conversations/{mine['id']}")

    assert (hers.status_code, other.status_code) == (200, 404)
    assert (nobody.status_code, nobody.json()["error"]) == (
        401,
        "no x-forwarded-user header: sign in through the proxy",
    )
