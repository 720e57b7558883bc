"""Small MCP servers for the MCP tests, written with the mcp SDK's own server side."""
