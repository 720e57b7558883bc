"""How long a provider asks to be left alone: Retry-After headers and Gemini's RetryInfo.

seconds = parse_retry_after(response.headers, error_object)   # float or None
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def parse_retry_after(
    headers: Mapping[str, str], error: Mapping[str, Any] | None = None, *, now: float | None = None
) -> float | None:
    """Seconds to wait, from ``retry-after-ms``, ``retry-after`` or the error's ``RetryInfo``.

    ``error`` is the provider's error object (the ``"error"`` member of its body). An
    HTTP date is measured against the response's own ``Date`` header when present.
    """
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(float(value) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value:
        try:
            return max(float(value), 0.0)
        except ValueError:
            pass
        try:
            when = parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError, IndexError):
            when = None
        if when is not None:
            if now is None:
                now = _reference_time(headers)
            return max(when - now, 0.0)
    return retry_info_delay(error)


def retry_info_delay(error: Mapping[str, Any] | None) -> float | None:
    """Gemini's ``google.rpc.RetryInfo.retryDelay`` (``"7s"``) in an error's details."""
    details = error.get("details") if error else None
    if not isinstance(details, list):
        return None
    for detail in details:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            match = _DURATION.match(str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def _reference_time(headers: Mapping[str, str]) -> float:
    date = headers.get("date")
    if date:
        try:
            return parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError, IndexError):
            pass
    return time.time()
