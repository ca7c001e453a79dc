#!/usr/bin/env python3
"""An MCP server written with the official Python SDK (`mcp`), for keel's forwarder tests (stdio).

    python tests/mcp/python_server.py

Serves both protocol eras, as the SDK does: an `initialize` session (2025-11-25) and stateless requests after
`server/discover` (2026-07-28). Two read-only tools: `add` (a structured result) and `shout` (text).
"""

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

app = MCPServer("python-peer")
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)


@app.tool(annotations=READ_ONLY)
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@app.tool(annotations=READ_ONLY)
def shout(text: str) -> str:
    """Upper-cases a text."""
    return text.upper()


if __name__ == "__main__":
    app.run()
