//! The bodies of failed calls' results, one builder per way a call fails. Each is built out of line, so that the
//! path of a call that succeeds stays short; whatever is internal goes to the executor's failure hook, not to
//! the model.

use std::any::Any;
use std::fmt::{self, Write as _};
use std::time::Duration;

use serde_json::{Map, Value};

use super::{CallOptions, Executor, TARGET};
use crate::error::{ErrorCode, Repr, ToolError};
use crate::failure::{FailureKind, InternalFailure};
use crate::result::{ErrorBody, HandlerState, ToolResult};
use crate::tool_definition::ToolDefinition;
use keel_tools_schema::validate::{Violation, summary};

/// The longest requested name echoed back in an `unknown_tool` result.
const MAX_ECHOED_NAME: usize = 128;

/// How a call failed: whether its handler ran, and its result's body.
pub(super) struct Failed {
    pub(super) executed: bool,
    pub(super) body: ErrorBody,
}

impl Failed {
    /// A failure before the handler ran: not executed.
    #[inline(always)]
    pub(super) fn before(body: ErrorBody) -> Failed {
        Failed { executed: false, body }
    }

    /// A failure after the handler ran: executed.
    #[inline(always)]
    pub(super) fn after(body: ErrorBody) -> Failed {
        Failed { executed: true, body }
    }
}

/// A call of a tool this view does not have: its name echoed (cut to [`MAX_ECHOED_NAME`] bytes), no version.
#[cold]
pub(super) fn unknown_tool(call_id: String, name: String, span: &tracing::Span) -> ToolResult {
    let name = if name.len() <= MAX_ECHOED_NAME { name } else { truncate_name(&name) };
    span.record("tool_name", name.as_str());
    let message =
        format!("no tool named {name:?} is available; call one of the tools you were given, by its exact name");
    ToolResult::failure(call_id, name, None, false, ErrorBody::new(ErrorCode::UnknownTool, message))
}

/// Arguments that are not JSON at all (a provider's string that does not parse).
#[cold]
pub(super) fn unreadable_arguments(e: impl fmt::Display) -> ErrorBody {
    ErrorBody::new(ErrorCode::InvalidArguments, e.to_string())
}

/// `approval_required`: the arguments move into the details (what to approve), not a serialized copy.
#[cold]
pub(super) fn approval_body(def: &ToolDefinition, reason: String, arguments: Value) -> ErrorBody {
    let mut approve = Map::with_capacity(2);
    approve.insert("tool".to_owned(), Value::String(def.name().to_owned()));
    approve.insert("arguments".to_owned(), arguments);
    let mut details = Map::with_capacity(2);
    details.insert("effect".to_owned(), Value::String(def.effect().as_str().to_owned()));
    details.insert("approve".to_owned(), Value::Object(approve));
    ErrorBody::new(ErrorCode::ApprovalRequired, reason).with_details(Value::Object(details))
}

/// `insufficient_scope`: the scope the caller lacks, and all the tool needs.
#[cold]
pub(super) fn insufficient_scope_body(def: &ToolDefinition, missing: &str) -> ErrorBody {
    let mut details = Map::with_capacity(2);
    details.insert("scope".to_owned(), Value::String(missing.to_owned()));
    details.insert("required".to_owned(), Value::Array(def.scopes().map(|s| Value::String(s.to_owned())).collect()));
    ErrorBody::new(ErrorCode::InsufficientScope, format!("this call needs the scope `{missing}`"))
        .with_details(Value::Object(details))
}

#[cold]
pub(super) fn denied_body(reason: String) -> ErrorBody {
    ErrorBody::new(ErrorCode::PolicyDenied, reason)
}

/// `timeout`: where the handler stood, and what that means for calling it again.
#[cold]
pub(super) fn timed_out_body(
    options: &CallOptions,
    def: &ToolDefinition,
    call_id: &str,
    state: HandlerState,
    timeout: Duration,
) -> ErrorBody {
    let ms = timeout.as_millis() as u64;
    tracing::warn!(target: TARGET, call_id = %call_id, tool_name = def.name(), timeout_ms = ms, handler = state.as_str(), "tool handler timed out");
    let message = match state {
        HandlerState::NotStarted => format!(
            "the tool did not start within {ms} ms and will not run; nothing was done, so it can be called again"
        ),
        HandlerState::Running => format!(
            "the tool did not finish within {ms} ms and may still be running: its effects may still happen, so \
             check for them before calling it again"
        ),
        HandlerState::Finished => format!(
            "the tool ran to its end but took longer than its {ms} ms timeout, so its result was withheld; its \
             effects did happen"
        ),
    };
    let details = stopped_details(options, def.name(), call_id, state, Some(ms));
    ErrorBody::new(ErrorCode::Timeout, message).with_details(details)
}

/// `cancelled`: where the handler stood.
#[cold]
pub(super) fn cancelled_body(
    options: &CallOptions,
    def: &ToolDefinition,
    call_id: &str,
    state: HandlerState,
) -> ErrorBody {
    let message = match state {
        HandlerState::NotStarted => "the call was cancelled before the tool started; nothing was done",
        HandlerState::Running | HandlerState::Finished => {
            "the call was cancelled before the tool finished; it may still be running and its effects may still \
             happen"
        }
    };
    let details = stopped_details(options, def.name(), call_id, state, None);
    ErrorBody::new(ErrorCode::Cancelled, message).with_details(details)
}

#[cold]
fn internal_body(call_id: &str) -> ErrorBody {
    ErrorBody::new(
        ErrorCode::ToolInternalError,
        format!("the tool failed with an internal error; it was logged under call id {call_id:?}"),
    )
}

#[cold]
pub(super) fn invalid_arguments_body(violations: Vec<Violation>) -> ErrorBody {
    // One line per violation (`Violation`'s `Display` escapes control characters), joined with "; ".
    let mut message = String::with_capacity(64 + 96 * violations.len());
    message.push_str("the arguments do not match the tool's schema: ");
    for (i, v) in violations.iter().enumerate() {
        if i > 0 {
            message.push_str("; ");
        }
        let _ = write!(message, "{v}");
    }
    // The details hold the violations themselves, moved (the same object `serde` would write for each).
    let listed = violations
        .into_iter()
        .map(|v| {
            let mut entry = Map::with_capacity(3);
            entry.insert("pointer".to_owned(), Value::String(v.pointer));
            entry.insert("expected".to_owned(), Value::String(v.expected));
            entry.insert("found".to_owned(), Value::String(v.found));
            Value::Object(entry)
        })
        .collect();
    let mut details = Map::with_capacity(1);
    details.insert("violations".to_owned(), Value::Array(listed));
    ErrorBody::new(ErrorCode::InvalidArguments, message).with_details(Value::Object(details))
}

/// The details of a `timeout` or `cancelled` result: where the handler stood, the call's idempotency key, and
/// the timeout.
fn stopped_details(
    options: &CallOptions,
    tool: &str,
    call_id: &str,
    state: HandlerState,
    timeout_ms: Option<u64>,
) -> Value {
    let mut details = Map::with_capacity(3);
    if let Some(ms) = timeout_ms {
        details.insert("timeout_ms".to_owned(), Value::from(ms));
    }
    details.insert("handler".to_owned(), Value::String(state.as_str().to_owned()));
    details.insert("idempotency_key".to_owned(), Value::String(options.key_for(tool, call_id)));
    Value::Object(details)
}

fn panic_text(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("<non-string panic payload>")
}

fn truncate_name(name: &str) -> String {
    if name.len() <= MAX_ECHOED_NAME {
        return name.to_owned();
    }
    let mut end = MAX_ECHOED_NAME;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &name[..end])
}

impl Executor {
    /// A tool whose schemas do not compile (unreachable: the build compiled every schema of the view): the operator
    /// hears the problem, the model only that the tool failed.
    #[cold]
    pub(super) fn uncompiled_body(&self, def: &ToolDefinition, call_id: &str, problem: &str) -> ErrorBody {
        (self.inner.on_failure)(&InternalFailure {
            call_id,
            tool: def.name(),
            kind: FailureKind::InvalidOutput(problem),
        });
        internal_body(call_id)
    }

    /// A panic's body: the operator hears the panic, the model only that the tool failed.
    #[cold]
    pub(super) fn panic_body(&self, def: &ToolDefinition, call_id: &str, panic: Box<dyn Any + Send>) -> ErrorBody {
        (self.inner.on_failure)(&InternalFailure {
            call_id,
            tool: def.name(),
            kind: FailureKind::Panic(panic_text(&*panic)),
        });
        internal_body(call_id)
    }

    /// A result that does not match its result schema, withheld: the operator hears how, the model only that.
    #[cold]
    pub(super) fn invalid_output_body(
        &self,
        def: &ToolDefinition,
        call_id: &str,
        output: &keel_tools_schema::validate::CompiledSchema,
        value: &Value,
    ) -> ErrorBody {
        let violations = output.validate(value).err().unwrap_or_default();
        let detail = format!("the result does not match its result schema: {}", summary(&violations));
        self.withheld(
            def,
            call_id,
            &detail,
            "the tool produced a result that does not match its declared result schema; it was withheld".into(),
        )
    }

    /// A result withheld as `invalid_tool_output`: the operator hears `detail`, the model `message`.
    fn withheld(&self, def: &ToolDefinition, call_id: &str, detail: &str, message: String) -> ErrorBody {
        (self.inner.on_failure)(&InternalFailure {
            call_id,
            tool: def.name(),
            kind: FailureKind::InvalidOutput(detail),
        });
        ErrorBody::new(ErrorCode::InvalidToolOutput, message)
    }

    /// A result beyond the output limits (found by the exact check, or while it was serialised), withheld: the
    /// operator hears what it exceeds, the model only that it was too large (`expected`: "at most 8388608 bytes").
    #[cold]
    pub(super) fn too_large(
        &self,
        def: &ToolDefinition,
        call_id: &str,
        exceeded: &dyn fmt::Display,
        expected: &str,
    ) -> ErrorBody {
        let detail = format!("the result exceeds the output limits: {exceeded}");
        let message = format!("the tool produced a result larger than allowed ({expected}); it was withheld");
        self.withheld(def, call_id, &detail, message)
    }

    #[cold]
    pub(super) fn error_body(&self, def: &ToolDefinition, call_id: &str, err: ToolError) -> ErrorBody {
        match err.repr {
            // A `ToolCode` is valid by construction: the tool's code and message reach the model as they are.
            Repr::Business { code, message, details } => {
                let body = ErrorBody::new(ErrorCode::Tool(code), message.into_owned());
                match details {
                    Some(d) => body.with_details(*d),
                    None => body,
                }
            }
            Repr::Internal(source) => {
                (self.inner.on_failure)(&InternalFailure {
                    call_id,
                    tool: def.name(),
                    kind: FailureKind::Error(&*source),
                });
                internal_body(call_id)
            }
            // The handler's own words for the model: what to change before calling again.
            Repr::Retry(reason) => ErrorBody::new(ErrorCode::Retry, reason.into_owned()),
            Repr::OutputLimit(exceeded) => self.too_large(def, call_id, &exceeded, &exceeded),
            Repr::ArgumentsMismatch(detail) => {
                tracing::warn!(
                    target: TARGET,
                    call_id,
                    tool_name = def.name(),
                    detail,
                    "arguments passed the schema but not deserialization"
                );
                ErrorBody::new(
                    ErrorCode::InvalidArguments,
                    "the arguments match the schema but could not be converted to the tool's parameters \
                     (a number may be out of range); check the values against the schema",
                )
            }
        }
    }
}
