//! A fresh PostgreSQL database per test, in the cluster that `scripts/postgres.sh` starts (`KEEL_TEST_POSTGRES`,
//! a libpq connection string). Without the variable a test is skipped (and named in the line the test binary ends
//! with: [`crate::peers`]), or fails when peers are required (CI).

use std::sync::atomic::{AtomicUsize, Ordering};

/// The variable that names the test cluster.
pub const VAR: &str = "KEEL_TEST_POSTGRES";

/// The variable that names the PEM file of the CA that signed the test cluster's server certificate (the cluster
/// has TLS on; plain connections work too).
pub const CA_VAR: &str = "KEEL_TEST_POSTGRES_CA";

/// The path of the test cluster's CA (`KEEL_TEST_POSTGRES_CA`); `None` when it is unset and `required` is false (a
/// skip of the calling test, recorded: [`crate::peers`]). Panics when it is required and unset.
pub fn ca(required: bool) -> Option<String> {
    let Some(path) = std::env::var(CA_VAR).ok().filter(|v| !v.is_empty()) else {
        assert!(
            !required,
            "{CA_VAR} is not set, and prerequisites are required (CI or KEEL_REQUIRE_PEERS): start the cluster with \
             scripts/postgres.sh, which writes it to target/postgres/env"
        );
        crate::missing_peer(
            &crate::peers::POSTGRES,
            &format!("{CA_VAR} is not set (scripts/postgres.sh start sets it, with TLS on)"),
        );
        return None;
    };
    Some(path)
}

/// A database created for one test and dropped (with its connections) when this is dropped.
pub struct PgDatabase {
    /// The connection string of the database.
    pub conninfo: String,
    admin: String,
    name: String,
}

impl PgDatabase {
    /// Creates a database named after `label`; `None` when `KEEL_TEST_POSTGRES` is unset and `required` is false
    /// (a skip of the calling test, recorded: [`crate::peers`]). Panics when it is set but the cluster does not
    /// answer, or when it is required and unset.
    pub async fn create(label: &str, required: bool) -> Option<PgDatabase> {
        let Some(admin) = std::env::var(VAR).ok().filter(|v| !v.is_empty()) else {
            assert!(
                !required,
                "{VAR} is not set, and prerequisites are required (CI or KEEL_REQUIRE_PEERS): run the tests through \
                 scripts/test-all.sh, which starts a PostgreSQL cluster under target/postgres"
            );
            crate::missing_peer(
                &crate::peers::POSTGRES,
                &format!("{VAR} is not set (scripts/postgres.sh start sets it)"),
            );
            return None;
        };
        static N: AtomicUsize = AtomicUsize::new(0);
        let mut short: String =
            label.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(32).collect::<String>();
        short.make_ascii_lowercase();
        let name = format!("keel_{short}_{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let client = connect(&admin).await;
        client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.expect("drop old");
        client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("create database");
        Some(PgDatabase { conninfo: format!("{admin} dbname={name}"), admin, name })
    }

    /// Runs `sql` over a connection of its own.
    pub async fn exec(&self, sql: &str) {
        connect(&self.conninfo).await.batch_execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }

    /// A client of the database.
    pub async fn client(&self) -> tokio_postgres::Client {
        connect(&self.conninfo).await
    }
}

/// A client of `conninfo`, its connection driven on the current runtime.
pub async fn connect(conninfo: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(conninfo, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connecting to the test cluster ({conninfo}): {e}"));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        // A runtime of its own on a thread of its own: the test's runtime may be shutting down.
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
            rt.block_on(async {
                if let Ok((client, connection)) = tokio_postgres::connect(&admin, tokio_postgres::NoTls).await {
                    tokio::spawn(connection);
                    let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
                }
            });
        })
        .join();
    }
}
