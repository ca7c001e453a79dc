//! One canonical form of arguments for the executor, the policy, approvals and the handler: a strict-mode `null`,
//! an `Option`'s `null` and a spelled-out default all mean "absent", and key order means nothing. Approving
//! exactly what the model sent works, and so does approving what `details.approve` echoes, either way round.

use std::sync::Mutex;

use keel_tools_core::executor::CallOptions;
use keel_tools_core::{Approval, CallContext, Executor, Provider, Registry, ToolCall, ToolResult, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

// `Serialize` lets schemars state the default in the schema (`"default": "normal"`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Priority {
    Low,
    #[default]
    Normal,
    High,
}

fn ten() -> Option<u32> {
    Some(10)
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TicketArgs {
    /// The title.
    title: String,
    /// The body.
    body: String,
    /// How urgent.
    #[serde(default)]
    priority: Priority,
    /// An optional note.
    note: Option<String>,
    /// How many people to page; `null` pages nobody.
    #[serde(default = "ten")]
    page: Option<u32>,
}

/// What each call's handler received, as the executor passed it on, by call id.
static SEEN: Mutex<Vec<(String, Value)>> = Mutex::new(Vec::new());

fn seen(id: &str) -> Option<Value> {
    SEEN.lock().unwrap().iter().find(|(c, _)| c == id).map(|(_, v)| v.clone())
}

/// Opens a ticket.
#[tool(name = "canon.open_ticket", effect = "write", version = "1.0")]
fn canon_open_ticket(args: TicketArgs, ctx: CallContext) -> String {
    SEEN.lock().unwrap().push((
        ctx.call_id().to_owned(),
        json!({"title": args.title, "body": args.body, "priority": format!("{:?}", args.priority),
               "note": args.note, "page": args.page}),
    ));
    "opened".to_owned()
}

fn executor() -> Executor {
    let view = Registry::from_inventory().unwrap().view().names(["canon.open_ticket"]).build().unwrap();
    Executor::new(view).unwrap()
}

async fn call(ex: &Executor, id: &str, args: Value, approvals: &[Value]) -> ToolResult {
    let mut options = CallOptions::new();
    for a in approvals {
        options = options.approve(Approval::new("canon.open_ticket", a));
    }
    ex.call_with(ToolCall::new(id, "canon.open_ticket", args), &options).await
}

#[tokio::test]
async fn an_approval_of_the_literal_arguments_approves_the_call() {
    let ex = executor();
    // As a model in OpenAI strict mode sends it: every optional property spelled, as null.
    let literal = json!({"title": "t", "body": "b", "priority": null, "note": null});
    let r = call(&ex, "lit-1", literal.clone(), std::slice::from_ref(&literal)).await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        seen("lit-1").unwrap(),
        json!({"title": "t", "body": "b", "priority": "Normal", "note": null, "page": 10})
    );
}

#[tokio::test]
async fn spelled_out_defaults_and_nulls_are_the_same_call_both_ways() {
    let ex = executor();
    let minimal = json!({"title": "t", "body": "b"});
    let spelled = json!({"note": null, "page": 10, "priority": "normal", "body": "b", "title": "t"});
    // Approve the minimal form, call with the spelled-out one...
    assert!(call(&ex, "both-1", spelled.clone(), std::slice::from_ref(&minimal)).await.is_ok());
    // ...and the other way round.
    assert!(call(&ex, "both-2", minimal.clone(), std::slice::from_ref(&spelled)).await.is_ok());
    assert_eq!(seen("both-1"), seen("both-2"));
}

#[tokio::test]
async fn values_that_mean_something_else_are_not_approved() {
    let ex = executor();
    let approved = json!({"title": "t", "body": "b"});
    for (id, other) in [
        ("diff-1", json!({"title": "t", "body": "b", "priority": "high"})),
        // `null` for a field whose default is `Some(10)` means `None`: another call.
        ("diff-2", json!({"title": "t", "body": "b", "page": null})),
        ("diff-3", json!({"title": "t", "body": "b", "page": 11})),
        ("diff-4", json!({"title": "t", "body": "c"})),
    ] {
        let r = call(&ex, id, other.clone(), std::slice::from_ref(&approved)).await;
        assert_eq!(r.code(), Some("approval_required"), "{other}");
        assert!(seen(id).is_none());
    }
    let r = call(&ex, "diff-5", json!({"title": "t", "body": "b", "page": null}), &[]).await;
    assert_eq!(r.code(), Some("approval_required"));
}

#[tokio::test]
async fn the_echoed_arguments_are_canonical_and_approve_the_literal_call() {
    let ex = executor();
    let literal = json!({"title": "t", "body": "b", "priority": "normal", "note": null, "page": 10});
    let stopped = call(&ex, "echo-1", literal.clone(), &[]).await;
    assert_eq!(stopped.code(), Some("approval_required"));
    let echoed = stopped.error().unwrap().details.as_ref().unwrap()["approve"]["arguments"].clone();
    assert_eq!(echoed, json!({"title": "t", "body": "b"}));
    assert!(call(&ex, "echo-2", literal, &[echoed]).await.is_ok());
}

#[tokio::test]
async fn a_strict_mode_call_through_the_codec_runs_with_the_approval_of_what_the_model_sent() {
    let ex = executor();
    let codec = ex.view().codec(Provider::OpenAiChat);
    let entry = &codec.tools()[0];
    assert_eq!(entry["function"]["name"], "canon-open_ticket");
    let text = r#"{"title":"t","body":"b","priority":null,"note":null,"page":null}"#;
    let message = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "strict-1", "type": "function", "function": {"name": "canon-open_ticket", "arguments": text}}
    ]});
    let parsed = codec.message(&message, 0).unwrap();
    let literal: Value = serde_json::from_str(text).unwrap();
    let options = CallOptions::new().approve(Approval::new("canon.open_ticket", &literal));
    let r = ex.call_with(parsed.calls[0].clone(), &options).await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(seen("strict-1").unwrap()["page"], Value::Null);
    assert_eq!(codec.reply(&r)["tool_call_id"], "strict-1");
}
