//! What keel sends each provider, checked with that provider's own Python SDK: the tool list entries of every
//! provider for the tools of `tools-rich` and of the examples crate, and the replies to a success and an error of
//! each tool, are written to `target/provider-sdks/dump.json`; `tests/provider_sdks/check.py` validates them with
//! the SDKs' types (what a type would drop is a finding too), the JSON Schema 2020-12 meta-schema, the subset
//! `google-genai` models for Gemini and the `openai` and `anthropic` SDKs' strict-schema transforms, and checks what
//! the model reads (no generated titles, no rustdoc link markup, properties in declaration order). The dump also
//! holds the entries a strict-mode setting changes (Anthropic's strict tool use, OpenAI's strict mode off) and request
//! bodies with a tool choice that allows a subset of the tools, checked against the SDKs' `tool_choice` and
//! `toolConfig` types. It prints one line per finding.
//!
//! The SDKs live in the venv `target/provider-venv`, made by `scripts/provider-sdks.sh`. Without it the test is
//! skipped (and named in the line the test binary ends with), unless peers are required (`CI` set, or
//! `KEEL_REQUIRE_PEERS=1`): then a missing venv is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use keel_tools_agent::{
    AllowedMode, AnthropicClient, GeminiClient, Message, OpenAiClient, ResponsesClient, ToolChoice, Turn,
};
use keel_tools_core::definition::{Origin, ToolDefinition};
use keel_tools_core::executor::CallOptions;
use keel_tools_core::{Approval, Executor, Provider, Registry, Strict, ToolCall, ToolResult, ToolView};
use serde_json::{Map, Value, json};

keel_tools_core::link_tools!(examples, tools_rich);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

/// The tools of the crate whose module path starts with `module`.
fn tools_of(registry: &Registry, module: &str) -> Vec<Arc<ToolDefinition>> {
    registry
        .all()
        .iter()
        .filter(|d| match d.origin() {
            Origin::Compiled { location, .. } => {
                location.module_path == module || location.module_path.starts_with(&format!("{module}::"))
            }
            _ => false,
        })
        .cloned()
        .collect()
}

/// A valid result of `def`: the smallest instance of its result schema ([`example`]), or `null` without one.
fn success(def: &ToolDefinition, call_id: &str) -> ToolResult {
    let data = def.output_schema().map_or(Value::Null, |schema| example(schema, schema));
    ToolResult::success(call_id, def.name(), Some(def.version().to_owned().into()), data)
}

/// A small valid instance of `schema` (within `root`): the first of an `enum`, `const`, the first branch of a union,
/// the required properties only, arrays at their minimum length, numbers at their minimum or 0, strings of `x`s.
fn example(root: &Value, schema: &Value) -> Value {
    let Value::Object(s) = schema else { return Value::Null };
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let target = r.strip_prefix('#').and_then(|p| root.pointer(p)).expect("a local reference");
        return example(root, target);
    }
    if let Some(first) = s.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    if let Some(c) = s.get("const") {
        return c.clone();
    }
    for keyword in ["oneOf", "anyOf"] {
        if let Some(first) = s.get(keyword).and_then(Value::as_array).and_then(|b| b.first()) {
            return example(root, first);
        }
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("null"),
        _ => "object",
    };
    let count = |key: &str| s.get(key).and_then(Value::as_u64).unwrap_or(0) as usize;
    match ty {
        "null" => Value::Null,
        "boolean" => Value::Bool(false),
        "integer" | "number" => s.get("minimum").cloned().unwrap_or(json!(0)),
        "string" => Value::String("x".repeat(count("minLength").max(1))),
        "array" => {
            let item = s.get("items").map_or(Value::Null, |i| example(root, i));
            Value::Array(vec![item; count("minItems")])
        }
        _ => {
            let properties = s.get("properties").and_then(Value::as_object);
            let required = s.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
            let o: Map<String, Value> =
                required.filter_map(|name| Some((name.to_owned(), example(root, properties?.get(name)?)))).collect();
            Value::Object(o)
        }
    }
}

/// A real error of `def`: the executor's answer to arguments with a property no tool declares.
async fn error(executor: &Executor, def: &ToolDefinition, call_id: &str) -> ToolResult {
    let arguments = json!({"not_a_parameter": true});
    let options = CallOptions::new().approve(Approval::new(def.name(), &arguments));
    let result = executor.call_with(ToolCall::new(call_id, def.name(), arguments), &options).await;
    assert_eq!(result.code(), Some("invalid_arguments"), "{}: {result:?}", def.name());
    result
}

/// Each provider's reply to `result`, alone and as the turn's messages.
fn replies(view: &ToolView, result: &ToolResult) -> Value {
    let mut m = Map::new();
    for provider in Provider::ALL {
        let codec = view.codec(provider);
        let entry = json!({"reply": codec.reply(result), "replies": codec.replies(std::slice::from_ref(result))});
        m.insert(provider.as_str().to_owned(), entry);
    }
    Value::Object(m)
}

/// The dump the checker reads: `{"tools": [{"name", "crate", "entries": {provider: entry}, "losses": {provider:
/// [loss]}, "replies": {"ok" | "error": {provider: {"reply", "replies"}}}}], "format_losses": {provider: [loss]}}`
/// (each loss as `Codec::losses` reports it).
fn dump() -> Value {
    let registry = Registry::from_inventory().expect("the registry builds");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let mut tools = Vec::new();
    for (krate, module) in [("tools-rich", "tools_rich"), ("examples", "examples")] {
        let defs = tools_of(&registry, module);
        assert!(!defs.is_empty(), "no tools of {krate} are linked");
        let view = ToolView::new(defs);
        let executor =
            Executor::builder(view.clone()).state(examples::cards::store(true)).build().expect("the executor builds");
        for (i, def) in view.iter().enumerate() {
            let mut entries = Map::new();
            let mut losses = Map::new();
            for provider in Provider::ALL {
                let codec = view.codec(provider);
                let entry = codec.tool(def.name()).cloned().expect("every tool is listed");
                assert_eq!(shown_name(provider, &entry), codec.shown_name(def.name()));
                entries.insert(provider.as_str().to_owned(), entry);
                let of_tool: Vec<Value> = codec
                    .losses()
                    .iter()
                    .filter(|l| l.tool == def.name())
                    .map(|l| serde_json::to_value(l).expect("a loss serialises"))
                    .collect();
                losses.insert(provider.as_str().to_owned(), Value::Array(of_tool));
            }
            // The entries a strict-mode setting changes: Anthropic's strict tool use, OpenAI's strict mode off.
            let mut strict_entries = Map::new();
            let mut strict_losses = Map::new();
            for (provider, strict) in [
                (Provider::Anthropic, Strict::WhenPossible),
                (Provider::OpenAiChat, Strict::Off),
                (Provider::OpenAiResponses, Strict::Off),
            ] {
                let codec = view.codec(provider).with_strict(strict);
                let entry = codec.tool(def.name()).cloned().expect("every tool is listed");
                strict_entries.insert(provider.as_str().to_owned(), entry);
                let of_tool: Vec<Value> = codec
                    .losses()
                    .iter()
                    .filter(|l| l.tool == def.name())
                    .map(|l| serde_json::to_value(l).expect("a loss serialises"))
                    .collect();
                strict_losses.insert(provider.as_str().to_owned(), Value::Array(of_tool));
            }
            let ok = success(def, &format!("call_ok_{i}"));
            let failed = runtime.block_on(error(&executor, def, &format!("call_error_{i}")));
            tools.push(json!({
                "name": def.name(),
                "crate": krate,
                "entries": entries,
                "losses": losses,
                "strict_entries": strict_entries,
                "strict_losses": strict_losses,
                "replies": {"ok": replies(&view, &ok), "error": replies(&view, &failed)},
            }));
        }
    }
    // What each provider's reply format loses, the same for every tool.
    let empty = ToolView::new(Vec::new());
    let format_losses: Map<String, Value> = Provider::ALL
        .iter()
        .map(|&p| {
            let losses = empty.codec(p).losses().iter().map(|l| serde_json::to_value(l).expect("serialises")).collect();
            (p.as_str().to_owned(), Value::Array(losses))
        })
        .collect();
    json!({ "tools": tools, "format_losses": format_losses, "requests": requests(&registry), "deferred": deferred(&registry) })
}

/// Request bodies with the providers' own tool search (`keel_tools_agent::deferral`): the examples' and tools-rich's
/// tools, all but two deferred, on the two APIs that search tools themselves: `{api: body}`.
fn deferred(registry: &Registry) -> Value {
    // The dotted names of tools-rich make OpenAI Responses namespaces.
    let mut tools = tools_of(registry, "examples");
    tools.extend(tools_of(registry, "tools_rich"));
    let view = ToolView::new(tools);
    let later: Vec<String> = view.names().skip(2).map(str::to_owned).collect();
    let all = view.defer(&later).expect("the view's own tools").with_tool_search().expect("the search tool is added");
    let shown = all.shown(&keel_tools_core::deferral::Surfaced::new());
    let messages = [Message::user("Which cards are still to do?")];
    let turn = Turn::new(&messages, &shown).with_deferred(Some(&all));
    let base = "http://127.0.0.1:1";
    let anthropic = AnthropicClient::builder(base, "m").build().and_then(|c| c.request_body(&turn));
    let responses = ResponsesClient::builder(format!("{base}/v1"), "m").build().and_then(|c| c.request_body(&turn));
    json!({
        "anthropic": anthropic.expect("the request body is made"),
        "openai-responses": responses.expect("the request body is made"),
    })
}

/// Request bodies with a tool choice that allows a subset of the tools, for each API with such a form (and
/// Anthropic's, whose client narrows the list), in both modes: `{api: [body, ...]}`.
fn requests(registry: &Registry) -> Value {
    let view = ToolView::new(tools_of(registry, "examples"));
    let allowed: Vec<String> = view.names().take(2).map(str::to_owned).collect();
    let messages = [Message::user("Which cards are still to do?")];
    let turn = Turn::new(&messages, &view);
    let mut out = Map::new();
    for mode in [AllowedMode::Auto, AllowedMode::Required] {
        let choice = ToolChoice::allowed(allowed.clone(), mode);
        let base = "http://127.0.0.1:1";
        let bodies = [
            (
                "openai-chat",
                OpenAiClient::builder(format!("{base}/v1"), "m")
                    .tool_choice(choice.clone())
                    .build()
                    .and_then(|c| c.request_body(&turn)),
            ),
            (
                "openai-responses",
                ResponsesClient::builder(format!("{base}/v1"), "m")
                    .tool_choice(choice.clone())
                    .build()
                    .and_then(|c| c.request_body(&turn)),
            ),
            (
                "gemini",
                GeminiClient::builder(base, "m")
                    .tool_choice(choice.clone())
                    .build()
                    .and_then(|c| c.request_body(&turn)),
            ),
            (
                "anthropic",
                AnthropicClient::builder(base, "m")
                    .tool_choice(choice.clone())
                    .strict(Strict::WhenPossible)
                    .build()
                    .and_then(|c| c.request_body(&turn)),
            ),
        ];
        for (api, body) in bodies {
            let body = body.expect("the request body is made");
            let list = out.entry(api).or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(list) = list {
                list.push(body);
            }
        }
    }
    Value::Object(out)
}

/// The name a tool list entry shows.
fn shown_name(provider: Provider, entry: &Value) -> &str {
    let name = match provider {
        Provider::Ollama | Provider::OpenAiChat => &entry["function"]["name"],
        _ => &entry["name"],
    };
    name.as_str().unwrap_or_default()
}

#[test]
fn provider_sdks_accept_what_keel_sends() {
    let root = root();
    let dump = dump();
    let dir = root.join("target").join("provider-sdks");
    std::fs::create_dir_all(&dir).expect("target/provider-sdks");
    let path = dir.join("dump.json");
    let text = serde_json::to_string_pretty(&dump).expect("the dump serialises");
    std::fs::write(&path, text).expect("the dump is written");

    let python = root.join("target").join("provider-venv").join("bin").join("python");
    if !python.exists() {
        keel_tests::missing_peer(&keel_tests::peers::PROVIDER_SDKS, "the venv target/provider-venv is missing");
        return;
    }
    let output = Command::new(&python)
        .arg(root.join("tests").join("provider_sdks").join("check.py"))
        .arg(&path)
        .current_dir(&root)
        .output()
        .expect("the checker starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the provider SDKs report findings:\n{stdout}{stderr}");
    println!("{stdout}");
}
