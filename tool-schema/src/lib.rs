//! keel's JSON Schema engine, used by the runtime (`keel-tools-core`), the catalogue and the contract tools.
//!
//! Every tool's argument and result schema goes through this crate:
//!
//! - [`CompiledSchema`] validates untrusted values against a draft 2020-12 schema. Its fast path covers the
//!   shapes plain Rust types give and allocates nothing; a failure is explained as [`Violation`]s, each with a
//!   JSON pointer and a sentence a model can act on.
//! - [`Limits`] bounds the size and depth of untrusted values, checked before anything walks them
//!   ([`validate::check_limits`]); [`bounded`] serialises a result straight into a value within those limits.
//! - [`canonical`] gives one byte-exact text, and hashes, per JSON value; [`vocabulary`] knows every keyword and
//!   where it holds subschemas; [`transform`] holds the pure schema rewrites that the provider renderers build
//!   on, and [`dialect`] the subsets Ollama and OpenAI's strict mode accept; [`rustdoc`] turns doc-comment markup
//!   into the plain text a model reads.
//!
//! Nothing here panics on any input, however malformed: every walk has a depth limit and non-schema values are
//! copied through unchanged.
//!
//! ```
//! use serde_json::json;
//! use keel_tools_schema::CompiledSchema;
//!
//! let schema = CompiledSchema::compile(&json!({
//!     "type": "object",
//!     "properties": {"id": {"type": "integer", "minimum": 1}},
//!     "required": ["id"],
//! }))
//! .unwrap();
//! assert!(schema.is_valid(&json!({"id": 7})));
//! let violations = schema.validate(&json!({"id": 0})).unwrap_err();
//! assert_eq!(violations[0].pointer, "/id");
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

// The modules form layers; each imports only the ones above it in this list (checked by the `layers` test of
// `tests/`): limits, text, vocabulary -> bounded, canonical, rustdoc, transform, validate
// -> dialect.
pub mod bounded;
pub mod canonical;
pub mod dialect;
mod limits;
pub mod rustdoc;
pub mod text;
pub mod transform;
pub mod validate;
pub mod vocabulary;

pub use limits::Limits;
pub use validate::{CompiledSchema, SchemaError, Violation};
