"""Models: the protocol, offline models, and provider adapters over httpx."""

from golem.models.base import (
    FinishReason,
    Model,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelRequest,
    ModelResponse,
    ModelResponseError,
    ModelSettings,
    StreamDelta,
    ToolDefinition,
)
from golem.models.function import FunctionModel, ScriptedModel

__all__ = [
    "FinishReason",
    "FunctionModel",
    "Model",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelRequest",
    "ModelResponse",
    "ModelResponseError",
    "ModelSettings",
    "ScriptedModel",
    "StreamDelta",
    "ToolDefinition",
]
