//! Tasks in a store every replica shares: keel-tools-core's [`TaskStore`] and its vocabulary, re-exported here
//! ([`Task`], [`TaskStatus`], [`NewTask`], [`TaskLease`], [`Terminal`], [`WaitFor`], [`TaskChange`]; the life of a
//! task is described in [`keel_tools_core::tasks`]), implemented by [`SqliteTaskStore`](crate::SqliteTaskStore)
//! and [`PostgresTaskStore`](crate::PostgresTaskStore), whose error is [`StateError`].
//!
//! - **Clock.** Leases and keep times run by the store's clock: the database server's for PostgreSQL (the one clock
//!   every replica shares), this machine's for SQLite.
//! - **Changes** are pushed by PostgreSQL's `NOTIFY`; a SQLite store polls its file.
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
use std::sync::Mutex;
use std::time::Duration;

pub use keel_tools_core::tasks::{
    CANCELLED_MESSAGE, DEFAULT_KEEP_FOR, DEFAULT_POLL_INTERVAL, DEFAULT_TASK_LEASE, LOST_MESSAGE, MAX_TASK_ID_LEN,
    NewTask, Task, TaskChange, TaskLease, TaskStatus, TaskStore, Terminal, WaitFor,
};
use serde_json::Value;
use tokio::sync::broadcast;

use crate::effect::{self, StateFuture};
use crate::error::StateError;

/// Any of this crate's task stores, behind one pointer: `Arc<DynTaskStore>` holds a SQLite or a PostgreSQL store.
pub type DynTaskStore = dyn TaskStore<Error = StateError>;

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
