use tool_core::{Registry, tool};

/// Adds two numbers.
#[tool(effect = "read", version = "1.0", blocking = false)]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    assert!(registry.get("add").is_some(), "add is registered");
}
