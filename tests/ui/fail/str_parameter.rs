use keel_tools_core::tool;

/// Looks up an incident.
#[tool(effect = "read", version = "1.0")]
fn lookup_incident(id: &str) -> String {
    id.to_owned()
}

fn main() {}
