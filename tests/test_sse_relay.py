"""examples/sse_relay.py (golem serve's API mounted in an app of its own), served by uvicorn
on 127.0.0.1 against the dev server: its status codes and CORS through httpx, its page (a
retried model call, an approval answered on the page) and a bare EventSource in headless
Chromium."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from agents import FAST_RETRY, ask, call, scripted
from temporalio.client import Client
from temporalio.converter import ExternalStorage
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from uicheck import Page, free_port, snap
from waiting import eventually

from golem.agent import Agent
from golem.client import DurableAgent
from golem.messages import Message
from golem.models.base import ModelHTTPError, ModelResponse, StreamDelta, ToolDefinition
from golem.models.function import FunctionModel
from golem.storage import LocalDirectory
from golem.worker import GolemPlugin

sys.path.insert(0, str(Path(__file__).parents[1]))
from examples.refunds import agent as refunds
from examples.sse_relay import make_app

DEADLINE = 60.0
PAGE_ORIGIN = "http://localhost:{port}"  # the page's origin; the relay is http://127.0.0.1:PORT


@dataclass
class Relay:
    url: str
    port: int
    requests: Counter[tuple[str, str]] = field(default_factory=Counter)


@asynccontextmanager
async def relay_for(
    env: WorkflowEnvironment,
    agent: Agent[Any, Any],
    origins: Sequence[str] = (),
    client: Client | None = None,
) -> AsyncIterator[Relay]:
    """A worker for ``agent`` and the relay for it, on a free port; requests counted.
    ``client``: one whose own GolemPlugin serves ``agent`` (payload storage, say)."""
    port = free_port()
    relay = Relay(f"http://127.0.0.1:{port}", port)
    task_queue = f"relay-{uuid.uuid4().hex[:8]}"
    durable = DurableAgent(client or env.client, agent, task_queue=task_queue)
    app = make_app(durable, allow_origins=[o.format(port=port) for o in origins])

    async def counted(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            relay.requests[(scope["method"], scope["path"])] += 1
        await app(scope, receive, send)

    plugins = [] if client else [GolemPlugin(agent, heartbeat_timeout=timedelta(seconds=5))]
    config = uvicorn.Config(counted, host="127.0.0.1", port=port, log_config=None)
    server = uvicorn.Server(config)
    async with Worker(client or env.client, task_queue=task_queue, plugins=plugins):
        serving = asyncio.create_task(server.serve())
        try:
            await eventually(
                lambda: server.started, what="the relay to listen", timeout=DEADLINE, interval=0.01
            )
            yield relay
        finally:
            server.should_exit = True
            await serving


def echo_agent() -> Agent[Any, Any]:
    agent, _ = scripted([ask(call("c1", "echo", text="x")), Message.assistant("done")], name="echo")
    agent.tool(name="echo")(lambda text: text)
    return agent


def parse(body: str) -> list[dict[str, str]]:
    return [
        dict(line.split(": ", 1) for line in block.splitlines())
        for block in body.replace("\r\n", "\n").strip().split("\n\n")
    ]


async def ask_once(http: httpx.AsyncClient, text: str = "go") -> tuple[str, httpx.Response]:
    """A new conversation of the app's agent, and the answer to its first turn."""
    document = (await http.get("/golem/openapi.json")).json()
    schema = document["paths"]["/conversations"]["post"]["requestBody"]["content"]
    [agent] = schema["application/json"]["schema"]["properties"]["agent"]["enum"]
    conversation = (await http.post("/golem/conversations", json={"agent": agent})).json()["id"]
    sent = await http.post(f"/golem/conversations/{conversation}/messages", json={"text": text})
    return conversation, sent


async def test_the_relay_streams_a_turn_resumes_from_last_event_id_and_ends_with_204(
    temporal_env: WorkflowEnvironment,
) -> None:
    async with (
        relay_for(temporal_env, echo_agent()) as relay,
        httpx.AsyncClient(base_url=relay.url, timeout=DEADLINE) as http,
    ):
        conversation, sent = await ask_once(http)
        url = f"/golem/conversations/{conversation}/events"
        events = parse((await http.get(url)).text)
        rest = parse((await http.get(url, headers={"Last-Event-ID": events[2]["id"]})).text)
        past_the_end = await http.get(url, headers={"Last-Event-ID": events[-1]["id"]})
        page = await http.get("/")

    run_id = sent.json()["runId"]
    assert [e["event"] for e in events] == [
        "model_start",
        "tool_call_delta",
        "model_end",
        "tool_start",
        "tool_end",
        "model_start",
        "text_delta",
        "model_end",
        "result",
    ]
    assert json.loads(events[-1]["data"])["output"] == "done"
    assert json.loads(events[0]["data"])["run_id"] == run_id
    offsets = [int(e["id"].split(":")[1]) for e in events[:-1]]
    assert offsets == sorted(offsets) and {e["id"].split(":")[0] for e in events} == {run_id}
    assert events[-1]["id"] == f"{run_id}:end"
    assert rest == events[3:]
    assert (past_the_end.status_code, past_the_end.text) == (204, "")
    assert page.status_code == 200 and "A durable conversation, live" in page.text


async def test_bad_requests_get_a_status_and_a_reason_never_a_500(
    temporal_env: WorkflowEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    async with (
        relay_for(temporal_env, echo_agent()) as relay,
        httpx.AsyncClient(base_url=relay.url, timeout=DEADLINE) as http,
    ):
        conversation, sent = await ask_once(http)
        run_id = sent.json()["runId"]
        url = f"/golem/conversations/{conversation}/events"
        assert (await http.get(url)).status_code == 200  # the whole turn: it has ended
        messages = f"/golem/conversations/{conversation}/messages"
        unknown = await http.get("/golem/conversations/no-such-conversation/events")
        not_json = await http.post(messages, content=b"text=hi")
        no_text = await http.post(messages, json={"text": ""})
        past_the_end = await http.get(url, headers={"Last-Event-ID": f"{run_id}:999"})
        not_an_offset = await http.get(url, headers={"Last-Event-ID": "soon"})
        not_a_turn = await http.get(url, headers={"Last-Event-ID": "other-run:3"})

    assert (unknown.status_code, unknown.json()) == (
        404,
        {"error": "no conversation 'no-such-conversation'", "code": "not_found"},
    )
    assert not_json.status_code == 400 and "not JSON" in not_json.json()["error"]
    assert no_text.status_code == 400 and "text" in no_text.json()["error"]
    assert past_the_end.status_code == 400
    assert past_the_end.json()["error"] == (
        f"Last-Event-ID {run_id}:999 is past the end of run {run_id}'s stream"
    )
    assert not_an_offset.status_code == 400 and "'soon'" in not_an_offset.json()["error"]
    assert not_a_turn.status_code == 404
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_a_prompt_too_large_for_a_run_without_storage_is_413_with_the_reason(
    temporal_env: WorkflowEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    async with (
        relay_for(temporal_env, echo_agent()) as relay,
        httpx.AsyncClient(base_url=relay.url, timeout=DEADLINE) as http,
    ):
        conversation, answer = await ask_once(http, "x" * 3_000_000)
        turns = await DurableAgent(temporal_env.client, "echo").conversation(conversation)
        runs = await turns.runs()

    assert answer.status_code == 413
    reason = answer.json()["error"]
    assert "\n" not in reason
    assert re.fullmatch(
        r"the run's input is 300\d{4} bytes, over the 1934464-byte limit of one Temporal "
        r"payload; .* or turn on external storage \(GolemPlugin\(external_storage=\.\.\.\) or "
        r"GOLEM_STORAGE_DIR\)",
        reason,
    ), reason
    assert runs == []  # no turn was started
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_with_payload_storage_on_a_large_prompt_is_accepted(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    agent = echo_agent()
    config = temporal_env.client.config()
    storage = ExternalStorage(drivers=[LocalDirectory(tmp_path)])
    config["plugins"] = [GolemPlugin(agent, external_storage=storage)]
    async with (
        relay_for(temporal_env, agent, client=Client(**config)) as relay,
        httpx.AsyncClient(base_url=relay.url, timeout=DEADLINE) as http,
    ):
        conversation, sent = await ask_once(http, "x" * 3_000_000)
        url = f"/golem/conversations/{conversation}/events"
        events = parse((await http.get(url)).text)

    assert sent.status_code == 202
    assert json.loads(events[-1]["data"])["output"] == "done"


async def test_cors_answers_preflights_for_the_allowed_origins_only(
    temporal_env: WorkflowEnvironment,
) -> None:
    allowed = "https://app.example"
    preflight = {"Access-Control-Request-Method": "POST"}
    async with (
        relay_for(temporal_env, echo_agent(), origins=[allowed]) as relay,
        httpx.AsyncClient(base_url=relay.url, timeout=DEADLINE) as http,
    ):
        url = "/golem/conversations"
        ok = await http.options(url, headers={"Origin": allowed, **preflight})
        refused = await http.options(url, headers={"Origin": "https://evil.example", **preflight})
        started = await http.post(url, json={"agent": "echo"}, headers={"Origin": allowed})

    assert ok.status_code == 200
    assert ok.headers["access-control-allow-origin"] == allowed
    assert "POST" in ok.headers["access-control-allow-methods"]
    assert refused.status_code == 400
    assert "access-control-allow-origin" not in refused.headers
    assert started.headers["access-control-allow-origin"] == allowed


def retrying_agent() -> Agent[Any, Any]:
    """Its first model call streams a few words, then fails with a 503; the retry answers."""
    attempts: list[int] = []
    answer = "Sunny in Paris."

    async def stream(
        messages: list[Message], tools: list[ToolDefinition]
    ) -> AsyncIterator[StreamDelta | ModelResponse]:
        attempts.append(1)
        if len(attempts) == 1:
            yield StreamDelta(kind="text", text="Let me thi")
            raise ModelHTTPError(503, "overloaded", provider="test")
        for word in answer.split(" "):
            yield StreamDelta(kind="text", text=word + " ")
        yield ModelResponse(message=Message.assistant(answer))

    model = FunctionModel(lambda m, t: Message.assistant(answer), stream_fn=stream)
    return Agent(model, name="retrying", model_retry=FAST_RETRY)


def bare_eventsource(url: str) -> str:
    """JS: an EventSource on ``url`` that never calls close(); what it saw once it stopped."""
    return f"""new Promise((resolve) => {{
  const seen = [];
  const es = new EventSource({json.dumps(url)});
  es.addEventListener('result', () => seen.push('result'));
  es.onerror = () => {{
    seen.push(es.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting');
    if (es.readyState === EventSource.CLOSED) resolve(seen);
  }};
  setTimeout(() => resolve([...seen, 'still open after 30 s']), 30000);
}})"""


async def test_a_page_on_another_origin_shows_the_run_with_its_restart_and_stops_at_result(
    temporal_env: WorkflowEnvironment,
) -> None:
    async with relay_for(temporal_env, retrying_agent(), origins=[PAGE_ORIGIN]) as relay:
        page = f"{PAGE_ORIGIN.format(port=relay.port)}/?relay={relay.url}"
        seen = await snap(
            "sse_relay_page",
            [Page("page", page, wait=["Ask something"], clicks=[("Ask", ["completed"])])],
        )
        shown = seen["page_1"]
        assert not shown.missing, shown.text
        conversation = shown.url.split("conversation=")[1]
        events = f"/golem/conversations/{conversation}/events"
        # The same turn shown again (?conversation=), then an EventSource that never calls close().
        bare = await snap(
            "sse_relay_bare_eventsource",
            [
                Page(
                    "bare",
                    f"{page}&conversation={conversation}",
                    until="document.body.dataset.state === 'completed'",
                    evaluate=bare_eventsource(relay.url + events),
                )
            ],
        )

    assert "Let me thi" in shown.text  # the abandoned partial answer, struck out
    assert "↻ the model call was retried (attempt 2): its answer restarts" in shown.text
    assert shown.text.index("Let me thi") < shown.text.index("↻") < shown.text.index("Sunny in")
    assert "Sunny in Paris." in shown.text.split("↻")[1]
    assert shown.console == []
    assert "Sunny in Paris." in bare["bare"].text.split("↻")[1]
    assert bare["bare"].value == ["result", "reconnecting", "closed"]
    # The page: one stream, closed on result. The bare EventSource: one, then one 204.
    assert relay.requests[("GET", events)] == 1 + 1 + 2


async def test_the_page_answers_an_approval_and_the_run_goes_on_live(
    temporal_env: WorkflowEnvironment,
) -> None:
    async with relay_for(temporal_env, refunds) as relay:
        seen = await snap(
            "sse_relay_approval",
            [
                Page(
                    "ask",
                    f"{relay.url}/",
                    wait=["Ask something"],
                    evaluate="document.querySelector('input[name=prompt]').value = "
                    "'Refund order 42'",
                    clicks=[
                        ("Ask", ['refund({"order": 42, "amount": 150}) waits for you']),
                        ("Approve", ["completed"]),
                    ],
                )
            ],
        )

    waiting, done = seen["ask_1"], seen["ask_2"]
    assert not waiting.missing and "waiting for you" in waiting.text, waiting.text
    assert not done.missing, done.text
    assert "← order 42 refunded 150" in done.text  # the tool ran, streamed after the decision
    assert "Done: order 42 refunded 150." in done.text
    assert done.console == []
