use keel_tools_core::tool;

struct Db;

/// Counts rows.
#[tool(effect = "read", version = "1.0")]
fn count_rows(db: Db, table: String) -> usize {
    let _ = (db, table);
    0
}

fn main() {}
