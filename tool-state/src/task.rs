//! Long-running tool calls whose state every replica sees: the [`TaskStore`] trait and its vocabulary ([`Task`],
//! [`TaskStatus`], [`NewTask`], [`TaskLease`], [`Terminal`], [`WaitFor`], [`TaskChange`]).
//!
//! A task is a tool call that outlives its request (MCP's tasks: `tasks/get`, `tasks/result`, `tasks/cancel`). The
//! replica that runs it [`create`](TaskStore::create)s it and holds a [`TaskLease`] on it, which it renews with
//! [`heartbeat`](TaskStore::heartbeat); any replica reads it ([`get`](TaskStore::get), [`wait`](TaskStore::wait)),
//! answers its input requests ([`answer`](TaskStore::answer)) or [`cancel`](TaskStore::cancel)s it:
//!
//! ```text
//!            create                       finish(Completed | Failed)
//!   (none) ─────────▶ working ──────────────────────────────────────▶ completed | failed
//!                     │    ▲  ◀── answer (any replica)
//!      input_required │    │      working (owner)
//!                     ▼    │
//!                   input_required
//!
//!   working | input_required ── cancel (any replica) ─────────────────▶ cancelled
//!   working | input_required ── the lease expires before it ends ──────▶ lost
//! ```
//!
//! | status | who sets it | what it says |
//! |---|---|---|
//! | `working` | `create`, the owner's `working`, an `answer` | the call runs |
//! | `input_required` | the owner's `input_required` | the call waits for the answer to [`Task::input_request`] |
//! | `completed` | the owner's `finish` | [`Task::result`] holds the result |
//! | `failed` | the owner's `finish` | [`Task::error`] holds the error |
//! | `cancelled` | `cancel`, from any replica | the call was asked to stop; the owner's `heartbeat` says so (`task_ended`) |
//! | `lost` | whoever reads the task after its lease expired | the owner stopped renewing its lease before the task ended: the call may have run, in part or in full, and its outcome is unknown |
//!
//! - **Ended is final.** A task that ended (any status but `working` and `input_required`) never changes again:
//!   `cancel`, `answer` and the owner's changes are refused (`task_ended`; the owner of a `lost` task gets
//!   `lease_lost`). Of a `finish` and a `cancel` that race, exactly one wins: each is one `UPDATE … WHERE` the task
//!   has not ended, which the database applies to the row one at a time.
//! - **Never working forever, never completed by accident.** A task whose lease expired without it ending is
//!   reported `lost` by `get`, `wait`, `cancel`, `answer` and `purge_expired`, and recorded as lost (with
//!   [`LOST_MESSAGE`]), so that every replica reads the same. The owner's operations check the lease's expiry in
//!   the same statement that changes the task: an owner whose lease expired can no longer change it
//!   (`lease_lost`), even before anyone read it as lost.
//! - **Versions.** Each change a reader can see bumps [`Task::version`] in the statement that makes it;
//!   [`WaitFor::ChangedSince`] and [`TaskChange`] carry it. A heartbeat, and the owner taking the answers, change
//!   nothing a reader sees, and keep the version.
//! - **Kept, then removed.** An ended task is kept for its [`NewTask::keep_for`] after it ended, then is gone:
//!   `get` answers `None` at once, `create` may reuse its id, and `purge_expired` deletes it.
//! - **Clock.** Leases and keep times run by the store's clock: the database server's for PostgreSQL (the one clock
//!   every replica shares), this machine's for SQLite.
//! - **Tenants.** The store keeps the task's tenant and principal ([`NewTask::tenant`], [`NewTask::principal`]) and
//!   finds tasks by id alone: the caller compares them with the requester's before it answers.
//!
//! Changes are pushed: [`changes`](TaskStore::changes) feeds a [`TaskChange`] for each change any replica makes
//! (PostgreSQL's `NOTIFY`; SQLite is polled), for `notifications/tasks/status`, and `wait` wakes on them.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//!
//! use keel_tools_state::{NewTask, SqliteTaskStore, TaskStatus, TaskStore, Terminal, WaitFor};
//!
//! # let dir = std::env::temp_dir().join(format!("keel-task-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let file = dir.join("state.db");
//! let runner = SqliteTaskStore::open(&file)?; // the replica that runs the call
//! let other = SqliteTaskStore::open(&file)?; // another replica, answering tasks/get and tasks/result
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! let (task, lease) = runner.create(&NewTask::new("task-1", "reports.build")).await?;
//! assert_eq!(task.status, TaskStatus::Working);
//!
//! let waiting = tokio::spawn(async move { other.wait("task-1", WaitFor::Terminal, Duration::from_secs(30)).await });
//! runner.heartbeat(&lease).await?; // while it runs
//! runner.finish(&lease, Terminal::Completed(serde_json::json!({"rows": 42}))).await?;
//!
//! let done = waiting.await??.expect("the task is kept");
//! assert_eq!(done.status, TaskStatus::Completed);
//! assert_eq!(done.result, Some(serde_json::json!({"rows": 42})));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast;

use crate::effect::{self, StateFuture};
use crate::error::StateError;

/// The longest task id a store keeps, in bytes.
pub const MAX_TASK_ID_LEN: usize = 512;

/// How long a task's lease lasts by default (renewed by each heartbeat): 30 seconds.
pub const DEFAULT_TASK_LEASE: Duration = Duration::from_secs(30);

/// How long an ended task is kept by default: one hour.
pub const DEFAULT_KEEP_FOR: Duration = Duration::from_secs(60 * 60);

/// How often a client should poll a task, by default: every second.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The status message of a task reported lost.
pub const LOST_MESSAGE: &str = "the replica running this task stopped renewing its lease before the task ended: the \
                                call may have run, in part or in full, and its outcome is unknown";

/// The status message of a cancelled task.
pub const CANCELLED_MESSAGE: &str = "cancelled at a client's request";

/// Where a task is in its life; see the [module documentation](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskStatus {
    /// The call runs.
    Working,
    /// The call waits for the answer to its input request.
    InputRequired,
    /// The call ended with a result.
    Completed,
    /// The call ended with an error.
    Failed,
    /// The call was cancelled.
    Cancelled,
    /// The replica running the call stopped renewing its lease before the call ended: it may have run, in part or
    /// in full, and its outcome is unknown.
    Lost,
}

impl TaskStatus {
    /// Every status.
    pub const ALL: [TaskStatus; 6] = [
        TaskStatus::Working,
        TaskStatus::InputRequired,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
        TaskStatus::Lost,
    ];

    /// Its name, as the stores keep it: `working`, `input_required`, `completed`, `failed`, `cancelled`, `lost`.
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::Lost => "lost",
        }
    }

    /// The status of a name that [`as_str`](Self::as_str) gives.
    pub fn from_name(name: &str) -> Option<TaskStatus> {
        TaskStatus::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether the task has ended: every status but `working` and `input_required`. An ended task never changes.
    pub const fn is_terminal(self) -> bool {
        !matches!(self, TaskStatus::Working | TaskStatus::InputRequired)
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A task to [`create`](TaskStore::create): its id, the tool it runs, whose it is, and its times.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewTask {
    /// The task's id: unique among the tasks the store keeps, 1 to [`MAX_TASK_ID_LEN`] bytes.
    pub id: String,
    /// The tool the call runs.
    pub tool: String,
    /// The tenant the task belongs to, if any; kept for the caller to check.
    pub tenant: Option<String>,
    /// The principal that started it, if any; kept for the caller to check.
    pub principal: Option<String>,
    /// How long the owner's lease lasts, from its creation and from each heartbeat (default
    /// [`DEFAULT_TASK_LEASE`]).
    pub lease: Duration,
    /// How long the task is kept after it ended (default [`DEFAULT_KEEP_FOR`]): its time to live.
    pub keep_for: Duration,
    /// How often a client should poll it (default [`DEFAULT_POLL_INTERVAL`]): a hint, kept and returned.
    pub poll_interval: Duration,
}

impl NewTask {
    /// The task `id`, running `tool`, with no tenant or principal and the default times.
    pub fn new(id: impl Into<String>, tool: impl Into<String>) -> NewTask {
        NewTask {
            id: id.into(),
            tool: tool.into(),
            tenant: None,
            principal: None,
            lease: DEFAULT_TASK_LEASE,
            keep_for: DEFAULT_KEEP_FOR,
            poll_interval: DEFAULT_POLL_INTERVAL,
        }
    }

    /// The tenant the task belongs to.
    #[must_use]
    pub fn tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }

    /// The principal that started the task.
    #[must_use]
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// How long the owner's lease lasts (at least 1 ms).
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How long the task is kept after it ended.
    #[must_use]
    pub fn keep_for(mut self, keep_for: Duration) -> Self {
        self.keep_for = keep_for;
        self
    }

    /// How often a client should poll the task.
    #[must_use]
    pub fn poll_interval(mut self, poll_interval: Duration) -> Self {
        self.poll_interval = poll_interval;
        self
    }
}

/// A task as the store holds it. Times are milliseconds since the Unix epoch, by the store's clock.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Task {
    /// The task's id.
    pub id: String,
    /// The tool the call runs.
    pub tool: String,
    /// The tenant it belongs to, if any.
    pub tenant: Option<String>,
    /// The principal that started it, if any.
    pub principal: Option<String>,
    /// Where it is in its life.
    pub status: TaskStatus,
    /// A message on its status: the owner's (`working`), or why it ended (`cancelled`, `lost`).
    pub message: Option<String>,
    /// Counts its changes: 1 when created, one more with each change a reader can see.
    pub version: u64,
    /// When it was created.
    pub created_ms: u64,
    /// When it last changed.
    pub updated_ms: u64,
    /// How long it is kept after it ended, in milliseconds: its time to live.
    pub keep_for_ms: u64,
    /// How often a client should poll it, in milliseconds.
    pub poll_interval_ms: u64,
    /// The result (`completed`).
    pub result: Option<Value>,
    /// The error (`failed`).
    pub error: Option<Value>,
    /// The input request the call waits for an answer to (`input_required`).
    pub input_request: Option<Value>,
}

impl Task {
    /// Whether it has ended (see [`TaskStatus::is_terminal`]).
    pub fn is_terminal(&self) -> bool {
        self.status.is_terminal()
    }

    /// When it will be removed (ended tasks): [`updated_ms`](Self::updated_ms) plus
    /// [`keep_for_ms`](Self::keep_for_ms).
    pub fn expires_at_ms(&self) -> Option<u64> {
        self.is_terminal().then(|| self.updated_ms.saturating_add(self.keep_for_ms))
    }
}

/// The owner's hold on a task: its id, a token no one else has, and when it expires unless renewed by a
/// [`heartbeat`](TaskStore::heartbeat). Not secret: it tells owners apart, it proves nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskLease {
    id: String,
    token: String,
    expires_at_ms: u64,
}

impl TaskLease {
    /// The lease `token` on the task `id`, expiring at `expires_at_ms` (the store's clock). The stores make
    /// leases; this is for one kept elsewhere and brought back.
    pub fn new(id: impl Into<String>, token: impl Into<String>, expires_at_ms: u64) -> TaskLease {
        TaskLease { id: id.into(), token: token.into(), expires_at_ms }
    }

    /// The task's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// When it expires unless renewed, in milliseconds since the Unix epoch (the store's clock), as of when it was
    /// taken or last renewed.
    pub fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
}

/// How a task ends: [`finish`](TaskStore::finish)'s outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum Terminal {
    /// `completed`, with the call's result.
    Completed(Value),
    /// `failed`, with the call's error.
    Failed(Value),
}

impl Terminal {
    /// `completed` or `failed`.
    pub fn status(&self) -> TaskStatus {
        match self {
            Terminal::Completed(_) => TaskStatus::Completed,
            Terminal::Failed(_) => TaskStatus::Failed,
        }
    }

    /// The result or the error.
    pub fn value(&self) -> &Value {
        match self {
            Terminal::Completed(v) | Terminal::Failed(v) => v,
        }
    }
}

/// What [`wait`](TaskStore::wait) waits for. A task that ended satisfies each (it will not change again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitFor {
    /// The task ended (`tasks/result`).
    Terminal,
    /// The task ended, or waits for input: something for the client to act on.
    InputOrTerminal,
    /// The task's version is not this one any more: any change since a read.
    ChangedSince(u64),
}

impl WaitFor {
    /// Whether `task` satisfies it.
    pub fn is_met(self, task: &Task) -> bool {
        task.is_terminal()
            || match self {
                WaitFor::Terminal => false,
                WaitFor::InputOrTerminal => task.status == TaskStatus::InputRequired,
                WaitFor::ChangedSince(version) => task.version != version,
            }
    }
}

/// A change of a task, as [`changes`](TaskStore::changes) feeds it: for `notifications/tasks/status`. Read
/// [`get`](TaskStore::get) for the rest of the task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskChange {
    /// The task's id.
    pub id: String,
    /// Its status after the change.
    pub status: TaskStatus,
    /// Its version after the change.
    pub version: u64,
}

/// Where tasks are kept, shared by every replica that runs or answers them. See the
/// [module documentation](self) for the life of a task.
///
/// Implementations: [`SqliteTaskStore`](crate::SqliteTaskStore) (feature `sqlite`) and
/// [`PostgresTaskStore`](crate::PostgresTaskStore) (feature `postgres`); the contract tests of the workspace run
/// against both.
pub trait TaskStore: Send + Sync {
    /// Creates the task, `working`, and gives its owner (the caller) a lease on it, for [`NewTask::lease`].
    ///
    /// # Errors
    ///
    /// `task_exists` when the store keeps a task of this id (one that ended and passed its keep time is replaced);
    /// `invalid_key` for an empty id or one longer than [`MAX_TASK_ID_LEN`]; the store's errors.
    fn create<'a>(&'a self, task: &'a NewTask) -> StateFuture<'a, (Task, TaskLease)>;

    /// The task, or `None` when there is none (or it ended and passed its keep time). A task whose lease expired
    /// before it ended is recorded and returned `lost`.
    ///
    /// # Errors
    ///
    /// `invalid_key` for an id no task has (empty, or too long); `corrupt_row` when its row holds what the stores
    /// never write; the store's errors.
    fn get<'a>(&'a self, id: &'a str) -> StateFuture<'a, Option<Task>>;

    /// The task once it satisfies `until`, or as it is when `timeout` passes; `None` when there is none. Returns
    /// at once when the task satisfies `until` already (an ended task satisfies every `until`); otherwise wakes on
    /// each change any replica makes to it (pushed by the database, or polled), and when its lease expires (it is
    /// then `lost`). Holds no connection while it waits. Needs a Tokio runtime (its timer).
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    fn wait<'a>(&'a self, id: &'a str, until: WaitFor, timeout: Duration) -> StateFuture<'a, Option<Task>>;

    /// The owner's: the task works (again), with `message` as its status message; an input request it waited on
    /// is withdrawn.
    ///
    /// # Errors
    ///
    /// `lease_lost` when the lease expired (the task is lost) or is not the task's; `task_ended` when the task
    /// ended (cancelled, say); `unknown_task`; the store's errors. Nothing is changed.
    fn working<'a>(&'a self, lease: &'a TaskLease, message: Option<&'a str>) -> StateFuture<'a, Task>;

    /// The owner's: the task waits for input, `request` telling what (an MCP input request, say), until a replica
    /// [`answer`](Self::answer)s it.
    ///
    /// # Errors
    ///
    /// As [`working`](Self::working).
    fn input_required<'a>(&'a self, lease: &'a TaskLease, request: &'a Value) -> StateFuture<'a, Task>;

    /// Any replica's: answers the input request of the task `id`, which works again; the owner reads the answer
    /// with [`take_answers`](Self::take_answers). One answer per request: a second is refused.
    ///
    /// # Errors
    ///
    /// `input_not_requested` when the task is working (not waiting for input); `task_ended`; `unknown_task`; the
    /// store's errors. Nothing is changed.
    fn answer<'a>(&'a self, id: &'a str, answer: &'a Value) -> StateFuture<'a, Task>;

    /// The owner's: the answers given since it last took them, oldest first (none if none), taken once.
    ///
    /// # Errors
    ///
    /// As [`working`](Self::working); `corrupt_row` when the kept answers are not a JSON array.
    fn take_answers<'a>(&'a self, lease: &'a TaskLease) -> StateFuture<'a, Vec<Value>>;

    /// The owner's: renews the lease for the task's lease time from now (the store's clock), while it has not
    /// expired; the lease with its new expiry. The owner of a cancelled task learns it here (`task_ended`).
    ///
    /// # Errors
    ///
    /// As [`working`](Self::working).
    fn heartbeat<'a>(&'a self, lease: &'a TaskLease) -> StateFuture<'a, TaskLease>;

    /// The owner's: ends the task `completed` or `failed`, with its result or error; its lease is given up.
    ///
    /// # Errors
    ///
    /// As [`working`](Self::working): a task cancelled or lost is not finished.
    fn finish<'a>(&'a self, lease: &'a TaskLease, outcome: Terminal) -> StateFuture<'a, Task>;

    /// Any replica's: cancels the task (`cancelled`, with [`CANCELLED_MESSAGE`]); the owner learns it from its
    /// next heartbeat or change. Returns the cancelled task.
    ///
    /// # Errors
    ///
    /// `task_ended` when the task ended (it is not changed; a task whose lease expired is recorded `lost`
    /// first); `unknown_task`; the store's errors.
    fn cancel<'a>(&'a self, id: &'a str) -> StateFuture<'a, Task>;

    /// Records as `lost` every task whose lease expired before it ended, and deletes the tasks that ended longer
    /// ago than their keep time; how many were deleted.
    fn purge_expired(&self) -> StateFuture<'_, u64>;

    /// A feed of the changes of every task, by any replica, from now on: each change once, in version order for
    /// each task (a change overtaken by the next one before the store saw it may be skipped). A receiver that
    /// falls more than 1024 changes behind skips the oldest ([`broadcast::error::RecvError::Lagged`]).
    fn changes(&self) -> broadcast::Receiver<TaskChange>;
}

// ---- What the stores share ----

/// Checks a task id before it reaches a store.
pub(crate) fn check_id(id: &str) -> Result<(), StateError> {
    if id.is_empty() {
        return Err(StateError::InvalidKey { message: "a task id is empty".into() });
    }
    if id.len() > MAX_TASK_ID_LEN {
        return Err(StateError::InvalidKey {
            message: format!("a task id has {} bytes, more than {MAX_TASK_ID_LEN}", id.len()),
        });
    }
    Ok(())
}

/// A future that fails at once with `e`.
pub(crate) fn refuse<'a, T: Send + 'a>(e: StateError) -> StateFuture<'a, T> {
    Box::pin(async move { Err(e) })
}

/// What a new task's row is made of: its lease token and times in milliseconds.
pub(crate) struct Creating {
    pub(crate) token: String,
    pub(crate) lease_ms: i64,
    pub(crate) keep_ms: i64,
    pub(crate) poll_ms: i64,
}

impl Creating {
    pub(crate) fn new(task: &NewTask) -> Creating {
        Creating {
            token: effect::lease_token(),
            lease_ms: effect::millis(task.lease),
            // Keep and poll times may be zero.
            keep_ms: i64::try_from(task.keep_for.as_millis()).unwrap_or(i64::MAX / 4).min(i64::MAX / 4),
            poll_ms: i64::try_from(task.poll_interval.as_millis()).unwrap_or(i64::MAX / 4).min(i64::MAX / 4),
        }
    }
}

/// A task's row as a store read it (the columns of `Statements::task_read`), with the store's clock.
pub(crate) struct TaskRow {
    pub(crate) id: String,
    pub(crate) tool: String,
    pub(crate) tenant: Option<String>,
    pub(crate) principal: Option<String>,
    pub(crate) status: String,
    pub(crate) message: Option<String>,
    pub(crate) version: i64,
    pub(crate) lease_until_ms: Option<i64>,
    pub(crate) keep_ms: i64,
    pub(crate) poll_ms: i64,
    pub(crate) request: Option<String>,
    pub(crate) outcome: Option<String>,
    pub(crate) created_ms: i64,
    pub(crate) updated_ms: i64,
    pub(crate) now_ms: i64,
}

/// A task as read, with what the store needs besides: its lease's expiry and the clock when it was read.
#[derive(Debug)]
pub(crate) struct Seen {
    pub(crate) task: Task,
    pub(crate) lease_until_ms: Option<i64>,
    pub(crate) now_ms: i64,
}

impl Seen {
    /// The task has not ended, and its lease expired: it is lost.
    pub(crate) fn lease_expired(&self) -> bool {
        !self.task.is_terminal() && self.lease_until_ms.is_none_or(|until| until < self.now_ms)
    }

    /// The task ended longer ago than its keep time: it is gone.
    pub(crate) fn expired(&self) -> bool {
        self.task.expires_at_ms().is_some_and(|at| at < u64::try_from(self.now_ms).unwrap_or(0))
    }

    /// How long until its lease expires, for a task that has not ended.
    fn lease_left(&self) -> Option<Duration> {
        if self.task.is_terminal() {
            return None;
        }
        let left = self.lease_until_ms?.saturating_sub(self.now_ms);
        Some(Duration::from_millis(u64::try_from(left).unwrap_or(0)))
    }
}

fn ms(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A JSON column of the task `id`.
fn json(table: &str, id: &str, what: &str, text: Option<String>) -> Result<Option<Value>, StateError> {
    text.map(|text| {
        serde_json::from_str(&text).map_err(|e| {
            StateError::corrupt(table, id, format!("the task's {what} is not JSON: {e}"), Some(Box::new(e)))
        })
    })
    .transpose()
}

impl TaskRow {
    /// The task the row of `table` holds: `corrupt_row` for a status that does not exist, or a request or outcome
    /// that is not JSON, or an outcome missing or out of place.
    pub(crate) fn decode(self, table: &str) -> Result<Seen, StateError> {
        let TaskRow {
            id,
            tool,
            tenant,
            principal,
            status,
            message,
            version,
            lease_until_ms,
            keep_ms,
            poll_ms,
            request,
            outcome,
            created_ms,
            updated_ms,
            now_ms,
        } = self;
        let status = TaskStatus::from_name(&status)
            .ok_or_else(|| StateError::corrupt(table, &id, format!("the status {status:?} does not exist"), None))?;
        let request = json(table, &id, "input request", request)?;
        let outcome = json(table, &id, "outcome", outcome)?;
        let (result, error) = match status {
            TaskStatus::Completed => (Some(outcome), None),
            TaskStatus::Failed => (None, Some(outcome)),
            _ if outcome.is_some() => {
                return Err(StateError::corrupt(table, &id, format!("a {status} task with an outcome"), None));
            }
            _ => (None, None),
        };
        let missing = || StateError::corrupt(table, &id, format!("a {status} task without its outcome"), None);
        let result = result.map(|r| r.ok_or_else(missing)).transpose()?;
        let error = error.map(|e| e.ok_or_else(missing)).transpose()?;
        if version < 1 {
            return Err(StateError::corrupt(table, &id, format!("the version {version} is not positive"), None));
        }
        let task = Task {
            id,
            tool,
            tenant,
            principal,
            status,
            message,
            version: ms(version),
            created_ms: ms(created_ms),
            updated_ms: ms(updated_ms),
            keep_for_ms: ms(keep_ms),
            poll_interval_ms: ms(poll_ms),
            result,
            error,
            input_request: if status == TaskStatus::InputRequired { request } else { None },
        };
        Ok(Seen { task, lease_until_ms, now_ms })
    }
}

/// The answers a row keeps (the text of a JSON array, or none).
pub(crate) fn decode_answers(table: &str, id: &str, text: Option<String>) -> Result<Vec<Value>, StateError> {
    match json(table, id, "answers", text)? {
        None => Ok(Vec::new()),
        Some(Value::Array(answers)) => Ok(answers),
        Some(other) => {
            Err(StateError::corrupt(table, id, format!("the task's answers are not an array: {other}"), None))
        }
    }
}

/// Why an owner's operation on the task `id` changed nothing, from the task as read after it (`None`: gone).
pub(crate) fn owner_refused(id: &str, seen: Option<&Task>) -> StateError {
    match seen {
        None => StateError::UnknownTask { id: id.to_owned() },
        Some(task) if task.status == TaskStatus::Lost => StateError::LeaseLost { key: id.to_owned() },
        Some(task) if task.is_terminal() => {
            StateError::TaskEnded { id: id.to_owned(), status: task.status.as_str().to_owned() }
        }
        // Not ended, and not lost when read: the lease is not the task's.
        Some(_) => StateError::LeaseLost { key: id.to_owned() },
    }
}

/// Why a replica's `answer` or `cancel` of the task `id` changed nothing, from the task as read after it; `None`
/// when the task is open to it again (it changed in between): try again.
pub(crate) fn replica_refused(id: &str, seen: Option<&Task>, answering: bool) -> Option<StateError> {
    match seen {
        None => Some(StateError::UnknownTask { id: id.to_owned() }),
        Some(task) if task.is_terminal() => {
            Some(StateError::TaskEnded { id: id.to_owned(), status: task.status.as_str().to_owned() })
        }
        Some(task) if answering && task.status == TaskStatus::Working => {
            Some(StateError::InputNotRequested { id: id.to_owned() })
        }
        Some(_) => None,
    }
}

/// How many times `answer` and `cancel` try a task that changes under them before they give up.
pub(crate) const ATTEMPTS: usize = 4;

/// The error of an `answer` or `cancel` that gave up after [`ATTEMPTS`].
pub(crate) fn unsettled(table: &str, id: &str) -> StateError {
    StateError::Store {
        context: format!("changing the task {id:?} ({table})"),
        message: format!("the task changed under each of {ATTEMPTS} attempts"),
        source: None,
    }
}

/// The changes a store has seen, fed to its receivers once each: its own, those its listener or poller reads.
pub(crate) struct Feed {
    tx: broadcast::Sender<TaskChange>,
    state: Mutex<FeedState>,
    window_ms: i64,
}

struct FeedState {
    /// The latest version fed for each task, and when it changed; forgotten once older than the window.
    seen: HashMap<String, (u64, i64)>,
    /// How many entries `seen` may hold before the old ones are forgotten.
    prune_at: usize,
}

const FEED_CAPACITY: usize = 1024;

impl Feed {
    /// A feed whose readers scan the changes of the last `window` again (a change is committed at most that long
    /// after its time).
    pub(crate) fn new(window: Duration) -> Feed {
        Feed {
            tx: broadcast::channel(FEED_CAPACITY).0,
            state: Mutex::new(FeedState { seen: HashMap::new(), prune_at: FEED_CAPACITY }),
            window_ms: effect::millis(window),
        }
    }

    /// How far back a scan at `now_ms` looks.
    pub(crate) fn since(&self, now_ms: i64) -> i64 {
        now_ms.saturating_sub(self.window_ms)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, FeedState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<TaskChange> {
        self.tx.subscribe()
    }

    #[cfg(feature = "sqlite")]
    pub(crate) fn receivers(&self) -> usize {
        self.tx.receiver_count()
    }

    /// Feeds the change of `task` unless a change of the same or a later version was fed.
    pub(crate) fn task(&self, task: &Task) {
        self.publish(&task.id, task.status, task.version, i64::try_from(task.updated_ms).unwrap_or(i64::MAX));
    }

    /// Feeds a change unless a change of the same or a later version was fed (`send`: false records it only, for
    /// a scan that learns where things stand).
    pub(crate) fn record(&self, id: &str, status: TaskStatus, version: u64, updated_ms: i64, send: bool) {
        let mut state = self.state();
        if state.seen.get(id).is_some_and(|(v, _)| *v >= version) {
            return;
        }
        state.seen.insert(id.to_owned(), (version, updated_ms));
        if state.seen.len() > state.prune_at {
            let since = self.since(updated_ms);
            state.seen.retain(|_, (_, at)| *at >= since);
            state.prune_at = (state.seen.len() * 2).max(FEED_CAPACITY);
        }
        if send {
            let _ = self.tx.send(TaskChange { id: id.to_owned(), status, version });
        }
    }

    pub(crate) fn publish(&self, id: &str, status: TaskStatus, version: u64, updated_ms: i64) {
        self.record(id, status, version, updated_ms, true);
    }

    /// Forgets the tasks that changed before `since` (a scan no longer sees them).
    pub(crate) fn forget_before(&self, since: i64) {
        self.state().seen.retain(|_, (_, at)| *at >= since);
    }

    /// Feeds the rows of a scan (`(id, status, version, updated_ms)`), skipping rows that do not decode.
    pub(crate) fn scanned(&self, rows: Vec<(String, String, i64, i64)>, send: bool) {
        for (id, status, version, updated_ms) in rows {
            if let Some(status) = TaskStatus::from_name(&status) {
                self.record(&id, status, ms(version), updated_ms, send);
            }
        }
    }
}

/// Waits for a change of the task `id` on `rx` (or a gap in it: then the task is worth reading too).
async fn changed(rx: &mut broadcast::Receiver<TaskChange>, id: &str) {
    loop {
        match rx.recv().await {
            Ok(change) if change.id == id => return,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => return,
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}

/// `wait`, for both stores: reads the task with `read` (which records a lost task as such), until it satisfies
/// `until` or `timeout` passes; between reads, waits for a change fed by `feed`, the task's lease to expire, or
/// `recheck`.
pub(crate) async fn wait_for<F, Fut>(
    feed: &Feed,
    id: &str,
    until: WaitFor,
    timeout: Duration,
    recheck: Duration,
    mut read: F,
) -> Result<Option<Task>, StateError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<Seen>, StateError>>,
{
    // Subscribed before the first read: a change made after it wakes the wait.
    let mut rx = feed.subscribe();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let Some(seen) = read().await? else { return Ok(None) };
        let now = tokio::time::Instant::now();
        if until.is_met(&seen.task) || now >= deadline {
            return Ok(Some(seen.task));
        }
        let mut pause = (deadline - now).min(recheck);
        if let Some(left) = seen.lease_left() {
            pause = pause.min(left + Duration::from_millis(1));
        }
        tokio::select! {
            () = changed(&mut rx, id) => {}
            () = tokio::time::sleep(pause) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn row(status: &str, outcome: Option<&str>) -> TaskRow {
        TaskRow {
            id: "t".into(),
            tool: "tool".into(),
            tenant: None,
            principal: None,
            status: status.into(),
            message: None,
            version: 3,
            lease_until_ms: Some(200),
            keep_ms: 50,
            poll_ms: 10,
            request: Some("{\"ask\":1}".into()),
            outcome: outcome.map(Into::into),
            created_ms: 50,
            updated_ms: 100,
            now_ms: 120,
        }
    }

    #[test]
    fn statuses_have_stable_names_and_two_are_open() {
        for status in TaskStatus::ALL {
            assert_eq!(TaskStatus::from_name(status.as_str()), Some(status));
            assert_eq!(status.to_string(), status.as_str());
        }
        assert_eq!(TaskStatus::from_name("done"), None);
        let open: Vec<_> = TaskStatus::ALL.into_iter().filter(|s| !s.is_terminal()).collect();
        assert_eq!(open, [TaskStatus::Working, TaskStatus::InputRequired]);
    }

    #[test]
    fn ids_are_bounded() {
        assert_eq!(check_id("").unwrap_err().code(), "invalid_key");
        assert_eq!(check_id(&"t".repeat(MAX_TASK_ID_LEN + 1)).unwrap_err().code(), "invalid_key");
        check_id(&"t".repeat(MAX_TASK_ID_LEN)).unwrap();
    }

    #[test]
    fn a_row_decodes_or_is_reported_corrupt() {
        let seen = row("input_required", None).decode("tasks").unwrap();
        assert_eq!(seen.task.input_request, Some(json!({"ask": 1})));
        assert!(!seen.lease_expired() && !seen.expired());
        let done = row("completed", Some("[1]")).decode("tasks").unwrap();
        assert_eq!(done.task.expires_at_ms(), Some(150));
        assert_eq!((done.task.result, done.task.error, done.task.input_request), (Some(json!([1])), None, None));
        let failed = row("failed", Some("\"no\"")).decode("tasks").unwrap();
        assert_eq!(failed.task.error, Some(json!("no")));
        let mut late = row("completed", Some("1"));
        late.now_ms = 151;
        assert!(late.decode("tasks").unwrap().expired(), "past its keep time");
        let mut expired = row("working", None);
        expired.now_ms = 201;
        assert!(expired.decode("tasks").unwrap().lease_expired());
        let mut zero = row("working", None);
        zero.version = 0;
        for bad in
            [row("done", None), row("completed", None), row("completed", Some("{")), row("working", Some("1")), zero]
        {
            assert_eq!(bad.decode("tasks").unwrap_err().code(), "corrupt_row");
        }
        assert_eq!(decode_answers("tasks", "t", Some("[1,{\"a\":2}]".into())).unwrap(), [json!(1), json!({"a": 2})]);
        assert_eq!(decode_answers("tasks", "t", None).unwrap(), Vec::<Value>::new());
        assert_eq!(decode_answers("tasks", "t", Some("{}".into())).unwrap_err().code(), "corrupt_row");
    }

    #[test]
    fn refusals_name_what_holds_the_task() {
        let task = |status| {
            let mut seen = row("working", None).decode("tasks").unwrap();
            seen.task.status = status;
            seen.task
        };
        assert_eq!(owner_refused("t", None).code(), "unknown_task");
        assert_eq!(owner_refused("t", Some(&task(TaskStatus::Lost))).code(), "lease_lost");
        assert_eq!(owner_refused("t", Some(&task(TaskStatus::Cancelled))).code(), "task_ended");
        assert_eq!(owner_refused("t", Some(&task(TaskStatus::Working))).code(), "lease_lost");
        let answer = |status| replica_refused("t", Some(&task(status)), true).map(|e| e.code());
        assert_eq!(answer(TaskStatus::Working), Some("input_not_requested"));
        assert_eq!(answer(TaskStatus::Completed), Some("task_ended"));
        assert_eq!(answer(TaskStatus::InputRequired), None, "open again: try again");
        assert_eq!(replica_refused("t", Some(&task(TaskStatus::Working)), false).map(|e| e.code()), None);
    }

    #[test]
    fn the_feed_sends_each_version_once_and_forgets_old_tasks() {
        let feed = Feed::new(Duration::from_millis(100));
        let mut rx = feed.subscribe();
        feed.publish("a", TaskStatus::Working, 1, 1000);
        feed.publish("a", TaskStatus::Working, 1, 1000);
        feed.record("b", TaskStatus::Working, 1, 1000, false);
        feed.scanned(vec![("a".into(), "cancelled".into(), 2, 1010), ("b".into(), "working".into(), 1, 1000)], true);
        feed.scanned(vec![("c".into(), "nonsense".into(), 1, 1000)], true);
        assert_eq!(rx.try_recv().unwrap(), TaskChange { id: "a".into(), status: TaskStatus::Working, version: 1 });
        assert_eq!(rx.try_recv().unwrap().version, 2);
        assert!(rx.try_recv().is_err(), "each version once, b only recorded");
        feed.forget_before(1005);
        feed.publish("b", TaskStatus::Working, 1, 1000);
        assert_eq!(rx.try_recv().unwrap().id, "b", "forgotten, so fed again");
    }

    #[test]
    fn waits_are_met_by_the_end_or_what_they_ask_for() {
        let mut task = row("working", None).decode("tasks").unwrap().task;
        assert!(!WaitFor::Terminal.is_met(&task) && !WaitFor::InputOrTerminal.is_met(&task));
        assert!(WaitFor::ChangedSince(2).is_met(&task) && !WaitFor::ChangedSince(3).is_met(&task));
        task.status = TaskStatus::InputRequired;
        assert!(WaitFor::InputOrTerminal.is_met(&task) && !WaitFor::Terminal.is_met(&task));
        task.status = TaskStatus::Lost;
        assert!(WaitFor::Terminal.is_met(&task) && WaitFor::ChangedSince(3).is_met(&task));
    }
}
