//! Deferred tools in the agent loop, over HTTP against the local stub: what each turn's request lists, and the
//! allowlist following what the model has been shown. keel's `search_tools` on OpenAI Chat (the turn after a search
//! lists the tools it found, and the same list after that, so the cache holds from there); the providers' own tool
//! search on Anthropic Messages and OpenAI Responses (every tool every turn, the deferred ones marked
//! `defer_loading`, the tools the provider's search loaded surfaced before the turn's calls run). Every turn, a
//! call of a deferred tool no search surfaced is refused `unknown_tool` and never runs.

use std::sync::{Arc, Mutex};

use keel_tools_agent::stub::{ANTHROPIC_MESSAGES, OPENAI_CHAT, OPENAI_RESPONSES, StubResponse, StubServer};
use keel_tools_agent::{Agent, AnthropicClient, ChatModel, Message, OpenAiClient, ResponsesClient, ToolSearch};
use keel_tools_core::deferral::SEARCH_TOOL;
use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::events::{Decision, EventKind};
use keel_tools_core::runs::{Decider, DefaultDecider, Run, RunState, StopPolicy};
use keel_tools_core::{Executor, ToolResult, ToolView};
use serde_json::{Value, json};

/// What ran, by tool; the tests share it, one at a time.
static RAN: Mutex<Vec<String>> = Mutex::new(Vec::new());
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn tool(name: &'static str, description: &'static str, deferred: bool) -> Arc<ToolDefinition> {
    let schema = json!({"type": "object", "properties": {"id": {"type": "string", "description": "The invoice."}}});
    let def = ToolDefinition::builder(name)
        .description(description)
        .version("1.0")
        .effect(Effect::Read)
        .input_schema(schema)
        .defer(deferred)
        .handler(move |_arguments: Value, _ctx| async move {
            RAN.lock().unwrap().push(name.to_owned());
            Ok(json!(format!("{name} done")))
        })
        .build()
        .unwrap();
    Arc::new(def)
}

/// The default rules, but a refused tool lets the run go on, so that the next turn can be checked.
fn go_on(observation: &ToolResult, state: &RunState, stop: &StopPolicy) -> Decision {
    if observation.code() == Some("unknown_tool") {
        return Decision::Continue;
    }
    DefaultDecider.decide(observation, state, stop)
}

/// A run over `today` (shown) and two deferred billing tools, with keel's search.
fn run() -> Run {
    let view = ToolView::new(vec![
        tool("today", "Says which day it is.", false),
        tool("billing.invoice.refund", "Refund an invoice, fully or in part.", true),
        tool("billing.invoice.void", "Void an unpaid invoice.", true),
    ]);
    Run::builder(Executor::new(view.with_tool_search().unwrap()).unwrap()).decider(go_on).build()
}

/// Runs the loop to its end; the results of the tool calls, in order.
async fn run_to_end(model: &dyn ChatModel, run: &mut Run) -> Vec<ToolResult> {
    RAN.lock().unwrap().clear();
    let mut messages = vec![Message::user("Refund invoice I-1.")];
    let outcome = Agent::new(model).run(run, &mut messages).await.unwrap();
    assert_eq!(outcome.terminal, Decision::Done, "{outcome:?}");
    messages
        .into_iter()
        .filter_map(|m| match m {
            Message::Tool(r) => Some(r),
            _ => None,
        })
        .collect()
}

/// The `tools_surfaced` events of the run: the tools, and what surfaced them.
fn surfaced(run: &Run) -> Vec<(Vec<String>, String)> {
    run.log()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolsSurfaced { tools, via, .. } => Some((tools.clone(), via.clone())),
            _ => None,
        })
        .collect()
}

/// The names of a request's tools, read at `pointer` in each entry (the type of an entry without a name).
fn names(body: &Value, pointer: &str) -> Vec<String> {
    let tools = body["tools"].as_array().map(Vec::as_slice).unwrap_or_default();
    tools
        .iter()
        .map(|t| t.pointer(pointer).or_else(|| t.get("type")).and_then(Value::as_str).unwrap_or("?").to_owned())
        .collect()
}

fn chat_calls(calls: &[(&str, &str, Value)]) -> StubResponse {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    StubResponse::json(&json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": calls}}]}))
}

#[tokio::test]
async fn keels_search_lists_what_it_found_from_the_next_turn_and_refuses_what_it_did_not() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let stub = StubServer::start().await.unwrap();
    // Turn 1: the refund before any search (refused), and a search; turn 2: the refund, and the void no search
    // found (refused); turn 3: the answer.
    stub.respond(
        OPENAI_CHAT,
        chat_calls(&[
            ("c1", "billing-invoice-refund", json!({"id": "I-1"})),
            ("c2", SEARCH_TOOL, json!({"query": "refund an invoice", "limit": 1})),
        ]),
    );
    stub.respond(
        OPENAI_CHAT,
        chat_calls(&[
            ("c3", "billing-invoice-refund", json!({"id": "I-1"})),
            ("c4", "billing-invoice-void", json!({"id": "I-1"})),
        ]),
    );
    stub.respond(
        OPENAI_CHAT,
        StubResponse::json(&json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Refunded."}}]})),
    );
    let model = OpenAiClient::builder(format!("{}/v1", stub.url()), "gpt-test").build().unwrap();
    let mut run = run();
    let results = run_to_end(&model, &mut run).await;
    let codes: Vec<(&str, Option<&str>, bool)> =
        results.iter().map(|r| (r.call_id.as_str(), r.code(), r.executed)).collect();
    assert_eq!(
        codes,
        [
            ("c1", Some("unknown_tool"), false),
            ("c2", None, true),
            ("c3", None, true),
            ("c4", Some("unknown_tool"), false)
        ]
    );
    assert_eq!(*RAN.lock().unwrap(), ["billing.invoice.refund"], "only the surfaced tool ran");
    assert_eq!(surfaced(&run), [(vec!["billing.invoice.refund".to_owned()], SEARCH_TOOL.to_owned())]);

    let bodies: Vec<Value> = stub.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 3);
    assert_eq!(names(&bodies[0], "/function/name"), [SEARCH_TOOL, "today"], "the deferred tools are not listed");
    assert_eq!(names(&bodies[1], "/function/name"), ["billing-invoice-refund", SEARCH_TOOL, "today"]);
    assert_eq!(bodies[1]["tools"], bodies[2]["tools"], "nothing new surfaced: the same list, the cache holds");
}

#[tokio::test]
async fn anthropic_searches_itself_every_tool_is_listed_and_what_it_loaded_is_callable() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let stub = StubServer::start().await.unwrap();
    stub.respond(
        ANTHROPIC_MESSAGES,
        StubResponse::json(&json!({"type": "message", "role": "assistant", "stop_reason": "tool_use", "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25",
             "input": {"query": "refund invoice"}},
            {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1", "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": "billing-invoice-refund"}]}},
            {"type": "tool_use", "id": "toolu_1", "name": "billing-invoice-refund", "input": {"id": "I-1"}},
            {"type": "tool_use", "id": "toolu_2", "name": "billing-invoice-void", "input": {"id": "I-1"}}
        ]})),
    );
    stub.respond(
        ANTHROPIC_MESSAGES,
        StubResponse::json(&json!({"type": "message", "role": "assistant", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "Refunded."}]})),
    );
    let model = AnthropicClient::builder(stub.url(), "claude-test").build().unwrap();
    let mut run = run();
    let results = run_to_end(&model, &mut run).await;
    let codes: Vec<(&str, Option<&str>)> = results.iter().map(|r| (r.call_id.as_str(), r.code())).collect();
    assert_eq!(codes, [("toolu_1", None), ("toolu_2", Some("unknown_tool"))]);
    assert_eq!(*RAN.lock().unwrap(), ["billing.invoice.refund"]);
    assert_eq!(surfaced(&run), [(vec!["billing.invoice.refund".to_owned()], "anthropic".to_owned())]);

    let bodies: Vec<Value> = stub.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(
        names(&bodies[0], "/name"),
        ["billing-invoice-refund", "billing-invoice-void", "today", "tool_search_tool_bm25"],
        "every tool, keel's search replaced by Anthropic's"
    );
    let tools = bodies[0]["tools"].as_array().unwrap();
    assert_eq!(tools[0]["defer_loading"], true);
    assert_eq!(tools[1]["defer_loading"], true);
    assert_eq!(tools[2].get("defer_loading"), None, "a tool that is not deferred is not marked");
    assert_eq!(tools[3]["type"], "tool_search_tool_bm25_20251119");
    assert_eq!(bodies[0]["tools"], bodies[1]["tools"], "the same list every turn");
    // The server's blocks go back as they came.
    let echoed = &bodies[1]["messages"][1]["content"];
    assert_eq!(echoed[0]["type"], "server_tool_use", "{echoed}");
    assert_eq!(echoed[1]["type"], "tool_search_tool_result", "{echoed}");
}

#[tokio::test]
async fn responses_searches_itself_with_the_hosted_tool_search_over_namespaces() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let stub = StubServer::start().await.unwrap();
    stub.respond(
        OPENAI_RESPONSES,
        StubResponse::json(&json!({"object": "response", "status": "completed", "output": [
            {"type": "tool_search_call", "id": "ts_1", "execution": "server", "status": "completed",
             "arguments": {"query": "refund invoice"}},
            {"type": "tool_search_output", "id": "tso_1", "execution": "server", "status": "completed",
             "tools": [{"type": "namespace", "name": "billing", "description": "Billing.", "tools": [
                 {"type": "function", "name": "invoice-refund", "description": "Refund an invoice.",
                  "parameters": {"type": "object"}, "defer_loading": true}]}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "namespace": "billing",
             "name": "invoice-refund", "arguments": "{\"id\": \"I-1\"}"},
            {"type": "function_call", "id": "fc_2", "call_id": "call_2", "namespace": "billing",
             "name": "invoice-void", "arguments": "{\"id\": \"I-1\"}"}
        ]})),
    );
    stub.respond(
        OPENAI_RESPONSES,
        StubResponse::json(&json!({"object": "response", "status": "completed", "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Refunded."}]}
        ]})),
    );
    let model = ResponsesClient::builder(format!("{}/v1", stub.url()), "gpt-test").build().unwrap();
    let mut run = run();
    let results = run_to_end(&model, &mut run).await;
    let codes: Vec<(&str, Option<&str>)> = results.iter().map(|r| (r.call_id.as_str(), r.code())).collect();
    assert_eq!(codes, [("call_1", None), ("call_2", Some("unknown_tool"))]);
    assert_eq!(surfaced(&run), [(vec!["billing.invoice.refund".to_owned()], "openai-responses".to_owned())]);
    let bodies: Vec<Value> = stub.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(names(&bodies[0], "/name"), ["today", "billing", "tool_search"], "the deferred tools in a namespace");
    let namespace = &bodies[0]["tools"][1];
    assert_eq!(namespace["type"], "namespace");
    let inner: Vec<&str> = namespace["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(inner, ["invoice-refund", "invoice-void"]);
    assert!(namespace["tools"].as_array().unwrap().iter().all(|t| t["defer_loading"] == true));
    assert_eq!(bodies[0]["tools"], bodies[1]["tools"]);
}

#[tokio::test]
async fn a_client_can_keep_keels_search_where_the_provider_has_its_own() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let stub = StubServer::start().await.unwrap();
    stub.respond(
        ANTHROPIC_MESSAGES,
        StubResponse::json(&json!({"type": "message", "role": "assistant", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "Nothing to do."}]})),
    );
    let model = AnthropicClient::builder(stub.url(), "claude-test").tool_search(ToolSearch::Keel).build().unwrap();
    let mut run = run();
    run_to_end(&model, &mut run).await;
    let body = &stub.requests()[0].body;
    assert_eq!(names(body, "/name"), [SEARCH_TOOL, "today"]);
    assert!(body["tools"].as_array().unwrap().iter().all(|t| t.get("defer_loading").is_none()));
}
