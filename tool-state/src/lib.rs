//! Call state shared by replicas: the calls that wait for a human ([`PendingStore`]s), the records that make an
//! effect happen once ([`EffectStore`]s) and the long-running calls every replica answers for ([`TaskStore`]s), in
//! a SQLite file (feature `sqlite`, on by default) or a PostgreSQL database (feature `postgres`).
//!
//! keel's executor keeps no state between calls in memory that another process would need. What must outlive a
//! call, or be seen by every replica of a service, goes to a store:
//!
//! | state | trait | SQLite | PostgreSQL |
//! |---|---|---|---|
//! | a call waiting for an approval: a signed [`PendingCall`](keel_tools_core::runs::PendingCall), resolved later by any replica with [`Executor::resume`](keel_tools_core::Executor::resume) | [`PendingStore`] (keel-tools-core, sync) | [`SqlitePendingStore`] | [`PostgresPendingStore`] |
//! | an effect's record: running under a lease, or finished with its result, so that a retried call replays the result instead of running again | [`EffectStore`] (async) | [`SqliteEffectStore`] | [`PostgresEffectStore`] |
//! | a task: a long-running call (MCP's `tasks/get`, `tasks/result`, `tasks/cancel`) run by one replica under a lease, read, awaited, answered and cancelled by any, `lost` if its runner stops renewing the lease | [`TaskStore`] (async) | [`SqliteTaskStore`] | [`PostgresTaskStore`] |
//!
//! Both kinds of store keep the contract of keel-tools-core's [`FileStore`](keel_tools_core::runs::FileStore)
//! for pending calls: whole records, each taken once across processes and machines, expired records refused by
//! `resume`, and records kept verbatim, so that a record changed in the database fails its MAC and is refused
//! (`approval_stale`). [`effect`] describes the protocol of effect records, [`task`] the life of a task.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//!
//! use keel_tools_core::executor::CallOptions;
//! use keel_tools_core::runs::{ApprovalKey, PendingCall, PendingStore, Resolution};
//! use keel_tools_core::{Executor, Registry, ToolCall, tool};
//! use keel_tools_state::{Begin, EffectStore, SqliteEffectStore, SqlitePendingStore};
//!
//! /// Close a ticket.
//! #[tool(effect = "write", version = "1.0")]
//! fn close_ticket(ticket: String) -> String {
//!     format!("closed {ticket}")
//! }
//!
//! # let dir = std::env::temp_dir().join(format!("keel-state-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let file = dir.join("state.db"); // created 0600, shared by this machine's processes
//! let pending = SqlitePendingStore::open(&file)?;
//! let effects = SqliteEffectStore::open(&file)?;
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! // Every process that resolves pending calls holds the same key.
//! let key = ApprovalKey::new(b"thirty-two bytes or more, kept secret")?;
//! let view = Registry::from_inventory()?.view().names(["close_ticket"]).build()?;
//! let executor = Executor::builder(view).approval_key(key).build()?;
//!
//! // The policy asks for an approval: the call waits in the store...
//! let asked = executor.call(ToolCall::new("c1", "close_ticket", serde_json::json!({"ticket": "T-1"}))).await;
//! assert_eq!(asked.code(), Some("approval_required"));
//! let call = PendingCall::from_result(&executor, &asked, Some("alice"), Duration::from_secs(3600)).unwrap();
//! pending.save(&call)?;
//!
//! // ...until a human approves it, in this process or another: exactly one taker gets it.
//! let taken = pending.take(&call.key())?.expect("saved above");
//! assert_eq!(pending.take(&call.key())?, None, "taken once");
//! let done = executor.resume(&taken, &Resolution::Approve, &CallOptions::new()).await;
//! assert_eq!(done.data(), Some(&serde_json::json!("closed T-1")));
//!
//! // An effect named by its key runs once; a retry replays its result.
//! let lease = match effects.begin("order-42", "charge:sha256-of-arguments", Duration::from_secs(30)).await? {
//!     Begin::Run(lease) => lease,
//!     other => panic!("a new key runs: {other:?}"),
//! };
//! effects.finish(&lease, &serde_json::json!({"charged": 42})).await?;
//! let again = effects.begin("order-42", "charge:sha256-of-arguments", Duration::from_secs(30)).await?;
//! assert_eq!(again, Begin::Replay(serde_json::json!({"charged": 42})));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(()) }
//! ```
//!
//! # Tables
//!
//! Each store keeps one table (`keel_pending_calls`, `keel_effects`, `keel_tasks`, or the name given to its
//! builder: a plain lowercase identifier), created on open or connect, and records it in `keel_state_schema` with
//! its schema version ([`SCHEMA_VERSION`]); a table recorded by a newer build, or as another kind, is refused
//! (`config_error`). The stores may share a file or a database with each other and with a keel-tools-catalog
//! catalogue.
//!
//! | `keel_pending_calls` | |
//! |---|---|
//! | `key` text, primary key | [`PendingCall::key`](keel_tools_core::runs::PendingCall::key) |
//! | `record` text | the signed record's JSON, verbatim |
//! | `expires_at_ms` bigint | its `expires_at_ms`, for purging |
//! | `saved_at_ms` bigint | when it was saved |
//!
//! | `keel_effects` | |
//! |---|---|
//! | `key` text, primary key | the effect's key |
//! | `fingerprint` text | the call's fingerprint, given by the caller |
//! | `state` text | `running` or `done` |
//! | `lease`, `lease_until_ms` | the current lease's token and expiry (running) |
//! | `result` text | the result's JSON (done) |
//! | `updated_ms` bigint | when it was claimed or finished |
//!
//! | `keel_tasks` | |
//! |---|---|
//! | `id` text, primary key | the task's id |
//! | `tool`, `tenant`, `principal` text | what the call runs, and whose it is ([`NewTask`]) |
//! | `status` text | `working`, `input_required`, `completed`, `failed`, `cancelled` or `lost` |
//! | `message` text | the status message |
//! | `version` bigint | 1 when created, one more with each change a reader can see |
//! | `lease`, `lease_until_ms` | the owner's lease token and its expiry (until the task ends) |
//! | `lease_ms`, `keep_ms`, `poll_ms` bigint | the lease time each heartbeat renews, how long the ended task is kept, the poll interval hint |
//! | `request` text | the input request's JSON (`input_required`) |
//! | `answers` text | the answers not yet taken by the owner: a JSON array |
//! | `outcome` text | the result's or the error's JSON (`completed`, `failed`) |
//! | `created_ms`, `updated_ms` bigint | when it was created and last changed |
//!
//! In PostgreSQL a trigger on the tasks' table (`<table>_changed`, function `<table>_notify()`) sends
//! `NOTIFY <table>_changes` with the task's id for each row inserted or whose `version` is set.
//!
//! # Errors
//!
//! Every failure is a [`StateError`] with a stable code; the [`PendingStore`] methods return them as
//! [`PendingStoreError`](keel_tools_core::runs::PendingStoreError)s (a row that is not a pending call as
//! `Corrupt`, anything else as `Io` with the `StateError` as its source). A row holding what the stores never
//! write is reported, never a panic, and left in place.

#![cfg_attr(docsrs, feature(doc_cfg))]
// Without a backend, only the vocabulary is public: the functions the backends share are unused.
#![cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]

pub mod effect;
mod error;
mod ledger;
mod pending;
#[cfg(feature = "postgres")]
pub mod postgres;
mod schema;
mod sql;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod task;

pub use effect::{Begin, EffectStore, Lease, StateFuture};
pub use error::{Source, StateError};
#[doc(no_inline)]
pub use keel_tools_core::runs::PendingStore;
#[cfg(feature = "postgres")]
pub use postgres::{PgBuilder, PostgresEffectStore, PostgresPendingStore, PostgresTaskStore};
pub use schema::{DEFAULT_EFFECT_TABLE, DEFAULT_PENDING_TABLE, DEFAULT_TASK_TABLE, SCHEMA_TABLE, SCHEMA_VERSION};
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteBuilder, SqliteEffectStore, SqlitePendingStore, SqliteTaskStore};
pub use task::{DynTaskStore, NewTask, Task, TaskChange, TaskLease, TaskStatus, TaskStore, Terminal, WaitFor};
