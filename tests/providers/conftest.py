"""Fixtures: fake providers (see provider_fakes.py) and adapters pointed at them."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest
from provider_fakes import (
    API_KEY,
    FakeProvider,
    anthropic_malformed,
    check_anthropic,
    check_gemini,
    check_openai,
    check_openai_responses,
    gemini_malformed,
    openai_malformed,
)
from pytest_httpserver import HTTPServer

from golem.models import AnthropicModel, GeminiModel, OpenAIChatModel, OpenAIResponsesModel

# --- fixtures --------------------------------------------------------------------------------


def _serve(httpserver: HTTPServer, fake: FakeProvider) -> FakeProvider:
    httpserver.expect_request(re.compile(".*"), method="POST").respond_with_handler(fake.handle)
    return fake


@pytest.fixture
def openai_fake(httpserver: HTTPServer) -> FakeProvider:
    return _serve(
        httpserver,
        FakeProvider(check_openai, re.compile(r"/v1/chat/completions"), openai_malformed),
    )


@pytest.fixture
def responses_fake(httpserver: HTTPServer) -> FakeProvider:
    return _serve(
        httpserver,
        FakeProvider(check_openai_responses, re.compile(r"/v1/responses"), openai_malformed),
    )


@pytest.fixture
def anthropic_fake(httpserver: HTTPServer) -> FakeProvider:
    return _serve(
        httpserver, FakeProvider(check_anthropic, re.compile(r"/v1/messages"), anthropic_malformed)
    )


@pytest.fixture
def gemini_fake(httpserver: HTTPServer) -> FakeProvider:
    path = re.compile(r"/v1beta/models/[\w.-]+:(generateContent|streamGenerateContent)")
    return _serve(httpserver, FakeProvider(check_gemini, path, gemini_malformed))


@pytest.fixture
async def openai_model(httpserver: HTTPServer) -> AsyncIterator[OpenAIChatModel]:
    model = OpenAIChatModel("gpt-4o", base_url=httpserver.url_for("/v1"), api_key=API_KEY)
    yield model
    await model.aclose()


@pytest.fixture
async def responses_model(httpserver: HTTPServer) -> AsyncIterator[OpenAIResponsesModel]:
    model = OpenAIResponsesModel("gpt-5", base_url=httpserver.url_for("/v1"), api_key=API_KEY)
    yield model
    await model.aclose()


@pytest.fixture
async def anthropic_model(httpserver: HTTPServer) -> AsyncIterator[AnthropicModel]:
    model = AnthropicModel("claude-sonnet-4-0", base_url=httpserver.url_for(""), api_key=API_KEY)
    yield model
    await model.aclose()


@pytest.fixture
async def gemini_model(httpserver: HTTPServer) -> AsyncIterator[GeminiModel]:
    model = GeminiModel("gemini-2.5-flash", base_url=httpserver.url_for(""), api_key=API_KEY)
    yield model
    await model.aclose()


@pytest.fixture(scope="session")
def httpserver_listen_address() -> tuple[str, int]:
    return ("127.0.0.1", 0)
