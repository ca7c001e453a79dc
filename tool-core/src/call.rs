//! [`ToolCall`]: one tool call as a model produced it, its arguments read from JSON text or an object.

use std::fmt;
use std::io::Write as _;
use std::sync::Arc;

use serde_json::{Map, Value};

use keel_tools_schema::Limits;
use keel_tools_schema::canonical::{Fnv1a, write_canonical};

/// Why a call's arguments cannot be used: they are not a JSON object. The message is meant for the model; the JSON
/// parser's own error, when the text was not JSON, is the [`source`](std::error::Error::source), for the operator.
/// Two errors are equal when their messages are.
#[derive(Debug, Clone)]
pub struct ArgumentsError {
    /// What is wrong, e.g. `arguments must be a JSON object; found array`.
    pub message: String,
    source: Option<Arc<serde_json::Error>>,
}

impl PartialEq for ArgumentsError {
    fn eq(&self, other: &ArgumentsError) -> bool {
        self.message == other.message
    }
}

impl Eq for ArgumentsError {}

impl ArgumentsError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> ArgumentsError {
        ArgumentsError { message: message.into(), source: None }
    }

    fn parsing(message: String, source: serde_json::Error) -> ArgumentsError {
        ArgumentsError { message, source: Some(Arc::new(source)) }
    }

    /// `arguments must be a JSON object; found <type>`.
    pub fn not_an_object(found: &Value) -> ArgumentsError {
        ArgumentsError::new(format!(
            "arguments must be a JSON object; found {}",
            keel_tools_schema::vocabulary::json_type(found)
        ))
    }

    fn missing() -> ArgumentsError {
        ArgumentsError::new("arguments must be a JSON object; found no arguments")
    }
}

impl fmt::Display for ArgumentsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ArgumentsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// [`ToolCall`]: one tool call as a model produced it. Each provider's call items are read by its
/// [`Codec`](crate::Codec), which maps wire names back through a view; the constructors here take the parts.
///
/// Everything here is untrusted input. The constructors (and the codecs) never fail and never panic on a JSON value: what cannot be
/// read becomes something the executor answers cleanly:
///
/// - a missing or non-string name becomes the empty name (the executor answers `unknown_tool`);
/// - arguments that are not a JSON object become an [`ArgumentsError`] (the executor answers `invalid_arguments`
///   with its message, which never contains parser text);
/// - a missing id becomes a stable, generated one (see [`ToolCall::generated_id`]).
///
/// One tool call: its id, the tool name the model used, and its arguments (a JSON object) or why they are unusable.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    id: String,
    name: String,
    arguments: Result<Value, ArgumentsError>,
}

impl ToolCall {
    /// A call with already-parsed arguments. Arguments that are not a JSON object are kept as an
    /// [`ArgumentsError`], exactly as the codecs do.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> ToolCall {
        ToolCall { id: id.into(), name: name.into(), arguments: require_object(arguments) }
    }

    /// A call from its parts, arguments error included.
    pub fn from_parts(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: Result<Value, ArgumentsError>,
    ) -> ToolCall {
        ToolCall { id: id.into(), name: name.into(), arguments: arguments.and_then(require_object) }
    }

    /// A call whose arguments arrive as JSON text (OpenAI style).
    ///
    /// - Text that is not JSON, or JSON followed by anything but whitespace, becomes an [`ArgumentsError`] saying the
    ///   arguments are not a JSON object, with a line/column hint but no parser message.
    /// - Nesting deeper than 128 levels is refused by the parser (`serde_json`'s recursion limit), so hostile text
    ///   cannot overflow the stack.
    /// - Text that is empty or only whitespace means "no arguments" and reads as `{}`: some servers send `""` for a
    ///   tool without parameters. A tool with required parameters then answers `invalid_arguments` naming them.
    /// - Text beyond [`Limits::DEFAULT`] (1 MiB, nesting 64) is refused before it is parsed; see
    ///   [`ToolCall::from_json_text_with_limits`].
    pub fn from_json_text(id: impl Into<String>, name: impl Into<String>, text: &str) -> ToolCall {
        ToolCall::from_json_text_with_limits(id, name, text, &Limits::DEFAULT)
    }

    /// [`ToolCall::from_json_text`], refusing text beyond `limits` before anything is parsed or allocated: text
    /// longer than `max_bytes` (measured as sent, whitespace included), or nesting arrays and objects deeper than
    /// `max_depth` (one pass over the bytes, strings skipped), is an [`ArgumentsError`] saying which limit, and the
    /// executor answers it `invalid_arguments`. Give the executor's limits
    /// ([`Executor::limits`](crate::Executor::limits)) so that text and value are held to the same bounds.
    pub fn from_json_text_with_limits(
        id: impl Into<String>,
        name: impl Into<String>,
        text: &str,
        limits: &Limits,
    ) -> ToolCall {
        ToolCall { id: id.into(), name: name.into(), arguments: parse_arguments(text, limits) }
    }

    /// The call id, echoed in the result.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The tool name as the model wrote it (possibly empty, possibly a provider wire name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The arguments object, or why there is none.
    pub fn arguments(&self) -> Result<&Value, &ArgumentsError> {
        self.arguments.as_ref()
    }

    /// The arguments object, or why there is none, without cloning.
    pub fn into_arguments(self) -> Result<Value, ArgumentsError> {
        self.arguments
    }

    /// `(id, name, arguments)`.
    pub fn into_parts(self) -> (String, String, Result<Value, ArgumentsError>) {
        (self.id, self.name, self.arguments)
    }

    /// The id given to a call that arrived without one: `call_<index>_<8 lowercase hex digits>`, deterministic
    /// across runs and platforms (see [`ToolCall::is_generated_id`]).
    pub fn generated_id(index: usize, name: &str, arguments: Option<&Value>) -> String {
        generated_call_id(index, name, arguments)
    }

    /// Whether `id` has the form of a [`ToolCall::generated_id`].
    pub fn is_generated_id(id: &str) -> bool {
        is_generated_call_id(id)
    }
}

/// The id given to a call that arrived without one: `call_<index>_<8 lowercase hex digits>`.
///
/// The hex digits are the 64-bit FNV-1a hash (folded to 32 bits) of the index, the name and the canonical JSON
/// ([`keel_tools_schema::canonical`]) of the arguments (or of `null` when the arguments were unusable). Deterministic across
/// runs and platforms: replaying a conversation reproduces the ids.
pub(crate) fn generated_call_id(index: usize, name: &str, arguments: Option<&Value>) -> String {
    let mut h = Fnv1a::new();
    let _ = write!(h, "{index}");
    h.update(&[0]);
    h.update(name.as_bytes());
    h.update(&[0]);
    let _ = write_canonical(arguments.unwrap_or(&Value::Null), &mut h);
    let x = h.finish();
    format!("call_{index}_{:08x}", (x ^ (x >> 32)) as u32)
}

/// Whether `id` has the form of a [`ToolCall::generated_id`]: `call_`, decimal digits, `_`, exactly 8 lowercase hex
/// digits. Provider ids do not have this form (OpenAI's `call_` ids have no second underscore).
pub(crate) fn is_generated_call_id(id: &str) -> bool {
    let Some(rest) = id.strip_prefix("call_") else { return false };
    let Some((index, hex)) = rest.split_once('_') else { return false };
    !index.is_empty()
        && index.bytes().all(|b| b.is_ascii_digit())
        && hex.len() == 8
        && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn require_object(v: Value) -> Result<Value, ArgumentsError> {
    if v.is_object() { Ok(v) } else { Err(ArgumentsError::not_an_object(&v)) }
}

/// An object value, cloned (the provider message is borrowed); missing arguments are an error.
pub(crate) fn object_arguments(v: Option<&Value>) -> Result<Value, ArgumentsError> {
    match v {
        Some(v) if v.is_object() => Ok(v.clone()),
        Some(v) => Err(ArgumentsError::not_an_object(v)),
        None => Err(ArgumentsError::missing()),
    }
}

/// An object value, cloned; missing or `null` reads as `{}` (providers that omit the arguments of a call without
/// parameters).
pub(crate) fn object_or_null_arguments(v: Option<&Value>) -> Result<Value, ArgumentsError> {
    match v {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        v => object_arguments(v),
    }
}

/// JSON text (parsed as in [`ToolCall::from_json_text`]) or an object; missing arguments are an error.
pub(crate) fn text_or_object_arguments(v: Option<&Value>, limits: &Limits) -> Result<Value, ArgumentsError> {
    match v {
        Some(Value::String(text)) => parse_arguments(text, limits),
        v => object_arguments(v),
    }
}

/// Refuses `text` beyond `limits` without parsing it: its length first, then its nesting, in one pass over the
/// bytes that allocates nothing (brackets inside strings do not count).
fn check_text_limits(text: &str, limits: &Limits) -> Result<(), ArgumentsError> {
    if text.len() > limits.max_bytes {
        return Err(ArgumentsError::new(format!(
            "the arguments are {} bytes of text, over the limit of {} bytes; send smaller arguments",
            text.len(),
            limits.max_bytes
        )));
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (at, &b) in text.as_bytes().iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limits.max_depth {
                    return Err(ArgumentsError::new(format!(
                        "the arguments nest arrays and objects deeper than {} levels (at byte {at}); send flatter \
                         arguments",
                        limits.max_depth
                    )));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

fn parse_arguments(text: &str, limits: &Limits) -> Result<Value, ArgumentsError> {
    if text.trim_ascii().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    check_text_limits(text, limits)?;
    let mut de = serde_json::Deserializer::from_str(text);
    // `Deserializer` keeps its default recursion limit (128): deeper text is an error, not a stack overflow.
    let value = match serde::de::DeserializeSeed::deserialize(UniqueKeys, &mut de) {
        Ok(v) => v,
        Err(e) if e.to_string().starts_with(DUPLICATE_KEY) => {
            let message = format!(
                "arguments must be a JSON object whose keys appear once; a key is repeated (line {}, column {})",
                e.line(),
                e.column()
            );
            return Err(ArgumentsError::parsing(message, e));
        }
        Err(e) => {
            let message = format!(
                "arguments must be a JSON object; the text is not valid JSON (line {}, column {})",
                e.line(),
                e.column()
            );
            return Err(ArgumentsError::parsing(message, e));
        }
    };
    if let Err(e) = de.end() {
        let message = format!(
            "arguments must be a JSON object; the text continues after the JSON value (line {}, column {})",
            e.line(),
            e.column()
        );
        return Err(ArgumentsError::parsing(message, e));
    }
    require_object(value)
}

const DUPLICATE_KEY: &str = "duplicate key";

/// Builds a `Value` like `Value::deserialize`, but refuses an object that repeats a key: parsers disagree on which
/// repetition wins, so accepting one would let the text mean different things to different readers.
struct UniqueKeys;

impl<'de> serde::de::DeserializeSeed<'de> for UniqueKeys {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(UniqueKeys)
    }
}

impl<'de> serde::de::Visitor<'de> for UniqueKeys {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(v) = seq.next_element_seed(UniqueKeys)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(DUPLICATE_KEY));
            }
            let value = map.next_value_seed(UniqueKeys)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// The provider's id when it is a non-empty string (or a number, as some compatible servers send), else generated.
pub(crate) fn id_or_generated(
    id: Option<&Value>,
    index: usize,
    name: &str,
    arguments: &Result<Value, ArgumentsError>,
) -> String {
    match id {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => generated_call_id(index, name, arguments.as_ref().ok()),
    }
}

#[cfg(test)]
mod unique_key_tests {
    use super::*;

    #[test]
    fn repeated_keys_are_refused_at_any_depth() {
        for text in [r#"{"a": 1, "a": 2}"#, r#"{"o": {"b": 1, "b": 1}}"#, r#"{"l": [{"c": 1, "c": 2}]}"#] {
            let call = ToolCall::from_json_text("c", "t", text);
            let err = call.arguments().unwrap_err();
            assert!(err.message.contains("a key is repeated"), "{text}: {}", err.message);
        }
        let ok = ToolCall::from_json_text("c", "t", r#"{"a": 1, "o": {"a": 2}, "l": [1, 2.5, null, true, "s"]}"#);
        assert_eq!(ok.arguments().unwrap()["l"], serde_json::json!([1, 2.5, null, true, "s"]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(call: &ToolCall) -> String {
        call.arguments().expect_err("arguments error").to_string()
    }

    #[test]
    fn text_that_is_not_json_keeps_the_parser_error_as_source() {
        use std::error::Error as _;
        for text in ["{\"a\": ", "{\"a\": 1, \"a\": 2}", "{} []"] {
            let call = ToolCall::from_json_text("c1", "add", text);
            let e = call.arguments().expect_err(text);
            assert!(e.source().is_some_and(|s| s.is::<serde_json::Error>()), "{text}: {e:?}");
            assert!(!e.message.contains("EOF") && !e.message.contains("duplicate field"), "{e}");
        }
        let e = ToolCall::new("c2", "add", json!([1])).into_arguments().unwrap_err();
        assert!(e.source().is_none());
        assert_eq!(e, ArgumentsError::new(e.message.clone()), "equal by message");
    }

    #[test]
    fn new_and_accessors() {
        let call = ToolCall::new("c1", "add", json!({"a": 1}));
        assert_eq!(call.id(), "c1");
        assert_eq!(call.name(), "add");
        assert_eq!(call.arguments(), Ok(&json!({"a": 1})));
        assert_eq!(call.clone().into_arguments(), Ok(json!({"a": 1})));
        assert_eq!(call.into_parts(), ("c1".to_owned(), "add".to_owned(), Ok(json!({"a": 1}))));
        let call = ToolCall::new("c2", "add", json!([1, 2]));
        assert_eq!(err(&call), "arguments must be a JSON object; found array");
        let call = ToolCall::from_parts("c3", "x", Err(ArgumentsError::new("nope")));
        assert_eq!(err(&call), "nope");
        let call = ToolCall::from_parts("c4", "x", Ok(json!("s")));
        assert_eq!(err(&call), "arguments must be a JSON object; found string");
    }

    #[test]
    fn json_text_object() {
        let call = ToolCall::from_json_text("c", "t", " {\"a\": [1, {\"b\": null}]}\n ");
        assert_eq!(call.arguments(), Ok(&json!({"a": [1, {"b": null}]})));
    }

    #[test]
    fn json_text_not_json() {
        let call = ToolCall::from_json_text("c", "t", "{a: 1}");
        assert_eq!(err(&call), "arguments must be a JSON object; the text is not valid JSON (line 1, column 2)");
        let call = ToolCall::from_json_text("c", "t", "{\"a\": 1");
        assert!(err(&call).starts_with("arguments must be a JSON object; the text is not valid JSON"));
        let call = ToolCall::from_json_text("c", "t", "I will call the tool now");
        assert!(err(&call).starts_with("arguments must be a JSON object; the text is not valid JSON"));
    }

    #[test]
    fn json_text_trailing_garbage() {
        let call = ToolCall::from_json_text("c", "t", "{\"a\": 1} {\"b\": 2}");
        assert_eq!(
            err(&call),
            "arguments must be a JSON object; the text continues after the JSON value (line 1, column 10)"
        );
        let call = ToolCall::from_json_text("c", "t", "{\"a\": 1}```");
        assert!(err(&call).contains("continues after the JSON value"));
    }

    #[test]
    fn json_text_not_an_object() {
        for (text, found) in
            [("[1]", "array"), ("null", "null"), ("\"{}\"", "string"), ("42", "number"), ("true", "boolean")]
        {
            let call = ToolCall::from_json_text("c", "t", text);
            assert_eq!(err(&call), format!("arguments must be a JSON object; found {found}"));
        }
    }

    #[test]
    fn json_text_empty_means_no_arguments() {
        assert_eq!(ToolCall::from_json_text("c", "t", "").arguments(), Ok(&json!({})));
        assert_eq!(ToolCall::from_json_text("c", "t", " \n").arguments(), Ok(&json!({})));
    }

    #[test]
    fn json_text_deep_nesting_is_an_error_not_a_crash() {
        let text = format!("{{\"a\":{}1{}}}", "[".repeat(100_000), "]".repeat(100_000));
        let call = ToolCall::from_json_text("c", "t", &text);
        assert!(
            err(&call).starts_with("the arguments nest arrays and objects deeper than 64 levels"),
            "{}",
            err(&call)
        );
        // With a looser limit the parser's own recursion limit (128) still keeps the stack safe.
        let loose = Limits { max_depth: usize::MAX, max_bytes: usize::MAX };
        let call = ToolCall::from_json_text_with_limits("c", "t", &text, &loose);
        assert!(err(&call).starts_with("arguments must be a JSON object; the text is not valid JSON"));
        // Within the limit it parses.
        let text = format!("{{\"a\":{}1{}}}", "[".repeat(63), "]".repeat(63));
        assert!(ToolCall::from_json_text("c", "t", &text).arguments().is_ok());
    }

    #[test]
    fn json_text_errors_carry_no_parser_text() {
        for text in ["{\"a\": tru}", "{\"a\"", "\u{0}", "{\"a\": 1,}", "{'a': 1}"] {
            let msg = err(&ToolCall::from_json_text("c", "t", text));
            for leak in ["expected", "EOF", "serde", "Error", "trailing"] {
                assert!(!msg.contains(leak), "{msg}");
            }
        }
    }

    #[test]
    fn generated_id_form() {
        assert!(is_generated_call_id("call_0_0123abcd"));
        assert!(is_generated_call_id("call_12_ffffffff"));
        assert!(!is_generated_call_id("call_0_0123ABCD"));
        assert!(!is_generated_call_id("call_0_0123abc"));
        assert!(!is_generated_call_id("call__0123abcd"));
        assert!(!is_generated_call_id("call_x_0123abcd"));
        assert!(!is_generated_call_id("call_abcDEF123"));
        assert!(!is_generated_call_id("toolu_01_0123abcd"));
    }
}
