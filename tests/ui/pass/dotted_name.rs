use keel_tools_core::{Registry, tool};

/// Searches incidents.
#[tool(effect = "read", version = "1.0", name = "incident.search")]
fn search_incidents(query: String) -> Vec<String> {
    vec![query]
}

/// Searches incidents by owner.
#[tool(effect = "read", version = "1.0", name = "incident.search_by_owner")]
fn search_by_owner(owner: String) -> Vec<String> {
    vec![owner]
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    assert!(registry.get("incident.search").is_some(), "incident.search is registered");
    assert!(registry.get("incident.search_by_owner").is_some(), "incident.search_by_owner is registered");
    assert!(registry.get("search_incidents").is_none(), "an explicit name replaces the fn name");
}
