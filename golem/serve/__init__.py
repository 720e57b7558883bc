"""Durable agents served to browsers and applications: AG-UI, the Vercel AI SDK's UI
message stream, REST, and a console at ``/``.

    app = golem.serve.create_app(client, agents=["refunds"], origins=["https://app.example"])
    # uvicorn.run(app), or mount it in your own ASGI app; `golem serve` runs it too

A thread (AG-UI) or chat (``useChat``) id is a golem conversation id; the app keeps nothing
between requests: transcripts, what waits and stream offsets are read from Temporal.
Needs the ``golem-temporal[serve]`` extra.
"""

from golem.serve.app import create_app
from golem.serve.auth import Auth, JWTAuth, TrustedHeaderAuth
from golem.serve.decisions import to_approvals
from golem.serve.errors import Problem
from golem.serve.requests import MAX_BODY_BYTES

__all__ = [
    "MAX_BODY_BYTES",
    "Auth",
    "JWTAuth",
    "Problem",
    "TrustedHeaderAuth",
    "create_app",
    "to_approvals",
]
