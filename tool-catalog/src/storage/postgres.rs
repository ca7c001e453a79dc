//! The catalogue in PostgreSQL (feature `postgres`): one database shared by every replica of a service, changes
//! pushed to each of them with `LISTEN`/`NOTIFY`.
//!
//! ```no_run
//! # async fn demo(registry: &keel_tools_core::Registry) -> Result<(), keel_tools_catalog::CatalogError> {
//! use keel_tools_catalog::Catalog;
//!
//! let catalog = Catalog::builder(registry)
//!     .allow_module("my_app::status")
//!     .connect_postgres("postgresql://keel@127.0.0.1:5432/tools")   // created or migrated on connect
//!     .await?;
//! let mut changes = catalog.changes();                           // pushed by NOTIFY, caught up by token
//! while let Some(state) = changes.changed().await {
//!     println!("catalogue at {:?}, store {}", state.token, state.health.status());
//! }
//! # Ok(()) }
//! ```
//!
//! # Why tokio-postgres
//!
//! The catalogue needs three things of a driver: async queries that never hold a runtime worker, the server's
//! asynchronous messages (`NOTIFY`) on a connection of its own, and control over reconnection. `tokio-postgres`
//! gives all three directly: its `Connection` yields [`AsyncMessage::Notification`]s to whoever polls it, and a
//! lost connection is an error the catalogue sees and handles. `sqlx` would bring a pool, a query macro layer and
//! a second runtime abstraction the catalogue does not use (six fixed statements, one table), and its listener
//! reconnects on its own, hiding the outage the health report must show.
//!
//! # TLS
//!
//! The connection string's `sslmode` says whether connections use TLS, with libpq's meanings: absent or `disable`
//! plain, `prefer`, `require`, `verify-ca` and `verify-full` (TLS needs the `rustls` feature, on by default, besides
//! `postgres`); `sslrootcert=PATH` names a PEM file of the CAs to trust. Connections are opened by
//! keel-tools-postgres's [`PgConnector`], whose [TLS section](keel_tools_postgres#tls) has the table of modes; the
//! call-state stores of keel-tools-state read the same connection string the same way.
//!
//! # The table
//!
//! The same `tools` table as the SQLite file (the [crate documentation](crate#the-table) lists the columns), with
//! the same unique `(name, tenant)` scope, plus an identity column `id`, the row's `rowid`. `catalog_state` holds
//! the change counter and the schema version ([`SCHEMA_VERSION`]); a trigger on `tools`
//! counts every row inserted, updated or deleted, by any client (`psql` too), in the same transaction, and sends
//! `NOTIFY keel_catalog, '<generation>'`, which PostgreSQL delivers when the transaction commits. A listener takes
//! a notification as a reason to read the counter, never its payload as the counter: anyone allowed to `NOTIFY`
//! could forge one. Creating and
//! migrating happen on connect, under an advisory lock, so replicas starting together migrate once; a database
//! that is already current is not written.
//!
//! # Consistency
//!
//! A view's rows and token come from one `REPEATABLE READ` read-only transaction: a state that existed. A write is
//! one transaction (`INSERT … ON CONFLICT DO UPDATE` for `put`), so concurrent writers never lose an update; a
//! writer waiting for another's row lock longer than the busy timeout gets `busy` (PostgreSQL's `lock_timeout`),
//! having changed nothing.
//!
//! # Changes, outages, catching up
//!
//! [`Catalog::changes`](crate::Catalog::changes) starts one listener per storage: a dedicated connection that
//! `LISTEN`s, reads the current token at once (catching up on anything committed while it was away), then
//! follows the notifications, and reads the token again every [resync](PgStorageBuilder::resync) interval in case
//! a notification was lost. When the connection fails, the feed reports [`StoreHealth::Degraded`](crate::StoreHealth::Degraded) and the
//! listener reconnects with jittered backoff (100 ms doubling to 5 s by default); views already built keep being
//! served. Operations meanwhile fail with `store_unavailable` and reconnect on their next call.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, OnceLock, Weak};
use std::time::Duration;

use rusqlite::types::Value as Sql;
use tokio::sync::{Mutex, MutexGuard, watch};
use tokio_postgres::error::SqlState;
use tokio_postgres::{AsyncMessage, Client, IsolationLevel};
use tokio_util::sync::CancellationToken;

use super::backoff::Backoff;
use super::columns::{self, Bound, COLUMNS, Param, decode};
use super::{
    ChangeFeed, ChangeToken, DEFAULT_BUSY_TIMEOUT, FeedState, SCHEMA_VERSION, Storage, StoreFuture, Versioned,
    removing, writing,
};
use crate::error::CatalogError;
use crate::row::{StoredRow, ToolRow};

/// How the catalogue (and keel-tools-state's stores) open their connections: keel-tools-postgres's.
pub use keel_tools_postgres::{PgConnector, PgError};

/// The channel every write notifies, with the new generation as payload.
pub const CHANNEL: &str = "keel_catalog";

/// Connections an operation may use at once, by default.
pub const DEFAULT_POOL_SIZE: usize = 4;

const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const DEFAULT_RESYNC: Duration = Duration::from_secs(5);
const FIRST_RECONNECT: Duration = Duration::from_millis(100);
const MAX_RECONNECT: Duration = Duration::from_secs(5);

/// An arbitrary key for the advisory lock that serialises migrations.
const MIGRATION_LOCK: i64 = 0x6b65_656c_0002;

const CREATE: &str = "
CREATE TABLE IF NOT EXISTS tools (
    id            bigint GENERATED ALWAYS AS IDENTITY,
    name          text NOT NULL,
    description   text NOT NULL,
    input_schema  text NOT NULL,
    output_schema text,
    kind          text NOT NULL,
    locator       text NOT NULL,
    version       text NOT NULL DEFAULT '1.0',
    effect        text NOT NULL DEFAULT 'destructive',
    enabled       integer NOT NULL DEFAULT 1,
    tenant        text,
    extra         text NOT NULL DEFAULT '{}'
)";

/// Columns added to an adopted table that lacks them (the minimal table has name, description, input_schema,
/// kind and locator).
const ADDED_COLUMNS: [(&str, &str); 7] = [
    ("id", "bigint GENERATED ALWAYS AS IDENTITY"),
    ("output_schema", "text"),
    ("version", "text NOT NULL DEFAULT '1.0'"),
    ("effect", "text NOT NULL DEFAULT 'destructive'"),
    ("enabled", "integer NOT NULL DEFAULT 1"),
    ("tenant", "text"),
    ("extra", "text NOT NULL DEFAULT '{}'"),
];

const REQUIRED_COLUMNS: [&str; 5] = ["name", "description", "input_schema", "kind", "locator"];

const CREATE_REST: &str = "
CREATE UNIQUE INDEX IF NOT EXISTS tools_id ON tools (id);
CREATE UNIQUE INDEX IF NOT EXISTS tools_name_tenant ON tools (name, (coalesce(tenant, '')));
CREATE TABLE IF NOT EXISTS catalog_state (
    id             integer PRIMARY KEY CHECK (id = 1),
    generation     bigint NOT NULL,
    schema_version integer NOT NULL
);
INSERT INTO catalog_state (id, generation, schema_version) VALUES (1, 0, 0) ON CONFLICT (id) DO NOTHING;
CREATE OR REPLACE FUNCTION keel_tools_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE g bigint;
BEGIN
    UPDATE catalog_state SET generation = generation + 1 WHERE id = 1 RETURNING generation INTO g;
    PERFORM pg_notify('keel_catalog', g::text);
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS tools_changed ON tools;
CREATE TRIGGER tools_changed AFTER INSERT OR UPDATE OR DELETE ON tools
    FOR EACH ROW EXECUTE FUNCTION keel_tools_changed();
";

/// A read: the `id`, then the row's columns.
static SELECT: LazyLock<String> = LazyLock::new(|| columns::select("id"));

/// Inserts a row, or replaces the columns of the row of the same name and tenant, with the values of
/// [`Bound::values`]; returns its id.
static UPSERT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{} ON CONFLICT (name, (coalesce(tenant, ''))) DO UPDATE SET {} RETURNING id",
        columns::insert(|i| format!("${i}")),
        columns::assignments(|_, c| format!("{c} = EXCLUDED.{c}"))
    )
});

/// Configures a [`PgStorage`]; see [`PgStorage::builder`].
#[must_use]
#[derive(Debug, Clone)]
pub struct PgStorageBuilder {
    conninfo: String,
    pool_size: usize,
    connect_timeout: Duration,
    busy_timeout: Duration,
    resync: Duration,
    reconnect: (Duration, Duration),
}

impl PgStorageBuilder {
    /// Connections operations may use at once (default [`DEFAULT_POOL_SIZE`]); each is opened on first use and
    /// again after it is lost. The change listener has one more of its own.
    pub fn pool_size(mut self, n: usize) -> Self {
        self.pool_size = n.max(1);
        self
    }

    /// How long opening one connection may take (default 5 s) before `store_unavailable`.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a write may wait for another writer's row lock (PostgreSQL's `lock_timeout`, default 2 s) before
    /// `busy`, having changed nothing.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// How often the change listener reads the token even without a notification (default 5 s): the bound on how
    /// late a change can be seen if its notification was lost.
    pub fn resync(mut self, every: Duration) -> Self {
        self.resync = every.max(Duration::from_millis(10));
        self
    }

    /// The listener's pauses between reconnection attempts: `first`, doubling up to `max`, each jittered.
    pub fn reconnect_backoff(mut self, first: Duration, max: Duration) -> Self {
        self.reconnect = (first.max(Duration::from_millis(1)), max.max(first));
        self
    }

    /// Connects, creates or migrates the table (see the [module documentation](self)), and returns the storage.
    pub async fn connect(self) -> Result<PgStorage, CatalogError> {
        let connector = PgConnector::new(&self.conninfo, "keel-catalog", self.connect_timeout)?;
        let inner = Arc::new(PgInner {
            shown: connector.describe().to_owned(),
            connector,
            slots: (0..self.pool_size).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            busy_timeout: self.busy_timeout,
            resync: self.resync,
            reconnect: self.reconnect,
            feed: OnceLock::new(),
            stop: CancellationToken::new(),
        });
        let storage = PgStorage { inner };
        let mut slot = storage.inner.slot("connecting").await?;
        match migrate(slot.client()).await {
            Ok(()) => {}
            Err(MigrateError::Pg(e)) => {
                slot.settle::<()>(&storage.inner.shown, "creating or migrating the catalogue", Err(e))?;
            }
            Err(MigrateError::Refused(message)) => {
                return Err(CatalogError::Store {
                    context: format!("opening {}", storage.inner.shown),
                    message,
                    source: None,
                });
            }
        }
        drop(slot);
        Ok(storage)
    }
}

/// The catalogue's rows in a PostgreSQL database: a [`Storage`] for
/// [`CatalogBuilder::storage`](crate::CatalogBuilder::storage), or made by
/// [`CatalogBuilder::connect_postgres`](crate::CatalogBuilder::connect_postgres). Cheap to clone.
#[derive(Clone)]
pub struct PgStorage {
    inner: Arc<PgInner>,
}

struct PgInner {
    connector: PgConnector,
    /// The database, as the connector describes it.
    shown: String,
    slots: Vec<Mutex<Option<Client>>>,
    next: AtomicUsize,
    busy_timeout: Duration,
    resync: Duration,
    reconnect: (Duration, Duration),
    feed: OnceLock<ChangeFeed>,
    stop: CancellationToken,
}

impl Drop for PgInner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl fmt::Debug for PgStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStorage").field("database", &self.inner.shown).finish_non_exhaustive()
    }
}

/// A pool slot, locked, holding an open client.
struct Slot<'a> {
    guard: MutexGuard<'a, Option<Client>>,
}

impl Slot<'_> {
    fn client(&mut self) -> &mut Client {
        self.guard.as_mut().expect("a slot is handed out holding a client")
    }

    /// Maps the outcome of an operation; a lost connection empties the slot, to be reopened by the next operation.
    fn settle<T>(
        &mut self,
        shown: &str,
        context: &str,
        result: Result<T, tokio_postgres::Error>,
    ) -> Result<T, CatalogError> {
        result.map_err(|e| {
            let closed = self.guard.as_ref().is_none_or(Client::is_closed) || e.is_closed();
            if closed {
                *self.guard = None;
            }
            classify(shown, context, e, closed)
        })
    }
}

/// A driver error as a [`CatalogError`], the driver's error its source.
fn classify(shown: &str, context: &str, e: tokio_postgres::Error, closed: bool) -> CatalogError {
    let message = match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    };
    let busy = e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE);
    let unavailable = closed || e.code().is_none();
    let source: Option<Arc<dyn std::error::Error + Send + Sync>> = Some(Arc::new(e));
    if busy {
        return CatalogError::Busy { context: context.to_owned(), waited: Duration::ZERO, attempts: 1, source };
    }
    if unavailable {
        return CatalogError::Unavailable { context: format!("{context} ({shown})"), message, source };
    }
    CatalogError::Store { context: format!("{context} ({shown})"), message, source }
}

/// Errors after which the same transaction may succeed when repeated: it was rolled back, having changed nothing.
fn retryable(e: &tokio_postgres::Error) -> bool {
    matches!(e.code(), Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED)
}

/// One transaction on a client, as the storage methods write it.
type PgFuture<'c, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, tokio_postgres::Error>> + Send + 'c>>;

/// Aborts a task when dropped (the listener's connection driver, when the listener stops).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl PgInner {
    /// A slot, round robin, with an open client (connecting it when it is empty or its connection was lost).
    async fn slot(&self, context: &str) -> Result<Slot<'_>, CatalogError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut guard = self.slots[i].lock().await;
        if guard.as_ref().is_none_or(Client::is_closed) {
            *guard = None;
            let (client, connection) = self.connector.open(context).await?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "a catalogue database connection ended");
                }
            });
            let lock_timeout = format!("SET lock_timeout = {}", self.busy_timeout.as_millis().max(1));
            client.batch_execute(&lock_timeout).await.map_err(|e| classify(&self.shown, context, e, true))?;
            *guard = Some(client);
        }
        Ok(Slot { guard })
    }

    /// Runs one transaction `op` on a pooled client; repeats it after serialization failures and deadlocks until
    /// the busy timeout, then `busy`.
    async fn run<T, F>(&self, context: String, op: F) -> Result<T, CatalogError>
    where
        F: for<'c> Fn(&'c mut Client) -> PgFuture<'c, T>,
    {
        let mut backoff = Backoff::new(self.busy_timeout);
        loop {
            let mut slot = self.slot(&context).await?;
            let result = match op(slot.client()).await {
                Err(e) if retryable(&e) => {
                    drop(slot);
                    match backoff.next() {
                        Some(pause) => tokio::time::sleep(pause).await,
                        None => return Err(backoff.error(context, Some(Arc::new(e)))),
                    }
                    continue;
                }
                result => result,
            };
            match slot.settle(&self.shown, &context, result) {
                Err(CatalogError::Busy { context, source, .. }) => {
                    return Err(CatalogError::Busy { context, waited: self.busy_timeout, attempts: 1, source });
                }
                other => return other,
            }
        }
    }
}

/// Why a migration failed: the driver, or a database that this build cannot adopt.
enum MigrateError {
    Pg(tokio_postgres::Error),
    Refused(String),
}

impl From<tokio_postgres::Error> for MigrateError {
    fn from(e: tokio_postgres::Error) -> Self {
        MigrateError::Pg(e)
    }
}

/// Brings the database's schema to [`SCHEMA_VERSION`], under an advisory lock; writes nothing when it is current.
async fn migrate(client: &mut Client) -> Result<(), MigrateError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
    let has_state = tx.query_one("SELECT to_regclass('catalog_state') IS NOT NULL", &[]).await?.get::<_, bool>(0);
    if has_state {
        let version: Option<i32> =
            tx.query_opt("SELECT schema_version FROM catalog_state WHERE id = 1", &[]).await?.map(|r| r.get(0));
        match version.map(i64::from) {
            Some(v) if v > SCHEMA_VERSION => {
                return Err(MigrateError::Refused(format!(
                    "the database has catalogue schema version {v}, newer than this build's {SCHEMA_VERSION}; \
                     connect with a newer build"
                )));
            }
            Some(SCHEMA_VERSION) => return Ok(tx.commit().await?),
            _ => {}
        }
    }
    let columns: Vec<String> = tx
        .query(
            "SELECT column_name::text FROM information_schema.columns WHERE table_schema = current_schema() AND \
             table_name = 'tools'",
            &[],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if columns.is_empty() {
        tx.batch_execute(CREATE).await?;
    } else {
        let missing: Vec<&str> =
            REQUIRED_COLUMNS.iter().copied().filter(|c| !columns.iter().any(|have| have == c)).collect();
        if !missing.is_empty() {
            return Err(MigrateError::Refused(format!(
                "the existing `tools` table lacks the column(s) {}; it is not a tool catalogue",
                missing.join(", ")
            )));
        }
        for (column, definition) in ADDED_COLUMNS {
            if !columns.iter().any(|have| have == column) {
                tx.batch_execute(&format!("ALTER TABLE tools ADD COLUMN {column} {definition}")).await?;
            }
        }
    }
    tx.batch_execute(CREATE_REST).await?;
    let version = i32::try_from(SCHEMA_VERSION).unwrap_or(i32::MAX);
    tx.execute("UPDATE catalog_state SET schema_version = $1 WHERE id = 1", &[&version]).await?;
    Ok(tx.commit().await?)
}

/// One row's columns as the values [`decode`] reads (the same decoding as the SQLite file's).
fn columns(row: &tokio_postgres::Row) -> (i64, Vec<Sql>) {
    let id: i64 = row.try_get(0).unwrap_or(0);
    let mut cols = Vec::with_capacity(COLUMNS.len());
    for (i, column) in (1..).zip(COLUMNS) {
        let value = if column == "enabled" {
            match row.try_get::<_, Option<i32>>(i) {
                Ok(Some(n)) => Sql::Integer(i64::from(n)),
                Ok(None) => Sql::Null,
                Err(_) => Sql::Blob(Vec::new()),
            }
        } else {
            match row.try_get::<_, Option<String>>(i) {
                Ok(Some(t)) => Sql::Text(t),
                Ok(None) => Sql::Null,
                Err(_) => Sql::Blob(Vec::new()),
            }
        };
        cols.push(value);
    }
    (id, cols)
}

fn generation(row: &tokio_postgres::Row) -> ChangeToken {
    ChangeToken::new(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
}

const GENERATION: &str = "SELECT generation FROM catalog_state WHERE id = 1";

impl PgStorage {
    /// A builder for the database of `conninfo`: a `postgresql://user@host:port/dbname` URL or a libpq
    /// `host=… port=… user=… dbname=…` string.
    pub fn builder(conninfo: impl Into<String>) -> PgStorageBuilder {
        PgStorageBuilder {
            conninfo: conninfo.into(),
            pool_size: DEFAULT_POOL_SIZE,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            resync: DEFAULT_RESYNC,
            reconnect: (FIRST_RECONNECT, MAX_RECONNECT),
        }
    }

    /// Connects with the defaults; see [`PgStorageBuilder::connect`].
    pub async fn connect(conninfo: impl Into<String>) -> Result<PgStorage, CatalogError> {
        PgStorage::builder(conninfo).connect().await
    }
}

impl Storage for PgStorage {
    fn describe(&self) -> String {
        self.inner.shown.clone()
    }

    fn rows<'a>(&'a self, tenant: Option<&'a str>) -> StoreFuture<'a, Versioned<Vec<StoredRow>>> {
        let tenant = tenant.map(str::to_owned);
        Box::pin(self.inner.run("reading the tools table".into(), move |client| {
            let tenant = tenant.clone();
            Box::pin(async move {
                let tx = client
                    .build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()
                    .await?;
                let token = generation(&tx.query_one(GENERATION, &[]).await?);
                let rows = match &tenant {
                    Some(t) => {
                        tx.query(&format!("{} WHERE tenant IS NULL OR tenant = $1 ORDER BY id", *SELECT), &[t]).await?
                    }
                    None => tx.query(&format!("{} ORDER BY id", *SELECT), &[]).await?,
                };
                tx.commit().await?;
                let rows = rows
                    .iter()
                    .map(|r| {
                        let (rowid, cols) = columns(r);
                        StoredRow { rowid, row: decode(rowid, cols) }
                    })
                    .collect();
                Ok(Versioned::new(rows, token))
            })
        }))
    }

    fn put<'a>(&'a self, row: &'a ToolRow) -> StoreFuture<'a, Versioned<i64>> {
        let row = Arc::new(row.clone());
        Box::pin(self.inner.run(writing(&row.name), move |client| {
            let row = row.clone();
            Box::pin(async move {
                let bound = Bound::new(&row);
                let params = bound.values();
                let values: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                    .iter()
                    .map(|p| match p {
                        Param::Text(s) => s as &(dyn tokio_postgres::types::ToSql + Sync),
                        Param::Nullable(s) => s,
                        Param::Integer(i) => i,
                    })
                    .collect();
                let tx = client.transaction().await?;
                let id: i64 = tx.query_one(UPSERT.as_str(), &values).await?.get(0);
                let token = generation(&tx.query_one(GENERATION, &[]).await?);
                tx.commit().await?;
                Ok(Versioned::new(id, token))
            })
        }))
    }

    fn set_enabled<'a>(
        &'a self,
        name: &'a str,
        tenant: Option<&'a str>,
        enabled: bool,
    ) -> StoreFuture<'a, Versioned<bool>> {
        let (n, t) = (name.to_owned(), tenant.map(str::to_owned));
        Box::pin(self.inner.run(writing(name), move |client| {
            let (n, t) = (n.clone(), t.clone());
            Box::pin(async move {
                let tx = client.transaction().await?;
                let found = tx
                    .execute(
                        "UPDATE tools SET enabled = $3 WHERE name = $1 AND tenant IS NOT DISTINCT FROM $2",
                        &[&n, &t, &i32::from(enabled)],
                    )
                    .await?;
                let token = generation(&tx.query_one(GENERATION, &[]).await?);
                tx.commit().await?;
                Ok(Versioned::new(found > 0, token))
            })
        }))
    }

    fn remove<'a>(&'a self, name: &'a str, tenant: Option<&'a str>) -> StoreFuture<'a, Versioned<bool>> {
        let (n, t) = (name.to_owned(), tenant.map(str::to_owned));
        Box::pin(self.inner.run(removing(name), move |client| {
            let (n, t) = (n.clone(), t.clone());
            Box::pin(async move {
                let tx = client.transaction().await?;
                let found = tx
                    .execute("DELETE FROM tools WHERE name = $1 AND tenant IS NOT DISTINCT FROM $2", &[&n, &t])
                    .await?;
                let token = generation(&tx.query_one(GENERATION, &[]).await?);
                tx.commit().await?;
                Ok(Versioned::new(found > 0, token))
            })
        }))
    }

    fn change_token(&self) -> StoreFuture<'_, ChangeToken> {
        Box::pin(self.inner.run("reading the change counter".into(), |client| {
            Box::pin(async move { Ok(generation(&client.query_one(GENERATION, &[]).await?)) })
        }))
    }

    fn changes(&self) -> Option<ChangeFeed> {
        let feed = self.inner.feed.get_or_init(|| {
            let (tx, rx) = watch::channel(FeedState::new());
            tokio::spawn(listen(Arc::downgrade(&self.inner), self.inner.stop.clone(), tx));
            ChangeFeed::new(rx)
        });
        Some(feed.clone())
    }
}

/// The change listener: one connection of its own that `LISTEN`s, catches up by reading the token on every
/// (re)connection and every resync interval, and reconnects with backoff; until `stop` (the storage dropped).
async fn listen(inner: Weak<PgInner>, stop: CancellationToken, tx: watch::Sender<FeedState>) {
    let mut backoff: Option<Backoff> = None;
    loop {
        let Some(storage) = inner.upgrade() else { return };
        let (connector, resync, (first, max)) = (storage.connector.clone(), storage.resync, storage.reconnect);
        drop(storage);
        let outcome = tokio::select! {
            () = stop.cancelled() => return,
            outcome = follow(&connector, resync, &tx) => outcome,
        };
        let error = match outcome {
            Ok(never) => match never {},
            Err(e) => e,
        };
        // A connection that reached the store (the feed says connected) ends an outage: the backoff starts over.
        if !tx.borrow().health.is_degraded() {
            backoff = None;
        }
        let backoff = backoff.get_or_insert_with(|| Backoff::with_pauses(Duration::MAX, first, max));
        let pause = backoff.next().unwrap_or(max);
        let attempts = backoff.attempts();
        tracing::warn!(error = %error, attempts, "the catalogue's change listener lost the database; reconnecting");
        tx.send_modify(|s| s.failed(error, attempts));
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// One connection's life: connect, `LISTEN`, read the token, then follow notifications and resync; returns the
/// error that ended it. A connection that worked resets the backoff by sending `Connected`.
async fn follow(
    connector: &PgConnector,
    resync: Duration,
    tx: &watch::Sender<FeedState>,
) -> Result<std::convert::Infallible, String> {
    let (client, mut connection) = connector.open("listening").await.map_err(|e| e.message().to_owned())?;
    let (notes, mut received) = tokio::sync::mpsc::unbounded_channel::<()>();
    // The connection is polled here, so that its notifications come out; it ends when the connection does.
    let mut driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    // The payload (the generation) is not trusted: anyone who may NOTIFY could forge it. It only
                    // says that the counter is worth reading.
                    let _ = n;
                    if notes.send(()).is_err() {
                        return Ok(());
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.to_string()),
                None => return Err("the connection was closed".to_owned()),
            }
        }
    });
    let _abort = AbortOnDrop(driver.abort_handle());
    client.batch_execute(&format!("LISTEN {CHANNEL}")).await.map_err(|e| e.to_string())?;
    let publish = |token: ChangeToken| {
        tx.send_if_modified(|s| s.read(token));
    };
    let read = || async { client.query_one(GENERATION, &[]).await.map(|r| generation(&r)).map_err(|e| e.to_string()) };
    // Catch up on whatever was committed before the LISTEN took effect (or while disconnected).
    publish(read().await?);
    let mut tick = tokio::time::interval(resync);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            note = received.recv() => match note {
                Some(()) => {
                    // A burst of notifications is one read of the counter.
                    while received.try_recv().is_ok() {}
                    publish(read().await?);
                }
                None => {
                    return Err(match (&mut driver).await {
                        Ok(Err(e)) => e,
                        _ => "the listening connection was closed".to_owned(),
                    });
                }
            },
            _ = tick.tick() => publish(read().await?),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[tokio::test]
    async fn a_connection_string_that_does_not_parse_keeps_the_drivers_error() {
        let e = PgStorage::connect("postgresql://[").await.unwrap_err();
        assert_eq!(e.code(), "config_error", "{e}");
        let driver = e.source().and_then(|s| s.downcast_ref::<tokio_postgres::Error>()).expect("the driver's error");
        assert!(e.to_string().ends_with(&driver.to_string()), "{e}");
    }

    #[tokio::test]
    async fn a_server_that_refuses_keeps_the_drivers_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let e = PgStorage::builder(format!("host=127.0.0.1 port={port} user=keel dbname=x"))
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await
            .unwrap_err();
        assert_eq!(e.code(), "store_unavailable", "{e}");
        let driver = e.source().and_then(|s| s.downcast_ref::<tokio_postgres::Error>()).expect("the driver's error");
        let CatalogError::Unavailable { message, .. } = &e else { panic!("{e:?}") };
        // The driver's text, then its cause's (the refused connection).
        let cause = driver.source().expect("the driver's cause").to_string();
        assert_eq!(message, &format!("{driver}: {cause}"));
    }

    /// The connection string's TLS settings are keel-tools-postgres's (tested there); this build's `rustls` feature
    /// reaches them: without it, a mode that needs TLS is refused before any connection.
    #[cfg(not(feature = "rustls"))]
    #[tokio::test]
    async fn without_the_rustls_feature_a_mode_that_needs_tls_is_a_configuration_error() {
        for mode in ["require", "verify-ca", "verify-full"] {
            let e = PgStorage::connect(format!("host=127.0.0.1 user=keel sslmode={mode}")).await.unwrap_err();
            assert_eq!(e.code(), "config_error", "{e}");
            assert!(e.to_string().contains("`rustls` feature"), "{e}");
        }
    }

    /// The statements built from the column list, as they were written out before it.
    #[test]
    fn the_statements_name_the_columns_in_their_order() {
        assert_eq!(
            *SELECT,
            "SELECT id, name, description, input_schema, output_schema, kind, locator, version, effect, enabled, \
             tenant, extra FROM tools"
        );
        assert_eq!(
            *UPSERT,
            "INSERT INTO tools (name, tenant, description, input_schema, output_schema, kind, locator, version, \
             effect, enabled, extra) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (name, \
             (coalesce(tenant, ''))) DO UPDATE SET description = EXCLUDED.description, input_schema = \
             EXCLUDED.input_schema, output_schema = EXCLUDED.output_schema, kind = EXCLUDED.kind, locator = \
             EXCLUDED.locator, version = EXCLUDED.version, effect = EXCLUDED.effect, enabled = EXCLUDED.enabled, \
             extra = EXCLUDED.extra RETURNING id"
        );
    }
}
