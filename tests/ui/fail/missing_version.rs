use keel_tools_core::tool;

/// Looks up an incident.
#[tool(effect = "read")]
fn lookup_incident(id: String) -> String {
    id
}

fn main() {}
