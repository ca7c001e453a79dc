use schemars::JsonSchema;
use keel_tools_core::tool;

#[derive(JsonSchema)]
struct Summary {
    open: u32,
}

/// Summarises the incident queue.
#[tool(effect = "read", version = "1.0")]
fn summary() -> Summary {
    Summary { open: 1 }
}

fn main() {}
