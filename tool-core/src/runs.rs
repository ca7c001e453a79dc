//! An agent run over many model turns ([`Run`], its [`Decider`], [`Concurrency`] and [`StopPolicy`]), and the
//! calls that wait for a human: each kept as a signed [`PendingCall`] in a [`PendingStore`] such as the
//! [`FileStore`], under an [`ApprovalKey`], until its [`Resolution`].
//!
//! The files: `run.rs` is the run and its batches; `pending.rs` is a pending call, its signature and
//! `Executor::resume`, with the store contract in `pending/store.rs` and the [`FileStore`] in `pending/file.rs`.

mod pending;
mod run;

pub use pending::{ApprovalKey, ApprovalKeyError, FileStore, PendingCall, PendingStore, PendingStoreError, Resolution};
pub use run::{BatchOutcome, Concurrency, Decider, DefaultDecider, Run, RunBuilder, RunState, StopPolicy};
