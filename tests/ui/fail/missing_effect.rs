use keel_tools_core::tool;

/// Looks up an incident.
#[tool(version = "1.0")]
fn lookup_incident(id: String) -> String {
    id
}

fn main() {}
