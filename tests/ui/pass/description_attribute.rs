use keel_tools_core::{Registry, tool};

#[tool(effect = "read", version = "1.0", description = "Lists the services of a team.")]
fn list_services(team: String) -> Vec<String> {
    vec![team]
}

/// This doc comment is for Rust readers.
#[tool(effect = "read", version = "1.0", description = "Lists the teams.")]
fn list_teams() -> Vec<String> {
    Vec::new()
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    assert_eq!(registry.get("list_services").expect("registered").description(), "Lists the services of a team.");
    assert_eq!(registry.get("list_teams").expect("registered").description(), "Lists the teams.");
}
