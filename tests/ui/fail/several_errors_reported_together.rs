use keel_tools_core::tool;

/// Looks up an incident.
#[tool(effect = "reads", version = "1", name = "Lookup-Incident")]
fn lookup_incident(id: String) -> String {
    id
}

fn main() {}
