"""Configured secrets kept out of error texts.

    secrets = Secrets.of(api_key, headers, client_headers, extra_body)
    secrets.scrub(error)            # every text of a ModelError, in place

What counts as a secret: the API key; every value of the adapter's ``headers=``; the
values of authentication headers on a caller's ``http_client`` (``authorization``,
``x-api-key``, ...), with the token after a ``Bearer``/``Basic`` scheme; and string values in
``extra_body`` under a name that marks a secret (``api_key``, ``access_token``,
``client_secret``, ``password``, ...). Values shorter than 8 characters are left alone: they
are too likely to be ordinary words of the provider's message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from golem.errors import ModelError, ModelHTTPError

REDACTED = "***"
MIN_SECRET_LENGTH = 8

_AUTH_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "cookie",
    }
)
# a name ending in one of these marks its extra_body value secret (max_tokens does not)
_SECRET_NAME = re.compile(r"(key|token|secret|password|passwd|auth|authorization|credentials?)$")


@dataclass(frozen=True)
class Secrets:
    """The secret strings of one request, longest first."""

    values: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        api_key: str,
        headers: Mapping[str, str],
        client_headers: Mapping[str, str],
        extra_body: Mapping[str, Any],
    ) -> Secrets:
        """The secrets configured for a request (see the module docstring)."""
        found = [api_key, *headers.values()]
        for name, value in client_headers.items():
            if name.lower() in _AUTH_HEADERS:
                found += [value, value.partition(" ")[2]]
        found += _marked(extra_body, marked=False)
        unique = {s for s in found if len(s) >= MIN_SECRET_LENGTH}
        return cls(tuple(sorted(unique, key=lambda s: (-len(s), s))))

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        for secret in self.values:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def scrub(self, error: ModelError) -> None:
        """Redact every text an error carries: its message, its arguments, its body."""
        if not self.values:
            return
        error.message = self.redact(error.message)
        error.args = tuple(self.redact(a) if isinstance(a, str) else a for a in error.args)
        if isinstance(error, ModelHTTPError):
            error.body = self.redact(error.body)


def _marked(value: Any, *, marked: bool) -> Iterator[str]:
    if isinstance(value, str):
        if marked:
            yield value
    elif isinstance(value, Mapping):
        for name, item in value.items():
            yield from _marked(item, marked=marked or _is_secret_name(str(name)))
    elif isinstance(value, Iterable) and not isinstance(value, bytes | bytearray):
        for item in value:
            yield from _marked(item, marked=marked)


def _is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(re.sub(r"[^a-z0-9]", "", name.lower())))
