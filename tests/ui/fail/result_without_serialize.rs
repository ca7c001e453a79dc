use schemars::JsonSchema;
use keel_tools_core::{ToolError, tool};

#[derive(JsonSchema)]
struct Incident {
    id: String,
}

/// Looks up an incident.
#[tool(effect = "read", version = "1.0")]
fn lookup_incident(id: String) -> Result<Incident, ToolError> {
    Ok(Incident { id })
}

fn main() {}
