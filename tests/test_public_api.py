"""The public surface: the names DESIGN.md promises, the errors in one module, 0.2.0's paths."""

from __future__ import annotations

import importlib

import pytest

import golem
import golem.errors
import golem.models

#: DESIGN.md's Public API, module by module.
DESIGNED = {
    "golem": [
        "Message", "ToolCall", "Part", "ThinkingBlock", "Usage", "dump_messages",
        "load_messages", "normalize_history", "sanitize_history", "HistoryRepair",
        "SanitizeReport", "UnsafePart", "INTERRUPTED_RESULT", "trim_history", "budget_history",
        "new_id", "Agent", "RunContext", "Result", "RunError", "PartialResult", "ToolFailed",
        "Canceled", "Approve", "Deny", "ApprovalPolicy", "Rule",
    ],
    "golem.models": [
        "FunctionModel", "ScriptedModel", "ModelRequest", "ModelResponse", "StreamDelta",
        "ToolDefinition", "ModelError", "ModelHTTPError", "OpenAIChatModel", "AnthropicModel",
        "GeminiModel", "infer_model", "FallbackModel",
    ],
    "golem.worker": ["GolemPlugin"],
    "golem.client": ["DurableAgent"],
    "golem.mcp": ["MCPServer"],
    "golem.storage": ["LocalDirectory"],
}  # fmt: skip

#: Where 0.2.0 defined the errors that now live in golem.errors.
RELEASED_PATHS = {
    "golem.results": ["RunError", "PartialResult", "Stage", "STAGES"],
    "golem.tools": ["ToolFailed", "ModelRetry", "Canceled"],
    "golem.models.base": [
        "ModelError", "ModelHTTPError", "ModelConnectionError", "ModelResponseError",
    ],
    "golem.models.fallback": ["FallbackError"],
    "golem.models": [
        "ModelError", "ModelHTTPError", "ModelConnectionError", "ModelResponseError",
        "FallbackError",
    ],
    "golem.client": ["UnknownAgentError", "RunIdInUseError", "ConversationClosedError"],
}  # fmt: skip

EXCEPTIONS = [n for n in golem.errors.__all__ if isinstance(getattr(golem.errors, n), type)]


@pytest.mark.parametrize("module", sorted(DESIGNED))
def test_every_designed_name_is_exported_where_the_design_says(module: str) -> None:
    exported = importlib.import_module(module)
    missing = [n for n in DESIGNED[module] if n not in exported.__all__]
    assert missing == []
    for name in DESIGNED[module]:
        getattr(exported, name)


def test_golem_reexports_every_error_and_golem_models_the_model_errors() -> None:
    assert [n for n in EXCEPTIONS if n not in golem.__all__] == []
    for name in EXCEPTIONS:
        assert getattr(golem, name) is getattr(golem.errors, name)
    model_errors = [
        n for n in EXCEPTIONS if n.endswith("Error") and ("Model" in n or "Fallback" in n)
    ]
    assert model_errors == [n for n in model_errors if n in golem.models.__all__]


@pytest.mark.parametrize("module", sorted(RELEASED_PATHS))
def test_the_released_paths_name_the_very_same_classes(module: str) -> None:
    released = importlib.import_module(module)
    for name in RELEASED_PATHS[module]:
        assert getattr(released, name) is getattr(golem.errors, name), name


def test_the_errors_are_defined_in_golem_errors_but_the_history_layers_own() -> None:
    homes = {n: getattr(golem.errors, n).__module__ for n in EXCEPTIONS}
    elsewhere = {n: m for n, m in homes.items() if m != "golem.errors"}
    # Below golem.errors (which imports the messages for PartialResult): re-exported.
    assert elsewhere == {
        "HistoryError": "golem.messages",
        "HistoryProcessorError": "golem.history.processors",
    }


def test_error_names_are_unchanged_for_they_are_application_error_types() -> None:
    # A durable failure carries type(exc).__name__; histories of 0.2.0 hold these (and
    # TurnNotTaken, 0.3.0's, raised by the client only).
    assert sorted(EXCEPTIONS) == [
        "Canceled", "ConversationClosedError", "FallbackError", "HistoryError",
        "HistoryProcessorError", "ModelConnectionError", "ModelError", "ModelHTTPError",
        "ModelResponseError", "ModelRetry", "PartialResult", "RunError", "RunIdInUseError",
        "ToolFailed", "TurnNotTaken", "UnknownAgentError", "WorkflowTaskFailing",
    ]  # fmt: skip
    assert all(getattr(golem.errors, n).__name__ == n for n in EXCEPTIONS)
