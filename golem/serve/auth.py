"""Who calls ``golem serve``: an ``Auth`` names the subject behind a request."""

from __future__ import annotations

from typing import Protocol

from starlette.requests import Request

__all__ = ["Auth"]


class Auth(Protocol):
    """Names who sends a request, or raises ``golem.serve.errors.Problem`` (401/403)."""

    async def subject(self, request: Request) -> str: ...
