//! keel declares LLM tools at compile time.
//!
//! A `#[tool]` fn is the single source of a tool's contract: its name, description, version, effect, argument
//! schema and result schema. The same [`Registry`] produces what the model sees ([`ToolView::ollama_schemas`],
//! [`ToolView::schemas`] for OpenAI, Anthropic, Gemini and MCP) and what the [`Executor`] allows, so the two cannot
//! drift.
//!
//! ```
//! use tool_core::{tool, Executor, Registry, ToolCall};
//!
//! /// Adds two integers.
//! #[tool(effect = "read", version = "1.0")]
//! fn add(#[arg(description = "The first term")] a: i64, b: i64) -> i64 {
//!     a + b
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let registry = Registry::from_inventory().unwrap();
//! let view = registry.view().names(["add"]).build().unwrap();
//! assert_eq!(view.ollama_schemas()[0]["function"]["name"], "add");
//!
//! let executor = Executor::new(view).unwrap();
//! let ok = executor.call(ToolCall::new("c1", "add", serde_json::json!({"a": 1, "b": 2}))).await;
//! assert_eq!(ok.data(), Some(&serde_json::json!(3)));
//! let bad = executor.call(ToolCall::new("c2", "add", serde_json::json!({"a": "1", "b": 2}))).await;
//! assert_eq!(bad.code(), Some("invalid_arguments"));
//! # });
//! ```
//!
//! # The `#[tool]` attribute
//!
//! | key | required | meaning |
//! |---|---|---|
//! | `effect = "read" \| "write" \| "destructive"` | yes | what the tool does to the world; `write` and `destructive` need an [`Approval`] under the default policy |
//! | `version = "MAJOR.MINOR[.PATCH]"` | yes | the contract's version, reported in every result |
//! | `name = "incident.search"` | no | dot-separated snake_case segments, 1-64 characters (default: the fn name) |
//! | `description = "..."` | if no doc comment | what the model reads; the fn's doc comment by default |
//! | `idempotent = bool` | no | default: true for `read`, false otherwise |
//! | `timeout_ms = N` | no | the tool's own timeout (default: the executor's) |
//! | `tags = ["..."]` | no | for choosing views |
//! | `blocking = false` | no | a plain fn normally runs on the blocking pool; `false` runs it inline (for cheap, non-blocking work) |
//! | `crate = "path"` | no | the path of this crate if it cannot be found in `Cargo.toml` |
//!
//! Arguments come in three forms: one parameter whose type is an args struct (`Deserialize + JsonSchema`);
//! several named parameters, gathered into a generated struct (`#[arg(description = "...")]` documents one;
//! `Option<T>` is not required); or none (an empty object). A single parameter of a plain type (`String`, numbers,
//! `Vec`, `Option`, ...) or one marked `#[arg]` is a named argument, not an args struct. Parameters of type
//! [`CallContext`] and [`State<T>`] are injected and never appear in a schema. The return type is `T` or
//! `Result<T, E>` with `T: Serialize + JsonSchema` and `E: Into<ToolError>` (any `std::error::Error` converts
//! into an internal error; [`ToolError::new`] makes a business error with the tool's own code).
//!
//! Mistakes are compile errors at the offending token: unknown or repeated keys, non-literal values, an effect
//! outside the closed set, a malformed version or name, a missing description, generic fns, methods, `extern` and
//! `unsafe` fns. Two tools with the same name in one crate are a compile error at both names; across crates,
//! [`Registry::from_inventory`] fails with every definition site.
//!
//! # Crate features
//!
//! | feature | default | what it brings |
//! |---|---|---|
//! | `macros` | yes | the `#[tool]` attribute (compiles `syn`); without it, define tools with [`ToolDefinition::builder`] |
#![forbid(unsafe_code)]
#![warn(missing_docs)]

// Lets `::tool_core::...` paths in generated code resolve inside this crate's own tests and examples too.
extern crate self as tool_core;

// The modules form layers; each imports only the ones above it in this list (checked by `tests/layers.rs`):
//   effect, error, canonical, failure, call, context, content, validate, params
//   -> result -> schema (neutral schemas and pure renderers) -> definition -> view -> registry -> policy
//   -> executor -> event -> run -> lint, lock.
// The core modules are private: each of their public items has one path, at the root. `canonical`, `lint`,
// `lock` and `name` are toolboxes whose items are only there.
mod call;
pub mod canonical;
mod content;
mod context;
mod definition;
mod effect;
mod error;
mod event;
mod executor;
mod failure;
pub mod lint;
pub mod lock;
mod params;
mod policy;
mod registry;
mod result;
mod run;
mod schema;
mod validate;
mod view;

#[doc(hidden)]
pub mod __private;

/// The tool-name grammar: validation and the provider wire-name mapping.
pub mod name {
    pub use tool_names::{MAX_NAME_LEN, NameError, from_wire, is_valid_version, parse_version, to_wire, validate};
}

pub use call::{ArgumentsError, ToolCall};
pub use content::{Content, ContentBlock, EmbeddedResource, content_schema, is_content_schema};
pub use context::{
    Args, CallContext, CallContextBuilder, FromCallContext, LogLevel, MissingState, Notifier, Requirements, State,
    StateMap,
};
pub use definition::{
    BoxFuture, DefinitionError, DynHandler, Handler, IntoDynHandler, Origin, SourceLocation, ToolDefinition,
    ToolDefinitionBuilder,
};
pub use effect::Effect;
pub use error::{ErrorCode, InvalidToolCode, RESERVED_CODES, ToolCode, ToolError};
pub use event::{Decision, Event, EventKind, EventLog, EventSink, JsonLinesWriter, NotExecuted};
pub use executor::{CallOptions, Executor, ExecutorBuilder, ExecutorError};
pub use failure::{FailureKind, InternalFailure};
pub use policy::{Approval, Approvals, EffectPolicy, Policy, PolicyDecision, PolicyRequest};
pub use registry::{Registry, RegistryBuilder, RegistryError, RegistryProblem};
pub use result::{ErrorBody, Outcome, ToolResult};
pub use run::{BatchOutcome, Decider, DefaultDecider, Run, RunBuilder, RunState, StopPolicy};
pub use schema::{Provider, ToolSchemas};
pub use tokio_util::sync::CancellationToken;
pub use validate::{CompiledSchema, Limits, SchemaError, Violation};
pub use view::{ExecutorEntry, ToolDescriptions, ToolView, UnknownTools, ViewBuilder};

#[cfg(feature = "macros")]
pub use tool_macros::tool;

/// Makes sure the tools of library crates are collected into this binary's registry.
///
/// `#[tool]` registers through `inventory`, which sees only crates that the final binary actually links. A crate
/// listed in `Cargo.toml` but never named in code is not linked, so its tools silently do not appear. Name each
/// tool crate once, anywhere in the binary (typically next to `main`):
///
/// ```ignore
/// tool_core::link_tools!(incident_tools, billing_tools);
/// ```
///
/// This expands to `use incident_tools as _;` for each crate, which is enough for the linker to keep their
/// registrations. To catch a forgotten crate in CI, assert on the expected names after building the registry.
#[macro_export]
macro_rules! link_tools {
    ($($krate:ident),+ $(,)?) => {
        $(
            #[allow(unused_imports)]
            use $krate as _;
        )+
    };
}

#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
