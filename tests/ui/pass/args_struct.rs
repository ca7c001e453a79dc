use keel_tools_core::definition::Effect;
use keel_tools_core::{Registry, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What to look up.
#[derive(Deserialize, JsonSchema)]
struct LookupArgs {
    /// The incident id, e.g. `INC-42`.
    id: String,
}

#[derive(Serialize, JsonSchema)]
struct Incident {
    id: String,
    open: bool,
}

/// Looks up one incident by its id.
#[tool(effect = "read", version = "1.0")]
fn lookup_incident(args: LookupArgs) -> Result<Incident, ToolError> {
    Ok(Incident { id: args.id, open: true })
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let tool = registry.get("lookup_incident").expect("lookup_incident is registered");
    assert_eq!(tool.description(), "Looks up one incident by its id.");
    assert_eq!(tool.version(), "1.0");
    assert_eq!(tool.effect(), Effect::Read);
    assert!(tool.idempotent(), "read tools are idempotent by default");
    assert!(tool.input_schema()["properties"].get("id").is_some(), "{}", tool.input_schema());
    let output = tool.output_schema().expect("an output schema");
    assert!(output["properties"].get("open").is_some(), "{output}");
}
