//! An extractor imported under another name is still injected.
use keel_tools_core::CallContext as Ctx;
use keel_tools_core::State as Shared;
use keel_tools_core::{Executor, Registry, ToolCall, tool};

struct Prefix {
    text: &'static str,
}

/// Searches notes.
#[tool(effect = "read", version = "1.0")]
fn search_notes(q: String, ctx: Ctx, prefix: Shared<Prefix>) -> String {
    format!("{}{q} ({})", prefix.text, ctx.call_id())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let schema = registry.get("search_notes").expect("registered").input_schema().clone();
    let names: Vec<&String> = schema["properties"].as_object().expect("properties").keys().collect();
    assert_eq!(names, ["q"], "injected parameters are not arguments: {schema}");
    let executor = Executor::builder(registry.view().build().unwrap()).state(Prefix { text: "> " }).build().unwrap();
    let r = executor.call(ToolCall::new("c1", "search_notes", serde_json::json!({"q": "disk"}))).await;
    assert_eq!(r.data(), Some(&serde_json::json!("> disk (c1)")), "{r:?}");
}
