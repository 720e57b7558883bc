"""An MCP server over stdio written without the SDK, for faults the SDK's servers never make:
``python raw_server.py MODE``.

- ``silent``: reads every request and answers none (not even ``initialize``);
- ``garbage-list``: answers ``initialize``, then ``tools/list`` with a line that is not JSON;
- ``big``: offers ``big``, whose result is 3 MB of text;
- ``malformed``: offers ``bad``, whose result's ``content`` is not a list of content blocks.
"""

from __future__ import annotations

import json
import sys

TOOL = {"big": "big", "malformed": "bad"}
SCHEMA = {"type": "object", "properties": {}}


def result(mode: str, method: str, params: dict[str, object]) -> object:
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [{"name": TOOL.get(mode, "none"), "inputSchema": SCHEMA}]}
    if method == "tools/call" and mode == "big":
        return {"content": [{"type": "text", "text": "x" * 3_000_000}]}
    if method == "tools/call":
        return {"content": "not a list of blocks"}
    return {}


def main() -> None:
    mode = sys.argv[1]
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request or mode == "silent":
            continue  # a notification; or a server that never answers
        if mode == "garbage-list" and request["method"] == "tools/list":
            print("this is not JSON-RPC", flush=True)
            continue
        answer = {"jsonrpc": "2.0", "id": request["id"]}
        answer["result"] = result(mode, request["method"], request.get("params") or {})
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
