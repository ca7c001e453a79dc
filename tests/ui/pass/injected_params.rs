use std::sync::Mutex;

use keel_tools_core::{CallContext, Registry, State, ToolError, tool};

struct Store {
    notes: Mutex<Vec<String>>,
}

/// Adds a note to an incident.
#[tool(effect = "write", version = "1.0")]
async fn add_note(
    ctx: CallContext,
    #[arg(description = "The incident id")] id: String,
    store: State<Store>,
    text: String,
) -> Result<usize, ToolError> {
    let mut notes = store.notes.lock().map_err(|_| keel_tools_core::tool_error!("store_poisoned", "try again"))?;
    notes.push(format!("{} {id}: {text}", ctx.call_id()));
    Ok(notes.len())
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let tool = registry.get("add_note").expect("add_note is registered");
    let schema = tool.input_schema();
    let properties = schema["properties"].as_object().expect("properties");
    let mut names: Vec<&str> = properties.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["id", "text"], "injected parameters are not arguments: {schema}");
}
