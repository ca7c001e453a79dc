//! A prototype of the executor path with the changes proposed in `BENCHMARKS.md` applied, built only from tool-core's
//! public API, so that what the proposals buy is measured rather than guessed.
//!
//! It keeps the fixed order and every check of `Executor::call` (lookup, limits, argument validation, policy,
//! handler with panics caught, result limits and validation, the per-call span and a `CallContext` with a fresh cancellation
//! token that is cancelled when the call ends) and drops only what the profile shows is not needed on the path:
//!
//! 1. limits: one bounded-recursion pass that adds an *upper bound* of the JSON size (no number formatting, no
//!    escape scan), exact only when that bound exceeds `max_bytes` (now tool-core's own `check_limits`);
//! 2. inline handlers run directly under `catch_unwind`: no boxed future, no `tokio::time::timeout`, no `select!`
//!    (a timeout cannot interrupt a synchronous inline handler anyway);
//! 3. the call's id and name `String`s are moved into the result instead of copied (the name equals the
//!    definition's: the lookup is exact);
//! 4. lookup by binary search over the view's sorted names (no SipHash of the untrusted name);
//! 5. no `Instant::now()`/`elapsed()` and no `span.record(..)` unless the span is enabled;
//! 6. the validators are compiled from a copy of each schema in which a `oneOf` whose branches are all `const`s
//!    (what schemars emits for an enum with documented variants) is folded into one `enum`
//!    ([`fold_const_one_of`]): same accepted values, same violation text, cheaper to check and much cheaper to
//!    explain;
//! 7. `approval_required` details take the arguments by move instead of serializing a copy.
//!
//! Not a replacement for `Executor`: it runs `Handler::Inline` tools only (others answer `tool_internal_error`),
//! skips the OpenAI strict-mode null removal (`ToolSchemas::remove_optional_nulls`, which changes nothing for
//! arguments without `null`, the benchmarked case; proposal 9 makes it return at once for those), and has no
//! error-path niceties beyond what the benchmarks exercise.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tool_core::policy::PolicyRequest;
use tool_core::validate::{CompiledSchema, Limits, Violation, check_limits};
use tool_core::{
    Approvals, CallContext, EffectPolicy, ErrorBody, Handler, Policy, PolicyDecision, StateMap, ToolCall,
    ToolDefinition, ToolResult, ToolView,
};

struct Entry {
    def: Arc<ToolDefinition>,
    input: CompiledSchema,
    output: Option<CompiledSchema>,
}

/// The prototype executor over one view.
pub struct ProposedExecutor {
    /// Sorted by name (the view's order).
    entries: Vec<Entry>,
    state: Arc<StateMap>,
    limits: Limits,
    output_limits: Limits,
    approvals: Approvals,
    /// See [`ProposedExecutor::without_call_context`].
    shared_context: Option<CallContext>,
}

impl ProposedExecutor {
    /// Compiles the schemas of `view`.
    pub fn new(view: &ToolView) -> ProposedExecutor {
        let entries = view
            .iter()
            .map(|d| {
                let compile = |schema: &Value| {
                    let mut schema = schema.clone();
                    fold_const_one_of(&mut schema);
                    CompiledSchema::compile(&schema).expect("the fixture schemas compile")
                };
                Entry { def: d.clone(), input: compile(d.input_schema()), output: d.output_schema().map(compile) }
            })
            .collect();
        ProposedExecutor {
            entries,
            state: Arc::new(StateMap::new()),
            limits: Limits::default(),
            // The executor's default output limits.
            output_limits: Limits { max_depth: 128, max_bytes: 8 * 1024 * 1024 },
            approvals: Approvals::new(),
            shared_context: None,
        }
    }

    /// Measures proposal 6 (tools that take no `CallContext`/`State` get no per-call context or token): the thunk
    /// is handed a clone of one shared context (one atomic increment), which the fixture's thunks ignore. Only for
    /// tools without injected parameters.
    pub fn without_call_context(view: &ToolView) -> ProposedExecutor {
        ProposedExecutor { shared_context: Some(CallContext::new("shared", "shared")), ..ProposedExecutor::new(view) }
    }

    fn lookup(&self, name: &str) -> Option<&Entry> {
        self.entries.binary_search_by(|e| e.def.name().cmp(name)).ok().map(|i| &self.entries[i])
    }

    /// Runs one call in the fixed order.
    pub async fn call(&self, call: ToolCall) -> ToolResult {
        let span = tracing::info_span!("tool_call", call_id = %call.id(), tool_name = tracing::field::Empty);
        let started = (!span.is_disabled()).then(Instant::now);
        let result = self.run(call);
        if let Some(started) = started {
            span.record("tool_name", result.tool_name.as_str());
            tracing::trace!(parent: &span, duration_us = started.elapsed().as_micros() as u64, "done");
        }
        result
    }

    fn run(&self, call: ToolCall) -> ToolResult {
        let (id, name, arguments) = call.into_parts();
        let Some(entry) = self.lookup(&name) else {
            let body =
                ErrorBody::new(tool_core::ErrorCode::UnknownTool, format!("no tool named {name:?} is available"));
            return ToolResult::failure(id, name, None, false, body);
        };
        let def = &*entry.def;
        let version = Some(def.version().to_owned());
        let arguments = match arguments {
            Ok(v) => v,
            Err(e) => {
                return ToolResult::failure(
                    id,
                    name,
                    version,
                    false,
                    ErrorBody::new(tool_core::ErrorCode::InvalidArguments, e.message),
                );
            }
        };
        if let Err(v) = check_limits(&arguments, &self.limits) {
            return ToolResult::failure(id, name, version, false, invalid_arguments(vec![v]));
        }
        if !entry.input.is_valid(&arguments) {
            let violations = entry.input.validate(&arguments).err().unwrap_or_default();
            return ToolResult::failure(id, name, version, false, invalid_arguments(violations));
        }
        let request = PolicyRequest { tool: def, arguments: &arguments, tenant: None, approvals: &self.approvals };
        match EffectPolicy.decide(&request) {
            PolicyDecision::Allow => {}
            PolicyDecision::RequireApproval { reason } => {
                // The arguments are moved into the details, not serialized into a copy.
                let mut approve = Map::new();
                approve.insert("tool".to_owned(), Value::String(name.clone()));
                approve.insert("arguments".to_owned(), arguments);
                let details = json!({"effect": def.effect().as_str(), "approve": Value::Object(approve)});
                let body = ErrorBody::new(tool_core::ErrorCode::ApprovalRequired, reason).with_details(details);
                return ToolResult::failure(id, name, version, false, body);
            }
            PolicyDecision::Deny { reason } => {
                return ToolResult::failure(
                    id,
                    name,
                    version,
                    false,
                    ErrorBody::new(tool_core::ErrorCode::PolicyDenied, reason),
                );
            }
        }
        let Handler::Inline(f) = def.handler() else {
            let body =
                ErrorBody::new(tool_core::ErrorCode::ToolInternalError, "the prototype runs inline handlers only");
            return ToolResult::failure(id, name, version, false, body);
        };
        let outcome = match &self.shared_context {
            Some(ctx) => std::panic::catch_unwind(AssertUnwindSafe(|| f(arguments, ctx.clone()))),
            None => {
                let token = CancellationToken::new();
                let ctx = CallContext::builder(id.as_str(), def.name())
                    .cancellation(token.clone())
                    .state(self.state.clone())
                    .build();
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| f(arguments, ctx)));
                token.cancel();
                outcome
            }
        };
        let value = match outcome {
            Ok(Ok(v)) => v,
            Ok(Err(_)) | Err(_) => {
                let body =
                    ErrorBody::new(tool_core::ErrorCode::ToolInternalError, "the tool failed with an internal error");
                return ToolResult::failure(id, name, version, true, body);
            }
        };
        if check_limits(&value, &self.output_limits).is_err() {
            let body = ErrorBody::new(
                tool_core::ErrorCode::InvalidToolOutput,
                "the tool produced a result larger than allowed",
            );
            return ToolResult::failure(id, name, version, true, body);
        }
        if let Some(output) = &entry.output
            && !output.is_valid(&value)
        {
            let body = ErrorBody::new(
                tool_core::ErrorCode::InvalidToolOutput,
                "the tool produced a result that does not match its schema",
            );
            return ToolResult::failure(id, name, version, true, body);
        }
        ToolResult::success(id, name, version, value)
    }
}

fn invalid_arguments(violations: Vec<Violation>) -> ErrorBody {
    let message =
        format!("the arguments do not match the tool's schema: {}", tool_core::validate::summary(&violations));
    ErrorBody::new(tool_core::ErrorCode::InvalidArguments, message).with_details(json!({ "violations": violations }))
}

/// Folds every `oneOf` whose branches are all `{"const": .., "description"?: .., "title"?: .., "type"?: ..}` into
/// `{"enum": [..]}` (plus the branches' common `type`, if they all have the same one), for validation only: the
/// rendered schemas keep the per-value descriptions.
pub fn fold_const_one_of(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let folded = map.get("oneOf").and_then(Value::as_array).and_then(|branches| {
                let mut values = Vec::with_capacity(branches.len());
                let mut common_type: Option<Option<&Value>> = None;
                for b in branches {
                    let b = b.as_object()?;
                    if !b.keys().all(|k| matches!(k.as_str(), "const" | "description" | "title" | "type")) {
                        return None;
                    }
                    values.push(b.get("const")?.clone());
                    let t = b.get("type");
                    match common_type {
                        None => common_type = Some(t),
                        Some(c) if c != t => common_type = Some(None),
                        Some(_) => {}
                    }
                }
                Some((values, common_type.flatten().cloned()))
            });
            if let Some((values, ty)) = folded {
                map.remove("oneOf");
                map.insert("enum".to_owned(), Value::Array(values));
                if let Some(ty) = ty {
                    map.entry("type").or_insert(ty);
                }
            }
            for v in map.values_mut() {
                fold_const_one_of(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(fold_const_one_of),
        _ => {}
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn folding_keeps_what_the_schema_accepts() {
        let mut schema = serde_json::json!({"oneOf": [
            {"const": "low", "description": "L.", "type": "string"},
            {"const": "high", "description": "H.", "type": "string"}
        ], "description": "Sev."});
        fold_const_one_of(&mut schema);
        assert_eq!(schema, serde_json::json!({"enum": ["low", "high"], "type": "string", "description": "Sev."}));
        let mut mixed = serde_json::json!({"oneOf": [{"const": 1}, {"type": "string", "minLength": 2}]});
        let before = mixed.clone();
        fold_const_one_of(&mut mixed);
        assert_eq!(mixed, before);
    }

    #[test]
    fn proposed_executor_answers_like_the_executor() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime");
        let executor = crate::keel::executor();
        let proposed = ProposedExecutor::new(executor.view());
        rt.block_on(async {
            for (name, args) in [
                ("search_incidents", crate::fixture::valid_arguments()),
                ("search_incidents", crate::fixture::invalid_arguments()),
                ("file_incident", crate::fixture::valid_arguments()),
                ("no_such_tool", crate::fixture::valid_arguments()),
            ] {
                let a = executor.call(ToolCall::new("c", name, args.clone())).await;
                let b = proposed.call(ToolCall::new("c", name, args)).await;
                assert_eq!(
                    (a.is_ok(), a.executed, a.code(), &a.data()),
                    (b.is_ok(), b.executed, b.code(), &b.data()),
                    "{name}"
                );
                if a.code() == Some("invalid_arguments") {
                    // Folding the documented enum into `enum` keeps the model-facing explanation.
                    assert_eq!(a.error(), b.error());
                }
                assert_eq!((&a.call_id, &a.tool_name, &a.tool_version), (&b.call_id, &b.tool_name, &b.tool_version));
            }
        });
    }
}
