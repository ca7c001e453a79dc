use keel_tools_core::{Registry, ToolError, tool};

type Result<T> = std::result::Result<T, ToolError>;

/// Counts open incidents.
#[tool(effect = "read", version = "1.0")]
fn count_open() -> Result<u32> {
    Ok(3)
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let tool = registry.get("count_open").expect("count_open is registered");
    assert_eq!(tool.output_schema().expect("an output schema")["type"], "integer");
}
