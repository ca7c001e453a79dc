use keel_tools_core::tool;

#[path = "support/other_search.rs"]
mod other_search;

/// Searches incidents.
#[tool(effect = "read", version = "1.0")]
fn search(query: String) -> Vec<String> {
    vec![query]
}

fn main() {}
