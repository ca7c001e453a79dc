//! What the tests of the state stores share (`state_stores`, `task_stores`, `mcp_task_store`): each test gets a
//! SQLite file of its own and a PostgreSQL database of its own (in the cluster of `KEEL_TEST_POSTGRES`), and
//! [`both!`] runs it against each.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keel_tests::pg::PgDatabase;

/// A fresh directory under the system temp dir, removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(label: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("keel-state-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    /// The SQLite file the stores of a test share.
    pub(crate) fn db(&self) -> PathBuf {
        self.0.join("state.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The database under test: a SQLite file, or a fresh database in the PostgreSQL cluster of `KEEL_TEST_POSTGRES`.
/// Each test file adds the stores it opens over it; two stores opened over one `Db` are two replicas.
pub(crate) enum Db {
    Sqlite(TempDir),
    Postgres(PgDatabase),
}

impl Db {
    pub(crate) fn sqlite(label: &str) -> Db {
        Db::Sqlite(TempDir::new(label))
    }

    /// `None` when no cluster is configured and none is required (a skip, recorded: `keel_tests::peers`).
    pub(crate) async fn postgres(label: &str) -> Option<Db> {
        PgDatabase::create(label, keel_tests::peers_required()).await.map(Db::Postgres)
    }

    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self, Db::Postgres(_))
    }

    /// Runs `sql` over a connection of its own (an operator's `sqlite3` or `psql`).
    pub(crate) async fn exec(&self, sql: &str) {
        match self {
            Db::Sqlite(dir) => rusqlite::Connection::open(dir.db()).expect("connect").execute_batch(sql).expect(sql),
            Db::Postgres(pg) => pg.exec(sql).await,
        }
    }
}

/// Runs a test future with a bound of two minutes.
pub(crate) async fn bounded<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(Duration::from_secs(120), f).await.expect("test timed out");
}

/// Runs the test `async fn NAME(db: Db)` against a SQLite file (`NAME::sqlite`) and a PostgreSQL database
/// (`NAME::postgres`), in a multi-threaded runtime (the sync stores block a worker, as a host's handler would).
macro_rules! both {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let db = crate::state_db::Db::sqlite(stringify!($name));
                crate::state_db::bounded(super::$name(db)).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(db) = crate::state_db::Db::postgres(stringify!($name)).await {
                    crate::state_db::bounded(super::$name(db)).await;
                }
            }
        }
    };
}

pub(crate) use both;
