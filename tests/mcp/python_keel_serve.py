#!/usr/bin/env python3
"""Drives `keel serve` with the official Python SDK's `Client` (`mcp` on PyPI), as an MCP host would.

    python tests/mcp/python_keel_serve.py -- target/debug/keel-demo
    python tests/mcp/python_keel_serve.py --tools scratch --cwd SCRATCH_CRATE -- target/debug/keel

Everything after `--` is the `keel` command (needs `pip install mcp==2.3.0`); the script adds `serve --stdio` or
`serve --http 127.0.0.1:0`. `--tools demo` (the default) expects the example tools of `keel-demo`; `--tools scratch`
the two tools of the scratch crate that scripts/scratch-crate.sh writes, served by the installed `keel` run in that
crate's folder (`--cwd`). Over stdio in both protocol eras (`mode="legacy"`: the 2025-11-25 `initialize` session;
`mode="auto"`: `server/discover`, then stateless 2026-07-28 requests) and over Streamable HTTP, checks `tools/list`
(every tool, or the tagged ones), a successful call, and the refusals: invalid arguments, an approval required (for a
client without elicitation), an unknown tool (JSON-RPC error -32602). With `--tools scratch`, a client with an
elicitation callback then approves the write tool (it runs once, with the arguments the person was shown) and declines
it (nothing runs, `approval_denied`), in each era and over both transports; `--allow NAME` and `--allow-effect write`
approve it without asking, and `--allow-effect destructive` is refused. Prints one line per check and exits non-zero if any failed.
scripts/mcp-conformance.sh and scripts/scratch-crate.sh run it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import mcp_types as types
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


@dataclass
class Approval:
    """A write tool a person approves through elicitation, and a read tool that says how often it ran."""

    call: tuple[str, dict[str, Any]]
    call_ok: Callable[[dict[str, Any]], bool]
    runs: tuple[str, dict[str, Any]]


@dataclass
class Profile:
    """The tools a `keel serve` is expected to list, and the calls that exercise them."""

    tools: set[str]
    tagged: tuple[str, set[str]]
    call: tuple[str, dict[str, Any]]
    call_ok: Callable[[dict[str, Any]], bool]
    invalid: tuple[str, dict[str, Any]]
    needs_approval: tuple[str, dict[str, Any]]
    approval: Approval | None = None


PROFILES = {
    "demo": Profile(
        tools=DEMO_TOOLS,
        tagged=("incident", {"create_ticket", "lookup_incident", "search_incidents"}),
        call=("lookup_incident", {"incident_id": "INC-001"}),
        call_ok=lambda r: (r.get("structuredContent") or {}).get("service") == "auth-api",
        invalid=("lookup_incident", {"incident": "INC-001"}),
        needs_approval=("create_ticket", {"incident_id": "INC-001", "title": "502"}),
    ),
    # The crate scripts/scratch-crate.sh writes: two read tools and a write tool, `scratch_add` tagged `math`;
    # `scratch_forgotten` says how many times `scratch_forget` ran in the server's process.
    "scratch": Profile(
        tools={"scratch_add", "scratch_forget", "scratch_forgotten"},
        tagged=("math", {"scratch_add"}),
        call=("scratch_add", {"a": 2, "b": 3}),
        # A result that is not an object travels as text only (structuredContent must be an object).
        call_ok=lambda r: r.get("content") == [{"type": "text", "text": "5"}],
        invalid=("scratch_add", {"a": "2", "b": 3}),
        needs_approval=("scratch_forget", {"note": "n-1"}),
        approval=Approval(
            call=("scratch_forget", {"note": "n-2"}),
            # A string result travels as its JSON text.
            call_ok=lambda r: (r.get("content") or [{}])[0].get("text") == json.dumps("forgot n-2"),
            runs=("scratch_forgotten", {}),
        ),
    ),
}


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


async def session(label: str, server: Any, mode: str, version: str, tools: set[str], profile: Profile,
                  checks: Checks) -> None:
    async with Client(server, mode=mode, read_timeout_seconds=30) as client:
        checks.check(f"{label}: protocol {version}", client.protocol_version == version, client.protocol_version)

        listed = {t["name"] for t in (wire(t) for t in (await client.list_tools()).tools)}
        checks.check(f"{label}: tools/list", listed == tools, sorted(listed))

        r = wire(await client.call_tool(*profile.call))
        checks.check(
            f"{label}: a call",
            r.get("isError") is not True and profile.call_ok(r),
            r,
        )

        r = wire(await client.call_tool(*profile.invalid))
        checks.check(f"{label}: invalid arguments", r.get("isError") is True and code_of(r) == "invalid_arguments", r)

        if profile.needs_approval[0] in tools:
            r = wire(await client.call_tool(*profile.needs_approval))
            # This client offers no elicitation: nobody can be asked, so the call is refused as it stands.
            checks.check(f"{label}: approval required (a client without elicitation)",
                         r.get("isError") is True and code_of(r) == "approval_required", r)

        try:
            r = wire(await client.call_tool("no_such_tool", {}))
            checks.check(f"{label}: unknown tool, -32602", False, f"got a result {r}")
        except MCPError as e:
            checks.check(f"{label}: unknown tool, -32602", e.error.code == -32602, e.error)


def shown_arguments(message: str) -> Any:
    """The arguments an approval showed the person: the JSON after `Arguments:`, up to the next blank line."""
    try:
        return json.loads(message.split("Arguments:\n", 1)[1].split("\n\n", 1)[0])
    except (IndexError, ValueError):
        return None


async def approvals(label: str, server: Any, mode: str, approval: Approval, checks: Checks) -> None:
    """A person approves a write through elicitation (asked in the session, or in an input-required round when
    stateless): accept runs it once with the arguments shown; decline runs nothing, and the model reads
    `approval_denied`."""
    asked: list[str] = []
    action = "accept"

    async def on_elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(getattr(params, "message", ""))
        return types.ElicitResult(action=action, content={} if action == "accept" else None)

    async def runs(client: Client) -> int:
        r = wire(await client.call_tool(*approval.runs))
        try:
            return int(r["content"][0]["text"])
        except (KeyError, IndexError, ValueError):
            return -1

    async with Client(server, mode=mode, read_timeout_seconds=30, elicitation_callback=on_elicit) as client:
        before = await runs(client)
        tool, arguments = approval.call
        r = wire(await client.call_tool(tool, arguments))
        after = await runs(client)
        shown = shown_arguments(asked[0]) if asked else None
        checks.check(
            f"{label}: elicitation accepted, the write runs once with the arguments shown",
            r.get("isError") is not True and approval.call_ok(r) and len(asked) == 1 and shown == arguments
            and f"`{tool}`" in asked[0] and "effect: write" in asked[0] and after == before + 1,
            (r, asked, before, after),
        )

        action = "decline"
        r = wire(await client.call_tool(tool, arguments))
        checks.check(
            f"{label}: elicitation declined, nothing runs",
            r.get("isError") is True and code_of(r) == "approval_denied" and len(asked) == 2
            and await runs(client) == after,
            (r, asked),
        )


async def allowed(command: list[str], cwd: str | None, env: dict[str, str], profile: Profile, checks: Checks) -> None:
    """A host's trust: `--allow NAME` and `--allow-effect write` approve a write without asking (this client offers
    no elicitation); `--allow-effect destructive` is refused before anything is served."""
    tool, arguments = profile.needs_approval
    for flags in (["--allow", tool], ["--allow-effect", "write"]):
        server = StdioServerParameters(command=command[0], args=[*command[1:], "serve", "--stdio", *flags], cwd=cwd,
                                       env=env)
        async with Client(server, mode="auto", read_timeout_seconds=30) as client:
            r = wire(await client.call_tool(tool, arguments))
            checks.check(f"stdio {' '.join(flags)}: the write runs without asking", r.get("isError") is not True, r)
    for flags, says in ((["--allow-effect", "destructive"], "never approved by effect"),
                        (["--allow", "no_such_tool"], "no tool of that name is served")):
        refused = await asyncio.to_thread(
            subprocess.run, [*command, "serve", "--stdio", *flags], stdin=subprocess.DEVNULL, capture_output=True,
            text=True, cwd=cwd, env=env, timeout=TIMEOUT_SECONDS)
        checks.check(f"serve {' '.join(flags)} is refused (exit 2)", refused.returncode == 2 and says in refused.stderr,
                     (refused.returncode, refused.stderr))


async def run(command: list[str], profile: Profile, cwd: str | None, checks: Checks) -> None:
    # The whole environment, as a host's config can give it (the SDK passes only a few variables by default): the
    # installed keel builds with cargo, under the caller's CARGO_TARGET_DIR.
    env = dict(os.environ)
    stdio = StdioServerParameters(command=command[0], args=[*command[1:], "serve", "--stdio"], cwd=cwd, env=env)
    for mode, version in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
        await asyncio.wait_for(session(f"stdio {mode}", stdio, mode, version, profile.tools, profile, checks),
                               TIMEOUT_SECONDS)
        if profile.approval:
            await asyncio.wait_for(approvals(f"stdio {mode}", stdio, mode, profile.approval, checks), TIMEOUT_SECONDS)
    if profile.approval:
        await asyncio.wait_for(allowed(command, cwd, env, profile, checks), TIMEOUT_SECONDS * 2)
    tag, tagged_tools = profile.tagged
    tagged = StdioServerParameters(command=command[0], args=[*command[1:], "serve", "--stdio", "--tag", tag], cwd=cwd,
                                    env=env)
    await asyncio.wait_for(session("stdio --tag", tagged, "auto", "2026-07-28", tagged_tools, profile, checks),
                           TIMEOUT_SECONDS)

    http = subprocess.Popen([*command, "serve", "--http", "127.0.0.1:0"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        line = http.stderr.readline() if http.stderr else ""
        match = re.search(r"at (http://\S+)", line)
        checks.check("http: the server started", match is not None, line)
        if match:
            for mode, version in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
                await asyncio.wait_for(session(f"http {mode}", match.group(1), mode, version, profile.tools, profile, checks),
                                       TIMEOUT_SECONDS)
                if profile.approval:
                    await asyncio.wait_for(approvals(f"http {mode}", match.group(1), mode, profile.approval, checks),
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
    parser.add_argument("--tools", choices=sorted(PROFILES), default="demo", help="which tools the command serves")
    parser.add_argument("--cwd", help="the folder to run the command in (the crate whose tools it serves)")
    parser.add_argument("command", nargs="+", help="the keel command, after --")
    args = parser.parse_args()
    checks = Checks()
    try:
        asyncio.run(run(args.command, PROFILES[args.tools], args.cwd, checks))
    except Exception as e:  # a crash is a failed check, with what happened
        checks.check("the run completed", False, repr(e))
    print(f"python keel serve: {checks.passed} passed, {len(checks.failed)} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
