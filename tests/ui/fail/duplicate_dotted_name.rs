use keel_tools_core::tool;

/// Searches incidents.
#[tool(effect = "read", version = "1.0", name = "incident.search")]
fn search_incidents(query: String) -> Vec<String> {
    vec![query]
}

/// Searches incidents, the new way.
#[tool(effect = "read", version = "2.0", name = "incident.search")]
fn search_incidents_v2(query: String) -> Vec<String> {
    vec![query]
}

fn main() {}
