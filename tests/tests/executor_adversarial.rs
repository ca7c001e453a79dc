//! The adversarial catalogue: hostile names and argument texts, each with the code it must end in, and handlers
//! that record the call id of every run to prove none of them ran for a catalogue case (by id, so a test running at
//! the same time cannot move the count).

use std::sync::Mutex;

use keel_tools_core::schema::Limits;
use keel_tools_core::{CallContext, Executor, Registry, ToolCall, ToolResult, tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// The call id of every run of `lookup_incident` and `delete_incident`.
static RUNS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn record(ctx: &CallContext) {
    RUNS.lock().unwrap().push(ctx.call_id().to_owned());
}

/// How many times a recording handler ran for a call whose id starts with `prefix`.
fn runs(prefix: &str) -> usize {
    RUNS.lock().unwrap().iter().filter(|id| id.starts_with(prefix)).count()
}

/// Look up one incident by its id.
#[tool(effect = "read", version = "1.0")]
fn lookup_incident(
    incident_id: String,
    #[arg(description = "How many events")] limit: Option<u32>,
    ctx: CallContext,
) -> String {
    record(&ctx);
    format!("{incident_id} {limit:?}")
}

/// Delete an incident for good.
#[tool(effect = "destructive", version = "1.0")]
fn delete_incident(incident_id: String, ctx: CallContext) -> bool {
    record(&ctx);
    !incident_id.is_empty()
}

#[derive(Deserialize, JsonSchema)]
struct BlobArgs {
    /// Any JSON at all: the schema accepts every value, however deep.
    blob: Value,
}

/// Stores any JSON value; answers how deep it was.
#[tool(effect = "read", version = "1.0")]
fn store_blob(args: BlobArgs) -> u64 {
    let mut depth = 0;
    let mut v = &args.blob;
    while let Some(inner) = v.as_array().and_then(|a| a.first()) {
        depth += 1;
        v = inner;
    }
    depth
}

enum Args {
    Value(Value),
    Text(String),
}

struct Case {
    what: &'static str,
    name: String,
    args: Args,
    code: &'static str,
}

fn v(what: &'static str, name: &str, args: Value, code: &'static str) -> Case {
    Case { what, name: name.to_owned(), args: Args::Value(args), code }
}

fn t(what: &'static str, name: &str, text: String, code: &'static str) -> Case {
    Case { what, name: name.to_owned(), args: Args::Text(text), code }
}

fn catalogue() -> Vec<Case> {
    let ok = || json!({"incident_id": "INC-1"});
    let ok_text = || r#"{"incident_id": "INC-1"}"#.to_owned();
    vec![
        // Names.
        v("upper case", "LOOKUP_INCIDENT", ok(), "unknown_tool"),
        v("one upper-case letter", "Lookup_incident", ok(), "unknown_tool"),
        v("leading space", " lookup_incident", ok(), "unknown_tool"),
        v("trailing space", "lookup_incident ", ok(), "unknown_tool"),
        v("trailing newline", "lookup_incident\n", ok(), "unknown_tool"),
        v("inner space", "lookup _incident", ok(), "unknown_tool"),
        v("tab", "lookup\t_incident", ok(), "unknown_tool"),
        v("Cyrillic o homoglyphs", "l\u{043e}\u{043e}kup_incident", ok(), "unknown_tool"),
        v("Greek omicron homoglyph", "lo\u{03bf}kup_incident", ok(), "unknown_tool"),
        v("zero-width space", "lookup\u{200b}_incident", ok(), "unknown_tool"),
        v("zero-width joiner at the end", "lookup_incident\u{200d}", ok(), "unknown_tool"),
        v("byte-order mark", "\u{feff}lookup_incident", ok(), "unknown_tool"),
        v("fullwidth letters", "ｌｏｏｋｕｐ_incident", ok(), "unknown_tool"),
        v("path traversal", "../lookup_incident", ok(), "unknown_tool"),
        v("relative path", "./lookup_incident", ok(), "unknown_tool"),
        v("Rust path", "a::b", ok(), "unknown_tool"),
        v("crate path", "crate::lookup_incident", ok(), "unknown_tool"),
        v("module path of the fn", "executor_adversarial::lookup_incident", ok(), "unknown_tool"),
        v("wire name form", "lookup-incident", ok(), "unknown_tool"),
        v("plural (nearest name)", "lookup_incidents", ok(), "unknown_tool"),
        v("empty name", "", ok(), "unknown_tool"),
        v("10 kB name", &"a".repeat(10_000), ok(), "unknown_tool"),
        v("NUL byte", "lookup_incident\0", ok(), "unknown_tool"),
        // Argument texts.
        t("trailing garbage", "lookup_incident", ok_text() + " trailing", "invalid_arguments"),
        t("two objects", "lookup_incident", ok_text() + &ok_text(), "invalid_arguments"),
        t("null", "lookup_incident", "null".into(), "invalid_arguments"),
        t("array", "lookup_incident", r#"["INC-1"]"#.into(), "invalid_arguments"),
        t("string", "lookup_incident", r#""INC-1""#.into(), "invalid_arguments"),
        t("double-encoded object", "lookup_incident", serde_json::to_string(&ok_text()).unwrap(), "invalid_arguments"),
        t("not JSON (OpenAI-style)", "lookup_incident", "incident_id=INC-1".into(), "invalid_arguments"),
        t("single quotes", "lookup_incident", "{'incident_id': 'INC-1'}".into(), "invalid_arguments"),
        t("byte-order mark before JSON", "lookup_incident", format!("\u{feff}{}", ok_text()), "invalid_arguments"),
        t(
            "NaN spelled out",
            "lookup_incident",
            r#"{"incident_id": "INC-1", "limit": NaN}"#.into(),
            "invalid_arguments",
        ),
        t(
            "Infinity spelled out",
            "lookup_incident",
            r#"{"incident_id": "INC-1", "limit": Infinity}"#.into(),
            "invalid_arguments",
        ),
        t(
            "duplicate keys",
            "lookup_incident",
            r#"{"incident_id": "INC-1", "incident_id": "INC-2"}"#.into(),
            "invalid_arguments",
        ),
        t("100,000 nested arrays", "lookup_incident", "[".repeat(100_000) + &"]".repeat(100_000), "invalid_arguments"),
        t(
            "100,000 nested objects",
            "lookup_incident",
            r#"{"a":"#.repeat(100_000) + "1" + &"}".repeat(100_000),
            "invalid_arguments",
        ),
        t(
            "10 MB string",
            "lookup_incident",
            format!(r#"{{"incident_id": "{}"}}"#, "x".repeat(10_000_000)),
            "invalid_arguments",
        ),
        // Argument values.
        v(
            "integer beyond u64",
            "lookup_incident",
            json!({"incident_id": "INC-1", "limit": 18446744073709551616.0}),
            "invalid_arguments",
        ),
        t(
            "integer beyond i64/u64 as text",
            "lookup_incident",
            r#"{"incident_id": "INC-1", "limit": 100000000000000000000000}"#.into(),
            "invalid_arguments",
        ),
        v(
            "integer beyond u32",
            "lookup_incident",
            json!({"incident_id": "INC-1", "limit": 4294967296u64}),
            "invalid_arguments",
        ),
        v(
            "negative for unsigned",
            "lookup_incident",
            json!({"incident_id": "INC-1", "limit": -1}),
            "invalid_arguments",
        ),
        v(
            "fraction for integer",
            "lookup_incident",
            json!({"incident_id": "INC-1", "limit": 1.5}),
            "invalid_arguments",
        ),
        v(
            "numeric string for integer",
            "lookup_incident",
            json!({"incident_id": "INC-1", "limit": "5"}),
            "invalid_arguments",
        ),
        v("number for string", "lookup_incident", json!({"incident_id": 1}), "invalid_arguments"),
        v("extra property", "lookup_incident", json!({"incident_id": "INC-1", "force": true}), "invalid_arguments"),
        v("missing required", "lookup_incident", json!({}), "invalid_arguments"),
        v("null where an object belongs", "lookup_incident", Value::Null, "invalid_arguments"),
        v("array where an object belongs", "lookup_incident", json!([1]), "invalid_arguments"),
        v("deep value", "lookup_incident", deep(200), "invalid_arguments"),
        // Policy.
        v("destructive without approval", "delete_incident", ok(), "approval_required"),
    ]
}

/// `{"incident_id": [[[...]]]}` nested `depth` levels (built iteratively).
fn deep(depth: usize) -> Value {
    let mut inner = json!(1);
    for _ in 0..depth {
        inner = Value::Array(vec![inner]);
    }
    json!({"incident_id": inner})
}

fn call_of(i: usize, case: &Case) -> ToolCall {
    match &case.args {
        Args::Value(v) => ToolCall::new(format!("case-{i}"), case.name.clone(), v.clone()),
        Args::Text(t) => ToolCall::from_json_text(format!("case-{i}"), case.name.clone(), t),
    }
}

fn assert_clean(r: &ToolResult, requested_name: &str) {
    // The model's own name may be echoed back; nothing else may carry internals.
    let text = serde_json::to_string(r)
        .unwrap()
        .replace(&serde_json::to_string(requested_name).unwrap()[1..].trim_end_matches('"').to_owned(), "<name>");
    assert!(text.len() < 8_000, "the result echoes too much: {} bytes", text.len());
    for needle in ["panicked", ".rs:", "::", "serde", "invalid type:", "alloc::"] {
        assert!(!text.contains(needle), "{needle:?} in {text}");
    }
}

#[tokio::test]
async fn every_catalogue_case_ends_in_its_code_and_runs_nothing() {
    let registry = Registry::from_inventory().unwrap();
    let ex = Executor::new(registry.view().names(["lookup_incident", "delete_incident"]).build().unwrap()).unwrap();
    let cases = catalogue();
    assert!(cases.len() >= 30, "{} cases", cases.len());
    for (i, case) in cases.iter().enumerate() {
        let r = ex.call(call_of(i, case)).await;
        assert_eq!(r.error().map(|e| e.code.as_str()), Some(case.code), "{}: {r:?}", case.what);
        assert!(!r.executed, "{} executed", case.what);
        assert_eq!(r.call_id, format!("case-{i}"));
        assert_clean(&r, &case.name);
    }
    assert_eq!(runs("case-"), 0, "a handler ran for a catalogue case");

    // The same executor still serves a valid call, and the recording sees it.
    let ok =
        ex.call(ToolCall::new("ok-after-cases", "lookup_incident", json!({"incident_id": "INC-1", "limit": 3}))).await;
    assert!(ok.is_ok(), "{ok:?}");
    assert_eq!(runs("ok-after-cases"), 1);
}

#[tokio::test]
async fn limits_are_configurable_and_name_themselves() {
    let registry = Registry::from_inventory().unwrap();
    let view = registry.view().names(["lookup_incident"]).build().unwrap();
    let ex = Executor::builder(view).limits(Limits { max_depth: 2, max_bytes: 64 }).build().unwrap();
    let deep = ex.call(ToolCall::new("limits-deep", "lookup_incident", json!({"incident_id": [[1]]}))).await;
    let e = deep.error().unwrap();
    assert_eq!(e.code, "invalid_arguments");
    assert!(e.message.contains("deep") || e.message.contains("depth") || e.message.contains("nest"), "{}", e.message);
    let big = ex.call(ToolCall::new("limits-big", "lookup_incident", json!({"incident_id": "x".repeat(100)}))).await;
    let e = big.error().unwrap();
    assert_eq!(e.code, "invalid_arguments");
    assert!(e.message.contains("64") || e.message.contains("bytes"), "{}", e.message);
    assert_eq!(runs("limits-"), 0, "a handler ran past a limit");
}

/// `{"blob": [[[...1]]]}`: `depth` arrays inside the argument object.
fn deep_blob(depth: usize) -> Value {
    let mut inner = json!(1);
    for _ in 0..depth {
        inner = Value::Array(vec![inner]);
    }
    json!({"blob": inner})
}

/// The depth limit on its own: the schema accepts a value of any depth, so only the limit can refuse one.
#[tokio::test]
async fn the_depth_limit_refuses_what_the_schema_accepts() {
    let registry = Registry::from_inventory().unwrap();
    let view = || registry.view().names(["store_blob"]).build().unwrap();
    let ex = Executor::new(view()).unwrap();
    let limit = Limits::default().max_depth;
    assert_eq!(limit, 64);

    // Just under the limit (the argument object is one level, the arrays the rest): accepted and run.
    let under = ex.call(ToolCall::new("under", "store_blob", deep_blob(limit - 1))).await;
    assert!(under.is_ok(), "{under:?}");
    assert_eq!(under.data(), Some(&json!(limit - 1)));

    // Deeper, from one level past the limit on: refused before the handler, by the limit, which the message names.
    for depth in [limit, limit + 1, 200, 1_000] {
        let r = ex.call(ToolCall::new(format!("deep-{depth}"), "store_blob", deep_blob(depth))).await;
        let e = r.error().expect("refused");
        assert_eq!((e.code.as_str(), r.executed), ("invalid_arguments", false), "depth {depth}: {r:?}");
        assert!(
            e.message.contains("deep") || e.message.contains("depth") || e.message.contains("nest"),
            "{}",
            e.message
        );
    }

    // The same calls pass the schema: with the limit raised they run.
    let lenient = Executor::builder(view()).limits(Limits { max_depth: 10_000, ..Limits::default() }).build().unwrap();
    for depth in [limit, limit + 1, 200] {
        let r = lenient.call(ToolCall::new(format!("lenient-{depth}"), "store_blob", deep_blob(depth))).await;
        assert!(r.is_ok(), "depth {depth} with a raised limit: {r:?}");
        assert_eq!(r.data(), Some(&json!(depth)));
    }
}
