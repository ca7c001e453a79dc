//! [`ToolResult`]: what the executor answers for one call.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::ErrorCode;

/// [`ToolResult`]: what the executor answers for one call. Each provider's reply to it is written by that
/// provider's [`Codec`](crate::Codec).
///
/// The JSON form is stable and has every key, always:
///
/// ```json
/// {"call_id": "call_1", "tool_name": "add", "tool_version": "1.0.0", "ok": true, "executed": true,
///  "data": {"sum": 5}, "error": null}
/// ```
///
/// The text the model reads (the `content` of every codec's reply) is the JSON of `data` on success and of
/// `{"error": {"code", "message", "details"}}` on failure.
///
/// The outcome of one tool call: who answered, and either the tool's data or an error, by construction.
///
/// Serialised with every key, in this order: `call_id`, `tool_name`, `tool_version`, `ok`, `executed`, `data`,
/// `error` (`data` is `null` on failure and `error` is `null` on success); a replayed result has `replayed: true`
/// after `executed`, and no other has the key.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// The tool's name (as registered; as the model wrote it, shortened, when the tool is unknown).
    pub tool_name: String,
    /// The tool's version; `null` when the tool is unknown. Borrowed from the tool's definition when it was
    /// compiled in (no copy per call).
    pub tool_version: Option<Cow<'static, str>>,
    /// Whether the handler ran: `false` for rejections before it (unknown tool, invalid arguments, approval, an
    /// extractor's refusal).
    pub executed: bool,
    /// Whether this is the recorded result of an earlier run of the same call, answered without running the
    /// handler again (a tool that runs once: see [`crate::once`]). A replayed result is never `executed`.
    pub replayed: bool,
    /// The data or the error.
    pub outcome: Outcome,
}

/// What a call produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The tool's output (valid against its result schema, when it declares one).
    Data(Value),
    /// Why the call failed.
    Error(ErrorBody),
}

/// A failure as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Stable `snake_case` code: `unknown_tool`, `invalid_arguments`, `approval_required`, the tool's own codes,
    /// `tool_internal_error`, `invalid_tool_output`, `timeout`.
    pub code: ErrorCode,
    /// A message for the model.
    pub message: String,
    /// Structured details (e.g. the violations of `invalid_arguments`), or `null`.
    pub details: Option<Value>,
}

impl ErrorBody {
    /// An error without details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorBody {
        ErrorBody { code, message: message.into(), details: None }
    }

    /// Sets the details.
    pub fn with_details(mut self, details: Value) -> ErrorBody {
        self.details = Some(details);
        self
    }
}

/// Where a handler stood when its call was answered without its result: a `timeout` (the deadline and the grace
/// period after it passed) or a `cancelled` (the caller gave up). It is the `handler` of the error's details, next
/// to the call's `idempotency_key` (see [`CallContext::idempotency_key`](crate::CallContext::idempotency_key)), and
/// [`ToolResult::handler_state`] reads it.
///
/// | state | `executed` | what it means for the tool's effects |
/// |---|---|---|
/// | `not_started` | `false` | none happened, none will: a blocking handler still waiting for a thread never starts |
/// | `running` | `true` | some may have happened and more may still happen: the handler keeps running after the answer (its context is cancelled, so a handler that watches it can stop at a point of its choosing) |
/// | `finished` | `true` | all of them happened: the handler ran to the end, past the deadline and the grace period, and its result was withheld |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandlerState {
    /// It never started, and never will.
    NotStarted,
    /// It started, and may still be running.
    Running,
    /// It ran to the end, too late.
    Finished,
}

impl HandlerState {
    /// `not_started`, `running` or `finished`.
    pub fn as_str(self) -> &'static str {
        match self {
            HandlerState::NotStarted => "not_started",
            HandlerState::Running => "running",
            HandlerState::Finished => "finished",
        }
    }

    /// Whether the handler ran (the result's `executed`).
    pub fn executed(self) -> bool {
        self != HandlerState::NotStarted
    }
}

/// `{"error": <ErrorBody>}` without cloning the body.
#[derive(Serialize)]
struct ErrorEnvelope<'a> {
    error: Option<&'a ErrorBody>,
}

impl ToolResult {
    /// A successful call: `executed` is `true`.
    pub fn success(
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
        tool_version: Option<Cow<'static, str>>,
        data: Value,
    ) -> ToolResult {
        ToolResult {
            call_id: call_id.into(),
            tool_name: tool_name.into(),
            tool_version,
            executed: true,
            replayed: false,
            outcome: Outcome::Data(data),
        }
    }

    /// A failed call. `executed` says whether the handler ran.
    pub fn failure(
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
        tool_version: Option<Cow<'static, str>>,
        executed: bool,
        error: ErrorBody,
    ) -> ToolResult {
        ToolResult {
            call_id: call_id.into(),
            tool_name: tool_name.into(),
            tool_version,
            executed,
            replayed: false,
            outcome: Outcome::Error(error),
        }
    }

    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        matches!(self.outcome, Outcome::Data(_))
    }

    /// The tool's data, if the call succeeded.
    pub fn data(&self) -> Option<&Value> {
        match &self.outcome {
            Outcome::Data(v) => Some(v),
            Outcome::Error(_) => None,
        }
    }

    /// The error, if the call failed.
    pub fn error(&self) -> Option<&ErrorBody> {
        match &self.outcome {
            Outcome::Data(_) => None,
            Outcome::Error(e) => Some(e),
        }
    }

    /// Where the handler stood when the call was answered without its result: for a `timeout` or `cancelled`
    /// result, the `handler` of its details ([`HandlerState`]); `None` for every other result.
    pub fn handler_state(&self) -> Option<HandlerState> {
        let error = self.error()?;
        if !matches!(error.code, ErrorCode::Timeout | ErrorCode::Cancelled) {
            return None;
        }
        serde_json::from_value(error.details.as_ref()?.get("handler")?.clone()).ok()
    }

    /// The data, or the error.
    pub fn into_result(self) -> Result<Value, ErrorBody> {
        match self.outcome {
            Outcome::Data(v) => Ok(v),
            Outcome::Error(e) => Err(e),
        }
    }

    /// The error code, if the call failed.
    pub fn code(&self) -> Option<&str> {
        self.error().map(|e| e.code.as_str())
    }

    /// The stable JSON form, every key present.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("call_id".into(), Value::String(self.call_id.clone()));
        m.insert("tool_name".into(), Value::String(self.tool_name.clone()));
        m.insert(
            "tool_version".into(),
            self.tool_version.as_deref().map_or(Value::Null, |v| Value::String(v.to_owned())),
        );
        m.insert("ok".into(), Value::Bool(self.is_ok()));
        m.insert("executed".into(), Value::Bool(self.executed));
        if self.replayed {
            m.insert("replayed".into(), Value::Bool(true));
        }
        m.insert("data".into(), self.data().cloned().unwrap_or(Value::Null));
        m.insert("error".into(), self.error().map_or(Value::Null, error_body_json));
        Value::Object(m)
    }

    /// The text the model reads: the JSON of `data` on success (`null` if there is none), of
    /// `{"error": {"code", "message", "details"}}` on failure. Written as `serde_json` writes it.
    pub fn content_text(&self) -> String {
        let text = match &self.outcome {
            Outcome::Data(data) => serde_json::to_string(data),
            Outcome::Error(error) => serde_json::to_string(&ErrorEnvelope { error: Some(error) }),
        };
        // Serializing a `Value` or plain strings cannot fail.
        text.unwrap_or_else(|_| "null".to_owned())
    }
}

/// The serialised form, borrowed.
#[derive(Serialize)]
struct WireRef<'a> {
    call_id: &'a str,
    tool_name: &'a str,
    tool_version: Option<&'a str>,
    ok: bool,
    executed: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    replayed: bool,
    data: Option<&'a Value>,
    error: Option<&'a ErrorBody>,
}

impl Serialize for ToolResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        WireRef {
            call_id: &self.call_id,
            tool_name: &self.tool_name,
            tool_version: self.tool_version.as_deref(),
            ok: self.is_ok(),
            executed: self.executed,
            replayed: self.replayed,
            data: self.data(),
            error: self.error(),
        }
        .serialize(serializer)
    }
}

/// The serialised form, owned.
#[derive(Deserialize)]
struct Wire {
    call_id: String,
    tool_name: String,
    tool_version: Option<String>,
    ok: bool,
    executed: bool,
    #[serde(default)]
    replayed: bool,
    #[serde(default)]
    data: Option<Value>,
    #[serde(default)]
    error: Option<ErrorBody>,
}

impl<'de> Deserialize<'de> for ToolResult {
    /// Refuses a result that is neither data nor an error: `ok` with an error, or a failure without one.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<ToolResult, D::Error> {
        let w = Wire::deserialize(deserializer)?;
        let outcome = match (w.ok, w.error) {
            (true, None) => Outcome::Data(w.data.unwrap_or(Value::Null)),
            (false, Some(error)) if w.data.is_none() => Outcome::Error(error),
            (true, Some(_)) => return Err(serde::de::Error::custom("a result with `ok: true` has `error: null`")),
            (false, Some(_)) => return Err(serde::de::Error::custom("a failed result has `data: null`")),
            (false, None) => return Err(serde::de::Error::custom("a result with `ok: false` has an `error`")),
        };
        Ok(ToolResult {
            call_id: w.call_id,
            tool_name: w.tool_name,
            tool_version: w.tool_version.map(Cow::Owned),
            executed: w.executed,
            replayed: w.replayed,
            outcome,
        })
    }
}

pub(crate) fn error_body_json(e: &ErrorBody) -> Value {
    json!({
        "code": e.code,
        "message": e.message,
        "details": e.details.clone().unwrap_or(Value::Null),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A success with a version (also the codecs' fixture).
    pub(crate) fn ok() -> ToolResult {
        ToolResult::success("call_1", "add", Some("1.0.0".into()), json!({"sum": 5}))
    }

    /// A failure with details (also the codecs' fixture).
    pub(crate) fn failed() -> ToolResult {
        ToolResult::failure(
            "call_2",
            "delete_incident",
            Some("2.1.0".into()),
            false,
            ErrorBody::new(ErrorCode::ApprovalRequired, "needs approval")
                .with_details(json!({"effect": "destructive"})),
        )
    }

    fn unknown() -> ToolResult {
        ToolResult::failure("c3", "nope", None, false, ErrorBody::new(ErrorCode::UnknownTool, "no tool named \"nope\""))
    }

    const ERR_TEXT: &str =
        r#"{"error":{"code":"approval_required","message":"needs approval","details":{"effect":"destructive"}}}"#;

    #[test]
    fn constructors() {
        let r = ok();
        assert!(r.is_ok() && r.executed);
        assert_eq!(r.data(), Some(&json!({"sum": 5})));
        assert_eq!(r.error(), None);
        assert_eq!(r.code(), None);
        let r = failed();
        assert!(!r.is_ok() && !r.executed);
        assert_eq!(r.data(), None);
        assert_eq!(r.code(), Some("approval_required"));
        let r = ToolResult::failure("c", "t", None, true, ErrorBody::new(ErrorCode::Timeout, "too slow"));
        assert!(r.executed);
        assert_eq!(r.error().unwrap().details, None);
    }

    #[test]
    fn stable_json_form_has_every_key() {
        let expected = json!({
            "call_id": "call_1", "tool_name": "add", "tool_version": "1.0.0",
            "ok": true, "executed": true, "data": {"sum": 5}, "error": null
        });
        assert_eq!(ok().to_json(), expected);
        assert_eq!(serde_json::to_value(ok()).unwrap(), expected);
        assert_eq!(
            serde_json::to_string(&unknown()).unwrap(),
            r#"{"call_id":"c3","tool_name":"nope","tool_version":null,"ok":false,"executed":false,"data":null,"error":{"code":"unknown_tool","message":"no tool named \"nope\"","details":null}}"#
        );
        assert_eq!(unknown().to_json(), serde_json::to_value(unknown()).unwrap());
        assert_eq!(failed().to_json(), serde_json::to_value(failed()).unwrap());
        // Round trip.
        for r in [ok(), failed(), unknown()] {
            let back: ToolResult = serde_json::from_value(r.to_json()).unwrap();
            assert_eq!(back, r);
        }
    }

    #[test]
    fn a_result_that_is_neither_data_nor_an_error_does_not_deserialize() {
        let base = json!({"call_id": "c", "tool_name": "t", "tool_version": null, "executed": true});
        for (ok, data, error) in [
            (true, json!(1), json!({"code": "not_found", "message": "m", "details": null})),
            (false, Value::Null, Value::Null),
            (false, json!(1), json!({"code": "not_found", "message": "m", "details": null})),
        ] {
            let mut v = base.clone();
            v["ok"] = json!(ok);
            v["data"] = data;
            v["error"] = error;
            assert!(serde_json::from_value::<ToolResult>(v.clone()).is_err(), "{v}");
        }
        let mut v = base.clone();
        v["ok"] = json!(false);
        v["data"] = Value::Null;
        v["error"] = json!({"code": "Not A Code", "message": "m", "details": null});
        assert!(serde_json::from_value::<ToolResult>(v).is_err(), "an invalid code is refused");
    }

    #[test]
    fn content_text() {
        assert_eq!(ok().content_text(), r#"{"sum":5}"#);
        assert_eq!(failed().content_text(), ERR_TEXT);
        let r = ToolResult::success("c", "t", None, json!("plain"));
        assert_eq!(r.content_text(), r#""plain""#);
        let r = ToolResult::success("c", "t", None, Value::Null);
        assert_eq!(r.content_text(), "null");
    }

    #[test]
    fn error_details_null_is_rendered() {
        assert_eq!(
            unknown().content_text(),
            r#"{"error":{"code":"unknown_tool","message":"no tool named \"nope\"","details":null}}"#
        );
    }
}
