use keel_tools_core::{State, tool};

struct Db;

/// Counts rows.
#[tool(effect = "read", version = "1.0")]
fn count_rows(db: &State<Db>, table: &str) -> usize {
    let _ = (db, table);
    0
}

fn main() {}
