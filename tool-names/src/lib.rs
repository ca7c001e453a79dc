//! The grammar of keel tool names and versions, shared by the `#[tool]` macro (compile-time checks) and the
//! runtime (run-time definitions, wire-name resolution). No dependencies.
//!
//! A tool name is one or more dot-separated snake_case segments, 1 to 64 characters in all:
//! `lookup_incident`, `incident.search`, `billing.invoice.v2`. Each segment starts with a lowercase ASCII letter
//! and continues with lowercase letters, digits and single underscores between them (no leading, trailing or
//! doubled `_`). Because a segment never holds `-` or `__`, two mappings are one-to-one:
//!
//! - the wire name, for providers that accept only `[A-Za-z0-9_-]{1,64}`: `.` becomes `-`
//!   (`incident.search` -> `incident-search`), same length, reversible with [`from_wire`];
//! - the identifier of the macro's per-crate duplicate guard: `.` becomes `__`.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::fmt;

/// The longest tool name allowed.
pub const MAX_NAME_LEN: usize = 64;

/// Why a name breaks the grammar. The `Display` text says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameError {
    name: String,
    reason: &'static str,
}

impl NameError {
    /// The offending name (cut to 80 characters).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// What is wrong, in a few words.
    pub fn reason(&self) -> &'static str {
        self.reason
    }
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid tool name {:?}: {}; a tool name is 1-{} characters of dot-separated snake_case segments \
             (lowercase letters, digits and single underscores, each segment starting with a letter), \
             e.g. \"lookup_incident\" or \"incident.search\"",
            self.name, self.reason, MAX_NAME_LEN
        )
    }
}

impl std::error::Error for NameError {}

fn err(name: &str, reason: &'static str) -> NameError {
    let name =
        if name.chars().count() > 80 { name.chars().take(80).collect::<String>() + "…" } else { name.to_owned() };
    NameError { name, reason }
}

/// Checks a tool name against the grammar.
pub fn validate(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(err(name, "it is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(err(name, "it is longer than 64 characters"));
    }
    for segment in name.split('.') {
        validate_segment(name, segment)?;
    }
    Ok(())
}

fn validate_segment(name: &str, segment: &str) -> Result<(), NameError> {
    let bytes = segment.as_bytes();
    match bytes.first() {
        None => {
            return Err(err(name, "it has an empty segment (leading, trailing or doubled `.`)"));
        }
        Some(b) if !b.is_ascii_lowercase() => {
            return Err(err(name, "a segment starts with something other than a lowercase letter"));
        }
        Some(_) => {}
    }
    let mut prev_underscore = false;
    for &b in bytes {
        match b {
            b'a'..=b'z' | b'0'..=b'9' => prev_underscore = false,
            b'_' if prev_underscore => return Err(err(name, "it has a doubled `_`")),
            b'_' => prev_underscore = true,
            b'A'..=b'Z' => return Err(err(name, "it has an uppercase letter")),
            _ => {
                return Err(err(name, "it has a character other than a-z, 0-9, `_` and `.`"));
            }
        }
    }
    if prev_underscore {
        return Err(err(name, "a segment ends with `_`"));
    }
    Ok(())
}

/// The closest valid name to `raw`, if there is one: camelCase and kebab-case become snake_case, other characters
/// become `_`, doubled or stray `_` and empty segments are dropped (`getTinyImage` -> `get_tiny_image`,
/// `Incident-Search` -> `incident_search`, `echo-all` -> `echo_all`). `None` when nothing valid is left (e.g. a
/// segment would start with a digit) or the result exceeds 64 characters.
pub fn suggest(raw: &str) -> Option<String> {
    let mut segments = Vec::new();
    for segment in raw.split('.') {
        let mut out = String::new();
        let mut prev: Option<char> = None;
        for c in segment.chars() {
            if c.is_ascii_uppercase() {
                if prev.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit()) {
                    out.push('_');
                }
                out.push(c.to_ascii_lowercase());
            } else if c.is_ascii_lowercase() || c.is_ascii_digit() {
                out.push(c);
            } else {
                out.push('_');
            }
            prev = Some(c);
        }
        let cleaned: Vec<&str> = out.split('_').filter(|p| !p.is_empty()).collect();
        if !cleaned.is_empty() {
            segments.push(cleaned.join("_"));
        }
    }
    let name = segments.join(".");
    validate(&name).ok().map(|()| name)
}

/// The provider wire name of a valid tool name: `.` becomes `-`.
pub fn to_wire(name: &str) -> String {
    name.replace('.', "-")
}

/// The tool name behind a wire name, if the wire name is one [`to_wire`] can produce.
pub fn from_wire(wire: &str) -> Option<String> {
    let name = wire.replace('-', ".");
    validate(&name).ok().map(|()| name)
}

/// The identifier suffix of the macro's duplicate guard: `.` becomes `__`.
pub fn guard_suffix(name: &str) -> String {
    name.replace('.', "__")
}

/// Checks the `MAJOR.MINOR` / `MAJOR.MINOR.PATCH` version grammar: numeric parts without leading zeros.
pub fn is_valid_version(v: &str) -> bool {
    let mut count = 0;
    for part in v.split('.') {
        count += 1;
        let numeric = !part.is_empty() && part.len() <= 9 && part.bytes().all(|b| b.is_ascii_digit());
        if !numeric || (part.len() > 1 && part.starts_with('0')) {
            return false;
        }
    }
    count == 2 || count == 3
}

/// Checks an OAuth scope token (RFC 6749 §3.3): one or more printable ASCII characters other than space, `"` and
/// `\`, at most 128 of them.
pub fn is_valid_scope(scope: &str) -> bool {
    !scope.is_empty()
        && scope.len() <= 128
        && scope.bytes().all(|b| b == 0x21 || (0x23..=0x5B).contains(&b) || (0x5D..=0x7E).contains(&b))
}

/// Parses a version into `(major, minor, patch)`; `patch` is 0 when absent.
pub fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    if !is_valid_version(v) {
        return None;
    }
    let mut it = v.split('.').map(|p| p.parse::<u32>().ok());
    Some((it.next()??, it.next()??, it.next().flatten().unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_tokens() {
        for ok in ["tickets.write", "mcp:tools", "read", "https://api.example.com/x", "a!#[]~"] {
            assert!(is_valid_scope(ok), "{ok}");
        }
        for bad in ["", "two words", "quo\"te", "back\\slash", "tab\t", "é", &"x".repeat(129)] {
            assert!(!is_valid_scope(bad), "{bad:?}");
        }
    }

    #[test]
    fn accepts_the_grammar() {
        for ok in ["a", "lookup_incident", "incident.search", "a1.b2_c3", "x.y.z", &"a".repeat(64)] {
            assert_eq!(validate(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn rejects_with_reasons() {
        let cases = [
            ("", "empty"),
            (".a", "empty segment"),
            ("a.", "empty segment"),
            ("a..b", "empty segment"),
            ("A", "lowercase letter"),
            ("aB", "uppercase"),
            ("1a", "lowercase letter"),
            ("_a", "lowercase letter"),
            ("a_", "ends with"),
            ("a__b", "doubled"),
            ("a-b", "other than"),
            ("a b", "other than"),
            ("é", "lowercase letter"),
        ];
        for (bad, reason) in cases {
            let e = validate(bad).unwrap_err();
            assert!(e.reason().contains(reason), "{bad}: {}", e.reason());
            assert!(e.to_string().contains("dot-separated snake_case"));
        }
        assert!(validate(&"a".repeat(65)).unwrap_err().reason().contains("64"));
    }

    #[test]
    fn wire_names_round_trip() {
        for n in ["incident.search", "a.b.c", "plain_name"] {
            let w = to_wire(n);
            assert!(w.len() <= 64 && w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
            assert_eq!(from_wire(&w).as_deref(), Some(n));
        }
        assert_eq!(from_wire("Not-Valid"), None);
        assert_eq!(from_wire("a--b"), None);
    }

    #[test]
    fn guard_suffix_is_injective_on_valid_names() {
        // `a.b` and `a__b` cannot both be valid, so the mapping cannot collide.
        assert_eq!(guard_suffix("a.b"), "a__b");
        assert!(validate("a__b").is_err());
    }

    #[test]
    fn suggestions() {
        assert_eq!(suggest("getTinyImage").as_deref(), Some("get_tiny_image"));
        assert_eq!(suggest("Incident-Search").as_deref(), Some("incident_search"));
        assert_eq!(suggest("echo-all").as_deref(), Some("echo_all"));
        assert_eq!(suggest("lookup__incident").as_deref(), Some("lookup_incident"));
        assert_eq!(suggest("a..b_").as_deref(), Some("a.b"));
        assert_eq!(suggest("HTTPServer").as_deref(), Some("httpserver"));
        assert_eq!(suggest("1abc"), None);
        assert_eq!(suggest("!!!"), None);
    }

    #[test]
    fn versions() {
        for ok in ["1.0", "0.1", "1.0.0", "10.20.30"] {
            assert!(is_valid_version(ok), "{ok}");
        }
        for bad in ["1", "1.", ".1", "1.0.0.0", "v1.0", "01.0", "1.a", "", "1..0", "1.0-beta"] {
            assert!(!is_valid_version(bad), "{bad}");
        }
        assert_eq!(parse_version("2.3"), Some((2, 3, 0)));
        assert_eq!(parse_version("2.3.4"), Some((2, 3, 4)));
    }
}
