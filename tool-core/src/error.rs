//! [`ToolError`]: what a handler returns when it fails, and [`ErrorCode`]: every code a result can carry.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// Declares [`ErrorCode`]'s executor variants and [`RESERVED_CODES`] from one list, so that no code can be
/// forgotten in either.
macro_rules! executor_codes {
    ($($(#[$doc:meta])* $variant:ident => $wire:literal,)*) => {
        /// A result's error code: one the executor produces, or the tool's own.
        ///
        /// Serialised as its `snake_case` string, exactly as the model reads it.
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)*
            /// A code the tool chose (`not_found`, `card_not_found`, ...).
            Tool(ToolCode),
        }

        /// The codes only the executor produces. A tool cannot report one of them ([`ToolCode`] refuses them), so
        /// the model can always trust that, e.g., `unknown_tool` came from the executor.
        pub const RESERVED_CODES: &[&str] = &[$($wire),*];

        impl ErrorCode {
            /// Every executor code, in the order of the call's stops.
            pub const EXECUTOR: &[ErrorCode] = &[$(ErrorCode::$variant),*];

            /// The code as the model reads it.
            pub fn as_str(&self) -> &str {
                match self {
                    $(ErrorCode::$variant => $wire,)*
                    ErrorCode::Tool(code) => code.as_str(),
                }
            }

            /// The executor code spelled `s`, if it is one.
            pub fn executor(s: &str) -> Option<ErrorCode> {
                match s {
                    $($wire => Some(ErrorCode::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

executor_codes! {
    /// The call named no tool of the view.
    UnknownTool => "unknown_tool",
    /// The arguments do not match the schema the model was shown.
    InvalidArguments => "invalid_arguments",
    /// The policy wants an approval for these exact arguments.
    ApprovalRequired => "approval_required",
    /// The policy refused the call.
    PolicyDenied => "policy_denied",
    /// The caller was not granted a scope the tool needs ([`ToolDefinition::scopes`](crate::definition::ToolDefinition::scopes));
    /// the details name it.
    InsufficientScope => "insufficient_scope",
    /// The handler failed with an internal error (or panicked); the detail went to the operator.
    ToolInternalError => "tool_internal_error",
    /// The result does not match the result schema, or exceeds the output limits.
    InvalidToolOutput => "invalid_tool_output",
    /// The handler did not finish in time.
    Timeout => "timeout",
    /// The call was cancelled before the handler finished.
    Cancelled => "cancelled",
    /// A batch stopped before this call.
    NotExecuted => "not_executed",
    /// The handler asks the model to call again differently, and says why ([`ToolError::retry`]).
    Retry => "retry",
    /// A human denied the pending call ([`Resolution::Deny`](crate::runs::Resolution::Deny)); the message says why.
    ApprovalDenied => "approval_denied",
    /// The approval came after the pending call expired ([`PendingCall`](crate::runs::PendingCall)).
    ApprovalExpired => "approval_expired",
    /// The tool's version or contract changed after the pending call was made; it must be asked for again.
    ApprovalStale => "approval_stale",
    /// A call that runs once ([`crate::once`]) found the same call running, started by an earlier attempt, and
    /// did not run; the details give the key and when to ask again (`retry_after_ms`).
    InProgress => "in_progress",
    /// A call that runs once carried an idempotency key recorded for a call with other arguments; not run.
    IdempotencyConflict => "idempotency_conflict",
    /// A call that runs once could not read or claim its record in the effect ledger; not run.
    StateUnavailable => "state_unavailable",
}

impl ErrorCode {
    /// Reads a code: an executor code, else a valid tool code.
    pub fn parse(s: &str) -> Result<ErrorCode, InvalidToolCode> {
        match ErrorCode::executor(s) {
            Some(code) => Ok(code),
            None => ToolCode::parse(s.to_owned()).map(ErrorCode::Tool),
        }
    }

    /// Whether the executor produced this code.
    pub fn is_executor(&self) -> bool {
        !matches!(self, ErrorCode::Tool(_))
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for ErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<ErrorCode> for &str {
    fn eq(&self, other: &ErrorCode) -> bool {
        *self == other.as_str()
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ErrorCode, D::Error> {
        let s = Cow::<'de, str>::deserialize(deserializer)?;
        ErrorCode::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A tool's own error code: `snake_case` (`[a-z][a-z0-9_]*`), 1-64 characters, and none of [`RESERVED_CODES`].
///
/// Checked when it is made: at compile time through [`tool_error!`](crate::tool_error) or a `const`
/// ([`ToolCode::from_static`]), at construction through [`ToolCode::parse`]. A `ToolCode` is therefore always one
/// the model may see, and the executor never rewrites it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolCode(Cow<'static, str>);

/// Why a string is not a [`ToolCode`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidToolCode {
    code: String,
    reserved: bool,
}

impl fmt::Display for InvalidToolCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reserved {
            write!(
                f,
                "`{}` is reserved for the executor; give the tool's error its own code, e.g. `{}_failed`",
                self.code, self.code
            )
        } else {
            write!(
                f,
                "`{}` is not a tool error code: write snake_case, 1-64 characters of `a-z`, `0-9` and `_`, starting \
                 with a letter (e.g. `not_found`)",
                self.code.escape_debug()
            )
        }
    }
}

impl std::error::Error for InvalidToolCode {}

/// Whether two errors read the same, source by source: their messages, then their sources' messages, down to the
/// end of both chains. Errors have no equality of their own; keel's error types that keep the errors they come from
/// (a parser's, an I/O error) compare them with this in their `PartialEq`, and an error type of yours that keeps
/// keel's can do the same.
///
/// ```
/// use keel_tools_core::results::same_error;
///
/// let a = std::io::Error::other("disk full");
/// let b = std::io::Error::other("disk full");
/// assert!(same_error(&a, &b));
/// assert!(!same_error(&a, &std::io::Error::other("no such file")));
/// ```
pub fn same_error(a: &(dyn std::error::Error + 'static), b: &(dyn std::error::Error + 'static)) -> bool {
    let (mut a, mut b) = (Some(a), Some(b));
    loop {
        match (a, b) {
            (None, None) => return true,
            (Some(x), Some(y)) if x.to_string() == y.to_string() => (a, b) = (x.source(), y.source()),
            _ => return false,
        }
    }
}

/// `e` and its sources as one line, joined by `: `, each part once: a source whose text an earlier part already
/// holds is left out. For errors whose own text says little, such as an HTTP client's "error sending request",
/// whose causes say what happened.
///
/// ```
/// use keel_tools_core::results::error_chain;
///
/// let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
/// let e = std::io::Error::other(refused);
/// assert_eq!(error_chain(&e), "connection refused"); // the source's text is already the error's own
/// ```
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

/// The grammar and the reserved set, usable in `const` contexts.
const fn check_code(code: &str) -> Result<(), bool> {
    let b = code.as_bytes();
    if b.is_empty() || b.len() > 64 || !b[0].is_ascii_lowercase() {
        return Err(false);
    }
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_') {
            return Err(false);
        }
        i += 1;
    }
    let mut r = 0;
    while r < RESERVED_CODES.len() {
        if const_eq(RESERVED_CODES[r].as_bytes(), b) {
            return Err(true);
        }
        r += 1;
    }
    Ok(())
}

const fn const_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

impl ToolCode {
    /// A code known when the program is written. Use it in a `const` (or through
    /// [`tool_error!`](crate::tool_error)), where an invalid or reserved code is a compile error:
    ///
    /// ```
    /// use keel_tools_core::results::ToolCode;
    /// const NOT_FOUND: ToolCode = ToolCode::from_static("not_found");
    /// ```
    ///
    /// ```compile_fail
    /// use keel_tools_core::results::ToolCode;
    /// const TIMEOUT: ToolCode = ToolCode::from_static("timeout"); // reserved for the executor
    /// ```
    ///
    /// # Panics
    ///
    /// Outside a `const`, on an invalid code, like `http::HeaderName::from_static`. Codes computed at run time go
    /// through [`ToolCode::parse`].
    pub const fn from_static(code: &'static str) -> ToolCode {
        match check_code(code) {
            Ok(()) => ToolCode(Cow::Borrowed(code)),
            Err(true) => panic!("this tool error code is reserved for the executor; give the error its own code"),
            Err(false) => panic!("a tool error code is snake_case: 1-64 characters of a-z, 0-9 and _, e.g. not_found"),
        }
    }

    /// A code computed at run time (e.g. mapped from a remote server's error).
    pub fn parse(code: impl Into<Cow<'static, str>>) -> Result<ToolCode, InvalidToolCode> {
        let code = code.into();
        match check_code(&code) {
            Ok(()) => Ok(ToolCode(code)),
            Err(reserved) => Err(InvalidToolCode { code: code.into_owned(), reserved }),
        }
    }

    /// The code.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ToolCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// [`ToolError`]: what a handler returns when it fails, and [`ErrorCode`]: every code a result can carry.
///
/// Two kinds of failure, kept apart on purpose (a business failure and a bug need different owners):
///
/// - a **business error** the tool reports on purpose, `tool_error!("not_found", "no incident INC-9")`: its code
///   and message reach the model as they are;
/// - an **internal error**, anything else (`?` on an `std::error::Error`, [`ToolError::internal`], a panic): the
///   model sees only `tool_internal_error` and a generic message; the detail goes to the executor's internal-error
///   hook (by default a `tracing` event tagged with the call id).
///
/// A failure reported by a tool handler.
///
/// `ToolError` deliberately does not implement `std::error::Error`, so that any error type converts into it with
/// `?` (as an internal error) while business errors are built explicitly, with [`tool_error!`](crate::tool_error)
/// or [`ToolError::new`].
pub struct ToolError {
    pub(crate) repr: Repr,
    /// Raised before the handler ran (by an extractor or the argument conversion): the result says
    /// `executed: false`.
    pub(crate) before_handler: bool,
}

pub(crate) enum Repr {
    Business {
        code: ToolCode,
        message: Cow<'static, str>,
        /// Boxed: a `Value` is large (objects keep their key order), and a `ToolError` travels in every `Result`.
        details: Option<Box<Value>>,
    },
    Internal(Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The arguments passed the schema but did not deserialize into the handler's types.
    ArgumentsMismatch(String),
    /// The handler's result is beyond the output limits: what it exceeds (`at most 8388608 bytes`). Found while
    /// it was serialised, which stopped there.
    OutputLimit(String),
    /// A repair signal for the model, with its reason.
    Retry(Cow<'static, str>),
}

impl ToolError {
    /// A business error with the tool's own code and a message for the model.
    ///
    /// [`tool_error!`](crate::tool_error) is the short form for a literal code, checked at compile time.
    pub fn new(code: ToolCode, message: impl Into<Cow<'static, str>>) -> ToolError {
        ToolError { repr: Repr::Business { code, message: message.into(), details: None }, before_handler: false }
    }

    /// Attaches structured details (any JSON) to a business error. Ignored on internal errors.
    pub fn with_details(mut self, details: Value) -> ToolError {
        if let Repr::Business { details: d, .. } = &mut self.repr {
            *d = Some(Box::new(details));
        }
        self
    }

    /// An internal error: the model sees `tool_internal_error`; `err` (and its source chain) goes to the
    /// executor's internal-error hook only.
    pub fn internal(err: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> ToolError {
        ToolError { repr: Repr::Internal(err.into()), before_handler: false }
    }

    /// A repair signal: the call was understood but cannot be served as it is, and the model should call again
    /// differently, as `reason` says (a date in the past, an id that does not exist yet, a query too broad). The
    /// model reads `reason` as the message of a `retry` error; a run counts these per tool
    /// ([`RunState::retries`](crate::runs::RunState::retries)), with `invalid_arguments`, against
    /// [`StopPolicy::max_retries`](crate::runs::StopPolicy::max_retries).
    ///
    /// ```
    /// use keel_tools_core::ToolError;
    /// let e = ToolError::retry("the date is in the past; give a date from today on");
    /// assert_eq!(e.code(), "retry");
    /// ```
    pub fn retry(reason: impl Into<Cow<'static, str>>) -> ToolError {
        ToolError { repr: Repr::Retry(reason.into()), before_handler: false }
    }

    /// A result beyond the output limits, found as it was serialised (see `Repr::OutputLimit`).
    pub(crate) fn output_limit(exceeded: String) -> ToolError {
        ToolError { repr: Repr::OutputLimit(exceeded), before_handler: false }
    }

    #[doc(hidden)]
    pub fn arguments_mismatch(detail: impl fmt::Display) -> ToolError {
        ToolError { repr: Repr::ArgumentsMismatch(detail.to_string()), before_handler: true }
    }

    /// The same error, raised before the handler ran (by an extractor): the result says `executed: false`.
    #[doc(hidden)]
    pub fn before_handler(mut self) -> ToolError {
        self.before_handler = true;
        self
    }

    /// The code the model will see.
    pub fn code(&self) -> ErrorCode {
        match &self.repr {
            Repr::Business { code, .. } => ErrorCode::Tool(code.clone()),
            Repr::Internal(_) => ErrorCode::ToolInternalError,
            Repr::ArgumentsMismatch(_) => ErrorCode::InvalidArguments,
            Repr::OutputLimit(_) => ErrorCode::InvalidToolOutput,
            Repr::Retry(_) => ErrorCode::Retry,
        }
    }

    /// Whether this is a business error the tool reported on purpose.
    pub fn is_business(&self) -> bool {
        matches!(self.repr, Repr::Business { .. })
    }
}

/// A business error with a literal code checked at compile time, and a message (with `format!` arguments):
///
/// ```
/// use keel_tools_core::{tool_error, ToolError};
/// fn missing(id: &str) -> ToolError {
///     tool_error!("incident_not_found", "there is no incident {id}")
/// }
/// assert_eq!(missing("INC-9").code(), "incident_not_found");
/// ```
///
/// A reserved or malformed code does not compile:
///
/// ```compile_fail
/// let e = keel_tools_core::tool_error!("timeout", "too slow");
/// ```
#[macro_export]
macro_rules! tool_error {
    ($code:literal, $($message:tt)+) => {
        $crate::ToolError::new(
            { const CODE: $crate::results::ToolCode = $crate::results::ToolCode::from_static($code); CODE },
            ::std::format!($($message)+),
        )
    };
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ToolError {
    fn from(err: E) -> ToolError {
        ToolError::internal(err)
    }
}

impl fmt::Debug for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Business { code, message, details } => f
                .debug_struct("ToolError")
                .field("code", code)
                .field("message", message)
                .field("details", details)
                .finish(),
            Repr::Internal(e) => f.debug_tuple("ToolError::Internal").field(e).finish(),
            Repr::ArgumentsMismatch(d) => f.debug_tuple("ToolError::ArgumentsMismatch").field(d).finish(),
            Repr::OutputLimit(d) => f.debug_tuple("ToolError::OutputLimit").field(d).finish(),
            Repr::Retry(r) => f.debug_tuple("ToolError::Retry").field(r).finish(),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Business { code, message, .. } => write!(f, "{code}: {message}"),
            Repr::Internal(e) => write!(f, "tool_internal_error: {e}"),
            Repr::ArgumentsMismatch(d) => write!(f, "invalid_arguments: {d}"),
            Repr::OutputLimit(d) => write!(f, "invalid_tool_output: the result exceeds the output limits ({d})"),
            Repr::Retry(r) => write!(f, "retry: {r}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_executor_code_is_reserved_and_reads_back() {
        assert_eq!(ErrorCode::EXECUTOR.len(), RESERVED_CODES.len());
        for (code, wire) in ErrorCode::EXECUTOR.iter().zip(RESERVED_CODES) {
            assert_eq!(code.as_str(), *wire);
            assert_eq!(ErrorCode::parse(wire).as_ref(), Ok(code));
            assert!(ToolCode::parse(*wire).unwrap_err().reserved, "{wire}");
            assert_eq!(serde_json::to_value(code).unwrap(), Value::String((*wire).to_owned()));
        }
        assert!(RESERVED_CODES.contains(&"policy_denied"));
    }

    #[test]
    fn tool_codes_are_checked_when_made() {
        assert_eq!(ToolCode::parse("not_found").unwrap().as_str(), "not_found");
        for bad in ["", "NotFound", "not-found", "9lives", "timeout", "policy_denied", &"a".repeat(65)] {
            assert!(ToolCode::parse(bad.to_owned()).is_err(), "{bad:?}");
        }
        let e = ToolCode::parse("timeout").unwrap_err();
        assert!(e.to_string().contains("reserved"), "{e}");
        let e = ToolCode::parse("NotFound").unwrap_err();
        assert!(e.to_string().contains("snake_case"), "{e}");
        assert_eq!(
            ErrorCode::parse("card_not_found").unwrap(),
            ErrorCode::Tool(ToolCode::from_static("card_not_found"))
        );
        assert!(ErrorCode::parse("Bad Code").is_err());
    }

    #[test]
    fn tool_error_macro_keeps_code_and_message() {
        let e = crate::tool_error!("not_found", "no incident {}", 9);
        assert_eq!(e.code(), "not_found");
        assert!(e.is_business());
        assert_eq!(e.to_string(), "not_found: no incident 9");
    }
}
