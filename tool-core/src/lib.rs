//! keel declares LLM tools at compile time.
//!
//! A `#[tool]` fn is the single source of a tool's contract: its name, description, version, effect, argument
//! schema and result schema. The same [`Registry`] produces what the model sees ([`ToolView::ollama_schemas`], and
//! each provider's [`Codec`] for OpenAI, Anthropic, Gemini and MCP) and what the [`Executor`] allows, so the two
//! cannot drift.
//!
//! ```
//! use keel_tools_core::{tool, Executor, Registry, ToolCall};
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
//! target `keel_tools_core::internal`, and never to the model.
//!
//! # Where things are
//!
//! The root holds what a tool author needs: [`macro@tool`], [`Registry`], [`ToolView`], [`Executor`], [`ToolCall`],
//! [`ToolResult`], [`ToolError`] and [`tool_error!`], the extractors [`CallContext`], [`State`] and [`Args`],
//! [`Approval`], [`Provider`] and [`Codec`]. The rest is grouped by what it is used for: [`definition`],
//! [`registry`], [`executor`], [`context`], [`results`], [`content`], [`runs`], [`policy`], [`events`], [`codecs`]
//! and [`schema`]; [`name`] is the tool-name grammar.
//!
//! # Crate features
//!
//! | feature | default | what it brings |
//! |---|---|---|
//! | `macros` | yes | the `#[tool]` attribute (compiles `syn`); without it, define tools with [`ToolDefinition::builder`] |
//! | `otel` | no | an OpenTelemetry `execute_tool` span per call, after the GenAI semantic conventions (tool, call id, description; keel's code on failure; arguments and results only with `ExecutorBuilder::otel_content`) |
//!
//! [`FromCallContext`]: context::FromCallContext
//! [`ToolDefinition::canonical_arguments`]: definition::ToolDefinition::canonical_arguments
//! [`ExecutorBuilder::build`]: executor::ExecutorBuilder::build
//! [`ErrorCode`]: results::ErrorCode
//! [`ExecutorBuilder::on_internal_failure`]: executor::ExecutorBuilder::on_internal_failure
//! [`ToolDefinition::builder`]: definition::ToolDefinition::builder
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

// Lets `::keel_tools_core::...` paths in generated code resolve inside this crate's own tests and examples too.
extern crate self as keel_tools_core;

// The modules form layers; each imports only the ones before it in this list (checked by the `layers` test of
// `tests/`, which holds the list itself):
//   effect, error, failure, name, clock, lease, tasks -> input -> call, call_context, content -> params, result
//   -> tool_schemas (canonical schemas) -> tool_definition -> arguments -> registry (the registry and its views)
//   -> codec -> call_policy, otel -> once (the ledger of the tools that run once) -> executor -> event, pending
//   -> deferral (deferred tools and tool search) -> runs (pending calls, and runs over many turns).
// The JSON Schema engine (validation, limits, canonical JSON, the vocabulary, transforms) is the `keel-tools-schema`
// crate; the contract tools (the schema lock and the provider lint) are `keel-tools-contract`.
// Most modules are private; `content`, `deferral`, `executor`, `once`, `registry`, `runs` and `tasks` are public as
// they are (the executor's files are `executor/`, its flow in `executor/flow.rs`; a run's are `runs/`; the registry
// and its views are `registry/tools.rs` and `registry/view.rs`). Each public item has one public path: the root
// for what a tool author needs, else one of the modules below, which group the rest by what it is used for.
mod arguments;
mod call;
mod call_context;
mod call_policy;
mod clock;
mod codec;
pub mod content;
pub mod deferral;
mod effect;
mod error;
mod event;
pub mod executor;
mod failure;
mod input;
mod lease;
pub mod once;
#[cfg(feature = "otel")]
mod otel;
mod params;
pub mod registry;
mod result;
pub mod runs;
pub mod tasks;
mod tool_definition;
mod tool_schemas;

#[doc(hidden)]
pub mod __private;

/// The tool-name grammar: validation and the provider wire-name mapping.
pub mod name {
    pub use keel_tools_names::{
        MAX_NAME_LEN, NameError, from_wire, is_valid_version, parse_version, to_wire, validate,
    };
}

pub mod definition {
    //! What a tool is: its [`ToolDefinition`] (made by `#[tool]`, or by hand with a [`ToolDefinitionBuilder`]), its
    //! [`Effect`] and schemas ([`ToolSchemas`]), where it came from ([`Origin`]), and the erased [`Handler`] the
    //! executor runs.
    pub use crate::effect::Effect;
    pub use crate::tool_definition::{
        BoxFuture, DefinitionError, DynHandler, Handler, IntoDynHandler, Origin, SourceLocation, TaskStart,
        TaskSupport, ToolDefinition, ToolDefinitionBuilder,
    };
    pub use crate::tool_schemas::ToolSchemas;
}

pub mod context {
    //! What a handler can be given besides its arguments, beyond [`CallContext`](crate::CallContext) and
    //! [`State`](crate::State): custom extractors ([`FromCallContext`], [`Requirements`]), progress and log
    //! notifications ([`Notifier`]), input asked of the client while the call runs ([`ClientInput`],
    //! [`InputRequest`]), and a context built outside the executor, as tests do ([`CallContextBuilder`]).
    pub use crate::call_context::{
        CallContextBuilder, FromCallContext, LogLevel, MissingState, Notifier, Requirements, StateMap,
    };
    pub use crate::input::{ClientInput, Elicitation, InputError, InputFuture, InputKind, InputRequest};
}

pub mod results {
    //! Reading a [`ToolResult`](crate::ToolResult): its [`Outcome`], the [`ErrorBody`] of a failed call with its
    //! stable [`ErrorCode`], and the codes a tool gives its own errors ([`ToolCode`], never one of the
    //! [`RESERVED_CODES`]). [`ArgumentsError`] says why a call's arguments cannot be used; [`same_error`] is the
    //! equality of errors that keep their sources.
    pub use crate::call::ArgumentsError;
    pub use crate::error::{ErrorCode, InvalidToolCode, RESERVED_CODES, ToolCode, error_chain, same_error};
    pub use crate::result::{ErrorBody, HandlerState, Outcome};
}

pub mod policy {
    //! Which calls may run: a [`Policy`] answers each [`PolicyRequest`] with a [`PolicyDecision`]. The default,
    //! [`EffectPolicy`], runs `read` tools and asks for an [`Approval`](crate::Approval) of the exact arguments of
    //! the others, which a call carries in its [`Approvals`].
    pub use crate::call_policy::{Approvals, EffectPolicy, Policy, PolicyDecision, PolicyRequest};
}

pub mod events {
    //! The event log of a run: what was observed, in order, each [`Event`] ([`EventKind`]) tied to its call id,
    //! with the run's [`Decision`] after each observation and the calls [`NotExecuted`] once it stopped. An
    //! [`EventLog`] keeps them; an [`EventSink`] such as the [`JsonLinesWriter`] receives each as it is appended.
    //! An agent loop logs its model turns too, with the tokens each cost ([`Usage`]).
    pub use crate::event::{Decision, Event, EventKind, EventLog, EventSink, JsonLinesWriter, NotExecuted, Usage};
}

pub mod codecs {
    //! What a [`Codec`](crate::Codec) hands back: the [`ParsedMessage`] it reads from a provider's assistant
    //! message, the [`MessageError`] of one it cannot read, and each [`Loss`] ([`LossKind`]): what a provider's
    //! format does not carry of a tool's contract. [`McpReply`] is MCP's reply to a result in parts, for a server that
    //! builds its SDK's type from them.
    pub use crate::codec::{Loss, LossKind, McpContent, McpReply, MessageError, ParsedMessage};
}

pub mod schema {
    //! The JSON Schema engine keel validates with (the `keel-tools-schema` crate): a [`CompiledSchema`], the
    //! [`Violation`]s of a value that fails it, the [`SchemaError`] of a schema that does not compile, and the
    //! [`Limits`] on the size and depth of untrusted values. The toolboxes [`canonical`] (one byte-exact text, and
    //! hashes, per JSON value) and [`vocabulary`] (every keyword, and where it holds subschemas) are here too.
    pub use keel_tools_schema::{CompiledSchema, Limits, SchemaError, Violation, canonical, vocabulary};
}

pub use call::ToolCall;
pub use call_context::{Args, CallContext, State};
pub use call_policy::Approval;
pub use codec::Codec;
pub use error::ToolError;
pub use executor::flow::Executor;
pub use registry::tools::Registry;
pub use registry::view::ToolView;
pub use result::ToolResult;
pub use tool_schemas::{Provider, Strict};

#[cfg(feature = "macros")]
pub use keel_tools_macros::tool;

/// Makes sure the tools of library crates are collected into this binary's registry.
///
/// `#[tool]` registers through `inventory`, which sees only crates that the final binary actually links. A crate
/// listed in `Cargo.toml` but never named in code is not linked, so its tools silently do not appear. Name each
/// tool crate once, anywhere in the binary (typically next to `main`):
///
/// ```
/// # mod incident_tools {}
/// # mod billing_tools {}
/// keel_tools_core::link_tools!(incident_tools, billing_tools);
/// # fn main() {}
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
