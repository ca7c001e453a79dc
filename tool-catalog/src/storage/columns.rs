//! The `tools` table's row columns, listed once ([`COLUMNS`]): both backends build their statements from the list,
//! bind a row's values in its order ([`Bound`]) and decode what they read with [`decode`].

use std::sync::Arc;

use rusqlite::types::Value as Sql;
use serde_json::{Map, Value};

use crate::error::{RowError, RowRef};
use crate::row::ToolRow;

/// The row's columns in table order: what a read selects after the row's id, and what [`decode`] reads.
pub(super) const COLUMNS: [&str; 11] = [
    "name",
    "description",
    "input_schema",
    "output_schema",
    "kind",
    "locator",
    "version",
    "effect",
    "enabled",
    "tenant",
    "extra",
];

/// The columns that name a row (`(name, tenant)` is unique): a write binds them first, then the others.
const KEY: [&str; 2] = ["name", "tenant"];

/// The columns in the order a write binds them: [`KEY`], then the others in table order.
fn written() -> impl Iterator<Item = &'static str> {
    KEY.into_iter().chain(COLUMNS.into_iter().filter(|c| !KEY.contains(c)))
}

/// `SELECT <id>, name, description, …, extra FROM tools`: the row's id, then [`COLUMNS`].
pub(super) fn select(id: &str) -> String {
    format!("SELECT {id}, {} FROM tools", COLUMNS.join(", "))
}

/// `INSERT INTO tools (name, tenant, description, …) VALUES (…)`, each placeholder written by `placeholder` from
/// its 1-based place (`?1` in SQLite, `$1` in PostgreSQL), for the values of [`Bound::values`].
pub(super) fn insert(placeholder: impl Fn(usize) -> String) -> String {
    let columns: Vec<&str> = written().collect();
    let values: Vec<String> = (1..=columns.len()).map(placeholder).collect();
    format!("INSERT INTO tools ({}) VALUES ({})", columns.join(", "), values.join(", "))
}

/// The columns other than the key, each written by `assign` from its 1-based place among the values of
/// [`Bound::values`] and its name, joined by `, `: what replacing a row sets.
pub(super) fn assignments(assign: impl Fn(usize, &str) -> String) -> String {
    let set: Vec<String> = written().enumerate().skip(KEY.len()).map(|(i, c)| assign(i + 1, c)).collect();
    set.join(", ")
}

/// One value a write binds, borrowed from a [`Bound`]; each backend passes it as its own parameter type.
pub(super) enum Param<'a> {
    /// A text column.
    Text(&'a str),
    /// A text column that may be `NULL`.
    Nullable(Option<&'a str>),
    /// An integer column (`enabled`: 0 or 1).
    Integer(i32),
}

/// A row as a write binds it: the JSON columns as text, `enabled` as 0 or 1.
pub(super) struct Bound<'r> {
    row: &'r ToolRow,
    input_schema: String,
    output_schema: Option<String>,
    extra: String,
}

impl<'r> Bound<'r> {
    pub(super) fn new(row: &'r ToolRow) -> Bound<'r> {
        Bound {
            row,
            input_schema: row.input_schema.to_string(),
            output_schema: row.output_schema.as_ref().map(Value::to_string),
            extra: row.extra.to_string(),
        }
    }

    /// The value of `column`, one of [`COLUMNS`].
    fn value(&self, column: &str) -> Param<'_> {
        let row = self.row;
        match column {
            "name" => Param::Text(&row.name),
            "description" => Param::Text(&row.description),
            "input_schema" => Param::Text(&self.input_schema),
            "output_schema" => Param::Nullable(self.output_schema.as_deref()),
            "kind" => Param::Text(&row.kind),
            "locator" => Param::Text(&row.locator),
            "version" => Param::Text(&row.version),
            "effect" => Param::Text(&row.effect),
            "enabled" => Param::Integer(i32::from(row.enabled)),
            "tenant" => Param::Nullable(row.tenant.as_deref()),
            "extra" => Param::Text(&self.extra),
            other => unreachable!("`{other}` is not a column of the tools table"),
        }
    }

    /// The values in the order of the placeholders of [`insert`]: the key, then the other columns.
    pub(super) fn values(&self) -> Vec<Param<'_>> {
        written().map(|c| self.value(c)).collect()
    }
}

/// Turns the columns of one row, in the order of [`COLUMNS`], into a [`ToolRow`], or the `bad_row` error of the first
/// unreadable column.
pub(crate) fn decode(rowid: i64, cols: Vec<Sql>) -> Result<ToolRow, RowError> {
    let mut it = cols.into_iter();
    let mut next = || it.next().unwrap_or(Sql::Null);
    let (name, description, input, output, kind, locator, version, effect, enabled, tenant, extra) =
        (next(), next(), next(), next(), next(), next(), next(), next(), next(), next(), next());
    // The reference is filled in as far as the row can be read, so that every error names it.
    let mut row = RowRef { rowid: Some(rowid), name: String::new(), tenant: None };
    let bad = |row: &RowRef, column: &'static str, reason: String| RowError::BadRow {
        row: row.clone(),
        column,
        reason,
        source: None,
    };

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
            source: None,
        }),
    }
}

fn json(row: &RowRef, column: &'static str, s: &str) -> Result<Value, RowError> {
    serde_json::from_str(s).map_err(|e| RowError::BadRow {
        row: row.clone(),
        column,
        reason: format!("is not valid JSON (line {}, column {})", e.line(), e.column()),
        source: Some(Arc::new(e)),
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_write_binds_the_key_then_the_other_columns_in_table_order() {
        let written = written().collect::<Vec<_>>().join(", ");
        let expected =
            "name, tenant, description, input_schema, output_schema, kind, locator, version, effect, enabled, extra";
        assert_eq!(written, expected);
        let mut row = ToolRow::remote("t", "d", json!({"type": "object"}), "http://127.0.0.1:9/mcp", "t");
        row.tenant = Some("acme".into());
        let bound = Bound::new(&row);
        let values = bound.values();
        assert_eq!(values.len(), COLUMNS.len());
        assert!(matches!(values[0], Param::Text("t")));
        assert!(matches!(values[1], Param::Nullable(Some("acme"))));
        assert!(matches!(values[3], Param::Text(r#"{"type":"object"}"#)));
        assert!(matches!(values[9], Param::Integer(1)));
    }

    #[test]
    fn a_column_that_is_not_json_keeps_the_parsers_error() {
        let text = |s: &str| Sql::Text(s.to_owned());
        let cols = vec![
            text("t"),
            text("d"),
            text("{not json"),
            Sql::Null,
            text("remote"),
            text("http://127.0.0.1:9/mcp"),
            text("1.0"),
            text("read"),
            Sql::Integer(1),
            Sql::Null,
            text("{}"),
        ];
        let e = decode(7, cols).unwrap_err();
        let RowError::BadRow { column: "input_schema", reason, source: Some(source), .. } = &e else { panic!("{e:?}") };
        let json = source.downcast_ref::<serde_json::Error>().expect("serde_json's error");
        assert_eq!(reason, &format!("is not valid JSON (line 1, column {})", json.column()));
        assert!(std::error::Error::source(&e).is_some_and(|s| s.is::<serde_json::Error>()));
        // Found by the decoding itself: no source.
        let e = decode(7, vec![Sql::Integer(5)]).unwrap_err();
        assert!(matches!(&e, RowError::BadRow { source: None, .. }), "{e:?}");
        assert!(std::error::Error::source(&e).is_none());
    }
}
