//! Locator grammars. A locator is parsed as data and checked against the allowlists before anything is looked up
//! or connected to; nothing in it is ever evaluated.
//!
//! Local rows:
//!
//! ```text
//! local   = tool-name | rust-path
//! tool-name = keel's tool-name grammar: dot-separated snake_case segments (`get_service_status`, `incident.search`)
//! rust-path = ident "::" ident { "::" ident }      e.g. my_app::status::get_service_status
//! ident     = [A-Za-z_][A-Za-z0-9_]*  (not `_` alone, no raw identifiers)
//! ```
//!
//! Python's `package.module:function`, single colons, whitespace, brackets, quotes and anything else that looks
//! like code are `bad_locator`.
//!
//! Remote rows:
//!
//! ```text
//! remote = http-url | "stdio:" command-line
//! http-url = ("http" | "https") "://" host [":" port] [path] ["?" query]   (no user info, no fragment)
//! command-line = words separated by spaces, run without a shell
//! ```

use std::fmt;

/// The longest locator accepted.
pub const MAX_LOCATOR_LEN: usize = 1024;

/// The longest remote tool name accepted (`extra.origin_name`), as MCP recommends.
pub const MAX_ORIGIN_NAME_LEN: usize = 128;

/// A Rust path, `crate::module::item` (at least two segments).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RustPath {
    segments: Vec<String>,
}

impl RustPath {
    /// Parses `a::b::c`; `None` unless every segment is an identifier. A single identifier is accepted here (for
    /// module prefixes like `examples`); locators need two segments or more.
    pub fn parse(s: &str) -> Option<RustPath> {
        let segments: Vec<String> = s.split("::").map(str::to_owned).collect();
        segments.iter().all(|seg| is_ident(seg)).then_some(RustPath { segments })
    }

    /// The segments.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// Whether `prefix`'s segments are this path's first segments (`my_app` is a prefix of
    /// `my_app::status::f`; `my_app::stat` is not).
    pub fn starts_with(&self, prefix: &RustPath) -> bool {
        self.segments.len() >= prefix.segments.len() && self.segments[..prefix.segments.len()] == prefix.segments[..]
    }

    /// The path without its last segment (the module of an item), if it has more than one segment.
    pub fn parent(&self) -> Option<RustPath> {
        (self.segments.len() > 1).then(|| RustPath { segments: self.segments[..self.segments.len() - 1].to_vec() })
    }
}

impl fmt::Display for RustPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.segments.join("::"))
    }
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    s != "_" && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What a local row's locator names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LocalTarget {
    /// A compiled tool, by its tool name.
    Name(String),
    /// A compiled tool, by the Rust path of its fn (`module::path::fn`).
    Path(RustPath),
}

impl fmt::Display for LocalTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LocalTarget::Name(n) => f.write_str(n),
            LocalTarget::Path(p) => p.fmt(f),
        }
    }
}

/// Parses a local locator; `Err` holds the reason for `bad_locator`.
pub fn parse_local(locator: &str) -> Result<LocalTarget, String> {
    common_checks(locator)?;
    if locator.contains("::") {
        if let Some(path) = RustPath::parse(locator)
            && path.segments.len() >= 2
        {
            return Ok(LocalTarget::Path(path));
        }
        if locator.split("::").any(|s| s.contains(':')) {
            return Err("has a single `:` inside a Rust path; segments are separated by `::`".into());
        }
        if locator.contains('.') {
            return Err("mixes `.` and `::`; write a Rust path (`crate::module::function`) or a tool name".into());
        }
        return Err("is not a Rust path: every segment must be an identifier (`crate::module::function`)".into());
    }
    if locator.contains(':') {
        return Err("uses `module:function` notation (Python's); write a Rust path (`crate::module::function`) or \
                    a tool name"
            .into());
    }
    match keel_tools_core::name::validate(locator) {
        Ok(()) => Ok(LocalTarget::Name(locator.to_owned())),
        Err(e) => Err(format!(
            "is neither a tool name nor a Rust path ({}); a local locator is `tool_name` or `crate::module::function`",
            e.reason()
        )),
    }
}

fn common_checks(locator: &str) -> Result<(), String> {
    if locator.is_empty() {
        return Err("is empty".into());
    }
    if locator.len() > MAX_LOCATOR_LEN {
        return Err(format!("is longer than {MAX_LOCATOR_LEN} bytes"));
    }
    if locator.chars().any(|c| c.is_control()) {
        return Err("holds control characters".into());
    }
    if locator.chars().any(char::is_whitespace) {
        return Err("holds whitespace".into());
    }
    if locator.chars().any(|c| "()[]{};=\"'`<>|&$!\\,+*%#@^~?".contains(c)) {
        return Err("looks like code (brackets, quotes, operators); a locator is a name or a path and is never \
                    evaluated"
            .into());
    }
    if !locator.is_ascii() {
        return Err("holds characters outside ASCII".into());
    }
    Ok(())
}

/// Where a remote row's MCP server is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Endpoint {
    /// A Streamable HTTP endpoint.
    Http {
        /// The URL, with scheme and host in lowercase.
        url: String,
        /// `scheme://host:port`, the port always written out: what the allowlist matches.
        origin: String,
    },
    /// A server started as a child process speaking MCP over stdio (no shell).
    Stdio {
        /// Program and arguments.
        argv: Vec<String>,
    },
}

impl Endpoint {
    /// The canonical text: the URL, or `stdio:` and the command line.
    pub fn as_text(&self) -> String {
        match self {
            Endpoint::Http { url, .. } => url.clone(),
            Endpoint::Stdio { argv } => format!("stdio:{}", argv.join(" ")),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_text())
    }
}

/// Parses a remote locator; `Err` holds the reason for `bad_locator`.
pub fn parse_remote(locator: &str) -> Result<Endpoint, String> {
    if locator.is_empty() {
        return Err("is empty; a remote locator is an MCP endpoint".into());
    }
    if locator.len() > MAX_LOCATOR_LEN {
        return Err(format!("is longer than {MAX_LOCATOR_LEN} bytes"));
    }
    if locator.chars().any(|c| c.is_control()) {
        return Err("holds control characters".into());
    }
    if let Some(command) = locator.strip_prefix("stdio:") {
        let argv: Vec<String> = command.split(' ').filter(|w| !w.is_empty()).map(str::to_owned).collect();
        if argv.is_empty() {
            return Err("names no command after `stdio:`".into());
        }
        if command.chars().any(|c| c.is_whitespace() && c != ' ') {
            return Err("separates the command's words with whitespace other than spaces".into());
        }
        return Ok(Endpoint::Stdio { argv });
    }
    parse_http(locator)
}

fn parse_http(locator: &str) -> Result<Endpoint, String> {
    let lower = locator.to_ascii_lowercase();
    let (scheme, rest) = if lower.starts_with("http://") {
        ("http", &locator["http://".len()..])
    } else if lower.starts_with("https://") {
        ("https", &locator["https://".len()..])
    } else {
        return Err("is not an MCP endpoint: write an http(s) URL (Streamable HTTP) or `stdio:<command line>`".into());
    };
    if locator.chars().any(|c| c.is_whitespace() || !c.is_ascii()) {
        return Err("holds whitespace or characters outside ASCII".into());
    }
    if rest.contains('#') {
        return Err("has a fragment (`#...`)".into());
    }
    if let Some(bad) = rest.chars().find(|c| "\"<>\\^`{|}".contains(*c)) {
        return Err(format!("holds {bad:?}, which a URL may not hold unescaped"));
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.contains('@') {
        return Err("has user info (`user@host`); credentials do not belong in a catalogue row".into());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let close = v6.find(']').ok_or("has an unclosed `[` in its host")?;
        let host = &v6[..close];
        if host.is_empty() || !host.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.') {
            return Err("has an invalid IPv6 host".into());
        }
        let after = &v6[close + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err("has characters after its IPv6 host".into()),
        };
        (format!("[{}]", host.to_ascii_lowercase()), port)
    } else {
        let (host, port) = match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        };
        if host.is_empty() {
            return Err("has no host".into());
        }
        if !host.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') || host.starts_with(['.', '-']) {
            return Err(format!("has an invalid host {host:?}"));
        }
        (host.to_ascii_lowercase(), port)
    };
    let port: u16 = match port {
        None => {
            if scheme == "https" {
                443
            } else {
                80
            }
        }
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.chars().all(|c| c.is_ascii_digit()) => n,
            _ => return Err(format!("has an invalid port {p:?}")),
        },
    };
    let origin = format!("{scheme}://{host}:{port}");
    let tail = if tail.is_empty() { "/" } else { tail };
    Ok(Endpoint::Http { url: format!("{origin}{tail}"), origin })
}

/// Checks a remote tool's name (`extra.origin_name`); `Err` holds the reason for `bad_locator`.
pub fn check_origin_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("extra.origin_name is empty".into());
    }
    if name.len() > MAX_ORIGIN_NAME_LEN {
        return Err(format!("extra.origin_name is longer than {MAX_ORIGIN_NAME_LEN} characters"));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c)) {
        return Err(format!(
            "extra.origin_name {name:?} holds characters MCP tool names do not use (A-Z a-z 0-9 _ - . /)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_locators() {
        assert_eq!(parse_local("get_service_status"), Ok(LocalTarget::Name("get_service_status".into())));
        assert_eq!(parse_local("incident.search"), Ok(LocalTarget::Name("incident.search".into())));
        assert!(matches!(parse_local("examples::status::get_service_status"), Ok(LocalTarget::Path(_))));
        for bad in [
            "",
            "os.path:join",
            "examples::status:get_service_status",
            "examples.status::f",
            "examples::status::",
            "::examples",
            "examples:: status",
            "__import__('os').system('id')",
            "lambda: 1",
            "std::process::Command::new(\"sh\")",
            "Examples.Status",
            "a b",
            "x;y",
            "r#fn::x",
            "é::x",
        ] {
            assert!(parse_local(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn remote_locators() {
        assert_eq!(
            parse_remote("HTTP://127.0.0.1:8931/mcp"),
            Ok(Endpoint::Http { url: "http://127.0.0.1:8931/mcp".into(), origin: "http://127.0.0.1:8931".into() })
        );
        assert_eq!(
            parse_remote("https://mcp.example.com"),
            Ok(Endpoint::Http {
                url: "https://mcp.example.com:443/".into(),
                origin: "https://mcp.example.com:443".into()
            })
        );
        assert_eq!(
            parse_remote("http://[::1]:9/mcp"),
            Ok(Endpoint::Http { url: "http://[::1]:9/mcp".into(), origin: "http://[::1]:9".into() })
        );
        assert_eq!(
            parse_remote("stdio:npx -y server"),
            Ok(Endpoint::Stdio { argv: vec!["npx".into(), "-y".into(), "server".into()] })
        );
        for bad in [
            "",
            "ftp://x",
            "http://",
            "http://user:pw@host/mcp",
            "http://host:0/",
            "http://host:99999/",
            "http://host/a b",
            "http://host/#frag",
            "http://ho_st/",
            "stdio:",
            "stdio:   ",
            "stdio:a\tb",
            "tool_calling_course.tools:get_service_status",
        ] {
            assert!(parse_remote(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn prefixes_match_whole_segments() {
        let p = RustPath::parse("examples::status::f").unwrap();
        assert!(p.starts_with(&RustPath::parse("examples").unwrap()));
        assert!(p.starts_with(&RustPath::parse("examples::status").unwrap()));
        assert!(!p.starts_with(&RustPath::parse("examples::stat").unwrap()));
        assert!(!p.starts_with(&RustPath::parse("examples::status::f::g").unwrap()));
    }
}
