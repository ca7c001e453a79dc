//! A tenant's catalogue view served over MCP (feature `mcp`, on by default): [`CatalogServer`] swaps each new view
//! into its [`McpServer`] and reports its health.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use keel_tools_core::Executor;
use keel_tools_mcp::server::McpServerError;
use keel_tools_mcp::{HealthReport, HttpConfig, McpServer};
use tokio_util::sync::CancellationToken;

use crate::catalog::Catalog;
use crate::error::{CatalogError, RowError};
use crate::storage::{ChangeFeed, ChangeToken, StoreHealth};

/// What [`CatalogServer::refresh`] did.
#[derive(Debug, Clone)]
pub struct Refresh {
    /// Whether the served `tools/list` changed (and `notifications/tools/list_changed` was sent).
    pub changed: bool,
    /// The rows left out of the new view.
    pub problems: Vec<RowError>,
}

/// Serves one tenant's catalogue view over MCP and keeps it current: [`CatalogServer::refresh`] rebuilds the view
/// and swaps it into the [`McpServer`], which sends `notifications/tools/list_changed` to connected clients when the
/// list changed; [`CatalogServer::watch`] does so whenever the file changes. Cheap to clone.
#[derive(Clone)]
pub struct CatalogServer {
    inner: Arc<ServerInner>,
}

struct ServerInner {
    catalog: Catalog,
    tenant: Option<String>,
    server: McpServer,
    /// Held by a refresh, so that two never interleave their swaps.
    refreshing: tokio::sync::Mutex<()>,
    problems: Mutex<Vec<RowError>>,
    /// The token of the view being served.
    served: tokio::sync::watch::Sender<Option<ChangeToken>>,
    status: Mutex<ServedStatus>,
}

/// How the server follows its store, for [`CatalogServer::health`].
struct ServedStatus {
    refresh_error: Option<(SystemTime, String)>,
    feed: Option<ChangeFeed>,
}

/// A catalogue server's report on itself ([`CatalogServer::health`]): which state of the catalogue it serves,
/// the newest it knows of, and whether its store answers. A degraded server keeps serving its last good view.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Health {
    /// Where the rows are ([`Catalog::describe`]).
    pub storage: String,
    /// The tenant served (`None`: the shared view).
    pub tenant: Option<String>,
    /// The token of the view being served.
    pub served: Option<ChangeToken>,
    /// The newest token the change feed has seen (`None` when the server does not [follow](CatalogServer::follow)).
    pub latest: Option<ChangeToken>,
    /// Whether the store answers, as the change feed last saw it.
    pub store: StoreHealth,
    /// The last refresh that failed, while no later one has succeeded: when, and why.
    pub refresh_error: Option<(SystemTime, String)>,
}

impl Health {
    /// Whether the server serves an older view than it should: its store does not answer, or a refresh failed.
    pub fn is_degraded(&self) -> bool {
        self.store.is_degraded() || self.refresh_error.is_some()
    }

    /// The report as JSON: `status` (`ok` or `degraded`), `storage`, `tenant`, `served` and `latest` (generations),
    /// `store` (`connected` or `degraded`, with `since` in Unix milliseconds, `error` and `attempts`), and
    /// `refresh_error`.
    pub fn to_json(&self) -> serde_json::Value {
        let millis = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let store = match &self.store {
            StoreHealth::Degraded { since, error, attempts } => serde_json::json!({
                "status": "degraded", "since_unix_ms": millis(*since), "error": error, "attempts": attempts,
            }),
            other => serde_json::json!({ "status": other.status() }),
        };
        serde_json::json!({
            "status": if self.is_degraded() { "degraded" } else { "ok" },
            "storage": self.storage,
            "tenant": self.tenant,
            "served": self.served.map(ChangeToken::generation),
            "latest": self.latest.map(ChangeToken::generation),
            "store": store,
            "refresh_error": self.refresh_error.as_ref().map(|(at, e)| serde_json::json!({
                "at_unix_ms": millis(*at), "error": e,
            })),
        })
    }
}

impl fmt::Debug for CatalogServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CatalogServer").field("tenant", &self.inner.tenant).finish_non_exhaustive()
    }
}

/// `serve_error`, keeping the executor's or the MCP server's error as its source.
fn build_error(e: impl std::error::Error + Send + Sync + 'static) -> CatalogError {
    CatalogError::Serve(Arc::new(e))
}

impl CatalogServer {
    /// Builds `tenant`'s view (`None`: [`Catalog::shared_view`]) and an MCP server over it with `build` (e.g.
    /// `McpServer::new`, or `|e| McpServer::builder(e).name("desk").build()`).
    pub async fn new(
        catalog: &Catalog,
        tenant: Option<&str>,
        build: impl FnOnce(Executor) -> Result<McpServer, McpServerError>,
    ) -> Result<CatalogServer, CatalogError> {
        let view = match tenant {
            Some(t) => catalog.view_for(t).await?,
            None => catalog.shared_view().await?,
        };
        let token = view.change_token();
        let server = build(view.executor().map_err(build_error)?).map_err(build_error)?;
        // Rows change at run time: clients are told to cache `tools/list` briefly.
        server.expect_changes();
        Ok(CatalogServer {
            inner: Arc::new(ServerInner {
                catalog: catalog.clone(),
                tenant: tenant.map(str::to_owned),
                server,
                refreshing: tokio::sync::Mutex::new(()),
                problems: Mutex::new(view.problems().to_vec()),
                served: tokio::sync::watch::Sender::new(Some(token)),
                status: Mutex::new(ServedStatus { refresh_error: None, feed: None }),
            }),
        })
    }

    /// The MCP server: serve it over any transport ([`McpServer::serve`], `serve_http`, `serve_stdio`).
    pub fn server(&self) -> &McpServer {
        &self.inner.server
    }

    /// The rows left out of the view being served.
    pub fn problems(&self) -> Vec<RowError> {
        self.inner.problems.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Rebuilds the view from the file and serves it; connected clients are sent
    /// `notifications/tools/list_changed` when the list changed.
    pub async fn refresh(&self) -> Result<Refresh, CatalogError> {
        let result = self.refresh_inner().await;
        let mut status = self.status();
        match &result {
            Ok(_) => status.refresh_error = None,
            Err(e) => {
                let since = status.refresh_error.as_ref().map_or_else(SystemTime::now, |(at, _)| *at);
                status.refresh_error = Some((since, e.to_string()));
            }
        }
        result
    }

    async fn refresh_inner(&self) -> Result<Refresh, CatalogError> {
        let _refreshing = self.inner.refreshing.lock().await;
        let view = match &self.inner.tenant {
            Some(t) => self.inner.catalog.view_for(t).await?,
            None => self.inner.catalog.shared_view().await?,
        };
        let token = view.change_token();
        let executor = view.executor().map_err(build_error)?;
        let changed = self.inner.server.update(executor).await.map_err(build_error)?;
        self.inner.served.send_if_modified(|t| t.replace(token) != Some(token));
        let problems = view.problems().to_vec();
        *self.inner.problems.lock().unwrap_or_else(PoisonError::into_inner) = problems.clone();
        Ok(Refresh { changed, problems })
    }

    fn status(&self) -> std::sync::MutexGuard<'_, ServedStatus> {
        self.inner.status.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The token of the view being served, as it changes (each refresh that swaps a view in).
    pub fn served(&self) -> tokio::sync::watch::Receiver<Option<ChangeToken>> {
        self.inner.served.subscribe()
    }

    /// The server's report on itself: the state it serves, the newest it knows of, whether its store answers.
    pub fn health(&self) -> Health {
        let status = self.status();
        let (latest, store) = match &status.feed {
            Some(feed) => {
                let state = feed.state();
                (state.token, state.health)
            }
            None => (None, StoreHealth::Connected),
        };
        Health {
            storage: self.inner.catalog.describe(),
            tenant: self.inner.tenant.clone(),
            served: *self.inner.served.borrow(),
            latest,
            store,
            refresh_error: status.refresh_error.clone(),
        }
    }

    /// An [`HttpConfig`] whose `GET /health` answers from [`CatalogServer::health`] (`200` ok, `503` degraded; the
    /// whole report as JSON only with [`HttpConfig::health_details`]), for [`McpServer::http_service`]: `server.server().http_service(server.http_config(HttpConfig::default()))`.
    pub fn http_config(&self, config: HttpConfig) -> HttpConfig {
        let this = Arc::downgrade(&self.inner);
        config.health("/health", move || match this.upgrade() {
            Some(inner) => {
                let health = CatalogServer { inner }.health();
                HealthReport { healthy: !health.is_degraded(), body: health.to_json() }
            }
            None => HealthReport { healthy: false, body: serde_json::json!({ "status": "stopped" }) },
        })
    }

    /// Serves MCP over Streamable HTTP at `path` and the [health report](CatalogServer::health) at `GET /health`
    /// on `listener`, until `shutdown` is cancelled; see [`keel_tools_mcp::McpHttpService::serve`].
    pub async fn serve_http(
        &self,
        listener: tokio::net::TcpListener,
        path: &str,
        config: HttpConfig,
        shutdown: CancellationToken,
    ) -> std::io::Result<()> {
        self.inner.server.http_service(self.http_config(config)).serve(listener, path, shutdown).await
    }

    /// Follows the catalogue's [change feed](Catalog::changes) until `stop` is cancelled: whenever the newest
    /// token differs from the one being served, the view is rebuilt and swapped in, and clients are sent
    /// `notifications/tools/list_changed` when the list changed. With PostgreSQL the changes are pushed
    /// (`NOTIFY`); with SQLite the file is polled. While the store does not answer, the last good view keeps being
    /// served, [`CatalogServer::health`] says degraded, and the refresh is retried (50 ms doubling to 2 s) until it
    /// succeeds: no change is skipped, since each refresh reads the newest state.
    pub fn follow(&self, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        let mut feed = self.inner.catalog.changes();
        self.status().feed = Some(feed.clone());
        tokio::spawn(async move {
            let mut retry: Option<Duration> = None;
            // The feed's token that the last successful refresh answered: a view read after it is at least as new,
            // so the same token never causes a second refresh (a counter moved back, by a restore from backup, is
            // followed once, not in a loop).
            let mut answered: Option<ChangeToken> = None;
            loop {
                let target = feed.state().token;
                let served = *this.inner.served.borrow();
                let behind = target.is_some() && target != served && target != answered;
                if behind || retry.is_some() {
                    match this.refresh().await {
                        Ok(_) => {
                            retry = None;
                            answered = target;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "refreshing the catalogue view failed; serving the last good one");
                            retry =
                                Some(retry.map_or(Duration::from_millis(50), |r| (r * 2).min(Duration::from_secs(2))));
                        }
                    }
                }
                let pause = retry.unwrap_or(Duration::from_secs(3600));
                tokio::select! {
                    () = stop.cancelled() => return,
                    changed = feed.changed() => if changed.is_none() { return },
                    () = tokio::time::sleep(pause) => {}
                }
            }
        })
    }

    /// Refreshes only when the file changed since the last refresh (see [`Catalog::change_token`]); `None` when it
    /// did not.
    pub async fn refresh_if_changed(&self) -> Result<Option<Refresh>, CatalogError> {
        let unchanged = {
            let _refreshing = self.inner.refreshing.lock().await;
            let token = self.inner.catalog.change_token_async().await?;
            *self.inner.served.borrow() == Some(token)
        };
        if unchanged { Ok(None) } else { self.refresh().await.map(Some) }
    }

    /// Checks the file every `every` and refreshes when it changed, until `stop` is cancelled. Errors are logged
    /// (`tracing`) and retried at the next tick.
    pub fn watch(&self, every: Duration, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = tick.tick() => {}
                }
                if let Err(e) = this.refresh_if_changed().await {
                    tracing::warn!(error = %e, "refreshing the catalogue view failed");
                }
            }
        })
    }
}
