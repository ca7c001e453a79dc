//! Two tools for the catalogue demo (`examples/examples/catalogue.rs`):
//!
//! - [`get_service_status`]: the local tool a catalogue row names by its Rust path;
//! - [`search_incidents`]: served by the demo's MCP server; the catalogue's remote row `incident.search` forwards
//!   to it under this, its origin name.

use keel_tools_core::{ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which service to report on.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {
    /// The service, e.g. `auth-api`.
    pub service_name: String,
}

/// A service's current status.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ServiceStatus {
    /// The service.
    pub service_name: String,
    /// `ok`, `degraded` or `down`.
    pub status: String,
    /// The team that owns it.
    pub owner: String,
}

/// Report a service's current status and the team that owns it.
#[tool(effect = "read", version = "1.0", tags = ["status"])]
pub fn get_service_status(args: StatusArgs) -> Result<ServiceStatus, ToolError> {
    let (status, owner) = match args.service_name.as_str() {
        "auth-api" => ("degraded", "identity-team"),
        "payments" => ("ok", "payments-team"),
        other => return Err(keel_tools_core::tool_error!("service_not_found", "there is no service {other:?}")),
    };
    Ok(ServiceStatus { service_name: args.service_name, status: status.into(), owner: owner.into() })
}

/// Which incidents to search.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// The affected service, e.g. `payments`.
    pub service: String,
    /// At most this many incidents (default 10).
    pub limit: Option<i64>,
}

/// One incident found by a search.
#[derive(Debug, Serialize, JsonSchema)]
pub struct IncidentHit {
    /// The incident id.
    pub incident_id: String,
    /// The affected service.
    pub service: String,
    /// A one-line summary.
    pub title: String,
}

/// The incidents a search found.
#[derive(Debug, Serialize, JsonSchema)]
pub struct IncidentHits {
    /// Newest first.
    pub incidents: Vec<IncidentHit>,
}

/// Search recent incidents of one service, newest first.
#[tool(effect = "read", version = "1.0", tags = ["incident"])]
pub fn search_incidents(args: SearchArgs) -> IncidentHits {
    let all = [
        ("INC-104", "payments", "card authorisations time out"),
        ("INC-101", "payments", "refund webhook retries pile up"),
        ("INC-001", "auth-api", "login keeps returning 502"),
    ];
    let limit = usize::try_from(args.limit.unwrap_or(10)).unwrap_or(0);
    IncidentHits {
        incidents: all
            .iter()
            .filter(|(_, service, _)| *service == args.service)
            .take(limit)
            .map(|(id, service, title)| IncidentHit {
                incident_id: (*id).into(),
                service: (*service).into(),
                title: (*title).into(),
            })
            .collect(),
    }
}
