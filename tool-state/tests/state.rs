//! The integration tests of the state stores, in one test binary (one link instead of one per file), each file a
//! module (`file::test`), against a SQLite file (`NAME::sqlite`) and a PostgreSQL database (`NAME::postgres`, in
//! the cluster of `KEEL_TEST_POSTGRES`; skipped without it, a failure with `CI` or `KEEL_REQUIRE_PEERS` set). Each
//! test keeps tables of its own.
//!
//! `cargo test -p keel-tools-state --features postgres --test state`

#![cfg(all(feature = "sqlite", feature = "postgres"))]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

// ---- The two databases ----

/// Where a test's tables live: a SQLite file of its own, or tables of its own in the PostgreSQL cluster. Each
/// module adds the stores it needs (`impl Db`).
enum Db {
    Sqlite(PathBuf),
    Postgres { conninfo: String, prefix: String },
}

fn unique(label: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{label}_{}_{}_{}", std::process::id(), nanos % 1_000_000_000, N.fetch_add(1, Ordering::Relaxed))
}

impl Db {
    fn sqlite(label: &str) -> Db {
        let dir = std::env::temp_dir().join(format!("keel-state-{}", unique(label)));
        std::fs::create_dir_all(&dir).unwrap();
        Db::Sqlite(dir.join("state.db"))
    }

    /// `None` when no cluster is configured and none is required.
    fn postgres() -> Option<Db> {
        match std::env::var("KEEL_TEST_POSTGRES") {
            Ok(conninfo) if !conninfo.is_empty() => Some(Db::Postgres { conninfo, prefix: unique("t") }),
            _ => {
                let required = std::env::var_os("CI").is_some() || std::env::var_os("KEEL_REQUIRE_PEERS").is_some();
                assert!(!required, "KEEL_TEST_POSTGRES is not set (bash scripts/postgres.sh start)");
                eprintln!("skipped: KEEL_TEST_POSTGRES is not set");
                None
            }
        }
    }
}

/// Runs the test `async fn NAME(db: Db)` of the module where it is used against both databases, bounded to two
/// minutes each.
macro_rules! both {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let db = crate::Db::sqlite(stringify!($name));
                tokio::time::timeout(std::time::Duration::from_secs(120), super::$name(db)).await.unwrap();
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(db) = crate::Db::postgres() {
                    tokio::time::timeout(std::time::Duration::from_secs(120), super::$name(db)).await.unwrap();
                }
            }
        }
    };
}

#[path = "state/outlive.rs"]
mod outlive;
#[path = "state/pending_replay.rs"]
mod pending_replay;
