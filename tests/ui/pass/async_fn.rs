use keel_tools_core::definition::Effect;
use keel_tools_core::{Registry, ToolError, tool};

/// Pages the on-call engineer.
#[tool(effect = "write", version = "1.0")]
async fn page_oncall(message: String) -> Result<bool, ToolError> {
    Ok(!message.is_empty())
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let tool = registry.get("page_oncall").expect("page_oncall is registered");
    assert_eq!(tool.effect(), Effect::Write);
    assert!(!tool.idempotent(), "write tools are not idempotent by default");
}
