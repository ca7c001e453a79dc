//! The SQLite file: the `tools` table, created or migrated on open, read fresh for every view.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::types::Value as Sql;
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Map, Value};

use crate::error::{CatalogError, RowError, RowRef};
use crate::row::{StoredRow, ToolRow};

/// The schema version this crate writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

/// How long a statement waits for another connection's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

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

const SELECT: &str = "SELECT rowid, name, description, input_schema, output_schema, kind, locator, version, effect, \
                      enabled, tenant, extra FROM tools";

/// The `tools` table of one SQLite file. Cheap to clone (one connection behind a mutex).
#[derive(Clone)]
pub(crate) struct Store {
    path: Arc<PathBuf>,
    conn: Arc<Mutex<Connection>>,
}

impl Store {
    /// Opens (creating if needed) the file at `path` and creates or migrates the table.
    pub(crate) fn open(path: &Path) -> Result<Store, CatalogError> {
        let shown = path.display().to_string();
        let conn = Connection::open(path).map_err(|e| CatalogError::store(format!("opening {shown}"), e))?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| CatalogError::store("setting the busy timeout", e))?;
        let store = Store { path: Arc::new(path.to_owned()), conn: Arc::new(Mutex::new(conn)) };
        store.migrate()?;
        Ok(store)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn migrate(&self) -> Result<(), CatalogError> {
        let mut conn = self.conn();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| CatalogError::store("reading the schema version", e))?;
        if version > SCHEMA_VERSION {
            return Err(CatalogError::Store {
                context: format!("opening {}", self.path.display()),
                message: format!(
                    "the file has catalogue schema version {version}, newer than this build's {SCHEMA_VERSION}; \
                     open it with a newer build"
                ),
            });
        }
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| CatalogError::store("starting the migration", e))?;
        let exists = tx
            .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tools'", [], |_| Ok(()))
            .optional()
            .map_err(|e| CatalogError::store("looking for the tools table", e))?
            .is_some();
        if exists {
            let mut columns = Vec::new();
            {
                let mut stmt = tx
                    .prepare("SELECT name FROM pragma_table_info('tools')")
                    .map_err(|e| CatalogError::store("reading the tools table's columns", e))?;
                let rows = stmt
                    .query_map([], |r| r.get::<_, String>(0))
                    .map_err(|e| CatalogError::store("reading the tools table's columns", e))?;
                for c in rows {
                    columns.push(c.map_err(|e| CatalogError::store("reading the tools table's columns", e))?);
                }
            }
            let missing: Vec<&str> =
                REQUIRED_COLUMNS.iter().copied().filter(|c| !columns.iter().any(|have| have == c)).collect();
            if !missing.is_empty() {
                return Err(CatalogError::Store {
                    context: format!("migrating {}", self.path.display()),
                    message: format!(
                        "the existing `tools` table lacks the column(s) {}; it is not a tool catalogue",
                        missing.join(", ")
                    ),
                });
            }
            for (column, definition) in ADDED_COLUMNS {
                if !columns.iter().any(|have| have == column) {
                    tx.execute_batch(&format!("ALTER TABLE tools ADD COLUMN {column} {definition}"))
                        .map_err(|e| CatalogError::store(format!("adding the column `{column}`"), e))?;
                }
            }
        } else {
            tx.execute_batch(CREATE_TABLE).map_err(|e| CatalogError::store("creating the tools table", e))?;
        }
        tx.execute_batch(CREATE_INDEX).map_err(|e| {
            CatalogError::store("creating the unique index on (name, tenant); two rows share a name in one scope", e)
        })?;
        tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
            .map_err(|e| CatalogError::store("writing the schema version", e))?;
        tx.commit().map_err(|e| CatalogError::store("committing the migration", e))
    }

    /// Every row (`tenant = None`), or the rows one tenant sees: its own and those of every tenant.
    pub(crate) fn rows(&self, tenant: Option<&str>) -> Result<Vec<StoredRow>, CatalogError> {
        let conn = self.conn();
        let (sql, arg) = match tenant {
            Some(t) => (format!("{SELECT} WHERE tenant IS NULL OR tenant = ?1 ORDER BY rowid"), Some(t)),
            None => (format!("{SELECT} ORDER BY rowid"), None),
        };
        let mut stmt = conn.prepare(&sql).map_err(|e| CatalogError::store("reading the tools table", e))?;
        let map = |r: &rusqlite::Row<'_>| -> rusqlite::Result<(i64, Vec<Sql>)> {
            let rowid: i64 = r.get(0)?;
            let mut cols = Vec::with_capacity(11);
            for i in 1..=11 {
                cols.push(r.get::<_, Sql>(i)?);
            }
            Ok((rowid, cols))
        };
        let rows = match arg {
            Some(t) => stmt.query_map(params![t], map),
            None => stmt.query_map([], map),
        }
        .map_err(|e| CatalogError::store("reading the tools table", e))?;
        let mut out = Vec::new();
        for r in rows {
            let (rowid, cols) = r.map_err(|e| CatalogError::store("reading the tools table", e))?;
            out.push(StoredRow { rowid, row: decode(rowid, cols) });
        }
        Ok(out)
    }

    /// Inserts `row`, or replaces the row of the same name and tenant. Returns its `rowid`.
    pub(crate) fn put(&self, row: &ToolRow) -> Result<i64, CatalogError> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| CatalogError::store("starting a write", e))?;
        let input = row.input_schema.to_string();
        let output = row.output_schema.as_ref().map(Value::to_string);
        let extra = row.extra.to_string();
        // Positional: name, tenant, then the other columns (a NULL tenant is not a UNIQUE conflict in SQLite, so an
        // upsert cannot be used: update, then insert if nothing was updated).
        let values: [&dyn rusqlite::ToSql; 11] = [
            &row.name,
            &row.tenant,
            &row.description,
            &input,
            &output,
            &row.kind,
            &row.locator,
            &row.version,
            &row.effect,
            &row.enabled,
            &extra,
        ];
        let updated = tx
            .execute(
                "UPDATE tools SET description = ?3, input_schema = ?4, output_schema = ?5, kind = ?6, locator = ?7, \
                 version = ?8, effect = ?9, enabled = ?10, extra = ?11 WHERE name = ?1 AND tenant IS ?2",
                values,
            )
            .map_err(|e| CatalogError::store(format!("updating the row {:?}", row.name), e))?;
        if updated == 0 {
            tx.execute(
                "INSERT INTO tools (name, tenant, description, input_schema, output_schema, kind, locator, version, \
                 effect, enabled, extra) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                values,
            )
            .map_err(|e| CatalogError::store(format!("inserting the row {:?}", row.name), e))?;
        }
        let rowid = tx
            .query_row("SELECT rowid FROM tools WHERE name = ?1 AND tenant IS ?2", params![row.name, row.tenant], |r| {
                r.get(0)
            })
            .map_err(|e| CatalogError::store(format!("reading back the row {:?}", row.name), e))?;
        tx.commit().map_err(|e| CatalogError::store("committing a write", e))?;
        Ok(rowid)
    }

    /// Sets `enabled` on the row of that name and tenant; whether such a row exists.
    pub(crate) fn set_enabled(&self, name: &str, tenant: Option<&str>, enabled: bool) -> Result<bool, CatalogError> {
        let n = self
            .conn()
            .execute("UPDATE tools SET enabled = ?3 WHERE name = ?1 AND tenant IS ?2", params![name, tenant, enabled])
            .map_err(|e| CatalogError::store(format!("updating the row {name:?}"), e))?;
        Ok(n > 0)
    }

    /// Deletes the row of that name and tenant; whether such a row existed.
    pub(crate) fn remove(&self, name: &str, tenant: Option<&str>) -> Result<bool, CatalogError> {
        let n = self
            .conn()
            .execute("DELETE FROM tools WHERE name = ?1 AND tenant IS ?2", params![name, tenant])
            .map_err(|e| CatalogError::store(format!("deleting the row {name:?}"), e))?;
        Ok(n > 0)
    }

    /// SQLite's `data_version`: changes whenever another connection commits to the file.
    pub(crate) fn data_version(&self) -> Result<i64, CatalogError> {
        self.conn()
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(|e| CatalogError::store("reading the data version", e))
    }
}

/// Turns the eleven columns of one row into a [`ToolRow`], or the `bad_row` error of the first unreadable column.
fn decode(rowid: i64, cols: Vec<Sql>) -> Result<ToolRow, RowError> {
    let mut it = cols.into_iter();
    let mut next = || it.next().unwrap_or(Sql::Null);
    let (name, description, input, output, kind, locator, version, effect, enabled, tenant, extra) =
        (next(), next(), next(), next(), next(), next(), next(), next(), next(), next(), next());
    // The reference is filled in as far as the row can be read, so that every error names it.
    let mut row = RowRef { rowid: Some(rowid), name: String::new(), tenant: None };
    let bad =
        |row: &RowRef, column: &'static str, reason: String| RowError::BadRow { row: row.clone(), column, reason };

    row.tenant = match tenant {
        Sql::Null => None,
        Sql::Text(t) if !t.is_empty() => Some(t),
        Sql::Text(_) => return Err(bad(&row, "tenant", "is empty; use NULL for a row every tenant sees".into())),
        other => return Err(bad(&row, "tenant", format!("holds {}, not text", sql_type(&other)))),
    };
    row.name = text(&row, "name", name)?;
    let description = text(&row, "description", description)?;
    let input_schema = match text(&row, "input_schema", input)? {
        s if s.trim().is_empty() => {
            return Err(bad(&row, "input_schema", "is empty; the argument schema is required".into()));
        }
        s => json(&row, "input_schema", &s)?,
    };
    let output_schema = match output {
        Sql::Null => None,
        Sql::Text(s) if s.trim().is_empty() => None,
        other => Some(json(&row, "output_schema", &text(&row, "output_schema", other)?)?),
    };
    let kind = text(&row, "kind", kind)?;
    let locator = text(&row, "locator", locator)?;
    let version = text(&row, "version", version)?;
    let effect = text(&row, "effect", effect)?;
    let enabled = match enabled {
        Sql::Integer(0) => false,
        Sql::Integer(1) => true,
        other => {
            return Err(bad(&row, "enabled", format!("holds {}, expected the integer 0 or 1", sql_preview(&other))));
        }
    };
    let extra = match extra {
        Sql::Null => Value::Object(Map::new()),
        other => match json(&row, "extra", &text(&row, "extra", other)?)? {
            v @ Value::Object(_) => v,
            _ => return Err(bad(&row, "extra", "is not a JSON object".into())),
        },
    };
    Ok(ToolRow {
        name: row.name,
        description,
        input_schema,
        output_schema,
        kind,
        locator,
        version,
        effect,
        enabled,
        tenant: row.tenant,
        extra,
    })
}

fn text(row: &RowRef, column: &'static str, v: Sql) -> Result<String, RowError> {
    match v {
        Sql::Text(s) => Ok(s),
        other => Err(RowError::BadRow {
            row: row.clone(),
            column,
            reason: format!("holds {}, expected text", sql_type(&other)),
        }),
    }
}

fn json(row: &RowRef, column: &'static str, s: &str) -> Result<Value, RowError> {
    serde_json::from_str(s).map_err(|e| RowError::BadRow {
        row: row.clone(),
        column,
        reason: format!("is not valid JSON (line {}, column {})", e.line(), e.column()),
    })
}

fn sql_type(v: &Sql) -> &'static str {
    match v {
        Sql::Null => "NULL",
        Sql::Integer(_) => "an integer",
        Sql::Real(_) => "a real",
        Sql::Text(_) => "text",
        Sql::Blob(_) => "a blob",
    }
}

fn sql_preview(v: &Sql) -> String {
    match v {
        Sql::Integer(i) => format!("the integer {i}"),
        Sql::Text(t) => format!("the text {:?}", t.chars().take(20).collect::<String>()),
        other => sql_type(other).to_owned(),
    }
}
