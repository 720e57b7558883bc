"""Who calls ``golem serve``: an ``Auth`` names the subject behind a request.

    auth = JWTAuth(issuer="https://idp.example/", audience="golem", jwks_file="jwks.json")
    auth = JWTAuth(issuer="me", audience="golem", hs_key=os.environ["GOLEM_SERVE_HS_KEY"])
    auth = TrustedHeaderAuth("x-forwarded-user")    # behind a proxy that sets it, and only then

The token's ``sub`` owns the conversations it starts (``GolemOwner`` on the workflow);
another subject is answered 404 for them, in every protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from golem import codec_server
from golem.serve.errors import Problem


class Auth(Protocol):
    """Names who sends a request, or raises ``golem.serve.errors.Problem`` (401/403)."""

    async def subject(self, request: Request) -> str: ...


@dataclass(frozen=True, kw_only=True)
class JWTAuth(codec_server.JWTAuth):
    """``Authorization: Bearer <JWT>`` checked as the codec server checks it (signature,
    issuer, audience, expiry, claims); the subject is the token's ``sub``."""

    async def subject(self, request: Request) -> str:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Problem(401, "send Authorization: Bearer <access token>")
        try:
            claims = await run_in_threadpool(self.verify, token.strip())
        except codec_server.AuthError as exc:
            raise Problem(exc.status, exc.reason) from None
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise Problem(401, "the access token names no subject (sub)")
        return subject


@dataclass(frozen=True)
class TrustedHeaderAuth:
    """The subject is a header a reverse proxy in front sets after its own sign-in (e.g.
    ``X-Forwarded-User``). Anyone who reaches the server directly can set it too: serve
    it only where nothing but the proxy reaches."""

    header: str = "x-forwarded-user"

    async def subject(self, request: Request) -> str:
        subject = request.headers.get(self.header, "").strip()
        if not subject:
            raise Problem(401, f"no {self.header} header: sign in through the proxy")
        return subject
