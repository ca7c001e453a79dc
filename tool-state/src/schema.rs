//! The tables the stores keep, the same in both databases, and the table that records their schema versions.

use crate::error::StateError;

/// The table that records, for each table a store keeps, what it holds and its schema version.
pub const SCHEMA_TABLE: &str = "keel_state_schema";

/// The schema version of the tables this build writes. Version 2 adds, beside each pending calls' table `<t>`, the
/// table `<t>_consumed` of the records taken from it; a table of version 1 is brought to 2 when a store opens it.
pub const SCHEMA_VERSION: i64 = 2;

/// The default table of pending calls.
pub const DEFAULT_PENDING_TABLE: &str = "keel_pending_calls";

/// The default table of effect records.
pub const DEFAULT_EFFECT_TABLE: &str = "keel_effects";

/// The default table of tasks.
pub const DEFAULT_TASK_TABLE: &str = "keel_tasks";

/// The longest table name, in bytes (PostgreSQL's identifiers hold 63, and index names add a suffix).
pub const MAX_TABLE_LEN: usize = 48;

/// What a table holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Pending,
    Effects,
    Tasks,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Pending => "pending_calls",
            Kind::Effects => "effects",
            Kind::Tasks => "tasks",
        }
    }

    /// The table a store of this kind keeps unless told otherwise.
    pub(crate) fn default_table(self) -> &'static str {
        match self {
            Kind::Pending => DEFAULT_PENDING_TABLE,
            Kind::Effects => DEFAULT_EFFECT_TABLE,
            Kind::Tasks => DEFAULT_TASK_TABLE,
        }
    }

    /// The statements that create the table `table` and its index (both dialects).
    pub(crate) fn create(self, table: &str) -> String {
        match self {
            Kind::Pending => format!(
                "CREATE TABLE IF NOT EXISTS {table} (
                    key           text PRIMARY KEY,
                    record        text NOT NULL,
                    expires_at_ms bigint NOT NULL,
                    saved_at_ms   bigint NOT NULL
                );
                CREATE INDEX IF NOT EXISTS {table}_expires ON {table} (expires_at_ms);
                CREATE TABLE IF NOT EXISTS {table}_consumed (
                    id            text PRIMARY KEY,
                    key           text NOT NULL,
                    expires_at_ms bigint NOT NULL
                );
                CREATE INDEX IF NOT EXISTS {table}_ce ON {table}_consumed (expires_at_ms);"
            ),
            Kind::Effects => format!(
                "CREATE TABLE IF NOT EXISTS {table} (
                    key            text PRIMARY KEY,
                    fingerprint    text NOT NULL,
                    state          text NOT NULL CHECK (state IN ('running', 'done')),
                    lease          text,
                    lease_until_ms bigint,
                    result         text,
                    updated_ms     bigint NOT NULL
                );
                CREATE INDEX IF NOT EXISTS {table}_updated ON {table} (updated_ms);"
            ),
            Kind::Tasks => format!(
                "CREATE TABLE IF NOT EXISTS {table} (
                    id             text PRIMARY KEY,
                    tool           text NOT NULL,
                    tenant         text,
                    principal      text,
                    status         text NOT NULL CHECK (status IN
                                       ('working', 'input_required', 'completed', 'failed', 'cancelled', 'lost')),
                    message        text,
                    version        bigint NOT NULL,
                    lease          text,
                    lease_ms       bigint NOT NULL,
                    lease_until_ms bigint,
                    keep_ms        bigint NOT NULL,
                    poll_ms        bigint NOT NULL,
                    request        text,
                    answers        text,
                    outcome        text,
                    created_ms     bigint NOT NULL,
                    updated_ms     bigint NOT NULL
                );
                CREATE INDEX IF NOT EXISTS {table}_updated ON {table} (updated_ms);"
            ),
        }
    }

    /// What PostgreSQL adds to the table: for tasks, a trigger that notifies [`channel`] with the task's id each
    /// time a row is inserted or its `version` set, by any client, when the transaction commits.
    #[cfg(feature = "postgres")]
    pub(crate) fn postgres_extra(self, table: &str) -> Option<String> {
        match self {
            Kind::Pending | Kind::Effects => None,
            Kind::Tasks => {
                let channel = channel(table);
                Some(format!(
                    "CREATE OR REPLACE FUNCTION {table}_notify() RETURNS trigger LANGUAGE plpgsql AS $$
                     BEGIN
                         PERFORM pg_notify('{channel}', NEW.id);
                         RETURN NULL;
                     END $$;
                     DROP TRIGGER IF EXISTS {table}_changed ON {table};
                     CREATE TRIGGER {table}_changed AFTER INSERT OR UPDATE OF version ON {table}
                         FOR EACH ROW EXECUTE FUNCTION {table}_notify();"
                ))
            }
        }
    }
}

/// The PostgreSQL channel that a task table's changes are notified on: `<table>_changes`.
#[cfg(feature = "postgres")]
pub(crate) fn channel(table: &str) -> String {
    format!("{table}_changes")
}

/// The statement that creates [`SCHEMA_TABLE`] (both dialects).
pub(crate) const CREATE_SCHEMA_TABLE: &str = "CREATE TABLE IF NOT EXISTS keel_state_schema (
    table_name text PRIMARY KEY,
    kind       text NOT NULL,
    version    integer NOT NULL
)";

/// What to do with a table, given what [`SCHEMA_TABLE`] says of it.
pub(crate) fn plan(table: &str, kind: Kind, recorded: Option<(String, i64)>) -> Result<bool, StateError> {
    match recorded {
        None => Ok(true),
        Some((k, _)) if k != kind.as_str() => Err(StateError::config(format!(
            "the table {table} holds {k}, not {}: choose another table name",
            kind.as_str()
        ))),
        Some((_, v)) if v > SCHEMA_VERSION => Err(StateError::config(format!(
            "the table {table} has schema version {v}, newer than this build's {SCHEMA_VERSION}: open it with a \
             newer build"
        ))),
        Some((_, v)) => Ok(v < SCHEMA_VERSION),
    }
}

/// Checks a table name: a plain lowercase SQL identifier (`[a-z_][a-z0-9_]*`, at most [`MAX_TABLE_LEN`] bytes),
/// so that it is the same name, unquoted, in both databases, and never more than a name.
pub(crate) fn check_table(name: &str) -> Result<(), StateError> {
    let mut bytes = name.bytes();
    let plain = matches!(bytes.next(), Some(b'a'..=b'z' | b'_'))
        && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'))
        && name.len() <= MAX_TABLE_LEN;
    if !plain {
        return Err(StateError::config(format!(
            "the table name {name:?} is not a plain lowercase identifier ([a-z_][a-z0-9_]*, at most \
             {MAX_TABLE_LEN} bytes)"
        )));
    }
    if name == SCHEMA_TABLE {
        return Err(StateError::config(format!("the table name {SCHEMA_TABLE} is the stores' own schema table")));
    }
    Ok(())
}

/// Milliseconds since the Unix epoch, by this machine's clock.
#[cfg(feature = "sqlite")]
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_plain_identifiers() {
        for good in ["keel_effects", "_t", "a1", &"a".repeat(MAX_TABLE_LEN)] {
            check_table(good).unwrap();
        }
        for bad in
            ["", "1a", "A", "a-b", "a b", "t; DROP TABLE x", "\"t\"", "é", &"a".repeat(MAX_TABLE_LEN + 1), SCHEMA_TABLE]
        {
            assert_eq!(check_table(bad).unwrap_err().code(), "config_error", "{bad:?}");
        }
    }

    #[test]
    fn a_table_is_created_once_and_never_adopted_from_another_kind_or_a_newer_build() {
        assert!(plan("t", Kind::Pending, None).unwrap());
        assert!(!plan("t", Kind::Pending, Some(("pending_calls".into(), SCHEMA_VERSION))).unwrap());
        assert_eq!(plan("t", Kind::Pending, Some(("effects".into(), 1))).unwrap_err().code(), "config_error");
        assert_eq!(plan("t", Kind::Tasks, Some(("effects".into(), 1))).unwrap_err().code(), "config_error");
        let newer = plan("t", Kind::Effects, Some(("effects".into(), SCHEMA_VERSION + 1))).unwrap_err();
        assert!(newer.to_string().contains("newer than this build"), "{newer}");
    }
}
