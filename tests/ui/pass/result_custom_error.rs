use std::fmt;

use keel_tools_core::{Registry, tool};

#[derive(Debug)]
struct StoreError;

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the store is down")
    }
}

impl std::error::Error for StoreError {}

/// Counts open incidents.
#[tool(effect = "read", version = "1.0")]
fn count_open(team: String) -> Result<u32, StoreError> {
    if team.is_empty() { Err(StoreError) } else { Ok(3) }
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let tool = registry.get("count_open").expect("count_open is registered");
    assert_eq!(tool.output_schema().expect("an output schema")["type"], "integer");
}
