"""SSE stream parsing: golem's parser and chunk decoding against the openai SDK's.

Builds a ~5,000-event Chat Completions stream shaped like the recorded
``openai-chat-05-stream-tool-call`` (tool-call argument deltas, a usage chunk,
``[DONE]``), then parses the same bytes, fed in network-sized pieces:

- parser: golem ``SSEParser`` + strict JSON (``loads_strict``) vs the SDK's SSE decoder + ``sse.json()``;
- full path: golem's adapter path (parser, JSON, the chunk accumulator building
  StreamDeltas and the final ModelResponse) vs ``openai.Stream`` yielding typed chunks.

Run: ``python benchmarks/sse_parse.py`` (the SDK side needs ``pip install openai``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from golem.models._sse import SSEParser
from golem.models.openai import _ChunkAccumulator
from golem.strict_json import loads_strict

EVENTS = 5_000
CHUNK_SIZE = 1_024  # a typical read from a TLS stream
ROUNDS = 5


def build_stream(events: int = EVENTS) -> bytes:
    """A recorded-style tool-call stream with ``events`` chunk events."""
    head = {
        "id": "chatcmpl-Dx0XpqH8w09uBXwq1zFGYdETjtnEl",
        "object": "chat.completion.chunk",
        "created": 1782955817,
        "model": "gpt-4o-mini-2024-07-18",
        "service_tier": "default",
        "system_fingerprint": "fp_d0469e1700",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        body = {**head, "choices": [choice], "usage": None, "obfuscation": "qfQVOwfh62", **extra}
        return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"

    call = {
        "index": 0,
        "id": "call_ZR5UUuTt3pf61kjwAJIYdVMj",
        "type": "function",
        "function": {"name": "get_capital", "arguments": ""},
    }
    parts = [chunk({"role": "assistant", "content": None, "tool_calls": [call], "refusal": None})]
    pieces = ['{"', "country", '":"', "United", " Kingdom", " of", " Great", " Britain"]
    for i in range(events - 4):
        piece = pieces[i % len(pieces)] if i else '{"'
        parts.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    parts.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]}))
    parts.append(chunk({}, "tool_calls"))
    usage = {
        "prompt_tokens": 53,
        "completion_tokens": events,
        "total_tokens": 53 + events,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }
    final = {**head, "choices": [], "usage": usage, "obfuscation": "khVgg3RsaN"}
    parts.append(b"data: " + json.dumps(final, separators=(",", ":")).encode() + b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def pieces(data: bytes) -> list[bytes]:
    return [data[i : i + CHUNK_SIZE] for i in range(0, len(data), CHUNK_SIZE)]


def golem_parse(chunks: list[bytes]) -> int:
    parser, count = SSEParser(), 0
    for piece in chunks:
        for event in parser.feed(piece):
            if event.data == "[DONE]":
                return count
            loads_strict(event.data)
            count += 1
    return count


def golem_full(chunks: list[bytes]) -> int:
    parser, stream, count = SSEParser(), _ChunkAccumulator(), 0
    for piece in chunks:
        for event in parser.feed(piece):
            stream.feed(event)
            if stream.ended:
                stream.response()
                return count
            count += 1
    return count


def sdk_runners() -> tuple[Callable[[list[bytes]], int], Callable[[list[bytes]], int]] | str:
    try:
        import openai
        from openai import Stream
        from openai.types.chat import ChatCompletionChunk
    except ImportError:
        return "the openai SDK is not installed (pip install openai, or the 'bench' extra)"
    import importlib

    # the SDK's own HTTP module: httpx, or httpx2 in newer releases
    http = importlib.import_module(Stream.__module__).__dict__.get("httpx2") or __import__("httpx")
    client = openai.OpenAI(api_key="sk-benchmark", base_url="http://127.0.0.1:9/v1")

    def sdk_parse(chunks: list[bytes]) -> int:
        count = 0
        for sse in client._make_sse_decoder().iter_bytes(iter(chunks)):
            if sse.data.startswith("[DONE]"):
                break
            sse.json()
            count += 1
        return count

    def sdk_full(chunks: list[bytes]) -> int:
        request = http.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
        response = http.Response(200, content=iter(chunks), request=request)
        stream = Stream(cast_to=ChatCompletionChunk, response=response, client=client)
        return sum(1 for _ in stream)

    return sdk_parse, sdk_full


def best_rate(run: Callable[[list[bytes]], int], chunks: list[bytes]) -> float:
    best = float("inf")
    count = 0
    for _ in range(ROUNDS):
        start = time.perf_counter()
        count = run(chunks)
        best = min(best, time.perf_counter() - start)
    return count / best


def main() -> None:
    data = build_stream()
    chunks = pieces(data)
    print(f"stream: {EVENTS} chunk events, {len(data):,} bytes, fed in {CHUNK_SIZE}-byte pieces")
    assert golem_parse(chunks) == EVENTS  # every chunk event, [DONE] excluded
    rates = {"parser": best_rate(golem_parse, chunks), "full": best_rate(golem_full, chunks)}
    sdk = sdk_runners()
    for label, key, index in (("parser+json", "parser", 0), ("full path  ", "full", 1)):
        line = f"{label}  golem {rates[key]:>10,.0f} chunks/s"
        if isinstance(sdk, tuple):
            other = best_rate(sdk[index], chunks)
            line += f"   openai SDK {other:>10,.0f} chunks/s   golem/SDK {rates[key] / other:.2f}x"
        print(line)
    if isinstance(sdk, str):
        print(f"note: {sdk}; printed golem's rates only")


if __name__ == "__main__":
    main()
