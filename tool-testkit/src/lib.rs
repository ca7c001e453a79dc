//! keel's testkit for the tools you write: a property test of every tool in one line, and models that drive the
//! agent loop without a model server.
//!
//! ```standalone_crate
//! use keel_tools_core::{tool, Registry};
//!
//! /// Splits a text into words.
//! #[tool(effect = "read", version = "1.0")]
//! fn split_words(text: String, #[arg(description = "At most this many words")] limit: Option<u8>) -> Vec<String> {
//!     let words = text.split_whitespace().map(str::to_owned);
//!     words.take(limit.map_or(usize::MAX, usize::from)).collect()
//! }
//!
//! keel_tools_testkit::check_tools(&Registry::from_inventory().unwrap());
//! ```
//!
//! [`check_tools`] runs every tool of a [`Registry`](keel_tools_core::Registry) or a [`ToolView`](keel_tools_core::ToolView)
//! through a real [`Executor`](keel_tools_core::Executor) with arguments generated from its argument schema, and checks
//! two properties:
//!
//! - valid arguments never end in `tool_internal_error` (an error or a panic inside the tool) or
//!   `invalid_tool_output` (a result that breaks the tool's own result schema);
//! - arguments that break the schema (a wrong type, a missing required property, an unknown property, a bound, a
//!   length, an `enum`) end in `invalid_arguments`, without running the handler.
//!
//! The executor approves every call, so the handlers of `write` and `destructive` tools run too: give them test
//! doubles as state ([`ToolCheck::executor`]) or leave them out ([`ToolCheck::skip`]). A failure is shrunk to
//! small arguments and reported with the tool, the arguments, the result's code and body and the seed;
//! `KEEL_TESTKIT_SEED=<seed> cargo test` re-runs it. Values come from [`proptest`] strategies built from the
//! schema ([`schema`]); a tool whose schema the generator does not understand is skipped with a note, never
//! failed.
//!
//! [`TestModel`] and [`ScriptedModel`] are [`ChatModel`](keel_tools_agent::ChatModel)s for tests of the loop
//! ([`Agent`](keel_tools_agent::Agent)): the first calls every tool it is shown with generated arguments and then
//! answers, the second plays the turns it is given. Both write their calls as a provider does (wire names,
//! arguments as JSON text) and read them back through the view's codec.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod check;
mod imports;
mod model;
pub mod schema;
mod seed;

pub use check::{
    CheckError, Failure, Outcome, Problem, Property, Report, SEED_VAR, ToolCheck, ToolReport, Tools, check_tools,
    try_check_tools,
};
pub use model::{ScriptedModel, ScriptedTurn, TestModel};
