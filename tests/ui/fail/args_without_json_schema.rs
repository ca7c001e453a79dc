use serde::Deserialize;
use keel_tools_core::tool;

#[derive(Deserialize)]
struct LookupArgs {
    id: String,
}

/// Looks up an incident.
#[tool(effect = "read", version = "1.0")]
fn lookup_incident(args: LookupArgs) -> String {
    args.id
}

fn main() {}
