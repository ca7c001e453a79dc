//! Schemas: the canonical JSON Schema 2020-12 of each tool, and its rendering into each provider's format.
//!
//! STUB: the full implementation (canonicalisation, inlining, provider renderers) lives in this folder.

use serde_json::Value;

use crate::definition::ToolDefinition;

/// The providers whose tool formats keel renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// Ollama `/api/chat` `tools`.
    Ollama,
    /// OpenAI Chat Completions `tools`.
    OpenAiChat,
    /// OpenAI Responses `tools`.
    OpenAiResponses,
    /// Anthropic Messages `tools`.
    Anthropic,
    /// Gemini `functionDeclarations`.
    Gemini,
    /// MCP `tools/list` entries.
    Mcp,
}

/// A tool's schemas, produced once per definition and cached.
pub struct ToolSchemas {
    pub(crate) input: Value,
    pub(crate) output: Option<Value>,
}

impl ToolSchemas {
    pub(crate) fn new(input: Value, output: Option<Value>) -> ToolSchemas {
        ToolSchemas { input, output }
    }
}

impl ToolDefinition {
    /// This tool in `provider`'s format, rendered once and cached.
    pub fn render(&self, provider: Provider) -> &Value {
        let _ = provider;
        todo!()
    }
}
