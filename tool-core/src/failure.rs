//! [`InternalFailure`]: what the operator learns of a call that failed inside keel's boundary, through the

use std::fmt;
use std::sync::Arc;

/// [`InternalFailure`]: what the operator learns of a call that failed inside keel's boundary, through the
/// executor's hook ([`ExecutorBuilder::on_internal_failure`](crate::executor::ExecutorBuilder::on_internal_failure)).
///
/// The model only ever reads `tool_internal_error` (or `invalid_tool_output`) and the call id; everything else (the
/// error's whole source chain, a panic's text, the violations of a result) goes to the hook. The default hook emits
/// one `tracing` event at `ERROR` level (target `keel_tools_core::internal`) carrying the call id, the tool and the
/// detail, so a binary with a `tracing` subscriber sees every failure without configuring anything.
///
/// One internal failure of one call.
#[derive(Debug)]
pub struct InternalFailure<'a> {
    /// The call's id (the one the model was told the failure was logged under).
    pub call_id: &'a str,
    /// The tool's name.
    pub tool: &'a str,
    /// What happened.
    pub kind: FailureKind<'a>,
}

/// What went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum FailureKind<'a> {
    /// The handler returned an internal error (or an extractor failed); [`InternalFailure::chain`] walks its
    /// sources.
    Error(&'a (dyn std::error::Error + Send + Sync + 'static)),
    /// The handler panicked; the payload's text (`<non-string panic payload>` when it is not a string).
    Panic(&'a str),
    /// The result did not match the result schema (the violations, one per line) or exceeded the output limits.
    InvalidOutput(&'a str),
}

impl InternalFailure<'_> {
    /// The error and each of its sources, outermost first; the panic text or the violations otherwise.
    pub fn chain(&self) -> Vec<String> {
        match &self.kind {
            FailureKind::Error(e) => {
                let mut out = vec![e.to_string()];
                let mut next = e.source();
                while let Some(source) = next {
                    out.push(source.to_string());
                    next = source.source();
                }
                out
            }
            FailureKind::Panic(text) | FailureKind::InvalidOutput(text) => vec![(*text).to_owned()],
        }
    }

    /// `"error"`, `"panic"` or `"invalid_output"`.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            FailureKind::Error(_) => "error",
            FailureKind::Panic(_) => "panic",
            FailureKind::InvalidOutput(_) => "invalid_output",
        }
    }
}

impl fmt::Display for InternalFailure<'_> {
    /// `call <id> (tool <name>): <kind>: <chain joined by ": ">`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "call {:?} (tool `{}`): {}: {}", self.call_id, self.tool, self.kind_name(), self.chain().join(": "))
    }
}

/// The hook's type.
pub(crate) type FailureHook = Arc<dyn Fn(&InternalFailure<'_>) + Send + Sync>;

/// The default hook: one `tracing` event per failure.
pub(crate) fn trace_failure(failure: &InternalFailure<'_>) {
    tracing::error!(
        target: "keel_tools_core::internal",
        call_id = failure.call_id,
        tool_name = failure.tool,
        kind = failure.kind_name(),
        error = %failure.chain().join(": "),
        "tool call failed internally"
    );
}
