#!/usr/bin/env python3
"""Drives `keel serve --forward` with the official Python SDK's `Client` in front, as an MCP host would: keel
forwards the tools of `python_drifting.py` (a server that changes its tool `add` when asked), pinned by a lock.

    python tests/mcp/python_keel_forward.py --lock LOCK --forward 'py=PYTHON tests/mcp/python_drifting.py' -- keel

Everything after `--` is the `keel` command; the script adds `serve --stdio --lock LOCK --forward ...`. In both
protocol eras (between the host and keel): the pinned tools are listed beside the linked ones and called; after
`py.drift` changes `add`'s description, `py.add` leaves the list (the host is sent `tools/list_changed`) and a call
to it is refused, and the server never receives it (`py.drift` counts the calls `add` got). Prints one line per
check and exits non-zero if any failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import warnings
from typing import Any

from mcp import Client, MCPDeprecationWarning, MCPError, StdioServerParameters

from checks import Checks  # noqa: E402 (tests/mcp, the script's own folder)

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

TIMEOUT_SECONDS = 60


def wire(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def received(result: dict[str, Any]) -> int | None:
    """The count `py.drift` answers: the calls `add` received."""
    structured = result.get("structuredContent")
    if isinstance(structured, dict) and "result" in structured:
        return structured["result"]
    try:
        return int(json.loads(result["content"][0]["text"]))
    except (KeyError, IndexError, ValueError, TypeError):
        return None


async def names(client: Client) -> set[str]:
    return {t["name"] for t in (wire(t) for t in (await client.list_tools()).tools)}


async def session(mode: str, server: StdioServerParameters, checks: Checks) -> None:
    label = f"stdio {mode}"
    async with Client(server, mode=mode, read_timeout_seconds=30) as client:
        listed = await names(client)
        checks.check(f"{label}: the pinned tools are listed", {"py.add", "py.drift"} <= listed, sorted(listed))
        checks.check(f"{label}: beside the linked ones", "lookup_incident" in listed, sorted(listed))

        r = wire(await client.call_tool("py.add", {"a": 2, "b": 40}))
        checks.check(f"{label}: a pinned tool runs", (r.get("structuredContent") or {}).get("result") == 42, r)

        r = wire(await client.call_tool("py.drift", {"step": "description"}))
        checks.check(f"{label}: the server changes add", received(r) == 1, r)

        # Over 2026-07-28 the client caches tools/list for its ttlMs (5 s once keel's list may change).
        deadline = time.monotonic() + 15
        while "py.add" in listed and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            listed = await names(client)
        checks.check(f"{label}: the changed tool leaves the list", "py.add" not in listed, sorted(listed))

        try:
            r = wire(await client.call_tool("py.add", {"a": 1, "b": 1}))
            refused = r.get("isError") is True
        except MCPError as e:
            r, refused = str(e), "py.add" in str(e)
        checks.check(f"{label}: a call to it is refused", refused, r)

        r = wire(await client.call_tool("py.drift", {"step": "count"}))
        checks.check(f"{label}: the refused call never reached the server", received(r) == 1, r)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lock", required=True)
    parser.add_argument("--forward", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    checks = Checks()
    server = StdioServerParameters(
        command=command[0],
        args=[*command[1:], "serve", "--stdio", "--lock", args.lock, "--forward", args.forward],
    )
    for mode in ("legacy", "auto"):
        await asyncio.wait_for(session(mode, server, checks), TIMEOUT_SECONDS)
    print(f"{checks.passed} passed, {len(checks.failed)} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
