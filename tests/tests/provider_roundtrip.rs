//! The round trip of every tool of `tools-rich` through every provider's codec, as a property: whatever valid
//! arguments a model sends, in its provider's format, the handler receives exactly them and the reply is in that
//! provider's format.
//!
//! For each provider and tool, arguments are generated (with the instance generator of `keel-fuzz-harness`) from the
//! input schema of the tool list entry the model is shown:
//!
//! - OpenAI Chat and Responses, Anthropic, Gemini and MCP: the entry's schema itself. For an OpenAI entry in strict
//!   mode (`"strict": true`) every property is required and an optional one nullable, so, as strict models do, every
//!   absent optional property is spelled `null`.
//! - Ollama: its schema states bounds, unions and map values only in the descriptions, so the arguments come from
//!   the canonical schema (which those descriptions spell out), with the `null`s the Ollama schema has no type for
//!   left out, and must be valid against the Ollama schema as rendered.
//!
//! Each case builds the assistant message as that provider's model sends it (the entry's name; JSON text arguments
//! for OpenAI, objects elsewhere; ids where the provider has them, sometimes none where they are optional), reads
//! it with the codec, runs the call with an executor of the same view (a `write` tool with an approval of the
//! arguments as sent), and checks that the call ends `ok`, that the handler received the generated arguments
//! (compared as typed values: what it deserialised, serialised back, against the arguments deserialised into the same
//! types, the `null`s that stand for an absent property removed), and that `codec.reply` is that provider's reply.
//!
//! `PROPTEST_CASES=N` overrides the number of cases per provider and tool.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use keel_fuzz_harness::{Oracle, block_on, instance};
use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::executor::CallOptions;
use keel_tools_core::{Approval, Codec, Executor, Provider, Registry, ToolCall, ToolResult, ToolView};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

keel_tools_core::link_tools!(tools_rich);

const CASES: u32 = 48;

/// Call ids and conversation indices, unique across the tests of this binary (handlers record by call id).
static NEXT: AtomicUsize = AtomicUsize::new(1);

fn runner() -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(CASES);
    // No regression files: a failure prints its minimal input, which belongs in a named test.
    TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() })
}

fn view() -> ToolView {
    let registry = Registry::from_inventory().expect("the registry builds");
    registry.view().names(tools_rich::TOOLS).build().expect("the tools of tools-rich are linked")
}

/// The name an entry shows.
fn shown_name(provider: Provider, entry: &Value) -> &str {
    let name = match provider {
        Provider::Ollama | Provider::OpenAiChat => &entry["function"]["name"],
        _ => &entry["name"],
    };
    name.as_str().unwrap_or_default()
}

/// The input schema of an entry.
fn parameters(provider: Provider, entry: &Value) -> &Value {
    match provider {
        Provider::Ollama | Provider::OpenAiChat => &entry["function"]["parameters"],
        Provider::OpenAiResponses => &entry["parameters"],
        Provider::Anthropic => &entry["input_schema"],
        Provider::Gemini => &entry["parametersJsonSchema"],
        Provider::Mcp => &entry["inputSchema"],
        other => panic!("this test has no hand-written entry for {other:?}: add one"),
    }
}

fn is_strict(provider: Provider, entry: &Value) -> bool {
    match provider {
        Provider::OpenAiChat => entry["function"]["strict"] == true,
        Provider::OpenAiResponses => entry["strict"] == true,
        _ => false,
    }
}

/// The entry of `def` in the codec's tool list.
fn entry<'a>(codec: &'a Codec, def: &ToolDefinition) -> &'a Value {
    let shown = codec.shown_name(def.name());
    let found = codec.tools().iter().find(|t| shown_name(codec.provider(), t) == shown);
    found.unwrap_or_else(|| panic!("{}: `{shown}` is not in the tool list", codec.provider().as_str()))
}

/// Removes the `null`s of properties whose (Ollama) schema has no `null` type: such a model leaves the property out.
fn leave_out_untyped_nulls(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(o) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            o.retain(|k, v| {
                !v.is_null() || properties.and_then(|p| p.get(k)).is_none_or(|s| Oracle::new(s, true).valid_strict(v))
            });
            for (k, v) in o.iter_mut() {
                if let Some(s) = properties.and_then(|p| p.get(k)) {
                    leave_out_untyped_nulls(s, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                items.iter_mut().for_each(|item| leave_out_untyped_nulls(s, item));
            }
        }
        _ => {}
    }
}

/// How one case's message is built: whether an optional id is sent (Ollama, Gemini), and whether empty arguments
/// are left out (Gemini, as it does for functions without parameters) or the JSON text is pretty-printed (OpenAI).
#[derive(Debug, Clone, Copy)]
struct Shape {
    with_id: bool,
    variant: bool,
}

/// The assistant message carrying one call, as `provider`'s model sends it, and the id it carries (if any).
fn message(provider: Provider, wire: &str, arguments: &Value, shape: Shape, n: usize) -> (Value, Option<String>) {
    let text = || {
        let text =
            if shape.variant { serde_json::to_string_pretty(arguments) } else { serde_json::to_string(arguments) };
        text.expect("arguments serialise")
    };
    match provider {
        Provider::Ollama => {
            let mut item = json!({"function": {"name": wire, "arguments": arguments}});
            let id = shape.with_id.then(|| format!("call_ollama{n}"));
            if let Some(id) = &id {
                item["id"] = json!(id);
            }
            (json!({"role": "assistant", "content": "", "tool_calls": [item]}), id)
        }
        Provider::OpenAiChat => {
            let id = format!("call_chat{n}");
            let item = json!({"id": id, "type": "function", "function": {"name": wire, "arguments": text()}});
            (json!({"role": "assistant", "content": null, "tool_calls": [item]}), Some(id))
        }
        Provider::OpenAiResponses => {
            let id = format!("call_resp{n}");
            let output = json!([
                {"type": "reasoning", "id": format!("rs_{n}"), "summary": []},
                {"type": "function_call", "id": format!("fc_{n}"), "call_id": id, "name": wire,
                 "arguments": text(), "status": "completed"},
            ]);
            (json!({"id": format!("resp_{n}"), "object": "response", "output": output}), Some(id))
        }
        Provider::Anthropic => {
            let id = format!("toolu_{n}");
            let content = json!([
                {"type": "text", "text": "Let me do that."},
                {"type": "tool_use", "id": id, "name": wire, "input": arguments},
            ]);
            (json!({"role": "assistant", "content": content}), Some(id))
        }
        Provider::Gemini => {
            let mut call = Map::new();
            call.insert("name".into(), json!(wire));
            let empty = arguments.as_object().is_some_and(Map::is_empty);
            if !(empty && shape.variant) {
                call.insert("args".into(), arguments.clone());
            }
            let id = shape.with_id.then(|| format!("gemini-{n}"));
            if let Some(id) = &id {
                call.insert("id".into(), json!(id));
            }
            (json!({"role": "model", "parts": [{"functionCall": call}]}), id)
        }
        Provider::Mcp => {
            let request = json!({
                "jsonrpc": "2.0", "id": n, "method": "tools/call",
                "params": {"name": wire, "arguments": arguments, "_meta": {"progressToken": n}},
            });
            (request, Some(n.to_string()))
        }
        other => panic!("this test has no hand-written message for {other:?}: add one"),
    }
}

/// The reply `provider` expects for the successful call `call` of `def`, shown to the model as `wire`.
fn expected_reply(
    provider: Provider,
    def: &ToolDefinition,
    wire: &str,
    sent_id: Option<&str>,
    r: &ToolResult,
) -> Value {
    let text = r.content_text();
    let data = r.data().cloned().unwrap_or(Value::Null);
    match provider {
        Provider::Ollama => {
            json!({"role": "tool", "tool_name": def.name(), "tool_call_id": r.call_id, "content": text})
        }
        Provider::OpenAiChat => json!({"role": "tool", "tool_call_id": r.call_id, "content": text}),
        Provider::OpenAiResponses => json!({"type": "function_call_output", "call_id": r.call_id, "output": text}),
        Provider::Anthropic => {
            json!({"type": "tool_result", "tool_use_id": r.call_id, "content": text, "is_error": false})
        }
        Provider::Gemini => {
            let mut response = Map::new();
            response.insert("name".into(), json!(wire));
            if let Some(id) = sent_id {
                response.insert("id".into(), json!(id));
            }
            response.insert("response".into(), json!({"output": data}));
            json!({"functionResponse": response})
        }
        Provider::Mcp => {
            let mut m = Map::new();
            m.insert("content".into(), json!([{"type": "text", "text": text}]));
            if data.is_object() {
                m.insert("structuredContent".into(), data);
            }
            m.insert("isError".into(), json!(false));
            Value::Object(m)
        }
        other => panic!("this test has no hand-written reply for {other:?}: add one"),
    }
}

/// What one case saw, for the coverage assertions.
#[derive(Debug, Default)]
struct Seen {
    cases: usize,
    /// Cases whose arguments held a `null` standing for an absent property.
    absent_nulls: usize,
    /// Cases without an id, for providers where it is optional.
    without_id: usize,
}

/// One case: `arguments` sent for `def` through `codec`'s format, run, and checked.
fn check_case(
    codec: &Codec,
    executor: &Executor,
    def: &ToolDefinition,
    arguments: &Value,
    shape: Shape,
    seen: &mut Seen,
) -> Result<(), TestCaseError> {
    let provider = codec.provider();
    let entry = entry(codec, def);
    let wire = shown_name(provider, entry);
    let name = def.name();

    // The arguments are what the model could send: valid against the schema it was shown (for a strict entry, where
    // every property is required and an optional one nullable, with every absent optional property spelled `null`)
    // and, once the nulls that stand for an absent property are removed, against the canonical schema the executor
    // validates.
    let shown = parameters(provider, entry);
    prop_assert!(Oracle::new(shown, true).valid_strict(arguments), "not valid against the entry's schema: {arguments}");
    let canonical = Oracle::new(def.input_schema(), true);
    let Some(handled) = canonical.cleaned(arguments) else {
        let problem = canonical.problem(arguments).unwrap_or_default();
        return Err(TestCaseError::fail(format!(
            "the entry's schema accepts what the canonical schema rejects ({problem}): {arguments}"
        )));
    };
    seen.cases += 1;
    seen.absent_nulls += usize::from(&handled != arguments);
    let expected = tools_rich::typed(name, &handled).map_err(TestCaseError::fail)?;

    // The message as the model sends it, read by the codec.
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let (sent, sent_id) = message(provider, wire, arguments, shape, n);
    seen.without_id += usize::from(sent_id.is_none());
    let parsed = codec.message(&sent, n).map_err(|e| TestCaseError::fail(format!("{e}: {sent}")))?;
    prop_assert_eq!(parsed.calls.len(), 1, "{}", sent);
    let call = parsed.calls[0].clone();
    prop_assert_eq!(call.name(), name, "the wire name `{}` was not mapped back", wire);
    let id = sent_id.clone().unwrap_or_else(|| ToolCall::generated_id(n, wire, Some(arguments)));
    prop_assert_eq!(call.id(), id.as_str());
    prop_assert_eq!(call.arguments().ok(), Some(arguments), "the codec changed the arguments");

    // Run with an approval of the arguments exactly as the model sent them.
    let options = match def.effect() {
        Effect::Read => CallOptions::new(),
        _ => CallOptions::new().approve(Approval::new(name, arguments)),
    };
    let result = block_on(executor.call_with(call, &options));
    let received = tools_rich::take_received(&id);
    prop_assert!(
        result.is_ok(),
        "the call did not end ok{}: {}\nsent: {}",
        if result.code() == Some("approval_required") {
            " (the approval of the arguments as sent was refused)"
        } else {
            ""
        },
        result.to_json(),
        sent
    );
    prop_assert_eq!(&result.call_id, &id);
    let Some(received) = received else {
        return Err(TestCaseError::fail(format!("the handler did not run: {sent}")));
    };
    prop_assert_eq!(&received, &expected, "the handler received other arguments than sent: {}", sent);

    // The reply, in the provider's format, names the call as the model did.
    let reply = codec.reply(&result);
    prop_assert_eq!(&reply, &expected_reply(provider, def, wire, sent_id.as_deref(), &result));
    let replies = codec.replies(std::slice::from_ref(&result));
    let turn = match provider {
        Provider::Anthropic => json!([{"role": "user", "content": [reply]}]),
        Provider::Gemini => json!([{"role": "user", "parts": [reply]}]),
        _ => json!([reply]),
    };
    prop_assert_eq!(Value::Array(replies), turn);
    Ok(())
}

/// Runs the property for every tool of the rich set through `provider`; reports every failing tool at once.
fn round_trip(provider: Provider) -> Vec<(String, Seen)> {
    let view = view();
    let codec = view.codec(provider);
    let executor = Executor::new(view.clone()).expect("the executor builds");
    let mut failures = Vec::new();
    let mut seen_by_tool = Vec::new();
    for def in view.iter() {
        let entry = entry(&codec, def);
        let strategy = match provider {
            Provider::Ollama => {
                let ollama = parameters(provider, entry).clone();
                instance(def.input_schema(), def.input_schema(), 0)
                    .prop_map(move |mut v| {
                        leave_out_untyped_nulls(&ollama, &mut v);
                        v
                    })
                    .boxed()
            }
            _ => {
                let shown = parameters(provider, entry);
                instance(shown, shown, 0).boxed()
            }
        };
        let shapes = (any::<bool>(), any::<bool>()).prop_map(|(with_id, variant)| Shape { with_id, variant });
        let seen = RefCell::new(Seen::default());
        let outcome = runner().run(&(strategy, shapes), |(arguments, shape)| {
            check_case(&codec, &executor, def, &arguments, shape, &mut seen.borrow_mut())
        });
        if let Err(e) = outcome {
            failures.push(format!("{} via {}: {e}", def.name(), provider.as_str()));
        }
        seen_by_tool.push((def.name().to_owned(), seen.into_inner()));
    }
    assert!(
        failures.is_empty(),
        "{} of {} tools fail the round trip:\n{}",
        failures.len(),
        view.len(),
        failures.join("\n")
    );
    seen_by_tool
}

#[test]
fn ollama_round_trip() {
    let seen = round_trip(Provider::Ollama);
    assert!(seen.iter().any(|(_, s)| s.without_id > 0), "no call without an id: {seen:?}");
}

#[test]
fn openai_chat_round_trip() {
    let seen = round_trip(Provider::OpenAiChat);
    assert_strict_nulls_seen(Provider::OpenAiChat, &seen);
}

#[test]
fn openai_responses_round_trip() {
    let seen = round_trip(Provider::OpenAiResponses);
    assert_strict_nulls_seen(Provider::OpenAiResponses, &seen);
}

#[test]
fn anthropic_round_trip() {
    round_trip(Provider::Anthropic);
}

#[test]
fn gemini_round_trip() {
    let seen = round_trip(Provider::Gemini);
    assert!(seen.iter().any(|(_, s)| s.without_id > 0), "no call without an id: {seen:?}");
}

#[test]
fn mcp_round_trip() {
    round_trip(Provider::Mcp);
}

/// The strict tools with a `#[serde(default)]` field were sent a `null` for it at least once.
fn assert_strict_nulls_seen(provider: Provider, seen: &[(String, Seen)]) {
    let view = view();
    let codec = view.codec(provider);
    let invoice = view.get("billing.invoice.create").expect("the invoice tool");
    assert!(is_strict(provider, entry(&codec, invoice)), "billing.invoice.create is not strict for {provider:?}");
    let (_, s) = seen.iter().find(|(n, _)| n == "billing.invoice.create").expect("the invoice tool ran");
    assert!(s.absent_nulls > 0, "no null stood for an absent property: {s:?}");
}
