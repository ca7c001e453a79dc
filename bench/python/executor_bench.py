"""Seed 000's registry and executor, written with pydantic v2 (the seed's own design), timed on keel's benchmark call.

The call is the one `bench/benches/executor.rs` times: a read tool with a 5-field argument model (two strings, an
enum, a bounded integer, a boolean) and a 5-field result (one of them a list). The executor follows the seed's fixed
order: registered? -> arguments valid (pydantic `model_validate`, strict, extra fields forbidden) -> effect policy ->
handler -> business / internal error -> result valid (`model_validate` on the handler's dict) -> ok (`model_dump`).

Also timed, in the same run: the rejection paths (unknown tool, invalid arguments, approval required) and a Python
floor (dict lookup + `model_validate` + handler, no result validation, no envelope).

Run (from the repository root):

    python3 -m venv target/bench-venv
    target/bench-venv/bin/pip install -r bench/python/requirements.txt
    target/bench-venv/bin/python bench/python/executor_bench.py

Each figure is the median over `--repeat` rounds of a batch of `--number` calls (time.perf_counter via timeit);
rounds interleave the cases, and ratios are medians of per-round ratios.
"""

from __future__ import annotations

import argparse
import logging
import platform
import statistics
import sys
import timeit
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, ValidationError

logger = logging.getLogger("executor_bench")


# --- the seed's registry and executor ------------------------------------------------------------------------------


class ToolEffect(str, Enum):
    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    version: str
    effect: ToolEffect
    arguments_model: type[BaseModel]
    result_model: type[BaseModel]
    handler: Callable[..., Any]


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, ToolDefinition] = {}

    def register(self, definition: ToolDefinition) -> None:
        if definition.name in self._tools:
            raise ValueError(f"tool {definition.name!r} is already registered")
        self._tools[definition.name] = definition

    def get(self, name: str) -> ToolDefinition | None:
        return self._tools.get(name)

    def ollama_schemas(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": d.name,
                    "description": d.description,
                    "parameters": d.arguments_model.model_json_schema(),
                },
            }
            for d in self._tools.values()
        ]


@dataclass(frozen=True)
class ToolCall:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class ToolResult:
    call_id: str
    tool_name: str
    tool_version: str | None
    ok: bool
    data: dict[str, Any] | None
    error: dict[str, Any] | None


@dataclass(frozen=True)
class ExecutionContext:
    allow_side_effects: bool = False


class ToolExecutionError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ToolExecutor:
    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    @staticmethod
    def _failure(call: ToolCall, version: str | None, code: str, message: str) -> ToolResult:
        return ToolResult(call.call_id, call.name, version, False, None, {"code": code, "message": message})

    def execute(self, call: ToolCall, context: ExecutionContext) -> ToolResult:
        definition = self.registry.get(call.name)
        if definition is None:
            return self._failure(call, None, "unknown_tool", f"no tool named {call.name!r} is available")
        try:
            arguments = definition.arguments_model.model_validate(call.arguments)
        except ValidationError:
            # The seed keeps the validator's detail out of the model's context.
            return self._failure(call, definition.version, "invalid_arguments", "the arguments do not match the schema")
        if definition.effect is not ToolEffect.READ and not context.allow_side_effects:
            return self._failure(call, definition.version, "approval_required", f"{definition.name} needs an approval")
        try:
            raw = definition.handler(arguments)
        except ToolExecutionError as e:
            return self._failure(call, definition.version, e.code, e.message)
        except Exception:
            logger.exception("tool %s failed (call %s)", definition.name, call.call_id)
            return self._failure(call, definition.version, "tool_internal_error", "the tool failed")
        try:
            result = definition.result_model.model_validate(raw)
        except ValidationError:
            return self._failure(call, definition.version, "invalid_tool_output", "the result was withheld")
        return ToolResult(call.call_id, definition.name, definition.version, True, result.model_dump(mode="json"), None)


# --- the benchmarked tool ------------------------------------------------------------------------------------------


Severity = Literal["low", "medium", "high"]


class SearchArgs(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    service: str = Field(description="The affected service, e.g. `auth-api`.")
    severity: Severity = Field(description="The least severity to report.")
    query: str = Field(description="Words to look for in the symptom.")
    limit: int = Field(ge=1, le=50, description="How many incidents at most (1 to 50).")
    include_resolved: bool = Field(description="Whether resolved incidents count.")


class Incident(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    incident_id: str
    service: str
    severity: Severity
    symptom: str
    evidence: list[str]


def search_incidents(args: SearchArgs) -> dict[str, Any]:
    return {
        "incident_id": f"INC-{args.limit:03d}",
        "service": args.service,
        "severity": args.severity,
        "symptom": args.query,
        "evidence": ["auth-api timeout", "resolved: no" if args.include_resolved else "database pool exhausted"],
    }


VALID = {"service": "auth-api", "severity": "high", "query": "login returns 502", "limit": 10, "include_resolved": False}
INVALID = dict(VALID, severity="urgent")


def build_executor() -> ToolExecutor:
    registry = ToolRegistry()
    for name, effect in [("search_incidents", ToolEffect.READ), ("file_incident", ToolEffect.WRITE)]:
        registry.register(
            ToolDefinition(name, "Search incidents.", "1.0", effect, SearchArgs, Incident, search_incidents)
        )
    return ToolExecutor(registry)


FLOOR_HANDLERS = {"search_incidents": search_incidents}


def floor(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The Python floor: dict dispatch, `model_validate`, handler (which returns a JSON-ready dict); no result
    validation, no envelope."""
    return FLOOR_HANDLERS[name](SearchArgs.model_validate(arguments))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per case and round")
    parser.add_argument("--repeat", type=int, default=31, help="interleaved rounds; medians are reported")
    opts = parser.parse_args()

    executor = build_executor()
    context = ExecutionContext()
    # Each case answers as expected before it is timed.
    expected = {
        "valid call": (ToolCall("call-1", "search_incidents", VALID), None),
        "unknown_tool": (ToolCall("call-1", "no_such_tool", VALID), "unknown_tool"),
        "invalid_arguments (1 violation)": (ToolCall("call-1", "search_incidents", INVALID), "invalid_arguments"),
        "approval_required": (ToolCall("call-1", "file_incident", VALID), "approval_required"),
    }
    for label, (call, code) in expected.items():
        result = executor.execute(call, context)
        assert (result.error or {}).get("code") == code, (label, result)
    assert executor.execute(expected["valid call"][0], context).data == floor("search_incidents", VALID)

    print(f"python {platform.python_version()} ({platform.python_implementation()}), pydantic {pydantic.VERSION}")
    print(f"{opts.repeat} rounds x {opts.number} calls per case and round (interleaved); median per call, median")
    print("per-round ratio:")

    cases: dict[str, Callable[[], Any]] = {"floor (dict dispatch + model_validate + handler)": lambda: floor(
        "search_incidents", VALID
    )}
    for label, (call, _) in expected.items():
        # The same ToolCall each time: the Rust benches build their ToolCall outside the timed region too.
        cases[f"executor: {label}"] = lambda call=call: executor.execute(call, context)

    # Interleaved rounds: each round times every case once, so load changes hit all cases of a round alike.
    per_call: dict[str, list[float]] = {label: [] for label in cases}
    for label, stmt in cases.items():  # warm-up
        timeit.timeit(stmt, number=opts.number)
    for _ in range(opts.repeat):
        for label, stmt in cases.items():
            per_call[label].append(timeit.timeit(stmt, number=opts.number) / opts.number)

    for ref in ("executor: valid call", "floor (dict dispatch + model_validate + handler)"):
        print(f"\n  ratio to: {ref}")
        for label, times in per_call.items():
            ratio = statistics.median(t / r for t, r in zip(times, per_call[ref]))
            print(f"    {label:<54} {statistics.median(times) * 1e6:8.2f} us  {ratio:6.2f}x")


if __name__ == "__main__":
    sys.exit(main())
