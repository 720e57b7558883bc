"""A codec server: the Temporal UI and CLI show decrypted payloads to those who hold the key.

    GOLEM_ENCRYPTION_KEY=... golem codec-server --port 8081 --origin http://localhost:8233
    # Temporal UI: Settings > Data Encoder > http://localhost:8081

``POST /encode`` and ``POST /decode`` take and return ``{"payloads": [...]}`` in the
protobuf JSON form the UI sends. Browsers call it cross-origin, so it answers CORS
preflights for the UI's origin; with a token set, every call needs
``Authorization: Bearer <token>`` (the UI forwards the signed-in user's token).
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec
from temporalio.exceptions import ApplicationError

__all__ = ["DEFAULT_ORIGINS", "codec_app"]

#: The dev server's UI (``golem dev``), the origin allowed unless told otherwise.
DEFAULT_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")


def codec_app(
    codec: PayloadCodec,
    *,
    origins: Sequence[str] = DEFAULT_ORIGINS,
    token: str | None = None,
) -> Starlette:
    """An ASGI app serving ``/encode`` and ``/decode`` with ``codec``."""

    def authorized(request: Request) -> bool:
        if not token:
            return True
        given = request.headers.get("authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())

    async def transform(request: Request, encode: bool) -> Response:
        if not authorized(request):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        body = await request.body()
        try:
            payloads = json_format.Parse(body, Payloads())
        except json_format.ParseError as exc:
            return JSONResponse(
                {"error": f'expected {{"payloads": [...]}} in protobuf JSON: {exc}'},
                status_code=400,
            )
        try:
            result = await (codec.encode if encode else codec.decode)(payloads.payloads)
        except ApplicationError as exc:  # a key this server does not hold, or a wrong one
            return JSONResponse({"error": exc.message}, status_code=400)
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
