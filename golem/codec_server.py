"""A codec server: the Temporal UI and CLI show decrypted payloads to those who hold the key.

    GOLEM_ENCRYPTION_KEY=... golem codec-server        # loopback only, no auth: your own UI
    GOLEM_ENCRYPTION_KEY=... golem codec-server --host 0.0.0.0 \\
        --jwks-url https://idp.example.com/.well-known/jwks.json \\
        --issuer https://idp.example.com/ --audience temporal-ui --email-domain example.com
    # Temporal UI: Settings > Data Encoder > the server's URL ("Pass the user access token"
    # on, behind an identity provider); temporal CLI: --codec-endpoint and --codec-auth

``POST /encode`` and ``POST /decode`` take and return ``{"payloads": [...]}`` in the
protobuf JSON form the UI sends; with ``GOLEM_STORAGE_DIR`` set, ``/decode`` reads a stored
payload from the store (past 64 KiB: a preview). Browsers call it cross-origin, so it
answers CORS preflights for the UI's origin (by default: the dev server's UI,
``GOLEM_UI_URL`` or ``TEMPORAL_UI_URL``, and the UI ``golem dev`` recorded in
``.golem/ui-url``).

Who may decrypt: the Temporal UI forwards only the signed-in user's OIDC access token, so
``JWTAuth`` verifies it (signature against the identity provider's JWKS, issuer, audience,
expiry, optionally a claim); the static ``GOLEM_CODEC_TOKEN`` serves the temporal CLI
(``--codec-auth "Bearer <token>"``). Without either the server listens on loopback only
(``--insecure`` overrides). Bodies over :data:`MAX_BODY_BYTES` are refused with 413 before
they are read whole.
"""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:  # the codec-server extra; `golem --help` must not need it
    import jwt
    from starlette.applications import Starlette
    from temporalio.converter import ExternalStorage, PayloadCodec

#: The dev server's UI (``golem dev``), always allowed unless origins are given.
DEFAULT_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")
#: The largest request body served: four payloads at Temporal's 2 MB limit, base64'd.
MAX_BODY_BYTES = 12 * 1024 * 1024
#: Where ``golem dev`` records its UI's address, in its ``--dir``.
DEV_UI_FILE = Path(".golem") / "ui-url"
UI_URL_VARIABLES = ("GOLEM_UI_URL", "TEMPORAL_UI_URL")
TOKEN_VARIABLE = "GOLEM_CODEC_TOKEN"


class AuthError(Exception):
    """A request the server refuses: ``status`` 401 (who?) or 403 (not allowed)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class JWTAuth:
    """Accept an OIDC access token signed by one of the identity provider's keys (read
    from ``jwks_url`` and cached, or from a ``jwks_file``) or with a shared ``hs_key``
    (HMAC), issued by ``issuer`` for ``audience`` and unexpired (``exp`` required).

    ``claims`` restricts it further: each named claim must equal the value (or, for a list
    claim such as ``groups``, hold it); ``email_domain`` requires a verified address there.
    ``golem serve`` verifies its callers with the same class.
    """

    issuer: str
    audience: str
    jwks_url: str = ""
    jwks_file: str = ""
    hs_key: str = field(default="", repr=False)
    claims: Mapping[str, str] = field(default_factory=dict)
    email_domain: str | None = None
    leeway: float = 30.0
    """Seconds of clock skew tolerated on ``exp`` and ``nbf``."""

    def __post_init__(self) -> None:
        given = [n for n in ("jwks_url", "jwks_file", "hs_key") if getattr(self, n)]
        if len(given) != 1:
            raise ValueError(
                f"JWTAuth takes one of jwks_url, jwks_file or hs_key, not {given or 'none'}"
            )

    @cached_property
    def _keys(self) -> jwt.PyJWKClient:
        import jwt

        return jwt.PyJWKClient(self.jwks_url, cache_keys=True, lifespan=300, timeout=10)

    @cached_property
    def _key_file(self) -> jwt.PyJWKSet:
        import jwt

        return jwt.PyJWKSet.from_json(Path(self.jwks_file).read_text())

    def _signing_key(self, token: str) -> tuple[Any, list[str]]:
        """The key that must have signed ``token``, and the algorithms it allows."""
        import jwt

        if self.hs_key:
            return self.hs_key, ["HS256", "HS384", "HS512"]
        if self.jwks_url:
            key = self._keys.get_signing_key_from_jwt(token)
            return key.key, [key.algorithm_name]
        kid = jwt.get_unverified_header(token).get("kid")
        keys = [k for k in self._key_file.keys if kid is None or k.key_id == kid]
        if not keys:
            raise jwt.PyJWKClientError(f"no key {kid!r} in {self.jwks_file}")
        return keys[0].key, [keys[0].algorithm_name]

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims, or :class:`AuthError` saying why not (may fetch the JWKS)."""
        import jwt

        try:
            key, algorithms = self._signing_key(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=algorithms,  # the key's own: never a caller's choice
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise AuthError(401, "the access token has expired") from None
        except jwt.InvalidAudienceError:
            raise AuthError(
                401, f"the access token is not for audience {self.audience!r}"
            ) from None
        except jwt.InvalidIssuerError:
            raise AuthError(401, f"the access token is not issued by {self.issuer!r}") from None
        except jwt.PyJWKClientConnectionError as exc:
            raise AuthError(401, f"the identity provider's keys are unreachable: {exc}") from None
        except (jwt.PyJWTError, jwt.PyJWKClientError) as exc:
            raise AuthError(401, f"the access token is not valid: {exc}") from None
        self._check_claims(claims)
        return claims

    def _check_claims(self, claims: Mapping[str, Any]) -> None:
        for name, wanted in self.claims.items():
            value = claims.get(name)
            held = value if isinstance(value, list) else [value]
            if wanted not in held:
                raise AuthError(403, f"the access token's {name!r} claim is not {wanted!r}")
        if self.email_domain is not None:
            email = str(claims.get("email") or "")
            if not email.lower().endswith("@" + self.email_domain.lower()):
                raise AuthError(403, f"the access token's email is not at {self.email_domain}")
            if claims.get("email_verified") is False:
                raise AuthError(403, "the access token's email is not verified")


def codec_app(
    codec: PayloadCodec | None,
    *,
    origins: Sequence[str] = DEFAULT_ORIGINS,
    token: str | None = None,
    jwt_auth: JWTAuth | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    storage: ExternalStorage | None = None,
) -> Starlette:
    """An ASGI app serving ``/encode`` and ``/decode`` with ``codec``; with ``token`` or
    ``jwt_auth`` set, a call needs ``Authorization: Bearer`` with either. With ``storage``,
    ``/decode`` reads stored payloads (golem.worker.display.for_display: past 64 KiB, a preview)."""
    from google.protobuf import json_format
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.middleware import Middleware
    from starlette.middleware.cors import CORSMiddleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
    from temporalio.api.common.v1 import Payloads
    from temporalio.exceptions import ApplicationError

    from golem.worker.display import for_display

    async def authorize(request: Request) -> None:
        if not token and jwt_auth is None:
            return
        given = request.headers.get("authorization", "")
        if token and hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            return
        scheme, _, credential = given.partition(" ")
        if jwt_auth is None or scheme.lower() != "bearer" or not credential.strip():
            raise AuthError(401, "missing or wrong bearer token")
        await run_in_threadpool(jwt_auth.verify, credential.strip())

    async def body(request: Request) -> bytes | None:
        """The body, or ``None`` once it is over the limit (never read further)."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_body_bytes:
            return None
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body_bytes:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    async def transform(request: Request, encode: bool) -> Response:
        try:
            await authorize(request)
        except AuthError as exc:
            return JSONResponse({"error": exc.reason}, status_code=exc.status)
        data = await body(request)
        if data is None:
            limit = f"over this codec server's limit of {max_body_bytes} bytes"
            return JSONResponse({"error": f"the request body is {limit}"}, status_code=413)
        try:
            payloads = json_format.Parse(data, Payloads())
        except json_format.ParseError as exc:
            return JSONResponse(
                {"error": f'expected {{"payloads": [...]}} in protobuf JSON: {exc}'},
                status_code=400,
            )
        try:
            if not encode:
                result = await for_display(payloads.payloads, storage, codec)
            else:
                result = await codec.encode(payloads.payloads) if codec else list(payloads.payloads)
        except ApplicationError as exc:  # a key this server does not hold, or a wrong one
            return JSONResponse({"error": exc.message}, status_code=400)
        except (LookupError, ValueError, OSError) as exc:  # a blob gone, a driver not here
            return JSONResponse({"error": str(exc)}, status_code=400)
        return Response(
            json_format.MessageToJson(Payloads(payloads=result)), media_type="application/json"
        )

    async def encode(request: Request) -> Response:
        return await transform(request, encode=True)

    async def decode(request: Request) -> Response:
        return await transform(request, encode=False)

    return Starlette(
        routes=[
            Route("/encode", encode, methods=["POST"]),
            Route("/decode", decode, methods=["POST"]),
        ],
        middleware=[
            Middleware(
                CORSMiddleware,
                allow_origins=list(origins),
                allow_methods=["POST"],
                allow_headers=["Content-Type", "X-Namespace", "Authorization"],
                allow_credentials=True,
            )
        ],
    )


def default_origins(
    environ: Mapping[str, str] | None = None, dev_ui_file: Path = DEV_UI_FILE
) -> list[str]:
    """The UIs a user runs: the dev server's (8233, or beside ``TEMPORAL_ADDRESS``), the
    ``GOLEM_UI_URL`` / ``TEMPORAL_UI_URL`` one, and the one ``golem dev`` recorded."""
    env = os.environ if environ is None else environ
    urls = [*DEFAULT_ORIGINS]
    host, _, port = env.get("TEMPORAL_ADDRESS", "").rpartition(":")
    if port.isdigit():
        urls.append(f"http://{host or 'localhost'}:{int(port) + 1000}")
    urls += [env[name] for name in UI_URL_VARIABLES if env.get(name)]
    if dev_ui_file.is_file():
        urls.append(dev_ui_file.read_text().strip())
    origins: list[str] = []
    for url in urls:
        for origin in _origins(url):
            if origin not in origins:
                origins.append(origin)
    return origins


def _origins(url: str) -> list[str]:
    """A URL's origin, and its twin on the other loopback name (a browser tells them apart)."""
    parts = urlsplit(url.strip())
    if not parts.scheme or not parts.hostname:
        return []
    port = f":{parts.port}" if parts.port else ""
    names = [parts.hostname]
    if parts.hostname in ("localhost", "127.0.0.1"):
        names = ["localhost", "127.0.0.1"]
    return [f"{parts.scheme}://{name}{port}" for name in names]


def exposure_problem(host: str, authenticated: bool, insecure: bool) -> str | None:
    """Why serving decryption on ``host`` is refused, or ``None`` when it is not."""
    if authenticated or insecure or is_loopback(host):
        return None
    return (
        f"refusing to serve decryption on {host} without authentication: set "
        f"{TOKEN_VARIABLE} (the temporal CLI) or --jwks-url, --issuer and --audience (the "
        "Temporal UI's signed-in users), or pass --insecure"
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (localhost or a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``golem codec-server``'s options."""
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    parser.add_argument("--port", type=int, default=8081, help="port to listen on")
    parser.add_argument(
        "--origin",
        action="append",
        help="a UI origin to allow (repeatable; default: the dev server's UI, GOLEM_UI_URL "
        "or TEMPORAL_UI_URL, and the UI `golem dev` recorded in .golem/ui-url)",
    )
    parser.add_argument("--jwks-url", help="the identity provider's JWKS (GOLEM_CODEC_JWKS_URL)")
    parser.add_argument("--issuer", help="the access tokens' issuer (GOLEM_CODEC_ISSUER)")
    parser.add_argument("--audience", help="the access tokens' audience (GOLEM_CODEC_AUDIENCE)")
    parser.add_argument(
        "--claim", action="append", metavar="NAME=VALUE", help="a claim tokens must hold"
    )
    parser.add_argument("--email-domain", help="tokens' verified email must be at this domain")
    parser.add_argument(
        "--max-body-bytes", type=int, default=MAX_BODY_BYTES, help="larger requests get 413"
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="serve a non-loopback address without authentication (anyone reaching it decrypts)",
    )


def serve(args: argparse.Namespace) -> int:
    """``golem codec-server``: check the settings, then serve until stopped."""
    try:
        import jwt  # noqa: F401 - the extra's, checked before anything is served
        import uvicorn

        from golem.storage import DIR_VARIABLE, storage_from_env
        from golem.wire.converter import ENV_VAR
        from golem.worker.codec import EncryptionCodec
    except ImportError as exc:
        raise SystemExit(
            f"golem codec-server needs: pip install 'golem-temporal[codec-server]' ({exc})"
        ) from None
    codec = EncryptionCodec.from_env()
    storage = storage_from_env()
    if codec is None and storage is None:
        raise SystemExit(
            f"golem codec-server: set {ENV_VAR} to the key(s) the workers use, and/or "
            f"{DIR_VARIABLE} to their payload store"
        )
    token = os.environ.get(TOKEN_VARIABLE) or None
    jwt_auth = _jwt_auth(args)
    problem = exposure_problem(args.host, bool(token or jwt_auth), args.insecure)
    if problem is not None:
        raise SystemExit(problem)
    origins = args.origin or default_origins()
    app = codec_app(
        codec,
        origins=origins,
        token=token,
        jwt_auth=jwt_auth,
        max_body_bytes=args.max_body_bytes,
        storage=storage,
    )
    auth = [name for name, on in (("bearer token", token), ("OIDC tokens", jwt_auth)) if on]
    print(
        f"golem codec-server: http://{args.host}:{args.port} for {', '.join(origins)}"
        f" (keys {', '.join(codec.key_ids) if codec else 'none'}"
        f"{'; stored payloads' if storage else ''}"
        f"; auth: {' or '.join(auth) or 'none, loopback only'})",
        flush=True,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def _jwt_auth(args: argparse.Namespace) -> JWTAuth | None:
    settings = {
        name: getattr(args, name) or os.environ.get(f"GOLEM_CODEC_{name.upper()}")
        for name in ("jwks_url", "issuer", "audience")
    }
    given = {name for name, value in settings.items() if value}
    if not given:
        return None
    if len(given) < 3:
        missing = ", ".join(f"--{n.replace('_', '-')}" for n in sorted(settings.keys() - given))
        raise SystemExit(f"golem codec-server: OIDC tokens need {missing} too")
    claims: dict[str, str] = {}
    for item in args.claim or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"golem codec-server: --claim {item!r}: expected NAME=VALUE")
        claims[name] = value
    return JWTAuth(
        jwks_url=str(settings["jwks_url"]),
        issuer=str(settings["issuer"]),
        audience=str(settings["audience"]),
        claims=claims,
        email_domain=args.email_domain,
    )
