//! The executor's fixed order, proved with handlers that record their invocations by call id. Each test uses call
//! ids of its own, so what one test asserts about handler runs cannot be moved by another test running at the same
//! time.

use std::sync::Mutex;
use std::time::Duration;

use keel_tools_core::executor::CallOptions;
use keel_tools_core::policy::PolicyDecision;
use keel_tools_core::{
    Approval, CallContext, Executor, Registry, State, ToolCall, ToolError, ToolResult, ToolView, tool,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The call id of every run of a recording handler.
static RUNS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn record(ctx: &CallContext) {
    RUNS.lock().unwrap().push(ctx.call_id().to_owned());
}

/// How many times a recording handler ran for call `id`.
fn runs(id: &str) -> usize {
    RUNS.lock().unwrap().iter().filter(|r| r.as_str() == id).count()
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LookupArgs {
    /// The incident id, e.g. INC-001.
    incident_id: String,
}

#[derive(Debug, Serialize, JsonSchema)]
struct Incident {
    incident_id: String,
    service: String,
    severity: Severity,
    symptom: String,
    evidence: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Severity {
    Low,
    High,
}

/// Look up one incident by its id.
#[tool(effect = "read", version = "1.0")]
async fn lookup_incident(args: LookupArgs, ctx: CallContext) -> Result<Incident, ToolError> {
    record(&ctx);
    if args.incident_id != "INC-001" {
        return Err(keel_tools_core::tool_error!("not_found", "no incident {}", args.incident_id));
    }
    Ok(Incident {
        incident_id: "INC-001".into(),
        service: "auth-api".into(),
        severity: Severity::High,
        symptom: "login returns 502".into(),
        evidence: vec!["auth-api timeout".into(), "database pool exhausted".into()],
    })
}

/// Open a ticket.
#[tool(effect = "write", version = "1.0")]
fn file_ticket(title: String, severity: Severity, ctx: CallContext) -> String {
    record(&ctx);
    format!("TICKET-{}: {title} ({severity:?})", ctx.call_id())
}

/// Always panics, with a message that must never reach the model.
#[tool(effect = "read", version = "1.0")]
fn explode(ctx: CallContext) -> String {
    record(&ctx);
    panic!("secret at /home/alice/.ssh/id_rsa: index out of bounds in core::slice");
}

/// Panics inside an async handler.
#[tool(effect = "read", version = "1.0")]
async fn explode_async() -> String {
    panic!("async secret /etc/shadow");
}

/// Hangs far longer than its timeout.
#[tool(effect = "read", version = "1.0", timeout_ms = 50)]
async fn hang() -> String {
    tokio::time::sleep(Duration::from_secs(3600)).await;
    "never".into()
}

/// Blocks its blocking-pool thread longer than its timeout.
#[tool(effect = "read", version = "1.0", timeout_ms = 50, blocking = true)]
fn block_thread() -> String {
    std::thread::sleep(Duration::from_millis(400));
    "late".into()
}

#[derive(Debug, Serialize, JsonSchema)]
struct Count {
    /// At least one.
    #[schemars(range(min = 1))]
    count: u32,
}

/// Returns a value its own result schema forbids (count 0 where the schema says at least 1).
#[tool(effect = "read", version = "1.0")]
fn wrong_shape() -> Count {
    Count { count: 0 }
}

/// Fails with an internal error whose text must stay in the logs.
#[tool(effect = "read", version = "1.0")]
fn fails_internally() -> Result<String, std::io::Error> {
    Err(std::io::Error::other("connection refused to db.internal:5432 (src/db.rs:42)"))
}

/// Computes a reserved code at run time: making the `ToolCode` fails, so the model never sees it.
#[tool(effect = "read", version = "1.0")]
fn claims_unknown_tool() -> Result<String, ToolError> {
    let code = keel_tools_core::results::ToolCode::parse(String::from("unknown_tool"))?;
    Err(ToolError::new(code, "pretending"))
}

struct Greeting(String);

/// Uses shared state and the call context.
#[tool(effect = "read", version = "1.0")]
fn greet(state: State<Greeting>, name: String, ctx: CallContext) -> String {
    format!("{} {name} ({})", state.0.0, ctx.call_id())
}

/// Needs state nobody registered.
#[tool(effect = "read", version = "1.0")]
fn needs_missing_state(_state: State<u128>) -> String {
    "unreachable".into()
}

fn registry() -> Registry {
    Registry::from_inventory().unwrap()
}

fn view(names: &[&str]) -> ToolView {
    registry().view().names(names.iter().copied()).build().unwrap()
}

fn executor(names: &[&str]) -> Executor {
    Executor::builder(view(names)).state(Greeting("hello".into())).build().unwrap()
}

fn code(r: &ToolResult) -> Option<&str> {
    r.error().map(|e| e.code.as_str())
}

fn assert_no_internals(r: &ToolResult) {
    let text = serde_json::to_string(r).unwrap();
    for needle in ["panicked", "secret", "/home/", "/etc/", ".rs", "::", "db.internal", "index out of bounds"] {
        assert!(!text.contains(needle), "{needle:?} leaked into {text}");
    }
}

/// The desk's four calls, one per stop.
#[tokio::test]
async fn seed_000_table() {
    let ex = executor(&["lookup_incident", "file_ticket"]);
    let calls = [
        ToolCall::new("call-valid", "lookup_incident", json!({"incident_id": "INC-001"})),
        ToolCall::new("call-unknown", "delete_prod", json!({})),
        ToolCall::new("call-invalid", "lookup_incident", json!({"incident_id": 42})),
        ToolCall::new("call-write", "file_ticket", json!({"title": "db pool", "severity": "high"})),
    ];
    let mut rows = Vec::new();
    for c in calls {
        let r = ex.call(c).await;
        rows.push((
            r.call_id.clone(),
            r.tool_name.clone(),
            r.tool_version.as_deref().map(str::to_owned),
            r.is_ok(),
            code(&r).map(str::to_owned),
        ));
    }
    let v = |s: &str| Some(s.to_owned());
    assert_eq!(
        rows,
        vec![
            (v("call-valid").unwrap(), v("lookup_incident").unwrap(), v("1.0"), true, None),
            (v("call-unknown").unwrap(), v("delete_prod").unwrap(), None, false, v("unknown_tool")),
            (v("call-invalid").unwrap(), v("lookup_incident").unwrap(), v("1.0"), false, v("invalid_arguments")),
            (v("call-write").unwrap(), v("file_ticket").unwrap(), v("1.0"), false, v("approval_required")),
        ]
    );
}

#[tokio::test]
async fn success_result_has_the_stable_json_form() {
    let ex = executor(&["lookup_incident"]);
    let r = ex.call(ToolCall::new("call-valid", "lookup_incident", json!({"incident_id": "INC-001"}))).await;
    assert_eq!(
        serde_json::to_value(&r).unwrap(),
        json!({
            "call_id": "call-valid",
            "tool_name": "lookup_incident",
            "tool_version": "1.0",
            "ok": true,
            "executed": true,
            "data": {
                "incident_id": "INC-001",
                "service": "auth-api",
                "severity": "high",
                "symptom": "login returns 502",
                "evidence": ["auth-api timeout", "database pool exhausted"]
            },
            "error": null
        })
    );
    let unknown = ex.call(ToolCall::new("call-unknown", "delete_prod", json!({}))).await;
    let j = serde_json::to_value(&unknown).unwrap();
    assert_eq!(j["tool_version"], Value::Null);
    assert_eq!(j["executed"], false);
    assert_eq!(j["data"], Value::Null);
}

#[tokio::test]
async fn rejected_calls_never_run_the_handler() {
    let ex = executor(&["lookup_incident", "file_ticket"]);
    let rejected = [
        ToolCall::new("rejected-1", "Lookup_incident", json!({"incident_id": "INC-001"})),
        ToolCall::new("rejected-2", " lookup_incident", json!({"incident_id": "INC-001"})),
        ToolCall::new("rejected-3", "lookup_incident ", json!({"incident_id": "INC-001"})),
        ToolCall::new("rejected-4", "lookup_incidents", json!({"incident_id": "INC-001"})),
        ToolCall::new("rejected-5", "lookup_incident", json!({"incident_id": 42})),
        ToolCall::new("rejected-6", "lookup_incident", json!({})),
        ToolCall::new("rejected-7", "lookup_incident", json!({"incident_id": "INC-001", "force": true})),
        ToolCall::new("rejected-8", "lookup_incident", json!("INC-001")),
        ToolCall::from_json_text("rejected-9", "lookup_incident", "{\"incident_id\": \"INC-001\"} trailing"),
        ToolCall::new("rejected-10", "file_ticket", json!({"title": "x", "severity": "high"})),
        ToolCall::new("rejected-11", "file_ticket", json!({"title": "x", "severity": "urgent"})),
    ];
    for c in rejected {
        let id = c.id().to_owned();
        let r = ex.call(c).await;
        assert!(!r.is_ok() && !r.executed, "{r:?}");
        assert_no_internals(&r);
        assert_eq!(runs(&id), 0, "a handler ran for the rejected call {id}");
    }
    // The recording works: an accepted call of each tool is recorded once, under its own id.
    let ok = ex.call(ToolCall::new("rejected-control", "lookup_incident", json!({"incident_id": "INC-001"}))).await;
    assert!(ok.is_ok(), "{ok:?}");
    assert_eq!(runs("rejected-control"), 1);
}

#[tokio::test]
async fn invalid_arguments_name_every_violation_by_pointer() {
    let ex = executor(&["file_ticket"]);
    let r = ex.call(ToolCall::new("c", "file_ticket", json!({"title": 7, "severity": "urgent", "extra": 1}))).await;
    assert_eq!(code(&r), Some("invalid_arguments"));
    let details = &r.error().unwrap().details.as_ref().unwrap()["violations"];
    let pointers: Vec<&str> = details.as_array().unwrap().iter().map(|v| v["pointer"].as_str().unwrap()).collect();
    assert!(pointers.contains(&"/title"), "{pointers:?}");
    assert!(pointers.contains(&"/severity"), "{pointers:?}");
    let message = &r.error().unwrap().message;
    assert!(message.contains("/title") && message.contains("/severity"), "{message}");
    assert_no_internals(&r);

    // No coercion: a numeric string is not an integer, an integer is not a string.
    let r = ex.call(ToolCall::new("c2", "file_ticket", json!({"title": "t", "severity": 1}))).await;
    assert_eq!(code(&r), Some("invalid_arguments"));
}

#[tokio::test]
async fn an_approval_is_bound_to_the_exact_arguments() {
    let ex = executor(&["file_ticket"]);
    let a = json!({"title": "db pool", "severity": "high"});
    let b = json!({"title": "drop tables", "severity": "high"});
    let opts = CallOptions::new().approve(Approval::new("file_ticket", &a));

    let r = ex.call_with(ToolCall::new("approval-b", "file_ticket", b), &opts).await;
    assert_eq!(code(&r), Some("approval_required"));
    assert_eq!(runs("approval-b"), 0, "approval for A ran B");

    // Same arguments, other key order: still approved (canonical form).
    let a_reordered: Value = serde_json::from_str(r#"{"severity": "high", "title": "db pool"}"#).unwrap();
    let r = ex.call_with(ToolCall::new("approval-a", "file_ticket", a_reordered), &opts).await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(runs("approval-a"), 1);

    // An approval for another tool does not count.
    let other = CallOptions::new().approve(Approval::new("lookup_incident", &a));
    let r = ex.call_with(ToolCall::new("approval-a2", "file_ticket", a.clone()), &other).await;
    assert_eq!(code(&r), Some("approval_required"));
    assert_eq!(runs("approval-a2"), 0);
    let details = r.error().unwrap().details.clone().unwrap();
    assert_eq!(details["approve"]["arguments"], a, "the result says what to approve");
}

#[tokio::test]
async fn business_errors_keep_the_tools_code() {
    let ex = executor(&["lookup_incident"]);
    let r = ex.call(ToolCall::new("c", "lookup_incident", json!({"incident_id": "INC-404"}))).await;
    assert!(r.executed && !r.is_ok());
    assert_eq!(code(&r), Some("not_found"));
    assert_eq!(r.error().unwrap().message, "no incident INC-404");
}

#[tokio::test]
async fn faulty_handlers_get_their_codes_and_later_calls_still_succeed() {
    let ex = executor(&[
        "explode",
        "explode_async",
        "hang",
        "block_thread",
        "fails_internally",
        "claims_unknown_tool",
        "lookup_incident",
        "wrong_shape",
    ]);
    let cases = [
        ("explode", "tool_internal_error"),
        ("explode_async", "tool_internal_error"),
        ("hang", "timeout"),
        ("block_thread", "timeout"),
        ("fails_internally", "tool_internal_error"),
        ("claims_unknown_tool", "tool_internal_error"),
        ("wrong_shape", "invalid_tool_output"),
    ];
    for (name, expected) in cases {
        let r = ex.call(ToolCall::new(format!("call-{name}"), name, json!({}))).await;
        assert_eq!(code(&r), Some(expected), "{name}: {r:?}");
        assert!(r.executed, "{name} started");
        assert_eq!(r.tool_version.as_deref(), Some("1.0"));
        assert_no_internals(&r);
        let ok = ex.call(ToolCall::new("after", "lookup_incident", json!({"incident_id": "INC-001"}))).await;
        assert!(ok.is_ok(), "a call after {name} failed: {ok:?}");
    }
    assert_eq!(runs("call-explode"), 1, "the panicking handler ran once for its call");
}

#[tokio::test]
async fn output_is_validated_against_the_result_schema() {
    // A dynamic tool declares a result schema and returns something else.
    let def = keel_tools_core::definition::ToolDefinition::builder("liar")
        .description("Claims to return an object.")
        .output_schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}))
        .handler(|_a, _c| async { Ok(json!({"n": "not a number"})) })
        .build()
        .unwrap();
    let registry = Registry::builder().without_inventory().tool(def).build().unwrap();
    let ex = Executor::new(registry.all().clone()).unwrap();
    let r = ex.call(ToolCall::new("c", "liar", json!({}))).await;
    assert_eq!(code(&r), Some("invalid_tool_output"));
    assert!(r.executed);
    assert_eq!(r.data(), None, "the invalid result is withheld");
}

#[tokio::test]
async fn shared_state_and_context_are_injected() {
    let ex = executor(&["greet"]);
    let r = ex.call(ToolCall::new("call-7", "greet", json!({"name": "ada"}))).await;
    assert_eq!(r.data(), Some(&json!("hello ada (call-7)")));
    // Injected parameters are not part of the schema.
    let schema = ex.view().get("greet").unwrap().input_schema().clone();
    assert_eq!(schema["properties"].as_object().unwrap().keys().collect::<Vec<_>>(), ["name"]);
}

#[tokio::test]
async fn a_custom_policy_sees_tenant_and_can_deny() {
    let ex = Executor::builder(view(&["lookup_incident"]))
        .policy(|r: &keel_tools_core::policy::PolicyRequest<'_>| match r.tenant {
            Some("blocked") => PolicyDecision::Deny { reason: "tenant `blocked` may not use tools".into() },
            _ => PolicyDecision::Allow,
        })
        .build()
        .unwrap();
    let call = || ToolCall::new("c", "lookup_incident", json!({"incident_id": "INC-001"}));
    let denied = ex.call_with(call(), &CallOptions::new().tenant("blocked")).await;
    assert_eq!(code(&denied), Some("policy_denied"));
    assert!(!denied.executed);
    assert!(ex.call_with(call(), &CallOptions::new().tenant("acme")).await.is_ok());
}

#[test]
fn ten_thousand_concurrent_calls_each_get_exactly_one_result() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    rt.block_on(async {
        let ex = executor(&["lookup_incident", "greet"]);
        let mut set = tokio::task::JoinSet::new();
        for i in 0..10_000 {
            let ex = ex.clone();
            set.spawn(async move {
                let call = if i % 2 == 0 {
                    ToolCall::new(format!("c{i}"), "lookup_incident", json!({"incident_id": "INC-001"}))
                } else {
                    ToolCall::new(format!("c{i}"), "greet", json!({"name": format!("n{i}")}))
                };
                ex.call(call).await
            });
        }
        let mut seen = std::collections::HashSet::new();
        while let Some(r) = set.join_next().await {
            let r = r.unwrap();
            assert!(r.is_ok(), "{r:?}");
            assert!(seen.insert(r.call_id.clone()), "duplicate result for {}", r.call_id);
        }
        assert_eq!(seen.len(), 10_000);
    });
}

/// Waits far longer than any test; takes no context (the executor hands it a shared one).
#[tool(effect = "read", version = "1.0", timeout_ms = 20000)]
async fn waits_without_context() -> String {
    tokio::time::sleep(Duration::from_secs(10)).await;
    "late".into()
}

/// Returns when its call is cancelled, saying what its context told it.
#[tool(effect = "read", version = "1.0", timeout_ms = 20000)]
async fn waits_for_cancellation(ctx: CallContext) -> String {
    ctx.cancellation().cancelled().await;
    format!("{} saw cancellation", ctx.call_id())
}

/// The caller's cancellation token ends a call, whether the handler reads its context or not; a handler that does
/// sees its own call id and the cancellation.
#[tokio::test]
async fn the_callers_cancellation_ends_a_call_with_or_without_a_context() {
    let ex = executor(&["waits_without_context", "waits_for_cancellation"]);
    for name in ["waits_without_context", "waits_for_cancellation"] {
        let parent = tokio_util::sync::CancellationToken::new();
        let options = CallOptions::new().cancellation(parent.clone());
        let cancel = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            parent.cancel();
        });
        let started = std::time::Instant::now();
        let r = ex.call_with(ToolCall::new(format!("c-{name}"), name, json!({})), &options).await;
        cancel.await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(5), "{name}: cancellation was not seen");
        match name {
            // Nothing reads the token: the executor stops waiting.
            "waits_without_context" => assert_eq!(r.code(), Some("cancelled"), "{r:?}"),
            // The handler sees the token through its context and returns first (the handler is polled first).
            _ => assert_eq!(r.data(), Some(&json!("c-waits_for_cancellation saw cancellation")), "{r:?}"),
        }
        assert!(r.executed);
    }
}

#[tokio::test]
async fn a_panic_text_reaches_the_failure_hook_and_never_the_result() {
    type Seen = (String, String, String, Vec<String>);
    let seen: std::sync::Arc<Mutex<Vec<Seen>>> = Default::default();
    let log = seen.clone();
    let ex = Executor::builder(view(&["explode_async", "fails_internally", "wrong_shape"]))
        .on_internal_failure(move |f| {
            log.lock().unwrap().push((f.call_id.to_owned(), f.tool.to_owned(), f.kind_name().to_owned(), f.chain()))
        })
        .build()
        .unwrap();
    for name in ["explode_async", "fails_internally", "wrong_shape"] {
        let r = ex.call(ToolCall::new(format!("hook-{name}"), name, json!({}))).await;
        assert!(!r.is_ok() && r.executed, "{r:?}");
        assert_no_internals(&r);
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3, "{seen:?}");
    let (call_id, tool, kind, chain) = &seen[0];
    assert_eq!((call_id.as_str(), tool.as_str(), kind.as_str()), ("hook-explode_async", "explode_async", "panic"));
    assert_eq!(chain, &["async secret /etc/shadow"]);
    assert_eq!(seen[1].2, "error");
    assert_eq!(seen[2].2, "invalid_output");
    assert!(seen[2].3[0].contains("does not match its result schema"), "{:?}", seen[2]);
}

#[tokio::test]
async fn an_executor_without_a_tools_state_does_not_build() {
    let err = Executor::new(view(&["needs_missing_state", "lookup_incident"])).unwrap_err();
    assert_eq!(err.problems().len(), 1, "{err}");
    let problem = &err.problems()[0];
    assert_eq!(
        problem,
        &keel_tools_core::executor::ExecutorProblem::MissingState {
            tool: "needs_missing_state".into(),
            type_name: "u128"
        }
    );
    assert_eq!(problem.code(), "missing_state");
    let text = problem.to_string();
    assert!(text.contains("State<u128>") && text.contains(".state("), "{text}");
    // With the state it builds, and the handler runs.
    let ex = Executor::builder(view(&["needs_missing_state"])).state(7u128).build().unwrap();
    let r = ex.call(ToolCall::new("c1", "needs_missing_state", json!({}))).await;
    assert_eq!(r.data(), Some(&json!("unreachable")), "{r:?}");
}

#[tokio::test]
async fn an_extractor_that_fails_ends_the_call_before_the_handler() {
    // A context built by hand without the state: the extractor's failure is internal and nothing ran.
    let def = registry().get("needs_missing_state").unwrap().clone();
    let keel_tools_core::definition::Handler::Inline(f) = def.handler().clone() else {
        panic!("a plain fn runs inline by default")
    };
    let err = f(json!({}), &CallContext::new("c1", "needs_missing_state")).unwrap_err();
    assert_eq!(err.code(), "tool_internal_error");
    // Through an executor, an extractor's business error keeps its code and says executed: false.
    let r = Executor::new(view(&["tenant_only"]))
        .unwrap()
        .call(ToolCall::new("tenant-refused", "tenant_only", json!({})))
        .await;
    assert_eq!(code(&r), Some("tenant_required"), "{r:?}");
    assert!(!r.executed, "{r:?}");
    assert_eq!(runs("tenant-refused"), 0);
}

struct Tenant(String);

impl keel_tools_core::context::FromCallContext for Tenant {
    fn from_call_context(ctx: &CallContext) -> Result<Self, ToolError> {
        ctx.tenant()
            .map(|t| Tenant(t.to_owned()))
            .ok_or_else(|| keel_tools_core::tool_error!("tenant_required", "no tenant"))
    }
}

/// Runs only for a tenant.
#[tool(effect = "read", version = "1.0")]
fn tenant_only(tenant: Tenant, ctx: CallContext) -> String {
    record(&ctx);
    tenant.0
}

/// A count its result schema bounds.
#[derive(Debug, Serialize, JsonSchema)]
struct AtLeastOne {
    /// At least one.
    #[schemars(range(min = 1))]
    n: u32,
}

/// Returns `n` as it is, inline and without a context; its result schema asks for at least 1.
#[tool(effect = "read", version = "1.0")]
fn echo_count(n: u32) -> AtLeastOne {
    AtLeastOne { n }
}

/// The same as an `async fn`.
#[tool(effect = "read", version = "1.0")]
async fn echo_count_async(n: u32) -> AtLeastOne {
    AtLeastOne { n }
}

/// A result that names its member `n` twice, `first` then `last`: the result holds the last, as with
/// `serde_json::to_value`.
struct Twice {
    first: u32,
    last: u32,
}

impl Serialize for Twice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut s = serializer.serialize_struct("Twice", 2)?;
        s.serialize_field("n", &self.first)?;
        s.serialize_field("n", &self.last)?;
        s.end()
    }
}

impl JsonSchema for Twice {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Twice".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        AtLeastOne::json_schema(generator)
    }
}

/// Returns a result naming `n` twice.
#[tool(effect = "read", version = "1.0")]
fn twice(first: u32, last: u32) -> Twice {
    Twice { first, last }
}

/// A code of capitals: a result schema with a `pattern`, which has no verdict plan.
#[derive(Debug, Serialize, JsonSchema)]
struct Capitals {
    /// Capitals only.
    #[schemars(regex(pattern = r"^[A-Z]+$"))]
    code: String,
}

/// Returns `code` as it is.
#[tool(effect = "read", version = "1.0")]
fn echo_capitals(code: String) -> Capitals {
    Capitals { code }
}

/// A compiled handler's result is judged against its result schema, inline or `async fn`: a result that does not
/// match is withheld (`invalid_tool_output`, executed), the operator hears where it fails, and one that matches is
/// the data. A result naming a member twice is judged as it ends up (the last value, as `serde_json` keeps), and a
/// schema without a verdict plan (a `pattern`) is judged by jsonschema.
#[tokio::test]
async fn compiled_results_are_judged_against_their_result_schema() {
    let heard = std::sync::Arc::new(Mutex::new(Vec::<String>::new()));
    let log = std::sync::Arc::clone(&heard);
    let ex = Executor::builder(view(&["echo_count", "echo_count_async", "twice", "echo_capitals"]))
        .on_internal_failure(move |f| log.lock().unwrap().push(f.to_string()))
        .build()
        .unwrap();
    let cases = [
        ("echo_count", json!({"n": 1}), Some(json!({"n": 1}))),
        ("echo_count", json!({"n": 0}), None),
        ("echo_count_async", json!({"n": 2}), Some(json!({"n": 2}))),
        ("echo_count_async", json!({"n": 0}), None),
        ("twice", json!({"first": 0, "last": 3}), Some(json!({"n": 3}))),
        ("twice", json!({"first": 3, "last": 0}), None),
        ("echo_capitals", json!({"code": "ABC"}), Some(json!({"code": "ABC"}))),
        ("echo_capitals", json!({"code": "abc"}), None),
    ];
    for (i, (name, args, expected)) in cases.into_iter().enumerate() {
        heard.lock().unwrap().clear();
        let r = ex.call(ToolCall::new(format!("judged-{i}"), name, args.clone())).await;
        assert!(r.executed, "{name} {args}: {r:?}");
        match expected {
            Some(data) => {
                assert!(r.is_ok(), "{name} {args}: {r:?}");
                assert_eq!(r.data(), Some(&data), "{name} {args}");
                assert!(heard.lock().unwrap().is_empty(), "{name} {args}");
            }
            None => {
                assert_eq!(code(&r), Some("invalid_tool_output"), "{name} {args}: {r:?}");
                assert_eq!(r.data(), None, "the invalid result is withheld");
                assert_no_internals(&r);
                let heard = heard.lock().unwrap().join("\n");
                assert!(heard.contains("does not match its result schema"), "{name} {args}: {heard}");
                let pointer = if name == "echo_capitals" { "/code" } else { "/n" };
                assert!(heard.contains(pointer), "{name} {args}: the operator hears where: {heard}");
            }
        }
    }
}

/// Reopens a closed incident.
#[tool(name = "calls.reopen", effect = "read", version = "1.0", scopes = ["incidents.write"])]
fn reopen(incident_id: String, ctx: CallContext) -> String {
    record(&ctx);
    incident_id
}

/// A tool's scopes are checked after the arguments and before the policy: a caller granted other scopes is refused
/// `insufficient_scope` naming the scope, and the handler never runs; a caller granted it runs; a call made without
/// granted scopes (the host's own) is not checked.
#[tokio::test]
async fn a_caller_without_the_tools_scope_is_refused_and_nothing_runs() {
    let registry = Registry::from_inventory().unwrap();
    let executor = Executor::new(registry.view().names(["calls.reopen"]).build().unwrap()).unwrap();
    let call = |id: &str| ToolCall::new(id, "calls.reopen", json!({"incident_id": "INC-1"}));
    let reader = CallOptions::new().granted_scopes(["incidents.read"]);
    let refused = executor.call_with(call("scope-1"), &reader).await;
    assert_eq!((refused.code(), refused.executed), (Some("insufficient_scope"), false));
    let body = refused.error().unwrap();
    assert_eq!(body.details, Some(json!({"scope": "incidents.write", "required": ["incidents.write"]})));
    assert_eq!(runs("scope-1"), 0);
    // Arguments come first: a bad call without the scope is `invalid_arguments`, as for anyone.
    let bad = executor.call_with(ToolCall::new("scope-2", "calls.reopen", json!({})), &reader).await;
    assert_eq!(bad.code(), Some("invalid_arguments"));
    let writer = CallOptions::new().granted_scopes(["incidents.read", "incidents.write"]);
    let ran = executor.call_with(call("scope-3"), &writer).await;
    assert!(ran.is_ok(), "{ran:?}");
    assert_eq!(runs("scope-3"), 1);
    let host = executor.call(call("scope-4")).await;
    assert!(host.is_ok(), "{host:?}");
    let def = registry.get("calls.reopen").unwrap();
    assert_eq!(def.scopes().collect::<Vec<_>>(), ["incidents.write"]);
    assert!(def.allowed_with(&["incidents.write"]) && !def.allowed_with::<&str>(&[]));
}

#[test]
fn a_run_time_definition_with_a_scope_that_is_not_a_token_is_refused() {
    use keel_tools_core::definition::{DefinitionError, ToolDefinition};
    let built = ToolDefinition::builder("calls.dynamic")
        .description("Does something.")
        .scope("ok.scope")
        .scope("not ok")
        .handler(|_a, _c| async { Ok::<_, ToolError>(json!(null)) })
        .build();
    assert_eq!(built.err(), Some(DefinitionError::Scope("calls.dynamic".into(), "not ok".into())));
}
