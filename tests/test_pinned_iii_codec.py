"""The codec server's JWT checks a planted bug once slipped past (issue 29, "Tests that were
missing"): a token without ``exp`` is refused, an email domain is matched exactly after
the ``@``, and a string claim is matched whole, never as a substring."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from test_codec_server import AUDIENCE, CODEC, ISSUER, IdentityProvider, bearer, post, sealed_body

from golem.codec_server import JWTAuth, codec_app


@pytest.fixture(scope="module")
def provider() -> Iterator[tuple[IdentityProvider, str]]:
    """An identity provider serving its JWKS on 127.0.0.1, for this module's tests."""
    idp = IdentityProvider()
    server = ThreadingHTTPServer(("127.0.0.1", 0), idp.handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield idp, f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    finally:
        server.shutdown()
        server.server_close()


def unexpiring_token(idp: IdentityProvider) -> str:
    """A token signed by the provider's key, right in every way but that it has no ``exp``."""
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "ada", "iat": int(time.time())}
    return jwt.encode(body, idp.key, algorithm="RS256", headers={"kid": idp.kid})


async def outcome(app: Any, token: str) -> tuple[int, str]:
    answer = await post(app, sealed_body(), **bearer(token))
    return answer.status_code, answer.json().get("error", "") if answer.status_code != 200 else ""


async def test_a_token_without_exp_is_refused_as_invalid_naming_the_missing_claim(
    provider: tuple[IdentityProvider, str],
) -> None:
    idp, jwks_url = provider
    app = codec_app(CODEC, jwt_auth=JWTAuth(jwks_url=jwks_url, issuer=ISSUER, audience=AUDIENCE))
    assert await outcome(app, idp.token()) == (200, "")
    assert await outcome(app, unexpiring_token(idp)) == (
        401,
        'the access token is not valid: Token is missing the "exp" claim',
    )


async def test_an_email_domain_is_matched_exactly_after_the_at_sign(
    provider: tuple[IdentityProvider, str],
) -> None:
    idp, jwks_url = provider
    auth = JWTAuth(jwks_url=jwks_url, issuer=ISSUER, audience=AUDIENCE, email_domain="example.test")
    app = codec_app(CODEC, jwt_auth=auth)
    refused = (403, "the access token's email is not at example.test")
    emails = {
        "ada@example.test": (200, ""),
        "ADA@Example.Test": (200, ""),  # domains are case-insensitive
        "ada@badexample.test": refused,  # the domain as a suffix of another
        "ada@mail.example.test": refused,  # a subdomain is another domain
        "ada@example.test.evil": refused,
        "example.test@evil.test": refused,
        "ada.example.test": refused,  # no @ at all
    }
    outcomes = {email: await outcome(app, idp.token(email=email)) for email in emails}
    assert outcomes == emails


async def test_a_string_claim_is_matched_whole_never_as_a_substring(
    provider: tuple[IdentityProvider, str],
) -> None:
    idp, jwks_url = provider
    auth = JWTAuth(jwks_url=jwks_url, issuer=ISSUER, audience=AUDIENCE, claims={"role": "reader"})
    app = codec_app(CODEC, jwt_auth=auth)
    refused = (403, "the access token's 'role' claim is not 'reader'")
    roles: dict[str, tuple[int, str]] = {
        "reader": (200, ""),
        "proofreader": refused,  # holds the wanted value as a substring
        "readers": refused,
        "read": refused,  # a substring of the wanted value
        "": refused,
    }
    outcomes = {role: await outcome(app, idp.token(role=role)) for role in roles}
    assert outcomes == roles
    assert await outcome(app, idp.token(role=["staff", "reader"])) == (200, "")
    assert await outcome(app, idp.token(role=["proofreader"])) == refused
