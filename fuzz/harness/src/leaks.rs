//! The leak check: nothing internal in a result unless the caller's own input held it.

use serde_json::Value;
use tool_core::{ToolCall, ToolResult};

use crate::input::{Args, Input, short};

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
