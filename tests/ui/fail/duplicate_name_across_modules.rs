mod incidents {
    use keel_tools_core::tool;

    /// Searches incidents.
    #[tool(effect = "read", version = "1.0")]
    pub fn search(query: String) -> Vec<String> {
        vec![query]
    }
}

mod tickets {
    use keel_tools_core::tool;

    /// Searches tickets.
    #[tool(effect = "read", version = "1.0")]
    pub fn search(query: String) -> Vec<String> {
        vec![query]
    }
}

fn main() {}
