//! keel declares LLM tools at compile time.
//!
//! A `#[tool]` fn is the single source of a tool's contract: its name, description, version, effect, argument
//! schema and result schema. The same [`Registry`] produces what the model sees ([`ToolView::ollama_schemas`], and
//! each provider's [`Codec`] for OpenAI, Anthropic, Gemini and MCP) and what the [`Executor`] allows, so the two
//! cannot drift.
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
//! [`macro@tool`] is its full reference: the keys, the three parameter roles (injected extractors such as
//! [`CallContext`] and [`State<T>`], the whole arguments [`Args<T>`], named arguments), the return forms and the
//! compile errors. In short: `effect` and `version` are required, the doc comment is the description, a
//! parameter whose type implements [`FromCallContext`] is filled from the call, every other one is an argument,
//! and a handler returns `T` or `Result<T, E>` with any error type that Rust code writes ([`tool_error!`] for the
//! errors the model should read).
//!
//! # Providers
//!
//! A [`Codec`] is one provider's side of a conversation, bound to a view: `view.codec(Provider::OpenAiChat)` lists
//! the tools in OpenAI's format, reads the calls an OpenAI response carries (wire names such as `notes-search`
//! mapped back to `notes.search`) and writes the replies to their results. What the model is shown and what it
//! sends back go through that one object. [`ToolView::ollama_schemas`] is the shorthand for Ollama's tool list.
//!
//! Every call's arguments are then brought into one canonical form
//! ([`ToolDefinition::canonical_arguments`]): a strict-mode `null`, an `Option`'s `null` and a spelled-out default
//! all mean "absent", so validation, the policy, approvals and the handler agree on what was asked.
//!
//! # Failures
//!
//! Configuration mistakes fail before the first call: [`Registry::from_inventory`] reports duplicate names, bad
//! parameters and schemas that do not compile, each with the tool and its site; [`ExecutorBuilder::build`] reports
//! every tool whose `State<T>` (or other extractor's need) the executor lacks. At run time, each call ends with a
//! stable [`ErrorCode`]; internal failures (an internal error with its source chain, a panic's text, an invalid
//! result) go to [`ExecutorBuilder::on_internal_failure`], by default a `tracing` event at `ERROR` level with
//! target `tool_core::internal`, and never to the model.
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

// The modules form layers; each imports only the ones above it in this list (checked by the `layers` test of `tests/`):
//   effect, error, failure, clock -> input -> call, context, content -> params, result
//   -> schema (canonical schemas) -> definition -> arguments -> view -> codec -> registry -> policy
//   -> executor -> event, pending -> run.
// The JSON Schema engine (validation, limits, canonical JSON, the vocabulary, transforms) is the `tool-schema` crate;
// the contract tools (the schema lock and the provider lint) are `tool-contract`.
// The core modules are private: each of their public items has one path, at the root. `canonical`, `name` and
// `vocabulary` are toolboxes whose items are only there.
mod arguments;
mod call;
mod clock;
mod codec;
mod content;
mod context;
mod definition;
mod effect;
mod error;
mod event;
mod executor;
mod failure;
mod input;
#[cfg(feature = "otel")]
mod otel;
mod params;
mod pending;
mod policy;
mod registry;
mod result;
mod run;
mod schema;
mod view;

#[doc(hidden)]
pub mod __private;

/// The tool-name grammar: validation and the provider wire-name mapping.
pub mod name {
    pub use tool_names::{MAX_NAME_LEN, NameError, from_wire, is_valid_version, parse_version, to_wire, validate};
}

pub use call::{ArgumentsError, ToolCall};
pub use codec::{Codec, Loss, LossKind, MessageError, ParsedMessage};
pub use content::{Content, ContentBlock, EmbeddedResource, content_schema, is_content_schema};
pub use context::{
    Args, CallContext, CallContextBuilder, FromCallContext, LogLevel, MissingState, Notifier, Requirements, State,
    StateMap,
};
pub use definition::{
    BoxFuture, DefinitionError, DynHandler, Handler, IntoDynHandler, Origin, SourceLocation, TaskStart, TaskSupport,
    ToolDefinition, ToolDefinitionBuilder,
};
pub use effect::Effect;
pub use error::{ErrorCode, InvalidToolCode, RESERVED_CODES, ToolCode, ToolError};
pub use event::{Decision, Event, EventKind, EventLog, EventSink, JsonLinesWriter, NotExecuted};
pub use executor::{CallOptions, Executor, ExecutorBuilder, ExecutorError, ExecutorProblem};
pub use failure::{FailureKind, InternalFailure};
pub use input::{ClientInput, Elicitation, InputError, InputFuture, InputKind, InputRequest};
pub use pending::{ApprovalKey, ApprovalKeyError, FileStore, PendingCall, PendingStore, PendingStoreError, Resolution};
pub use policy::{Approval, Approvals, EffectPolicy, Policy, PolicyDecision, PolicyRequest};
pub use registry::{Registry, RegistryBuilder, RegistryError, RegistryProblem};
pub use result::{ErrorBody, HandlerState, Outcome, ToolResult};
pub use run::{BatchOutcome, Concurrency, Decider, DefaultDecider, Run, RunBuilder, RunState, StopPolicy};
pub use schema::{Provider, ToolSchemas};
pub use tokio_util::sync::CancellationToken;
pub use tool_schema::{CompiledSchema, Limits, SchemaError, Violation, canonical, vocabulary};
pub use view::{ExecutorEntry, ToolDescriptions, ToolList, ToolView, UnknownTools, ViewBuilder};

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
