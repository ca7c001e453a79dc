//! MCP tool names to keel names.
//!
//! MCP tool names may use characters keel's grammar forbids (`getTinyImage`, `echo-all`, `files/read`). A remote
//! tool is registered as `<server>.<tool>`: `<server>` is the namespace the importer chose (a valid keel segment)
//! and `<tool>` is the remote name mapped to one keel segment, deterministically:
//!
//! 1. a camelCase boundary becomes `_` (`getTinyImage` -> `get_tiny_image`, `getHTTPResponse` ->
//!    `get_http_response`, `v2Api` -> `v2_api`), and uppercase letters become lowercase;
//! 2. every character other than `a-z`, `0-9` becomes `_` (`echo-all` -> `echo_all`, `files.read` ->
//!    `files_read`: a remote name never adds a segment);
//! 3. runs of `_` collapse to one, and leading and trailing `_` are dropped.
//!
//! A name that maps to nothing, starts with a digit once mapped, holds non-ASCII characters, or makes the full name
//! longer than 64 characters is *unmappable*: [`map_tool_name`] says why instead of inventing a name. Two remote
//! names that map to the same keel name collide; the importer reports both (see [`crate::client`]). The original
//! name is kept for forwarding.

use std::fmt;

use keel_tools_core::name::{self, MAX_NAME_LEN};

/// Why an MCP tool name has no keel name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameMappingError {
    /// The namespace is not one valid keel segment.
    InvalidNamespace {
        /// The namespace given.
        namespace: String,
    },
    /// The remote name holds a character outside ASCII.
    NonAscii {
        /// The remote name.
        origin: String,
    },
    /// The remote name has no letter or digit.
    Empty {
        /// The remote name.
        origin: String,
    },
    /// The mapped name starts with a digit; keel segments start with a letter.
    StartsWithDigit {
        /// The remote name.
        origin: String,
        /// What it mapped to.
        mapped: String,
    },
    /// `<namespace>.<mapped>` is longer than 64 characters.
    TooLong {
        /// The remote name.
        origin: String,
        /// The full keel name it would get.
        full: String,
    },
}

impl fmt::Display for NameMappingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameMappingError::InvalidNamespace { namespace } => write!(
                f,
                "namespace {namespace:?} is not a keel name segment (lowercase letters, digits and single \
                 underscores, starting with a letter)"
            ),
            NameMappingError::NonAscii { origin } => {
                write!(f, "MCP tool name {origin:?} has non-ASCII characters and has no keel name")
            }
            NameMappingError::Empty { origin } => {
                write!(f, "MCP tool name {origin:?} has no letter or digit and has no keel name")
            }
            NameMappingError::StartsWithDigit { origin, mapped } => write!(
                f,
                "MCP tool name {origin:?} maps to {mapped:?}, which starts with a digit; keel names start with a letter"
            ),
            NameMappingError::TooLong { origin, full } => write!(
                f,
                "MCP tool name {origin:?} maps to {full:?}, longer than {MAX_NAME_LEN} characters; choose a shorter \
                 namespace"
            ),
        }
    }
}

impl std::error::Error for NameMappingError {}

/// Whether `namespace` is one valid keel segment (so `<namespace>.<tool>` has exactly two segments).
pub fn is_valid_namespace(namespace: &str) -> bool {
    !namespace.contains('.') && name::validate(namespace).is_ok()
}

/// The keel segment for an MCP tool name (`getTinyImage` -> `get_tiny_image`); see the module docs.
pub fn map_segment(origin: &str) -> Result<String, NameMappingError> {
    if !origin.is_ascii() {
        return Err(NameMappingError::NonAscii { origin: origin.to_owned() });
    }
    let bytes = origin.as_bytes();
    let mut out = String::with_capacity(origin.len() + 4);
    for (i, &b) in bytes.iter().enumerate() {
        if b.is_ascii_uppercase() {
            let prev = i.checked_sub(1).and_then(|p| bytes.get(p)).copied();
            let next = bytes.get(i + 1).copied();
            let after_word = prev.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit());
            let acronym_end =
                prev.is_some_and(|p| p.is_ascii_uppercase()) && next.is_some_and(|n| n.is_ascii_lowercase());
            if after_word || acronym_end {
                out.push('_');
            }
            out.push(char::from(b.to_ascii_lowercase()));
        } else if b.is_ascii_lowercase() || b.is_ascii_digit() {
            out.push(char::from(b));
        } else {
            out.push('_');
        }
    }
    let mapped = out.split('_').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("_");
    match mapped.as_bytes().first() {
        None => Err(NameMappingError::Empty { origin: origin.to_owned() }),
        Some(b) if b.is_ascii_digit() => Err(NameMappingError::StartsWithDigit { origin: origin.to_owned(), mapped }),
        Some(_) => Ok(mapped),
    }
}

/// The keel name of MCP tool `origin` imported under `namespace`: `<namespace>.<mapped origin>`.
pub fn map_tool_name(namespace: &str, origin: &str) -> Result<String, NameMappingError> {
    if !is_valid_namespace(namespace) {
        return Err(NameMappingError::InvalidNamespace { namespace: namespace.to_owned() });
    }
    let full = format!("{namespace}.{}", map_segment(origin)?);
    if full.len() > MAX_NAME_LEN {
        return Err(NameMappingError::TooLong { origin: origin.to_owned(), full });
    }
    debug_assert!(name::validate(&full).is_ok(), "mapped name {full:?} breaks the grammar");
    Ok(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_mcp_names_deterministically() {
        let cases = [
            ("getTinyImage", "get_tiny_image"),
            ("echo-all", "echo_all"),
            ("echo", "echo"),
            ("get-env", "get_env"),
            ("test_simple_text", "test_simple_text"),
            ("getHTTPResponse", "get_http_response"),
            ("HTTPServer", "http_server"),
            ("v2Api", "v2_api"),
            ("files.read", "files_read"),
            ("files/read", "files_read"),
            ("__private__", "private"),
            ("a--b", "a_b"),
            ("Echo", "echo"),
            ("trigger-long-running-operation", "trigger_long_running_operation"),
        ];
        for (origin, mapped) in cases {
            assert_eq!(map_segment(origin).as_deref(), Ok(mapped), "{origin}");
            let full = map_tool_name("srv", origin).unwrap();
            assert_eq!(full, format!("srv.{mapped}"));
            assert!(name::validate(&full).is_ok());
        }
    }

    #[test]
    fn unmappable_names_are_errors() {
        assert!(matches!(map_segment("---"), Err(NameMappingError::Empty { .. })));
        assert!(matches!(map_segment(""), Err(NameMappingError::Empty { .. })));
        assert!(matches!(map_segment("3dRender"), Err(NameMappingError::StartsWithDigit { .. })));
        assert!(matches!(map_segment("café"), Err(NameMappingError::NonAscii { .. })));
        let long = "x".repeat(70);
        assert!(matches!(map_tool_name("srv", &long), Err(NameMappingError::TooLong { .. })));
        for ns in ["", "Srv", "a.b", "1x", "a__b"] {
            assert!(matches!(map_tool_name(ns, "echo"), Err(NameMappingError::InvalidNamespace { .. })), "{ns}");
        }
        // Messages name the origin.
        assert!(map_segment("café").unwrap_err().to_string().contains("café"));
    }
}
