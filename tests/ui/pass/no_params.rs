use keel_tools_core::{Registry, tool};

/// Names the team on call.
#[tool(effect = "read", version = "1.0")]
fn oncall_team() -> String {
    "sre".to_owned()
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let tool = registry.get("oncall_team").expect("oncall_team is registered");
    let schema = tool.input_schema();
    assert_eq!(schema["type"], "object", "{schema}");
    assert!(schema.get("properties").is_none_or(|p| p.as_object().is_some_and(|p| p.is_empty())), "{schema}");
}
