use keel_tools_core::{CallContext, tool};

/// Looks up an incident.
#[tool(effect = "read", version = "1.0")]
fn lookup_incident(id: String, #[arg(description = "The call")] ctx: CallContext) -> String {
    format!("{id} {}", ctx.call_id())
}

fn main() {}
