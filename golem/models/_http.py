"""The HTTP base of every adapter: construction, headers, posting, streaming, redaction.

An adapter says what differs (URLs, body, how to read an answer, a stream accumulator);
``request`` and ``request_stream`` are written once here. Adapters speak to providers
with plain httpx (no SDKs) and never retry: every failure becomes a
:class:`~golem.models.base.ModelError` whose ``retryable`` and ``retry_after`` let the
executor decide, with every configured secret redacted from its texts. A stream that stops
before its end marker is a :class:`~golem.models.base.ModelConnectionError`, as a connection
that fails before the answer is: retried, and a ``FallbackModel`` moves on.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping
from contextlib import aclosing, contextmanager
from typing import Any, ClassVar, Protocol, TypedDict

import httpx

from golem.errors import ModelConnectionError, ModelError, ModelResponseError
from golem.models._body import encode_body
from golem.models._errors import http_error
from golem.models._secrets import Secrets
from golem.models._sse import ServerSentEvent, SSEParser
from golem.models.base import ModelRequest, ModelResponse, StreamDelta
from golem.strict_json import TooDeep, loads_strict

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""Connect quickly or fail; a long generation may legitimately take minutes."""


class HTTPOptions(TypedDict, total=False):
    """The keyword options every HTTP adapter takes (a subclass adds its own to them)."""

    base_url: str | None
    api_key: str | None
    http_client: httpx.AsyncClient | None
    headers: Mapping[str, str] | None


class StreamAccumulator(Protocol):
    """Reads one streamed answer for an adapter: events in, deltas and a response out."""

    terminal: str
    """The provider's end-of-stream marker, for error messages."""

    @property
    def ended(self) -> bool:
        """The terminal marker arrived: stop reading."""
        ...

    @property
    def complete(self) -> bool:
        """Enough arrived to build the answer."""
        ...

    def feed(self, event: ServerSentEvent) -> list[StreamDelta]:
        """Read one event (raising the provider's in-stream error); the deltas it carried."""
        ...

    def progress(self) -> str:
        """Where the stream stopped, for a truncation message."""
        ...

    def response(self) -> ModelResponse:
        """The complete answer, equal to the non-streaming one."""
        ...


class HTTPModel:
    """Shared construction, client reuse, posting, streaming and error mapping.

    ``headers`` are sent with every request after the provider's own (a gateway's token,
    an organisation id); like the API key, their values are redacted from every error.
    """

    provider = ""
    default_base_url = ""
    api_key_env: tuple[str, ...] = ()
    base_url_env: tuple[str, ...] = ()
    key_header = "authorization"
    """The header that carries the API key."""
    key_scheme = ""
    """Text before the key in that header (``"Bearer "``)."""
    fixed_headers: ClassVar[Mapping[str, str]] = {}
    """Headers every request of this provider carries."""
    path = ""
    """The endpoint below ``base_url``, streaming or not (unless ``_url`` says otherwise)."""
    reads: ClassVar[tuple[Callable[[Any], ModelResponse], Callable[[], StreamAccumulator]]]
    """How a complete answer's JSON is read, and what reads a streamed one (unless
    ``_parse`` and ``_accumulator`` say otherwise); a tuple, so no function binds as a method."""

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.name = self._model_id(name)
        env_base = next((os.environ[v] for v in self.base_url_env if os.environ.get(v)), None)
        self.base_url = (base_url or env_base or self.default_base_url).rstrip("/")
        env_key = next((os.environ[v] for v in self.api_key_env if os.environ.get(v)), "")
        self._api_key = api_key if api_key is not None else env_key
        self._client = http_client
        self._extra_headers = dict(headers or {})

    @property
    def model_name(self) -> str:
        return self.name

    def __repr__(self) -> str:
        # never the key: reprs end up in logs, tracebacks and Temporal payloads
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"

    # --- what each provider supplies ---------------------------------------------------------

    def _model_id(self, name: str) -> str:
        """The model name as the provider's URLs and bodies want it."""
        return name

    def _url(self, *, stream: bool) -> str:
        return f"{self.base_url}{self.path}"

    def build_body(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """The provider's request body for ``request``."""
        raise NotImplementedError

    def _parse(self, data: Any, request: ModelRequest) -> ModelResponse:
        return self.reads[0](data)

    def _accumulator(self, request: ModelRequest) -> StreamAccumulator:
        return self.reads[1]()

    # --- the calls -----------------------------------------------------------------------------

    async def request(self, request: ModelRequest) -> ModelResponse:
        """One complete answer."""
        with self._redacting(request):
            body = self.build_body(request, stream=False)
            data = await self._post_json(self._url(stream=False), body)
            return self._parse(data, request)

    async def request_stream(
        self, request: ModelRequest
    ) -> AsyncIterator[StreamDelta | ModelResponse]:
        """Deltas as they arrive, then the complete :class:`ModelResponse` last."""
        with self._redacting(request):
            body = self.build_body(request, stream=True)
            answer = self._accumulator(request)
            events = self._post_stream(self._url(stream=True), body, answer.terminal)
            async with aclosing(events):
                async for event in events:
                    for delta in answer.feed(event):
                        yield delta
                    if answer.ended:
                        break
            if not answer.complete:
                raise self._truncated(answer.terminal, answer.progress())
            yield answer.response()

    async def aclose(self) -> None:
        """Close the HTTP client this adapter created (a caller's client is left alone)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # --- plumbing ------------------------------------------------------------------------------

    def _require_key(self) -> str:
        if not self._api_key and self.base_url == self.default_base_url:
            names = " or ".join(self.api_key_env)
            raise ModelError(f"no API key: pass api_key= or set {names}", provider=self.provider)
        return self._api_key

    def _headers(self) -> dict[str, str]:
        key = self._require_key()
        headers = {"content-type": "application/json", **self.fixed_headers}
        if key:
            headers[self.key_header] = self.key_scheme + key
        headers.update(self._extra_headers)
        return headers

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=DEFAULT_TIMEOUT)
        return self._client

    @contextmanager
    def _redacting(self, request: ModelRequest) -> Iterator[None]:
        """Redact every configured secret from any ModelError raised inside."""
        try:
            yield
        except ModelError as error:
            client_headers = self._client.headers if self._client is not None else {}
            secrets = Secrets.of(
                self._api_key, self._extra_headers, client_headers, request.settings.extra_body
            )
            secrets.scrub(error)
            raise

    async def _post_json(self, url: str, body: dict[str, Any]) -> Any:
        """POST a JSON body, return the decoded JSON answer or raise a ModelError."""
        content = encode_body(body, self.provider)
        headers = self._headers()
        try:
            response = await self._http().post(url, content=content, headers=headers)
        except httpx.TimeoutException as exc:
            raise self._connection_error("timed out", exc) from None
        except httpx.TransportError as exc:
            raise self._connection_error("could not reach the provider", exc) from None
        if response.status_code >= 400:
            raise http_error(response, self.provider)
        text = response.text
        if not text.strip():
            raise ModelResponseError(
                f"empty response body (HTTP {response.status_code})",
                provider=self.provider,
                retryable=True,
            )
        try:
            return loads_strict(text)
        except TooDeep as exc:
            raise ModelResponseError(
                f"response body is {exc}", provider=self.provider, retryable=True
            ) from None
        except ValueError:
            ctype = response.headers.get("content-type", "")
            raise ModelResponseError(
                f"response body is not JSON (content-type {ctype!r}): {text[:200]!r}",
                provider=self.provider,
                retryable=True,
            ) from None

    async def _post_stream(
        self, url: str, body: dict[str, Any], terminal: str
    ) -> AsyncGenerator[ServerSentEvent, None]:
        """POST and yield the answer's SSE events; transport failures become ModelErrors."""
        content = encode_body(body, self.provider)
        headers = self._headers()
        try:
            async with self._http().stream(
                "POST", url, content=content, headers=headers
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise http_error(response, self.provider)
                ctype = response.headers.get("content-type", "")
                if "html" in ctype:
                    await response.aread()
                    raise ModelResponseError(
                        f"expected an event stream, got {ctype!r}: {response.text[:200]!r}",
                        provider=self.provider,
                        retryable=True,
                    )
                parser = SSEParser()
                try:
                    async for chunk in response.aiter_bytes():
                        for event in parser.feed(chunk):
                            yield event
                except httpx.TimeoutException as exc:
                    raise self._connection_error("timed out reading the stream", exc) from None
                except httpx.TransportError as exc:
                    # A dropped stream is a broken connection: retried, and a fallback moves on.
                    raise ModelConnectionError(
                        f"stream interrupted before {terminal} ({type(exc).__name__}: {exc})",
                        provider=self.provider,
                    ) from None
                for event in parser.close():
                    yield event
        except httpx.TimeoutException as exc:
            raise self._connection_error("timed out", exc) from None
        except httpx.TransportError as exc:
            raise self._connection_error("could not reach the provider", exc) from None

    def _truncated(self, terminal: str, what: str = "") -> ModelConnectionError:
        """A stream closed before its end marker: the provider (or a proxy) dropped it."""
        detail = f" ({what})" if what else ""
        return ModelConnectionError(
            f"stream ended before {terminal}{detail}", provider=self.provider
        )

    def _connection_error(self, what: str, exc: Exception) -> ModelConnectionError:
        text = str(exc) or type(exc).__name__
        return ModelConnectionError(f"{what} at {self.base_url}: {text}", provider=self.provider)
