//! The incident desk: one read tool and one write tool behind one executor.

use keel_tools_core::{Executor, Registry, ToolCall, ToolError, ToolResult, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Which incident to look up.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LookupArgs {
    /// The incident id, e.g. `INC-001`.
    pub incident_id: String,
}

/// How bad an incident is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Degraded, not down.
    Low,
    /// Users are affected.
    High,
}

/// One incident.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Incident {
    /// The incident id.
    pub incident_id: String,
    /// The affected service.
    pub service: String,
    /// How bad it is.
    pub severity: Severity,
    /// What users see.
    pub symptom: String,
    /// What the on-call engineer found.
    pub evidence: Vec<String>,
}

/// Look up one incident by its id.
#[tool(effect = "read", version = "1.0", tags = ["incident"])]
pub async fn lookup_incident(args: LookupArgs) -> Result<Incident, ToolError> {
    match args.incident_id.as_str() {
        "INC-001" => Ok(Incident {
            incident_id: "INC-001".into(),
            service: "auth-api".into(),
            severity: Severity::High,
            symptom: "login keeps returning 502".into(),
            evidence: vec!["auth-api timeout".into(), "database pool exhausted".into()],
        }),
        other => Err(keel_tools_core::tool_error!("incident_not_found", "there is no incident {other}")),
    }
}

/// A created ticket.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Ticket {
    /// The ticket id.
    pub ticket_id: String,
    /// The incident it tracks.
    pub incident_id: String,
}

/// Open a ticket that tracks an incident.
#[tool(
    effect = "write",
    version = "1.0",
    tags = ["incident"],
    example = r#"{"incident_id": "INC-001", "title": "Logins fail for every user of auth-api"}"#
)]
pub fn create_ticket(
    #[arg(description = "The incident the ticket tracks, e.g. INC-001")] incident_id: String,
    #[arg(description = "A one-line summary")] title: String,
) -> Ticket {
    let _ = title;
    Ticket { ticket_id: format!("TCK-{}", incident_id.trim_start_matches("INC-")), incident_id }
}

/// The desk's executor: a view of exactly its two tools.
pub fn executor() -> Executor {
    let registry = Registry::from_inventory().expect("tool names are unique");
    let view = registry.view().names(["lookup_incident", "create_ticket"]).build().expect("desk tools are linked");
    Executor::new(view).expect("desk schemas compile")
}

/// The desk's four calls: a valid lookup, an unknown tool, invalid arguments, a write without approval.
pub fn seed_calls() -> Vec<ToolCall> {
    vec![
        ToolCall::new("call-valid", "lookup_incident", json!({"incident_id": "INC-001"})),
        ToolCall::new("call-unknown", "delete_prod", json!({"confirm": true})),
        ToolCall::new("call-invalid", "lookup_incident", json!({"incident": 1})),
        ToolCall::new("call-write", "create_ticket", json!({"incident_id": "INC-001", "title": "auth-api 502"})),
    ]
}

/// Runs [`seed_calls`] one by one.
pub async fn run_seed_calls() -> Vec<ToolResult> {
    let executor = executor();
    let mut results = Vec::new();
    for call in seed_calls() {
        results.push(executor.call(call).await);
    }
    results
}
