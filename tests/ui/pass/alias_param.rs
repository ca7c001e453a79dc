//! A parameter whose type is an alias is known by what the alias names: here a named `string` argument.
use keel_tools_core::{Registry, tool};

type NoteId = String;

/// Reads one note.
#[tool(effect = "read", version = "1.0")]
fn get_note(id: NoteId) -> String {
    format!("note {id}")
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let schema = registry.get("get_note").expect("registered").input_schema().clone();
    assert_eq!(schema["properties"]["id"]["type"], "string", "{schema}");
    assert_eq!(schema["required"], serde_json::json!(["id"]), "{schema}");
}
