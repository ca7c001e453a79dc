use keel_tools_core::{Registry, tool};
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Serialize, JsonSchema)]
struct Summary {
    open: u32,
    closed: u32,
}

/// Summarises the incident queue.
#[tool(effect = "read", version = "1.0")]
fn summary() -> Summary {
    Summary { open: 1, closed: 2 }
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let tool = registry.get("summary").expect("summary is registered");
    let output = tool.output_schema().expect("an output schema");
    assert!(output["properties"].get("closed").is_some(), "{output}");
}
