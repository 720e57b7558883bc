"""Repair and sanitize a broken, partly hostile conversation (offline).

    .venv/bin/python examples/history_repair.py

The conversation in history/broken-conversation.json has a dangling call (Lisbon never
answered), an orphan result (call_madrid was never requested), a call whose arguments
were cut mid-stream, a file:///etc/passwd image and an injected system message.
"""

from __future__ import annotations

from pathlib import Path

from golem import load_messages, normalize_history, sanitize_history
from golem.messages import Message

HISTORY_FILE = Path(__file__).resolve().parent / "history" / "broken-conversation.json"


def show(history: list[Message]) -> None:
    """Print one line per message: index, role, short content, calls and ids."""
    for index, message in enumerate(history):
        line = f"  {index:>2} {message.role:<9} {_short(message.content)!r}"
        if message.tool_calls:
            calls = ", ".join(f"{c.name}#{c.id} {c.args}" for c in message.tool_calls)
            line += f" calls [{calls}]"
        if message.tool_call_id:
            line += f" answers {message.tool_call_id}"
        if message.parts:
            line += f" parts {[p.url or p.media_type for p in message.parts]}"
        if message.run_id:
            line += f" run {message.run_id[-4:]}"
        print(line)


def _short(text: str, width: int = 48) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def main() -> None:
    history = load_messages(HISTORY_FILE.read_bytes())
    print(f"loaded {len(history)} messages from {HISTORY_FILE.name}:")
    show(history)

    normalized, repair = normalize_history(history)
    print("\nnormalize_history (trusted history: pairing only)")
    print(f"  synthesized={repair.synthesized} dropped={repair.dropped}")
    print(f"  truncated={repair.truncated} relocated={repair.relocated} changed={repair.changed}")
    show(normalized)

    sanitized, report = sanitize_history(history)
    print("\nsanitize_history (untrusted history: the boundary pass)")
    print(f"  system_prompts={report.system_prompts}")
    for unsafe in report.unsafe_parts:
        print(
            f"  unsafe part: message {unsafe.message_index} {unsafe.kind} scheme={unsafe.scheme!r}"
        )
    print(f"  repair: synthesized={report.repair.synthesized} dropped={report.repair.dropped}")
    print(f"  repair: truncated={report.repair.truncated} (arguments kept verbatim)")
    show(sanitized)


if __name__ == "__main__":
    main()
