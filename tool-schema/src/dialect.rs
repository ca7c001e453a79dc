//! The subsets of JSON Schema that providers accept, each a pure function from a canonical schema to what that
//! provider is sent.
//!
//! A canonical schema (draft 2020-12, `$defs` and all) is what keel validates against; some providers take less.
//! [`ollama`] rewrites a schema into the fixed structure Ollama reads and says in words what would be lost;
//! [`openai_strict`] converts it into OpenAI's strict-mode subset, or says why it cannot; [`anthropic_strict`]
//! does the same for Anthropic's strict tool use. None of them ever panics, and none changes what is valid: the
//! executor still validates against the canonical schema.
//!
//! Providers that take JSON Schema as it is (Anthropic, Gemini's `parametersJsonSchema`, MCP) need only the
//! inlining of [`transform`](crate::transform).

pub mod anthropic_strict;
pub mod ollama;
pub mod openai_strict;
mod strict;
