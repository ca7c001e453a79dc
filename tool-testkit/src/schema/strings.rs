//! Strings: mixed characters within the lengths, valid values of the formats the validator asserts, matches of a
//! `pattern`.

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::{Gen, Kind, Mode, R, S, Unsupported, keep};

/// The longest string a schema may require before it is not generated for.
const MAX_LENGTH: usize = 10_000;

/// The formats the validator asserts, with a generator here.
pub(super) const FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "iri",
    "uri-reference",
    "iri-reference",
    "uri-template",
    "uuid",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Characters that strain a tool's handling of text: mostly ASCII, some punctuation and quotes, accents, CJK, an
/// emoji, a zero-width space.
fn chars() -> BoxedStrategy<char> {
    prop_oneof![
        10 => proptest::char::range('a', 'z'),
        2 => proptest::char::range('A', 'Z'),
        2 => proptest::char::range('0', '9'),
        2 => proptest::sample::select(vec![' ', '-', '_', '.', '/', ':', '"', '\'', '\\', '\n', '\t', '%', '<', '&']),
        1 => proptest::sample::select(vec!['é', 'ß', 'ü', 'ø', 'ł', 'Ж', 'λ', '日', '本', '🦀', '\u{200b}']),
    ]
    .boxed()
}

/// Strings of [`chars`], `lo..=hi` of them.
pub(super) fn string_of(lo: usize, hi: usize) -> BoxedStrategy<String> {
    proptest::collection::vec(chars(), lo..=hi).prop_map(String::from_iter).boxed()
}

/// Lowercase ASCII words, `lo..=hi` letters.
pub(super) fn lower(lo: usize, hi: usize) -> BoxedStrategy<String> {
    proptest::collection::vec(proptest::char::range('a', 'z'), lo..=hi).prop_map(String::from_iter).boxed()
}

/// `n` lowercase hex digits.
fn hex(n: usize) -> BoxedStrategy<String> {
    proptest::collection::vec(proptest::sample::select(b"0123456789abcdef".to_vec()), n)
        .prop_map(|v| String::from_utf8(v).unwrap_or_default())
        .boxed()
}

/// Valid values of a format the validator asserts.
fn format_strategy(format: &str) -> BoxedStrategy<String> {
    let date = (1970u32..=2099, 1u32..=12, 1u32..=28).prop_map(|(y, m, d)| format!("{y:04}-{m:02}-{d:02}"));
    let time = (0u32..=23, 0u32..=59, 0u32..=59, proptest::sample::select(vec!["Z", "+00:00", "+02:00", "-05:30"]))
        .prop_map(|(h, m, s, z)| format!("{h:02}:{m:02}:{s:02}{z}"));
    let host = (lower(1, 8), lower(0, 6), proptest::sample::select(vec!["com", "org", "net", "io", "example"]))
        .prop_map(|(a, b, tld)| if b.is_empty() { format!("{a}.{tld}") } else { format!("{a}.{b}.{tld}") });
    match format {
        "date-time" => (date, time).prop_map(|(d, t)| format!("{d}T{t}")).boxed(),
        "date" => date.boxed(),
        "time" => time.boxed(),
        "duration" => (1u32..=400, 0u32..=23, 0usize..4)
            .prop_map(|(n, h, form)| match form {
                0 => format!("P{n}D"),
                1 => format!("P{n}W"),
                2 => format!("PT{h}H{n}M"),
                _ => format!("P{n}DT{h}H"),
            })
            .boxed(),
        "email" | "idn-email" => (lower(1, 10), host).prop_map(|(local, host)| format!("{local}@{host}")).boxed(),
        "hostname" | "idn-hostname" => host.boxed(),
        "ipv4" => proptest::collection::vec(0u8..=255, 4)
            .prop_map(|o| o.iter().map(u8::to_string).collect::<Vec<_>>().join("."))
            .boxed(),
        "ipv6" => proptest::collection::vec(0u16..=0xffff, 8)
            .prop_map(|g| g.iter().map(|x| format!("{x:x}")).collect::<Vec<_>>().join(":"))
            .boxed(),
        "uri" | "iri" => (host, lower(0, 8)).prop_map(|(h, p)| format!("https://{h}/{p}")).boxed(),
        "uri-reference" | "iri-reference" => prop_oneof![
            (host, lower(0, 8)).prop_map(|(h, p)| format!("https://{h}/{p}")),
            lower(0, 8).prop_map(|p| format!("/{p}")),
        ]
        .boxed(),
        "uri-template" => (host, lower(1, 6)).prop_map(|(h, v)| format!("https://{h}/{{{v}}}")).boxed(),
        "uuid" => (hex(8), hex(4), hex(3), hex(3), hex(12), proptest::sample::select(vec!['8', '9', 'a', 'b']))
            .prop_map(|(a, b, c, d, e, variant)| format!("{a}-{b}-4{c}-{variant}{d}-{e}"))
            .boxed(),
        "json-pointer" => proptest::collection::vec(lower(0, 5), 0..=3)
            .prop_map(|tokens| tokens.iter().map(|t| format!("/{t}")).collect())
            .boxed(),
        "relative-json-pointer" => (0u32..=3, proptest::collection::vec(lower(1, 5), 0..=2))
            .prop_map(|(n, tokens)| format!("{n}{}", tokens.iter().map(|t| format!("/{t}")).collect::<String>()))
            .boxed(),
        _ /* "regex" */ => proptest::sample::select(vec!["a+", "^[a-z]*$", "x|y", "[0-9]{2,4}", ".*"])
            .prop_map(str::to_owned)
            .boxed(),
    }
}

/// An ECMA-262 pattern (JSON Schema's dialect, searched anywhere in the string) as a Rust regex whose full matches
/// the generator produces: anchors dropped, `\d`, `\w`, `\s` narrowed to ASCII (a subset of the ECMA classes).
fn pattern_to_rust(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    let mut class_start = false;
    while let Some(c) = chars.next() {
        let at_class_start = std::mem::take(&mut class_start);
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let class = match next {
                    'd' => Some("0-9"),
                    'w' => Some("A-Za-z0-9_"),
                    's' => Some(" \\t\\n\\r\\x0B\\x0C"),
                    _ => None,
                };
                match class {
                    Some(set) if in_class => out.push_str(set),
                    Some(set) => {
                        out.push('[');
                        out.push_str(set);
                        out.push(']');
                    }
                    None => {
                        out.push('\\');
                        out.push(next);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                class_start = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
            }
            ']' if in_class && !at_class_start => {
                in_class = false;
                out.push(']');
            }
            '^' | '$' if !in_class => {}
            _ => out.push(c),
        }
    }
    out
}

impl<'a> Gen<'a> {
    /// Strings within the lengths: matches of the `pattern`, else valid values of the `format`, else mixed
    /// characters.
    pub(super) fn string(&self, m: &Map<String, Value>, pointer: &str) -> R<S> {
        let min = m.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
        if min > MAX_LENGTH {
            return Err(Unsupported::new(pointer, format!("a `minLength` above {MAX_LENGTH}")));
        }
        let max = m.get("maxLength").and_then(Value::as_u64).map(|n| n as usize);
        if max.is_some_and(|max| max < min) {
            return Err(Unsupported::new(pointer, "string lengths that no value meets"));
        }
        let format = m.get("format").and_then(Value::as_str).filter(|f| FORMATS.contains(f));
        let pattern = match m.get("pattern") {
            None => None,
            Some(Value::String(p)) => Some(p.as_str()),
            Some(_) => return Err(Unsupported::new(pointer, "a `pattern` that is not a string")),
        };
        let needs_check = (pattern.is_some() && self.mode == Mode::Exact)
            || (format.is_some() && (m.contains_key("minLength") || max.is_some()));
        let base: BoxedStrategy<String> = match (pattern, self.mode) {
            (Some(p), Mode::Exact) => match proptest::string::string_regex(&pattern_to_rust(p)) {
                Ok(s) => s.boxed(),
                Err(e) => {
                    return Err(Unsupported::new(pointer, format!("the pattern {p:?} cannot be generated ({e})"))
                        .with_kind(Kind::Pattern));
                }
            },
            _ => match format {
                Some(f) => format_strategy(f),
                None => {
                    let hi = max.unwrap_or(min + 16).min(min + 24);
                    string_of(min, hi)
                }
            },
        };
        let strategy = base.prop_map(Value::String);
        if !needs_check {
            return Ok(strategy.boxed());
        }
        let mut local = keep(m, &["minLength", "maxLength", "format"]);
        if self.mode == Mode::Exact
            && let Some(p) = pattern
        {
            local.insert("pattern".to_owned(), Value::String(p.to_owned()));
        }
        let check = self.compile(&Value::Object(local), pointer)?;
        Ok(strategy.prop_filter("a string the pattern, format and lengths accept", move |v| check.is_valid(v)).boxed())
    }
}
