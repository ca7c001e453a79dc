#!/usr/bin/env python3
"""Drives three keel replicas behind a round-robin TCP proxy with the official Python SDK's `Client` in 2026-07-28
mode (stateless requests), each request on a connection of its own, so on the next replica in turn.

    python tests/mcp/python_replicas.py --routes FILE --replicas 3 --lease-ms 2000 http://127.0.0.1:PORT/mcp

Run by tests/tests/mcp_replicas.rs, which starts the replicas (the example `catalogue_replicas`, sharing their call
state in one PostgreSQL database) and the proxy. The proxy writes one JSON line per connection to FILE (`index` and
`replica`: where it sent it; `method` and `name`: the request's `Mcp-Method` and `Mcp-Name` headers) before it
forwards the request, so the script knows which replica answered each of its requests, and which one the next
request goes to.

Checks, one line each: a task started on one replica is polled through every replica and cancelled through
another; a task's input request is answered (`tasks/update`) through another replica than the one running it, and
the task completes with the answer; one write retried with one `_meta["keel/idempotencyKey"]` through all three
replicas is answered with one result, made by the first; then, after the replica running a task is killed (the
script prints `kill <replica>` and waits for `killed` on stdin), the task reads `failed` with `task_lost` through
the survivors within the lease plus a margin, while the other tasks and writes are intact.

Ends with `summary {json}` (what the Rust test checks on its side) and exits non-zero if any check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import warnings
from typing import Any, Literal

import httpx2
import mcp_types as types
from mcp import Client, MCPDeprecationWarning, MCPError
from mcp.client.extension import advertise
from mcp.client.streamable_http import streamable_http_client
from pydantic import TypeAdapter

from checks import Checks  # noqa: E402 (tests/mcp, the script's own folder)

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

TIMEOUT_SECONDS = 90
TASKS = "io.modelcontextprotocol/tasks"
RAW = TypeAdapter(dict[str, Any])
IDEMPOTENCY_KEY = "keel/idempotencyKey"
# How much later than the lease a task whose replica died may still read as working: the polling interval, and
# a loaded machine.
LOST_MARGIN_MS = 1500


class GetTask(types.GetTaskRequest):
    """`tasks/get`, with its task id mirrored into `Mcp-Name` as SEP-2663 requires over HTTP."""

    name_param = "taskId"


class CancelTask(types.CancelTaskRequest):
    """`tasks/cancel`, its task id in `Mcp-Name`."""

    name_param = "taskId"


class UpdateTask(types.Request[dict[str, Any], Literal["tasks/update"]]):
    """`tasks/update` (the Tasks extension of 2026-07-28): answers to a task's input requests."""

    method: Literal["tasks/update"] = "tasks/update"
    params: dict[str, Any]
    name_param = "taskId"


class Run:
    def __init__(self, client: Client, routes_file: str, replicas: int, checks: Checks) -> None:
        self.client = client
        self.routes_file = routes_file
        self.replicas = replicas
        self.checks = checks

    # ---- Where requests went ----

    def routes(self) -> list[dict[str, Any]]:
        with open(self.routes_file, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def last(self) -> dict[str, Any]:
        """The route of the request just answered."""
        return self.routes()[-1]

    async def steer_off(self, replica: int) -> None:
        """Sends pings until the next connection goes to another replica than `replica` (every replica alive)."""
        for _ in range(self.replicas):
            if (self.last()["index"] + 1) % self.replicas != replica:
                return
            await self.client.send_ping()

    # ---- Requests ----

    async def send(self, request: Any) -> dict[str, Any]:
        """A request's raw result, or `{"rpcError": ...}` for an error answer (a failed check, not a crash)."""
        try:
            return await self.client.session.send_request(request, RAW)
        except MCPError as e:
            return {"rpcError": {"code": e.code, "message": str(e)}}

    async def start_task(self, tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Calls a task tool: the task id, and the route of the call."""
        request = types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments))
        created = await self.send(request)
        route = self.last()
        task_id = created.get("taskId") or (created.get("task") or {}).get("taskId")
        self.checks.check(f"{tool}: a task, created on {route['replica']}",
                          created.get("resultType") == "task" and bool(task_id), created)
        return str(task_id or ""), route

    async def get(self, task_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        status = await self.send(GetTask(params=types.GetTaskRequestParams(taskId=task_id)))
        return status, self.last()

    async def poll(self, task_id: str, until: tuple[str, ...], seconds: float = 20) -> dict[str, Any]:
        status: dict[str, Any] = {}
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            status, _ = await self.get(task_id)
            if status.get("status") in until:
                break
            await asyncio.sleep(0.05)
        return status

    async def charge(self, order: str, cents: int, key: str) -> tuple[dict[str, Any], dict[str, Any]]:
        r = await self.client.call_tool("charge_order", {"order": order, "cents": cents}, meta={IDEMPOTENCY_KEY: key})
        dumped = r.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped, self.last()


def text_of(result: dict[str, Any]) -> str:
    return str(((result.get("content") or [{}])[0]).get("text", ""))


async def scenario(url: str, routes_file: str, replicas: int, lease_ms: int, checks: Checks) -> dict[str, Any]:
    summary: dict[str, Any] = {}

    async def on_elicit(_ctx: Any, _params: Any) -> types.ElicitResult:
        # Input inside a task is answered through tasks/update, never asked this way.
        return types.ElicitResult(action="decline")

    # No keep-alive: each request opens a connection of its own, which the proxy sends to the next replica.
    http = httpx2.AsyncClient(limits=httpx2.Limits(max_keepalive_connections=0),
                              timeout=httpx2.Timeout(30, read=60))
    async with http, Client(streamable_http_client(url, http_client=http), mode="auto", read_timeout_seconds=30,
                            elicitation_callback=on_elicit, extensions=[advertise(TASKS)]) as client:
        run = Run(client, routes_file, replicas, checks)
        checks.check("protocol 2026-07-28", client.protocol_version == "2026-07-28", client.protocol_version)
        # Listed once, here: `call_tool` validates results against the listed output schemas, and would list the
        # tools itself (one more request, on the next replica) on its first call.
        listed = {tool.name for tool in (await client.list_tools()).tools}
        checks.check("the replicas' tools are listed",
                     {"work_a_while", "ask_whose_order", "charge_order"} <= listed, listed)

        # 1. A task started on one replica, polled through every replica, cancelled through another.
        task, created = await run.start_task("work_a_while", {"ms": 30000})
        owner = created["index"]
        summary["cancelled_task_owner"] = created["replica"]
        seen: dict[str, str] = {}
        for _ in range(replicas):
            status, route = await run.get(task)
            seen[route["replica"]] = str(status.get("status"))
        checks.check("tasks/get through every replica reads the task working",
                     len(seen) == replicas and set(seen.values()) == {"working"}, seen)
        await run.steer_off(owner)
        cancelled = await run.send(CancelTask(params=types.CancelTaskRequestParams(taskId=task)))
        route = run.last()
        checks.check(f"tasks/cancel through another replica ({route['replica']}) than the owner ({created['replica']})",
                     route["method"] == "tasks/cancel" and route["index"] != owner and "rpcError" not in cancelled,
                     (cancelled, route))
        seen = {}
        for _ in range(replicas):
            status, route = await run.get(task)
            seen[route["replica"]] = str(status.get("status"))
        checks.check("the task reads cancelled through every replica",
                     len(seen) == replicas and set(seen.values()) == {"cancelled"}, seen)

        # 2. A task's input request, answered through another replica than the one running it.
        task, created = await run.start_task("ask_whose_order", {"order": "o-7"})
        owner = created["index"]
        status = await run.poll(task, ("input_required", "completed", "failed", "cancelled"))
        requests = status.get("inputRequests") or {}
        checks.check("the task asks for input (input_required, with inputRequests)",
                     status.get("status") == "input_required" and "owner" in requests, status)
        await run.steer_off(owner)
        update = UpdateTask(params={"taskId": task, "inputResponses": {
            "owner": {"action": "accept", "content": {"name": "Ada"}}}})
        answered = await run.send(update)
        route = run.last()
        checks.check(f"tasks/update through another replica ({route['replica']}) than the owner ({created['replica']})",
                     route["method"] == "tasks/update" and route["index"] != owner and "rpcError" not in answered,
                     (answered, route))
        status = await run.poll(task, ("completed", "failed", "cancelled"))
        expected = f"o-7 belongs to Ada (asked by {created['replica']})"
        checks.check("the task completes with the answer, on its own replica",
                     status.get("status") == "completed" and text_of(status.get("result") or {}) == expected, status)
        answered_task, answered_result = task, status.get("result")

        # 3. One write, retried with its key through all three replicas: one result, made by the first.
        answers = [await run.charge("o-1", 4200, "charge-o-1") for _ in range(replicas)]
        served = {route["replica"] for _, route in answers}
        checks.check("the write and its retries went to every replica", len(served) == replicas, served)
        first, first_route = answers[0]
        content = first.get("structuredContent") or {}
        checks.check("the write ran on the replica it reached first",
                     first.get("isError") is False and content.get("replica") == first_route["replica"], first)
        checks.check("every retry is answered with the recorded result",
                     all(a.get("structuredContent") == content for a, _ in answers[1:]), answers)

        # 4. A replica killed mid-task.
        before, _ = await run.charge("o-2", 1500, "charge-o-2")
        doomed, created = await run.start_task("work_a_while", {"ms": 30000})
        victim = created["index"]
        await run.steer_off(victim)
        survivor_task, survivor = await run.start_task("work_a_while", {"ms": 2500})
        checks.check("a second task runs on another replica", survivor["index"] != victim, (created, survivor))
        summary["lost_task_owner"] = created["replica"]
        print(f"kill {created['replica']}", flush=True)
        reply = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        killed_at = time.monotonic()
        checks.check("the replica was killed", reply.strip() == "killed", reply)

        status = await run.poll(doomed, ("completed", "failed", "cancelled"), seconds=(lease_ms + 10000) / 1000)
        lost_after_ms = round((time.monotonic() - killed_at) * 1000)
        summary["lost_after_ms"] = lost_after_ms
        error = status.get("error") or {}
        checks.check("the killed replica's task reads failed with task_lost through a survivor",
                     status.get("status") == "failed" and (error.get("data") or {}).get("code") == "task_lost",
                     status)
        checks.check(f"... within the lease ({lease_ms} ms) plus {LOST_MARGIN_MS} ms: {lost_after_ms} ms",
                     lost_after_ms <= lease_ms + LOST_MARGIN_MS, lost_after_ms)
        checks.check("the read came from a survivor", run.last()["index"] != victim, run.last())

        # Nothing else lost or duplicated.
        status = await run.poll(survivor_task, ("completed", "failed", "cancelled"))
        checks.check("the task on a survivor completes with its result",
                     status.get("status") == "completed"
                     and ((status.get("result") or {}).get("structuredContent") or {}).get("replica")
                     == survivor["replica"], status)
        status, _ = await run.get(answered_task)
        checks.check("the answered task still reads completed, with its result",
                     status.get("status") == "completed" and status.get("result") == answered_result, status)
        again = [await run.charge("o-2", 1500, "charge-o-2") for _ in range(2)]
        checks.check("a write made before the kill, retried through both survivors, is answered as recorded",
                     all(a.get("structuredContent") == before.get("structuredContent") for a, _ in again)
                     and len({route["index"] for _, route in again}) == 2, (before, again))
        fresh = [await run.charge("o-3", 700, "charge-o-3") for _ in range(2)]
        checks.check("a new write through the survivors runs once",
                     fresh[0][0].get("isError") is False
                     and fresh[1][0].get("structuredContent") == fresh[0][0].get("structuredContent"), fresh)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--routes", required=True, help="the proxy's file of routes, one JSON line a connection")
    parser.add_argument("--replicas", type=int, default=3, help="how many replicas the proxy sends to")
    parser.add_argument("--lease-ms", type=int, default=2000, help="the replicas' task lease, in milliseconds")
    parser.add_argument("url", help="the proxy's MCP endpoint")
    args = parser.parse_args()
    checks = Checks()
    summary: dict[str, Any] = {}
    try:
        summary = asyncio.run(asyncio.wait_for(
            scenario(args.url, args.routes, args.replicas, args.lease_ms, checks), TIMEOUT_SECONDS))
    except Exception as e:  # a crash is a failed check, with what happened
        checks.check("the run completed", False, repr(e))
    print(f"summary {json.dumps(summary)}", flush=True)
    print(f"python replicas: {checks.passed} passed, {len(checks.failed)} failed", flush=True)
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
