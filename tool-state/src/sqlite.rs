//! The stores in a SQLite file (feature `sqlite`): shared by the processes of one machine.
//!
//! Each store holds one connection to the file (WAL journal, `synchronous=FULL`: a committed write survives a
//! crash), used by one operation at a time; a write waits up to the busy timeout for another connection's lock.
//! Several stores, in one process or several, may open the same file: its locks make them one store.
//!
//! The file holds the records' arguments and results: it is created readable by its owner only (`0600`, Unix),
//! and an existing file open to group or others is refused (`config_error`), neither used nor changed, as
//! [`FileStore`](keel_tools_core::runs::FileStore) refuses a directory.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use keel_tools_core::runs::{PendingCall, PendingStore, PendingStoreError};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;

use crate::effect::{self, Begin, DEFAULT_RETENTION, EffectStore, Lease, Recorded, StateFuture};
use crate::error::StateError;
use crate::pending::{decode, encode};
use crate::schema::{self, Kind};
use crate::sql::Statements;

/// How long a write waits for another connection's lock by default before `store_error`.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a task store reads the file for other processes' changes by default.
pub const DEFAULT_TASK_POLL: Duration = Duration::from_millis(200);

mod task;

pub use task::SqliteTaskStore;

/// One connection to the file, and the table a store keeps in it.
struct Db {
    conn: Mutex<Connection>,
    path: PathBuf,
    table: String,
}

impl Db {
    fn open(path: &Path, table: Option<String>, kind: Kind, busy_timeout: Duration) -> Result<Db, StateError> {
        let table = table.unwrap_or_else(|| kind.default_table().to_owned());
        schema::check_table(&table)?;
        create_private(path)?;
        let context = || format!("opening {}", path.display());
        let mut conn = Connection::open(path).map_err(|e| unavailable(context(), e))?;
        conn.busy_timeout(busy_timeout).map_err(|e| StateError::store(context(), e))?;
        conn.pragma_update_and_check(None, "journal_mode", "wal", |_| Ok(()))
            .map_err(|e| StateError::store(context(), e))?;
        conn.pragma_update(None, "synchronous", "full").map_err(|e| StateError::store(context(), e))?;
        migrate(&mut conn, &table, kind).map_err(|e| match e {
            Migrate::Sql(e) => StateError::store(format!("creating the table {table} in {}", path.display()), e),
            Migrate::Refused(e) => e,
        })?;
        Ok(Db { conn: Mutex::new(conn), path: path.to_owned(), table })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while the connection was held leaves it usable: every operation is one transaction.
        self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn statements(&self) -> Statements {
        Statements::sqlite(&self.table, schema::now_ms())
    }

    fn context(&self, what: &str) -> String {
        format!("{what} ({} in {})", self.table, self.path.display())
    }
}

enum Migrate {
    Sql(rusqlite::Error),
    Refused(StateError),
}

impl From<rusqlite::Error> for Migrate {
    fn from(e: rusqlite::Error) -> Migrate {
        Migrate::Sql(e)
    }
}

/// Creates the table if [`schema::SCHEMA_TABLE`] does not record it, in one immediate transaction (so that two
/// processes opening a new file create it once).
fn migrate(conn: &mut Connection, table: &str, kind: Kind) -> Result<(), Migrate> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(schema::CREATE_SCHEMA_TABLE)?;
    let recorded = tx
        .query_row("SELECT kind, version FROM keel_state_schema WHERE table_name = ?1", [table], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })
        .optional()?;
    if schema::plan(table, kind, recorded).map_err(Migrate::Refused)? {
        tx.execute_batch(&kind.create(table))?;
        tx.execute(
            "INSERT INTO keel_state_schema (table_name, kind, version) VALUES (?1, ?2, ?3)
             ON CONFLICT (table_name) DO UPDATE SET version = excluded.version",
            rusqlite::params![table, kind.as_str(), schema::SCHEMA_VERSION],
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// Creates the file readable by its owner only if it is missing; refuses an existing one open to others (Unix).
fn create_private(path: &Path) -> Result<(), StateError> {
    let context = || format!("opening {}", path.display());
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(StateError::Unavailable {
                context: context(),
                message: e.to_string(),
                source: Some(Box::new(e)),
            });
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).map_err(|e| StateError::Unavailable {
            context: context(),
            message: e.to_string(),
            source: Some(Box::new(e)),
        })?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(StateError::config(format!(
                "{} is open to other users (mode {mode:03o}); it holds the calls' arguments and results, so it \
                 must be private to its owner: `chmod 600` it, or choose a new file (created 0600)",
                path.display()
            )));
        }
    }
    Ok(())
}

fn unavailable(context: String, e: rusqlite::Error) -> StateError {
    StateError::Unavailable { context, message: e.to_string(), source: Some(Box::new(e)) }
}

/// Configures a [`SqlitePendingStore`], a [`SqliteEffectStore`] or a [`SqliteTaskStore`]; see their `builder`s.
#[derive(Debug, Clone)]
#[must_use]
pub struct SqliteBuilder {
    path: PathBuf,
    table: Option<String>,
    busy_timeout: Duration,
    retention: Duration,
    recheck: Duration,
}

impl SqliteBuilder {
    fn new(path: &Path) -> SqliteBuilder {
        SqliteBuilder {
            path: path.to_owned(),
            table: None,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            retention: DEFAULT_RETENTION,
            recheck: DEFAULT_TASK_POLL,
        }
    }

    /// The table (default `keel_pending_calls`, `keel_effects` or `keel_tasks`): a plain lowercase identifier,
    /// checked on open.
    pub fn table(mut self, name: impl Into<String>) -> Self {
        self.table = Some(name.into());
        self
    }

    /// How long a write waits for another connection's lock (default [`DEFAULT_BUSY_TIMEOUT`]).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// How long an effect record is kept after it finished (default [`DEFAULT_RETENTION`]); effect stores only.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// How often a task store reads the file for changes made by other processes or stores (default
    /// [`DEFAULT_TASK_POLL`], at least 1 ms): what a [`wait`](crate::TaskStore::wait) or a
    /// [`changes`](crate::TaskStore::changes) feed waits at most for them. Changes made through the same store
    /// wake its waiters at once. Task stores only.
    pub fn recheck(mut self, every: Duration) -> Self {
        self.recheck = every.max(Duration::from_millis(1));
        self
    }

    /// Opens the file (created `0600` if missing) and creates the pending calls' table if it is missing.
    ///
    /// # Errors
    ///
    /// `config_error` for a bad table name, a file open to other users, or a table of another kind or a newer
    /// schema; `store_unavailable` when the file cannot be opened; `store_error` when it cannot be written.
    pub fn open_pending(self) -> Result<SqlitePendingStore, StateError> {
        let db = Db::open(&self.path, self.table, Kind::Pending, self.busy_timeout)?;
        Ok(SqlitePendingStore { db: Arc::new(db) })
    }

    /// Opens the file (created `0600` if missing) and creates the effect records' table if it is missing.
    ///
    /// # Errors
    ///
    /// As [`open_pending`](SqliteBuilder::open_pending).
    pub fn open_effects(self) -> Result<SqliteEffectStore, StateError> {
        let db = Db::open(&self.path, self.table, Kind::Effects, self.busy_timeout)?;
        Ok(SqliteEffectStore { db: Arc::new(db), retention_ms: effect::millis(self.retention) })
    }

    /// Opens the file (created `0600` if missing) and creates the tasks' table if it is missing.
    ///
    /// # Errors
    ///
    /// As [`open_pending`](SqliteBuilder::open_pending).
    pub fn open_tasks(self) -> Result<SqliteTaskStore, StateError> {
        let db = Db::open(&self.path, self.table, Kind::Tasks, self.busy_timeout)?;
        Ok(SqliteTaskStore::new(db, self.busy_timeout, self.recheck))
    }
}

/// A [`PendingStore`] in a SQLite file: one row per pending call, the signed record kept verbatim (its JSON) under
/// its [`key`](PendingCall::key), with its expiry in a column of its own for [`purge_expired`](Self::purge_expired).
///
/// - **Whole records**: a save is one statement, committed or not.
/// - **Taken once**: [`take`](PendingStore::take) deletes the row and returns what it held in one statement
///   (`DELETE … RETURNING`), in an immediate transaction: of any number of takers, in any number of processes,
///   exactly one gets the record. A row that is not a pending call is left in place and reported as
///   [`PendingStoreError::Corrupt`].
/// - **Resolved once**: the same transaction records the record taken, in the table `<table>_consumed` (its
///   [`record_id`](PendingCall::record_id), until it expires): the record saved again is refused, and found put
///   back in the table is deleted and refused ([`PendingStoreError::Consumed`]).
/// - **Expiry**: an expired record is listed and taken like any other, so that
///   [`Executor::resume`](keel_tools_core::Executor::resume) answers `approval_expired` for it;
///   [`purge_expired`](Self::purge_expired) deletes those expired for a while.
/// - **Tamper evidence** stays with the record's MAC: a row changed in the file is taken as it is, and `resume`
///   refuses it (`approval_stale`).
#[derive(Clone)]
pub struct SqlitePendingStore {
    db: Arc<Db>,
}

impl std::fmt::Debug for SqlitePendingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlitePendingStore").field("path", &self.db.path).field("table", &self.db.table).finish()
    }
}

impl SqlitePendingStore {
    /// The store in the SQLite file `path`, table `keel_pending_calls`; see [`SqliteBuilder::open_pending`].
    ///
    /// # Errors
    ///
    /// As [`SqliteBuilder::open_pending`].
    pub fn open(path: impl AsRef<Path>) -> Result<SqlitePendingStore, StateError> {
        SqlitePendingStore::builder(path).open_pending()
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

    /// Deletes the records that expired more than `grace` ago (this machine's clock); how many. The records of
    /// calls taken that expired as long ago are deleted too (a record that expired is refused by `resume` anyway),
    /// and not counted.
    ///
    /// # Errors
    ///
    /// The database's.
    pub fn purge_expired(&self, grace: Duration) -> Result<u64, StateError> {
        let conn = self.db.lock();
        let context = || self.db.context("purging expired pending calls");
        let statements = self.db.statements();
        let n = conn
            .execute(&statements.pending_purge(), [effect::millis(grace)])
            .map_err(|e| StateError::store(context(), e))?;
        conn.execute(&statements.pending_purge_consumed(), [effect::millis(grace)])
            .map_err(|e| StateError::store(context(), e))?;
        Ok(n as u64)
    }
}

impl PendingStore for SqlitePendingStore {
    fn save(&self, pending: &PendingCall) -> Result<(), PendingStoreError> {
        let (key, text, expires) = encode(pending);
        let id = pending.record_id();
        let conn = self.db.lock();
        let n = conn
            .execute(&self.db.statements().pending_save(), rusqlite::params![key, text, expires, id])
            .map_err(|e| StateError::store(self.db.context(&format!("saving {key}")), e))?;
        if n == 0 {
            return Err(StateError::Consumed { key }.into());
        }
        Ok(())
    }

    fn list(&self) -> Result<Vec<PendingCall>, PendingStoreError> {
        let conn = self.db.lock();
        let context = || self.db.context("listing pending calls");
        let mut statement =
            conn.prepare(&self.db.statements().pending_list()).map_err(|e| StateError::store(context(), e))?;
        let rows = statement
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|e| StateError::store(context(), e))?;
        let mut calls = Vec::with_capacity(rows.len());
        for (key, text) in rows {
            calls.push(decode(&self.db.table, &key, &text)?);
        }
        Ok(calls)
    }

    fn take(&self, key: &str) -> Result<Option<PendingCall>, PendingStoreError> {
        let mut conn = self.db.lock();
        let context = || self.db.context(&format!("taking {key}"));
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| StateError::store(context(), e))?;
        let text: Option<String> = tx
            .query_row(&self.db.statements().pending_take(), [key], |r| r.get(0))
            .optional()
            .map_err(|e| StateError::store(context(), e))?;
        let Some(text) = text else { return Ok(None) };
        // A row that is not a pending call goes back (the transaction is rolled back when dropped).
        let pending = decode(&self.db.table, key, &text)?;
        // Recorded as taken; a record taken before is deleted and refused.
        let (_, _, expires) = encode(&pending);
        let fresh = tx
            .execute(&self.db.statements().pending_consume(), rusqlite::params![pending.record_id(), key, expires])
            .map_err(|e| StateError::store(context(), e))?;
        tx.commit().map_err(|e| StateError::store(context(), e))?;
        if fresh == 0 {
            return Err(StateError::Consumed { key: key.to_owned() }.into());
        }
        Ok(Some(pending))
    }
}

/// An [`EffectStore`] in a SQLite file, by this machine's clock. Its operations run on Tokio's blocking threads
/// when called inside a Tokio runtime (they never hold a runtime worker), in the caller's thread otherwise.
#[derive(Clone)]
pub struct SqliteEffectStore {
    db: Arc<Db>,
    retention_ms: i64,
}

impl std::fmt::Debug for SqliteEffectStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteEffectStore")
            .field("path", &self.db.path)
            .field("table", &self.db.table)
            .field("retention_ms", &self.retention_ms)
            .finish()
    }
}

impl SqliteEffectStore {
    /// The store in the SQLite file `path`, table `keel_effects`, results kept for [`DEFAULT_RETENTION`]; see
    /// [`SqliteBuilder::open_effects`].
    ///
    /// # Errors
    ///
    /// As [`SqliteBuilder::open_effects`].
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteEffectStore, StateError> {
        SqliteEffectStore::builder(path).open_effects()
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

    /// Records `data` as the result of the call `lease` is for, over `conn`: a connection of the caller's own to
    /// this store's file, in the transaction that does the call's effect, so that the effect and its record are
    /// committed together or not at all. For a handler of a tool that runs once
    /// ([`CallContext::effect_lease`](keel_tools_core::CallContext::effect_lease)): the record is the one the
    /// executor would write for the handler's result `data`
    /// ([`data_record`](keel_tools_core::once::data_record)), and the executor's own finish then finds it done.
    ///
    /// ```no_run
    /// # use keel_tools_state::{SqliteEffectStore, StateError};
    /// # fn charge(store: &SqliteEffectStore, lease: &keel_tools_state::Lease) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut conn = rusqlite::Connection::open(store.path())?;
    /// let tx = conn.transaction()?;
    /// tx.execute("INSERT INTO charges (order_id, amount) VALUES (?1, ?2)", ("o-1", 42))?;
    /// store.finish_in(&tx, lease, &serde_json::json!({"charged": 42}))?; // lease_lost: roll back, nothing done
    /// tx.commit()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// `lease_lost` when the lease is no longer the key's (roll the transaction back: another runner holds the
    /// call); the database's errors.
    pub fn finish_in(&self, conn: &Connection, lease: &Lease, data: &Value) -> Result<(), StateError> {
        let text = keel_tools_core::once::data_record(data).to_string();
        let n = conn
            .execute(&self.db.statements().effect_finish(), rusqlite::params![lease.key(), lease.token(), text])
            .map_err(|e| StateError::store(self.db.context(&format!("finishing {:?}", lease.key())), e))?;
        if n == 0 && !finished_under(&self.db, conn, lease)? {
            return Err(StateError::LeaseLost { key: lease.key().to_owned() });
        }
        Ok(())
    }

    /// Runs `op` on the connection, on a blocking thread when there is a runtime.
    fn run<T, F>(&self, op: F) -> StateFuture<'static, T>
    where
        T: Send + 'static,
        F: FnOnce(&Db, &mut Connection) -> Result<T, StateError> + Send + 'static,
    {
        run(&self.db, "an effect store operation", op)
    }
}

/// Runs `op` on the connection of `db`, on a blocking thread when there is a runtime (in the caller's thread
/// otherwise).
fn run<T, F>(db: &Arc<Db>, what: &'static str, op: F) -> StateFuture<'static, T>
where
    T: Send + 'static,
    F: FnOnce(&Db, &mut Connection) -> Result<T, StateError> + Send + 'static,
{
    let db = db.clone();
    let work = move || {
        let mut conn = db.lock();
        op(&db, &mut conn)
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => Box::pin(async move {
            handle.spawn_blocking(work).await.unwrap_or_else(|e| {
                Err(StateError::Store {
                    context: what.into(),
                    message: format!("the operation's thread failed: {e}"),
                    source: None,
                })
            })
        }),
        Err(_) => {
            let result = work();
            Box::pin(async move { result })
        }
    }
}

fn begin_sqlite(
    db: &Db,
    conn: &mut Connection,
    key: &str,
    fingerprint: &str,
    lease_ms: i64,
    retention_ms: i64,
) -> Result<Begin, StateError> {
    let context = || db.context(&format!("beginning {key:?}"));
    for _ in 0..effect::CLAIM_ATTEMPTS {
        let sql = db.statements();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| StateError::store(context(), e))?;
        let token = effect::lease_token();
        let claimed: Option<i64> = tx
            .query_row(&sql.effect_claim(), rusqlite::params![key, fingerprint, token, lease_ms, retention_ms], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| StateError::store(context(), e))?;
        if let Some(until) = claimed {
            tx.commit().map_err(|e| StateError::store(context(), e))?;
            return Ok(Begin::Run(Lease::new(key, token, u64::try_from(until).unwrap_or(0))));
        }
        let record = tx
            .query_row(&sql.effect_read(), [key], |r| {
                Ok(Recorded {
                    fingerprint: r.get(0)?,
                    state: r.get(1)?,
                    lease_until_ms: r.get(2)?,
                    result: r.get(3)?,
                    updated_ms: r.get(4)?,
                    now_ms: r.get(5)?,
                })
            })
            .optional()
            .map_err(|e| StateError::store(context(), e))?;
        drop(tx);
        if let Some(record) = record
            && let Some(answer) = effect::decide(&db.table, key, fingerprint, record, retention_ms)?
        {
            return Ok(answer);
        }
    }
    Err(effect::unsettled(context()))
}

/// Whether `lease`'s key was finished under it.
fn finished_under(db: &Db, conn: &Connection, lease: &Lease) -> Result<bool, StateError> {
    conn.query_row(&db.statements().effect_finished_under(), rusqlite::params![lease.key(), lease.token()], |_| Ok(()))
        .optional()
        .map(|row| row.is_some())
        .map_err(|e| StateError::store(db.context(&format!("finishing {:?}", lease.key())), e))
}

impl EffectStore for SqliteEffectStore {
    fn begin<'a>(&'a self, key: &'a str, fingerprint: &'a str, lease: Duration) -> StateFuture<'a, Begin> {
        if let Err(e) = effect::check_key(key) {
            return Box::pin(async move { Err(e) });
        }
        let (key, fingerprint) = (key.to_owned(), fingerprint.to_owned());
        let (lease_ms, retention_ms) = (effect::millis(lease), self.retention_ms);
        self.run(move |db, conn| begin_sqlite(db, conn, &key, &fingerprint, lease_ms, retention_ms))
    }

    fn finish<'a>(&'a self, lease: &'a Lease, result: &'a Value) -> StateFuture<'a, ()> {
        let lease = lease.clone();
        let text = result.to_string();
        self.run(move |db, conn| {
            let n = conn
                .execute(&db.statements().effect_finish(), rusqlite::params![lease.key(), lease.token(), text])
                .map_err(|e| StateError::store(db.context(&format!("finishing {:?}", lease.key())), e))?;
            if n == 0 && !finished_under(db, conn, &lease)? {
                return Err(StateError::LeaseLost { key: lease.key().to_owned() });
            }
            Ok(())
        })
    }

    fn abandon<'a>(&'a self, lease: &'a Lease) -> StateFuture<'a, ()> {
        let lease = lease.clone();
        self.run(move |db, conn| {
            let n = conn
                .execute(&db.statements().effect_abandon(), rusqlite::params![lease.key(), lease.token()])
                .map_err(|e| StateError::store(db.context(&format!("abandoning {:?}", lease.key())), e))?;
            if n == 0 {
                return Err(StateError::LeaseLost { key: lease.key().to_owned() });
            }
            Ok(())
        })
    }

    fn renew<'a>(&'a self, lease: &'a Lease, lease_for: Duration) -> StateFuture<'a, Lease> {
        let lease = lease.clone();
        let ms = effect::millis(lease_for);
        self.run(move |db, conn| {
            let until: Option<i64> = conn
                .query_row(&db.statements().effect_renew(), rusqlite::params![lease.key(), lease.token(), ms], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(|e| StateError::store(db.context(&format!("renewing {:?}", lease.key())), e))?;
            match until {
                Some(until) => Ok(Lease::new(lease.key(), lease.token(), u64::try_from(until).unwrap_or(0))),
                None => Err(StateError::LeaseLost { key: lease.key().to_owned() }),
            }
        })
    }

    fn purge_expired(&self) -> StateFuture<'_, u64> {
        let retention_ms = self.retention_ms;
        self.run(move |db, conn| {
            let n = conn
                .execute(&db.statements().effect_purge(), [retention_ms])
                .map_err(|e| StateError::store(db.context("purging effect records"), e))?;
            Ok(n as u64)
        })
    }
}
