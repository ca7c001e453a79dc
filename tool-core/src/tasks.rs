//! Long-running tool calls whose state every replica sees: the [`TaskStore`] trait and its vocabulary ([`Task`],
//! [`TaskStatus`], [`NewTask`], [`TaskLease`], [`Terminal`], [`WaitFor`], [`TaskChange`]).
//!
//! keel-tools-state implements the trait in SQLite (one machine) and PostgreSQL (replicas); keel-tools-mcp's server
//! keeps its tasks in one (`McpServerBuilder::task_store`), so that any replica answers for a task another runs.
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

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast;

/// What a [`TaskStore`] operation returns: a boxed future of its result, or the store's error `E`.
pub type TaskFuture<'a, E, T> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'a>>;

/// The error of a [`TaskStore`]: what went wrong, with a stable code a server acts on.
pub trait TaskStoreError: StdError + Send + Sync + 'static {
    /// The stable code. A server distinguishes these:
    ///
    /// | code | what it says |
    /// |---|---|
    /// | `unknown_task` | no task of this id (never created, or removed after its keep time) |
    /// | `invalid_key` | an id no task can have (empty, or longer than [`MAX_TASK_ID_LEN`]) |
    /// | `task_exists` | `create` with the id of a task the store keeps |
    /// | `task_ended` | the task ended: nothing changes it |
    /// | `lease_lost` | the owner's lease expired (the task is `lost`), or is not the task's |
    /// | `input_not_requested` | an answer for a task that waits for none |
    ///
    /// Any other code is a failure of the store itself (its database unreachable, a row it cannot read).
    fn code(&self) -> Cow<'static, str>;
}

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

/// A task as the store holds it. Times are milliseconds since the Unix epoch, by the store's clock. A plain record:
/// stores build it from their rows.
#[derive(Debug, Clone, PartialEq)]
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
/// Implementations: keel-tools-state's `SqliteTaskStore` (one machine) and `PostgresTaskStore` (replicas); the
/// contract tests of the workspace run against both. Their error is keel-tools-state's `StateError`.
pub trait TaskStore: Send + Sync {
    /// What its operations fail with: an error with a stable [`code`](TaskStoreError::code).
    type Error: TaskStoreError;

    /// Creates the task, `working`, and gives its owner (the caller) a lease on it, for [`NewTask::lease`].
    ///
    /// # Errors
    ///
    /// `task_exists` when the store keeps a task of this id (one that ended and passed its keep time is replaced);
    /// `invalid_key` for an empty id or one longer than [`MAX_TASK_ID_LEN`]; the store's errors.
    fn create<'a>(&'a self, task: &'a NewTask) -> TaskFuture<'a, Self::Error, (Task, TaskLease)>;

    /// The task, or `None` when there is none (or it ended and passed its keep time). A task whose lease expired
    /// before it ended is recorded and returned `lost`.
    ///
    /// # Errors
    ///
    /// `invalid_key` for an id no task has (empty, or too long); `corrupt_row` when its row holds what the stores
    /// never write; the store's errors.
    fn get<'a>(&'a self, id: &'a str) -> TaskFuture<'a, Self::Error, Option<Task>>;

    /// The task once it satisfies `until`, or as it is when `timeout` passes; `None` when there is none. Returns
    /// at once when the task satisfies `until` already (an ended task satisfies every `until`); otherwise wakes on
    /// each change any replica makes to it (pushed by the database, or polled), and when its lease expires (it is
    /// then `lost`). Holds no connection while it waits. Needs a Tokio runtime (its timer).
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    fn wait<'a>(&'a self, id: &'a str, until: WaitFor, timeout: Duration) -> TaskFuture<'a, Self::Error, Option<Task>>;

    /// The owner's: the task works (again), with `message` as its status message; an input request it waited on
    /// is withdrawn.
    ///
    /// # Errors
    ///
    /// `lease_lost` when the lease expired (the task is lost) or is not the task's; `task_ended` when the task
    /// ended (cancelled, say); `unknown_task`; the store's errors. Nothing is changed.
    fn working<'a>(&'a self, lease: &'a TaskLease, message: Option<&'a str>) -> TaskFuture<'a, Self::Error, Task>;

    /// The owner's: the task waits for input, `request` telling what (an MCP input request, say), until a replica
    /// [`answer`](Self::answer)s it.
    ///
    /// # Errors
    ///
    /// As [`working`](Self::working).
    fn input_required<'a>(&'a self, lease: &'a TaskLease, request: &'a Value) -> TaskFuture<'a, Self::Error, Task>;

    /// Any replica's: answers the input request of the task `id`, which works again; the owner reads the answer
    /// with [`take_answers`](Self::take_answers). One answer per request: a second is refused.
    ///
    /// # Errors
    ///
    /// `input_not_requested` when the task is working (not waiting for input); `task_ended`; `unknown_task`; the
    /// store's errors. Nothing is changed.
    fn answer<'a>(&'a self, id: &'a str, answer: &'a Value) -> TaskFuture<'a, Self::Error, Task>;

    /// The owner's: the answers given since it last took them, oldest first (none if none), taken once.
    ///
    /// # Errors
    ///
    /// As [`working`](Self::working); `corrupt_row` when the kept answers are not a JSON array.
    fn take_answers<'a>(&'a self, lease: &'a TaskLease) -> TaskFuture<'a, Self::Error, Vec<Value>>;

    /// The owner's: renews the lease for the task's lease time from now (the store's clock), while it has not
    /// expired; the lease with its new expiry. The owner of a cancelled task learns it here (`task_ended`).
    ///
    /// # Errors
    ///
    /// As [`working`](Self::working).
    fn heartbeat<'a>(&'a self, lease: &'a TaskLease) -> TaskFuture<'a, Self::Error, TaskLease>;

    /// The owner's: ends the task `completed` or `failed`, with its result or error; its lease is given up.
    ///
    /// # Errors
    ///
    /// As [`working`](Self::working): a task cancelled or lost is not finished.
    fn finish<'a>(&'a self, lease: &'a TaskLease, outcome: Terminal) -> TaskFuture<'a, Self::Error, Task>;

    /// Any replica's: cancels the task (`cancelled`, with [`CANCELLED_MESSAGE`]); the owner learns it from its
    /// next heartbeat or change. Returns the cancelled task.
    ///
    /// # Errors
    ///
    /// `task_ended` when the task ended (it is not changed; a task whose lease expired is recorded `lost`
    /// first); `unknown_task`; the store's errors.
    fn cancel<'a>(&'a self, id: &'a str) -> TaskFuture<'a, Self::Error, Task>;

    /// Records as `lost` every task whose lease expired before it ended, and deletes the tasks that ended longer
    /// ago than their keep time; how many were deleted.
    fn purge_expired(&self) -> TaskFuture<'_, Self::Error, u64>;

    /// A feed of the changes of every task, by any replica, from now on: each change once, in version order for
    /// each task (a change overtaken by the next one before the store saw it may be skipped). A receiver that
    /// falls more than 1024 changes behind skips the oldest ([`broadcast::error::RecvError::Lagged`]).
    fn changes(&self) -> broadcast::Receiver<TaskChange>;
}
