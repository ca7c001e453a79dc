//! [`SqliteTaskStore`]: tasks in a SQLite file, shared by the processes of one machine.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;
use tokio::sync::broadcast;

use super::{Db, SqliteBuilder, run};
use crate::effect::StateFuture;
use crate::error::StateError;
use crate::schema;
use crate::task::{
    self, CANCELLED_MESSAGE, Creating, Feed, LOST_MESSAGE, NewTask, Seen, Task, TaskChange, TaskLease, TaskRow,
    TaskStore, Terminal, WaitFor,
};

/// How much longer than the busy timeout a change may take to commit after its time: what a poll reads again.
const COMMIT_SLACK: Duration = Duration::from_secs(5);

/// A [`TaskStore`] in a SQLite file, by this machine's clock: one row per task (table `keel_tasks` by default).
///
/// Every change is one statement (`UPDATE … WHERE` the task is in the state the change needs, the lease's expiry
/// included, `RETURNING` the task), under the file's write lock: of concurrent changes by any number of stores and
/// processes, each applies to the task as the previous one left it. Changes made through this store wake its
/// waiters and feed its [`changes`](TaskStore::changes) at once; other stores' changes are read every
/// [`recheck`](SqliteBuilder::recheck) interval: a waiter reads its task again, and while the store's feed has
/// receivers a thread of its own reads the rows changed lately (the first `changes` reads where the tasks stand
/// once, in the caller's thread). The operations run on Tokio's blocking threads inside a Tokio runtime, as
/// [`SqliteEffectStore`](super::SqliteEffectStore)'s do. Cheap to clone.
#[derive(Clone)]
pub struct SqliteTaskStore {
    db: Arc<Db>,
    feed: Arc<Feed>,
    recheck: Duration,
    polling: Arc<AtomicBool>,
}

impl std::fmt::Debug for SqliteTaskStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteTaskStore")
            .field("path", &self.db.path)
            .field("table", &self.db.table)
            .field("recheck", &self.recheck)
            .finish()
    }
}

impl SqliteTaskStore {
    pub(super) fn new(db: Db, busy_timeout: Duration, recheck: Duration) -> SqliteTaskStore {
        SqliteTaskStore {
            db: Arc::new(db),
            feed: Arc::new(Feed::new(busy_timeout + COMMIT_SLACK)),
            recheck,
            polling: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The store in the SQLite file `path`, table `keel_tasks`; see [`SqliteBuilder::open_tasks`].
    ///
    /// # Errors
    ///
    /// As [`SqliteBuilder::open_tasks`].
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteTaskStore, StateError> {
        SqliteTaskStore::builder(path).open_tasks()
    }

    /// A builder for the store in `path`.
    pub fn builder(path: impl AsRef<Path>) -> SqliteBuilder {
        SqliteBuilder::new(path.as_ref())
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.db.path
    }

    /// The table.
    pub fn table(&self) -> &str {
        &self.db.table
    }

    /// Runs `op` with the connection and the feed.
    fn run<T, F>(&self, op: F) -> StateFuture<'static, T>
    where
        T: Send + 'static,
        F: FnOnce(&Db, &mut Connection, &Feed) -> Result<T, StateError> + Send + 'static,
    {
        let feed = self.feed.clone();
        run(&self.db, "a task store operation", move |db, conn| op(db, conn, &feed))
    }

    /// Starts the poll of other stores' changes, unless it runs: a thread that reads the rows changed lately every
    /// recheck interval, for as long as the feed has receivers (and the store exists).
    fn poll(&self) {
        if self.polling.swap(true, Ordering::SeqCst) {
            return;
        }
        // Where things stand now is not news: learnt without being fed.
        let now = schema::now_ms();
        match scan(&self.db, self.feed.since(now)) {
            Ok(rows) => self.feed.scanned(rows, false),
            Err(e) => tracing::debug!(error = %e, "reading the tasks' recent changes"),
        }
        let (db, feed, polling, every) =
            (Arc::downgrade(&self.db), self.feed.clone(), self.polling.clone(), self.recheck);
        let started = std::thread::Builder::new()
            .name("keel-state-tasks".into())
            .spawn(move || follow(&db, &feed, &polling, every));
        if let Err(e) = started {
            tracing::warn!(error = %e, "the task store's poll could not start: other stores' changes are not fed");
            self.polling.store(false, Ordering::SeqCst);
        }
    }
}

/// The poll's thread: feeds the rows changed lately, every `every`, while the feed has receivers.
fn follow(db: &Weak<Db>, feed: &Feed, polling: &AtomicBool, every: Duration) {
    loop {
        std::thread::sleep(every);
        if feed.receivers() == 0 {
            polling.store(false, Ordering::SeqCst);
            // A receiver that came meanwhile started a poll of its own, unless this one takes the flag back.
            if feed.receivers() == 0 || polling.swap(true, Ordering::SeqCst) {
                return;
            }
        }
        let Some(db) = db.upgrade() else { return };
        let since = feed.since(schema::now_ms());
        match scan(&db, since) {
            Ok(rows) => {
                feed.scanned(rows, true);
                feed.forget_before(since);
            }
            Err(e) => tracing::debug!(error = %e, "reading the tasks' recent changes"),
        }
    }
}

/// The tasks changed at `since` or later.
fn scan(db: &Db, since: i64) -> Result<Vec<(String, String, i64, i64)>, StateError> {
    let conn = db.lock();
    let context = || db.context("reading the tasks' recent changes");
    let mut statement =
        conn.prepare(&db.statements().task_changed_since()).map_err(|e| StateError::store(context(), e))?;
    statement
        .query_map([since], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| StateError::store(context(), e))
}

/// A task's row (the columns of `task_read`).
fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRow> {
    Ok(TaskRow {
        id: r.get(0)?,
        tool: r.get(1)?,
        tenant: r.get(2)?,
        principal: r.get(3)?,
        status: r.get(4)?,
        message: r.get(5)?,
        version: r.get(6)?,
        lease_until_ms: r.get(7)?,
        keep_ms: r.get(8)?,
        poll_ms: r.get(9)?,
        request: r.get(10)?,
        outcome: r.get(11)?,
        created_ms: r.get(12)?,
        updated_ms: r.get(13)?,
        now_ms: r.get(14)?,
    })
}

/// Runs a statement that returns a task's row, or none.
fn one(
    db: &Db,
    conn: &Connection,
    what: &str,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Option<Seen>, StateError> {
    conn.query_row(sql, params, row)
        .optional()
        .map_err(|e| StateError::store(db.context(what), e))?
        .map(|r| r.decode(&db.table))
        .transpose()
}

/// Feeds the change a statement made, and hands its task on.
fn changed(feed: &Feed, seen: Seen) -> Task {
    feed.task(&seen.task);
    seen.task
}

/// The task `id` as readers see it: recorded `lost` first if its lease expired before it ended; `None` when there
/// is none, or it passed its keep time.
fn read(db: &Db, conn: &Connection, feed: &Feed, id: &str) -> Result<Option<Seen>, StateError> {
    let what = format!("reading the task {id:?}");
    let mut seen = one(db, conn, &what, &db.statements().task_read(), [id])?;
    if seen.as_ref().is_some_and(Seen::lease_expired) {
        let sql = db.statements();
        match one(db, conn, &format!("recording the task {id:?} lost"), &sql.task_lose(), [id, LOST_MESSAGE])? {
            Some(lost) => {
                feed.task(&lost.task);
                seen = Some(lost);
            }
            // Changed meanwhile: as it is now.
            None => seen = one(db, conn, &what, &sql.task_read(), [id])?,
        }
    }
    Ok(seen.filter(|s| !s.expired()))
}

/// An owner's change (`sql`, with the task's id and lease token then `more`): the task, or why it was refused.
fn owned(
    db: &Db,
    conn: &Connection,
    feed: &Feed,
    lease: &TaskLease,
    what: &str,
    sql: &str,
    more: &[&dyn rusqlite::ToSql],
) -> Result<Task, StateError> {
    let (id, token) = (lease.id(), lease.token());
    let mut params: Vec<&dyn rusqlite::ToSql> = vec![&id, &token];
    params.extend_from_slice(more);
    match one(db, conn, &format!("{what} the task {id:?}"), sql, params.as_slice())? {
        Some(seen) => Ok(changed(feed, seen)),
        None => Err(task::owner_refused(id, read(db, conn, feed, id)?.as_ref().map(|s| &s.task))),
    }
}

/// A replica's `answer` (`answering`) or `cancel` of the task `id` (`sql`, with the id then `value`), tried
/// again while the task changes under it.
fn replica(
    db: &Db,
    conn: &Connection,
    feed: &Feed,
    id: &str,
    sql: &str,
    value: &str,
    answering: bool,
) -> Result<Task, StateError> {
    let what = if answering { "answering" } else { "cancelling" };
    for _ in 0..task::ATTEMPTS {
        if let Some(seen) = one(db, conn, &format!("{what} the task {id:?}"), sql, [id, value])? {
            return Ok(changed(feed, seen));
        }
        let seen = read(db, conn, feed, id)?;
        if let Some(e) = task::replica_refused(id, seen.as_ref().map(|s| &s.task), answering) {
            return Err(e);
        }
    }
    Err(task::unsettled(&db.table, id))
}

impl TaskStore for SqliteTaskStore {
    type Error = StateError;

    fn create<'a>(&'a self, new: &'a NewTask) -> StateFuture<'a, (Task, TaskLease)> {
        if let Err(e) = task::check_id(&new.id) {
            return task::refuse(e);
        }
        let new = new.clone();
        self.run(move |db, conn, feed| {
            let Creating { token, lease_ms, keep_ms, poll_ms } = Creating::new(&new);
            let params =
                rusqlite::params![new.id, new.tool, new.tenant, new.principal, token, lease_ms, keep_ms, poll_ms];
            let what = format!("creating the task {:?}", new.id);
            let Some(seen) = one(db, conn, &what, &db.statements().task_create(), params)? else {
                return Err(StateError::TaskExists { id: new.id });
            };
            let until = u64::try_from(seen.lease_until_ms.unwrap_or(0)).unwrap_or(0);
            Ok((changed(feed, seen), TaskLease::new(new.id, token, until)))
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> StateFuture<'a, Option<Task>> {
        if let Err(e) = task::check_id(id) {
            return task::refuse(e);
        }
        let id = id.to_owned();
        self.run(move |db, conn, feed| Ok(read(db, conn, feed, &id)?.map(|s| s.task)))
    }

    fn wait<'a>(&'a self, id: &'a str, until: WaitFor, timeout: Duration) -> StateFuture<'a, Option<Task>> {
        if let Err(e) = task::check_id(id) {
            return task::refuse(e);
        }
        Box::pin(async move {
            if tokio::runtime::Handle::try_current().is_err() {
                return Err(StateError::Store {
                    context: self.db.context(&format!("waiting for the task {id:?}")),
                    message: "a wait needs a Tokio runtime (its timer)".into(),
                    source: None,
                });
            }
            task::wait_for(&self.feed, id, until, timeout, self.recheck, || {
                let id = id.to_owned();
                self.run(move |db, conn, feed| read(db, conn, feed, &id))
            })
            .await
        })
    }

    fn working<'a>(&'a self, lease: &'a TaskLease, message: Option<&'a str>) -> StateFuture<'a, Task> {
        let (lease, message) = (lease.clone(), message.map(str::to_owned));
        self.run(move |db, conn, feed| {
            owned(db, conn, feed, &lease, "resuming", &db.statements().task_working(), &[&message])
        })
    }

    fn input_required<'a>(&'a self, lease: &'a TaskLease, request: &'a Value) -> StateFuture<'a, Task> {
        let (lease, request) = (lease.clone(), request.to_string());
        self.run(move |db, conn, feed| {
            owned(db, conn, feed, &lease, "asking for input for", &db.statements().task_input_required(), &[&request])
        })
    }

    fn answer<'a>(&'a self, id: &'a str, answer: &'a Value) -> StateFuture<'a, Task> {
        if let Err(e) = task::check_id(id) {
            return task::refuse(e);
        }
        let (id, answer) = (id.to_owned(), answer.to_string());
        self.run(move |db, conn, feed| replica(db, conn, feed, &id, &db.statements().task_answer(), &answer, true))
    }

    fn take_answers<'a>(&'a self, lease: &'a TaskLease) -> StateFuture<'a, Vec<Value>> {
        let lease = lease.clone();
        self.run(move |db, conn, feed| {
            let id = lease.id();
            let context = || db.context(&format!("taking the answers of the task {id:?}"));
            let sql = db.statements();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| StateError::store(context(), e))?;
            let held: Option<Option<String>> = tx
                .query_row(&sql.task_answers(), [id, lease.token()], |r| r.get(0))
                .optional()
                .map_err(|e| StateError::store(context(), e))?;
            let text = match held {
                None => {
                    drop(tx);
                    return Err(task::owner_refused(id, read(db, conn, feed, id)?.as_ref().map(|s| &s.task)));
                }
                Some(None) => return Ok(Vec::new()),
                Some(Some(text)) => text,
            };
            // Answers that do not decode stay (the transaction is rolled back when dropped).
            let answers = task::decode_answers(&db.table, id, Some(text))?;
            tx.execute(&sql.task_answers_taken(), [id]).map_err(|e| StateError::store(context(), e))?;
            tx.commit().map_err(|e| StateError::store(context(), e))?;
            Ok(answers)
        })
    }

    fn heartbeat<'a>(&'a self, lease: &'a TaskLease) -> StateFuture<'a, TaskLease> {
        let lease = lease.clone();
        self.run(move |db, conn, feed| {
            let id = lease.id();
            let until: Option<i64> = conn
                .query_row(&db.statements().task_heartbeat(), [id, lease.token()], |r| r.get(0))
                .optional()
                .map_err(|e| StateError::store(db.context(&format!("renewing the lease on the task {id:?}")), e))?;
            match until {
                Some(until) => Ok(TaskLease::new(id, lease.token(), u64::try_from(until).unwrap_or(0))),
                None => Err(task::owner_refused(id, read(db, conn, feed, id)?.as_ref().map(|s| &s.task))),
            }
        })
    }

    fn finish<'a>(&'a self, lease: &'a TaskLease, outcome: Terminal) -> StateFuture<'a, Task> {
        let lease = lease.clone();
        let (status, value) = (outcome.status().as_str(), outcome.value().to_string());
        self.run(move |db, conn, feed| {
            owned(db, conn, feed, &lease, "finishing", &db.statements().task_finish(), &[&status, &value])
        })
    }

    fn cancel<'a>(&'a self, id: &'a str) -> StateFuture<'a, Task> {
        if let Err(e) = task::check_id(id) {
            return task::refuse(e);
        }
        let id = id.to_owned();
        self.run(move |db, conn, feed| {
            replica(db, conn, feed, &id, &db.statements().task_cancel(), CANCELLED_MESSAGE, false)
        })
    }

    fn purge_expired(&self) -> StateFuture<'_, u64> {
        self.run(move |db, conn, feed| {
            let sql = db.statements();
            let context = || db.context("purging ended tasks");
            let mut lose = conn.prepare(&sql.task_lose_all()).map_err(|e| StateError::store(context(), e))?;
            let lost = lose
                .query_map([LOST_MESSAGE], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .map_err(|e| StateError::store(context(), e))?;
            drop(lose);
            feed.scanned(lost, true);
            let n = conn.execute(&sql.task_purge(), []).map_err(|e| StateError::store(context(), e))?;
            Ok(n as u64)
        })
    }

    fn changes(&self) -> broadcast::Receiver<TaskChange> {
        let rx = self.feed.subscribe();
        self.poll();
        rx
    }
}
