//! Configuring an [`Executor`] ([`ExecutorBuilder`]) and one call ([`CallOptions`], with its
//! [`CancellationToken`]), and what goes wrong: [`ExecutorError`] when the executor is built, and the
//! [`InternalFailure`] the operator (never the model) learns of a call that failed inside keel.
//!
//! The files: `flow.rs` is the executor and the fixed order of a call; `builder.rs` builds it, `options.rs` is one
//! call's options, `handler.rs` runs a handler under its deadline, `bodies.rs` writes the error bodies the model
//! reads, and `index.rs` finds a tool by name.

mod bodies;
mod builder;
pub(crate) mod flow;
mod handler;
mod index;
mod options;

pub use crate::failure::{FailureKind, InternalFailure};
pub use builder::{ExecutorBuilder, ExecutorError, ExecutorProblem};
pub use options::CallOptions;
pub use tokio_util::sync::CancellationToken;

use flow::{Executor, Inner};

/// The target of the executor's `tracing` events, those of every file here.
const TARGET: &str = "keel_tools_core::executor";
