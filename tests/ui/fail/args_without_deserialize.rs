use schemars::JsonSchema;
use keel_tools_core::tool;

#[derive(JsonSchema)]
struct LookupArgs {
    id: String,
}

/// Looks up an incident.
#[tool(effect = "read", version = "1.0")]
fn lookup_incident(args: LookupArgs) -> String {
    args.id
}

fn main() {}
