"""The demo's agent: a travel helper with a weather tool and a hotel booking tool.

Offline by default (a small deterministic model that streams its answers word by word);
with OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY set, the matching real provider
answers instead. With GOLEM_DEMO_CRASH_FILE set, a tool whose ``<file>.<tool>.armed``
exists claims ``<file>.<tool>`` (once, across workers), writes its worker's pid there and
hangs, so the demo can kill that worker mid-tool.

``weather`` is idempotent: Temporal retries it on another worker. ``book_hotel`` is
``at_most_once``: a crash is reported (its call closed as outcome unknown), never repeated.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

from golem import OUTCOME_UNKNOWN_RESULT, Message, ToolCall
from golem.agent import Agent
from golem.history.processors import trim_history
from golem.models import FunctionModel, Model
from golem.models.base import ModelResponse, StreamDelta, ToolDefinition

FORECASTS = {"paris": "sunny, 21°C", "oslo": "snow, -4°C", "lisbon": "clear, 18°C"}


def offline_answer(messages: list[Message]) -> Message:
    """Weather for every city the newest prompt names; a booking for "book"; honesty about
    a booking whose outcome is unknown."""
    prompt_at = max(i for i, m in enumerate(messages) if m.role == "user")
    prompt = messages[prompt_at].content.lower()
    results = [m for m in messages[prompt_at:] if m.role == "tool"]
    cities = [c for c in FORECASTS if c in prompt]
    if "did" in prompt and "book" in prompt:
        bookings = [m for m in messages if m.role == "tool" and m.tool_name == "book_hotel"]
        if bookings and bookings[-1].content == OUTCOME_UNKNOWN_RESULT:
            return Message.assistant(
                "I can't tell: the booking was interrupted while it ran, so it may or may "
                "not have gone through. I won't book again blindly; please check for a "
                "confirmation first."
            )
        if bookings:
            return Message.assistant(f"Yes: {bookings[-1].content}.")
        return Message.assistant("You have not asked me to book anything yet.")
    if "book" in prompt and cities and not results:
        args = json.dumps({"city": cities[0]})
        return Message.assistant("", [ToolCall(id=f"bk-{prompt_at}", name="book_hotel", args=args)])
    if cities and not results:
        return Message.assistant(
            "",
            [
                ToolCall(id=f"wx-{prompt_at}-{c}", name="weather", args=json.dumps({"city": c}))
                for c in cities
            ],
        )
    if results and results[0].tool_name == "book_hotel":
        return Message.assistant(f"Done: {results[0].content}.")
    if results:
        facts = "; ".join(f"{m.tool_call_id.split('-')[-1].title()}: {m.content}" for m in results)
        return Message.assistant(f"Here is the weather — {facts}.")
    turns = sum(1 for m in messages if m.role == "user")
    return Message.assistant(f"(offline model) You have asked {turns} question(s) so far.")


async def offline_stream(
    messages: list[Message], tools: list[ToolDefinition]
) -> AsyncIterator[StreamDelta | ModelResponse]:
    """The offline answer, a word at a time, as a provider would stream it."""
    message = offline_answer(messages)
    words = message.content.split(" ") if message.content else []
    for index, word in enumerate(words):
        yield StreamDelta(kind="text", text=word if index == 0 else " " + word)
        await asyncio.sleep(0.02)
    yield ModelResponse(message=message)


def offline_model() -> FunctionModel:
    return FunctionModel(
        lambda messages, tools: offline_answer(messages),
        stream_fn=offline_stream,
        model_name="offline-demo",
    )


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
    instructions=(
        "You are a concise travel assistant. Use the weather tool for forecasts and "
        "book_hotel to book. If a booking's outcome is unknown, say so; never rebook blindly."
    ),
    history_processor=trim_history(20),
)


async def crash_point(tool: str) -> None:
    """Hang here (until this worker is killed) when the demo armed ``tool``: the first
    call to claim the crash file does, once, whichever worker runs it."""
    base = os.environ.get("GOLEM_DEMO_CRASH_FILE")
    if not base or not Path(f"{base}.{tool}.armed").exists():
        return
    try:
        claim = os.open(f"{base}.{tool}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return  # crashed once already: this is the retry (or a sibling call)
    os.write(claim, str(os.getpid()).encode())
    os.close(claim)
    await asyncio.Event().wait()


@agent.tool
async def weather(city: str) -> str:
    """Today's forecast for a city.

    Args:
        city: The city, e.g. "Paris".
    """
    await crash_point("weather")
    return FORECASTS.get(city.lower(), "no forecast available")


@agent.tool(at_most_once=True)
async def book_hotel(city: str) -> str:
    """Book a hotel room for tonight (charges the card: never run twice).

    Args:
        city: The city, e.g. "Oslo".
    """
    await crash_point("book_hotel")
    return f"room booked in {city.title()}, confirmation HX-{city.upper()[:3]}"
