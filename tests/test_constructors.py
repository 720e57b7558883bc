"""One way to start a run: ``RunInput`` and ``Result`` are built by one constructor each
(``RunInput.of``, ``Result.of``), which every place in golem/ uses."""

from __future__ import annotations

import ast
from pathlib import Path

from golem import Message, Result, Usage
from golem.run_state import RunInput, RunState
from golem.usage import Spent

GOLEM = Path(__file__).resolve().parent.parent / "golem"
#: The type, and the one module allowed to call its class directly.
OWNERS = {"RunInput": "run_state.py", "Result": "results.py"}


def direct_constructions() -> list[str]:
    """Every ``RunInput(...)``, ``RunInput.model_construct(...)``, ``Result(...)`` (and
    ``replace`` of neither) outside the type's own module, as ``path:line``."""
    found = []
    for path in sorted(GOLEM.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else None
            if isinstance(func, ast.Attribute) and func.attr in (
                "model_construct",
                "model_validate",
            ):
                name = func.value.id if isinstance(func.value, ast.Name) else None
            if name in OWNERS and path.name != OWNERS[name]:
                found.append(f"{path.relative_to(GOLEM)}:{node.lineno}")
    return found


def test_run_inputs_and_results_are_built_only_by_their_constructors() -> None:
    assert direct_constructions() == []


def test_run_input_of_copies_what_it_is_given_and_writes_only_what_differs() -> None:
    history = [Message.user("hi")]
    standing: dict[str, object] = {}
    run = RunInput.of("go", history=history, run_id="r", standing={})
    history.append(Message.user("later"))
    assert run.history == [Message.user("hi")]
    assert run.standing == standing and run.approvals == {} and run.rules is None
    # Defaults are left out of the payload, as when the fields were left out by name.
    written = run.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    assert written == {
        "prompt": "go",
        "history": [{"role": "user", "content": "hi"}],
        "runId": "r",
        "standing": {},
    }
    assert written == RunInput(
        prompt="go", history=history[:1], run_id="r", standing={}
    ).model_dump(mode="json", by_alias=True, exclude_defaults=True)


def test_result_of_takes_ids_and_counts_from_the_run_and_its_answer_from_the_caller() -> None:
    state = RunState(run_id="r", conversation_id="c", agent="a", sub_runs=["s"])
    state.usage, state.requests, state.tool_calls = Usage(input_tokens=3), 2, 1
    result = Result.of(state, "done", [Message.user("hi")])
    assert result == Result(
        output="done",
        messages=[Message.user("hi")],
        usage=Usage(input_tokens=3),
        run_id="r",
        conversation_id="c",
        requests=2,
        tool_calls=1,
        agent="a",
        sub_runs=["s"],
    )
    state.sub_runs.append("later")
    assert result.sub_runs == ["s"]  # copied, not shared with the live state
    handed = Result.of(result, None, [], agent="b", sub_runs=["s", "t"], descendants=Spent())
    assert (handed.run_id, handed.agent, handed.sub_runs) == ("r", "b", ["s", "t"])
