"""Build a model from a ``"provider:model"`` string.

model = infer_model("openai:gpt-4o")
model = infer_model("openai-responses:gpt-5")       # the Responses API
"""

from __future__ import annotations

from collections.abc import Callable

from golem.models.anthropic import AnthropicModel
from golem.models.base import Model
from golem.models.gemini import GeminiModel
from golem.models.openai import OpenAIChatModel
from golem.models.openai_responses import OpenAIResponsesModel

_FACTORIES: dict[str, Callable[[str], Model]] = {
    "openai": OpenAIChatModel,
    "openai-responses": OpenAIResponsesModel,
    "anthropic": AnthropicModel,
    "gemini": GeminiModel,
    "google-gla": GeminiModel,
}
KNOWN_PREFIXES = tuple(_FACTORIES)


def infer_model(model: str | Model) -> Model:
    """Return ``model`` itself, or the adapter a ``"provider:name"`` string names."""
    if not isinstance(model, str):
        if isinstance(model, Model):
            return model
        raise TypeError(f"expected a model or a 'provider:name' string, got {type(model).__name__}")
    prefix, sep, name = model.partition(":")
    factory = _FACTORIES.get(prefix)
    if not sep or not name or factory is None:
        known = ", ".join(f"'{p}:'" for p in KNOWN_PREFIXES)
        raise ValueError(f"unknown model {model!r}: expected 'provider:name' with one of {known}")
    return factory(name)
