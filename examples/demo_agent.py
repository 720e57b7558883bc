"""The demo's agent: a travel helper with a weather tool.

Offline by default (a small deterministic model); with OPENAI_API_KEY, ANTHROPIC_API_KEY or
GEMINI_API_KEY set, the matching real provider answers instead. With GOLEM_DEMO_CRASH_FILE
set and armed (``<file>.armed`` exists), the next weather lookup writes that file and hangs,
so the demo can kill its worker mid-tool and show a second worker finishing the run.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from golem import Message, ToolCall
from golem.agent import Agent
from golem.history.processors import trim_history
from golem.models import FunctionModel, Model

FORECASTS = {"paris": "sunny, 21°C", "oslo": "snow, -4°C", "lisbon": "clear, 18°C"}


def offline_model() -> FunctionModel:
    """Asks for the weather of every city the newest prompt names, then summarizes."""

    def answer(messages: list[Message], tools: Any) -> Message:
        prompt_at = max(i for i, m in enumerate(messages) if m.role == "user")
        prompt = messages[prompt_at].content.lower()
        results = [m for m in messages[prompt_at:] if m.role == "tool"]
        cities = [c for c in FORECASTS if c in prompt]
        if cities and not results:
            return Message.assistant(
                "",
                [
                    ToolCall(id=f"wx-{prompt_at}-{c}", name="weather", args=json.dumps({"city": c}))
                    for c in cities
                ],
            )
        if results:
            facts = "; ".join(
                f"{m.tool_call_id.split('-')[-1].title()}: {m.content}" for m in results
            )
            return Message.assistant(f"Here is the weather — {facts}.")
        turns = sum(1 for m in messages if m.role == "user")
        return Message.assistant(f"(offline model) You have asked {turns} question(s) so far.")

    return FunctionModel(answer, model_name="offline-demo")


def pick_model() -> tuple[Model | str, str]:
    for variable, spec in (
        ("OPENAI_API_KEY", "openai:gpt-4o-mini"),
        ("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-5"),
        ("GEMINI_API_KEY", "gemini:gemini-2.5-flash"),
        ("GOOGLE_API_KEY", "gemini:gemini-2.5-flash"),
    ):
        if os.environ.get(variable):
            return spec, f"{spec} (because {variable} is set)"
    return offline_model(), "the offline demo model (set OPENAI_API_KEY or similar for a real one)"


model, model_description = pick_model()

agent = Agent(
    model,
    name="travel",
    instructions="You are a concise travel assistant. Use the weather tool for forecasts.",
    history_processor=trim_history(20),
)


@agent.tool
async def weather(city: str) -> str:
    """Today's forecast for a city.

    Args:
        city: The city, e.g. "Paris".
    """
    crash_file = os.environ.get("GOLEM_DEMO_CRASH_FILE")
    if crash_file and Path(f"{crash_file}.armed").exists() and not Path(crash_file).exists():
        Path(crash_file).write_text(city)
        await asyncio.Event().wait()  # hang until this worker is killed
    return FORECASTS.get(city.lower(), "no forecast available")
