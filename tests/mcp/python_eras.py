#!/usr/bin/env python3
"""Drives keel's example MCP server with the official Python SDK's `Client` in both protocol eras.

    python tests/mcp/python_eras.py [--server-stderr FILE] -- target/debug/examples/conformance_server

Everything after `--` is the server command (needs `pip install mcp==2.3.0`). For each transport (stdio, and
Streamable HTTP on a free loopback port, both started here) and each era (`mode="legacy"`: the 2025-11-25
`initialize` session; `mode="auto"`: `server/discover`, then stateless 2026-07-28 requests), checks a tool call, an
input-required round trip (a session's elicitation request, or an input-required result and its retry), a task
(2026-07-28: `tasks/get` until completed; a session gets the same tool's answer in the call) and
`tools/list_changed` (on the session, or on a `subscriptions/listen` stream).
Prints one line per check and exits non-zero if any failed.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import warnings
from typing import Any

import mcp_types as types
from mcp import Client, MCPDeprecationWarning, StdioServerParameters
from mcp.client.extension import advertise
from pydantic import TypeAdapter

from checks import Checks  # noqa: E402 (tests/mcp, the script's own folder)

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

TIMEOUT_SECONDS = 60
TASKS = "io.modelcontextprotocol/tasks"
RAW = TypeAdapter(dict[str, Any])


class GetTask(types.GetTaskRequest):
    """`tasks/get`, with its task id mirrored into `Mcp-Name` as SEP-2663 requires over HTTP."""

    name_param = "taskId"


def text_of(result: Any) -> str:
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    content = dumped.get("content") or [{}]
    return str(content[0].get("text", ""))


async def era(label: str, server: Any, mode: str, expected_version: str, checks: Checks) -> None:
    elicited: list[str] = []
    notifications: list[str] = []

    async def on_elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        elicited.append(getattr(params, "message", ""))
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def on_message(message: Any) -> None:
        if not isinstance(message, Exception):
            dumped = message.model_dump(by_alias=True, mode="json", exclude_none=True)
            notifications.append(str(dumped.get("method") or dumped.get("root", {}).get("method") or ""))

    async with Client(
        server,
        mode=mode,
        read_timeout_seconds=30,
        elicitation_callback=on_elicit,
        message_handler=on_message,
        extensions=[advertise(TASKS)],
    ) as client:
        checks.check(f"{label}: protocol {expected_version}", client.protocol_version == expected_version,
                     client.protocol_version)

        # A tool call.
        r = await client.call_tool("add_numbers", {"a": 2, "b": 3})
        dumped = r.model_dump(by_alias=True, mode="json", exclude_none=True)
        checks.check(f"{label}: tools/call", dumped.get("structuredContent") == {"sum": 5}, dumped)

        # Input from the client: the same handler, asked over the session or through a round trip.
        r = await client.call_tool("test_input_required_result_elicitation", {})
        checks.check(f"{label}: input round trip", text_of(r) == "Hello, Ada!" and len(elicited) == 1,
                     (text_of(r), elicited))

        # A task (the Tasks extension of 2026-07-28): created by the call, polled to its result. A 2025-11-25
        # session gets the same tool's answer in the call.
        if mode == "legacy":
            r = await client.call_tool("slow_compute", {"seconds": 0.2})
            checks.check(f"{label}: a task tool answers a session in the call", "done after 0.2s" in text_of(r),
                         text_of(r))
        else:
            request = types.CallToolRequest(params=types.CallToolRequestParams(name="slow_compute",
                                                                               arguments={"seconds": 0.2}))
            created = await client.session.send_request(request, RAW)
            task_id = created.get("taskId") or (created.get("task") or {}).get("taskId")
            checks.check(f"{label}: task created", created.get("resultType") == "task" and bool(task_id), created)
            status: dict[str, Any] = {}
            for _ in range(200):
                if not task_id:
                    break
                get = GetTask(params=types.GetTaskRequestParams(taskId=task_id))
                status = await client.session.send_request(get, RAW)
                if status.get("status") in ("completed", "failed", "cancelled"):
                    break
                await asyncio.sleep(0.05)
            result_text = ((status.get("result") or {}).get("content") or [{}])[0].get("text", "")
            checks.check(f"{label}: task completed with the call's result",
                         status.get("status") == "completed" and "done after 0.2s" in result_text, status)

        # tools/list_changed: on the session (legacy), or on a listen stream (stateless).
        if mode == "legacy":
            await client.call_tool("test_trigger_tool_change", {})
            for _ in range(100):
                if "notifications/tools/list_changed" in notifications:
                    break
                await asyncio.sleep(0.05)
            checks.check(f"{label}: tools/list_changed on the session",
                         "notifications/tools/list_changed" in notifications, notifications)
        else:
            async with client.listen(tools_list_changed=True) as sub:
                await client.call_tool("test_trigger_tool_change", {})
                event = None
                async for event in sub:
                    break
                checks.check(f"{label}: tools/list_changed on the listen stream",
                             event is not None and "tool" in type(event).__name__.lower(), event)


async def run(command: list[str], checks: Checks, server_stderr: Any) -> None:
    stdio = StdioServerParameters(command=command[0], args=command[1:])
    for mode, version in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
        await asyncio.wait_for(era(f"stdio {mode}", stdio, mode, version, checks), TIMEOUT_SECONDS)

    http = subprocess.Popen([*command, "--http", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=server_stderr,
                            text=True)
    try:
        line = http.stdout.readline() if http.stdout else ""
        match = re.search(r"listening on (\S+)", line)
        checks.check("http: the server started", match is not None, line)
        if match:
            for mode, version in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
                await asyncio.wait_for(era(f"http {mode}", match.group(1), mode, version, checks), TIMEOUT_SECONDS)
    finally:
        http.terminate()
        http.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server-stderr", help="file for the server's stderr (default: inherit)")
    parser.add_argument("command", nargs="+", help="the server command, after --")
    args = parser.parse_args()
    checks = Checks()
    stderr = open(args.server_stderr, "w") if args.server_stderr else None
    try:
        asyncio.run(run(args.command, checks, stderr))
    except Exception as e:  # a crash is a failed check, with what happened
        checks.check("the run completed", False, repr(e))
    finally:
        if stderr:
            stderr.close()
    print(f"python eras: {checks.passed} passed, {len(checks.failed)} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
