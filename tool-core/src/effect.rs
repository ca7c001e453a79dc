//! [`Effect`]: what a tool does to the world.

use std::fmt;

use serde::{Deserialize, Serialize};

/// [`Effect`]: what a tool does to the world.
///
/// What a tool does to the world. Decides the default approval policy and the MCP annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Effect {
    /// Reads only; runs without approval.
    Read,
    /// Changes state; needs an approval under the default policy.
    Write,
    /// Deletes or irreversibly changes state; needs an approval under the default policy.
    Destructive,
}

impl Effect {
    /// `"read"`, `"write"` or `"destructive"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
            Effect::Destructive => "destructive",
        }
    }

    /// Parses the lowercase spelling used by `#[tool(effect = "...")]`.
    pub fn parse(s: &str) -> Option<Effect> {
        match s {
            "read" => Some(Effect::Read),
            "write" => Some(Effect::Write),
            "destructive" => Some(Effect::Destructive),
            _ => None,
        }
    }
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
