//! `Args<T>` takes the whole of the arguments explicitly, here beside an injected parameter and with a pattern.
use keel_tools_core::{Args, Executor, Registry, State, ToolCall, tool};
use schemars::JsonSchema;
use serde::Deserialize;

/// What to search for.
#[derive(Deserialize, JsonSchema)]
struct Query {
    /// Words to look for.
    text: String,
    /// At most this many hits.
    limit: Option<u32>,
}

struct Index {
    titles: Vec<&'static str>,
}

/// Finds incidents.
#[tool(effect = "read", version = "1.0")]
fn find(index: State<Index>, Args(Query { text, limit }): Args<Query>) -> Vec<String> {
    let hits = index.titles.iter().filter(|t| t.contains(text.as_str()));
    hits.take(limit.unwrap_or(10) as usize).map(|t| (*t).to_owned()).collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let schema = registry.get("find").expect("registered").input_schema().clone();
    assert_eq!(schema["description"], "What to search for.", "the struct's own schema: {schema}");
    assert!(schema.get("title").is_none(), "no title made up from the type's name: {schema}");
    assert_eq!(schema["required"], serde_json::json!(["text"]), "{schema}");
    let index = Index { titles: vec!["auth 502", "db 502", "disk full"] };
    let executor = Executor::builder(registry.view().build().unwrap()).state(index).build().unwrap();
    let r = executor.call(ToolCall::new("c1", "find", serde_json::json!({"text": "502", "limit": 1}))).await;
    assert_eq!(r.data(), Some(&serde_json::json!(["auth 502"])), "{r:?}");
}
