//! Rustdoc markup made plain. Doc comments become what a model reads (a tool's description, the descriptions and
//! titles schemars takes from doc comments), and rustdoc's intra-doc links mean nothing there: a model reads
//! "Arguments of \[`build_status_report`\]." as a broken link. [`plain`] turns each link into its text:
//!
//! * `` [`x`] `` (and `` [`x`][] ``) becomes `` `x` ``;
//! * `[text](target)` becomes `text` when `target` is a Rust path (`crate::Foo`, `Self::bar()`, `fn@run`,
//!   `Vec<T>`); a link to a URL (`https://...`, `page.html`, `#section`) stays as it is;
//! * `[text][label]` becomes `text`, and a link reference definition whose target is a Rust path
//!   (`[label]: crate::Foo` on its own line) is removed.
//!
//! Everything else is left alone: code spans (even with brackets inside), ordinary backticks, brackets that are
//! not links (`[1, 2]`, `[optional]`), URLs in prose.

use std::borrow::Cow;

use serde_json::Value;

use crate::vocabulary::{MAX_DEPTH, for_each_child_mut};

/// `text` with rustdoc's intra-doc links made plain (see the module docs); borrowed when there is none.
pub fn plain(text: &str) -> Cow<'_, str> {
    if !text.contains('[') {
        return Cow::Borrowed(text);
    }
    let without_definitions = drop_path_definitions(text);
    match links_to_text(&without_definitions) {
        Cow::Borrowed(_) => without_definitions,
        Cow::Owned(s) => Cow::Owned(s),
    }
}

/// Makes every `description` and `title` of `schema` and of its subschemas plain (data positions such as
/// `default`, `examples`, `enum` and `const` are not schemas, and are left alone).
pub fn plain_schema(schema: &mut Value) {
    fn walk(schema: &mut Value, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        if let Value::Object(map) = schema {
            for key in ["title", "description"] {
                if let Some(Value::String(s)) = map.get_mut(key)
                    && let Cow::Owned(p) = plain(s)
                {
                    *s = p;
                }
            }
        }
        for_each_child_mut(schema, |_, _, child| walk(child, depth + 1));
    }
    walk(schema, 0);
}

/// Whether `target` is a Rust path an intra-doc link can name: an optional disambiguator (`fn@`), `::`-separated
/// identifiers with optional generics, and an optional `()` or `!`. URLs, file names and anchors are not.
fn is_rust_path(target: &str) -> bool {
    let t = target.trim();
    let t = match t.split_once('@') {
        Some((disambiguator, rest))
            if !disambiguator.is_empty() && disambiguator.bytes().all(|b| b.is_ascii_lowercase()) =>
        {
            rest
        }
        _ => t,
    };
    let t = t.strip_suffix("()").or_else(|| t.strip_suffix('!')).unwrap_or(t);
    let Some(first) = t.chars().next() else { return false };
    if !(first.is_alphabetic() || first == '_' || first == ':') {
        return false;
    }
    if !t.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '<' | '>' | ',' | '\'')) {
        return false;
    }
    // Colons only as `::` separators (`mailto:x` is not a path).
    t.split("::").all(|segment| !segment.contains(':'))
}

/// `text` without the lines that define a link reference to a Rust path (`[label]: crate::Foo`), and without the
/// blank lines their removal leaves over.
fn drop_path_definitions(text: &str) -> Cow<'_, str> {
    let is_definition = |line: &str| {
        let l = line.trim_start();
        let Some(rest) = l.strip_prefix('[') else { return false };
        let Some((label, target)) = rest.split_once("]:") else { return false };
        !label.is_empty() && !label.contains(['[', ']']) && is_rust_path(target)
    };
    if !text.lines().any(is_definition) {
        return Cow::Borrowed(text);
    }
    let mut out: Vec<&str> = Vec::new();
    for line in text.lines() {
        if is_definition(line) {
            continue;
        }
        // One blank line between paragraphs at most.
        if line.trim().is_empty() && out.last().is_none_or(|l| l.trim().is_empty()) {
            continue;
        }
        out.push(line);
    }
    while out.last().is_some_and(|l| l.trim().is_empty()) {
        out.pop();
    }
    Cow::Owned(out.join("\n"))
}

/// The index just past the code span that starts at `start` (a run of backticks), or just past the run when it is
/// never closed (then the backticks are literal).
fn skip_code_span(b: &[u8], start: usize) -> usize {
    let mut open_end = start;
    while open_end < b.len() && b[open_end] == b'`' {
        open_end += 1;
    }
    let run = open_end - start;
    let mut i = open_end;
    while i < b.len() {
        if b[i] == b'`' {
            let mut j = i;
            while j < b.len() && b[j] == b'`' {
                j += 1;
            }
            if j - i == run {
                return j;
            }
            i = j;
        } else {
            i += 1;
        }
    }
    open_end
}

/// The index of the `]` that closes the bracket opened at `open`, skipping code spans; `None` when there is none
/// before another `[` or a blank line (link text does not nest here, nor span paragraphs).
fn closing_bracket(b: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    while i < b.len() {
        match b[i] {
            b'`' => i = skip_code_span(b, i),
            b'\\' => i += 2,
            b'[' => return None,
            b']' => return Some(i),
            b'\n' if b.get(i + 1) == Some(&b'\n') => return None,
            _ => i += 1,
        }
    }
    None
}

/// What the link opened at `open` becomes: (its replacement, the index just past the link), or `None` when it is
/// not a link to make plain.
fn plain_link(s: &str, open: usize) -> Option<(&str, usize)> {
    let b = s.as_bytes();
    let close = closing_bracket(b, open)?;
    let label = &s[open + 1..close];
    if label.trim().is_empty() {
        return None;
    }
    match b.get(close + 1) {
        // `[text](target)`.
        Some(b'(') => {
            let end = close + 2 + s[close + 2..].find(')')?;
            let target = &s[close + 2..end];
            // `Self::bar()` ends in `()`: the link's `)` is the one after it.
            let (target, end) = if target.ends_with('(') && b.get(end + 1) == Some(&b')') {
                (&s[close + 2..end + 1], end + 1)
            } else {
                (target, end)
            };
            is_rust_path(target).then_some((label, end + 1))
        }
        // `[text][label]` and `[text][]`.
        Some(b'[') => {
            let end = close + 2 + s[close + 2..].find(']')?;
            let reference = &s[close + 2..end];
            (!reference.contains(['[', '\n'])).then_some((label, end + 1))
        }
        // `` [`x`] ``: a shortcut link is plain only when it is one code span (`[optional]` is just brackets).
        _ => {
            let code = label.trim();
            let one_span = code.starts_with('`') && skip_code_span(code.as_bytes(), 0) == code.len();
            one_span.then_some((code, close + 1))
        }
    }
}

/// `text` with every intra-doc link replaced by its text.
fn links_to_text(text: &str) -> Cow<'_, str> {
    let b = text.as_bytes();
    let mut out = String::new();
    // `text[copied..]` has not been written to `out` yet.
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'`' => i = skip_code_span(b, i),
            b'\\' => i += 2,
            b'[' => match plain_link(text, i) {
                Some((replacement, end)) => {
                    out.push_str(&text[copied..i]);
                    out.push_str(replacement);
                    copied = end;
                    i = end;
                }
                None => i += 1,
            },
            _ => i += 1,
        }
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn intra_doc_links_become_their_text() {
        let cases = [
            ("Arguments of [`build_status_report`].", "Arguments of `build_status_report`."),
            ("See [`Foo`][bar] and [`Baz`][].", "See `Foo` and `Baz`."),
            ("Like [the report](crate::report::build) does.", "Like the report does."),
            ("Calls [`run`](Self::run()) first.", "Calls `run` first."),
            ("A [`Vec`](Vec<T>) or a [map](fn@std::collections::HashMap::new).", "A `Vec` or a map."),
            (
                "Several [`a`], [`b::c`] on\na [wrapped\nlabel](a::b) line.",
                "Several `a`, `b::c` on\na wrapped\nlabel line.",
            ),
            ("Uses [the cache][cache].\n\n[cache]: crate::cache::Cache", "Uses the cache."),
            ("First.\n\n[a]: crate::A\n\nSecond [`x`].\n[b]: B", "First.\n\nSecond `x`."),
            ("Unicode [`é`] stays é.", "Unicode `é` stays é."),
        ];
        for (doc, expected) in cases {
            assert_eq!(plain(doc), expected, "{doc:?}");
        }
    }

    #[test]
    fn prose_code_and_urls_are_left_alone() {
        let unchanged = [
            "The service, e.g. `auth-api`.",
            "No links at all.",
            "Read [the guide](https://example.com/guide) first.",
            "A [page](page.html), a [section](#usage), [mail](mailto:a@b.c).",
            "Values in [1, 2] or [optional].",
            "Code with `a[0]` and ``[`x`]`` inside.",
            "Unclosed [`x` and [ and ] and `tick.",
            "[",
            "]",
            "[]",
            "[`x`",
            "[x](",
            "[x][",
            "\\[`x`]",
            "[label]: https://example.com",
            "See https://example.com/[x] and [x] (y).",
        ];
        for doc in unchanged {
            assert!(matches!(plain(doc), Cow::Borrowed(_)), "{doc:?} became {:?}", plain(doc));
        }
    }

    #[test]
    fn no_text_makes_it_panic() {
        let tricky =
            "a [`b`][c] [d](e::f()) [`g` [h]( ``[`i`]`` \\[j] [k]: l::m\n\n[n]: o é [`ü`](p<q>) ]]][[[``` [r][";
        let starts: Vec<usize> = tricky.char_indices().map(|(i, _)| i).chain([tricky.len()]).collect();
        for (n, &i) in starts.iter().enumerate() {
            for &j in &starts[n..] {
                let piece = &tricky[i..j];
                let plain = plain(piece);
                assert!(plain.len() <= piece.len(), "{piece:?} grew into {plain:?}");
            }
        }
    }

    #[test]
    fn every_description_and_title_of_a_schema_is_plain_but_data_is_not() {
        let mut s = json!({
            "title": "The [`Query`]",
            "description": "Arguments of [`search`].",
            "properties": {
                "a": {"type": "string", "description": "Like [`A`](crate::A).", "default": "[`kept`]"},
                "b": {"oneOf": [{"const": "[`x`]", "description": "The [`X`] value."}]}
            },
            "$defs": {"D": {"description": "A [`D`]."}},
            "examples": [{"description": "[`data`]"}]
        });
        plain_schema(&mut s);
        assert_eq!(s["title"], "The `Query`");
        assert_eq!(s["description"], "Arguments of `search`.");
        assert_eq!(s["properties"]["a"]["description"], "Like `A`.");
        assert_eq!(s["properties"]["a"]["default"], "[`kept`]");
        assert_eq!(s["properties"]["b"]["oneOf"][0], json!({"const": "[`x`]", "description": "The `X` value."}));
        assert_eq!(s["$defs"]["D"]["description"], "A `D`.");
        assert_eq!(s["examples"][0]["description"], "[`data`]");
        for mut junk in [json!(null), json!("[`x`]"), json!({"description": 3, "title": ["[`x`]"]})] {
            let before = junk.clone();
            plain_schema(&mut junk);
            assert_eq!(junk, before);
        }
    }
}
