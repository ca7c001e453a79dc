use keel_tools_core::tool;

/// Names the on-call team.
#[tool(effect = "read", version = "1.0")]
fn oncall_team() -> &'static str {
    "sre"
}

fn main() {}
