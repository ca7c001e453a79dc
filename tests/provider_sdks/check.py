"""Checks what keel sends each provider with that provider's own Python SDK.

    python tests/provider_sdks/check.py target/provider-sdks/dump.json

The dump (written by tests/tests/provider_sdks.rs) holds, for every tool, its tool list entry for each provider and
each provider's reply to a success and to an error of it. For every tool this checks:

- each tool list entry against the SDK's type for it: `ollama.Tool`, the `openai` SDK's
  `ChatCompletionFunctionToolParam` (Chat Completions) and responses `FunctionToolParam`, `anthropic.types.ToolParam`,
  `google.genai.types.FunctionDeclaration` and `mcp.types.Tool`. Validation is strict: what the SDK would silently
  drop or change (its validated value, dumped with `exclude_none=True, by_alias=True` for pydantic models, compared
  with the input) is a finding, as is a validation error;
- each reply, for the success and the error: `ollama.Message`, `ChatCompletionToolMessageParam`, the responses input
  item `FunctionCallOutput`, `anthropic.types.ToolResultBlockParam` (and the turn's `MessageParam`),
  `google.genai.types.Part` (and the turn's `Content`), `mcp.types.CallToolResult` (whose `structuredContent` must
  also be valid against the tool's `outputSchema`, as the MCP SDK's client checks);
- every input schema of a provider whose format is JSON Schema (OpenAI `parameters`, Anthropic `input_schema`, Gemini
  `parametersJsonSchema`, MCP `inputSchema` and `outputSchema`) against the JSON Schema 2020-12 meta-schema;
- Gemini `parametersJsonSchema` against `google.genai.types.JSONSchema`, the SDK's model of the JSON Schema subset
  Gemini takes (strictly, as above);
- every OpenAI entry with `"strict": true`: its `parameters` come back unchanged from the `openai` SDK's own strict
  transform (`openai.lib._pydantic._ensure_strict_json_schema`, what `openai.pydantic_function_tool` applies);
- every Anthropic `input_examples` item against that entry's `input_schema`; and that some tool of the dump has
  `input_examples` at all, so that `anthropic.types.ToolParam` is checked on them;
- the entries a strict-mode setting changes (`strict_entries`): Anthropic's with `Strict::WhenPossible` against
  `anthropic.types.ToolParam` (which takes `strict: bool`), and, with `"strict": true`, its `input_schema` unchanged
  by the `anthropic` SDK's own strict transform (`anthropic.lib._parse._transform.transform_schema`); OpenAI's with
  `Strict::Off` against the same types as above, with `"strict": false`;
- request bodies with a tool choice that allows a subset of the tools (`requests`): Chat Completions' `tool_choice`
  against `ChatCompletionToolChoiceOptionParam` (`allowed_tools`), Responses' against `response_create_params.ToolChoice`
  (`ToolChoiceAllowedParam`), Gemini's `toolConfig` against `google.genai.types.ToolConfig`
  (`allowedFunctionNames`, modes `VALIDATED` and `ANY`), Anthropic's `tool_choice` against `ToolChoiceParam` and
  each of its (narrowed) `tools` against `ToolParam`; and that each names only tools of its list;
- request bodies with the providers' own tool search (`deferred`): every Anthropic tool entry against
  `anthropic.types.ToolUnionParam` (the deferred ones with `defer_loading`, and `tool_search_tool_bm25`), every
  Responses one against `responses.ToolParam` (deferred functions with `defer_loading` in namespaces, and
  `tool_search`); one search tool in each;
- what the model reads in every entry: no generated `title` (`__KeelArgs`, `Array_of_T`, a primitive type's name),
  no rustdoc link markup (``[`Item`]``) in a description, and `properties` in the order of `required` (declaration
  order, as schemars lists `required`).

A `null` that a pydantic dump leaves out (`exclude_none`) is not counted as dropped. What an SDK drops at a place
where keel reports a loss (the dump's `losses`, from `Codec::losses`, which `keel check` prints) is known, not a
finding: it is counted and printed as such, so every loss the SDKs show must be one keel reports. Prints one line
per finding (with the tools it concerns) and exits 1 if there is any; the last line counts them.
"""

import copy
import json
import re
import sys
from importlib.metadata import version

import anthropic.types
import jsonschema
import mcp.types
import ollama
from google.genai import types as genai
from anthropic.lib._parse._transform import transform_schema as anthropic_strict_transform
from openai.lib._pydantic import _ensure_strict_json_schema
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionToolChoiceOptionParam,
    ChatCompletionToolMessageParam,
)
from openai.types.responses.response_create_params import ToolChoice as ResponsesToolChoice
from openai.types.responses import FunctionToolParam
from openai.types.responses import ToolParam as ResponsesToolParam
from openai.types.responses.response_input_param import FunctionCallOutput
from pydantic import TypeAdapter, ValidationError

SDKS = ["ollama", "openai", "anthropic", "google-genai", "mcp", "jsonschema"]
PROVIDERS = ["ollama", "openai-chat", "openai-responses", "anthropic", "gemini", "mcp"]


def pointer(path):
    return "/" + "/".join(str(p) for p in path)


def differences(before, after, path=(), report_added=False):
    """What changed from `before` to `after`: dropped and changed values (and added ones, when asked)."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key, value in before.items():
            if key not in after:
                if value is not None or report_added:
                    out.append(f"dropped {pointer((*path, key))}")
            else:
                out.extend(differences(value, after[key], (*path, key), report_added))
        if report_added:
            out.extend(f"added {pointer((*path, key))}: {json.dumps(after[key])}" for key in after if key not in before)
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        out = []
        for i, (b, a) in enumerate(zip(before, after)):
            out.extend(differences(b, a, (*path, i), report_added))
        return out
    same_kind = isinstance(before, bool) == isinstance(after, bool)
    if before != after or not same_kind:
        return [f"changed {pointer(path)}: {short(before)} became {short(after)}"]
    return []


def short(value, limit=160):
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def materialise(value):
    """Lists for the lazy iterables pydantic returns for `Iterable[...]` fields of TypedDicts."""
    if isinstance(value, dict):
        return {k: materialise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [materialise(v) for v in value]
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return value
    if hasattr(value, "__iter__"):
        return [materialise(v) for v in value]
    return value


def model(cls, name):
    """A pydantic model: what `model_validate` keeps, dumped as the SDKs send it."""
    return name, lambda value: cls.model_validate(value).model_dump(mode="json", exclude_none=True, by_alias=True)


def typed_dict(cls, name):
    """A TypedDict of the openai or anthropic SDK, validated with a pydantic TypeAdapter."""
    adapter = TypeAdapter(cls)
    return name, lambda value: materialise(adapter.validate_python(value))


ENTRY_TYPES = {
    "ollama": model(ollama.Tool, "ollama.Tool"),
    "openai-chat": typed_dict(ChatCompletionFunctionToolParam, "openai ChatCompletionFunctionToolParam"),
    "openai-responses": typed_dict(FunctionToolParam, "openai responses FunctionToolParam"),
    "anthropic": typed_dict(anthropic.types.ToolParam, "anthropic ToolParam"),
    "gemini": model(genai.FunctionDeclaration, "google.genai FunctionDeclaration"),
    "mcp": model(mcp.types.Tool, "mcp Tool"),
}

REPLY_TYPES = {
    "ollama": model(ollama.Message, "ollama.Message"),
    "openai-chat": typed_dict(ChatCompletionToolMessageParam, "openai ChatCompletionToolMessageParam"),
    "openai-responses": typed_dict(FunctionCallOutput, "openai responses FunctionCallOutput"),
    "anthropic": typed_dict(anthropic.types.ToolResultBlockParam, "anthropic ToolResultBlockParam"),
    "gemini": model(genai.Part, "google.genai Part"),
    "mcp": model(mcp.types.CallToolResult, "mcp CallToolResult"),
}

# What some tool of the dump must exercise, so that the SDK types above are checked on it.
COVERED = {"anthropic input_examples", "defer_loading", "openai-responses namespace"}

GEMINI_JSON_SCHEMA = model(genai.JSONSchema, "google.genai JSONSchema")

# The `tool_choice` (Gemini: `toolConfig`) of each API's request.
# The union of every tool a request may list, for the bodies with the providers' own tool search.
TOOL_UNION_TYPES = {
    "anthropic": typed_dict(anthropic.types.ToolUnionParam, "anthropic ToolUnionParam"),
    "openai-responses": typed_dict(ResponsesToolParam, "openai responses ToolParam"),
}

SEARCH_TOOL_TYPES = {
    "anthropic": {"tool_search_tool_bm25_20251119", "tool_search_tool_regex_20251119"},
    "openai-responses": {"tool_search"},
}

CHOICE_TYPES = {
    "openai-chat": typed_dict(ChatCompletionToolChoiceOptionParam, "openai ChatCompletionToolChoiceOptionParam"),
    "openai-responses": typed_dict(ResponsesToolChoice, "openai responses ToolChoice"),
    "anthropic": typed_dict(anthropic.types.ToolChoiceParam, "anthropic ToolChoiceParam"),
    "gemini": model(genai.ToolConfig, "google.genai ToolConfig"),
}

# The type of each message of a turn's replies (`Codec::replies`), where it is not the reply's own.
TURN_TYPES = {
    "anthropic": typed_dict(anthropic.types.MessageParam, "anthropic MessageParam"),
    "gemini": model(genai.Content, "google.genai Content"),
}


def input_schemas(provider, entry):
    """The JSON Schemas of an entry, by where they are."""
    if provider == "openai-chat":
        return {"function.parameters": entry.get("function", {}).get("parameters")}
    if provider == "openai-responses":
        return {"parameters": entry.get("parameters")}
    if provider == "anthropic":
        return {"input_schema": entry.get("input_schema")}
    if provider == "gemini":
        return {"parametersJsonSchema": entry.get("parametersJsonSchema")}
    if provider == "mcp":
        schemas = {"inputSchema": entry.get("inputSchema")}
        if "outputSchema" in entry:
            schemas["outputSchema"] = entry["outputSchema"]
        return schemas
    return {}


def strict_parameters(provider, entry):
    """The `parameters` of an OpenAI entry in strict mode, or None."""
    if provider == "openai-chat":
        function = entry.get("function", {})
        return function.get("parameters") if function.get("strict") is True else None
    if provider == "openai-responses":
        return entry.get("parameters") if entry.get("strict") is True else None
    return None


def validation_error(e):
    lines = [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()[:3]]
    more = f" (and {e.error_count() - 3} more)" if e.error_count() > 3 else ""
    return "; ".join(lines) + more


# Titles schemars makes up for types without a name of their own, and the one keel's argument structs get.
GENERATED_TITLE = re.compile(
    r"^(__.*|(Array|Set|Map|Nullable|Tuple)_of_.*|null|boolean|string|number|integer|array|object"
    r"|u?int(8|16|32|64|128)?|double|float|uint|int)$"
)
# Rustdoc intra-doc links: [`Item`], [`Item`][target], [Item][target]; a markdown link [text](url) is fine.
RUSTDOC_LINK = re.compile(r"\[`[^`\]]+`\](?!\()|\[[^\]]+\]\[[^\]]*\]")


def walk(value, path=()):
    """Every JSON object under `value`, with its path."""
    if isinstance(value, dict):
        yield path, value
        for key, v in value.items():
            yield from walk(v, (*path, key))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk(v, (*path, i))


class Checker:
    def __init__(self, format_losses):
        # Each finding's text, with the tools it concerns, in the order found.
        self.findings = {}
        # What an SDK dropped where keel reports a loss: the same, by text.
        self.known = {}
        self.checks = 0
        # Which of COVERED the dump exercised.
        self.covered = set()
        # The pointers of each provider's reply-format losses (`tool` `*`).
        self.format_losses = {p: {loss["at"] for loss in losses} for p, losses in format_losses.items()}

    def finding(self, tool, where, what):
        self.findings.setdefault(f"{where}: {what}", []).append(f"{tool['crate']}/{tool['name']}")

    def sdk_type(self, tool, where, sdk, value, reported=()):
        """Validates `value` with an SDK type; a finding for an error and for whatever the SDK drops or changes,
        unless it drops it where keel reports a loss (`reported`: JSON pointers)."""
        name, validate = sdk
        self.checks += 1
        try:
            kept = validate(copy.deepcopy(value))
        except ValidationError as e:
            self.finding(tool, where, f"{name} rejects it: {validation_error(e)}")
            return
        for d in differences(value, kept):
            dropped = d.removeprefix("dropped ") if d.startswith("dropped ") else None
            if dropped is not None and any(dropped == at or dropped.startswith(at + "/") for at in reported):
                self.known.setdefault(f"{where}: {name} {d} (reported by keel)", []).append(tool["name"])
            else:
                self.finding(tool, where, f"{name} {d}")

    def meta_schema(self, tool, where, schema):
        self.checks += 1
        if not isinstance(schema, dict):
            self.finding(tool, where, f"no schema: {short(schema)}")
            return
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as e:
            self.finding(tool, where, f"not a valid JSON Schema 2020-12: {e.message} at {pointer(e.absolute_path)}")

    def strict(self, tool, where, parameters):
        self.checks += 1
        transformed = copy.deepcopy(parameters)
        try:
            transformed = _ensure_strict_json_schema(transformed, path=(), root=transformed)
        except (TypeError, ValueError, AssertionError, KeyError) as e:
            self.finding(tool, where, f"the openai SDK's strict transform fails: {e}")
            return
        for d in differences(parameters, transformed, report_added=True):
            self.finding(tool, where, f"the openai SDK's strict transform {d}")

    def anthropic_strict(self, tool, where, schema):
        """A strict `input_schema` comes back unchanged from the anthropic SDK's own strict transform."""
        self.checks += 1
        try:
            transformed = anthropic_strict_transform(copy.deepcopy(schema))
        except (TypeError, ValueError, AssertionError, KeyError) as e:
            self.finding(tool, where, f"the anthropic SDK's strict transform fails: {e}")
            return
        for d in differences(schema, transformed, report_added=True):
            self.finding(tool, where, f"the anthropic SDK's strict transform {d}")

    def strict_entries(self, tool):
        for provider, entry in tool.get("strict_entries", {}).items():
            where = f"{provider} entry ({'strict' if provider == 'anthropic' else 'strict off'})"
            reported = {loss["at"] for loss in tool.get("strict_losses", {}).get(provider, [])}
            self.sdk_type(tool, where, ENTRY_TYPES[provider], entry, reported)
            for at, schema in input_schemas(provider, entry).items():
                self.meta_schema(tool, f"{where} {at}", schema)
            self.model_text(tool, where, entry)
            if provider == "anthropic":
                if entry.get("strict") is True:
                    self.anthropic_strict(tool, f"{where} input_schema", entry["input_schema"])
                elif not any(loss["at"] == "/strict" for loss in tool.get("strict_losses", {}).get(provider, [])):
                    self.finding(tool, where, "not strict, and no loss says why")
            else:
                flag = entry.get("function", entry).get("strict")
                if flag is not False:
                    self.finding(tool, where, f"\"strict\" is {short(flag)}, not false")

    def model_text(self, tool, where, entry):
        """What the model reads: titles, descriptions and the order of properties."""
        self.checks += 1
        unordered = []
        for path, node in walk(entry):
            if path[-1:] == ("properties",):
                continue  # a map of property names, not a schema
            title = node.get("title")
            if isinstance(title, str) and GENERATED_TITLE.match(title):
                self.finding(tool, where, f"generated title {title!r} at {pointer(path)}")
            description = node.get("description")
            link = RUSTDOC_LINK.search(description) if isinstance(description, str) else None
            if link:
                self.finding(tool, where, f"rustdoc link markup {link.group(0)} in the description at {pointer(path)}")
            properties, required = node.get("properties"), node.get("required")
            if isinstance(properties, dict) and isinstance(required, list):
                listed = [name for name in properties if name in required]
                if listed != [name for name in required if name in properties]:
                    unordered.append(f"{pointer(path)} ({', '.join(listed)})")
        if unordered:
            at = "; ".join(unordered)
            self.finding(tool, where, f"properties not in declaration order (that of `required`) at {at}")

    def input_examples(self, tool, entry):
        """Each of Anthropic's `input_examples` (which `ToolParam` validates above) against the entry's own
        `input_schema`: an example the model is shown must be a call the tool accepts."""
        self.covered.add("anthropic input_examples")
        self.checks += 1
        validator = jsonschema.Draft202012Validator(entry.get("input_schema", {}))
        for i, example in enumerate(entry["input_examples"]):
            errors = sorted(validator.iter_errors(example), key=lambda e: list(e.absolute_path))
            if errors:
                e = errors[0]
                at = pointer(e.absolute_path)
                what = f"input_examples/{i} is not valid against input_schema at {at}: {e.message}"
                self.finding(tool, "anthropic entry", what)

    def structured_content(self, tool, where, reply, output_schema):
        if output_schema is None or "structuredContent" not in reply:
            return
        self.checks += 1
        validator = jsonschema.Draft202012Validator(output_schema)
        errors = sorted(validator.iter_errors(reply["structuredContent"]), key=lambda e: list(e.absolute_path))
        if errors:
            e = errors[0]
            self.finding(tool, where, f"structuredContent is not valid against the outputSchema: {e.message}")

    def requests(self, requests):
        """Request bodies with a tool choice that allows a subset of the tools."""
        who = {"crate": "requests", "name": "allowed_tools"}
        for api, bodies in requests.items():
            for i, body in enumerate(bodies):
                where = f"{api} request[{i}]"
                if api == "gemini":
                    config = body.get("toolConfig")
                    self.sdk_type(who, f"{where} toolConfig", CHOICE_TYPES[api], config)
                    names = [d["name"] for t in body.get("tools", []) for d in t.get("functionDeclarations", [])]
                    calling = (config or {}).get("functionCallingConfig", {})
                    allowed = calling.get("allowedFunctionNames", [])
                    # The SDK's enums take any text with a warning: the mode is checked against its values here.
                    self.checks += 1
                    modes = {m.value for m in genai.FunctionCallingConfigMode}
                    if calling.get("mode") not in modes:
                        self.finding(who, where, f"mode {short(calling.get('mode'))} is not one of {sorted(modes)}")
                else:
                    self.sdk_type(who, f"{where} tool_choice", CHOICE_TYPES[api], body.get("tool_choice"))
                    choice = body.get("tool_choice") or {}
                    if api == "openai-chat":
                        names = [t["function"]["name"] for t in body.get("tools", [])]
                        allowed = [t["function"]["name"] for t in choice.get("allowed_tools", {}).get("tools", [])]
                    elif api == "openai-responses":
                        names = [t["name"] for t in body.get("tools", [])]
                        allowed = [t["name"] for t in choice.get("tools", [])]
                    else:
                        names = [t["name"] for t in body.get("tools", [])]
                        allowed = names
                        for j, entry in enumerate(body.get("tools", [])):
                            self.sdk_type(who, f"{where} tools[{j}]", ENTRY_TYPES["anthropic"], entry)
                self.checks += 1
                if not allowed or any(name not in names for name in allowed):
                    self.finding(who, where, f"allows {short(allowed)}, not a non-empty subset of {short(names)}")

    def deferred(self, bodies):
        """Request bodies with the providers' own tool search: every tool entry against the SDK's union of tool
        params (function tools with `defer_loading`, and the search tool), the deferred ones marked, and the
        provider's search tool there once."""
        who = {"crate": "requests", "name": "deferred"}
        covered = 0
        for api, body in bodies.items():
            tools = body.get("tools", [])
            search = [t for t in tools if t.get("type") in SEARCH_TOOL_TYPES[api]]
            self.checks += 1
            if len(search) != 1:
                self.finding(who, f"{api} tools", f"{len(search)} tool search entries, not one")
            for j, entry in enumerate(tools):
                self.sdk_type(who, f"{api} tools[{j}]", TOOL_UNION_TYPES[api], entry)
                covered += bool(entry.get("defer_loading"))
                # A Responses namespace groups deferred functions, each marked.
                for inner in entry.get("tools", []) if entry.get("type") == "namespace" else []:
                    covered += bool(inner.get("defer_loading"))
                    if not inner.get("defer_loading"):
                        self.finding(who, f"{api} tools[{j}] {inner.get('name')}", "in a namespace, not deferred")
                    else:
                        self.covered.add("openai-responses namespace")
        if covered:
            self.covered.add("defer_loading")

    def tool(self, tool):
        self.strict_entries(tool)
        entries = tool["entries"]
        for provider in PROVIDERS:
            if provider not in entries:
                self.finding(tool, provider, "no tool list entry")
                continue
            entry = entries[provider]
            reported = {loss["at"] for loss in tool["losses"].get(provider, [])}
            self.sdk_type(tool, f"{provider} entry", ENTRY_TYPES[provider], entry, reported)
            for where, schema in input_schemas(provider, entry).items():
                self.meta_schema(tool, f"{provider} {where}", schema)
            if provider == "gemini":
                schema = entry.get("parametersJsonSchema")
                self.sdk_type(tool, "gemini parametersJsonSchema", GEMINI_JSON_SCHEMA, schema)
            parameters = strict_parameters(provider, entry)
            if parameters is not None:
                self.strict(tool, f"{provider} strict parameters", parameters)
            self.model_text(tool, f"{provider} entry", entry)
            if provider == "anthropic" and "input_examples" in entry:
                self.input_examples(tool, entry)
        for outcome in ["ok", "error"]:
            replies = tool["replies"][outcome]
            for provider in PROVIDERS:
                reply = replies[provider]["reply"]
                reported = self.format_losses.get(provider, set())
                self.sdk_type(tool, f"{provider} {outcome} reply", REPLY_TYPES[provider], reply, reported)
                turn = replies[provider]["replies"]
                if provider in TURN_TYPES:
                    for i, message in enumerate(turn):
                        self.sdk_type(tool, f"{provider} {outcome} replies[{i}]", TURN_TYPES[provider], message)
                elif turn != [reply]:
                    self.finding(tool, f"{provider} {outcome} replies", f"not the reply alone: {short(turn)}")
                if provider == "mcp":
                    output_schema = entries.get("mcp", {}).get("outputSchema")
                    self.structured_content(tool, f"mcp {outcome} reply", reply, output_schema)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check.py DUMP.json")
    with open(sys.argv[1], encoding="utf-8") as f:
        dump = json.load(f)
    print("provider SDKs: " + ", ".join(f"{sdk} {version(sdk)}" for sdk in SDKS))
    checker = Checker(dump["format_losses"])
    for tool in dump["tools"]:
        checker.tool(tool)
    checker.requests(dump.get("requests", {}))
    checker.deferred(dump.get("deferred", {}))
    for what in COVERED - checker.covered:
        checker.findings.setdefault(f"no tool exercises {what}: the dump no longer covers it", []).append("*")
    for text, tools in checker.known.items():
        print(f"known: {text} [{len(tools)} tool{'s' if len(tools) > 1 else ''}]")
    for text, tools in checker.findings.items():
        print(f"{text} [{len(tools)} tool{'s' if len(tools) > 1 else ''}: {', '.join(tools)}]")
    tools = len(dump["tools"])
    known = len(checker.known)
    print(f"provider SDKs: {checker.checks} checks of {tools} tools, {len(checker.findings)} findings, {known} known")
    sys.exit(1 if checker.findings else 0)


if __name__ == "__main__":
    main()
