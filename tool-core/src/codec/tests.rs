//! The codecs' readings of call items and writings of replies, one provider at a time.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::call::{generated_call_id, is_generated_call_id};
use crate::error::ErrorCode;
use crate::result::ErrorBody;
use crate::result::tests::{failed, ok};

/// The codec of an empty view: the raw parse, no name mapped.
fn raw(provider: Provider) -> Codec {
    ToolView::new(Vec::new()).codec(provider)
}

fn from_ollama(v: &Value, index: usize) -> ToolCall {
    raw(Provider::Ollama).call(v, index)
}
fn from_openai(v: &Value) -> ToolCall {
    raw(Provider::OpenAiChat).call(v, 0)
}
fn from_openai_responses(v: &Value) -> ToolCall {
    raw(Provider::OpenAiResponses).call(v, 0)
}
fn from_anthropic(v: &Value) -> ToolCall {
    raw(Provider::Anthropic).call(v, 0)
}
fn from_gemini(v: &Value, index: usize) -> ToolCall {
    raw(Provider::Gemini).call(v, index)
}
fn from_mcp(params: &Value, id: impl Into<String>) -> ToolCall {
    raw(Provider::Mcp).call(&json!({"jsonrpc": "2.0", "id": id.into(), "method": "tools/call", "params": params}), 0)
}
fn reply(provider: Provider, result: &ToolResult) -> Value {
    raw(provider).reply(result)
}

fn err(call: &ToolCall) -> String {
    call.arguments().expect_err("arguments error").to_string()
}

const ERR_TEXT: &str =
    r#"{"error":{"code":"approval_required","message":"needs approval","details":{"effect":"destructive"}}}"#;

#[test]
fn ollama_with_and_without_id() {
    let raw =
        json!({"id": "call_abc", "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}}});
    let call = from_ollama(&raw, 0);
    assert_eq!(call.id(), "call_abc");
    assert_eq!(call.name(), "get_weather");
    assert_eq!(call.arguments(), Ok(&json!({"city": "Paris"})));

    let raw = json!({"function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}});
    let a = from_ollama(&raw, 2);
    assert!(a.id().starts_with("call_2_") && a.id().len() == "call_2_".len() + 8, "{}", a.id());
    assert!(is_generated_call_id(a.id()));
    // Deterministic, independent of key order, dependent on index, name and arguments.
    let reordered = json!({"function": {"arguments": {"unit": "c", "city": "Paris"}, "name": "get_weather"}});
    assert_eq!(from_ollama(&reordered, 2).id(), a.id());
    assert_ne!(from_ollama(&raw, 3).id(), a.id());
    let other = json!({"function": {"name": "get_weather", "arguments": {"city": "Lyon", "unit": "c"}}});
    assert_ne!(from_ollama(&other, 2).id(), a.id());
    assert_eq!(a.id(), generated_call_id(2, "get_weather", Some(&json!({"city": "Paris", "unit": "c"}))));
    // Pinned: the scheme must not change between versions.
    assert_eq!(generated_call_id(0, "", None), "call_0_daf899d5");
}

#[test]
fn ollama_bad_shapes() {
    let call = from_ollama(&json!({"function": {"name": "t", "arguments": [1]}}), 0);
    assert_eq!(err(&call), "arguments must be a JSON object; found array");
    assert!(is_generated_call_id(call.id()));
    let call = from_ollama(&json!({"function": {"name": "t", "arguments": "{\"a\":1}"}}), 0);
    assert_eq!(err(&call), "arguments must be a JSON object; found string");
    let call = from_ollama(&json!({"function": {"name": "t", "arguments": null}}), 0);
    assert_eq!(call.arguments(), Ok(&json!({})));
    let call = from_ollama(&json!({"function": {"name": 7}}), 1);
    assert_eq!(call.name(), "");
    assert_eq!(call.arguments(), Ok(&json!({})));
    let call = from_ollama(&json!(null), 0);
    assert_eq!(call.name(), "");
    let call = from_ollama(&json!([]), 0);
    assert_eq!(call.name(), "");
    let call = from_ollama(&json!({"id": "", "function": {"name": "t", "arguments": {}}}), 4);
    assert!(call.id().starts_with("call_4_"));
}

#[test]
fn openai_chat_call() {
    let raw =
        json!({"id": "call_Xy1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":2,\"b\":3}"}});
    let call = from_openai(&raw);
    assert_eq!((call.id(), call.name()), ("call_Xy1", "add"));
    assert_eq!(call.arguments(), Ok(&json!({"a": 2, "b": 3})));
    assert!(!is_generated_call_id(call.id()));

    let call = from_openai(&json!({"id": "c", "function": {"name": "add", "arguments": "{\"a\":2} x"}}));
    assert!(err(&call).contains("continues after the JSON value"));
    let call = from_openai(&json!({"id": "c", "function": {"name": "add", "arguments": "[1,2]"}}));
    assert_eq!(err(&call), "arguments must be a JSON object; found array");
    let call = from_openai(&json!({"id": "c", "function": {"name": "add", "arguments": {"a": 1}}}));
    assert_eq!(call.arguments(), Ok(&json!({"a": 1})));
    let call = from_openai(&json!({"id": "c", "function": {"name": "add", "arguments": null}}));
    assert_eq!(err(&call), "arguments must be a JSON object; found null");
    let call = from_openai(&json!({"id": "c", "function": {"name": "add"}}));
    assert_eq!(err(&call), "arguments must be a JSON object; found no arguments");
    let call = from_openai(&json!({"function": {"name": "add", "arguments": "{}"}}));
    assert!(is_generated_call_id(call.id()) && call.id().starts_with("call_0_"));
    let call = from_openai(&json!({"id": 17, "function": {"arguments": "{}"}}));
    assert_eq!((call.id(), call.name()), ("17", ""));
    let call = from_openai(&json!("garbage"));
    assert_eq!(call.name(), "");
    assert!(call.arguments().is_err());
}

#[test]
fn openai_responses_call() {
    let raw =
        json!({"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "add", "arguments": "{\"a\":1}"});
    let call = from_openai_responses(&raw);
    assert_eq!((call.id(), call.name()), ("call_9", "add"));
    assert_eq!(call.arguments(), Ok(&json!({"a": 1})));
    let call =
        from_openai_responses(&json!({"type": "function_call", "id": "fc_1", "name": "add", "arguments": "nope"}));
    assert!(is_generated_call_id(call.id()));
    assert!(err(&call).contains("not valid JSON"));
    let call = from_openai_responses(&json!({"call_id": "c", "name": ["add"], "arguments": "\"s\""}));
    assert_eq!(call.name(), "");
    assert_eq!(err(&call), "arguments must be a JSON object; found string");
}

#[test]
fn anthropic_call() {
    let raw = json!({"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}});
    let call = from_anthropic(&raw);
    assert_eq!((call.id(), call.name()), ("toolu_01", "get_weather"));
    assert_eq!(call.arguments(), Ok(&json!({"city": "Paris"})));
    let call = from_anthropic(&json!({"type": "tool_use", "id": "t", "name": "x", "input": "{}"}));
    assert_eq!(err(&call), "arguments must be a JSON object; found string");
    let call = from_anthropic(&json!({"type": "tool_use", "id": "t", "name": "x", "input": null}));
    assert_eq!(err(&call), "arguments must be a JSON object; found null");
    let call = from_anthropic(&json!({"type": "tool_use", "name": "x"}));
    assert_eq!(err(&call), "arguments must be a JSON object; found no arguments");
    assert!(is_generated_call_id(call.id()));
}

#[test]
fn gemini_call() {
    let raw = json!({"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}});
    let call = from_gemini(&raw, 1);
    assert_eq!(call.name(), "get_weather");
    assert!(call.id().starts_with("call_1_") && is_generated_call_id(call.id()));
    assert_eq!(call.arguments(), Ok(&json!({"city": "Paris"})));
    let call = from_gemini(&json!({"functionCall": {"name": "x", "args": {}, "id": "fc-7"}}), 0);
    assert_eq!(call.id(), "fc-7");
    let call = from_gemini(&json!({"functionCall": {"name": "ping"}}), 0);
    assert_eq!(call.arguments(), Ok(&json!({})));
    let call = from_gemini(&json!({"function_call": {"name": "ping", "args": [1]}}), 0);
    assert_eq!(call.name(), "ping");
    assert_eq!(err(&call), "arguments must be a JSON object; found array");
    let call = from_gemini(&json!({"text": "hello"}), 0);
    assert_eq!(call.name(), "");
}

#[test]
fn mcp_call() {
    let call = from_mcp(&json!({"name": "add", "arguments": {"a": 1}}), "42");
    assert_eq!((call.id(), call.name()), ("42", "add"));
    assert_eq!(call.arguments(), Ok(&json!({"a": 1})));
    let call = from_mcp(&json!({"name": "ping"}), "1");
    assert_eq!(call.arguments(), Ok(&json!({})));
    let call = from_mcp(&json!({"name": "ping", "arguments": null}), "1");
    assert_eq!(call.arguments(), Ok(&json!({})));
    let call = from_mcp(&json!({"name": "ping", "arguments": [1]}), String::from("2"));
    assert_eq!(err(&call), "arguments must be a JSON object; found array");
    let call = from_mcp(&json!({"arguments": {}}), "3");
    assert_eq!(call.name(), "");
}

#[test]
fn ollama_reply() {
    assert_eq!(
        reply(Provider::Ollama, &ok()),
        json!({"role": "tool", "tool_name": "add", "tool_call_id": "call_1", "content": "{\"sum\":5}"})
    );
    assert_eq!(
        reply(Provider::Ollama, &failed()),
        json!({"role": "tool", "tool_name": "delete_incident", "tool_call_id": "call_2", "content": ERR_TEXT})
    );
}

#[test]
fn openai_reply() {
    assert_eq!(
        reply(Provider::OpenAiChat, &ok()),
        json!({"role": "tool", "tool_call_id": "call_1", "content": "{\"sum\":5}"})
    );
    assert_eq!(
        reply(Provider::OpenAiChat, &failed()),
        json!({"role": "tool", "tool_call_id": "call_2", "content": ERR_TEXT})
    );
}

#[test]
fn openai_responses_reply() {
    assert_eq!(
        reply(Provider::OpenAiResponses, &ok()),
        json!({"type": "function_call_output", "call_id": "call_1", "output": "{\"sum\":5}"})
    );
    assert_eq!(
        reply(Provider::OpenAiResponses, &failed()),
        json!({"type": "function_call_output", "call_id": "call_2", "output": ERR_TEXT})
    );
}

#[test]
fn anthropic_reply() {
    assert_eq!(
        reply(Provider::Anthropic, &ok()),
        json!({"type": "tool_result", "tool_use_id": "call_1", "content": "{\"sum\":5}", "is_error": false})
    );
    assert_eq!(
        reply(Provider::Anthropic, &failed()),
        json!({"type": "tool_result", "tool_use_id": "call_2", "content": ERR_TEXT, "is_error": true})
    );
}

#[test]
fn gemini_reply() {
    assert_eq!(
        reply(Provider::Gemini, &ok()),
        json!({"functionResponse": {"name": "add", "id": "call_1", "response": {"output": {"sum": 5}}}})
    );
    assert_eq!(
        reply(Provider::Gemini, &failed()),
        json!({"functionResponse": {"name": "delete_incident", "id": "call_2", "response": {"error": {
            "code": "approval_required", "message": "needs approval", "details": {"effect": "destructive"}
        }}}})
    );
    // A generated id (Gemini sent none) is not sent back; nor is an empty one.
    let call = from_gemini(&json!({"functionCall": {"name": "add", "args": {}}}), 0);
    let r = ToolResult::success(call.id(), "add", None, json!(7));
    assert_eq!(reply(Provider::Gemini, &r), json!({"functionResponse": {"name": "add", "response": {"output": 7}}}));
    let r = ToolResult::success("", "add", None, json!(7));
    assert_eq!(reply(Provider::Gemini, &r), json!({"functionResponse": {"name": "add", "response": {"output": 7}}}));
}

#[test]
fn mcp_reply() {
    assert_eq!(
        reply(Provider::Mcp, &ok()),
        json!({"content": [{"type": "text", "text": "{\"sum\":5}"}], "structuredContent": {"sum": 5}, "isError": false})
    );
    assert_eq!(
        reply(Provider::Mcp, &failed()),
        json!({
            "content": [{"type": "text", "text": ERR_TEXT}],
            "structuredContent": {"error": {"code": "approval_required", "message": "needs approval", "details": {"effect": "destructive"}}},
            "isError": true
        })
    );
    // Not an object: no structuredContent.
    let r = ToolResult::success("c", "t", None, json!([1, 2]));
    assert_eq!(reply(Provider::Mcp, &r), json!({"content": [{"type": "text", "text": "[1,2]"}], "isError": false}));
    let r = ToolResult::success("c", "t", None, json!("s"));
    assert_eq!(reply(Provider::Mcp, &r), json!({"content": [{"type": "text", "text": "\"s\""}], "isError": false}));
}

fn view() -> ToolView {
    let schema = json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]});
    let defs =
        ["notes.search", "plain_tool"].map(|n| Arc::new(crate::tool_schemas::fixtures::definition(n, schema.clone())));
    ToolView::new(defs.into())
}

#[test]
fn wire_names_map_back_through_the_view_exactly() {
    let view = view();
    let items = [
        (Provider::OpenAiChat, json!({"id": "c", "function": {"name": "notes-search", "arguments": "{\"q\":\"x\"}"}})),
        (
            Provider::OpenAiResponses,
            json!({"type": "function_call", "call_id": "c", "name": "notes-search", "arguments": "{}"}),
        ),
        (Provider::Anthropic, json!({"type": "tool_use", "id": "c", "name": "notes-search", "input": {}})),
        (Provider::Gemini, json!({"functionCall": {"name": "notes-search", "args": {}}})),
    ];
    for (provider, item) in &items {
        let codec = view.codec(*provider);
        assert_eq!(codec.call(item, 0).name(), "notes.search", "{provider:?}");
        assert_eq!(codec.shown_name("notes.search"), "notes-search");
        assert_eq!(codec.registered_name("plain_tool"), "plain_tool");
        // Only the name the provider was shown is mapped; anything else is kept as sent (a near one stays unknown).
        assert_eq!(codec.registered_name("notes.search"), "notes.search");
        assert_eq!(codec.registered_name("notes_search"), "notes_search");
        assert_eq!(codec.registered_name("Notes-Search"), "Notes-Search");
        assert_eq!(codec.registered_name("nothing-here"), "nothing-here");
    }
    // Ollama and MCP are shown the registered names: nothing is mapped.
    for provider in [Provider::Ollama, Provider::Mcp] {
        let codec = view.codec(provider);
        assert_eq!(codec.shown_name("notes.search"), "notes.search");
        assert_eq!(codec.registered_name("notes-search"), "notes-search");
    }
    let ollama = view.codec(Provider::Ollama).call(&json!({"function": {"name": "notes.search"}}), 0);
    assert_eq!(ollama.name(), "notes.search");
    // The list each codec shows is the view's rendering.
    for provider in Provider::ALL {
        assert_eq!(view.codec(provider).tools(), view.schemas(provider));
    }
}

#[test]
fn messages_fill_generated_ids_where_the_provider_carries_them() {
    let view = view();
    let chat = view.codec(Provider::OpenAiChat);
    let message = json!({"role": "assistant", "content": null, "tool_calls": [
        {"type": "function", "function": {"name": "notes-search", "arguments": "{\"q\":\"a\"}"}},
        {"id": "call_kept", "type": "function", "function": {"name": "plain_tool", "arguments": "{\"q\":\"b\"}"}}
    ]});
    let parsed = chat.message(&message, 3).unwrap();
    assert_eq!(parsed.text, "");
    assert_eq!(parsed.calls.len(), 2);
    assert!(parsed.calls[0].id().starts_with("call_3_") && ToolCall::is_generated_id(parsed.calls[0].id()));
    assert_eq!(parsed.message["tool_calls"][0]["id"], parsed.calls[0].id());
    assert_eq!(parsed.calls[1].id(), "call_kept");
    // The wire name stays in the echoed message: it is what the model wrote.
    assert_eq!(parsed.message["tool_calls"][0]["function"]["name"], "notes-search");
    // A null content goes back as "" (some compatible servers refuse null and a missing content alike).
    assert_eq!(parsed.message["content"], "");
    let without = json!({"role": "assistant", "tool_calls": [message["tool_calls"][1].clone()]});
    assert_eq!(chat.message(&without, 0).unwrap().message["content"], "");
    let with_text = json!({"role": "assistant", "content": "Looking.", "tool_calls": []});
    assert_eq!(chat.message(&with_text, 0).unwrap().message["content"], "Looking.");
    assert_eq!(chat.assistant_message("", &parsed.calls)["content"], "");

    let ollama = view.codec(Provider::Ollama);
    let parsed = ollama.message(&json!({"content": "hi", "tool_calls": [{"function": {"name": "plain_tool"}}]}), 0);
    let parsed = parsed.unwrap();
    assert_eq!((parsed.text.as_str(), parsed.message["role"].as_str()), ("hi", Some("assistant")));
    assert_eq!(parsed.message["tool_calls"][0]["id"], parsed.calls[0].id());

    let responses = view.codec(Provider::OpenAiResponses);
    let output = json!({"output": [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]},
        {"type": "function_call", "id": "fc_1", "name": "notes-search", "arguments": "{\"q\":\"a\"}"}
    ]});
    let parsed = responses.message(&output, 0).unwrap();
    assert_eq!(parsed.text, "Looking.");
    assert_eq!(parsed.calls[0].name(), "notes.search");
    assert_eq!(parsed.message[2]["call_id"], parsed.calls[0].id());
    assert_eq!(parsed.message.as_array().map(Vec::len), Some(3), "every item is kept");

    let anthropic = view.codec(Provider::Anthropic);
    let message = json!({"role": "assistant", "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "name": "notes-search", "input": {"q": "a"}}
    ]});
    let parsed = anthropic.message(&message, 0).unwrap();
    assert_eq!(parsed.text, "Let me look.");
    assert_eq!(parsed.message["content"][1]["id"], parsed.calls[0].id());

    // Gemini is not sent ids it did not send.
    let gemini = view.codec(Provider::Gemini);
    let content = json!({"role": "model", "parts": [
        {"text": "thinking", "thought": true},
        {"text": "Sure."},
        {"functionCall": {"name": "notes-search", "args": {"q": "a"}}},
        {"functionCall": {"name": "plain_tool", "args": {"q": "b"}}}
    ]});
    let parsed = gemini.message(&content, 0).unwrap();
    assert_eq!(parsed.text, "Sure.");
    assert_eq!(parsed.message, content);
    assert_ne!(parsed.calls[0].id(), parsed.calls[1].id());
    assert!(parsed.calls[1].id().starts_with("call_1_"));

    let mcp = view.codec(Provider::Mcp);
    let request = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "plain_tool", "arguments": {"q": "a"}}});
    let parsed = mcp.message(&request, 0).unwrap();
    assert_eq!((parsed.calls[0].id(), parsed.calls[0].name()), ("9", "plain_tool"));
    assert_eq!(mcp.call(&json!({"name": "plain_tool"}), 2).name(), "plain_tool");
}

#[test]
fn malformed_messages_are_errors_not_panics() {
    let view = view();
    for (provider, message, expected) in [
        (Provider::Ollama, json!([]), "not a JSON object"),
        (Provider::Ollama, json!({"content": 5}), "neither text nor null"),
        (Provider::OpenAiChat, json!({"content": "", "tool_calls": {}}), "`tool_calls` is not an array"),
        (Provider::OpenAiResponses, json!("x"), "neither an array"),
        (Provider::OpenAiResponses, json!({"id": "resp_1"}), "no `output` array"),
        (Provider::Anthropic, json!({"content": 1}), "neither a list of blocks nor text"),
        (Provider::Gemini, json!({"parts": "x"}), "`parts` is not an array"),
        (Provider::Gemini, json!(null), "not a JSON object"),
    ] {
        let e = view.codec(provider).message(&message, 0).unwrap_err();
        assert!(e.message().contains(expected), "{provider:?} {message}: {e}");
    }
    // Odd items inside a well-formed message become calls the executor answers.
    let parsed = view.codec(Provider::OpenAiChat).message(&json!({"tool_calls": [7, null]}), 0).unwrap();
    assert_eq!(parsed.calls.len(), 2);
    assert_eq!(parsed.calls[0].name(), "");
}

#[test]
fn replies_group_a_turn_as_each_provider_expects() {
    let view = view();
    let results = [
        ToolResult::success("toolu_1", "notes.search", Some("1.0.0".into()), json!(["n"])),
        ToolResult::success("toolu_2", "plain_tool", Some("1.0.0".into()), json!({"k": 1})),
    ];
    let anthropic = view.codec(Provider::Anthropic).replies(&results);
    assert_eq!(anthropic.len(), 1);
    assert_eq!(anthropic[0]["role"], "user");
    assert_eq!(anthropic[0]["content"].as_array().map(Vec::len), Some(2));
    assert_eq!(anthropic[0]["content"][1]["tool_use_id"], "toolu_2");
    let gemini = view.codec(Provider::Gemini).replies(&results);
    assert_eq!(gemini.len(), 1);
    // Gemini is answered under the name it was shown.
    assert_eq!(gemini[0]["parts"][0]["functionResponse"]["name"], "notes-search");
    assert_eq!(gemini[0]["parts"][1]["functionResponse"]["name"], "plain_tool");
    for provider in [Provider::Ollama, Provider::OpenAiChat, Provider::OpenAiResponses, Provider::Mcp] {
        assert_eq!(view.codec(provider).replies(&results).len(), 2, "{provider:?}");
    }
    for provider in Provider::ALL {
        assert!(view.codec(provider).replies(&[]).is_empty());
    }
    // An unknown tool is answered under the name the model used.
    let unknown = ToolResult::failure("c", "made-up", None, false, ErrorBody::new(ErrorCode::UnknownTool, "no"));
    assert_eq!(view.codec(Provider::Gemini).reply(&unknown)["functionResponse"]["name"], "made-up");
}

#[test]
fn an_assistant_message_written_by_a_codec_reads_back_to_the_same_calls() {
    let view = view();
    let calls = [
        ToolCall::new("call_a1", "notes.search", json!({"q": "disks"})),
        ToolCall::new("call_a2", "plain_tool", json!({"q": "x"})),
    ];
    for provider in Provider::ALL {
        let codec = view.codec(provider);
        let written = codec.assistant_message("On it.", &calls);
        let read = if provider == Provider::Mcp {
            let items = written.as_array().cloned().unwrap_or_default();
            items.iter().enumerate().map(|(i, r)| codec.call(r, i)).collect()
        } else {
            let parsed = codec.message(&written, 0).unwrap();
            assert_eq!(parsed.text, "On it.", "{provider:?}");
            parsed.calls
        };
        assert_eq!(read, calls, "{provider:?}: {written}");
    }
}

#[test]
fn losses_point_into_the_entries_they_concern() {
    let nested = json!({"type": "object", "description": "Where to send it.", "properties": {
        "to": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "q": {"type": "string"}
    }, "required": ["to"]});
    let def = crate::tool_schemas::fixtures::definition("mail.send", nested);
    let view = ToolView::new(vec![Arc::new(def)]);
    let codec = view.codec(Provider::Ollama);
    assert_eq!(codec.tool("mail.send"), codec.tools().first());
    assert_eq!(codec.tool("nothing"), None);
    let losses = codec.losses();
    for loss in losses.iter().filter(|l| l.tool == "mail.send") {
        let entry = codec.tool("mail.send").unwrap();
        assert!(entry.pointer(&loss.at).is_some(), "{loss}: nothing at {} in {entry}", loss.at);
    }
    let at: Vec<&str> = losses.iter().map(|l| l.at.as_str()).collect();
    assert!(at.contains(&"/function/parameters/properties/to/properties"), "{losses:#?}");
    assert!(at.contains(&"/function/parameters/properties/to/required"), "{losses:#?}");
    // Replies still reach their calls through that client, by `tool_name` and order.
    assert!(losses.iter().any(|l| l.tool == "*" && l.at == "/tool_call_id" && l.kind == LossKind::Adapted));
    assert!(losses.iter().filter(|l| l.tool != "*").all(|l| l.kind == LossKind::Dropped));
    assert!(losses.iter().all(|l| l.provider == Provider::Ollama));
    let json = serde_json::to_value(&losses[0]).unwrap();
    assert_eq!(json["provider"], "ollama");
    assert_eq!(json["kind"], "dropped");
}

#[test]
fn every_loss_points_into_its_entry() {
    use crate::tool_schemas::fixtures::{self, Everything, Flattened, Labelled, Node, Strictable};
    let mut schemas = vec![
        fixtures::schema::<Everything>(),
        fixtures::schema::<Node>(),
        fixtures::schema::<Flattened>(),
        fixtures::schema::<Labelled>(),
        fixtures::schema::<Strictable>(),
    ];
    // Definitions take only object schemas (the registry reports the others).
    schemas.extend(fixtures::hostile_schemas().into_iter().filter(|s| s["type"] == "object"));
    let mut kinds = std::collections::BTreeSet::new();
    for (i, schema) in schemas.into_iter().enumerate() {
        let def = fixtures::definition("incident.search", schema);
        for provider in Provider::ALL {
            let entry = def.render(provider);
            for loss in entry_losses(provider, &def) {
                assert_eq!((loss.provider, loss.tool.as_str()), (provider, "incident.search"));
                assert!(entry.pointer(&loss.at).is_some(), "schema {i}, {loss}: `at` is not in the entry {entry:#}");
                kinds.insert((provider.as_str(), loss.kind));
            }
        }
    }
    // The fixtures reach each kind, and every provider with something to lose.
    for kind in [LossKind::Adapted, LossKind::Dropped, LossKind::Ignored] {
        assert!(kinds.iter().any(|(_, k)| *k == kind), "{kind:?}: {kinds:?}");
    }
    for provider in ["ollama", "openai-chat", "openai-responses", "anthropic", "gemini"] {
        assert!(kinds.iter().any(|(p, _)| *p == provider), "{provider}: {kinds:?}");
    }
}
