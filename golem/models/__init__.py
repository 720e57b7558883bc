"""Models: the protocol, offline models, and provider adapters over httpx."""

from golem.errors import (
    FallbackError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
)
from golem.models.anthropic import AnthropicModel
from golem.models.base import (
    FinishReason,
    Model,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StreamDelta,
    ToolDefinition,
)
from golem.models.fallback import FallbackModel
from golem.models.function import FunctionModel, ScriptedModel
from golem.models.gemini import GeminiModel
from golem.models.infer import infer_model
from golem.models.openai import OpenAIChatModel
from golem.models.openai_responses import OpenAIResponsesModel

__all__ = [
    "AnthropicModel",
    "FallbackError",
    "FallbackModel",
    "FinishReason",
    "FunctionModel",
    "GeminiModel",
    "Model",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelRequest",
    "ModelResponse",
    "ModelResponseError",
    "ModelSettings",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "ScriptedModel",
    "StreamDelta",
    "ToolDefinition",
    "infer_model",
]
