use keel_tools_core::tool;

/// Looks up an incident.
#[tool(effect = "read", version = "1.0")]
fn lookup_incident(id: String) -> String {
    id
}

/// Looks up an incident, again.
#[tool(effect = "read", version = "1.0", name = "lookup_incident")]
fn lookup_incident_again(id: String) -> String {
    id
}

fn main() {}
