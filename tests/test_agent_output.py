"""Structured output: decoded into ``output_type``, corrected when invalid, failed at "decode"."""

from __future__ import annotations

import pytest
from agents import answered, scripted
from pydantic import BaseModel
from runners import Runner

from golem.messages import Message
from golem.results import RunError


class City(BaseModel):
    name: str
    population: int


CORRECTION = (
    "Your answer does not match the required output format: {problems}. "
    "Reply again with only a JSON value that matches the schema."
)


async def test_a_valid_answer_is_decoded_into_the_output_type(runner: Runner) -> None:
    agent, model = scripted(
        [Message.assistant('{"name": "Paris", "population": 2100000}')], output_type=City
    )

    result = await runner(agent, "biggest French city?")

    assert result.output == City(name="Paris", population=2_100_000)
    assert model.requests[0].output_schema == City.model_json_schema()


async def test_a_fenced_json_answer_is_accepted(runner: Runner) -> None:
    agent, _ = scripted(
        [Message.assistant('```json\n{"name": "Lyon", "population": 520000}\n```')],
        output_type=City,
    )

    result = await runner(agent, "go")

    assert result.output == City(name="Lyon", population=520_000)


async def test_text_output_sends_no_output_schema(runner: Runner) -> None:
    agent, model = scripted([Message.assistant("plain")])

    result = await runner(agent, "go")

    assert result.output == "plain"
    assert model.requests[0].output_schema is None


async def test_an_invalid_answer_gets_a_correction_round_saying_what_was_wrong(
    runner: Runner,
) -> None:
    agent, model = scripted(
        [
            Message.assistant('{"name": "Paris", "population": "lots"}'),
            Message.assistant('{"name": "Paris", "population": 2100000}'),
        ],
        output_type=City,
    )

    result = await runner(agent, "go")

    assert result.output == City(name="Paris", population=2_100_000)
    ids = (result.run_id, result.conversation_id)
    correction = Message.user(
        CORRECTION.format(
            problems="population: Input should be a valid integer, "
            "unable to parse string as an integer"
        )
    ).stamped(*ids)
    assert model.requests[1].messages[-1] == correction
    assert model.requests[1].output_schema == City.model_json_schema()
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    assert result.requests == 2


async def test_an_answer_that_is_not_json_is_corrected_too(runner: Runner) -> None:
    agent, model = scripted(
        [
            Message.assistant("Paris, of course!"),
            Message.assistant('{"name": "P", "population": 1}'),
        ],
        output_type=City,
    )

    await runner(agent, "go")

    correction = model.requests[1].messages[-1]
    assert correction.role == "user"
    assert correction.content.startswith(
        "Your answer does not match the required output format: answer: Invalid JSON"
    )


async def test_exhausted_output_retries_end_the_run_at_stage_decode(runner: Runner) -> None:
    agent, model = scripted(
        [Message.assistant('{"name": "Paris"}')] * 2 + [Message.assistant("never")],
        output_type=City,
        output_retries=1,
    )

    with pytest.raises(RunError) as caught:
        await runner(agent, "go")

    error = caught.value
    assert error.stage == "decode"
    assert "after 2 tries: population: Field required" in str(error)
    assert len(model.requests) == 2
    partial = error.partial
    assert partial is not None
    ids = (partial.run_id, partial.conversation_id)
    assert partial.messages == [
        m.stamped(*ids)
        for m in (
            Message.user("go"),
            answered(Message.assistant('{"name": "Paris"}')),
            Message.user(CORRECTION.format(problems="population: Field required")),
            answered(Message.assistant('{"name": "Paris"}')),
        )
    ]
    assert partial.requests == 2
