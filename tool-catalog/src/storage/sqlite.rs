//! The SQLite file: the `tools` table, created or migrated on open, read fresh for every view; WAL mode, and a
//! bounded wait with retries when another connection holds the lock.

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::types::Value as Sql;
use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};

use super::backoff::Backoff;
use super::columns::{self, Bound, COLUMNS, Param, decode};
use super::{ChangeToken, SCHEMA_VERSION, Storage, StoreFuture, Versioned, removing, writing};
use crate::error::CatalogError;
use crate::row::{StoredRow, ToolRow};

/// The table, as created on a new file.
const CREATE_TABLE: &str = "CREATE TABLE tools (
    name          TEXT NOT NULL,
    description   TEXT NOT NULL,
    input_schema  TEXT NOT NULL,
    output_schema TEXT,
    kind          TEXT NOT NULL,
    locator       TEXT NOT NULL,
    version       TEXT NOT NULL DEFAULT '1.0',
    effect        TEXT NOT NULL DEFAULT 'destructive',
    enabled       INTEGER NOT NULL DEFAULT 1,
    tenant        TEXT,
    extra         TEXT NOT NULL DEFAULT '{}'
)";

/// One name per tenant scope; `NULL` (every tenant) is a scope of its own.
const CREATE_INDEX: &str = "CREATE UNIQUE INDEX IF NOT EXISTS tools_name_tenant ON tools (name, ifnull(tenant, ''))";

/// The columns an existing table must already have to be adopted (the minimal table has exactly these).
const REQUIRED_COLUMNS: [&str; 5] = ["name", "description", "input_schema", "kind", "locator"];

/// Columns added to an adopted table that lacks them, with their definitions.
const ADDED_COLUMNS: [(&str, &str); 6] = [
    ("output_schema", "TEXT"),
    ("version", "TEXT NOT NULL DEFAULT '1.0'"),
    // A row adopted without an effect needs an approval until someone says otherwise.
    ("effect", "TEXT NOT NULL DEFAULT 'destructive'"),
    ("enabled", "INTEGER NOT NULL DEFAULT 1"),
    ("tenant", "TEXT"),
    ("extra", "TEXT NOT NULL DEFAULT '{}'"),
];

/// A read: the `rowid`, then the row's columns.
static SELECT: LazyLock<String> = LazyLock::new(|| columns::select("rowid"));

/// Replaces the columns of the row of one name and tenant, with the values of [`Bound::values`].
static UPDATE: LazyLock<String> = LazyLock::new(|| {
    format!("UPDATE tools SET {} WHERE name = ?1 AND tenant IS ?2", columns::assignments(|i, c| format!("{c} = ?{i}")))
});

/// Inserts a row, with the values of [`Bound::values`].
static INSERT: LazyLock<String> = LazyLock::new(|| columns::insert(|i| format!("?{i}")));

/// The change counter: one row, bumped by a trigger for every row inserted, updated or deleted in `tools`, by any
/// connection, in the same transaction as the change.
const CREATE_STATE: &str = "
CREATE TABLE IF NOT EXISTS catalog_state (id INTEGER PRIMARY KEY CHECK (id = 1), generation INTEGER NOT NULL);
INSERT OR IGNORE INTO catalog_state (id, generation) VALUES (1, 0);
CREATE TRIGGER IF NOT EXISTS tools_generation_insert AFTER INSERT ON tools
    BEGIN UPDATE catalog_state SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS tools_generation_update AFTER UPDATE ON tools
    BEGIN UPDATE catalog_state SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS tools_generation_delete AFTER DELETE ON tools
    BEGIN UPDATE catalog_state SET generation = generation + 1 WHERE id = 1; END;
";

/// The schema objects a current file has; when all are there (and the version is current) opening writes nothing.
const SCHEMA_OBJECTS: &str = "SELECT count(*) FROM sqlite_master WHERE name IN ('tools', 'tools_name_tenant', \
                              'catalog_state', 'tools_generation_insert', 'tools_generation_update', \
                              'tools_generation_delete')";

/// Why one attempt of an operation failed: SQLite (maybe busy, then retried), or anything else (final).
pub(crate) enum Failure {
    Sql { context: String, error: rusqlite::Error },
    Other(CatalogError),
}

impl Failure {
    /// `busy` after `backoff` gave up on this busy attempt, with SQLite's error as the source.
    fn busy(self, backoff: &Backoff, context: String) -> CatalogError {
        let source: Option<Arc<dyn std::error::Error + Send + Sync>> = match self {
            Failure::Sql { error, .. } => Some(Arc::new(error)),
            Failure::Other(_) => None,
        };
        backoff.error(context, source)
    }

    /// Another connection holds a lock this attempt needed; nothing was done, and a later attempt may succeed.
    fn is_busy(&self) -> bool {
        matches!(
            self,
            Failure::Sql { error: rusqlite::Error::SqliteFailure(e, _), .. }
                if matches!(e.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
        )
    }

    fn into_error(self) -> CatalogError {
        match self {
            Failure::Sql { context, error } => CatalogError::store(context, error),
            Failure::Other(e) => e,
        }
    }
}

/// Maps a SQLite error to a [`Failure`] with what was being done.
fn sql(context: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> Failure {
    move |error| Failure::Sql { context: context.into(), error }
}

type Attempt<T> = Result<T, Failure>;

/// The `tools` table of one SQLite file. Cheap to clone (one connection behind a mutex, held for one attempt at a
/// time, never while waiting for another connection's lock).
#[derive(Clone)]
pub(crate) struct Store {
    path: Arc<PathBuf>,
    conn: Arc<Mutex<Connection>>,
    busy_timeout: Duration,
}

impl Store {
    /// Opens (creating if needed) the file at `path`, puts it in WAL mode and creates or migrates the table.
    pub(crate) fn open(path: &Path, busy_timeout: Duration) -> Result<Store, CatalogError> {
        let shown = path.display().to_string();
        let conn = Connection::open(path).map_err(|e| CatalogError::store(format!("opening {shown}"), e))?;
        // SQLite's own busy handler would sleep inside a statement, holding the connection; the retries here
        // pause between attempts instead, with the bound of the configuration.
        conn.busy_timeout(Duration::ZERO).map_err(|e| CatalogError::store("setting the busy timeout", e))?;
        let store = Store { path: Arc::new(path.to_owned()), conn: Arc::new(Mutex::new(conn)), busy_timeout };
        let mode = store.run(format!("putting {shown} in WAL mode"), |c| {
            c.pragma_update_and_check(None, "journal_mode", "wal", |r| r.get::<_, String>(0))
                .map_err(sql("putting the file in WAL mode"))
        })?;
        if !mode.eq_ignore_ascii_case("wal") {
            // A file system without shared memory (some network mounts) keeps the rollback journal.
            tracing::warn!(path = %shown, journal_mode = %mode, "the catalogue file could not be put in WAL mode");
        }
        let path = store.path.clone();
        store.run(format!("migrating {shown}"), move |c| migrate(c, &path))?;
        Ok(store)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `op` once on the connection.
    fn attempt<T>(&self, op: &(impl Fn(&mut Connection) -> Attempt<T> + ?Sized)) -> Attempt<T> {
        op(&mut self.conn())
    }

    /// Runs `op` on this thread, again after a pause while another connection holds a lock it needs, until the busy
    /// timeout is spent (then `busy`). `op` is one transaction: a busy attempt changed nothing.
    pub(crate) fn run<T>(
        &self,
        context: impl Into<String>,
        op: impl Fn(&mut Connection) -> Attempt<T>,
    ) -> Result<T, CatalogError> {
        let mut backoff = Backoff::new(self.busy_timeout);
        loop {
            match self.attempt(&op) {
                Ok(v) => return Ok(v),
                Err(f) if f.is_busy() => match backoff.next() {
                    Some(pause) => std::thread::sleep(pause),
                    None => return Err(f.busy(&backoff, context.into())),
                },
                Err(f) => return Err(f.into_error()),
            }
        }
    }

    /// [`Store::run`] for async callers: each attempt runs on the runtime's blocking pool and the pauses are timers,
    /// so no runtime worker ever waits on SQLite, and dropping the future stops the retries. Needs a Tokio runtime
    /// with timers, as views do; outside any runtime it is a `config_error`, not a panic.
    pub(crate) async fn run_async<T, F>(&self, context: String, op: F) -> Result<T, CatalogError>
    where
        T: Send + 'static,
        F: Fn(&mut Connection) -> Attempt<T> + Send + Sync + 'static,
    {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Err(CatalogError::config(format!(
                "{context}: the catalogue's async methods run inside a Tokio runtime; outside one, use the sync \
                 methods"
            )));
        };
        let op = Arc::new(op);
        let mut backoff = Backoff::new(self.busy_timeout);
        loop {
            let (store, op2) = (self.clone(), op.clone());
            let attempt = runtime
                .spawn_blocking(move || store.attempt(&*op2))
                .await
                .map_err(|e| CatalogError::store(context.clone(), e))?;
            match attempt {
                Ok(v) => return Ok(v),
                Err(f) if f.is_busy() => match backoff.next() {
                    Some(pause) => tokio::time::sleep(pause).await,
                    None => return Err(f.busy(&backoff, context)),
                },
                Err(f) => return Err(f.into_error()),
            }
        }
    }
}

/// Brings the file's schema to [`SCHEMA_VERSION`]; writes nothing when it is there already.
fn migrate(conn: &mut Connection, path: &Path) -> Attempt<()> {
    let read_version = |c: &Connection| -> Attempt<i64> {
        c.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(sql("reading the schema version"))
    };
    let newer = |version: i64| {
        Failure::Other(CatalogError::Store {
            context: format!("opening {}", path.display()),
            message: format!(
                "the file has catalogue schema version {version}, newer than this build's {SCHEMA_VERSION}; open \
                 it with a newer build"
            ),
            source: None,
        })
    };
    let version = read_version(conn)?;
    if version > SCHEMA_VERSION {
        return Err(newer(version));
    }
    if version == SCHEMA_VERSION {
        let objects: i64 =
            conn.query_row(SCHEMA_OBJECTS, [], |r| r.get(0)).map_err(sql("reading the catalogue's schema"))?;
        if objects == 6 {
            return Ok(());
        }
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql("starting the migration"))?;
    // Another process may have migrated the file between the look above and the lock.
    let version = read_version(&tx)?;
    if version > SCHEMA_VERSION {
        return Err(newer(version));
    }
    let exists = tx
        .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tools'", [], |_| Ok(()))
        .optional()
        .map_err(sql("looking for the tools table"))?
        .is_some();
    if exists {
        let mut columns = Vec::new();
        {
            let context = "reading the tools table's columns";
            let mut stmt = tx.prepare("SELECT name FROM pragma_table_info('tools')").map_err(sql(context))?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(sql(context))?;
            for c in rows {
                columns.push(c.map_err(sql(context))?);
            }
        }
        let missing: Vec<&str> =
            REQUIRED_COLUMNS.iter().copied().filter(|c| !columns.iter().any(|have| have == c)).collect();
        if !missing.is_empty() {
            return Err(Failure::Other(CatalogError::Store {
                context: format!("migrating {}", path.display()),
                message: format!(
                    "the existing `tools` table lacks the column(s) {}; it is not a tool catalogue",
                    missing.join(", ")
                ),
                source: None,
            }));
        }
        for (column, definition) in ADDED_COLUMNS {
            if !columns.iter().any(|have| have == column) {
                tx.execute_batch(&format!("ALTER TABLE tools ADD COLUMN {column} {definition}"))
                    .map_err(sql(format!("adding the column `{column}`")))?;
            }
        }
    } else {
        tx.execute_batch(CREATE_TABLE).map_err(sql("creating the tools table"))?;
    }
    tx.execute_batch(CREATE_INDEX)
        .map_err(sql("creating the unique index on (name, tenant); two rows share a name in one scope"))?;
    tx.execute_batch(CREATE_STATE).map_err(sql("creating the change counter"))?;
    tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}")).map_err(sql("writing the schema version"))?;
    tx.commit().map_err(sql("committing the migration"))
}

/// The change counter of the state the connection reads (inside a transaction: the state of that transaction).
fn generation(conn: &Connection) -> Attempt<u64> {
    let g: Option<i64> = conn
        .query_row("SELECT generation FROM catalog_state WHERE id = 1", [], |r| r.get(0))
        .optional()
        .map_err(sql("reading the change counter"))?;
    match g {
        Some(g) => Ok(u64::try_from(g).unwrap_or(0)),
        None => Err(Failure::Other(CatalogError::Store {
            context: "reading the change counter".into(),
            message: "the catalog_state row is missing; opening the catalogue again restores it".into(),
            source: None,
        })),
    }
}

/// The change counter, outside any transaction.
pub(crate) fn read_generation(conn: &mut Connection) -> Attempt<u64> {
    generation(conn)
}

/// Every row (`tenant = None`), or the rows one tenant sees: its own and those of every tenant; with the change
/// counter of the state they were read from (one read transaction).
pub(crate) fn rows(conn: &mut Connection, tenant: Option<&str>) -> Attempt<(u64, Vec<StoredRow>)> {
    let context = "reading the tools table";
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred).map_err(sql(context))?;
    let generation = generation(&tx)?;
    let (sql_text, arg) = match tenant {
        Some(t) => (format!("{} WHERE tenant IS NULL OR tenant = ?1 ORDER BY rowid", *SELECT), Some(t)),
        None => (format!("{} ORDER BY rowid", *SELECT), None),
    };
    let mut out = Vec::new();
    {
        let mut stmt = tx.prepare(&sql_text).map_err(sql(context))?;
        let map = |r: &rusqlite::Row<'_>| -> rusqlite::Result<(i64, Vec<Sql>)> {
            let rowid: i64 = r.get(0)?;
            let mut cols = Vec::with_capacity(COLUMNS.len());
            for i in 1..=COLUMNS.len() {
                cols.push(r.get::<_, Sql>(i)?);
            }
            Ok((rowid, cols))
        };
        let rows = match arg {
            Some(t) => stmt.query_map(params![t], map),
            None => stmt.query_map([], map),
        }
        .map_err(sql(context))?;
        for r in rows {
            let (rowid, cols) = r.map_err(sql(context))?;
            out.push(StoredRow { rowid, row: decode(rowid, cols) });
        }
    }
    tx.commit().map_err(sql(context))?;
    Ok((generation, out))
}

/// Inserts `row`, or replaces the row of the same name and tenant: its `rowid`, and the change counter after.
pub(crate) fn put(conn: &mut Connection, row: &ToolRow) -> Attempt<(i64, u64)> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql("starting a write"))?;
    // Positional: name, tenant, then the other columns (a NULL tenant is not a UNIQUE conflict in SQLite, so an
    // upsert cannot be used: update, then insert if nothing was updated).
    let bound = Bound::new(row);
    let params = bound.values();
    let values: Vec<&dyn rusqlite::ToSql> = params
        .iter()
        .map(|p| match p {
            Param::Text(s) => s as &dyn rusqlite::ToSql,
            Param::Nullable(s) => s,
            Param::Integer(i) => i,
        })
        .collect();
    let updated = tx.execute(UPDATE.as_str(), &values[..]).map_err(sql(format!("updating the row {:?}", row.name)))?;
    if updated == 0 {
        tx.execute(INSERT.as_str(), &values[..]).map_err(sql(format!("inserting the row {:?}", row.name)))?;
    }
    let rowid = tx
        .query_row("SELECT rowid FROM tools WHERE name = ?1 AND tenant IS ?2", params![row.name, row.tenant], |r| {
            r.get(0)
        })
        .map_err(sql(format!("reading back the row {:?}", row.name)))?;
    let generation = generation(&tx)?;
    tx.commit().map_err(sql("committing a write"))?;
    Ok((rowid, generation))
}

/// Sets `enabled` on the row of that name and tenant: whether such a row exists, and the change counter after.
pub(crate) fn set_enabled(
    conn: &mut Connection,
    name: &str,
    tenant: Option<&str>,
    enabled: bool,
) -> Attempt<(bool, u64)> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql("starting a write"))?;
    let n = tx
        .execute("UPDATE tools SET enabled = ?3 WHERE name = ?1 AND tenant IS ?2", params![name, tenant, enabled])
        .map_err(sql(format!("updating the row {name:?}")))?;
    let generation = generation(&tx)?;
    tx.commit().map_err(sql("committing a write"))?;
    Ok((n > 0, generation))
}

/// Deletes the row of that name and tenant: whether such a row existed, and the change counter after.
pub(crate) fn remove(conn: &mut Connection, name: &str, tenant: Option<&str>) -> Attempt<(bool, u64)> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql("starting a write"))?;
    let n = tx
        .execute("DELETE FROM tools WHERE name = ?1 AND tenant IS ?2", params![name, tenant])
        .map_err(sql(format!("deleting the row {name:?}")))?;
    let generation = generation(&tx)?;
    tx.commit().map_err(sql("committing a write"))?;
    Ok((n > 0, generation))
}

/// The SQLite file as a [`Storage`]: each attempt on the runtime's blocking pool, pauses on timers.
pub(crate) struct SqliteStorage {
    pub(crate) store: Store,
}

impl Storage for SqliteStorage {
    fn describe(&self) -> String {
        format!("sqlite:{}", self.store.path().display())
    }

    fn rows<'a>(&'a self, tenant: Option<&'a str>) -> StoreFuture<'a, Versioned<Vec<StoredRow>>> {
        let scope = tenant.map(str::to_owned);
        Box::pin(async move {
            let (generation, rows) =
                self.store.run_async("reading the tools table".into(), move |c| rows(c, scope.as_deref())).await?;
            Ok(Versioned::new(rows, ChangeToken::new(generation)))
        })
    }

    fn put<'a>(&'a self, row: &'a ToolRow) -> StoreFuture<'a, Versioned<i64>> {
        let owned = row.clone();
        Box::pin(async move {
            let (id, generation) = self.store.run_async(writing(&row.name), move |c| put(c, &owned)).await?;
            Ok(Versioned::new(id, ChangeToken::new(generation)))
        })
    }

    fn set_enabled<'a>(
        &'a self,
        name: &'a str,
        tenant: Option<&'a str>,
        enabled: bool,
    ) -> StoreFuture<'a, Versioned<bool>> {
        let (n, t) = (name.to_owned(), tenant.map(str::to_owned));
        Box::pin(async move {
            let (found, generation) =
                self.store.run_async(writing(name), move |c| set_enabled(c, &n, t.as_deref(), enabled)).await?;
            Ok(Versioned::new(found, ChangeToken::new(generation)))
        })
    }

    fn remove<'a>(&'a self, name: &'a str, tenant: Option<&'a str>) -> StoreFuture<'a, Versioned<bool>> {
        let (n, t) = (name.to_owned(), tenant.map(str::to_owned));
        Box::pin(async move {
            let (found, generation) =
                self.store.run_async(removing(name), move |c| remove(c, &n, t.as_deref())).await?;
            Ok(Versioned::new(found, ChangeToken::new(generation)))
        })
    }

    fn change_token(&self) -> StoreFuture<'_, ChangeToken> {
        Box::pin(async move {
            let generation = self.store.run_async("reading the change counter".into(), read_generation).await?;
            Ok(ChangeToken::new(generation))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(label: &str) -> TempDir {
            let dir = std::env::temp_dir().join(format!("keel-catalog-sqlite-{label}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("temp dir");
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_file_that_cannot_be_opened_keeps_sqlites_error() {
        let dir = TempDir::new("open");
        // A directory is no database file.
        let e = Store::open(&dir.0, Duration::ZERO).err().expect("a directory is refused");
        assert_eq!(e.code(), "store_error", "{e}");
        let sqlite = e.source().and_then(|s| s.downcast_ref::<rusqlite::Error>()).expect("rusqlite's error");
        let CatalogError::Store { message, .. } = &e else { panic!("{e:?}") };
        assert_eq!(message, &sqlite.to_string());
    }

    #[test]
    fn busy_keeps_the_error_of_the_last_attempt() {
        let dir = TempDir::new("busy");
        let path = dir.0.join("tools.db");
        let store = Store::open(&path, Duration::ZERO).unwrap();
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE; UPDATE tools SET description = 'uncommitted';").unwrap();
        let e =
            store.run("writing", |c| c.execute_batch("BEGIN IMMEDIATE; COMMIT;").map_err(sql("writing"))).unwrap_err();
        assert!(matches!(e, CatalogError::Busy { attempts: 1, .. }), "{e:?}");
        let sqlite = e.source().and_then(|s| s.downcast_ref::<rusqlite::Error>()).expect("rusqlite's error");
        assert_eq!(sqlite.sqlite_error_code(), Some(ErrorCode::DatabaseBusy));
        drop(other);
    }

    #[test]
    fn a_refusal_of_the_catalogues_own_has_no_source() {
        let dir = TempDir::new("newer");
        let path = dir.0.join("tools.db");
        drop(Store::open(&path, Duration::ZERO).unwrap());
        Connection::open(&path).unwrap().execute_batch("PRAGMA user_version = 99").unwrap();
        let e = Store::open(&path, Duration::ZERO).err().expect("a newer schema is refused");
        assert!(e.to_string().contains("newer than this build"), "{e}");
        assert!(e.source().is_none());
    }

    /// The statements built from the column list, as they were written out before it.
    #[test]
    fn the_statements_name_the_columns_in_their_order() {
        assert_eq!(
            *SELECT,
            "SELECT rowid, name, description, input_schema, output_schema, kind, locator, version, effect, enabled, \
             tenant, extra FROM tools"
        );
        assert_eq!(
            *UPDATE,
            "UPDATE tools SET description = ?3, input_schema = ?4, output_schema = ?5, kind = ?6, locator = ?7, \
             version = ?8, effect = ?9, enabled = ?10, extra = ?11 WHERE name = ?1 AND tenant IS ?2"
        );
        assert_eq!(
            *INSERT,
            "INSERT INTO tools (name, tenant, description, input_schema, output_schema, kind, locator, version, \
             effect, enabled, extra) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
        );
    }
}
