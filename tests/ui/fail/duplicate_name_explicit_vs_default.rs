use keel_tools_core::tool;

/// Closes an incident.
#[tool(effect = "write", version = "1.0")]
fn close_incident(id: String) -> bool {
    !id.is_empty()
}

/// Resolves an incident; claims the name the fn above has by default.
#[tool(effect = "write", version = "1.0", name = "close_incident")]
fn resolve(id: String) -> bool {
    !id.is_empty()
}

fn main() {}
