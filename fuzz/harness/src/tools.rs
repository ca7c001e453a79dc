//! The tools: compiled `#[tool]` fns of each handler kind and two dynamic definitions with hand-written schemas,
//! two of them registered but left out of the executor's view.

use std::collections::BTreeMap;

use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::{CallContext, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::oracle::Oracle;
use crate::record::invoked;

/// How bad an incident is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Low,
    Medium,
    High,
}

/// A window of days.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Window {
    /// First day (0-based).
    pub from_day: u16,
    /// Last day.
    pub to_day: u16,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// Free text to look for.
    #[schemars(length(max = 64))]
    pub query: String,
    pub severity: Severity,
    /// At most five tags.
    #[schemars(length(max = 5))]
    pub tags: Vec<String>,
    /// The page of results.
    pub page: u8,
    /// Only incidents after this Unix time.
    pub since: Option<i64>,
    pub window: Option<Window>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Hit {
    pub id: String,
    pub severity: Severity,
    pub score: f64,
}

/// Search incidents by text, severity and tags.
#[tool(effect = "read", version = "1.2")]
async fn search_incidents(args: SearchArgs, ctx: CallContext) -> Result<Vec<Hit>, ToolError> {
    invoked(&ctx, None);
    if args.query.is_empty() {
        return Err(keel_tools_core::tool_error!("empty_query", "say what to search for"));
    }
    let n = args.tags.len() + usize::from(args.window.is_some());
    Ok((0..n.min(3)).map(|i| Hit { id: format!("INC-{i}"), severity: args.severity, score: 0.5 }).collect())
}

/// Someone to assign.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Person {
    pub name: String,
    pub team: Option<String>,
}

/// What a ticket is about.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    Service { service: String },
    Host { host: String, port: u16 },
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TicketArgs {
    #[schemars(length(min = 1, max = 80))]
    pub title: String,
    pub severity: Severity,
    pub assignee: Option<Person>,
    #[schemars(length(max = 3))]
    pub targets: Vec<Target>,
    pub labels: BTreeMap<String, u32>,
}

/// Open a ticket.
#[tool(effect = "write", version = "2.0")]
async fn create_ticket(args: TicketArgs, ctx: CallContext) -> String {
    invoked(&ctx, None);
    format!("TICKET-{}-{}", args.title.len(), args.targets.len() + args.labels.len())
}

/// Delete an incident for good.
#[tool(effect = "destructive", version = "1.0")]
fn delete_incident(incident_id: String, ctx: CallContext) -> bool {
    invoked(&ctx, None);
    !incident_id.is_empty()
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListArgs {
    /// How many (default 0: all).
    #[serde(default)]
    #[schemars(range(max = 100))]
    pub limit: u32,
    /// Where to continue.
    #[serde(default)]
    pub cursor: String,
    pub reverse: Option<bool>,
}

/// List incidents.
#[tool(effect = "read", version = "1.0")]
fn list_incidents(args: ListArgs, ctx: CallContext) -> Vec<String> {
    invoked(&ctx, None);
    (0..args.limit.min(3)).map(|i| format!("{}{i}", args.cursor.len())).collect()
}

/// A tree of named nodes.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Node {
    pub name: String,
    #[schemars(length(max = 3))]
    pub children: Vec<Node>,
}

fn count(node: &Node) -> u32 {
    1 + node.children.iter().map(count).sum::<u32>()
}

/// Count the nodes of a tree.
#[tool(effect = "read", version = "1.0")]
async fn count_nodes(root: Node, ctx: CallContext) -> u32 {
    invoked(&ctx, None);
    count(&root)
}

/// A unit of length.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Metres.
    Metre,
    /// Feet.
    Foot,
}

/// Convert a length.
#[tool(effect = "read", version = "1.0")]
fn convert_length(
    #[arg(description = "The length")] value: f64,
    unit: Unit,
    precision: Option<u8>,
    ctx: CallContext,
) -> String {
    invoked(&ctx, None);
    let v = match unit {
        Unit::Metre => value * 3.28084,
        Unit::Foot => value / 3.28084,
    };
    format!("{v:.*}", usize::from(precision.unwrap_or(2).min(6)))
}

/// Answer pong.
#[tool(effect = "read", version = "1.0")]
fn ping(ctx: CallContext) -> String {
    invoked(&ctx, None);
    "pong".into()
}

/// Registered, never in the view: must never run.
#[tool(effect = "destructive", version = "1.0")]
fn hidden_admin(ctx: CallContext) -> String {
    invoked(&ctx, None);
    "should never run".into()
}

/// Registered, never in the view: must never run.
#[tool(effect = "read", version = "1.0")]
async fn hidden_report(ctx: CallContext) -> String {
    invoked(&ctx, None);
    "should never run".into()
}

/// The names the executor's view holds.
pub const VIEW: [&str; 9] = [
    "search_incidents",
    "create_ticket",
    "delete_incident",
    "list_incidents",
    "count_nodes",
    "convert_length",
    "ping",
    "fx.echo",
    "fx.transfer",
];

/// Registered but not in the view.
pub const HIDDEN: [&str; 2] = ["hidden_admin", "hidden_report"];

fn echo_schema() -> Value {
    json!({
        "type": "object",
        "$defs": {
            "Point": {
                "type": "object",
                "properties": {
                    "x": {"type": "number"},
                    "y": {"type": "number", "minimum": -1000, "maximum": 1000}
                },
                "required": ["x", "y"],
                "additionalProperties": false
            },
            "Colour": {"type": "string", "enum": ["red", "green", "blue"]}
        },
        "properties": {
            "id": {"type": "string", "minLength": 1, "maxLength": 16},
            "count": {"type": "integer", "minimum": 1, "maximum": 100},
            "points": {"type": "array", "items": {"$ref": "#/$defs/Point"}, "maxItems": 4},
            "colour": {"$ref": "#/$defs/Colour"},
            "mode": {"const": "fast"},
            "note": {"type": ["string", "null"]},
            "meta": {"type": "object", "additionalProperties": {"type": "integer"}},
            "flag": {"type": "boolean"}
        },
        "required": ["id", "count", "colour"],
        "additionalProperties": false
    })
}

fn transfer_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "from": {"type": "string", "minLength": 1, "maxLength": 12},
            "to": {"type": "string", "minLength": 1, "maxLength": 12},
            "amount": {"type": "integer", "minimum": 1, "maximum": 1000000},
            "memo": {"type": "string", "maxLength": 20}
        },
        "required": ["from", "to", "amount"],
        "additionalProperties": false
    })
}

/// A dynamic handler re-checks the arguments it receives with the oracle against its own schema.
pub(crate) fn dynamic_tools() -> Vec<ToolDefinition> {
    let echo = ToolDefinition::builder("fx.echo")
        .description("Echo a record back.")
        .version("1.0")
        .input_schema(echo_schema())
        .output_schema(json!({
            "type": "object",
            "properties": {"received": {"type": "object"}},
            "required": ["received"],
            "additionalProperties": false
        }))
        .handler(|args: Value, ctx: CallContext| async move {
            let schema = echo_schema();
            let problem = Oracle::new(&schema, false).problem(&args);
            invoked(&ctx, problem);
            if args.get("count") == Some(&json!(13)) {
                return Err(keel_tools_core::tool_error!("unlucky_number", "13 is not accepted"));
            }
            Ok(json!({"received": args}))
        })
        .build()
        .expect("fx.echo is a valid definition");
    let transfer = ToolDefinition::builder("fx.transfer")
        .description("Move money between accounts.")
        .version("1.1")
        .effect(Effect::Write)
        .input_schema(transfer_schema())
        .output_schema(json!({"type": "string"}))
        .handler(|args: Value, ctx: CallContext| async move {
            let schema = transfer_schema();
            let problem = Oracle::new(&schema, false).problem(&args);
            invoked(&ctx, problem);
            Ok(json!("done"))
        })
        .build()
        .expect("fx.transfer is a valid definition");
    vec![echo, transfer]
}

/// The codes the harness tools report themselves.
pub const TOOL_CODES: [&str; 2] = ["empty_query", "unlucky_number"];
