//! [`PostgresTaskStore`]: tasks in a PostgreSQL database, shared by replicas, changes pushed with `NOTIFY`.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, oneshot};
use tokio_postgres::Client;
use tokio_postgres::types::ToSql;

use super::{Backend, OpError, PgBuilder, PgFuture, Pool, column};
use crate::effect::StateFuture;
use crate::error::StateError;
use crate::schema;
use crate::sql::Statements;
use crate::task::{
    self, CANCELLED_MESSAGE, Creating, Feed, LOST_MESSAGE, NewTask, Seen, Task, TaskChange, TaskLease, TaskRow,
    TaskStore, Terminal, WaitFor,
};

/// How much longer than the busy timeout a change may take to commit after its time (the start of its
/// statement): what a recheck reads again.
const COMMIT_SLACK: Duration = Duration::from_secs(30);

/// The listener's first pause after its connection failed, doubled after each failure up to [`MAX_RECONNECT`].
const FIRST_RECONNECT: Duration = Duration::from_millis(100);
const MAX_RECONNECT: Duration = Duration::from_secs(5);

/// A [`TaskStore`] in a PostgreSQL database, shared by replicas, by the database server's clock: one row per task
/// (table `keel_tasks` by default).
///
/// Every change is one statement (`UPDATE … WHERE` the task is in the state the change needs, the lease's expiry
/// included, `RETURNING` the task): of concurrent changes on any number of machines, the row lock applies each to
/// the task as the previous one left it. A trigger on the table sends `NOTIFY <table>_changes` with the task's id
/// for every row inserted or whose `version` is set, by any client, when its transaction commits.
///
/// Each store has one listener, on its own thread's runtime: a connection of its own that `LISTEN`s on the
/// channel, reads the notified tasks' versions (a notification is a reason to read, its payload is not trusted)
/// and feeds [`changes`](TaskStore::changes) and the store's waiters; it reads the tasks changed lately again
/// every [`recheck`](PgBuilder::recheck) interval and after each reconnection (with backoff, 100 ms doubling to
/// 5 s), so that a lost notification only delays. Waiters read their task again at that interval too, and when
/// its lease expires. Cheap to clone; the listener stops when the store (all its clones) is dropped.
#[derive(Clone)]
pub struct PostgresTaskStore {
    backend: Arc<Backend>,
    feed: Arc<Feed>,
    recheck: Duration,
}

impl fmt::Debug for PostgresTaskStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresTaskStore")
            .field("database", &self.backend.pool.shown())
            .field("table", &self.backend.pool.table)
            .field("recheck", &self.recheck)
            .finish()
    }
}

impl PostgresTaskStore {
    /// Starts the listener on the store's thread, and waits up to `connect_timeout` for it to listen.
    pub(super) fn start(
        backend: Arc<Backend>,
        recheck: Duration,
        busy_timeout: Duration,
        connect_timeout: Duration,
    ) -> PostgresTaskStore {
        let feed = Arc::new(Feed::new(busy_timeout + COMMIT_SLACK));
        let (ready, listening) = oneshot::channel();
        backend.worker.handle.spawn(listen(backend.pool.clone(), feed.clone(), recheck, ready));
        let _ = backend.worker.block(async move {
            let _ = tokio::time::timeout(connect_timeout, listening).await;
            Ok(())
        });
        PostgresTaskStore { backend, feed, recheck }
    }

    /// The store in the database of `conninfo`, table `keel_tasks`; see [`PgBuilder::connect_tasks`].
    ///
    /// # Errors
    ///
    /// As [`PgBuilder::connect_tasks`].
    pub fn connect(conninfo: impl Into<String>) -> Result<PostgresTaskStore, StateError> {
        PostgresTaskStore::builder(conninfo).connect_tasks()
    }

    /// A builder for the store in the database of `conninfo` (a `postgresql://` URL or a libpq string).
    pub fn builder(conninfo: impl Into<String>) -> PgBuilder {
        PgBuilder::new(conninfo.into())
    }

    /// The database, for messages and logs (never a password).
    pub fn describe(&self) -> &str {
        self.backend.pool.shown()
    }

    /// The table.
    pub fn table(&self) -> &str {
        &self.backend.pool.table
    }

    /// Runs `op` with a client, the statements and the feed, on the store's thread.
    fn run<T: Send + 'static>(
        &self,
        what: String,
        op: impl for<'c> FnOnce(&'c mut Client, Statements, Arc<Feed>) -> PgFuture<'c, T> + Send + 'static,
    ) -> StateFuture<'_, T> {
        let pool = self.backend.pool.clone();
        let sql = self.backend.statements();
        let feed = self.feed.clone();
        Box::pin(self.backend.worker.run(async move { pool.with(&what, move |client| op(client, sql, feed)).await }))
    }
}

/// A task's row (the columns of `task_read`).
fn decode(row: &tokio_postgres::Row, table: &str) -> Result<Seen, StateError> {
    let id: String = column(row, 0, table, "?")?;
    let key = id.as_str();
    TaskRow {
        tool: column(row, 1, table, key)?,
        tenant: column(row, 2, table, key)?,
        principal: column(row, 3, table, key)?,
        status: column(row, 4, table, key)?,
        message: column(row, 5, table, key)?,
        version: column(row, 6, table, key)?,
        lease_until_ms: column(row, 7, table, key)?,
        keep_ms: column(row, 8, table, key)?,
        poll_ms: column(row, 9, table, key)?,
        request: column(row, 10, table, key)?,
        outcome: column(row, 11, table, key)?,
        created_ms: column(row, 12, table, key)?,
        updated_ms: column(row, 13, table, key)?,
        now_ms: column(row, 14, table, key)?,
        id: id.clone(),
    }
    .decode(table)
}

/// Runs a statement that returns a task's row, or none.
async fn one(
    client: &Client,
    sql: &Statements,
    statement: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Seen>, OpError> {
    match client.query_opt(statement, params).await? {
        Some(row) => Ok(Some(decode(&row, &sql.table)?)),
        None => Ok(None),
    }
}

/// Feeds the change a statement made, and hands its task on.
fn changed(feed: &Feed, seen: Seen) -> Task {
    feed.task(&seen.task);
    seen.task
}

/// The task `id` as readers see it: recorded `lost` first if its lease expired before it ended; `None` when there
/// is none, or it passed its keep time.
async fn read(client: &Client, sql: &Statements, feed: &Feed, id: &str) -> Result<Option<Seen>, OpError> {
    let mut seen = one(client, sql, &sql.task_read(), &[&id]).await?;
    if seen.as_ref().is_some_and(Seen::lease_expired) {
        match one(client, sql, &sql.task_lose(), &[&id, &LOST_MESSAGE]).await? {
            Some(lost) => {
                feed.task(&lost.task);
                seen = Some(lost);
            }
            // Changed meanwhile: as it is now.
            None => seen = one(client, sql, &sql.task_read(), &[&id]).await?,
        }
    }
    Ok(seen.filter(|s| !s.expired()))
}

/// Why an owner's change of the task `id` changed nothing.
async fn owner_refused(client: &Client, sql: &Statements, feed: &Feed, id: &str) -> OpError {
    match read(client, sql, feed, id).await {
        Ok(seen) => task::owner_refused(id, seen.as_ref().map(|s| &s.task)).into(),
        Err(e) => e,
    }
}

/// An owner's change (`statement`, with the task's id and lease token then `more`): the task, or why it was
/// refused.
async fn owned(
    client: &Client,
    sql: &Statements,
    feed: &Feed,
    lease: &TaskLease,
    statement: &str,
    more: &[&(dyn ToSql + Sync)],
) -> Result<Task, OpError> {
    let (id, token) = (lease.id(), lease.token());
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&id, &token];
    params.extend_from_slice(more);
    match one(client, sql, statement, &params).await? {
        Some(seen) => Ok(changed(feed, seen)),
        None => Err(owner_refused(client, sql, feed, id).await),
    }
}

/// A replica's `answer` (`answering`) or `cancel` of the task `id` (`statement`, with the id then `value`), tried
/// again while the task changes under it.
async fn replica(
    client: &Client,
    sql: &Statements,
    feed: &Feed,
    id: &str,
    statement: &str,
    value: &str,
    answering: bool,
) -> Result<Task, OpError> {
    for _ in 0..task::ATTEMPTS {
        if let Some(seen) = one(client, sql, statement, &[&id, &value]).await? {
            return Ok(changed(feed, seen));
        }
        let seen = read(client, sql, feed, id).await?;
        if let Some(e) = task::replica_refused(id, seen.as_ref().map(|s| &s.task), answering) {
            return Err(e.into());
        }
    }
    Err(task::unsettled(&sql.table, id).into())
}

/// The tasks' versions in `rows` (`id, status, version, updated_ms`).
fn versions(rows: &[tokio_postgres::Row]) -> Result<Vec<(String, String, i64, i64)>, tokio_postgres::Error> {
    rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?))).collect()
}

impl TaskStore for PostgresTaskStore {
    type Error = StateError;

    fn create<'a>(&'a self, new: &'a NewTask) -> StateFuture<'a, (Task, TaskLease)> {
        if let Err(e) = task::check_id(&new.id) {
            return task::refuse(e);
        }
        let new = new.clone();
        self.run(format!("creating the task {:?}", new.id), move |client, sql, feed| {
            Box::pin(async move {
                let Creating { token, lease_ms, keep_ms, poll_ms } = Creating::new(&new);
                let params: [&(dyn ToSql + Sync); 8] =
                    [&new.id, &new.tool, &new.tenant, &new.principal, &token, &lease_ms, &keep_ms, &poll_ms];
                let Some(seen) = one(client, &sql, &sql.task_create(), &params).await? else {
                    return Err(StateError::TaskExists { id: new.id }.into());
                };
                let until = u64::try_from(seen.lease_until_ms.unwrap_or(0)).unwrap_or(0);
                Ok((changed(&feed, seen), TaskLease::new(new.id, token, until)))
            })
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> StateFuture<'a, Option<Task>> {
        if let Err(e) = task::check_id(id) {
            return task::refuse(e);
        }
        let id = id.to_owned();
        self.run(format!("reading the task {id:?}"), move |client, sql, feed| {
            Box::pin(async move { Ok(read(client, &sql, &feed, &id).await?.map(|s| s.task)) })
        })
    }

    fn wait<'a>(&'a self, id: &'a str, until: WaitFor, timeout: Duration) -> StateFuture<'a, Option<Task>> {
        if let Err(e) = task::check_id(id) {
            return task::refuse(e);
        }
        let (pool, feed, recheck, id) = (self.backend.pool.clone(), self.feed.clone(), self.recheck, id.to_owned());
        // All of it on the store's thread: its reads, and its waits between them.
        Box::pin(self.backend.worker.run(async move {
            let what = format!("waiting for the task {id:?}");
            task::wait_for(&feed, &id, until, timeout, recheck, || {
                let (pool, feed, id, what) = (pool.clone(), feed.clone(), id.clone(), what.clone());
                async move {
                    let sql = Statements::postgres(&pool.table);
                    pool.with(&what, move |client| Box::pin(async move { read(client, &sql, &feed, &id).await })).await
                }
            })
            .await
        }))
    }

    fn working<'a>(&'a self, lease: &'a TaskLease, message: Option<&'a str>) -> StateFuture<'a, Task> {
        let (lease, message) = (lease.clone(), message.map(str::to_owned));
        self.run(format!("resuming the task {:?}", lease.id()), move |client, sql, feed| {
            Box::pin(async move { owned(client, &sql, &feed, &lease, &sql.task_working(), &[&message]).await })
        })
    }

    fn input_required<'a>(&'a self, lease: &'a TaskLease, request: &'a Value) -> StateFuture<'a, Task> {
        let (lease, request) = (lease.clone(), request.to_string());
        self.run(format!("asking for input for the task {:?}", lease.id()), move |client, sql, feed| {
            Box::pin(async move { owned(client, &sql, &feed, &lease, &sql.task_input_required(), &[&request]).await })
        })
    }

    fn answer<'a>(&'a self, id: &'a str, answer: &'a Value) -> StateFuture<'a, Task> {
        if let Err(e) = task::check_id(id) {
            return task::refuse(e);
        }
        let (id, answer) = (id.to_owned(), answer.to_string());
        self.run(format!("answering the task {id:?}"), move |client, sql, feed| {
            Box::pin(async move { replica(client, &sql, &feed, &id, &sql.task_answer(), &answer, true).await })
        })
    }

    fn take_answers<'a>(&'a self, lease: &'a TaskLease) -> StateFuture<'a, Vec<Value>> {
        let lease = lease.clone();
        self.run(format!("taking the answers of the task {:?}", lease.id()), move |client, sql, feed| {
            Box::pin(async move {
                let (id, token) = (lease.id(), lease.token());
                let tx = client.transaction().await?;
                let Some(row) = tx.query_opt(&sql.task_answers(), &[&id, &token]).await? else {
                    tx.rollback().await?;
                    return Err(owner_refused(client, &sql, &feed, id).await);
                };
                let Some(text) = column::<Option<String>>(&row, 0, &sql.table, id)? else { return Ok(Vec::new()) };
                // Answers that do not decode stay (the transaction is rolled back when dropped).
                let answers = task::decode_answers(&sql.table, id, Some(text))?;
                tx.execute(&sql.task_answers_taken(), &[&id]).await?;
                tx.commit().await?;
                Ok(answers)
            })
        })
    }

    fn heartbeat<'a>(&'a self, lease: &'a TaskLease) -> StateFuture<'a, TaskLease> {
        let lease = lease.clone();
        self.run(format!("renewing the lease on the task {:?}", lease.id()), move |client, sql, feed| {
            Box::pin(async move {
                let (id, token) = (lease.id(), lease.token());
                match client.query_opt(&sql.task_heartbeat(), &[&id, &token]).await? {
                    Some(row) => {
                        let until: i64 = column(&row, 0, &sql.table, id)?;
                        Ok(TaskLease::new(id, token, u64::try_from(until).unwrap_or(0)))
                    }
                    None => Err(owner_refused(client, &sql, &feed, id).await),
                }
            })
        })
    }

    fn finish<'a>(&'a self, lease: &'a TaskLease, outcome: Terminal) -> StateFuture<'a, Task> {
        let lease = lease.clone();
        let (status, value) = (outcome.status().as_str(), outcome.value().to_string());
        self.run(format!("finishing the task {:?}", lease.id()), move |client, sql, feed| {
            Box::pin(async move { owned(client, &sql, &feed, &lease, &sql.task_finish(), &[&status, &value]).await })
        })
    }

    fn cancel<'a>(&'a self, id: &'a str) -> StateFuture<'a, Task> {
        if let Err(e) = task::check_id(id) {
            return task::refuse(e);
        }
        let id = id.to_owned();
        self.run(format!("cancelling the task {id:?}"), move |client, sql, feed| {
            Box::pin(
                async move { replica(client, &sql, &feed, &id, &sql.task_cancel(), CANCELLED_MESSAGE, false).await },
            )
        })
    }

    fn purge_expired(&self) -> StateFuture<'_, u64> {
        self.run("purging ended tasks".into(), move |client, sql, feed| {
            Box::pin(async move {
                let lost = client.query(&sql.task_lose_all(), &[&LOST_MESSAGE]).await?;
                feed.scanned(versions(&lost)?, true);
                Ok(client.execute(&sql.task_purge(), &[]).await?)
            })
        })
    }

    fn changes(&self) -> broadcast::Receiver<TaskChange> {
        self.feed.subscribe()
    }
}

/// The listener: follows the table's notifications on a connection of its own, reconnecting with backoff, until
/// the store's thread ends. `ready` fires once it listens (or its first connection failed).
async fn listen(pool: Arc<Pool>, feed: Arc<Feed>, recheck: Duration, ready: oneshot::Sender<()>) {
    let mut ready = Some(ready);
    let mut primed = false;
    let mut pause = FIRST_RECONNECT;
    loop {
        let mut listened = false;
        let error = match follow(&pool, &feed, recheck, &mut ready, &mut primed, &mut listened).await {
            Ok(never) => match never {},
            Err(e) => e,
        };
        if let Some(ready) = ready.take() {
            let _ = ready.send(());
        }
        if listened {
            pause = FIRST_RECONNECT;
        }
        tracing::warn!(
            error = %error,
            table = %pool.table,
            "the task store's listener lost the database; reconnecting (changes are read again then)"
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_RECONNECT);
    }
}

/// One connection's life: connect, `LISTEN`, read the tasks changed lately (only to learn where they stand, the
/// first time; to feed what was missed, after a reconnection), then follow notifications and recheck; returns the
/// error that ended it.
async fn follow(
    pool: &Pool,
    feed: &Feed,
    recheck: Duration,
    ready: &mut Option<oneshot::Sender<()>>,
    primed: &mut bool,
    listened: &mut bool,
) -> Result<std::convert::Infallible, String> {
    let (client, mut notes) = pool.connector.connect_notified().await.map_err(|e| e.to_string())?;
    let sql = Statements::postgres(&pool.table);
    let channel = schema::channel(&pool.table);
    let failed = |e: tokio_postgres::Error| e.to_string();
    client.batch_execute(&format!("LISTEN {channel}")).await.map_err(failed)?;
    *listened = true;
    let scan = |send: bool| {
        let (client, sql) = (&client, &sql);
        async move {
            let now: i64 = client.query_one(&sql.task_now(), &[]).await.map_err(failed)?.try_get(0).map_err(failed)?;
            let since = feed.since(now);
            let rows = client.query(&sql.task_changed_since(), &[&since]).await.map_err(failed)?;
            feed.scanned(versions(&rows).map_err(failed)?, send);
            feed.forget_before(since);
            Ok::<(), String>(())
        }
    };
    scan(*primed).await?;
    *primed = true;
    if let Some(ready) = ready.take() {
        let _ = ready.send(());
    }
    let mut tick = tokio::time::interval(recheck);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            note = notes.recv() => {
                let Some(note) = note else { return Err("the listening connection was closed".to_owned()) };
                // A burst of notifications is one read; the payload only names a task worth reading.
                let mut ids = BTreeSet::new();
                for note in std::iter::once(note).chain(std::iter::from_fn(|| notes.try_recv().ok())) {
                    if note.channel() == channel {
                        ids.insert(note.payload().to_owned());
                    }
                }
                let ids: Vec<String> = ids.into_iter().collect();
                let rows = client.query(&sql.task_versions(), &[&ids]).await.map_err(failed)?;
                feed.scanned(versions(&rows).map_err(failed)?, true);
            }
            _ = tick.tick() => scan(true).await?,
        }
    }
}
