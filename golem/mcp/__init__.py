"""Tools from MCP servers, in process and durably (``pip install 'golem-temporal[mcp]'``).

    from golem.mcp import MCPServer

    files = MCPServer.stdio("files", command="python", args=["files_server.py"])
    docs = MCPServer.http("docs", url="http://localhost:9000/mcp", headers={"Authorization": "…"})
    agent = Agent(model, name="support", toolsets=[files, docs.filtered(["search"])])

In process a run speaks to its servers with the mcp SDK's ``Client``; durably every MCP
operation is an activity of Temporal's own MCP integration (``temporalio.mcp``), which
``GolemPlugin`` registers for the servers of the agents it serves. See
docs/adr/0016-mcp-toolsets.md.
"""

from golem.mcp.server import Headers, MCPServer

__all__ = ["Headers", "MCPServer"]
