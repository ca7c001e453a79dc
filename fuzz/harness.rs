//! The executor's invariant harness, shared by the property tests (`tests/tests/properties.rs`, run in CI) and the
//! fuzz target (`fuzz/fuzz_targets/executor.rs`, run by hand; see `docs/FUZZING.md`).
//!
//! It holds:
//!
//! - a set of tools (compiled `#[tool]` fns of each handler kind and two dynamic definitions with hand-written
//!   schemas), two of them registered but left out of the executor's view;
//! - [`Oracle`]: an independent validator for the JSON Schema subset those tools use (object, properties, required,
//!   additionalProperties, type, enum, const, string/integer/number/boolean/array/null, items, lengths, bounds,
//!   fixed-width integer formats, anyOf/oneOf/allOf, `$ref` into `$defs`), used to predict what the executor must do;
//! - [`instance`]: a generator of valid instances of such a schema, as proptest strategies, and [`Mutation`]s that
//!   break them (drop a required key, add an unknown key, change a type, nest deeper, huge and long strings, deep
//!   nesting, edge numbers, null);
//! - [`Harness::check`]: runs one call and asserts every invariant; [`Harness::fuzz_one`]: the same from raw bytes.
//!
//! Invariants asserted on every call:
//!
//! 1. the executor returns (no panic) and the result carries the call's id;
//! 2. a handler runs at most once, only for a name in the view, only with arguments the oracle finds valid (the
//!    dynamic handlers re-check what they receive), only after the policy allowed that very call (the policy
//!    records its decisions under the call's tenant, a unique key per call), and `executed` says whether it ran;
//! 3. the policy is only ever asked about schema-valid arguments;
//! 4. the executor's answer is the oracle's prediction: `unknown_tool`, `invalid_arguments`, `policy_denied`,
//!    `approval_required`, or a run that ends in `ok` or the tool's own code;
//! 5. no result contains a file path, `panicked`, a Rust type path or serde/jsonschema error wording, unless the
//!    caller's own input contained that text (a model's name or keys may be echoed back).

#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::strategy::{SBoxedStrategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tool_core::Handler;
use tool_core::PolicyRequest;
use tool_core::{
    Approval, CallContext, CallOptions, Effect, EffectPolicy, Executor, Policy, PolicyDecision, Registry, ToolCall,
    ToolDefinition, ToolError, ToolResult, tool,
};

// ---------------------------------------------------------------------------------------------------------------
// What handlers and the policy record, keyed by the call's tenant (unique per checked call)
// ---------------------------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    Allow,
    Approval,
    Deny,
}

#[derive(Debug, Default)]
pub struct Record {
    /// `(tool, decision, whether the arguments the policy saw were valid)`.
    pub policy: Vec<(String, Decided, bool)>,
    /// `(tool, Some(problem))` when a dynamic handler found its arguments invalid; `None` when they were valid or
    /// the handler is compiled (its arguments were deserialized into typed parameters).
    pub invoked: Vec<(String, Option<String>)>,
    /// A record whose call had no tenant (never happens in the harness; counted to prove it).
    pub untracked: bool,
}

fn records() -> &'static Mutex<HashMap<String, Record>> {
    static RECORDS: OnceLock<Mutex<HashMap<String, Record>>> = OnceLock::new();
    RECORDS.get_or_init(Default::default)
}

fn with_record<R>(tenant: Option<&str>, f: impl FnOnce(&mut Record) -> R) -> R {
    let mut map = records().lock().unwrap_or_else(|p| p.into_inner());
    match tenant {
        Some(t) => f(map.entry(t.to_owned()).or_default()),
        None => {
            let r = map.entry(String::new()).or_default();
            r.untracked = true;
            f(r)
        }
    }
}

fn take_record(tenant: &str) -> Record {
    records().lock().unwrap_or_else(|p| p.into_inner()).remove(tenant).unwrap_or_default()
}

/// Records that a handler ran; `problem` is what a dynamic handler found wrong with its arguments.
fn invoked(ctx: &CallContext, problem: Option<String>) {
    with_record(ctx.tenant(), |r| r.invoked.push((ctx.tool_name().to_owned(), problem)));
}

/// Handler invocations recorded for calls without a tenant (must stay 0).
pub fn untracked_invocations() -> usize {
    let map = records().lock().unwrap_or_else(|p| p.into_inner());
    map.get("").map_or(0, |r| r.invoked.len())
}

// ---------------------------------------------------------------------------------------------------------------
// The tools
// ---------------------------------------------------------------------------------------------------------------

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
        return Err(tool_core::tool_error!("empty_query", "say what to search for"));
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
#[tool(effect = "read", version = "1.0", blocking = false)]
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
#[tool(effect = "read", version = "1.0", blocking = false)]
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
fn dynamic_tools() -> Vec<ToolDefinition> {
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
                return Err(tool_core::tool_error!("unlucky_number", "13 is not accepted"));
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

// ---------------------------------------------------------------------------------------------------------------
// The policy: the default effect policy, a tenant-based denial, and a record of every decision
// ---------------------------------------------------------------------------------------------------------------

/// Tenants ending with this are denied everything.
pub const DENY_SUFFIX: &str = "/deny";

struct RecordingPolicy;

impl Policy for RecordingPolicy {
    fn decide(&self, r: &PolicyRequest<'_>) -> PolicyDecision {
        let decision = if r.tenant.is_some_and(|t| t.ends_with(DENY_SUFFIX)) {
            PolicyDecision::Deny { reason: "this tenant may not use tools".into() }
        } else {
            EffectPolicy.decide(r)
        };
        let decided = match decision {
            PolicyDecision::Allow => Decided::Allow,
            PolicyDecision::RequireApproval { .. } => Decided::Approval,
            PolicyDecision::Deny { .. } => Decided::Deny,
        };
        // JSON Schema validity: a compiled tool's integral float (`5.0`) is valid here and refused later, when the
        // handler converts its arguments.
        let valid = Oracle::new(r.tool.input_schema(), false).valid_strict(r.arguments);
        with_record(r.tenant, |rec| rec.policy.push((r.tool.name().to_owned(), decided, valid)));
        decision
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The oracle: an independent validator for the schema subset
// ---------------------------------------------------------------------------------------------------------------

/// The executor's default argument limits (`Limits::DEFAULT`), restated.
pub const MAX_DEPTH: usize = 64;
pub const MAX_BYTES: usize = 1024 * 1024;

/// Validates values against one root schema (with its `$defs`).
pub struct Oracle<'a> {
    root: &'a Value,
    /// Compiled tools deserialize into typed parameters: an integral float (`5.0`) passes `"type": "integer"` but
    /// not serde's integer types, so it is treated as invalid (the executor answers `invalid_arguments` without
    /// running the handler in both cases).
    serde_integers: bool,
}

fn integer_range(format: &str) -> Option<(i128, i128)> {
    Some(match format {
        "int8" => (i8::MIN.into(), i8::MAX.into()),
        "int16" => (i16::MIN.into(), i16::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        "int64" | "int" => (i64::MIN.into(), i64::MAX.into()),
        "uint8" => (0, u8::MAX.into()),
        "uint16" => (0, u16::MAX.into()),
        "uint32" => (0, u32::MAX.into()),
        "uint64" | "uint" => (0, u64::MAX.into()),
        _ => return None,
    })
}

/// An exact numeric value: an integer, or a finite float.
#[derive(Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

fn num(n: &serde_json::Number) -> Num {
    if let Some(i) = n.as_i64() {
        Num::Int(i.into())
    } else if let Some(u) = n.as_u64() {
        Num::Int(u.into())
    } else {
        Num::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Exact comparison of two numbers (no rounding of large integers through `f64`).
fn cmp_num(a: Num, b: Num) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    const LIMIT: f64 = 1.7e38; // below 2^127
    fn float_vs_int(x: f64, n: i128) -> std::cmp::Ordering {
        if x >= LIMIT {
            return Greater;
        }
        if x <= -LIMIT {
            return Less;
        }
        let f = x.floor();
        let fi = f as i128;
        match fi.cmp(&n) {
            Less => Less, // x < f + 1 <= n
            Greater => Greater,
            Equal if x > f => Greater,
            Equal => Equal,
        }
    }
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.cmp(&y),
        (Num::Float(x), Num::Int(y)) => float_vs_int(x, y),
        (Num::Int(x), Num::Float(y)) => float_vs_int(y, x).reverse(),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y).unwrap_or(Equal),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Keywords that carry no constraint.
const ANNOTATIONS: [&str; 8] = ["$schema", "title", "description", "default", "$defs", "examples", "$comment", "$id"];

impl<'a> Oracle<'a> {
    pub fn new(root: &'a Value, serde_integers: bool) -> Oracle<'a> {
        Oracle { root, serde_integers }
    }

    /// The oracle for a tool's own (model-facing) input schema.
    pub fn for_tool(def: &'a ToolDefinition) -> Oracle<'a> {
        Oracle::new(def.input_schema(), !matches!(def.handler(), Handler::Dynamic(_)))
    }

    /// The schema a local `$ref` points to.
    fn resolve(&self, reference: &Value) -> &'a Value {
        let r = reference.as_str().unwrap_or_else(|| panic!("`$ref` is not a string: {reference}"));
        let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("the oracle resolves local references only: {r}"));
        self.root.pointer(pointer).unwrap_or_else(|| panic!("dangling reference {r}"))
    }

    /// Valid against the schema, within the executor's limits, as the executor validates: strictly, or else after
    /// removing the `null`s of optional properties that do not accept `null` (OpenAI strict mode's "not given").
    pub fn valid(&self, v: &Value) -> bool {
        self.cleaned(v).is_some()
    }

    /// The arguments as the handler and the policy see them, if they are valid.
    pub fn cleaned(&self, v: &Value) -> Option<Value> {
        if !within_limits(v) {
            return None;
        }
        if self.check(self.root, v, 0).is_ok() {
            return Some(v.clone());
        }
        let mut c = v.clone();
        if self.clean(self.root, &mut c, 0) > 0 && self.check(self.root, &c, 0).is_ok() { Some(c) } else { None }
    }

    /// Valid against the schema as it is (no null removal, no limits).
    pub fn valid_strict(&self, v: &Value) -> bool {
        self.check(self.root, v, 0).is_ok()
    }

    /// What is wrong with `v`, for a handler's record (`None`: valid).
    pub fn problem(&self, v: &Value) -> Option<String> {
        self.check(self.root, v, 0).err()
    }

    fn check(&self, schema: &'a Value, v: &Value, depth: usize) -> Result<(), String> {
        if depth > 200 {
            return Err("schema nesting".into());
        }
        let s = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => return Err("false schema".into()),
            Value::Object(s) => s,
            other => panic!("not a schema: {other}"),
        };
        for (key, kv) in s {
            let fail = |what: &str| Err(format!("{key}: {what}"));
            match key.as_str() {
                k if ANNOTATIONS.contains(&k) => {}
                "$ref" => self.check(self.resolve(kv), v, depth + 1)?,
                "type" => {
                    let ok = match kv {
                        Value::String(t) => self.has_type(v, t),
                        Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| self.has_type(v, t)),
                        other => panic!("type: {other}"),
                    };
                    if !ok {
                        return fail(&format!("{} is not {kv}", json_type(v)));
                    }
                }
                "enum" => {
                    if !kv.as_array().is_some_and(|e| e.iter().any(|c| json_equal(c, v))) {
                        return fail("not listed");
                    }
                }
                "const" => {
                    if !json_equal(kv, v) {
                        return fail("not the constant");
                    }
                }
                "properties" => {
                    if let (Value::Object(o), Some(props)) = (v, kv.as_object()) {
                        for (name, ps) in props {
                            if let Some(pv) = o.get(name) {
                                self.check(ps, pv, depth + 1).map_err(|e| format!("/{name}: {e}"))?;
                            }
                        }
                    }
                }
                "required" => {
                    if let Value::Object(o) = v {
                        for name in kv.as_array().into_iter().flatten().filter_map(Value::as_str) {
                            if !o.contains_key(name) {
                                return fail(&format!("missing {name}"));
                            }
                        }
                    }
                }
                "additionalProperties" => {
                    if let Value::Object(o) = v {
                        let props = s.get("properties").and_then(Value::as_object);
                        for (name, pv) in o {
                            if props.is_none_or(|p| !p.contains_key(name)) {
                                self.check(kv, pv, depth + 1).map_err(|e| format!("/{name} (extra): {e}"))?;
                            }
                        }
                    }
                }
                "items" => {
                    if let Value::Array(items) = v {
                        for (i, item) in items.iter().enumerate() {
                            self.check(kv, item, depth + 1).map_err(|e| format!("/{i}: {e}"))?;
                        }
                    }
                }
                "minItems" | "maxItems" => {
                    if let Value::Array(items) = v {
                        let bound = kv.as_u64().unwrap_or_else(|| panic!("{key}: {kv}")) as usize;
                        if (key == "minItems" && items.len() < bound) || (key == "maxItems" && items.len() > bound) {
                            return fail(&format!("{} items", items.len()));
                        }
                    }
                }
                "minLength" | "maxLength" => {
                    if let Value::String(text) = v {
                        let bound = kv.as_u64().unwrap_or_else(|| panic!("{key}: {kv}")) as usize;
                        let n = text.chars().count();
                        if (key == "minLength" && n < bound) || (key == "maxLength" && n > bound) {
                            return fail(&format!("{n} characters"));
                        }
                    }
                }
                "minimum" | "maximum" => {
                    if let (Value::Number(n), Value::Number(b)) = (v, kv) {
                        let ord = cmp_num(num(n), num(b));
                        if (key == "minimum" && ord.is_lt()) || (key == "maximum" && ord.is_gt()) {
                            return fail(&format!("{n} is out of bounds"));
                        }
                    }
                }
                "format" => {
                    let f = kv.as_str().unwrap_or_default();
                    match integer_range(f) {
                        Some((lo, hi)) => {
                            if let Value::Number(n) = v {
                                let n = num(n);
                                if cmp_num(n, Num::Int(lo)).is_lt() || cmp_num(n, Num::Int(hi)).is_gt() {
                                    return fail(&format!("out of the range of {f}"));
                                }
                            }
                        }
                        None if f == "double" || f == "float" => {}
                        None => panic!("the oracle does not know the format `{f}`"),
                    }
                }
                "anyOf" | "oneOf" | "allOf" => {
                    let branches = kv.as_array().unwrap_or_else(|| panic!("{key}: {kv}"));
                    let passing = branches.iter().filter(|b| self.check(b, v, depth + 1).is_ok()).count();
                    let ok = match key.as_str() {
                        "anyOf" => passing >= 1,
                        "oneOf" => passing == 1,
                        _ => passing == branches.len(),
                    };
                    if !ok {
                        return fail(&format!("{passing} of {} branches match", branches.len()));
                    }
                }
                other => panic!("the oracle does not support the keyword `{other}` (in {schema})"),
            }
        }
        Ok(())
    }

    fn has_type(&self, v: &Value, t: &str) -> bool {
        match (t, v) {
            ("null", Value::Null)
            | ("boolean", Value::Bool(_))
            | ("string", Value::String(_))
            | ("array", Value::Array(_))
            | ("object", Value::Object(_))
            | ("number", Value::Number(_)) => true,
            ("integer", Value::Number(n)) => {
                n.is_i64()
                    || n.is_u64()
                    || (!self.serde_integers && n.as_f64().is_some_and(|f| f.is_finite() && f.fract() == 0.0))
            }
            (
                "null" | "boolean" | "string" | "array" | "object" | "number" | "integer",
                Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) | Value::Object(_),
            ) => false,
            (other, _) => panic!("unknown type {other}"),
        }
    }

    /// Follows `$ref`s (their sibling keywords are annotations in the harness schemas).
    fn deref(&self, mut schema: &'a Value) -> &'a Value {
        for _ in 0..32 {
            match schema.get("$ref") {
                Some(r) => schema = self.resolve(r),
                None => break,
            }
        }
        schema
    }

    /// Removes `null` values of optional properties whose schema does not accept `null`; returns how many.
    fn clean(&self, schema: &'a Value, v: &mut Value, depth: usize) -> usize {
        if depth > 64 {
            return 0;
        }
        let schema = self.deref(schema);
        let Value::Object(s) = schema else { return 0 };
        let mut removed = 0;
        match v {
            Value::Object(o) => {
                let props = s.get("properties").and_then(Value::as_object);
                let required: Vec<&str> = s
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let extra = s.get("additionalProperties").filter(|e| e.is_object());
                let keys: Vec<String> = o.keys().cloned().collect();
                for key in keys {
                    match props.and_then(|p| p.get(&key)) {
                        Some(ps) if o[&key].is_null() => {
                            if !required.contains(&key.as_str()) && self.check(ps, &Value::Null, depth + 1).is_err() {
                                o.remove(&key);
                                removed += 1;
                            }
                        }
                        Some(ps) => removed += self.clean(ps, o.get_mut(&key).expect("present"), depth + 1),
                        None => {
                            if let Some(extra) = extra {
                                removed += self.clean(extra, o.get_mut(&key).expect("present"), depth + 1);
                            }
                        }
                    }
                }
                for keyword in ["anyOf", "oneOf", "allOf"] {
                    for branch in s.get(keyword).and_then(Value::as_array).into_iter().flatten() {
                        if keyword == "allOf" || self.branch_matches(branch, v) {
                            removed += self.clean(branch, v, depth + 1);
                        }
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = s.get("items") {
                    for item in items {
                        removed += self.clean(item_schema, item, depth + 1);
                    }
                }
            }
            _ => {}
        }
        removed
    }

    /// A union branch that describes this object: its required keys are present and its fixed values match.
    fn branch_matches(&self, branch: &'a Value, v: &Value) -> bool {
        let branch = self.deref(branch);
        let (Some(props), Value::Object(o)) = (branch.get("properties").and_then(Value::as_object), v) else {
            return false;
        };
        let required = branch.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
        let fixed_match = props.iter().all(|(name, ps)| {
            let ps = self.deref(ps);
            let fixed =
                ps.get("const").or_else(|| ps.get("enum").and_then(Value::as_array).filter(|e| e.len() == 1)?.first());
            match (fixed, o.get(name)) {
                (Some(f), Some(actual)) => f == actual,
                _ => true,
            }
        });
        required.into_iter().all(|k| o.contains_key(k)) && fixed_match
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`), as JSON Schema's `enum` and `const` do.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => cmp_num(num(x), num(y)).is_eq(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| json_equal(a, b)))
        }
        _ => a == b,
    }
}

/// Nesting depth as the executor's limits count it: a scalar is 0, `{}` is 1.
pub fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// A lower bound of the compact JSON size of `v` that reads no string's bytes (so a huge string costs nothing).
fn size_lower_bound(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len() + 2,
        Value::Array(a) => a.iter().map(size_lower_bound).sum::<usize>() + 2,
        Value::Object(o) => o.iter().map(|(k, v)| k.len() + 3 + size_lower_bound(v)).sum::<usize>() + 2,
        _ => 1,
    }
}

/// Within the executor's default argument limits (depth 64, 1 MiB of compact JSON).
pub fn within_limits(v: &Value) -> bool {
    if depth(v) > MAX_DEPTH || size_lower_bound(v) > MAX_BYTES {
        return false;
    }
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut bytes = Count(0);
    depth(v) <= MAX_DEPTH && serde_json::to_writer(&mut bytes, v).is_ok() && bytes.0 <= MAX_BYTES
}

/// Panics unless every keyword of `schema` is one the oracle and the generator understand.
pub fn assert_supported(name: &str, schema: &Value) {
    let oracle = Oracle::new(schema, false);
    // Checking a few values of every JSON type walks every keyword reachable from the root.
    for v in [json!(null), json!(true), json!(1), json!(0.5), json!("s"), json!([]), json!({})] {
        let _ = oracle.check(schema, &v, 0);
    }
    let mut stack = vec![schema];
    while let Some(s) = stack.pop() {
        if let Value::Object(m) = s {
            for (k, v) in m {
                assert!(
                    ANNOTATIONS.contains(&k.as_str())
                        || [
                            "$ref",
                            "type",
                            "enum",
                            "const",
                            "properties",
                            "required",
                            "additionalProperties",
                            "items",
                            "minItems",
                            "maxItems",
                            "minLength",
                            "maxLength",
                            "minimum",
                            "maximum",
                            "format",
                            "anyOf",
                            "oneOf",
                            "allOf",
                        ]
                        .contains(&k.as_str()),
                    "tool `{name}`: keyword `{k}` is outside the harness subset"
                );
                match k.as_str() {
                    "properties" | "$defs" => stack.extend(v.as_object().into_iter().flat_map(|o| o.values())),
                    "anyOf" | "oneOf" | "allOf" => stack.extend(v.as_array().into_iter().flatten()),
                    "items" | "additionalProperties" => stack.push(v),
                    _ => {}
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The generator: valid instances of a schema, as proptest strategies
// ---------------------------------------------------------------------------------------------------------------

/// Past this depth of `$ref`s, arrays are generated at their minimum length and optional properties left out, so
/// recursive schemas stay finite.
const MAX_GEN_DEPTH: usize = 4;

/// Characters of generated strings: mostly lowercase letters, sometimes punctuation, escapes, control characters,
/// non-ASCII and invisible characters. Picked by index from one table (a union per character would make generation
/// several times slower).
const TEXT_CHARS: [char; 44] = [
    'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p', 'q', 'r', 's', 't', 'u', 'v', 'w',
    'x', 'y', 'z', 'A', 'Z', '0', '9', ' ', '-', '_', '.', '/', ':', '"', '\\', '\n', '\u{0}', 'é', '中', '😀',
    '\u{200b}',
];

fn string_of(min: usize, max: usize) -> SBoxedStrategy<Value> {
    prop::collection::vec(0..TEXT_CHARS.len(), min..=max)
        .prop_map(|ix| Value::String(ix.into_iter().map(|i| TEXT_CHARS[i]).collect()))
        .sboxed()
}

fn bound(s: &Map<String, Value>, key: &str) -> Option<Num> {
    s.get(key).and_then(Value::as_number).map(num)
}

fn integer_strategy(s: &Map<String, Value>) -> SBoxedStrategy<Value> {
    let (mut lo, mut hi) = (i128::from(i64::MIN), i128::from(u64::MAX));
    if let Some((flo, fhi)) = s.get("format").and_then(Value::as_str).and_then(integer_range) {
        lo = lo.max(flo);
        hi = hi.min(fhi);
    }
    if let Some(Num::Int(m)) = bound(s, "minimum") {
        lo = lo.max(m);
    }
    if let Some(Num::Int(m)) = bound(s, "maximum") {
        hi = hi.min(m);
    }
    assert!(lo <= hi, "empty integer range in {s:?}");
    let to_value = |i: i128| match i64::try_from(i) {
        Ok(i) => Value::from(i),
        Err(_) => Value::from(u64::try_from(i).expect("within u64")),
    };
    let (l, h) = (to_value(lo), to_value(hi));
    let zero = to_value(0i128.clamp(lo, hi));
    let middle: SBoxedStrategy<Value> = if hi <= i128::from(i64::MAX) {
        ((lo as i64)..=(hi as i64)).prop_map(Value::from).sboxed()
    } else if lo >= 0 {
        ((lo as u64)..=(hi as u64)).prop_map(Value::from).sboxed()
    } else {
        prop_oneof![((lo as i64)..=-1i64).prop_map(Value::from), (0u64..=(hi as u64)).prop_map(Value::from)].sboxed()
    };
    let small = ((lo.max(-3) as i64)..=(hi.min(300).max(lo.max(-3)) as i64)).prop_map(Value::from);
    prop_oneof![1 => Just(l), 1 => Just(h), 1 => Just(zero), 3 => small, 4 => middle].sboxed()
}

fn number_strategy(s: &Map<String, Value>) -> SBoxedStrategy<Value> {
    let as_f64 = |n: Option<Num>| match n {
        Some(Num::Int(i)) => Some(i as f64),
        Some(Num::Float(f)) => Some(f),
        None => None,
    };
    let lo = as_f64(bound(s, "minimum")).unwrap_or(-1e12);
    let hi = as_f64(bound(s, "maximum")).unwrap_or(1e12);
    let finite = |f: f64| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number);
    prop_oneof![
        1 => Just(finite(lo)),
        1 => Just(finite(hi)),
        4 => (lo..=hi).prop_map(finite),
        2 => ((lo.max(-1000.0) as i64)..=(hi.min(1000.0) as i64)).prop_map(Value::from),
    ]
    .sboxed()
}

/// Valid instances of `schema` (within `root`); `depth` counts the `$ref`s followed so far.
pub fn instance(root: &Value, schema: &Value, depth: usize) -> SBoxedStrategy<Value> {
    let s = match schema {
        Value::Bool(true) => return Just(json!("anything")).sboxed(),
        Value::Object(s) => s,
        other => panic!("cannot generate instances of {other}"),
    };
    if let Some(r) = s.get("$ref") {
        let target = Oracle::new(root, false).resolve(r);
        return instance(root, target, depth + 1);
    }
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        return prop::sample::select(values.clone()).sboxed();
    }
    if let Some(c) = s.get("const") {
        return Just(c.clone()).sboxed();
    }
    for keyword in ["anyOf", "oneOf"] {
        if let Some(branches) = s.get(keyword).and_then(Value::as_array) {
            let branches: Vec<_> = branches.iter().map(|b| instance(root, b, depth)).collect();
            return proptest::strategy::Union::new(branches).sboxed();
        }
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ if s.contains_key("properties") => vec!["object"],
        _ => vec!["null", "boolean", "integer", "string"],
    };
    let per_type: Vec<SBoxedStrategy<Value>> = types
        .into_iter()
        .map(|t| match t {
            "null" => Just(Value::Null).sboxed(),
            "boolean" => any::<bool>().prop_map(Value::Bool).sboxed(),
            "integer" => integer_strategy(s),
            "number" => number_strategy(s),
            "string" => {
                let min = s.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
                let max = s.get("maxLength").and_then(Value::as_u64).map_or(min + 24, |m| m as usize).min(min + 24);
                string_of(min, max)
            }
            "array" => {
                let min = s.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
                let max = if depth >= MAX_GEN_DEPTH {
                    min
                } else {
                    s.get("maxItems").and_then(Value::as_u64).map_or(min + 4, |m| m as usize).min(min + 4)
                };
                if max == 0 {
                    return Just(json!([])).sboxed();
                }
                let items =
                    s.get("items").map_or_else(|| instance(root, &json!({}), depth), |i| instance(root, i, depth));
                prop::collection::vec(items, min..=max).prop_map(Value::Array).sboxed()
            }
            "object" => object_strategy(root, s, depth),
            other => panic!("cannot generate type {other}"),
        })
        .collect();
    proptest::strategy::Union::new(per_type).sboxed()
}

fn object_strategy(root: &Value, s: &Map<String, Value>, depth: usize) -> SBoxedStrategy<Value> {
    let required: Vec<&str> =
        s.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut fields: Vec<SBoxedStrategy<Option<(String, Value)>>> = Vec::new();
    for (name, ps) in s.get("properties").and_then(Value::as_object).into_iter().flatten() {
        let name = name.clone();
        if required.contains(&name.as_str()) {
            let value = instance(root, ps, depth);
            fields.push(value.prop_map(move |v| Some((name.clone(), v))).sboxed());
        } else if depth < MAX_GEN_DEPTH {
            let value = instance(root, ps, depth);
            fields.push(prop::option::weighted(0.6, value.prop_map(move |v| (name.clone(), v))).sboxed());
        }
    }
    let extra: SBoxedStrategy<Vec<(String, Value)>> = match s.get("additionalProperties") {
        Some(extra @ Value::Object(_)) if depth < MAX_GEN_DEPTH => {
            prop::collection::vec(("[a-z]{1,6}", instance(root, extra, depth)), 0..3).sboxed()
        }
        _ => Just(Vec::new()).sboxed(),
    };
    (fields, extra)
        .prop_map(|(fields, extra)| {
            let mut o = Map::new();
            // Extra keys first, so that a declared property of the same name wins.
            o.extend(extra);
            o.extend(fields.into_iter().flatten());
            Value::Object(o)
        })
        .sboxed()
}

// ---------------------------------------------------------------------------------------------------------------
// Mutations
// ---------------------------------------------------------------------------------------------------------------

/// One change to a value, at a location chosen by an index over its nodes (pre-order).
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Remove a key of an object (required or not).
    DropKey(Index),
    /// Add a key to an object (unknown to the schema, unless it happens to be a declared one).
    AddKey(Index, String),
    /// Replace a node with a value of another JSON type.
    Retype(Index, u8),
    /// Wrap a node one level deeper: `[v]` or `{"value": v}`.
    Wrap(Index, bool),
    /// Replace a node with a string larger than the 1 MiB argument limit.
    Huge(Index),
    /// Replace a node with a string of this many characters (around `maxLength` bounds).
    Long(Index, u16),
    /// Replace a node with arrays nested this deep (around the depth limit of 64).
    Deep(Index, u8),
    /// Replace a node with an edge-case number.
    Edge(Index, u8),
    /// Replace a node with `null`.
    Null(Index),
}

pub fn mutation() -> impl Strategy<Value = Mutation> + Clone {
    let key = prop_oneof![
        4 => "[a-z_]{1,10}",
        1 => Just("force".to_owned()),
        1 => Just("__proto__".to_owned()),
        1 => Just("$ref".to_owned()),
        1 => Just(String::new()),
        1 => Just("a/b~c".to_owned()),
    ];
    prop_oneof![
        3 => any::<Index>().prop_map(Mutation::DropKey),
        3 => (any::<Index>(), key).prop_map(|(i, k)| Mutation::AddKey(i, k)),
        4 => (any::<Index>(), any::<u8>()).prop_map(|(i, k)| Mutation::Retype(i, k)),
        2 => (any::<Index>(), any::<bool>()).prop_map(|(i, a)| Mutation::Wrap(i, a)),
        1 => any::<Index>().prop_map(Mutation::Huge),
        2 => (any::<Index>(), 0u16..300).prop_map(|(i, n)| Mutation::Long(i, n)),
        1 => (any::<Index>(), 55u8..75).prop_map(|(i, d)| Mutation::Deep(i, d)),
        3 => (any::<Index>(), any::<u8>()).prop_map(|(i, k)| Mutation::Edge(i, k)),
        2 => any::<Index>().prop_map(Mutation::Null),
    ]
}

#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Pos(usize),
}

/// Paths to the nodes of `v`, pre-order, at most 512.
fn locations(v: &Value) -> Vec<Vec<Step>> {
    let mut out = Vec::new();
    let mut stack = vec![(v, Vec::new())];
    while let Some((node, path)) = stack.pop() {
        if out.len() >= 512 {
            break;
        }
        match node {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate().rev() {
                    let mut p = path.clone();
                    p.push(Step::Pos(i));
                    stack.push((item, p));
                }
            }
            Value::Object(o) => {
                for (k, item) in o.iter().rev() {
                    let mut p = path.clone();
                    p.push(Step::Key(k.clone()));
                    stack.push((item, p));
                }
            }
            _ => {}
        }
        out.push(path);
    }
    out
}

fn node<'v>(mut v: &'v Value, path: &[Step]) -> &'v Value {
    for step in path {
        v = match (step, v) {
            (Step::Key(k), Value::Object(o)) => &o[k],
            (Step::Pos(i), Value::Array(a)) => &a[*i],
            _ => unreachable!("path from locations"),
        };
    }
    v
}

fn node_mut<'v>(mut v: &'v mut Value, path: &[Step]) -> &'v mut Value {
    for step in path {
        v = match (step, v) {
            (Step::Key(k), Value::Object(o)) => o.get_mut(k).expect("path from locations"),
            (Step::Pos(i), Value::Array(a)) => &mut a[*i],
            _ => unreachable!("path from locations"),
        };
    }
    v
}

fn nested_arrays(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = Value::Array(vec![v]);
    }
    v
}

const EDGE_NUMBERS: [&str; 20] = [
    "-1",
    "0",
    "1",
    "255",
    "256",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "-9223372036854775808",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616.0",
    "0.5",
    "1.0",
    "-0.0",
    "1e300",
    "-1e300",
    "9007199254740993",
    "1000.5",
];

fn edge_number(k: u8) -> Value {
    serde_json::from_str(EDGE_NUMBERS[usize::from(k) % EDGE_NUMBERS.len()]).expect("a JSON number")
}

fn retype(current: &Value, k: u8) -> Value {
    let options = [
        json!(null),
        json!(true),
        json!(0),
        json!(-1),
        json!(0.5),
        json!("s"),
        json!(""),
        json!([]),
        json!({}),
        json!([1]),
        json!({"a": 1}),
    ];
    let start = usize::from(k) % options.len();
    (0..options.len())
        .map(|i| &options[(start + i) % options.len()])
        .find(|o| json_type(o) != json_type(current) || (current.is_number() && o.is_number() && *o != current))
        .cloned()
        .unwrap_or(Value::Null)
}

impl Mutation {
    /// Applies the mutation to `v` (the root is always an object in the harness).
    pub fn apply(&self, v: &mut Value) {
        let locs = locations(v);
        let objects: Vec<&Vec<Step>> = locs.iter().filter(|p| node(v, p).is_object()).collect();
        match self {
            Mutation::DropKey(i) => {
                let with_keys: Vec<&&Vec<Step>> =
                    objects.iter().filter(|p| node(v, p).as_object().is_some_and(|o| !o.is_empty())).collect();
                if with_keys.is_empty() {
                    return;
                }
                let path = with_keys[i.index(with_keys.len())];
                if let Value::Object(o) = node_mut(v, path) {
                    let key = o.keys().nth(i.index(o.len())).cloned().expect("non-empty");
                    o.remove(&key);
                }
            }
            Mutation::AddKey(i, key) => {
                if objects.is_empty() {
                    return;
                }
                let path = objects[i.index(objects.len())].clone();
                if let Value::Object(o) = node_mut(v, &path) {
                    let key = if o.contains_key(key) { format!("{key}_x") } else { key.clone() };
                    o.insert(key, json!(true));
                }
            }
            Mutation::Retype(i, k) => {
                let node = node_mut(v, &locs[i.index(locs.len())]);
                *node = retype(node, *k);
            }
            Mutation::Wrap(i, as_array) => {
                let node = node_mut(v, &locs[i.index(locs.len())]);
                let inner = node.take();
                *node = if *as_array { json!([inner]) } else { json!({ "value": inner }) };
            }
            Mutation::Huge(i) => *node_mut(v, &locs[i.index(locs.len())]) = Value::String("x".repeat(MAX_BYTES + 4096)),
            Mutation::Long(i, n) => {
                *node_mut(v, &locs[i.index(locs.len())]) = Value::String("é".repeat(usize::from(*n)));
            }
            Mutation::Deep(i, d) => *node_mut(v, &locs[i.index(locs.len())]) = nested_arrays(usize::from(*d)),
            Mutation::Edge(i, k) => *node_mut(v, &locs[i.index(locs.len())]) = edge_number(*k),
            Mutation::Null(i) => *node_mut(v, &locs[i.index(locs.len())]) = Value::Null,
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Near-miss names
// ---------------------------------------------------------------------------------------------------------------

/// A change to a tool name that must not reach the tool.
#[derive(Debug, Clone)]
pub enum NameChange {
    Upper(Index),
    Insert(Index, char),
    Delete(Index),
    Homoglyph(Index),
    WireForm,
    Prefix(&'static str),
    Suffix(&'static str),
    Hidden(Index),
    Other(String),
}

pub fn name_change() -> impl Strategy<Value = NameChange> + Clone {
    prop_oneof![
        any::<Index>().prop_map(NameChange::Upper),
        (any::<Index>(), prop::sample::select(vec![' ', '\u{200b}', '\0', '.', '-', '_', '\n', 'x', '\u{feff}']))
            .prop_map(|(i, c)| NameChange::Insert(i, c)),
        any::<Index>().prop_map(NameChange::Delete),
        any::<Index>().prop_map(NameChange::Homoglyph),
        Just(NameChange::WireForm),
        prop::sample::select(vec!["../", "./", "crate::", " ", "functions."]).prop_map(NameChange::Prefix),
        prop::sample::select(vec!["s", " ", "\n", "()", "::call"]).prop_map(NameChange::Suffix),
        any::<Index>().prop_map(NameChange::Hidden),
        any::<String>().prop_map(NameChange::Other),
    ]
}

impl NameChange {
    pub fn apply(&self, name: &str) -> String {
        let chars: Vec<char> = name.chars().collect();
        let at = |i: &Index| i.index(chars.len().max(1));
        match self {
            NameChange::Upper(i) => {
                let mut c = chars.clone();
                if let Some(ch) = c.get_mut(at(i)) {
                    *ch = ch.to_ascii_uppercase();
                }
                c.into_iter().collect()
            }
            NameChange::Insert(i, ch) => {
                let mut c = chars.clone();
                c.insert(at(i).min(c.len()), *ch);
                c.into_iter().collect()
            }
            NameChange::Delete(i) => {
                let mut c = chars.clone();
                if !c.is_empty() {
                    c.remove(at(i));
                }
                c.into_iter().collect()
            }
            NameChange::Homoglyph(i) => {
                let mut c = chars.clone();
                if let Some(ch) = c.get_mut(at(i)) {
                    *ch = match *ch {
                        'a' => 'а',
                        'e' => 'е',
                        'o' => 'ο',
                        'c' => 'с',
                        'i' => 'і',
                        '_' => '＿',
                        '.' => '․',
                        other => other.to_ascii_uppercase(),
                    };
                }
                c.into_iter().collect()
            }
            NameChange::WireForm => name.replace(['.', '_'], "-"),
            NameChange::Prefix(p) => format!("{p}{name}"),
            NameChange::Suffix(s) => format!("{name}{s}"),
            NameChange::Hidden(i) => HIDDEN[i.index(HIDDEN.len())].to_owned(),
            NameChange::Other(s) => s.clone(),
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------------------------

/// How the arguments reach the executor.
#[derive(Clone)]
pub enum Args {
    /// `ToolCall::new` with a value.
    Value(Value),
    /// `ToolCall::from_json_text` with text (OpenAI style).
    Text(String),
    /// A whole provider message, read by that provider's constructor.
    Provider(ProviderShape, Value),
}

#[derive(Debug, Clone, Copy)]
pub enum ProviderShape {
    Ollama,
    OpenAi,
    OpenAiResponses,
    Anthropic,
    Gemini,
    Mcp,
}

pub const SHAPES: [ProviderShape; 6] = [
    ProviderShape::Ollama,
    ProviderShape::OpenAi,
    ProviderShape::OpenAiResponses,
    ProviderShape::Anthropic,
    ProviderShape::Gemini,
    ProviderShape::Mcp,
];

impl ProviderShape {
    /// A well-formed message of this provider carrying `id`, `name` and `args`.
    pub fn message(self, id: &str, name: &str, args: &Value) -> Value {
        let text = serde_json::to_string(args).unwrap_or_default();
        match self {
            ProviderShape::Ollama => json!({"function": {"name": name, "arguments": args}}),
            ProviderShape::OpenAi => {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": text}})
            }
            ProviderShape::OpenAiResponses => {
                json!({"type": "function_call", "id": "fc_1", "call_id": id, "name": name, "arguments": text})
            }
            ProviderShape::Anthropic => json!({"type": "tool_use", "id": id, "name": name, "input": args}),
            ProviderShape::Gemini => json!({"functionCall": {"name": name, "args": args, "id": id}}),
            ProviderShape::Mcp => json!({"name": name, "arguments": args}),
        }
    }

    pub fn call(self, message: &Value, id: &str) -> ToolCall {
        match self {
            ProviderShape::Ollama => ToolCall::from_ollama(message, 0),
            ProviderShape::OpenAi => ToolCall::from_openai(message),
            ProviderShape::OpenAiResponses => ToolCall::from_openai_responses(message),
            ProviderShape::Anthropic => ToolCall::from_anthropic(message),
            ProviderShape::Gemini => ToolCall::from_gemini(message, 1),
            ProviderShape::Mcp => ToolCall::from_mcp(message, id),
        }
    }
}

/// What the approval of a call covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approve {
    None,
    /// The arguments before any mutation.
    Original,
    /// Exactly the arguments sent.
    Sent,
}

/// One call to check.
#[derive(Clone)]
pub struct Input {
    pub id: String,
    pub name: String,
    pub args: Args,
    /// The approval the call carries: `(tool, arguments)`.
    pub approval: Option<(String, Value)>,
    /// The call runs for a tenant the policy denies.
    pub deny: bool,
}

/// Shortens long strings in debug output (a failing case may hold a 1 MiB string).
fn short(s: &str) -> String {
    if s.len() <= 300 {
        return format!("{s:?}");
    }
    let mut end = 300;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}… ({} bytes)", &s[..end], s.len())
}

impl fmt::Debug for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let args = match &self.args {
            Args::Value(v) => format!("Value({})", short(&v.to_string())),
            Args::Text(t) => format!("Text({})", short(t)),
            Args::Provider(p, m) => format!("Provider({p:?}, {})", short(&m.to_string())),
        };
        f.debug_struct("Input")
            .field("id", &short(&self.id))
            .field("name", &short(&self.name))
            .field("args", &format_args!("{args}"))
            .field("approval", &self.approval.as_ref().map(|(t, a)| format!("{t} {}", short(&a.to_string()))))
            .field("deny", &self.deny)
            .finish()
    }
}

/// How a structured input is delivered.
#[derive(Debug, Clone, Copy)]
pub enum Delivery {
    Value,
    Text,
    Provider(usize),
}

fn delivery() -> impl Strategy<Value = Delivery> + Clone {
    prop_oneof![6 => Just(Delivery::Value), 2 => Just(Delivery::Text), 2 => (0..SHAPES.len()).prop_map(Delivery::Provider)]
}

fn deliver(id: &str, name: &str, args: Value, how: Delivery) -> Args {
    match how {
        Delivery::Value => Args::Value(args),
        Delivery::Text => Args::Text(serde_json::to_string(&args).unwrap_or_default()),
        Delivery::Provider(i) => Args::Provider(SHAPES[i], SHAPES[i].message(id, name, &args)),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------------------------------------------

/// What the executor must answer for an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// The handler runs once; the result is ok or one of the tool's own codes.
    Run,
    /// The call is refused with this code and the handler does not run.
    Refused(&'static str),
}

/// One checked call: the input's prediction and the executor's result.
#[derive(Debug)]
pub struct Outcome {
    pub expect: Expect,
    pub result: ToolResult,
}

pub struct Harness {
    pub registry: Registry,
    pub executor: Executor,
    /// Valid arguments per tool of the view, from the tool's own input schema.
    pub valid: Vec<(&'static str, SBoxedStrategy<Value>)>,
}

thread_local! {
    static RUNTIME: RefCell<Option<tokio::runtime::Runtime>> = const { RefCell::new(None) };
}

/// Runs `f` to completion on this thread's current-thread runtime (built on first use).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    RUNTIME.with(|rt| {
        let mut rt = rt.borrow_mut();
        let rt = rt.get_or_insert_with(|| {
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a Tokio runtime")
        });
        rt.block_on(f)
    })
}

static KEYS: AtomicU64 = AtomicU64::new(0);

/// Texts that must never reach a result unless the caller's own input holds them.
pub const NEEDLES: [&str; 29] = [
    // file paths
    ".rs:",
    ".rs\"",
    "src/",
    "/home/",
    "/root/",
    "/rustc/",
    ".cargo",
    "registry/src",
    // panics
    "panicked",
    "RUST_BACKTRACE",
    // Rust type paths: any `a::b` (see `rust_paths`; `std::` alone is a model's key `std:` before `: expected`)
    "serde_json",
    "tool_core",
    "Some(",
    // serde wording
    "invalid type:",
    "invalid value:",
    "missing field",
    "unknown field",
    "unknown variant",
    "duplicate field",
    "EOF while parsing",
    "trailing characters",
    "expected value at",
    "key must be a string",
    "recursion limit exceeded",
    "number out of range",
    "did not match any variant",
    // jsonschema wording
    "is not of type",
    "is a required property",
    "Additional properties are not allowed",
];

/// Failures other than `approval_required` (whose details echo the arguments to approve) stay this small.
pub const MAX_ERROR_BYTES: usize = 64 * 1024;

impl Harness {
    pub fn new() -> Harness {
        let registry = Registry::builder().tools(dynamic_tools()).build().expect("unique names");
        for name in VIEW.iter().chain(&HIDDEN) {
            let def = registry.get(name).unwrap_or_else(|| panic!("{name} is registered"));
            assert_supported(name, def.input_schema());
        }
        let view = registry.view().names(VIEW).build().expect("the view's tools exist");
        let executor = Executor::builder(view)
            .policy(RecordingPolicy)
            .default_timeout(std::time::Duration::from_secs(20))
            .build()
            .expect("every schema compiles");
        let valid = VIEW
            .iter()
            .map(|name| {
                let def = registry.get(name).expect("registered");
                let schema = def.input_schema().clone();
                let oracle_schema = schema.clone();
                let serde_integers = !matches!(def.handler(), Handler::Dynamic(_));
                let strategy = instance(&schema, &schema, 0)
                    .prop_filter("valid against the oracle", move |v| {
                        Oracle::new(&oracle_schema, serde_integers).valid(v)
                    })
                    .sboxed();
                (*name, strategy)
            })
            .collect();
        Harness { registry, executor, valid }
    }

    /// One shared harness per process.
    pub fn get() -> &'static Harness {
        static HARNESS: OnceLock<Harness> = OnceLock::new();
        HARNESS.get_or_init(Harness::new)
    }

    /// Valid calls of any tool in the view (with an approval for exactly their arguments when `approve`).
    pub fn valid_input(&self) -> impl Strategy<Value = Input> + use<> {
        let per_tool: Vec<_> = self.valid.iter().map(|(name, s)| (Just(*name), s.clone()).sboxed()).collect::<Vec<_>>();
        (proptest::strategy::Union::new(per_tool), delivery(), "[a-zA-Z0-9_-]{1,24}").prop_map(
            |((name, args), how, id)| Input {
                approval: Some((name.to_owned(), args.clone())),
                args: deliver(&id, name, args, how),
                name: name.to_owned(),
                id,
                deny: false,
            },
        )
    }

    /// Valid calls, then mutated: arguments, approvals, tenant and name.
    pub fn mutated_input(&self) -> impl Strategy<Value = Input> + use<> {
        let per_tool: Vec<_> = self.valid.iter().map(|(name, s)| (Just(*name), s.clone()).sboxed()).collect::<Vec<_>>();
        (
            proptest::strategy::Union::new(per_tool),
            prop::collection::vec(mutation(), 1..=3),
            prop_oneof![Just(Approve::None), Just(Approve::Original), Just(Approve::Sent)],
            prop::bool::weighted(0.1),
            prop::option::weighted(0.1, name_change()),
            delivery(),
            prop_oneof![4 => "[a-zA-Z0-9_-]{1,24}", 1 => any::<String>()],
        )
            .prop_map(|((name, original), mutations, approve, deny, rename, how, id)| {
                let mut args = original.clone();
                for m in &mutations {
                    m.apply(&mut args);
                }
                let approval = match approve {
                    Approve::None => None,
                    Approve::Original => Some((name.to_owned(), original)),
                    Approve::Sent => Some((name.to_owned(), args.clone())),
                };
                let name = rename.map_or_else(|| name.to_owned(), |r| r.apply(name));
                Input { args: deliver(&id, &name, args, how), name, id, approval, deny }
            })
    }

    /// Builds the call the input describes.
    pub fn call_of(input: &Input) -> ToolCall {
        match &input.args {
            Args::Value(v) => ToolCall::new(input.id.clone(), input.name.clone(), v.clone()),
            Args::Text(t) => ToolCall::from_json_text(input.id.clone(), input.name.clone(), t),
            Args::Provider(shape, message) => shape.call(message, &input.id),
        }
    }

    /// What the executor must answer for `call`.
    pub fn predict(&self, call: &ToolCall, input: &Input) -> Expect {
        let Some(def) = self.executor.view().get(call.name()) else { return Expect::Refused("unknown_tool") };
        let Ok(args) = call.arguments() else { return Expect::Refused("invalid_arguments") };
        // JSON Schema validity decides whether the policy is asked.
        let schema = Oracle::new(def.input_schema(), false);
        let Some(cleaned) = schema.cleaned(args) else { return Expect::Refused("invalid_arguments") };
        if input.deny {
            return Expect::Refused("policy_denied");
        }
        let approved = match &input.approval {
            Some((tool, approved)) => tool == def.name() && json_identical(approved, &cleaned),
            None => false,
        };
        if def.effect() != Effect::Read && !approved {
            return Expect::Refused("approval_required");
        }
        // A compiled tool then converts the arguments into its parameters: an integral float where an integer
        // belongs fails there, before the fn runs.
        if !Oracle::for_tool(def).valid_strict(&cleaned) {
            return Expect::Refused("invalid_arguments");
        }
        Expect::Run
    }

    /// Runs one call and asserts every invariant; returns the prediction and the result.
    pub fn check(&self, input: &Input) -> Outcome {
        let call = Harness::call_of(input);
        let key = format!("k{}", KEYS.fetch_add(1, Ordering::Relaxed));
        let tenant = if input.deny { format!("{key}{DENY_SUFFIX}") } else { key };
        let mut options = CallOptions::new().tenant(tenant.as_str());
        if let Some((tool, args)) = &input.approval {
            options = options.approve(Approval::new(tool.as_str(), args));
        }
        let expect = self.predict(&call, input);
        let result = block_on(self.executor.call_with(call.clone(), &options));
        let record = take_record(&tenant);
        let ctx =
            || format!("input: {input:?}\nresult: {}", short(&serde_json::to_string(&result).unwrap_or_default()));

        // 1. The result answers this call.
        assert_eq!(result.call_id, call.id(), "the result lost its call id; {}", ctx());
        assert_eq!(result.is_ok(), result.error().is_none(), "{}", ctx());
        assert_eq!(result.is_ok(), result.data().is_some(), "{}", ctx());

        // 2. Handlers ran only as allowed.
        assert!(!record.untracked, "a handler ran without a tenant; {}", ctx());
        assert!(record.invoked.len() <= 1, "a handler ran {} times; {}", record.invoked.len(), ctx());
        assert_eq!(result.executed, record.invoked.len() == 1, "`executed` does not match the handler; {}", ctx());
        for (tool, problem) in &record.invoked {
            assert!(VIEW.contains(&tool.as_str()), "{tool} is not in the view but ran; {}", ctx());
            assert_eq!(tool, call.name(), "another tool ran; {}", ctx());
            assert_eq!(problem, &None, "{tool} received invalid arguments; {}", ctx());
            assert!(
                record.policy.iter().any(|(t, d, _)| t == tool && *d == Decided::Allow),
                "{tool} ran without the policy allowing it; {}",
                ctx()
            );
        }
        // 3. The policy saw only valid arguments, and at most once.
        assert!(record.policy.len() <= 1, "the policy was asked {} times; {}", record.policy.len(), ctx());
        for (tool, _, valid) in &record.policy {
            assert!(valid, "the policy was asked about invalid arguments of {tool}; {}", ctx());
        }

        // 4. The answer is the prediction.
        match &expect {
            Expect::Run => {
                assert!(result.executed, "a valid, allowed call did not run; {}", ctx());
                if let Some(e) = &result.error() {
                    assert!(TOOL_CODES.contains(&e.code.as_str()), "a valid call failed; {}", ctx());
                }
            }
            Expect::Refused(code) => {
                assert_eq!(result.code(), Some(*code), "wrong code; {}", ctx());
                assert!(!result.executed, "{}", ctx());
            }
        }
        match self.executor.view().get(call.name()) {
            Some(def) => {
                assert_eq!(result.tool_name, def.name(), "{}", ctx());
                assert_eq!(result.tool_version.as_deref(), Some(def.version()), "{}", ctx());
            }
            None => assert_eq!(result.tool_version, None, "{}", ctx()),
        }

        // 5. Nothing internal in the result.
        assert_clean(&result, &call, input);
        Outcome { expect, result }
    }

    /// Runs one fuzzer input (see `docs/FUZZING.md` for the layout).
    pub fn fuzz_one(&self, data: &[u8]) {
        let Some((&mode, rest)) = data.split_first() else { return };
        let deny = mode & 0x80 != 0;
        match mode & 0x3 {
            // Raw: name and argument text, split at the first NUL byte.
            0 => {
                let (name, text) = match rest.iter().position(|&b| b == 0) {
                    Some(at) => (&rest[..at], &rest[at + 1..]),
                    None => (&rest[..0], rest),
                };
                let name = String::from_utf8_lossy(name).into_owned();
                let text = String::from_utf8_lossy(text).into_owned();
                let input = Input { id: "fuzz-raw".into(), name, args: Args::Text(text), approval: None, deny };
                self.check(&input);
            }
            // Raw provider message: the bytes as JSON (or as a string), read by one provider's constructor.
            1 => {
                let message = serde_json::from_slice::<Value>(rest)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(rest).into_owned()));
                let shape = SHAPES[usize::from(mode >> 2) % SHAPES.len()];
                let input = Input {
                    id: "fuzz-mcp".into(),
                    name: String::new(),
                    args: Args::Provider(shape, message),
                    approval: None,
                    deny,
                };
                self.check(&input);
            }
            // Structured: the bytes drive the generator (valid or mutated instances of the tools' own schemas).
            m => {
                let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_of(rest));
                let mut runner = TestRunner::new_with_rng(Config::default(), rng);
                let input = if m == 2 {
                    self.valid_input().new_tree(&mut runner).map(|t| t.current())
                } else {
                    self.mutated_input().new_tree(&mut runner).map(|t| t.current())
                };
                if let Ok(mut input) = input {
                    input.deny |= deny;
                    self.check(&input);
                }
            }
        }
    }
}

/// A ChaCha seed (32 bytes) that depends on every byte of `data`.
///
/// Not `RngAlgorithm::PassThrough` (the input bytes as the random stream): every union a strategy picks from gives
/// each alternative it did not pick a clone of the runner whose stream is half of what is left, so the bytes run
/// out after a dozen unions, the stream turns to zeros, and rand 0.10's rejection sampling of an integer range
/// rejects zero forever: the generator hangs. A seeded generator keeps every input deterministic instead.
fn seed_of(data: &[u8]) -> [u8; 32] {
    let mut seed = [0u8; 32];
    for (lane, chunk) in seed.chunks_mut(8).enumerate() {
        let mut h = 0xcbf2_9ce4_8422_2325u64 ^ (lane as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for &b in data {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        chunk.copy_from_slice(&h.to_le_bytes());
    }
    seed
}

impl Default for Harness {
    fn default() -> Self {
        Harness::new()
    }
}

/// Exact JSON identity as approvals compare it: canonical text (so `1` and `1.0` differ).
fn json_identical(a: &Value, b: &Value) -> bool {
    tool_core::canonical::canonical_json(a) == tool_core::canonical::canonical_json(b)
}

/// Every string in `v` (object keys included), decoded.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Value::Object(o) => {
            for (k, v) in o {
                out.push(k.clone());
                strings(v, out);
            }
        }
        _ => {}
    }
}

/// Asserts that the result holds no needle that the caller's input did not hold.
///
/// Needles are searched in the result's decoded strings (a JSON escape such as `\u0003` next to `::` is not a
/// Rust path). The input counts in every form the result may echo it in: as sent, as JSON, escaped as Rust's
/// `Debug` writes it (`\n`, `\u{3}`), and as a JSON pointer segment (`~0`, `~1`).
pub fn assert_clean(result: &ToolResult, call: &ToolCall, input: &Input) {
    if !result.is_ok() && result.code() != Some("approval_required") {
        let error = serde_json::to_string(&result.error()).unwrap_or_default();
        assert!(error.len() <= MAX_ERROR_BYTES, "an error of {} bytes; input: {input:?}", error.len());
    }
    let mut texts = Vec::new();
    strings(&serde_json::to_value(result).expect("a result serializes"), &mut texts);
    let found: Vec<String> = texts
        .iter()
        .flat_map(|t| NEEDLES.iter().filter(|n| t.contains(*n)).map(|n| (*n).to_owned()).chain(rust_paths(t)))
        .collect();
    if found.is_empty() {
        return;
    }
    // Only what the caller sent may come back.
    let mut sent = vec![input.id.clone(), input.name.clone(), call.id().to_owned(), call.name().to_owned()];
    match &input.args {
        Args::Text(t) => sent.push(t.clone()),
        Args::Value(v) | Args::Provider(_, v) => strings(v, &mut sent),
    }
    if let Ok(args) = call.arguments() {
        strings(args, &mut sent);
    }
    // Violations name keys by JSON pointer (`/src/lib`), followed by `: expected ...`.
    if let Ok(args) = call.arguments() {
        for pointer in pointers(args) {
            sent.push(format!("{pointer}:"));
        }
    }
    let mut source = String::new();
    for s in &sent {
        source.push_str(s);
        source.push('\n');
        source.push_str(&format!("{s:?}"));
        source.push('\n');
        source.push_str(&serde_json::to_string(s).unwrap_or_default());
        source.push('\n');
        source.push_str(&s.replace('~', "~0").replace('/', "~1"));
        source.push('\n');
    }
    for needle in found {
        assert!(
            source.contains(&needle),
            "{needle:?} reached the result without coming from the input; input: {input:?}\nresult: {}",
            short(&serde_json::to_string(result).unwrap_or_default())
        );
    }
}

/// The JSON pointers (RFC 6901) of the nodes of `v`, at most 4096.
fn pointers(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![(v, String::new())];
    while let Some((node, pointer)) = stack.pop() {
        if out.len() >= 4096 {
            break;
        }
        match node {
            Value::Array(a) => stack.extend(a.iter().enumerate().map(|(i, v)| (v, format!("{pointer}/{i}")))),
            Value::Object(o) => stack
                .extend(o.iter().map(|(k, v)| (v, format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"))))),
            _ => {}
        }
        out.push(pointer);
    }
    out
}

/// Every `x::y` in `text` (an identifier character on both sides of `::`), as its four characters: the shape of a
/// Rust path. A bare `::` is not one: a model's key `:` is echoed in a violation as `/:: expected ...`.
fn rust_paths(text: &str) -> Vec<String> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices("::")
        .filter_map(|(at, _)| {
            let before = text[..at].chars().next_back().filter(|&c| ident(c))?;
            let after = text[at + 2..].chars().next().filter(|&c| ident(c))?;
            Some(format!("{before}::{after}"))
        })
        .collect()
}
