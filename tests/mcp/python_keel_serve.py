#!/usr/bin/env python3
"""Drives `keel serve` with the official Python SDK's `Client` (`mcp` on PyPI), as an MCP host would.

    python tests/mcp/python_keel_serve.py -- target/debug/keel-demo

Everything after `--` is the `keel` command over the example tools (needs `pip install mcp==2.3.0`); the script
adds `serve --stdio` or `serve --http 127.0.0.1:0`. Over stdio in both protocol eras (`mode="legacy"`: the
2025-11-25 `initialize` session; `mode="auto"`: `server/discover`, then stateless 2026-07-28 requests) and over
Streamable HTTP, checks `tools/list` (the demo's eight tools, or the tagged ones), a successful call, and the
refusals: invalid arguments, an approval required, an unknown tool (JSON-RPC error -32602). Prints one line per
check and exits non-zero if any failed. scripts/mcp-conformance.sh runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import warnings
from typing import Any

from mcp import Client, MCPDeprecationWarning, MCPError, StdioServerParameters

from checks import Checks  # noqa: E402 (tests/mcp, the script's own folder)

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

TIMEOUT_SECONDS = 60

DEMO_TOOLS = {
    "build_status_report",
    "create_ticket",
    "get_service_status",
    "lookup_incident",
    "propose_status_update",
    "read_task_cards",
    "search_incidents",
    "validate_task_card",
}
INCIDENT_TOOLS = {"create_ticket", "lookup_incident", "search_incidents"}


def wire(model: Any) -> dict[str, Any]:
    """A result as it travels on the wire (camelCase keys)."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def code_of(result: dict[str, Any]) -> str:
    """keel's error code of a refused call: in structuredContent, or in the JSON text."""
    structured = result.get("structuredContent")
    if isinstance(structured, dict) and isinstance(structured.get("error"), dict):
        return str(structured["error"].get("code"))
    try:
        return str(json.loads(result["content"][0]["text"])["error"]["code"])
    except (KeyError, IndexError, ValueError, TypeError):
        return ""


async def session(label: str, server: Any, mode: str, version: str, tools: set[str], checks: Checks) -> None:
    async with Client(server, mode=mode, read_timeout_seconds=30) as client:
        checks.check(f"{label}: protocol {version}", client.protocol_version == version, client.protocol_version)

        listed = {t["name"] for t in (wire(t) for t in (await client.list_tools()).tools)}
        checks.check(f"{label}: tools/list", listed == tools, sorted(listed))

        r = wire(await client.call_tool("lookup_incident", {"incident_id": "INC-001"}))
        checks.check(
            f"{label}: a call",
            r.get("isError") is not True and (r.get("structuredContent") or {}).get("service") == "auth-api",
            r,
        )

        r = wire(await client.call_tool("lookup_incident", {"incident": "INC-001"}))
        checks.check(f"{label}: invalid arguments", r.get("isError") is True and code_of(r) == "invalid_arguments", r)

        r = wire(await client.call_tool("create_ticket", {"incident_id": "INC-001", "title": "502"}))
        checks.check(f"{label}: approval required", r.get("isError") is True and code_of(r) == "approval_required", r)

        try:
            r = wire(await client.call_tool("no_such_tool", {}))
            checks.check(f"{label}: unknown tool, -32602", False, f"got a result {r}")
        except MCPError as e:
            checks.check(f"{label}: unknown tool, -32602", e.error.code == -32602, e.error)


async def run(command: list[str], checks: Checks) -> None:
    stdio = StdioServerParameters(command=command[0], args=[*command[1:], "serve", "--stdio"])
    for mode, version in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
        await asyncio.wait_for(session(f"stdio {mode}", stdio, mode, version, DEMO_TOOLS, checks), TIMEOUT_SECONDS)
    tagged = StdioServerParameters(command=command[0], args=[*command[1:], "serve", "--stdio", "--tag", "incident"])
    await asyncio.wait_for(session("stdio --tag", tagged, "auto", "2026-07-28", INCIDENT_TOOLS, checks),
                           TIMEOUT_SECONDS)

    http = subprocess.Popen([*command, "serve", "--http", "127.0.0.1:0"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = http.stderr.readline() if http.stderr else ""
        match = re.search(r"at (http://\S+)", line)
        checks.check("http: the server started", match is not None, line)
        if match:
            for mode, version in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
                await asyncio.wait_for(session(f"http {mode}", match.group(1), mode, version, DEMO_TOOLS, checks),
                                       TIMEOUT_SECONDS)
    finally:
        http.send_signal(2)  # Ctrl-C
        try:
            code = http.wait(timeout=10)
        except subprocess.TimeoutExpired:
            http.kill()
            code = None
        checks.check("http: Ctrl-C ends the server with exit code 0", code == 0, code)
        out = http.stdout.read() if http.stdout else ""
        checks.check("http: nothing on stdout", out == "", out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="+", help="the keel command, after --")
    args = parser.parse_args()
    checks = Checks()
    try:
        asyncio.run(run(args.command, checks))
    except Exception as e:  # a crash is a failed check, with what happened
        checks.check("the run completed", False, repr(e))
    print(f"python keel serve: {checks.passed} passed, {len(checks.failed)} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
