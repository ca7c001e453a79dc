//! What the service reads of a request before the SDK does: the JSON-RPC message's method, id, tool and revision
//! ([`Envelope`], one parse of the body for every check that needs it), and the 2026-07-28 standard headers
//! ([`StandardHeaders`]).

#[cfg(feature = "auth")]
use super::{METHOD_HEADER, NAME_HEADER};

use std::borrow::Cow;
use std::cell::OnceCell;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// The key that names a request's revision in its `_meta`, and a searcher for it built once.
const REVISION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
static REVISION_KEY_FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(REVISION_KEY.as_bytes()));

/// A request's body as the service reads it before the SDK does: its JSON-RPC [`Message`], parsed at most once
/// whichever of the slots, the rate limits and the scopes' check asks first, and not at all when none asks.
pub(super) struct Envelope<'a> {
    body: &'a [u8],
    message: OnceCell<Option<Message<'a>>>,
}

/// What the service needs to know of a JSON-RPC message: its method, its id, the tool a `tools/call` names, and
/// whether it names its protocol revision in `_meta`. A message with a method and an id is a request; one without
/// a method is the client's answer to the server.
#[derive(Deserialize)]
pub(super) struct Message<'a> {
    #[serde(borrow)]
    pub(super) method: Option<Cow<'a, str>>,
    pub(super) id: Option<Value>,
    #[serde(borrow)]
    params: Option<Params<'a>>,
}

/// What is read of `params`: `name`, and whether `_meta` names the revision. A member of another shape than these
/// reads as absent rather than making the whole message unreadable: the message is the SDK's to judge.
#[derive(Default)]
struct Params<'a> {
    name: Option<Cow<'a, str>>,
    names_revision: bool,
}

impl<'a> Envelope<'a> {
    pub(super) fn new(body: &'a [u8]) -> Envelope<'a> {
        Envelope { body, message: OnceCell::new() }
    }

    /// The message; `None` when the body is not one JSON-RPC object (a batch, or not JSON).
    pub(super) fn message(&self) -> Option<&Message<'a>> {
        self.message.get_or_init(|| serde_json::from_slice(self.body).ok()).as_ref()
    }

    /// Whether the body is a request; a body that is not one JSON-RPC object counts as one (the SDK answers it).
    pub(super) fn is_request(&self) -> bool {
        self.message().is_none_or(|m| m.method.is_some() && m.id.is_some())
    }

    /// Whether the body is an `initialize` request.
    pub(super) fn is_initialize(&self) -> bool {
        self.message().is_some_and(|m| m.method.as_deref() == Some("initialize"))
    }

    /// Whether the body may name its protocol revision in its `_meta`, told without parsing it: `false` only when
    /// the key is not in it, neither as written nor escaped (a body with no backslash cannot spell it another way).
    /// A session's request that answers `false` keeps its session slot without a parse of its body, the SDK serving
    /// it in that session (a body that is not JSON included: the SDK answers it there).
    pub(super) fn may_name_its_revision(&self) -> bool {
        memchr::memchr(b'\\', self.body).is_some() || REVISION_KEY_FINDER.find(self.body).is_some()
    }

    /// Whether the message names its protocol revision in its `_meta`: the SDK may then serve it without a session
    /// whatever its session header says (a request that negotiates per request), so it is counted as one. A body
    /// that is not one JSON-RPC object counts as one too.
    pub(super) fn names_its_revision(&self) -> bool {
        self.message().is_none_or(|m| m.params.as_ref().is_some_and(|p| p.names_revision))
    }
}

impl Message<'_> {
    /// The tool a `tools/call` names.
    pub(super) fn tool(&self) -> Option<&str> {
        if self.method.as_deref() != Some("tools/call") {
            return None;
        }
        self.params.as_ref()?.name.as_deref()
    }
}

/// The `visit_*` methods of a [`Visitor`] for every JSON value but an object and a string, each answering `$value`
/// (what the member reads as when it is not of the shape read).
macro_rules! others_read_as {
    ($value:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            IgnoredAny.visit_seq(seq).map(|_| $value)
        }
    };
}

impl<'de: 'a, 'a> Deserialize<'de> for Params<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Params<'a>, D::Error> {
        struct ParamsVisitor;
        impl<'de> Visitor<'de> for ParamsVisitor {
            type Value = Params<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Params<'de>, A::Error> {
                let mut params = Params::default();
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Name => params.name = map.next_value::<Text<'de>>()?.0,
                        Key::Meta => params.names_revision = map.next_value::<Meta>()?.0,
                        Key::Revision | Key::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(params)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Params<'de>, E> {
                Ok(Params::default())
            }
            others_read_as!(Params::default());
        }
        deserializer.deserialize_any(ParamsVisitor)
    }
}

/// A key of `params` or of its `_meta`: those read, or another.
enum Key {
    Name,
    Meta,
    Revision,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "name" => Key::Name,
                    "_meta" => Key::Meta,
                    REVISION_KEY => Key::Revision,
                    _ => Key::Other,
                })
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// A member that is read when it is a string, and is absent when it is anything else.
struct Text<'a>(Option<Cow<'a, str>>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Text<'de>, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Owned(s.to_owned()))))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Text<'de>, A::Error> {
                IgnoredAny.visit_map(map).map(|_| Text(None))
            }
            others_read_as!(Text(None));
        }
        deserializer.deserialize_any(TextVisitor)
    }
}

/// `_meta`: whether it names the revision (with a value other than `null`); `false` when it is not an object.
struct Meta(bool);

impl<'de> Deserialize<'de> for Meta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Meta, D::Error> {
        struct MetaVisitor;
        impl<'de> Visitor<'de> for MetaVisitor {
            type Value = Meta;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Meta, A::Error> {
                let mut names = false;
                while let Some(key) = map.next_key::<Key>()? {
                    if let Key::Revision = key {
                        names = map.next_value::<Option<IgnoredAny>>()?.is_some();
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Meta(names))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Meta, E> {
                Ok(Meta(false))
            }
            others_read_as!(Meta(false));
        }
        deserializer.deserialize_any(MetaVisitor)
    }
}

/// The 2026-07-28 standard headers of a request: `Mcp-Method`, and `Mcp-Name` for a `tools/call`. rmcp refuses a
/// request whose headers say other than its body.
#[cfg(feature = "auth")]
pub(super) struct StandardHeaders<'a> {
    pub(super) method: &'a [u8],
    pub(super) name: Option<&'a str>,
}

#[cfg(feature = "auth")]
impl<'a> StandardHeaders<'a> {
    /// The request's standard headers; `None` when it has no `Mcp-Method`.
    pub(super) fn of(parts: &'a hyper::http::request::Parts) -> Option<StandardHeaders<'a>> {
        let method = parts.headers.get(&METHOD_HEADER)?.as_bytes();
        let name = parts.headers.get(&NAME_HEADER).and_then(|v| v.to_str().ok());
        Some(StandardHeaders { method, name })
    }

    /// The tool a `tools/call` names.
    pub(super) fn tool(&self) -> Option<&'a str> {
        if self.method == b"tools/call" { self.name } else { None }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_message_is_read_for_its_method_id_and_tool() {
        let body = br#"{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"a.b","arguments":{}}}"#;
        let envelope = Envelope::new(body);
        let message = envelope.message().unwrap();
        assert_eq!(message.tool(), Some("a.b"));
        assert_eq!(message.id, Some(json!("x-1")));
        assert!(envelope.is_request() && !envelope.is_initialize() && !envelope.names_its_revision());
        let list = br#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"name":"a.b"}}"#;
        assert_eq!(Envelope::new(list).message().unwrap().tool(), None);
        let escaped = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a\u002eb"}}"#;
        assert_eq!(Envelope::new(escaped).message().unwrap().tool(), Some("a.b"));
        let answer = br#"{"jsonrpc":"2.0","id":3,"result":{}}"#;
        assert!(!Envelope::new(answer).is_request());
        let initialize = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#;
        assert!(Envelope::new(initialize).is_initialize());
    }

    #[test]
    fn a_body_that_is_not_one_message_counts_as_a_request_that_names_its_revision() {
        for body in [&b"[1,2]"[..], b"not json", b"{\"method\": 5}", b""] {
            let envelope = Envelope::new(body);
            assert!(envelope.message().is_none(), "{body:?}");
            assert!(envelope.is_request() && envelope.names_its_revision() && !envelope.is_initialize());
        }
    }

    #[test]
    fn the_revision_is_named_in_meta_with_a_value() {
        let named = |meta: &str| {
            let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"_meta":{meta}}}}}"#);
            let envelope = Envelope::new(body.as_bytes());
            (envelope.may_name_its_revision(), envelope.names_its_revision())
        };
        assert_eq!(named(r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#), (true, true));
        assert_eq!(named(r#"{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}"#), (true, true));
        assert_eq!(named(r#"{"io.modelcontextprotocol/protocolVersion":null}"#), (true, false));
        assert_eq!(named(r#"{"progressToken":1}"#), (false, false));
        assert_eq!(named("5"), (false, false));
    }

    #[test]
    fn params_members_of_another_shape_read_as_absent() {
        for params in [r#"{"name":5,"_meta":[1]}"#, r#"{"name":{"a":[1]},"_meta":"x"}"#, "[1]", "\"x\"", "null"] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#);
            let envelope = Envelope::new(body.as_bytes());
            let message = envelope.message().unwrap_or_else(|| panic!("{params}"));
            assert_eq!(message.tool(), None, "{params}");
            assert!(envelope.is_request() && !envelope.names_its_revision(), "{params}");
        }
    }
}
