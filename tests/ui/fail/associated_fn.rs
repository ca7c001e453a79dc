use keel_tools_core::tool;

struct Incidents;

impl Incidents {
    /// Looks up an incident.
    #[tool(effect = "read", version = "1.0")]
    fn lookup_incident(id: String) -> String {
        id
    }
}

fn main() {}
