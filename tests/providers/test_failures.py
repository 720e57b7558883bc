"""Failures every adapter maps the same way: HTTP errors, broken streams, unreachable hosts."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from provider_fakes import API_KEY, Answer, FakeProvider, recording
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from golem.messages import Message
from golem.models import (
    AnthropicModel,
    GeminiModel,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelRequest,
    ModelResponse,
    ModelResponseError,
    ModelSettings,
    OpenAIChatModel,
    OpenAIResponsesModel,
)
from golem.models._http import HTTPModel
from golem.models.fallback import provider_unavailable

HI = ModelRequest(messages=[Message.user("hi")])
HTML_502 = (
    b"<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway"
    b"</h1></center><hr><center>nginx</center></body></html>"
)


ADAPTERS = [OpenAIChatModel, AnthropicModel, GeminiModel, OpenAIResponsesModel]


@pytest.fixture(params=["openai", "anthropic", "gemini", "responses"])
def adapter(
    request: pytest.FixtureRequest,
) -> tuple[FakeProvider, HTTPModel]:
    fake: FakeProvider = request.getfixturevalue(f"{request.param}_fake")
    model: HTTPModel = request.getfixturevalue(f"{request.param}_model")
    return fake, model


async def call(model: HTTPModel, stream: bool = False) -> ModelResponse:
    assert isinstance(model, OpenAIChatModel | AnthropicModel | GeminiModel | OpenAIResponsesModel)
    if not stream:
        return await model.request(HI)
    items = [item async for item in model.request_stream(HI)]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    return final


async def test_html_error_page_from_a_proxy_is_named_clearly(
    adapter: tuple[FakeProvider, HTTPModel],
) -> None:
    fake, model = adapter
    fake.answer(Answer(502, HTML_502, "text/html"))
    with pytest.raises(ModelHTTPError) as caught:
        await call(model)
    assert (caught.value.status, caught.value.retryable) == (502, True)
    assert caught.value.message == (
        "the server answered 502 with an HTML page titled '502 Bad Gateway' instead of an API "
        "error (probably a proxy or gateway in front of the provider)"
    )


async def test_empty_bodies_raise_response_errors(adapter: tuple[FakeProvider, HTTPModel]) -> None:
    fake, model = adapter
    fake.answer(Answer(200, b""), Answer(503, b""), Answer(200, b"", "text/event-stream"))
    with pytest.raises(ModelResponseError, match="empty response body") as caught:
        await call(model)
    assert caught.value.retryable and caught.value.provider == model.provider
    with pytest.raises(ModelHTTPError) as http:
        await call(model)
    assert (http.value.status, http.value.message, http.value.retryable) == (
        503,
        "empty response body (503 SERVICE UNAVAILABLE)",
        True,
    )
    with pytest.raises(ModelConnectionError, match="stream ended before") as cut:
        await call(model, stream=True)
    assert cut.value.retryable


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after-ms": "1500", "Retry-After": "2"}, 1.5),
        # a date already past means "now"; future dates are measured in test_http.py
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
    ],
    ids=["seconds", "milliseconds", "http-date"],
)
async def test_rate_limit_carries_retry_after(
    adapter: tuple[FakeProvider, HTTPModel], headers: dict[str, str], seconds: float
) -> None:
    fake, model = adapter
    fake.answer(Answer.json(429, {"error": {"message": "Rate limit reached"}}, **headers))
    with pytest.raises(ModelHTTPError) as caught:
        await call(model)
    error = caught.value
    assert (error.status, error.message, error.retryable, error.retry_after) == (
        429,
        "Rate limit reached",
        True,
        seconds,
    )


async def test_gemini_retry_info_gives_retry_after(
    gemini_fake: FakeProvider, gemini_model: GeminiModel
) -> None:
    body = {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"},
            ],
        }
    }
    gemini_fake.answer(Answer.json(429, body))
    with pytest.raises(ModelHTTPError) as caught:
        await gemini_model.request(HI)
    assert (caught.value.message, caught.value.retry_after) == (
        "You exceeded your current quota.",
        7.0,
    )


async def test_server_error_is_retryable_and_the_next_call_succeeds(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel
) -> None:
    error = {
        "error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
        }
    }
    openai_fake.answer(Answer.json(500, error), "openai-chat-01-text")
    with pytest.raises(ModelHTTPError) as caught:
        await openai_model.request(HI)
    assert (caught.value.status, caught.value.retryable, caught.value.retry_after) == (
        500,
        True,
        None,
    )
    assert len(openai_fake.bodies) == 1  # the adapter never retries by itself
    response = await openai_model.request(HI)
    assert response.message.content == "The capital of France is Paris."


async def test_recorded_model_not_found(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel
) -> None:
    openai_fake.answer("openai-chat-07-error-404-model-not-found")
    with pytest.raises(ModelHTTPError) as caught:
        await openai_model.request(HI)
    assert (caught.value.status, caught.value.retryable) == (404, False)
    assert (
        caught.value.message
        == "The model `gpt-5.2-proo` does not exist or you do not have access to it."
    )
    assert str(caught.value) == (
        "openai: HTTP 404: The model `gpt-5.2-proo` does not exist or you do not have access to it."
    )


def _sse_events(name: str) -> list[str]:
    sse: str = recording(name)["response"]["sse"]
    return [e + "\n\n" for e in sse.split("\n\n") if e]


CUTS = {
    "openai": ("openai-chat-05-stream-tool-call", 3, "data: [DONE]"),
    "anthropic": ("anthropic-07-stream-thinking-text", 8, "message_stop"),
    "responses": ("openai-responses-04-stream-function-call", 12, "response.completed"),
}


@pytest.fixture(params=sorted(CUTS))
def cut_adapter(request: pytest.FixtureRequest) -> tuple[FakeProvider, HTTPModel, str]:
    name, keep, terminal = CUTS[request.param]
    fake: FakeProvider = request.getfixturevalue(f"{request.param}_fake")
    model: HTTPModel = request.getfixturevalue(f"{request.param}_model")
    cut = "".join(_sse_events(name)[:keep])
    fake.answer(Answer(200, cut.encode(), "text/event-stream"))
    return fake, model, terminal


async def test_stream_cut_mid_answer_is_a_connection_error_a_fallback_moves_on_from(
    cut_adapter: tuple[FakeProvider, HTTPModel, str],
) -> None:
    _, model, terminal = cut_adapter
    with pytest.raises(ModelConnectionError) as caught:
        await call(model, stream=True)
    assert caught.value.retryable
    assert provider_unavailable(caught.value)
    assert caught.value.message.startswith(f"stream ended before {terminal}")


async def test_openai_stream_cut_mid_tool_call_names_the_call(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel
) -> None:
    cut = "".join(_sse_events("openai-chat-05-stream-tool-call")[:3])
    openai_fake.answer(Answer(200, cut.encode(), "text/event-stream"))
    with pytest.raises(ModelConnectionError) as caught:
        await call(openai_model, stream=True)
    assert (
        str(caught.value)
        == "openai: stream ended before data: [DONE] (in the middle of tool call 0)"
    )


async def test_gemini_stream_without_finish_reason_is_truncated(
    gemini_fake: FakeProvider, gemini_model: GeminiModel
) -> None:
    sse = recording("gemini-05-stream-function-call-thought-signature")["response"]["sse"]
    first = sse.split("\r\n\r\n")[0] + "\r\n\r\n"
    gemini_fake.answer(Answer(200, first.encode(), "text/event-stream"))
    with pytest.raises(ModelConnectionError) as caught:
        await call(gemini_model, stream=True)
    assert str(caught.value) == (
        "gemini: stream ended before a chunk with finishReason (after tool call 'get_country')"
    )


DROPS = {
    "openai": ("/v1/chat/completions", "openai-chat-05-stream-tool-call"),
    "responses": ("/v1/responses", "openai-responses-04-stream-function-call"),
}


@pytest.fixture(params=sorted(DROPS))
def dropping(request: pytest.FixtureRequest) -> tuple[HTTPModel, str, str]:
    model: HTTPModel = request.getfixturevalue(f"{request.param}_model")
    return (model, *DROPS[request.param])


async def test_connection_dropped_mid_stream_is_a_connection_error_a_fallback_moves_on_from(
    httpserver: HTTPServer, dropping: tuple[HTTPModel, str, str]
) -> None:
    model, path, name = dropping
    events = _sse_events(name)

    def body() -> Iterator[bytes]:
        yield "".join(events[:3]).encode()
        raise ConnectionResetError("provider went away")

    def handler(request: Request) -> Response:
        return Response(body(), content_type="text/event-stream")

    httpserver.expect_request(path).respond_with_handler(handler)
    with pytest.raises(ModelConnectionError) as caught:
        await call(model, stream=True)
    assert caught.value.retryable
    assert provider_unavailable(caught.value)
    assert caught.value.message.startswith("stream")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize("cls", ADAPTERS)
@pytest.mark.parametrize("stream", [False, True])
async def test_connection_refused_is_a_connection_error(cls: type[HTTPModel], stream: bool) -> None:
    model: Any = cls("m", base_url=f"http://127.0.0.1:{_closed_port()}", api_key=API_KEY)
    try:
        with pytest.raises(ModelConnectionError) as caught:
            await call(model, stream=stream)
    finally:
        await model.aclose()
    assert caught.value.retryable
    assert API_KEY not in str(caught.value)


@pytest.mark.parametrize("cls", ADAPTERS)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_provider_that_does_not_answer_in_time_is_a_retryable_timeout(
    httpserver: HTTPServer, cls: type[HTTPModel], stream: bool
) -> None:
    released = threading.Event()

    def stalled(request: Request) -> Response:
        released.wait(10)  # until the test is over: the answer never comes in time
        return Response("{}", content_type="application/json")

    httpserver.expect_request(re.compile(".*"), method="POST").respond_with_handler(stalled)
    client = httpx.AsyncClient(timeout=httpx.Timeout(0.2))
    base_url = httpserver.url_for(BASE_PATHS[cls])
    model: Any = cls("m", base_url=base_url, api_key=API_KEY, http_client=client)
    try:
        with pytest.raises(ModelConnectionError) as caught:
            await call(model, stream=stream)
    finally:
        released.set()
        await client.aclose()
    assert caught.value.retryable
    assert str(caught.value) == f"{cls.provider}: timed out at {model.base_url}: ReadTimeout"


@pytest.mark.parametrize("cls", ADAPTERS)
def test_api_key_is_absent_from_repr(cls: type[HTTPModel]) -> None:
    model = cls("some-model", api_key=API_KEY)
    assert API_KEY not in repr(model) and API_KEY not in str(model)
    assert repr(model) == f"{cls.__name__}(name='some-model', base_url='{model.default_base_url}')"


async def test_api_key_echoed_by_a_server_is_redacted(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel
) -> None:
    echo = {
        "error": {"message": f"Incorrect API key provided: {API_KEY}.", "code": "invalid_api_key"}
    }
    openai_fake.answer(Answer.json(401, echo))
    with pytest.raises(ModelHTTPError) as caught:
        await openai_model.request(HI)
    error = caught.value
    assert error.message == "Incorrect API key provided: ***."
    assert API_KEY not in str(error) and API_KEY not in repr(error) and API_KEY not in error.body
    assert (error.status, error.retryable) == (401, False)


@pytest.mark.parametrize(
    ("cls", "names"),
    [
        (OpenAIChatModel, "OPENAI_API_KEY"),
        (AnthropicModel, "ANTHROPIC_API_KEY"),
        (GeminiModel, "GEMINI_API_KEY or GOOGLE_API_KEY"),
        (OpenAIResponsesModel, "OPENAI_API_KEY"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_missing_key_for_the_default_endpoint_fails_before_any_request(
    monkeypatch: pytest.MonkeyPatch, cls: type[HTTPModel], names: str, stream: bool
) -> None:
    for name in (*cls.api_key_env, *cls.base_url_env):
        monkeypatch.delenv(name, raising=False)
    sent: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    client = httpx.AsyncClient(transport=httpx.MockTransport(record))
    model: Any = cls("some-model", http_client=client)
    try:
        with pytest.raises(ModelError) as caught:
            await call(model, stream=stream)
    finally:
        await client.aclose()
    assert type(caught.value) is ModelError and not caught.value.retryable
    assert str(caught.value) == f"{cls.provider}: no API key: pass api_key= or set {names}"
    assert sent == []


def test_keys_and_base_urls_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1/")
    monkeypatch.setenv("GOOGLE_API_KEY", "g-key-123456")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    assert OpenAIChatModel("x").base_url == "http://127.0.0.1:1/v1"
    assert GeminiModel("x")._headers()["x-goog-api-key"] == "g-key-123456"


def test_stream_error_chunk_from_openai_is_mapped() -> None:
    from golem.models._errors import stream_error

    error = stream_error(
        {"error": {"message": "server overloaded", "type": "server_error"}}, "openai"
    )
    assert (error.status, error.message, error.retryable) == (500, "server overloaded", True)
    body: dict[str, Any] = json.loads(json.dumps({"error": {"code": 429, "message": "slow down"}}))
    assert stream_error(body, "gemini").status == 429


GATEWAY_TOKEN = "gw-token-0123456789"
CLIENT_TOKEN = "client-bearer-abcdef012345"
EXTRA_SECRET = "extra-secret-9876543210"
BASE_PATHS = {
    OpenAIChatModel: "/v1",
    AnthropicModel: "",
    GeminiModel: "",
    OpenAIResponsesModel: "/v1",
}


def _echo(request: Request) -> Response:
    """A server (or proxy) that quotes the whole request back in its error message."""
    echoed = f"denied: headers {dict(request.headers)} body {request.get_data(as_text=True)}"
    return Response(
        json.dumps({"error": {"message": echoed, "code": 403}}),
        status=403,
        content_type="application/json",
    )


@pytest.mark.parametrize("cls", ADAPTERS)
@pytest.mark.parametrize("stream", [False, True])
async def test_every_configured_secret_is_redacted_from_an_echoed_error(
    httpserver: HTTPServer, cls: type[HTTPModel], stream: bool
) -> None:
    httpserver.expect_request(re.compile(".*"), method="POST").respond_with_handler(_echo)
    client = httpx.AsyncClient(headers={"proxy-authorization": f"Bearer {CLIENT_TOKEN}"})
    model: Any = cls(
        "some-model",
        base_url=httpserver.url_for(BASE_PATHS[cls]),
        api_key=API_KEY,
        http_client=client,
        headers={"x-gateway-token": GATEWAY_TOKEN},
    )
    extra = {"metadata": {"session_token": EXTRA_SECRET, "user": "visible-user-id"}}
    request = ModelRequest(messages=[Message.user("hi")], settings=ModelSettings(extra_body=extra))
    try:
        with pytest.raises(ModelHTTPError) as caught:
            if stream:
                [item async for item in model.request_stream(request)]
            else:
                await model.request(request)
    finally:
        await client.aclose()
    error = caught.value
    texts = [str(error), repr(error), error.message, error.body]
    for secret in (API_KEY, GATEWAY_TOKEN, CLIENT_TOKEN, EXTRA_SECRET):
        assert all(secret not in text for text in texts), secret
    # the echo really carried them, now masked; what is not secret stays readable
    assert error.message.count("***") >= 4 and "visible-user-id" in error.message
    assert "'X-Gateway-Token': '***'" in error.message
    assert "'Proxy-Authorization': '***'" in error.message
    assert (error.status, error.retryable) == (403, False)


async def test_a_secret_echoed_in_a_non_json_answer_is_redacted(
    openai_fake: FakeProvider, openai_model: OpenAIChatModel
) -> None:
    openai_fake.answer(Answer(200, f"<pre>key={API_KEY}</pre>".encode(), "text/plain"))
    with pytest.raises(ModelResponseError) as caught:
        await openai_model.request(HI)
    assert str(caught.value) == (
        "openai: response body is not JSON (content-type 'text/plain'): '<pre>key=***</pre>'"
    )
