use keel_tools_core::tool;

/// Searches incidents.
#[tool(effect = "read", version = "1.0", name = "Incident-Search")]
fn search_incidents(query: String) -> Vec<String> {
    vec![query]
}

fn main() {}
