#!/usr/bin/env python3
"""Drives keel's example MCP server with the official Python SDK (`mcp` on PyPI) as a stdio client.

    python tests/mcp/python_client.py [--server-stderr FILE] -- target/debug/examples/conformance_server

Everything after `--` is the server command (needs `pip install mcp==2.3.0`). Lists the tools, then asserts each outcome of keel's executor as a
client sees it: ok with structured content, unknown tool (JSON-RPC error -32602), invalid arguments with the JSON
pointer of the offending value, approval required, a business error, an internal error without internals, plus
MCP content blocks, log messages and progress. Prints one line per check and exits non-zero if any failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import warnings
from typing import Any

from mcp import ClientSession, MCPDeprecationWarning, MCPError, StdioServerParameters, stdio_client

# MCP logging is deprecated from protocol 2026-07-28 on; this client negotiates an earlier revision, where it is not.
from checks import Checks  # noqa: E402 (tests/mcp, the script's own folder)

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

TIMEOUT_SECONDS = 60

EXPECTED_TOOLS = {
    "add_numbers",
    "delete_note",
    "echo_text",
    "fail_internally",
    "json_schema_2020_12_tool",
    "lookup_note",
    "test_error_handling",
    "test_image_content",
    "test_multiple_content_types",
    "test_simple_text",
    "test_tool_with_logging",
    "test_tool_with_progress",
}

# Text that the failing tool's internal error carries; none of it may reach the client.
INTERNALS = ("hunter2", "postgres", "db.internal", "store.rs", "5432")


def wire(model: Any) -> dict[str, Any]:
    """A result as it travels on the wire (camelCase keys), whatever the SDK's attribute names."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def error_of(result: dict[str, Any]) -> dict[str, Any]:
    """keel's `{"code", "message", "details"}`: in structuredContent, or as the JSON text when the tool has an
    outputSchema (structuredContent must then match it, so the error travels as text only)."""
    structured = result.get("structuredContent")
    if isinstance(structured, dict) and isinstance(structured.get("error"), dict):
        return structured["error"]
    try:
        return json.loads(result["content"][0]["text"])["error"]
    except (KeyError, IndexError, ValueError, TypeError):
        return {}


async def run(command: list[str], checks: Checks, server_stderr: Any) -> None:
    logs: list[dict[str, Any]] = []
    notifications: list[str] = []

    async def on_log(params: Any) -> None:
        logs.append(wire(params))

    async def on_message(message: Any) -> None:
        # Every server notification the session surfaces, by method name.
        if not isinstance(message, Exception):
            dumped = wire(message)
            notifications.append(str(dumped.get("method") or dumped.get("root", {}).get("method") or type(message).__name__))

    server = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(server, errlog=server_stderr) as (read, write):
        async with ClientSession(
            read, write, read_timeout_seconds=30, logging_callback=on_log, message_handler=on_message
        ) as session:
            init = wire(await session.initialize())
            checks.check("initialize: tools capability", "tools" in init.get("capabilities", {}), init)

            # tools/list
            listed = {t["name"]: t for t in (wire(t) for t in (await session.list_tools()).tools)}
            missing = EXPECTED_TOOLS - listed.keys()
            checks.check("tools/list: every expected tool", not missing, f"missing {sorted(missing)}")
            checks.check(
                "tools/list: inputSchema objects",
                all(t.get("inputSchema", {}).get("type") == "object" for t in listed.values()),
                [n for n, t in listed.items() if t.get("inputSchema", {}).get("type") != "object"],
            )
            add = listed.get("add_numbers", {})
            checks.check("tools/list: outputSchema of add_numbers", "outputSchema" in add, add)
            for name, read_only, destructive in (("lookup_note", True, False), ("delete_note", False, True)):
                a = listed.get(name, {}).get("annotations", {})
                explicit = all(k in a for k in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"))
                checks.check(
                    f"tools/list: four explicit annotations of {name}",
                    explicit and a["readOnlyHint"] is read_only and a["destructiveHint"] is destructive,
                    a,
                )
            checks.check(
                "tools/list: content tools have no outputSchema",
                "outputSchema" not in listed.get("test_image_content", {"outputSchema": 1}),
                listed.get("test_image_content"),
            )

            # ok, structured
            r = wire(await session.call_tool("add_numbers", {"a": 2, "b": 3}))
            text = r.get("content", [{}])[0].get("text", "")
            checks.check(
                "ok: structuredContent and the same data as text",
                r.get("isError") is not True
                and r.get("structuredContent") == {"sum": 5}
                and json.loads(text or "null") == {"sum": 5},
                r,
            )

            # unknown tool: a JSON-RPC error, -32602, with the executor's message
            try:
                r = wire(await session.call_tool("no_such_tool", {}))
                checks.check("unknown tool: JSON-RPC error -32602", False, f"got a result {r}")
            except MCPError as e:
                checks.check(
                    "unknown tool: JSON-RPC error -32602",
                    e.error.code == -32602 and "no tool named" in e.error.message,
                    e.error,
                )

            # invalid arguments, with the pointer
            r = wire(await session.call_tool("add_numbers", {"a": "two", "b": 3}))
            err = error_of(r)
            pointers = [v.get("pointer") for v in (err.get("details") or {}).get("violations", [])]
            checks.check(
                "invalid arguments: isError, invalid_arguments, pointer /a",
                r.get("isError") is True and err.get("code") == "invalid_arguments" and "/a" in pointers,
                r,
            )

            # approval required (destructive tool, no approval)
            r = wire(await session.call_tool("delete_note", {"id": "n1"}))
            err = error_of(r)
            checks.check(
                "approval required: isError, approval_required, effect destructive",
                r.get("isError") is True
                and err.get("code") == "approval_required"
                and (err.get("details") or {}).get("effect") == "destructive",
                r,
            )

            # business error
            r = wire(await session.call_tool("lookup_note", {"id": "n9"}))
            err = error_of(r)
            checks.check(
                "business error: isError, the tool's own code and details",
                r.get("isError") is True and err.get("code") == "not_found" and err.get("details") == {"known": ["n1"]},
                r,
            )
            r = wire(await session.call_tool("test_error_handling", {}))
            err = error_of(r)
            checks.check(
                "business error without outputSchema: structuredContent carries the error",
                r.get("isError") is True and (r.get("structuredContent") or {}).get("error", {}).get("code") == "intentional_error",
                r,
            )

            # internal error, without internals
            r = wire(await session.call_tool("fail_internally", {}))
            err = error_of(r)
            dumped = json.dumps(r)
            leaked = [s for s in INTERNALS if s in dumped]
            checks.check(
                "internal error: tool_internal_error without internals",
                r.get("isError") is True and err.get("code") == "tool_internal_error" and not leaked,
                leaked or r,
            )

            # MCP content blocks
            r = wire(await session.call_tool("test_multiple_content_types", {}))
            kinds = [c.get("type") for c in r.get("content", [])]
            checks.check(
                "content: text, image and embedded resource blocks, no structuredContent",
                kinds == ["text", "image", "resource"] and "structuredContent" not in r,
                r,
            )

            # log messages, filtered by logging/setLevel
            await session.set_logging_level("debug")
            await session.call_tool("test_tool_with_logging", {})
            await asyncio.sleep(0.2)
            messages = [entry.get("data") for entry in logs]
            checks.check("logging: three notifications/message during the call", len(messages) >= 3, logs)
            before = len(logs)
            await session.set_logging_level("error")
            await session.call_tool("test_tool_with_logging", {})
            await asyncio.sleep(0.2)
            checks.check("logging: setLevel error filters info messages", len(logs) == before, logs[before:])

            # progress, only with a progress token
            before = len(notifications)
            await session.call_tool("test_tool_with_progress", {})
            await asyncio.sleep(0.2)
            unsolicited = [n for n in notifications[before:] if "progress" in n.lower()]
            checks.check("progress: none without a progress token", not unsolicited, notifications[before:])
            progress: list[float] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append(value)

            await session.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
            checks.check(
                "progress: three increasing notifications/progress",
                len(progress) >= 3 and progress == sorted(progress) and len(set(progress)) == len(progress),
                progress,
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server-stderr", help="write the server's stderr (its logs) to this file")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the server command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the server command after --")
    checks = Checks()
    server_stderr = open(args.server_stderr, "w", encoding="utf-8") if args.server_stderr else sys.stderr
    try:
        asyncio.run(asyncio.wait_for(run(command, checks, server_stderr), TIMEOUT_SECONDS))
    except Exception as e:  # noqa: BLE001 - any failure to talk to the server fails the run
        checks.check("session", False, repr(e))
    finally:
        if server_stderr is not sys.stderr:
            server_stderr.close()
    total = checks.passed + len(checks.failed)
    print(f"python MCP client: {checks.passed} passed, {len(checks.failed)} failed (of {total} checks)")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
