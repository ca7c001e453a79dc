use keel_tools_core::{Registry, ToolError, tool};

/// Closes an incident.
#[tool(effect = "destructive", version = "3.0")]
fn close_incident(id: String) -> Result<(), ToolError> {
    if id.is_empty() { Err(keel_tools_core::tool_error!("not_found", "no such incident")) } else { Ok(()) }
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let tool = registry.get("close_incident").expect("close_incident is registered");
    assert_eq!(tool.effect(), keel_tools_core::definition::Effect::Destructive);
}
