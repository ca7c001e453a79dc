//! keel's PostgreSQL connections: a [`PgConnector`] reads a connection string once (a `postgresql://` URL or a
//! libpq `key=value` string, with libpq's `sslmode` and `sslrootcert`) and opens tokio-postgres connections to it.
//! The catalogue (keel-tools-catalog's `postgres`) and the call-state stores (keel-tools-state's `postgres`) both
//! connect through it, so one connection string means the same thing to all of them; neither needs the other, nor
//! anything of MCP, to do so.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//!
//! use keel_tools_postgres::PgConnector;
//!
//! let connector = PgConnector::new(
//!     "postgresql://keel@db.internal/tools?sslmode=verify-full",
//!     "my-service",              // the connections' application_name
//!     Duration::from_secs(5),    // how long opening one may take
//! )?;
//! println!("connecting to {}", connector.describe()); // postgresql://db.internal:5432/tools?sslmode=verify-full
//! let client = connector.connect().await?;
//! let one: i32 = client.query_one("SELECT 1", &[]).await?.get(0);
//! assert_eq!(one, 1);
//! # Ok(()) }
//! ```
//!
//! # TLS
//!
//! The connection string's `sslmode` says whether connections use TLS, with libpq's meanings (TLS needs the
//! `rustls` feature, on by default here, in keel-tools-catalog and in keel-tools-state):
//!
//! | `sslmode` | connection | the server's certificate |
//! |---|---|---|
//! | absent, `disable` | plain TCP | — |
//! | `prefer` | TLS if the server offers it, else plain | not verified (the chain is, with `sslrootcert=PATH`) |
//! | `require` | TLS, or no connection | not verified (the chain is, with `sslrootcert=PATH`, as libpq does) |
//! | `verify-ca` | TLS, or no connection | chain verified up to a root; host name not checked |
//! | `verify-full` | TLS, or no connection | chain and host name verified |
//!
//! `sslrootcert=PATH` names a PEM file of the CAs to trust, read when the connector is made; without it
//! `verify-ca` and `verify-full` trust Mozilla's CAs (compiled in from webpki-roots), as does
//! `sslrootcert=system`, which implies `verify-full`. Both forms of the connection string take them:
//! `host=db.internal user=keel dbname=tools sslmode=verify-full sslrootcert=/etc/keel/pg-ca.pem`, or
//! `postgresql://keel@db.internal/tools?sslmode=verify-full&sslrootcert=/etc/keel/pg-ca.pem`. The name checked is
//! `host`; with `hostaddr` too, the connection goes to that address and the certificate must still hold `host`.
//!
//! Without `sslmode` the connection is plain, as it was before TLS was supported, where libpq's default is
//! `prefer`: say `sslmode=prefer` for that (unlike libpq, a TLS handshake that fails is not retried without TLS).
//! An unknown `sslmode` (or `allow`, which is not supported) is `config_error`, and so is a mode that needs TLS in
//! a build without the `rustls` feature. A certificate that is refused makes the connection fail with
//! `store_unavailable`, whose message names the problem (`invalid peer certificate: UnknownIssuer`,
//! `certificate not valid for name …`) and whose [`source`](std::error::Error::source) is the driver's error. Each
//! connector has a rustls configuration of its own, with the `aws-lc-rs` provider; nothing is installed
//! process-wide. Client certificates (`sslcert`, `sslkey`) are not supported.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{AsyncMessage, Client, Config, Socket};

mod conninfo;
mod error;
#[cfg(feature = "rustls")]
mod tls;

pub use error::PgError;

use conninfo::SslMode;

/// The driver, for the [`Client`]s a connector opens: the same version as keel's.
pub use tokio_postgres;

/// What makes a connection's TLS session: rustls's, with the `rustls` feature.
#[cfg(feature = "rustls")]
type Tls = tokio_postgres_rustls::MakeRustlsConnect;
/// What makes a connection's TLS session: none without the `rustls` feature.
#[cfg(not(feature = "rustls"))]
type Tls = tokio_postgres::NoTls;

/// A connection [`PgConnector::open`] opened, to be driven by its caller (awaited, or polled with
/// [`poll_message`](tokio_postgres::Connection::poll_message) for notifications).
pub type Connection = tokio_postgres::Connection<Socket, <Tls as MakeTlsConnect<Socket>>::Stream>;

/// How to open connections to the database of a connection string: the `sslmode` and `sslrootcert` of the
/// [TLS section](crate#tls), the connect timeout, TCP keepalives and an `application_name`. Cheap to clone.
#[derive(Clone)]
pub struct PgConnector {
    config: Config,
    tls: Tls,
    shown: String,
    connect_timeout: Duration,
}

impl fmt::Debug for PgConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgConnector").field("database", &self.shown).finish_non_exhaustive()
    }
}

impl PgConnector {
    /// The settings of `conninfo` (a `postgresql://` URL or a libpq `key=value` string), connections named
    /// `application_name` and given `connect_timeout` to open. Reads the `sslrootcert` file, if one is named.
    ///
    /// # Errors
    ///
    /// `config_error`: a connection string that does not parse, an unknown `sslmode`, a mode that needs TLS in a
    /// build without it, an `sslrootcert` that cannot be read.
    pub fn new(conninfo: &str, application_name: &str, connect_timeout: Duration) -> Result<PgConnector, PgError> {
        let split = conninfo::split(conninfo)?;
        let mut config: Config = split.rest.parse().map_err(|e| PgError::Config {
            message: format!("the PostgreSQL connection string does not parse: {e}"),
            source: Some(Arc::new(e)),
        })?;
        let mode = split.tls.mode()?;
        let tls = transport(&split.tls, mode)?;
        config.ssl_mode(mode.driver());
        if mode != SslMode::Disable && config.get_hosts().is_empty() {
            // tokio-postgres names the server to TLS by `host` only: an address alone is its own name.
            for addr in config.get_hostaddrs().to_vec() {
                config.host(addr.to_string());
            }
        }
        config.connect_timeout(connect_timeout);
        config.keepalives(true);
        config.application_name(application_name);
        let shown = describe(&config, mode);
        Ok(PgConnector { config, tls, shown, connect_timeout })
    }

    /// The database, for messages and logs: `postgresql://host:port/dbname`, with `?sslmode=…` unless it is
    /// `disable`; never a user or a password.
    pub fn describe(&self) -> &str {
        &self.shown
    }

    /// Opens a connection and hands over both halves: the client, and the connection, which does nothing until
    /// its caller drives it (spawn it, or poll its messages). `context` says what the connection is for, in the
    /// error's context, followed by the database: `"reading the tools (postgresql://db:5432/tools)"`.
    ///
    /// # Errors
    ///
    /// `store_unavailable` when the server cannot be reached, refuses the connection or its certificate, or does
    /// not answer within the connect timeout; the message says which, the driver's error is the source.
    pub async fn open(&self, context: &str) -> Result<(Client, Connection), PgError> {
        self.open_with(format!("{context} ({})", self.shown)).await
    }

    /// Opens a connection: a tokio-postgres client, its connection driven by a task spawned on the current Tokio
    /// runtime (it ends when the client is dropped or the connection is lost).
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub async fn connect(&self) -> Result<Client, PgError> {
        let (client, connection) = self.open_for_use().await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "a PostgreSQL connection ended");
            }
        });
        Ok(client)
    }

    /// Opens a connection whose notifications the caller receives, for `LISTEN`: the client, and the server's
    /// notifications on that connection (`NOTIFY`, `pg_notify`) in the order they came. The connection is driven
    /// by a task spawned on the current Tokio runtime, as [`connect`](Self::connect)'s; the channel is unbounded
    /// (a burst waits there for the reader) and closes when the connection ends (the client dropped, or the
    /// connection lost): then connect again, `LISTEN` again, and catch up on what the notifications missed.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub async fn connect_notified(
        &self,
    ) -> Result<(Client, tokio::sync::mpsc::UnboundedReceiver<tokio_postgres::Notification>), PgError> {
        let (client, mut connection) = self.open_for_use().await?;
        let (notes, received) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                    // A reader that went away leaves the client working: the connection is driven on.
                    Some(Ok(AsyncMessage::Notification(n))) => {
                        let _ = notes.send(n);
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "a PostgreSQL connection ended");
                        return;
                    }
                    None => return,
                }
            }
        });
        Ok((client, received))
    }

    /// [`open`](Self::open), the error's context saying "connecting to" the database.
    async fn open_for_use(&self) -> Result<(Client, Connection), PgError> {
        self.open_with(format!("connecting to {}", self.shown)).await
    }

    /// Opens a connection; `context` is the whole context of the error.
    #[cfg_attr(
        not(feature = "rustls"),
        allow(clippy::clone_on_copy, reason = "NoTls is Copy, rustls's connector is not")
    )]
    async fn open_with(&self, context: String) -> Result<(Client, Connection), PgError> {
        match tokio::time::timeout(self.connect_timeout, self.config.connect(self.tls.clone())).await {
            Ok(Ok(pair)) => Ok(pair),
            Ok(Err(e)) => Err(PgError::Unavailable { context, message: driver_message(&e), source: Some(Arc::new(e)) }),
            Err(_) => Err(PgError::Unavailable {
                context,
                message: format!("no answer within {} ms", self.connect_timeout.as_millis()),
                source: None,
            }),
        }
    }
}

/// The TLS connector for `mode` with the settings of `params`: rustls's.
#[cfg(feature = "rustls")]
fn transport(params: &conninfo::TlsParams, mode: SslMode) -> Result<Tls, PgError> {
    // `disable` never uses it; it is built like `verify-full`'s all the same.
    let verify = if mode == SslMode::Disable { conninfo::Verify::Full } else { params.verify(mode) };
    tls::connector(verify, params.rootcert.as_ref())
}

/// The TLS connector for `mode`: none without the `rustls` feature, so a mode that needs TLS is refused (`prefer`
/// connects without it, as libpq built without TLS does).
#[cfg(not(feature = "rustls"))]
fn transport(_params: &conninfo::TlsParams, mode: SslMode) -> Result<Tls, PgError> {
    if mode.requires_tls() {
        return Err(PgError::config(format!(
            "sslmode={} needs TLS, and this build has none: turn on the `rustls` feature of keel-tools-catalog or \
             keel-tools-state (on by default) besides `postgres`",
            mode.as_str()
        )));
    }
    Ok(tokio_postgres::NoTls)
}

/// `postgresql://host:port/dbname`, without user or password, followed by `?sslmode=…` unless it is `disable`.
fn describe(config: &Config, mode: SslMode) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let tls = if mode == SslMode::Disable { String::new() } else { format!("?sslmode={}", mode.as_str()) };
    format!("postgresql://{host}:{port}/{}{tls}", config.get_dbname().unwrap_or(""))
}

/// The driver's text is its kind alone ("error performing TLS handshake"): its causes say what happened, each part
/// once, followed by what to do about a refused certificate.
fn driver_message(e: &tokio_postgres::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    let mut message = parts.join(": ");
    if let Some(hint) = certificate_hint(e) {
        message.push_str(&format!(" ({hint})"));
    }
    message
}

/// What to do about the certificate refused in `e`'s chain, if one was.
#[cfg(feature = "rustls")]
fn certificate_hint(e: &tokio_postgres::Error) -> Option<&'static str> {
    tls::hint(e)
}

/// Without TLS, no certificate is ever refused.
#[cfg(not(feature = "rustls"))]
fn certificate_hint(_: &tokio_postgres::Error) -> Option<&'static str> {
    None
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(5);

    #[test]
    fn a_connection_string_that_does_not_parse_keeps_the_drivers_error() {
        let e = PgConnector::new("postgresql://[", "test", TIMEOUT).unwrap_err();
        assert_eq!(e.code(), "config_error", "{e}");
        let driver = e.source().and_then(|s| s.downcast_ref::<tokio_postgres::Error>()).expect("the driver's error");
        assert!(e.to_string().ends_with(&driver.to_string()), "{e}");
    }

    #[tokio::test]
    async fn a_server_that_refuses_keeps_the_drivers_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let connector = PgConnector::new(&format!("host=127.0.0.1 port={port} user=keel dbname=x"), "test", TIMEOUT)
            .expect("a connection string that parses");
        let e = connector.connect().await.unwrap_err();
        assert_eq!(e.code(), "store_unavailable", "{e}");
        let driver = e.source().and_then(|s| s.downcast_ref::<tokio_postgres::Error>()).expect("the driver's error");
        let PgError::Unavailable { context, message, .. } = &e else { panic!("{e:?}") };
        assert_eq!(context, &format!("connecting to postgresql://127.0.0.1:{port}/x"));
        // The driver's text, then its cause's (the refused connection).
        let cause = driver.source().expect("the driver's cause").to_string();
        assert_eq!(message, &format!("{driver}: {cause}"));
        let e = connector.open("reading the tools").await.map(|_| ()).unwrap_err();
        let PgError::Unavailable { context, .. } = &e else { panic!("{e:?}") };
        assert_eq!(context, &format!("reading the tools (postgresql://127.0.0.1:{port}/x)"));
    }

    #[tokio::test]
    async fn a_server_that_does_not_answer_is_unavailable_after_the_timeout() {
        // A listener that accepts (the backlog) and never answers the startup message.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let timeout = Duration::from_millis(200);
        let connector =
            PgConnector::new(&format!("host=127.0.0.1 port={port} user=keel dbname=x"), "test", timeout).unwrap();
        let e = connector.connect().await.unwrap_err();
        assert_eq!(e.code(), "store_unavailable", "{e}");
        assert_eq!(e.message(), "no answer within 200 ms", "{e}");
        assert!(e.source().is_none(), "{e:?}");
        drop(listener);
    }

    #[test]
    fn an_unknown_sslmode_is_a_configuration_error() {
        for conninfo in ["host=127.0.0.1 user=keel sslmode=verify_full", "postgresql://keel@127.0.0.1/x?sslmode=on"] {
            let e = PgConnector::new(conninfo, "test", TIMEOUT).unwrap_err();
            assert_eq!(e.code(), "config_error", "{e}");
            assert!(e.to_string().contains("none of disable, prefer, require, verify-ca, verify-full"), "{e}");
        }
    }

    /// A server that answers the client's TLS request with `N` (no TLS), then closes; returns its port.
    async fn server_without_tls() -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                let mut request = [0u8; 8];
                if tcp.read_exact(&mut request).await.is_ok() {
                    let _ = tcp.write_all(b"N").await;
                }
            }
        });
        port
    }

    #[cfg(feature = "rustls")]
    #[tokio::test]
    async fn sslmode_require_refuses_a_server_without_tls() {
        let port = server_without_tls().await;
        for mode in ["require", "verify-ca", "verify-full"] {
            let conninfo = format!("host=127.0.0.1 port={port} user=keel dbname=x sslmode={mode}");
            let e = PgConnector::new(&conninfo, "test", TIMEOUT).unwrap().connect().await.unwrap_err();
            assert_eq!(e.code(), "store_unavailable", "{e}");
            assert!(e.to_string().contains("server does not support TLS"), "{e}");
            assert!(e.to_string().contains(&format!("?sslmode={mode}")), "the store is shown with its mode: {e}");
            assert!(e.source().is_some_and(|s| s.is::<tokio_postgres::Error>()), "{e:?}");
        }
    }

    #[cfg(not(feature = "rustls"))]
    #[tokio::test]
    async fn without_the_rustls_feature_a_mode_that_needs_tls_is_a_configuration_error() {
        for mode in ["require", "verify-ca", "verify-full"] {
            let e = PgConnector::new(&format!("host=127.0.0.1 user=keel sslmode={mode}"), "test", TIMEOUT).unwrap_err();
            assert_eq!(e.code(), "config_error", "{e}");
            assert!(e.to_string().contains("`rustls` feature"), "{e}");
        }
        // `prefer` is not refused: it goes ahead without TLS (here to a server that fails it otherwise).
        let port = server_without_tls().await;
        let conninfo = format!("host=127.0.0.1 port={port} user=keel dbname=x sslmode=prefer");
        let e = PgConnector::new(&conninfo, "test", TIMEOUT).unwrap().connect().await.unwrap_err();
        assert_eq!(e.code(), "store_unavailable", "{e}");
    }

    #[test]
    fn the_store_is_shown_with_its_sslmode_unless_plain() {
        let config: Config = "host=db port=5433 dbname=tools".parse().unwrap();
        assert_eq!(describe(&config, SslMode::Disable), "postgresql://db:5433/tools");
        assert_eq!(describe(&config, SslMode::VerifyFull), "postgresql://db:5433/tools?sslmode=verify-full");
    }
}
