"""Encrypted payloads on the real dev server: nothing readable in history, replay, the
codec server the Temporal UI calls, key rotation, and a wrong key failing at once."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from hypothesis import given
from hypothesis import strategies as st
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker
from waiting import eventually

from golem.agent import Agent
from golem.cli import run_command
from golem.client import AGENT, CONVERSATION_ID, DurableAgent, DurableConversation, fetch_run
from golem.codec_server import codec_app
from golem.messages import Message, ToolCall
from golem.models import FunctionModel
from golem.results import RunError
from golem.wire import transcript as transcript_module
from golem.worker import GolemPlugin
from golem.worker.codec import ENCODING, KEY_ID, DecryptionError, EncryptionCodec
from golem.workflows.conversation import ConversationInput, ConversationWorkflow

PROMPT = "PROMPT-7f3a: my card number is 4111"
ARG = "ARG-51c9-lisbon"
RESULT = "RESULT-c0de-sunny"
ERROR = "ERROR-9bd2-leaked"
SECRETS = (PROMPT.encode(), ARG.encode(), RESULT.encode())
KEY_A = bytes(range(32))
KEY_B = bytes(range(1, 33))


def secret_agent(name: str = "vault", failing: bool = False) -> Agent[Any, Any]:
    """Asks ``weather`` with a secret argument (and ``explode``, which fails), then answers."""

    def answer(messages: list[Message], tools: Any) -> Message:
        tool_messages = [m for m in messages if m.role == "tool"]
        if not tool_messages:
            calls = [ToolCall(id="c1", name="weather", args=json.dumps({"city": ARG}))]
            if failing:
                calls.append(ToolCall(id="c2", name="explode", args="{}"))
            return Message.assistant("", calls)
        return Message.assistant(f"it is {tool_messages[0].content}")

    agent = Agent(FunctionModel(answer), name=name)

    @agent.tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"{RESULT} in {city}"

    @agent.tool(retry_attempts=1)
    def explode() -> str:
        """Always fails."""
        raise ValueError(ERROR)

    return agent


async def connect(env: WorkflowEnvironment, plugin: GolemPlugin) -> Client:
    config = env.client.service_client.config
    return await Client.connect(
        config.target_host, namespace=env.client.namespace, plugins=[plugin]
    )


@asynccontextmanager
async def encrypted(
    env: WorkflowEnvironment, agent: Agent[Any, Any], key: Any = KEY_A
) -> AsyncIterator[tuple[Client, str]]:
    client = await connect(env, GolemPlugin(agent, encryption_key=key))
    task_queue = f"enc-{uuid.uuid4().hex[:12]}"
    async with Worker(client, task_queue=task_queue):
        yield client, task_queue


async def raw_history(client: Client, run_id: str) -> bytes:
    """The history exactly as the server stores it: protobuf bytes, payloads undecoded."""
    events = [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]
    return b"".join(e.SerializeToString() for e in events)


async def started_input(client: Client, run_id: str) -> dict[str, bytes]:
    """The metadata of a run's stored input payload."""
    async for event in client.get_workflow_handle(run_id).fetch_history_events():
        return dict(event.workflow_execution_started_event_attributes.input.payloads[0].metadata)
    raise AssertionError(f"run {run_id} has no history")


async def test_encrypted_run_leaves_no_prompt_argument_result_or_error_in_history(
    temporal_env: WorkflowEnvironment,
) -> None:
    agent = secret_agent()
    async with encrypted(temporal_env, agent) as (client, tq):
        result = await DurableAgent(client, agent, task_queue=tq).run(PROMPT)
    assert result.output == f"it is {RESULT} in {ARG}"

    raw = await raw_history(temporal_env.client, result.run_id)
    found = [s.decode() for s in SECRETS if s in raw]
    assert found == [], f"plaintext in the stored history: {found}"
    assert ENCODING in raw and b"k-" in raw  # payloads name their key id
    print(f"\nraw history: {len(raw)} bytes, none of {[s.decode() for s in SECRETS]} in it")

    # What stays visible by design: the ids and the agent name (search attributes).
    description = await temporal_env.client.get_workflow_handle(result.run_id).describe()
    assert description.typed_search_attributes.get(AGENT) == agent.name
    assert description.typed_search_attributes.get(CONVERSATION_ID) == result.conversation_id
    # The static summary is a payload too: sealed for the server, readable with the key.
    stored = description.raw_description.execution_config.user_metadata.summary
    assert stored.metadata["encoding"] == ENCODING
    keyed = await client.get_workflow_handle(result.run_id).describe()
    assert await keyed.static_summary() == f"{agent.name}: {PROMPT}"
    record = await fetch_run(client, result.run_id)
    assert record.status == "completed" and record.messages[0].content == PROMPT


async def test_a_failed_encrypted_run_keeps_its_error_message_sealed(
    temporal_env: WorkflowEnvironment,
) -> None:
    agent = secret_agent("boom", failing=True)
    async with encrypted(temporal_env, agent) as (client, tq):
        with pytest.raises(RunError) as failure:
            await DurableAgent(client, agent, task_queue=tq).run(PROMPT)
    assert failure.value.stage == "tool" and ERROR in failure.value.detail  # read with the key
    assert failure.value.partial is not None
    raw = await raw_history(temporal_env.client, failure.value.partial.run_id)
    assert b"GolemRunError" in raw  # the failure is there, its message and trace are not
    assert [s for s in (*SECRETS, ERROR.encode()) if s in raw] == []


async def test_a_cancelled_encrypted_run_seals_its_memo_and_resumes(
    temporal_env: WorkflowEnvironment,
) -> None:
    started = asyncio.Event()
    calls = iter(
        [
            Message.assistant(
                "", [ToolCall(id="a", name="weather", args=json.dumps({"city": ARG}))]
            ),
            Message.assistant("", [ToolCall(id="b", name="wait_forever", args="{}")]),
            Message.assistant("resumed"),
        ]
    )
    agent = Agent(FunctionModel(lambda messages, tools: next(calls)), name="memo")

    @agent.tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"{RESULT} in {city}"

    @agent.tool
    async def wait_forever() -> str:
        """Never returns."""
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    async with encrypted(temporal_env, agent) as (client, tq):
        durable = DurableAgent(client, agent, task_queue=tq)
        run = await durable.start(PROMPT)
        await started.wait()
        await run.cancel()
        with pytest.raises(RunError) as failure:
            await run.result()
        resumed = await durable.resume(failure.value)  # the evidence read back through the key
    assert failure.value.stage == "canceled" and failure.value.partial is not None
    assert resumed.output == "resumed"
    memo = (await temporal_env.client.get_workflow_handle(run.run_id).describe()).raw_description
    assert memo.workflow_execution_info.memo.fields["golemFailure"].metadata["encoding"] == ENCODING
    raw = await raw_history(temporal_env.client, run.run_id)
    assert [s for s in SECRETS if s in raw] == []


async def test_the_same_run_unencrypted_shows_the_secrets_so_the_check_can_fail(
    temporal_env: WorkflowEnvironment,
) -> None:
    agent = secret_agent()
    client = temporal_env.client
    task_queue = f"plain-{uuid.uuid4().hex[:12]}"
    async with Worker(client, task_queue=task_queue, plugins=[GolemPlugin(agent)]):
        result = await DurableAgent(client, agent, task_queue=task_queue).run(PROMPT)
    raw = await raw_history(client, result.run_id)
    assert [s for s in SECRETS if s in raw] == list(SECRETS)


async def test_encrypted_history_replays_with_the_key(temporal_env: WorkflowEnvironment) -> None:
    agent = secret_agent()
    async with encrypted(temporal_env, agent) as (client, tq):
        result = await DurableAgent(client, agent, task_queue=tq).run(PROMPT)
    history = await client.get_workflow_handle(result.run_id).fetch_history()
    replayer = Replayer(workflows=[], plugins=[GolemPlugin(agent, encryption_key=KEY_A)])
    replay = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert replay.replay_failure is None, replay.replay_failure


async def test_a_worker_with_the_wrong_key_fails_the_run_at_once_naming_the_key(
    temporal_env: WorkflowEnvironment,
) -> None:
    agent = secret_agent("wrongkey")
    starter = await connect(temporal_env, GolemPlugin(agent, encryption_key=KEY_A))
    async with encrypted(temporal_env, agent, key=KEY_B) as (worker_client, tq):
        run = await DurableAgent(starter, agent, task_queue=tq).start(PROMPT)
        with pytest.raises(WorkflowFailureError) as failure:
            await worker_client.get_workflow_handle(run.run_id).result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "GolemDecryptionError"
    key_a, key_b = EncryptionCodec.key_fingerprint(KEY_A), EncryptionCodec.key_fingerprint(KEY_B)
    assert cause.message == (
        f"cannot decrypt: key id {key_a!r} is not among this client's keys ({key_b}); "
        "add that key to GOLEM_ENCRYPTION_KEY or GolemPlugin(encryption_key=...)"
    )
    events = [
        e async for e in temporal_env.client.get_workflow_handle(run.run_id).fetch_history_events()
    ]
    kinds = [e.event_type for e in events]
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in kinds  # failed, not retried
    assert kinds[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
    # The starter, holding only key A, is told plainly which key it lacks.
    with pytest.raises(DecryptionError, match=f"key id {key_b!r} is not among this client's"):
        await starter.get_workflow_handle(run.run_id).result()
    # Read through golem, the run fails at stage codec (or the failure itself is sealed).
    with pytest.raises(DecryptionError, match="cannot decrypt"):
        await (await DurableAgent(starter, agent, task_queue=tq).attach(run.run_id)).result()


async def test_a_worker_without_any_key_fails_the_run_at_stage_codec_naming_the_key_id(
    temporal_env: WorkflowEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    agent = secret_agent("nokey")
    key_id = f"sealed-{uuid.uuid4().hex[:6]}"
    spec = f"{key_id}:{base64.b64encode(KEY_A).decode()}"
    starter = await connect(temporal_env, GolemPlugin(agent, encryption_key=spec))
    task_queue = f"nokey-{uuid.uuid4().hex[:8]}"
    worker_client = await connect(temporal_env, GolemPlugin(agent))
    with caplog.at_level(logging.ERROR, logger="golem.worker"):
        async with Worker(worker_client, task_queue=task_queue):
            with pytest.raises(RunError) as failure:
                await asyncio.wait_for(
                    DurableAgent(starter, agent, task_queue=task_queue).run(PROMPT), 60
                )
    assert failure.value.stage == "codec"
    assert f"sealed with encryption key id {key_id!r}" in failure.value.detail
    assert "set GOLEM_ENCRYPTION_KEY" in failure.value.detail
    logged = [r.getMessage() for r in caplog.records if key_id in r.getMessage()]
    assert len(logged) == 1 and "set GOLEM_ENCRYPTION_KEY" in logged[0]  # once, on the worker


async def test_golem_run_names_the_codec_stage_and_the_key_a_worker_lacks(
    temporal_env: WorkflowEnvironment,
) -> None:
    """The CLI's `golem run` against a worker without the key, then with a key of its own
    that is not the worker's (whose failure it cannot read)."""
    agent = secret_agent("clinokey")
    client_key = f"cli:{base64.b64encode(KEY_A).decode()}"
    worker_key = f"wk:{base64.b64encode(KEY_B).decode()}"
    address = temporal_env.client.service_client.config.target_host
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "GOLEM_ENCRYPTION_KEY": client_key}
    answers = []
    for key in (None, worker_key):
        task_queue = f"clikey-{uuid.uuid4().hex[:8]}"
        plugin = GolemPlugin(agent, encryption_key=key) if key else GolemPlugin(agent)
        async with Worker(await connect(temporal_env, plugin), task_queue=task_queue):
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "golem.cli", "run", "--agent", agent.name,
                "--task-queue", task_queue, PROMPT,
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            async with asyncio.timeout(120):
                _, err = await proc.communicate()
        answers.append((proc.returncode, err.decode()))
    (code, no_key), (code_wrong, wrong_key) = answers
    assert code == 1 and "run failed at stage codec" in no_key
    assert "sealed with encryption key id 'cli'" in no_key and "GOLEM_ENCRYPTION_KEY" in no_key
    assert "Python SDK bug" not in no_key
    assert code_wrong == 1
    assert "cannot decrypt: key id 'wk' is not among this client's keys (cli)" in wrong_key
    assert "Encoded failure" not in wrong_key


async def test_a_rotated_key_reads_old_runs_and_seals_new_ones_with_the_new_id(
    temporal_env: WorkflowEnvironment,
) -> None:
    agent = secret_agent("rotate")
    old_spec = f"old:{base64.b64encode(KEY_A).decode()}"
    rotated = f"new:{base64.urlsafe_b64encode(KEY_B).decode()},{old_spec}"
    async with encrypted(temporal_env, agent, key=old_spec) as (client, tq):
        old = await DurableAgent(client, agent, task_queue=tq).run(PROMPT)
    async with encrypted(temporal_env, agent, key=rotated) as (client, tq):
        assert (await fetch_run(client, old.run_id)).output == old.output
        new = await DurableAgent(client, agent, task_queue=tq).run(PROMPT)
    assert await started_input(temporal_env.client, old.run_id) == {
        "encoding": ENCODING,
        KEY_ID: b"old",
    }
    assert await started_input(temporal_env.client, new.run_id) == {
        "encoding": ENCODING,
        KEY_ID: b"new",
    }


async def test_codec_server_decodes_what_the_ui_fetches(temporal_env: WorkflowEnvironment) -> None:
    agent = secret_agent("ui")
    async with encrypted(temporal_env, agent) as (client, tq):
        result = await DurableAgent(client, agent, task_queue=tq).run(PROMPT)
    events = [
        e
        async for e in temporal_env.client.get_workflow_handle(result.run_id).fetch_history_events()
    ]
    sealed = events[0].workflow_execution_started_event_attributes.input.payloads[0]
    assert sealed.metadata["encoding"] == ENCODING
    # The UI posts the payloads in protobuf JSON form (bytes as base64), with these headers.
    body = json_format.MessageToJson(Payloads(payloads=[sealed]))
    app = codec_app(EncryptionCodec.parse(KEY_A), token="s3cret")
    transport = httpx.ASGITransport(app=app)
    headers = {
        "Content-Type": "application/json",
        "X-Namespace": "default",
        "Origin": "http://localhost:8233",
    }
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8081") as http:
        preflight = await http.options(
            "/decode",
            headers={
                "Origin": "http://localhost:8233",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,x-namespace,authorization",
            },
        )
        refused = await http.post("/decode", content=body, headers=headers)
        decoded = await http.post(
            "/decode", content=body, headers={**headers, "Authorization": "Bearer s3cret"}
        )
        encoded = await http.post(
            "/encode",
            content=decoded.content,
            headers={**headers, "Authorization": "Bearer s3cret"},
        )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "http://localhost:8233"
    assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
    assert refused.status_code == 401
    assert decoded.status_code == 200
    assert decoded.headers["access-control-allow-origin"] == "http://localhost:8233"
    plain = json_format.Parse(decoded.content, Payloads()).payloads[0]
    assert plain.metadata["encoding"] == b"json/plain"
    assert json.loads(plain.data)["run"]["prompt"] == PROMPT
    assert (
        json_format.Parse(encoded.content, Payloads()).payloads[0].metadata["encoding"] == ENCODING
    )


async def test_codec_server_names_a_key_it_does_not_hold() -> None:
    sealed = EncryptionCodec({"other": KEY_B}).encrypt(Payload(data=b"x"))
    app = codec_app(EncryptionCodec.parse(KEY_A))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as http:
        answer = await http.post(
            "/decode", content=json_format.MessageToJson(Payloads(payloads=[sealed]))
        )
        garbage = await http.post("/decode", content=b"not json")
    assert answer.status_code == 400 and "key id 'other'" in answer.json()["error"]
    assert garbage.status_code == 400 and "protobuf JSON" in garbage.json()["error"]


async def test_golem_codec_server_serves_the_ui_over_http_on_loopback() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    key = f"ui:{base64.b64encode(KEY_A).decode()}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "GOLEM_ENCRYPTION_KEY": key}
    env["GOLEM_CODEC_TOKEN"] = "t0ken"
    server = subprocess.Popen(
        [sys.executable, "-m", "golem.cli", "codec-server", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    sealed = EncryptionCodec.parse(key).encrypt(Payload(metadata={"encoding": b"json/plain"}))
    body = json_format.MessageToJson(Payloads(payloads=[sealed]))
    try:
        assert server.stdout is not None
        banner = server.stdout.readline().decode()
        assert (
            f"127.0.0.1:{port}" in banner and "keys ui" in banner and "auth: bearer token" in banner
        )
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:

            async def decoded() -> httpx.Response | None:
                try:
                    return await http.post(
                        "/decode", content=body, headers={"Authorization": "Bearer t0ken"}
                    )
                except httpx.ConnectError:
                    return None  # uvicorn does not listen yet

            answer = await eventually(decoded, what="the codec server to answer", timeout=30)
        assert answer.status_code == 200
        decoded = json_format.Parse(answer.content, Payloads()).payloads[0]
        assert decoded.metadata["encoding"] == b"json/plain"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_golem_codec_server_without_a_key_says_which_variable_to_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GOLEM_ENCRYPTION_KEY", raising=False)
    assert run_command(["codec-server"]) == 2
    assert "set GOLEM_ENCRYPTION_KEY" in capsys.readouterr().err


@given(
    data=st.binary(max_size=4096),
    metadata=st.dictionaries(st.text(min_size=1, max_size=8), st.binary(max_size=16), max_size=3),
)
def test_decrypt_inverts_encrypt_for_any_payload(data: bytes, metadata: dict[str, bytes]) -> None:
    codec = EncryptionCodec.parse(KEY_A)
    payload = Payload(metadata=metadata, data=data)
    sealed = codec.encrypt(payload)
    assert len(data) < 16 or data not in sealed.data  # shorter strings may match by chance
    assert codec.decrypt(sealed) == payload


def test_a_relabelled_or_altered_payload_fails_to_decrypt() -> None:
    both = EncryptionCodec({"a": KEY_A, "b": KEY_B})
    sealed = both.encrypt(Payload(data=b"secret"))
    relabelled = Payload(metadata={**sealed.metadata, KEY_ID: b"b"}, data=sealed.data)
    altered = Payload(metadata=sealed.metadata, data=sealed.data[:-1] + b"\x00")
    for bad in (relabelled, altered):
        with pytest.raises(DecryptionError, match="failed to decrypt"):
            both.decrypt(bad)
    assert both.decrypt(Payload(data=b"plain")) == Payload(data=b"plain")  # pre-encryption


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "no key given"),
        (
            "k1:" + base64.b64encode(b"short").decode(),
            "'k1' is 5 bytes once base64-decoded, not 32",
        ),
        ("garbage", r"is 5 bytes .*; expected id:base64key\[,id:base64key\.\.\.\], each key 32"),
        ("k1:not*base64", "not valid base64"),
    ],
)
def test_bad_keys_are_refused_naming_the_problem(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EncryptionCodec.parse(spec)


async def test_encryption_on_the_worker_alone_is_refused(temporal_env: WorkflowEnvironment) -> None:
    plugin = GolemPlugin(secret_agent(), encryption_key=KEY_A)
    with pytest.raises(ValueError, match="must be on the Client"):
        Worker(temporal_env.client, task_queue="never", plugins=[plugin])


def test_env_key_turns_encryption_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOLEM_ENCRYPTION_KEY", f"env:{base64.b64encode(KEY_A).decode()}")
    codec = GolemPlugin(secret_agent()).converter.payload_codec
    assert isinstance(codec, EncryptionCodec) and codec.key_id == "env"
    monkeypatch.delenv("GOLEM_ENCRYPTION_KEY")
    assert GolemPlugin(secret_agent()).converter.payload_codec is None


async def test_an_encrypted_conversation_crosses_continue_as_new_by_reference_sealed(
    temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its earlier workflow runs are read from their (sealed) histories with the key: by a
    fresh worker and by the client, and the plaintext is nowhere in the server's copy."""
    monkeypatch.setattr(transcript_module, "CARRY_BYTES", 0)  # every switch by reference
    agent = secret_agent()
    client = await connect(temporal_env, GolemPlugin(agent, encryption_key=KEY_A))
    tq = f"enc-{uuid.uuid4().hex[:12]}"
    async with Worker(client, task_queue=tq):
        handle = await client.start_workflow(
            ConversationWorkflow.run,
            ConversationInput(agent=agent.name, turns_per_run=1),
            id=f"enc-conv-{uuid.uuid4().hex[:8]}",
            task_queue=tq,
        )
        conv = DurableConversation(DurableAgent(client, agent, task_queue=tq), handle)
        first = await conv.send(PROMPT)
    fresh = await connect(temporal_env, GolemPlugin(agent, encryption_key=KEY_A))
    async with Worker(fresh, task_queue=tq):  # its cache is empty: it reads sealed histories
        second = await conv.send(PROMPT)
    record = await fetch_run(client, second.run_id)  # no worker: its base from sealed history
    assert record.messages == second.messages
    assert second.messages[: len(first.messages)] == first.messages
    assert await conv.runs() == [first.run_id, second.run_id]
    server = temporal_env.client
    executions = [e async for e in server.list_workflows(f"WorkflowId = '{handle.id}'")]
    raw = b"".join(
        [
            event.SerializeToString()
            for execution in executions
            async for event in server.get_workflow_handle(
                handle.id, run_id=execution.run_id
            ).fetch_history_events()
        ]
    )
    assert len(executions) >= 2
    assert [s.decode() for s in SECRETS if s in raw] == []
