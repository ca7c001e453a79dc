//! The leak check: nothing internal in a result unless the caller's own input held it.

use keel_tools_core::{ToolCall, ToolResult};
use serde_json::Value;

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
    "keel_tools_core",
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

/// Asserts that the result holds no needle that the caller's input did not hold at that very place.
///
/// Needles are searched in the result's decoded strings (a JSON escape such as `\u0003` next to `::` is not a
/// Rust path). A needle found at some position of a result string is the caller's only if that position lies inside
/// a copy of one of the caller's strings: the copy starts at or before the needle, holds the needle whole, and is
/// either complete or cut short by `…` (previews and long names are truncated that way). Holding the needle
/// elsewhere in the input excuses nothing: a key `x.rs` does not make `src/lib.rs:3` the caller's. The caller's
/// strings count in every form the result may echo them in: as sent, as JSON (with and without quotes), escaped as Rust's `Debug` writes it
/// (`\n`, `\u{3}`, with and without quotes), as a JSON pointer segment (`~0`, `~1`), and the arguments' JSON
/// pointers followed by `:` (how a violation names a key).
pub fn assert_clean(result: &ToolResult, call: &ToolCall, input: &Input) {
    if !result.is_ok() && result.code() != Some("approval_required") {
        let error = serde_json::to_string(&result.error()).unwrap_or_default();
        assert!(error.len() <= MAX_ERROR_BYTES, "an error of {} bytes; input: {input:?}", error.len());
    }
    let mut texts = Vec::new();
    strings(&serde_json::to_value(result).expect("a result serializes"), &mut texts);
    let found: Vec<(&str, usize, usize)> =
        texts.iter().flat_map(|t| needles_in(t).map(move |(at, end)| (t.as_str(), at, end))).collect();
    if found.is_empty() {
        return;
    }
    let forms = forms_of(call, input);
    for (text, at, end) in found {
        assert!(
            forms.iter().any(|f| covers(text, at, end, f)),
            "{:?} reached the result without coming from the input at that place; input: {input:?}\nresult: {}",
            &text[at..end],
            short(&serde_json::to_string(result).unwrap_or_default())
        );
    }
}

/// Every needle in `text`, as its byte range: the [`NEEDLES`], and the four characters of every Rust path (see
/// [`rust_paths`]).
fn needles_in(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    NEEDLES.iter().flat_map(move |n| text.match_indices(*n).map(|(at, m)| (at, at + m.len()))).chain(rust_paths(text))
}

/// Whether `text[at..end]` lies inside a copy of `form` in `text`: `form` (or a prefix of it followed by `…`)
/// starts at some `j <= at` and reaches at least `end`.
fn covers(text: &str, at: usize, end: usize, form: &str) -> bool {
    let (t, f) = (text.as_bytes(), form.as_bytes());
    let needle = &text[at..end];
    form.match_indices(needle).any(|(k, _)| {
        let Some(j) = at.checked_sub(k) else { return false };
        if t[j..at] != f[..k] {
            return false;
        }
        // From the needle's end on, the copy goes on as the form does until the form ends or the copy is cut.
        let (mut ti, mut fi) = (end, k + needle.len());
        while fi < f.len() && ti < t.len() && t[ti] == f[fi] {
            ti += 1;
            fi += 1;
        }
        fi == f.len() || text[ti..].starts_with('…')
    })
}

/// The caller's strings, in every form a result may echo them in.
fn forms_of(call: &ToolCall, input: &Input) -> Vec<String> {
    let mut sent = vec![input.id.clone(), input.name.clone(), call.id().to_owned(), call.name().to_owned()];
    match &input.args {
        Args::Text(t) => sent.push(t.clone()),
        Args::Value(v) | Args::Provider(_, v) => strings(v, &mut sent),
    }
    if let Ok(args) = call.arguments() {
        strings(args, &mut sent);
    }
    let mut forms = Vec::with_capacity(sent.len() * 5);
    // Violations name keys by JSON pointer (`/src/lib`), followed by `: expected ...`.
    // A violation writes its pointer, and what it expected and found, on one line: control characters escaped
    // (`\u{000b}`).
    if let Ok(args) = call.arguments() {
        for p in pointers(args) {
            forms.push(format!("{}:", one_line(&p)));
            forms.push(format!("{p}:"));
        }
    }
    for s in sent.into_iter().filter(|s| !s.is_empty()) {
        let debug = format!("{s:?}");
        forms.push(debug[1..debug.len() - 1].to_owned());
        forms.push(debug);
        let json = serde_json::to_string(&s).unwrap_or_default();
        // Keys are named in JSON's escapes without the quotes (`no property \`\u0000::a\``).
        forms.push(json[1..json.len() - 1].to_owned());
        forms.push(json);
        forms.push(s.replace('~', "~0").replace('/', "~1"));
        forms.push(one_line(&s));
        forms.push(s);
    }
    forms
}

/// `s` as a violation message writes it, on one line: `\n`, `\r` and `\t`, and every other control character as
/// `\u{000b}` (four hex digits at least).
fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:04x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
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

/// Every `x::y` in `text` (an identifier character on both sides of `::`), as the byte range of its four
/// characters: the shape of a Rust path. A bare `::` is not one: a model's key `:` is echoed in a violation as
/// `/:: expected ...`.
fn rust_paths(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices("::").filter_map(move |(at, _)| {
        let before = text[..at].chars().next_back().filter(|&c| ident(c))?;
        let after = text[at + 2..].chars().next().filter(|&c| ident(c))?;
        Some((at - before.len_utf8(), at + 2 + after.len_utf8()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_with_a_control_character_is_its_own_in_a_violation() {
        // A model's key "\u{b}:d::X", named by a violation as tool-schema writes it.
        assert_eq!(one_line("\u{b}:d::X"), "\\u{000b}:d::X");
        let text = "/\\u{000b}:d::X: expected nothing; found null";
        let (at, end) = rust_paths(text).next().expect("d::X has a path's shape");
        assert_eq!(&text[at..end], "d::X");
        assert!(covers(text, at, end, &format!("/{}:", one_line("\u{b}:d::X"))));
        assert!(!covers(text, at, end, "\\u{b}:d::X"), "Rust's Debug form is not how a violation writes it");
    }
}
