//! What the service reads of a request before the SDK does: the JSON-RPC message's method, id and revision
//! ([`Peek`]), and the 2026-07-28 standard headers ([`StandardHeaders`]).

#[cfg(feature = "auth")]
use super::{METHOD_HEADER, NAME_HEADER};

/// The key that names a request's revision in its `_meta`, and a searcher for it built once.
const REVISION_KEY: &[u8] = b"io.modelcontextprotocol/protocolVersion";
static REVISION_KEY_FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(REVISION_KEY));

/// What the service needs to know of a JSON-RPC message before the SDK reads it: its method, whether it has an
/// id, and whether it names its protocol revision in `_meta`. A message with a method and an id is a request; one
/// without a method is the client's answer to the server.
#[derive(serde::Deserialize)]
pub(super) struct Peek<'a> {
    #[serde(borrow)]
    pub(super) method: Option<std::borrow::Cow<'a, str>>,
    pub(super) id: Option<serde::de::IgnoredAny>,
    pub(super) params: Option<PeekParams>,
}

#[derive(serde::Deserialize)]
pub(super) struct PeekParams {
    #[serde(rename = "_meta")]
    pub(super) meta: Option<PeekMeta>,
}

#[derive(serde::Deserialize)]
pub(super) struct PeekMeta {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    pub(super) protocol_version: Option<serde::de::IgnoredAny>,
}

impl Peek<'_> {
    /// Peeks at `body`; a body that is not one JSON-RPC object (a batch, or not JSON) counts as a request that may
    /// be served without a session, and the SDK answers it.
    pub(super) fn of(body: &[u8]) -> Peek<'_> {
        serde_json::from_slice(body).unwrap_or(Peek {
            method: Some(std::borrow::Cow::Borrowed("")),
            id: Some(serde::de::IgnoredAny),
            params: Some(PeekParams { meta: Some(PeekMeta { protocol_version: Some(serde::de::IgnoredAny) }) }),
        })
    }

    pub(super) fn is_request(&self) -> bool {
        self.method.is_some() && self.id.is_some()
    }

    /// Whether `body` may name its protocol revision in its `_meta`, told without parsing it: `false` only when the
    /// key is not in it, neither as written nor escaped (a body with no backslash cannot spell it another way). A
    /// session's request that answers `false` keeps its session slot without a second parse of its body, the SDK
    /// serving it in that session (a body that is not JSON included: the SDK answers it there).
    pub(super) fn may_name_its_revision(body: &[u8]) -> bool {
        memchr::memchr(b'\\', body).is_some() || REVISION_KEY_FINDER.find(body).is_some()
    }

    /// Whether the message names its protocol revision in its `_meta`: the SDK may then serve it without a session
    /// whatever its session header says (a request that negotiates per request), so it is counted as one.
    pub(super) fn names_its_revision(&self) -> bool {
        self.params.as_ref().and_then(|p| p.meta.as_ref()).is_some_and(|m| m.protocol_version.is_some())
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
