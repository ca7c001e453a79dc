//! The catalogue over PostgreSQL with TLS, against the test cluster of `scripts/postgres.sh`: its server has
//! `ssl=on` with a certificate for `localhost` and `127.0.0.1`, signed by a CA made when the cluster starts
//! (`KEEL_TEST_POSTGRES_CA`), and takes plain connections too.
//!
//! `verify-full` with that CA connects over TLS (both forms of the connection string) and a row makes the round
//! trip; another CA is refused naming the unknown issuer, and so are Mozilla's roots; a host name the certificate
//! lacks is refused by `verify-full`, naming the name, and passed by `verify-ca`; `require` encrypts without any
//! roots; no `sslmode` stays plain and `prefer` takes TLS; an unknown `sslmode` is `config_error`. The server
//! itself says which connections use TLS (`pg_stat_ssl`).
//!
//! `cargo test -p keel-tests --test with_peers catalog_postgres_tls::`

use std::error::Error;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use keel_tests::pg::{self, PgDatabase};
use keel_tools_catalog::{Catalog, CatalogError};
use keel_tools_core::Registry;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

keel_tools_core::link_tools!(examples);

use super::catalog_rows::status_row;

fn registry() -> Registry {
    Registry::from_inventory().expect("registry")
}

/// A fresh database of the test cluster and the cluster's CA.
struct Cluster {
    pg: PgDatabase,
    ca: String,
    /// The database's connection string without `host` (tokio-postgres adds a host for every `host=`).
    base: String,
}

/// `None` (a skip, recorded: `keel_tests::peers`) without the cluster or its CA, unless they are required.
async fn cluster(label: &str) -> Option<Cluster> {
    let required = keel_tests::peers_required();
    let pg = PgDatabase::create(label, required).await?;
    let ca = pg::ca(required)?;
    let base = pg.conninfo.split_whitespace().filter(|p| !p.starts_with("host=")).collect::<Vec<_>>().join(" ");
    Some(Cluster { pg, ca, base })
}

/// `sslrootcert='PATH'`, quoted for a `key=value` string.
fn rootcert(path: &str) -> String {
    format!("sslrootcert='{}'", path.replace('\\', "\\\\").replace('\'', "\\'"))
}

impl Cluster {
    /// The database's connection string with `settings` added.
    fn with(&self, settings: &str) -> String {
        format!("{} {settings}", self.base)
    }

    /// Whether each of the catalogue's connections to this database (`application_name` keel-catalog) uses TLS,
    /// as the server sees it.
    async fn tls_in_use(&self) -> Vec<bool> {
        let client = self.pg.client().await;
        let rows = client
            .query(
                "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
                 WHERE a.datname = current_database() AND a.application_name = 'keel-catalog'",
                &[],
            )
            .await
            .expect("pg_stat_ssl");
        rows.iter().map(|r| r.get(0)).collect()
    }
}

/// Connects a catalogue with `conninfo`, writes a row and reads it back.
async fn round_trip(conninfo: &str) -> Result<Catalog, CatalogError> {
    let catalog = Catalog::builder(&registry()).allow_module("examples::status").connect_postgres(conninfo).await?;
    let written = catalog.put_async(&status_row()).await?;
    let rows = catalog.rows_async().await?;
    assert_eq!(rows.value.len(), 1, "{conninfo}");
    assert_eq!(rows.value[0].rowid, written.value);
    assert_eq!(rows.value[0].row.as_ref().expect("the row resolves").name, "get_service_status");
    Ok(catalog)
}

/// A refused connection: `store_unavailable`, the driver's error its source; returns its text.
fn refused(e: &CatalogError) -> String {
    assert_eq!(e.code(), "store_unavailable", "{e}");
    assert!(e.source().is_some_and(|s| s.is::<tokio_postgres::Error>()), "the driver's error is the source: {e:?}");
    e.to_string()
}

/// A PEM file of a CA that signed nothing of the cluster's; removed on drop.
struct OtherCa(PathBuf);

impl OtherCa {
    fn new() -> OtherCa {
        static N: AtomicUsize = AtomicUsize::new(0);
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, "another CA");
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let path = std::env::temp_dir().join(format!(
            "keel-pg-other-ca-{}-{}.pem",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, ca.pem()).expect("write the CA");
        OtherCa(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp dir")
    }
}

impl Drop for OtherCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `s` percent-encoded for a URL's query.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_with_the_clusters_ca_connects_over_tls_and_a_row_makes_the_round_trip() {
    let Some(c) = cluster("tls_verify_full").await else { return };
    // By name, to the address the server listens on (`localhost` may resolve to ::1 first).
    let conninfo = c.with(&format!("host=localhost hostaddr=127.0.0.1 sslmode=verify-full {}", rootcert(&c.ca)));
    let catalog = round_trip(&conninfo).await.unwrap_or_else(|e| panic!("{conninfo}: {e}"));
    assert!(catalog.describe().ends_with("?sslmode=verify-full"), "{}", catalog.describe());
    let tls = c.tls_in_use().await;
    assert!(!tls.is_empty() && tls.iter().all(|&on| on), "every connection of the catalogue uses TLS: {tls:?}");
    drop(catalog);

    // The URL form, the settings as query parameters.
    let config: tokio_postgres::Config = c.pg.conninfo.parse().unwrap();
    let url = format!(
        "postgresql://keel@localhost:{}/{}?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={}",
        config.get_ports()[0],
        config.get_dbname().unwrap(),
        encode(&c.ca)
    );
    round_trip(&url).await.unwrap_or_else(|e| panic!("{url}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_ca_is_refused_naming_the_unknown_issuer() {
    let Some(c) = cluster("tls_other_ca").await else { return };
    let other = OtherCa::new();
    // `require` with a root file verifies the chain, as libpq does.
    for mode in ["verify-full", "verify-ca", "require"] {
        let conninfo = c.with(&format!("host=localhost hostaddr=127.0.0.1 sslmode={mode} {}", rootcert(other.path())));
        let e = round_trip(&conninfo).await.expect_err(&conninfo);
        let text = refused(&e);
        assert!(text.contains("invalid peer certificate: UnknownIssuer"), "{text}");
        assert!(text.contains("not signed by a CA the connection trusts"), "{text}");
    }
    // Without sslrootcert, Mozilla's CAs: none signed the cluster's certificate either.
    let e = round_trip(&c.with("host=localhost hostaddr=127.0.0.1 sslmode=verify-full")).await.unwrap_err();
    assert!(refused(&e).contains("UnknownIssuer"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_the_certificate_lacks_is_refused_by_verify_full_and_passed_by_verify_ca() {
    let Some(c) = cluster("tls_wrong_name").await else { return };
    let wrong =
        |mode: &str| c.with(&format!("host=wrong.example hostaddr=127.0.0.1 sslmode={mode} {}", rootcert(&c.ca)));
    let e = round_trip(&wrong("verify-full")).await.unwrap_err();
    let text = refused(&e);
    assert!(text.contains("certificate not valid for name \"wrong.example\""), "{text}");
    assert!(text.contains("sslmode=verify-ca"), "the message says what would pass: {text}");

    let _catalog = round_trip(&wrong("verify-ca")).await.unwrap_or_else(|e| panic!("verify-ca: {e}"));
    let tls = c.tls_in_use().await;
    assert!(!tls.is_empty() && tls.iter().all(|&on| on), "{tls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_encrypts_without_roots() {
    let Some(c) = cluster("tls_require").await else { return };
    for conninfo in
        [c.with("host=127.0.0.1 sslmode=require"), c.with("host=wrong.example hostaddr=127.0.0.1 sslmode=require")]
    {
        let catalog = round_trip(&conninfo).await.unwrap_or_else(|e| panic!("{conninfo}: {e}"));
        let tls = c.tls_in_use().await;
        assert!(!tls.is_empty() && tls.iter().all(|&on| on), "{conninfo}: {tls:?}");
        drop(catalog);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_sslmode_stays_plain_and_prefer_takes_tls() {
    let Some(c) = cluster("tls_plain").await else { return };
    let catalog = round_trip(&c.pg.conninfo).await.expect("plain");
    let tls = c.tls_in_use().await;
    assert!(!tls.is_empty() && tls.iter().all(|&on| !on), "no sslmode: plain, as before TLS was supported: {tls:?}");
    assert!(!catalog.describe().contains("sslmode"), "{}", catalog.describe());
    drop(catalog);

    let catalog = round_trip(&c.with("host=127.0.0.1 sslmode=prefer")).await.expect("prefer");
    let tls = c.tls_in_use().await;
    // The plain catalogue's connection may still be closing: the new one is the one with TLS.
    assert!(tls.contains(&true), "prefer takes the TLS the server offers: {tls:?}");
    drop(catalog);

    // An unknown mode is the configuration's fault, found before connecting.
    let e = round_trip(&c.with("host=127.0.0.1 sslmode=verify_full")).await.unwrap_err();
    assert_eq!(e.code(), "config_error", "{e}");
    assert!(e.to_string().contains("sslmode=\"verify_full\""), "{e}");
}
