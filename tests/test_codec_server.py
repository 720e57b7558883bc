"""The codec server's guards: OIDC access tokens (what the Temporal UI forwards) verified
against a JWKS served here, the static token kept for the CLI, a request-size limit, and
no unauthenticated decryption beyond loopback."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from golem.cli import run_command
from golem.codec_server import (
    MAX_BODY_BYTES,
    JWTAuth,
    codec_app,
    default_origins,
    exposure_problem,
)
from golem.worker.codec import EncryptionCodec

KEY = bytes(range(32))
CODEC = EncryptionCodec({"ui": KEY})
ISSUER = "https://idp.example.test/"
AUDIENCE = "temporal-ui"
UI = "https://temporal.example.test"


def sealed_body() -> bytes:
    sealed = CODEC.encrypt(Payload(metadata={"encoding": b"json/plain"}, data=b'"secret"'))
    return json_format.MessageToJson(Payloads(payloads=[sealed])).encode()


class IdentityProvider:
    """An identity provider's signing key and its JWKS, served over HTTP on 127.0.0.1."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "idp-key-1"
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwks = json.dumps({"keys": [{**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}]})
        self.fetches = 0

    def token(self, key: Any = None, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "ada", "iat": now, "exp": now + 300}
        body.update(claims)
        signer = self.key if key is None else key
        return jwt.encode(body, signer, algorithm="RS256", headers={"kid": self.kid})

    @property
    def handler(self) -> type[BaseHTTPRequestHandler]:
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                idp.fetches += 1
                data = idp.jwks.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@pytest.fixture(scope="module")
def idp() -> Iterator[tuple[IdentityProvider, str]]:
    provider = IdentityProvider()
    server = ThreadingHTTPServer(("127.0.0.1", 0), provider.handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield provider, f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    finally:
        server.shutdown()
        server.server_close()


async def post(app: Any, body: Any, **headers: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8081") as http:
        return await http.post("/decode", content=body, headers={"Origin": UI, **headers})


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_the_ui_users_access_token_decrypts_and_a_bad_one_is_refused_saying_why(
    idp: tuple[IdentityProvider, str],
) -> None:
    provider, jwks_url = idp
    auth = JWTAuth(jwks_url=jwks_url, issuer=ISSUER, audience=AUDIENCE)
    app = codec_app(CODEC, origins=[UI], jwt_auth=auth, token="cli-t0ken")
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    an_hour_ago = int(time.time()) - 3600
    cases = {
        "valid": (bearer(provider.token()), 200, ""),
        "the CLI's static token": (bearer("cli-t0ken"), 200, ""),
        "expired": (bearer(provider.token(exp=an_hour_ago)), 401, "has expired"),
        "wrong audience": (bearer(provider.token(aud="other")), 401, "not for audience"),
        "wrong issuer": (bearer(provider.token(iss="https://evil/")), 401, "not issued by"),
        "wrong key": (bearer(provider.token(key=stranger)), 401, "Signature verification"),
        "no token": ({}, 401, "missing or wrong bearer token"),
        "not a JWT": (bearer("garbage"), 401, "not valid"),
    }
    outcomes = {}
    for name, (headers, _, _) in cases.items():
        answer = await post(app, sealed_body(), **headers)
        error = answer.json().get("error", "") if answer.status_code != 200 else ""
        outcomes[name] = (answer.status_code, error)
    for name, (_, status, says) in cases.items():
        assert outcomes[name][0] == status, (name, outcomes[name])
        assert says in outcomes[name][1], (name, outcomes[name])
    valid = await post(app, sealed_body(), **bearer(provider.token()))
    plain = json_format.Parse(valid.content, Payloads()).payloads[0]
    assert plain.data == b'"secret"'
    assert valid.headers["access-control-allow-origin"] == UI
    assert provider.fetches <= 2  # the JWKS is cached, not fetched per request


async def test_a_claim_or_an_email_domain_restricts_who_may_decrypt(
    idp: tuple[IdentityProvider, str],
) -> None:
    provider, jwks_url = idp
    auth = JWTAuth(
        jwks_url=jwks_url,
        issuer=ISSUER,
        audience=AUDIENCE,
        claims={"groups": "codec-readers"},
        email_domain="example.test",
    )
    app = codec_app(CODEC, jwt_auth=auth)
    member = {"groups": ["staff", "codec-readers"], "email": "ada@example.test"}
    cases = [
        (member, 200),
        ({**member, "groups": ["staff"]}, 403),
        ({**member, "email": "ada@elsewhere.test"}, 403),
        ({**member, "email_verified": False}, 403),
        ({"email": "ada@example.test"}, 403),
    ]
    statuses = [
        (await post(app, sealed_body(), **bearer(provider.token(**claims)))).status_code
        for claims, _ in cases
    ]
    assert statuses == [status for _, status in cases]


async def test_a_body_over_the_limit_is_refused_with_413_before_it_is_read_whole() -> None:
    app = codec_app(CODEC, max_body_bytes=1_000_000)
    declared = await post(app, b"x" * 1_000_001)
    assert declared.status_code == 413
    assert "over this codec server's limit of 1000000 bytes" in declared.json()["error"]

    sent = 0

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: streamed
        nonlocal sent
        for _ in range(80):
            sent += 1
            yield b"x" * 100_000

    streamed = await post(app, chunks())
    assert streamed.status_code == 413
    assert sent < 20  # 8 MB offered; it stopped reading just past 1 MB
    assert (await post(app, sealed_body())).status_code == 200
    assert MAX_BODY_BYTES == 12 * 1024 * 1024  # the documented default (README)


async def test_an_unauthenticated_call_never_reads_the_body() -> None:
    app = codec_app(CODEC, token="t0ken", max_body_bytes=1_000_000)
    refused = await post(app, b"x" * 2_000_000)
    assert refused.status_code == 401  # who, before how much


@pytest.mark.parametrize(
    ("host", "authenticated", "insecure", "refused"),
    [
        ("127.0.0.1", False, False, False),
        ("::1", False, False, False),
        ("localhost", False, False, False),
        ("0.0.0.0", False, False, True),
        ("192.0.2.7", False, False, True),
        ("codec.example.test", False, False, True),
        ("0.0.0.0", True, False, False),
        ("0.0.0.0", False, True, False),
    ],
)
def test_decryption_is_served_beyond_loopback_only_with_auth_or_insecure(
    host: str, authenticated: bool, insecure: bool, refused: bool
) -> None:
    problem = exposure_problem(host, authenticated, insecure)
    assert (problem is not None) is refused
    if problem is not None:
        assert f"on {host} without authentication" in problem and "--insecure" in problem


def test_golem_codec_server_refuses_a_public_address_without_auth_before_binding(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GOLEM_ENCRYPTION_KEY", f"ui:{base64.b64encode(KEY).decode()}")
    monkeypatch.delenv("GOLEM_CODEC_TOKEN", raising=False)
    assert run_command(["codec-server", "--host", "0.0.0.0", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "refusing to serve decryption on 0.0.0.0 without authentication" in err
    assert run_command(["codec-server", "--host", "0.0.0.0", "--jwks-url", "http://x"]) == 2
    assert "OIDC tokens need --audience, --issuer too" in capsys.readouterr().err


def test_default_origins_are_the_uis_a_user_runs(tmp_path: Path) -> None:
    recorded = tmp_path / "ui-url"
    recorded.write_text("http://localhost:9233\n")  # `golem dev --ui-port 9233` wrote it
    environ = {
        "TEMPORAL_ADDRESS": "127.0.0.1:7300",
        "TEMPORAL_UI_URL": "https://temporal.example.test/namespaces/default",
        "GOLEM_UI_URL": "https://ui.example.test:8443/",
    }
    assert default_origins(environ, recorded) == [
        "http://localhost:8233",
        "http://127.0.0.1:8233",
        "http://localhost:8300",
        "http://127.0.0.1:8300",
        "https://ui.example.test:8443",
        "https://temporal.example.test",
        "http://localhost:9233",
        "http://127.0.0.1:9233",
    ]
    assert default_origins({}, tmp_path / "absent") == [
        "http://localhost:8233",
        "http://127.0.0.1:8233",
    ]


def test_golem_dev_records_its_ui_for_the_codec_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import golem.cli.server as server

    monkeypatch.setattr(server.os, "execv", lambda *args: None)  # not become the server
    assert run_command(["dev", "--dir", str(tmp_path), "--port", "1", "--ui-port", "9234"]) == 0
    assert (tmp_path / "ui-url").read_text() == "http://localhost:9234\n"
