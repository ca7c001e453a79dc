//! The stores in PostgreSQL (feature `postgres`): one database shared by every replica.
//!
//! # Connections
//!
//! Connections are opened by keel-tools-postgres's [`PgConnector`], as the catalogue's are: a `postgresql://` URL
//! or a libpq `key=value` string, with `sslmode` and `sslrootcert` as libpq reads them (its
//! [TLS section](keel_tools_postgres#tls) has the table of modes; TLS needs the `rustls` feature, on by default). Each store keeps a few connections (default [`DEFAULT_POOL_SIZE`]), opened on first use and again
//! after one is lost; a write waits for another's row lock at most the busy timeout (PostgreSQL's
//! `lock_timeout`), then fails with `store_error` having changed nothing.
//!
//! # Sync callers, async driver
//!
//! [`PendingStore`] is a sync trait and tokio-postgres is async. Each store owns a thread running a Tokio runtime
//! of its own, which drives its connections and runs every operation. A sync method hands the operation to that
//! thread and waits for its answer; it never starts or blocks on the caller's runtime, so it may be called from
//! any thread, a Tokio worker included (it blocks that worker for the operation's round trips, as a file write
//! would; async code that minds can use the `_async` methods, or `spawn_blocking`). The [`EffectStore`] methods
//! and the `_async` methods await the same thread's answer without blocking. The thread ends when the store (all
//! its clones) is dropped.
//!
//! # Clock
//!
//! Lease expiries and retention are measured by the database server's clock, the one clock every replica shares.
//! Pending calls' expiries are set by the process that made them (`PendingCall::expires_at_ms`), and
//! [`PostgresPendingStore::purge_expired`] compares them with the server's clock.
//!
//! # Schema
//!
//! The tables (`keel_pending_calls`, `keel_effects` and `keel_tasks` by default; the tasks' with the trigger that
//! notifies their changes) are created on connect if `keel_state_schema` does not record them, under an advisory
//! lock, so that replicas starting together create them once; a table already recorded is not written.
//!
//! # Tasks
//!
//! A [`PostgresTaskStore`] keeps one more connection besides its pool: its listener's, which `LISTEN`s for the
//! table's changes and reconnects with backoff when it is lost (see [`PostgresTaskStore`]).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keel_tools_core::runs::{PendingCall, PendingStore, PendingStoreError};
use keel_tools_postgres::{PgConnector, PgError};
use serde_json::Value;
use tokio::sync::{Mutex, MutexGuard, oneshot};
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use crate::effect::{self, Begin, DEFAULT_RETENTION, EffectStore, Lease, Recorded, StateFuture};
use crate::error::StateError;
use crate::pending::{decode, encode};
use crate::schema::{self, Kind};
use crate::sql::Statements;

/// Connections a store may use at once, by default.
pub const DEFAULT_POOL_SIZE: usize = 4;

/// How long a write waits for another's row lock by default.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a task store reads the tasks again besides the database's notifications, by default.
pub const DEFAULT_RECHECK: Duration = Duration::from_secs(5);

mod task;

pub use task::PostgresTaskStore;

const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// An arbitrary key for the advisory lock that serialises the creation of the tables.
const SCHEMA_LOCK: i64 = 0x6b65_656c_5354;

/// The thread that runs a store's operations, on a runtime of its own.
struct Worker {
    handle: tokio::runtime::Handle,
    stop: std::sync::Mutex<Option<oneshot::Sender<()>>>,
}

impl Worker {
    fn start() -> Result<Worker, StateError> {
        let (ready, handle) = std::sync::mpsc::sync_channel(1);
        let (stop, stopped) = oneshot::channel::<()>();
        let spawned = std::thread::Builder::new().name("keel-state-pg".into()).spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
            let _ = ready.send(Ok(runtime.handle().clone()));
            // Until the store is dropped (the sender dropped counts as a stop).
            runtime.block_on(async {
                let _ = stopped.await;
            });
        });
        let failed = |message: String| StateError::Store {
            context: "starting the PostgreSQL store's thread".into(),
            message,
            source: None,
        };
        spawned.map_err(|e| failed(e.to_string()))?;
        let handle = handle.recv().map_err(|e| failed(e.to_string()))?.map_err(|e| failed(e.to_string()))?;
        Ok(Worker { handle, stop: std::sync::Mutex::new(Some(stop)) })
    }

    /// Runs `op` on the worker and awaits its answer (from any executor).
    async fn run<T: Send + 'static>(
        &self,
        op: impl Future<Output = Result<T, StateError>> + Send + 'static,
    ) -> Result<T, StateError> {
        self.handle.spawn(op).await.unwrap_or_else(|e| Err(stopped(&e.to_string())))
    }

    /// Runs `op` on the worker and waits for its answer, blocking this thread (never the worker's).
    fn block<T: Send + 'static>(
        &self,
        op: impl Future<Output = Result<T, StateError>> + Send + 'static,
    ) -> Result<T, StateError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let _ = tx.send(op.await);
        });
        rx.recv().unwrap_or_else(|_| Err(stopped("the operation was dropped")))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            let _ = stop.send(());
        }
    }
}

fn stopped(why: &str) -> StateError {
    StateError::Store {
        context: "the PostgreSQL store's thread".into(),
        message: format!("the operation did not complete: {why}"),
        source: None,
    }
}

/// A store's connections and table; used only on its worker.
struct Pool {
    connector: PgConnector,
    slots: Vec<Mutex<Option<Client>>>,
    next: AtomicUsize,
    busy_timeout: Duration,
    table: String,
}

/// A pool slot, locked, holding an open client.
struct Slot<'a> {
    guard: MutexGuard<'a, Option<Client>>,
}

impl Slot<'_> {
    fn client(&mut self) -> &mut Client {
        self.guard.as_mut().expect("a slot is handed out holding a client")
    }
}

impl Pool {
    fn shown(&self) -> &str {
        self.connector.describe()
    }

    fn context(&self, what: &str) -> String {
        format!("{what} ({} in {})", self.table, self.shown())
    }

    /// A slot, round robin, with an open client (connected when it is empty or its connection was lost).
    async fn slot(&self, what: &str) -> Result<Slot<'_>, StateError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut guard = self.slots[i].lock().await;
        if guard.as_ref().is_none_or(Client::is_closed) {
            *guard = None;
            let client = self.connector.connect().await.map_err(|e| from_connector(self.context(what), e))?;
            let lock_timeout = format!("SET lock_timeout = {}", self.busy_timeout.as_millis().max(1));
            client.batch_execute(&lock_timeout).await.map_err(|e| self.classify(what, e))?;
            *guard = Some(client);
        }
        Ok(Slot { guard })
    }

    /// Runs `op` on a pooled client; a lost connection empties its slot, to be opened again by the next operation.
    async fn with<T>(
        &self,
        what: &str,
        op: impl for<'c> FnOnce(&'c mut Client) -> PgFuture<'c, T>,
    ) -> Result<T, StateError> {
        let mut slot = self.slot(what).await?;
        let result = op(slot.client()).await;
        result.map_err(|e| {
            if let OpError::Pg(pg) = &e
                && (pg.is_closed() || slot.guard.as_ref().is_none_or(Client::is_closed))
            {
                *slot.guard = None;
            }
            match e {
                OpError::Pg(pg) => self.classify(what, pg),
                OpError::State(s) => s,
            }
        })
    }

    fn classify(&self, what: &str, e: tokio_postgres::Error) -> StateError {
        let message = match e.as_db_error() {
            Some(db) => format!("{} ({})", db.message(), db.code().code()),
            None => e.to_string(),
        };
        let context = self.context(what);
        if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) {
            let message = format!("{message}: another writer held the row longer than the busy timeout");
            return StateError::Store { context, message, source: Some(Box::new(e)) };
        }
        if e.is_closed() || e.code().is_none() {
            return StateError::Unavailable { context, message, source: Some(Box::new(e)) };
        }
        StateError::Store { context, message, source: Some(Box::new(e)) }
    }
}

/// Why an operation on a client failed: the driver, or what it read.
enum OpError {
    Pg(tokio_postgres::Error),
    State(StateError),
}

impl From<tokio_postgres::Error> for OpError {
    fn from(e: tokio_postgres::Error) -> OpError {
        OpError::Pg(e)
    }
}

impl From<StateError> for OpError {
    fn from(e: StateError) -> OpError {
        OpError::State(e)
    }
}

type PgFuture<'c, T> = std::pin::Pin<Box<dyn Future<Output = Result<T, OpError>> + Send + 'c>>;

/// Column `i` of a row of `table` (key `key`): `corrupt_row` when it does not hold a value of type `T`.
fn column<'r, T: tokio_postgres::types::FromSql<'r>>(
    row: &'r tokio_postgres::Row,
    i: usize,
    table: &str,
    key: &str,
) -> Result<T, StateError> {
    row.try_get(i)
        .map_err(|e| StateError::corrupt(table, key, format!("column {i} cannot be read: {e}"), Some(Box::new(e))))
}

fn from_connector(context: String, e: PgError) -> StateError {
    let message = e.to_string();
    match e.code() {
        "config_error" => StateError::Config { message, source: Some(Box::new(e)) },
        "store_unavailable" => StateError::Unavailable { context, message, source: Some(Box::new(e)) },
        _ => StateError::Store { context, message, source: Some(Box::new(e)) },
    }
}

/// Creates the table if `keel_state_schema` does not record it, under an advisory lock.
async fn migrate(client: &mut Client, table: &str, kind: Kind) -> Result<(), OpError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK]).await?;
    tx.batch_execute(schema::CREATE_SCHEMA_TABLE).await?;
    let recorded = tx
        .query_opt("SELECT kind, version::bigint FROM keel_state_schema WHERE table_name = $1", &[&table])
        .await?
        .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)));
    if schema::plan(table, kind, recorded)? {
        tx.batch_execute(&kind.create(table)).await?;
        if let Some(extra) = kind.postgres_extra(table) {
            tx.batch_execute(&extra).await?;
        }
        let version = i32::try_from(schema::SCHEMA_VERSION).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO keel_state_schema (table_name, kind, version) VALUES ($1, $2, $3)
             ON CONFLICT (table_name) DO UPDATE SET version = excluded.version",
            &[&table, &kind.as_str(), &version],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// A store's worker and its pool.
struct Backend {
    pool: Arc<Pool>,
    worker: Worker,
}

impl Backend {
    fn connect(options: PgBuilder, kind: Kind) -> Result<Backend, StateError> {
        let table = options.table.unwrap_or_else(|| kind.default_table().to_owned());
        schema::check_table(&table)?;
        let connector = PgConnector::new(&options.conninfo, "keel-state", options.connect_timeout)
            .map_err(|e| from_connector("reading the connection string".into(), e))?;
        let pool = Arc::new(Pool {
            connector,
            slots: (0..options.pool_size).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            busy_timeout: options.busy_timeout,
            table,
        });
        let worker = Worker::start()?;
        let backend = Backend { pool, worker };
        let pool = backend.pool.clone();
        backend.worker.block(async move {
            let table = pool.table.clone();
            pool.with("creating the table", move |client| Box::pin(async move { migrate(client, &table, kind).await }))
                .await
        })?;
        Ok(backend)
    }

    fn statements(&self) -> Statements {
        Statements::postgres(&self.pool.table)
    }
}

/// Configures a [`PostgresPendingStore`], a [`PostgresEffectStore`] or a [`PostgresTaskStore`]; see their
/// `builder`s.
#[derive(Clone)]
#[must_use]
pub struct PgBuilder {
    conninfo: String,
    table: Option<String>,
    pool_size: usize,
    connect_timeout: Duration,
    busy_timeout: Duration,
    retention: Duration,
    recheck: Duration,
}

impl fmt::Debug for PgBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the connection string: it may hold a password.
        f.debug_struct("PgBuilder")
            .field("table", &self.table)
            .field("pool_size", &self.pool_size)
            .field("connect_timeout", &self.connect_timeout)
            .field("busy_timeout", &self.busy_timeout)
            .field("retention", &self.retention)
            .field("recheck", &self.recheck)
            .finish_non_exhaustive()
    }
}

impl PgBuilder {
    fn new(conninfo: String) -> PgBuilder {
        PgBuilder {
            conninfo,
            table: None,
            pool_size: DEFAULT_POOL_SIZE,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            retention: DEFAULT_RETENTION,
            recheck: DEFAULT_RECHECK,
        }
    }

    /// The table (default `keel_pending_calls`, `keel_effects` or `keel_tasks`): a plain lowercase identifier,
    /// checked on connect, in the connection's default schema (its `search_path`).
    pub fn table(mut self, name: impl Into<String>) -> Self {
        self.table = Some(name.into());
        self
    }

    /// Connections the store may use at once (default [`DEFAULT_POOL_SIZE`], at least 1).
    pub fn pool_size(mut self, n: usize) -> Self {
        self.pool_size = n.max(1);
        self
    }

    /// How long opening one connection may take (default 5 s) before `store_unavailable`.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a write waits for another's row lock (default [`DEFAULT_BUSY_TIMEOUT`]) before `store_error`.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// How long an effect record is kept after it finished (default [`DEFAULT_RETENTION`]); effect stores only.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// How often a task store reads the tasks again besides the database's notifications (default
    /// [`DEFAULT_RECHECK`], at least 1 ms): a lost notification (the listening connection broke, say) delays a
    /// [`wait`](crate::TaskStore::wait) or a [`changes`](crate::TaskStore::changes) feed at most this long. Task
    /// stores only.
    pub fn recheck(mut self, every: Duration) -> Self {
        self.recheck = every.max(Duration::from_millis(1));
        self
    }

    /// Connects and creates the pending calls' table if it is missing. Blocks the calling thread (any thread: the
    /// work runs on the store's own).
    ///
    /// # Errors
    ///
    /// `config_error` for a connection string that does not parse, a bad table name, or a table of another kind
    /// or a newer schema; `store_unavailable` when the database cannot be reached; `store_error` when it refuses.
    pub fn connect_pending(self) -> Result<PostgresPendingStore, StateError> {
        Ok(PostgresPendingStore { backend: Arc::new(Backend::connect(self, Kind::Pending)?) })
    }

    /// Connects and creates the effect records' table if it is missing. Blocks the calling thread (any thread:
    /// the work runs on the store's own).
    ///
    /// # Errors
    ///
    /// As [`connect_pending`](PgBuilder::connect_pending).
    pub fn connect_effects(self) -> Result<PostgresEffectStore, StateError> {
        let retention_ms = effect::millis(self.retention);
        Ok(PostgresEffectStore { backend: Arc::new(Backend::connect(self, Kind::Effects)?), retention_ms })
    }

    /// Connects, creates the tasks' table (and its trigger) if it is missing, and starts the store's listener: a
    /// connection of its own that `LISTEN`s for the table's changes (waiting up to the connect timeout for it to
    /// listen; it keeps trying after that). Blocks the calling thread (any thread: the work runs on the store's
    /// own).
    ///
    /// # Errors
    ///
    /// As [`connect_pending`](PgBuilder::connect_pending).
    pub fn connect_tasks(self) -> Result<PostgresTaskStore, StateError> {
        let (recheck, busy_timeout, connect_timeout) = (self.recheck, self.busy_timeout, self.connect_timeout);
        let backend = Arc::new(Backend::connect(self, Kind::Tasks)?);
        Ok(PostgresTaskStore::start(backend, recheck, busy_timeout, connect_timeout))
    }
}

/// A [`PendingStore`] in a PostgreSQL database, shared by replicas: one row per pending call, the signed record
/// kept verbatim (its JSON) under its [`key`](PendingCall::key), its expiry in a column of its own.
///
/// - **Whole records**: a save is one statement (`INSERT … ON CONFLICT DO UPDATE`), committed or not.
/// - **Taken once**: [`take`](PendingStore::take) deletes the row and returns what it held in one statement
///   (`DELETE … RETURNING`): of any number of takers on any number of machines, the row lock lets exactly one
///   delete it; the others find nothing. A row that is not a pending call is left in place (the transaction is
///   rolled back) and reported as [`PendingStoreError::Corrupt`].
/// - **Resolved once**: the same transaction records the record taken, in the table `<table>_consumed` (its
///   [`record_id`](PendingCall::record_id), until it expires): the record saved again is refused, and found put
///   back in the table is deleted and refused ([`PendingStoreError::Consumed`]).
/// - **Expiry**: an expired record is listed and taken like any other, so that
///   [`Executor::resume`](keel_tools_core::Executor::resume) answers `approval_expired` for it;
///   [`purge_expired`](Self::purge_expired) deletes those expired for a while.
/// - **Tamper evidence** stays with the record's MAC: a row changed in the database is taken as it is, and
///   `resume` refuses it (`approval_stale`).
/// - **Private**: the rows hold the calls' arguments; grant the table to the service's role only.
///
/// The trait's methods block the calling thread for the operation (see the [module documentation](self)); the
/// `_async` methods do the same work without blocking. Cheap to clone.
#[derive(Clone)]
pub struct PostgresPendingStore {
    backend: Arc<Backend>,
}

impl fmt::Debug for PostgresPendingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresPendingStore")
            .field("database", &self.backend.pool.shown())
            .field("table", &self.backend.pool.table)
            .finish()
    }
}

impl PostgresPendingStore {
    /// The store in the database of `conninfo`, table `keel_pending_calls`; see [`PgBuilder::connect_pending`].
    ///
    /// # Errors
    ///
    /// As [`PgBuilder::connect_pending`].
    pub fn connect(conninfo: impl Into<String>) -> Result<PostgresPendingStore, StateError> {
        PostgresPendingStore::builder(conninfo).connect_pending()
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

    fn save_op(&self, pending: &PendingCall) -> impl Future<Output = Result<(), StateError>> + Send + 'static {
        let (pool, sql) = (self.backend.pool.clone(), self.backend.statements().pending_save());
        let (key, text, expires) = encode(pending);
        let id = pending.record_id();
        async move {
            pool.with(&format!("saving {key}"), move |client| {
                Box::pin(async move {
                    if client.execute(&sql, &[&key, &text, &expires, &id]).await? == 0 {
                        return Err(StateError::Consumed { key }.into());
                    }
                    Ok(())
                })
            })
            .await
        }
    }

    fn list_op(&self) -> impl Future<Output = Result<Vec<PendingCall>, StateError>> + Send + 'static {
        let (pool, sql) = (self.backend.pool.clone(), self.backend.statements().pending_list());
        async move {
            let table = pool.table.clone();
            pool.with("listing pending calls", move |client| {
                Box::pin(async move {
                    let rows = client.query(&sql, &[]).await?;
                    let mut calls = Vec::with_capacity(rows.len());
                    for row in rows {
                        let key: String = column(&row, 0, &table, "?")?;
                        let text: String = column(&row, 1, &table, &key)?;
                        calls.push(decode(&table, &key, &text)?);
                    }
                    Ok(calls)
                })
            })
            .await
        }
    }

    fn take_op(&self, key: &str) -> impl Future<Output = Result<Option<PendingCall>, StateError>> + Send + 'static {
        let (pool, sql) = (self.backend.pool.clone(), self.backend.statements().pending_take());
        let consume = self.backend.statements().pending_consume();
        let key = key.to_owned();
        async move {
            let table = pool.table.clone();
            pool.with(&format!("taking {key}"), move |client| {
                Box::pin(async move {
                    let tx = client.transaction().await?;
                    let Some(row) = tx.query_opt(&sql, &[&key]).await? else { return Ok(None) };
                    let text: String = column(&row, 0, &table, &key)?;
                    // A row that is not a pending call goes back: the transaction is rolled back when dropped.
                    let pending = decode(&table, &key, &text)?;
                    // Recorded as taken; a record taken before is deleted and refused.
                    let (_, _, expires) = encode(&pending);
                    let fresh = tx.execute(&consume, &[&pending.record_id(), &key, &expires]).await?;
                    tx.commit().await?;
                    if fresh == 0 {
                        return Err(StateError::Consumed { key }.into());
                    }
                    Ok(Some(pending))
                })
            })
            .await
        }
    }

    fn purge_op(&self, grace: Duration) -> impl Future<Output = Result<u64, StateError>> + Send + 'static {
        let (pool, sql) = (self.backend.pool.clone(), self.backend.statements().pending_purge());
        let consumed = self.backend.statements().pending_purge_consumed();
        let grace = effect::millis(grace);
        async move {
            pool.with("purging expired pending calls", move |client| {
                Box::pin(async move {
                    let n = client.execute(&sql, &[&grace]).await?;
                    client.execute(&consumed, &[&grace]).await?;
                    Ok(n)
                })
            })
            .await
        }
    }

    /// [`PendingStore::save`], awaited without blocking.
    ///
    /// # Errors
    ///
    /// As [`PendingStore::save`].
    pub async fn save_async(&self, pending: &PendingCall) -> Result<(), PendingStoreError> {
        Ok(self.backend.worker.run(self.save_op(pending)).await?)
    }

    /// [`PendingStore::list`], awaited without blocking.
    ///
    /// # Errors
    ///
    /// As [`PendingStore::list`].
    pub async fn list_async(&self) -> Result<Vec<PendingCall>, PendingStoreError> {
        Ok(self.backend.worker.run(self.list_op()).await?)
    }

    /// [`PendingStore::take`], awaited without blocking.
    ///
    /// # Errors
    ///
    /// As [`PendingStore::take`].
    pub async fn take_async(&self, key: &str) -> Result<Option<PendingCall>, PendingStoreError> {
        Ok(self.backend.worker.run(self.take_op(key)).await?)
    }

    /// Deletes the records that expired more than `grace` ago, by the database server's clock; how many. The
    /// records of calls taken that expired as long ago are deleted too, and not counted. Blocks the calling
    /// thread, as the trait's methods do.
    ///
    /// # Errors
    ///
    /// The database's.
    pub fn purge_expired(&self, grace: Duration) -> Result<u64, StateError> {
        self.backend.worker.block(self.purge_op(grace))
    }
}

impl PendingStore for PostgresPendingStore {
    fn save(&self, pending: &PendingCall) -> Result<(), PendingStoreError> {
        Ok(self.backend.worker.block(self.save_op(pending))?)
    }

    fn list(&self) -> Result<Vec<PendingCall>, PendingStoreError> {
        Ok(self.backend.worker.block(self.list_op())?)
    }

    fn take(&self, key: &str) -> Result<Option<PendingCall>, PendingStoreError> {
        Ok(self.backend.worker.block(self.take_op(key))?)
    }
}

/// An [`EffectStore`] in a PostgreSQL database, shared by replicas, by the database server's clock. Every claim is
/// one statement (`INSERT … ON CONFLICT DO UPDATE … WHERE`, see [`crate::effect`]). Cheap to clone.
#[derive(Clone)]
pub struct PostgresEffectStore {
    backend: Arc<Backend>,
    retention_ms: i64,
}

impl fmt::Debug for PostgresEffectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresEffectStore")
            .field("database", &self.backend.pool.shown())
            .field("table", &self.backend.pool.table)
            .field("retention_ms", &self.retention_ms)
            .finish()
    }
}

impl PostgresEffectStore {
    /// The store in the database of `conninfo`, table `keel_effects`, results kept for [`DEFAULT_RETENTION`]; see
    /// [`PgBuilder::connect_effects`].
    ///
    /// # Errors
    ///
    /// As [`PgBuilder::connect_effects`].
    pub fn connect(conninfo: impl Into<String>) -> Result<PostgresEffectStore, StateError> {
        PostgresEffectStore::builder(conninfo).connect_effects()
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

    /// Records `data` as the result of the call `lease` is for, over `client`: a connection or transaction of the
    /// caller's own to this store's database, the one that does the call's effect, so that the effect and its
    /// record are committed together or not at all. For a handler of a tool that runs once
    /// ([`CallContext::effect_lease`](keel_tools_core::CallContext::effect_lease)): the record is the one the
    /// executor would write for the handler's result `data`
    /// ([`data_record`](keel_tools_core::once::data_record)), and the executor's own finish then finds it done.
    /// It runs on the caller's connection and runtime, not the store's.
    ///
    /// ```no_run
    /// # async fn charge(store: &keel_tools_state::PostgresEffectStore, client: &mut tokio_postgres::Client,
    /// #     lease: &keel_tools_state::Lease) -> Result<(), Box<dyn std::error::Error>> {
    /// let tx = client.transaction().await?;
    /// tx.execute("INSERT INTO charges (order_id, amount) VALUES ($1, $2)", &[&"o-1", &42_i64]).await?;
    /// store.finish_in(&tx, lease, &serde_json::json!({"charged": 42})).await?; // lease_lost: roll back
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// `lease_lost` when the lease is no longer the key's (roll the transaction back: another runner holds the
    /// call); the database's errors.
    pub async fn finish_in<C: tokio_postgres::GenericClient + Sync>(
        &self,
        client: &C,
        lease: &Lease,
        data: &Value,
    ) -> Result<(), StateError> {
        let sql = self.backend.statements();
        let text = keel_tools_core::once::data_record(data).to_string();
        let context = || format!("finishing {:?} ({} in {})", lease.key(), sql.table, self.backend.pool.shown());
        let n = client
            .execute(&sql.effect_finish(), &[&lease.key(), &lease.token(), &text])
            .await
            .map_err(|e| StateError::store(context(), e))?;
        if n == 0
            && client
                .query_opt(&sql.effect_finished_under(), &[&lease.key(), &lease.token()])
                .await
                .map_err(|e| StateError::store(context(), e))?
                .is_none()
        {
            return Err(StateError::LeaseLost { key: lease.key().to_owned() });
        }
        Ok(())
    }

    /// Runs `op` with a client on the store's thread.
    fn run<T: Send + 'static>(
        &self,
        what: String,
        op: impl for<'c> FnOnce(&'c mut Client, Statements) -> PgFuture<'c, T> + Send + 'static,
    ) -> StateFuture<'_, T> {
        let pool = self.backend.pool.clone();
        let sql = self.backend.statements();
        Box::pin(self.backend.worker.run(async move { pool.with(&what, move |client| op(client, sql)).await }))
    }
}

async fn begin_pg(
    client: &mut Client,
    sql: &Statements,
    key: &str,
    fingerprint: &str,
    lease_ms: i64,
    retention_ms: i64,
) -> Result<Begin, OpError> {
    let (claim, read) = (sql.effect_claim(), sql.effect_read());
    for _ in 0..effect::CLAIM_ATTEMPTS {
        let token = effect::lease_token();
        if let Some(row) = client.query_opt(&claim, &[&key, &fingerprint, &token, &lease_ms, &retention_ms]).await? {
            let until: i64 = column(&row, 0, &sql.table, key)?;
            return Ok(Begin::Run(Lease::new(key, token, u64::try_from(until).unwrap_or(0))));
        }
        // Refused: read what holds the key (autocommit: it may have changed since, then claim again).
        let Some(row) = client.query_opt(&read, &[&key]).await? else { continue };
        let record = Recorded {
            fingerprint: column(&row, 0, &sql.table, key)?,
            state: column(&row, 1, &sql.table, key)?,
            lease_until_ms: column(&row, 2, &sql.table, key)?,
            result: column(&row, 3, &sql.table, key)?,
            updated_ms: column(&row, 4, &sql.table, key)?,
            now_ms: column(&row, 5, &sql.table, key)?,
        };
        if let Some(answer) = effect::decide(&sql.table, key, fingerprint, record, retention_ms)? {
            return Ok(answer);
        }
    }
    Err(effect::unsettled(format!("beginning {key:?} ({})", sql.table)).into())
}

impl EffectStore for PostgresEffectStore {
    fn begin<'a>(&'a self, key: &'a str, fingerprint: &'a str, lease: Duration) -> StateFuture<'a, Begin> {
        if let Err(e) = effect::check_key(key) {
            return Box::pin(async move { Err(e) });
        }
        let (key, fingerprint) = (key.to_owned(), fingerprint.to_owned());
        let (lease_ms, retention_ms) = (effect::millis(lease), self.retention_ms);
        self.run(format!("beginning {key:?}"), move |client, sql| {
            Box::pin(async move { begin_pg(client, &sql, &key, &fingerprint, lease_ms, retention_ms).await })
        })
    }

    fn finish<'a>(&'a self, lease: &'a Lease, result: &'a Value) -> StateFuture<'a, ()> {
        let lease = lease.clone();
        let text = result.to_string();
        self.run(format!("finishing {:?}", lease.key()), move |client, sql| {
            Box::pin(async move {
                let n = client.execute(&sql.effect_finish(), &[&lease.key(), &lease.token(), &text]).await?;
                let under = [&lease.key() as &(dyn tokio_postgres::types::ToSql + Sync), &lease.token()];
                if n == 0 && client.query_opt(&sql.effect_finished_under(), &under).await?.is_none() {
                    return Err(StateError::LeaseLost { key: lease.key().to_owned() }.into());
                }
                Ok(())
            })
        })
    }

    fn abandon<'a>(&'a self, lease: &'a Lease) -> StateFuture<'a, ()> {
        let lease = lease.clone();
        self.run(format!("abandoning {:?}", lease.key()), move |client, sql| {
            Box::pin(async move {
                let n = client.execute(&sql.effect_abandon(), &[&lease.key(), &lease.token()]).await?;
                if n == 0 {
                    return Err(StateError::LeaseLost { key: lease.key().to_owned() }.into());
                }
                Ok(())
            })
        })
    }

    fn renew<'a>(&'a self, lease: &'a Lease, lease_for: Duration) -> StateFuture<'a, Lease> {
        let lease = lease.clone();
        let ms = effect::millis(lease_for);
        self.run(format!("renewing {:?}", lease.key()), move |client, sql| {
            Box::pin(async move {
                match client.query_opt(&sql.effect_renew(), &[&lease.key(), &lease.token(), &ms]).await? {
                    Some(row) => {
                        let until: i64 = column(&row, 0, &sql.table, lease.key())?;
                        Ok(Lease::new(lease.key(), lease.token(), u64::try_from(until).unwrap_or(0)))
                    }
                    None => Err(StateError::LeaseLost { key: lease.key().to_owned() }.into()),
                }
            })
        })
    }

    fn purge_expired(&self) -> StateFuture<'_, u64> {
        let retention_ms = self.retention_ms;
        self.run("purging effect records".into(), move |client, sql| {
            Box::pin(async move { Ok(client.execute(&sql.effect_purge(), &[&retention_ms]).await?) })
        })
    }
}
