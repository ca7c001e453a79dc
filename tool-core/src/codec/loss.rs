//! What a provider's format does not carry: each codec's losses, as data.

use std::fmt;

use serde::Serialize;

use crate::schema::Provider;

/// Something of a tool's contract that a provider's format does not carry to the model as the canonical schema
/// says it, found by that provider's [`Codec`](crate::Codec) ([`Codec::losses`](crate::Codec::losses)).
///
/// `at` is a JSON pointer into the tool's entry in [`Codec::tools`](crate::Codec::tools) (or, for a loss of the
/// provider's reply format, `tool` is `*` and `at` points into a reply), so that what a provider's own SDK drops
/// can be matched with the loss that announced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Loss {
    /// The provider.
    #[serde(serialize_with = "provider_label")]
    pub provider: Provider,
    /// The tool name; `*` for a loss of the provider's format itself (its replies).
    pub tool: String,
    /// Where: a JSON pointer into the tool's entry (into a reply when `tool` is `*`); empty for the whole entry.
    pub at: String,
    /// What becomes of it.
    pub kind: LossKind,
    /// What happens, in a sentence.
    pub message: String,
}

/// What becomes of what a format does not carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LossKind {
    /// Carried in another form, nothing lost to the model: a constraint said in the description, a wire name
    /// mapped back, a recursive type's stand-in.
    Adapted,
    /// Sent, but it does not reach the model (the provider, or its client library, drops it). The executor still
    /// enforces it: arguments are validated against the canonical schema.
    Dropped,
    /// The provider refuses the tool.
    Rejected,
}

impl LossKind {
    /// `adapted`, `dropped` or `rejected`.
    pub fn as_str(self) -> &'static str {
        match self {
            LossKind::Adapted => "adapted",
            LossKind::Dropped => "dropped",
            LossKind::Rejected => "rejected",
        }
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {} {}", self.provider.as_str(), self.tool, self.kind.as_str())?;
        if !self.at.is_empty() {
            write!(f, " at {}", self.at)?;
        }
        write!(f, ": {}", self.message)
    }
}

fn provider_label<S: serde::Serializer>(p: &Provider, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.as_str())
}

/// A JSON pointer segment for `key` (`~` and `/` escaped).
pub(crate) fn segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}
