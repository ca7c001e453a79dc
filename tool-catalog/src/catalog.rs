//! [`Catalog`]: the SQLite file, the allowlists and the resolution caches; [`CatalogView`]: one tenant's tools.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use keel_tools_core::executor::ExecutorError;
use keel_tools_core::{Executor, Registry, ToolView};

use crate::error::{CatalogError, RowError};
use crate::locator::{self, Endpoint, RustPath};
use crate::lookup::{RegistryLookup, ToolLookup};
use crate::resolve::{Policy, Resolved, Resolver, RowKey};
use crate::row::{StoredRow, ToolRow};
use crate::storage::sqlite::{self, SqliteStorage, Store};
use crate::storage::{self, ChangeFeed, ChangeToken, DEFAULT_BUSY_TIMEOUT, Storage, Versioned, removing, writing};

/// How long connecting to a remote endpoint may take by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How often [`Catalog::changes`] reads the change token of a store that cannot push changes (SQLite), by default.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(100);

type ExecutorFactory = dyn Fn(ToolView) -> Result<Executor, ExecutorError> + Send + Sync;

/// Configures and opens a [`Catalog`]; see [`Catalog::builder`].
#[must_use]
pub struct CatalogBuilder {
    lookup: Arc<dyn ToolLookup>,
    modules: Vec<String>,
    http_origins: Vec<String>,
    stdio_commands: Vec<String>,
    connect_timeout: Duration,
    busy_timeout: Duration,
    poll_interval: Duration,
    executor: Option<Arc<ExecutorFactory>>,
}

impl fmt::Debug for CatalogBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CatalogBuilder")
            .field("modules", &self.modules)
            .field("http_origins", &self.http_origins)
            .field("stdio_commands", &self.stdio_commands)
            .field("connect_timeout", &self.connect_timeout)
            .field("busy_timeout", &self.busy_timeout)
            .field("poll_interval", &self.poll_interval)
            .finish_non_exhaustive()
    }
}

impl CatalogBuilder {
    /// Allows local rows to name compiled tools under the module `prefix` (`examples`, `my_crate::tools`), whole
    /// segments only. Nothing is allowed by default.
    pub fn allow_module(mut self, prefix: impl Into<String>) -> Self {
        self.modules.push(prefix.into());
        self
    }

    /// Allows remote rows to use Streamable HTTP endpoints of this origin (`http://127.0.0.1:8931`: scheme, host
    /// and port; any path). Nothing is allowed by default.
    pub fn allow_http_origin(mut self, origin: impl Into<String>) -> Self {
        self.http_origins.push(origin.into());
        self
    }

    /// Allows remote rows to start exactly this command line as an MCP server over stdio
    /// (`npx -y @modelcontextprotocol/server-everything`: program and arguments, separated by spaces, run without a
    /// shell). A row's `stdio:` locator must match an allowed command word for word.
    pub fn allow_stdio_command(mut self, command_line: impl Into<String>) -> Self {
        self.stdio_commands.push(command_line.into());
        self
    }

    /// How long connecting to a remote endpoint may take (default 10 s) before the row is
    /// `endpoint_unreachable`.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one operation on the file may wait, in all, while another connection (this process or another)
    /// holds the lock it needs (default [`DEFAULT_BUSY_TIMEOUT`], 2 s). The operation is tried again after short
    /// pauses (1 ms doubling to 50 ms, jittered) until the time is spent, then fails with
    /// [`CatalogError::Busy`] (`busy`), having changed nothing. `Duration::ZERO` tries once.
    ///
    /// With the sync methods the calling thread sleeps during the pauses; the `_async` methods and views run each
    /// attempt on the runtime's blocking pool and pause on a timer, so they never hold a runtime worker.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// How [`CatalogView::executor`] builds the executor of a view (policy, state, timeouts). Default:
    /// [`Executor::new`].
    ///
    /// A row may name a tool that takes `State<T>`: the executor built here gives it the state
    /// (`Executor::builder(view).state_arc(shared.clone())`, one value for every view), and without it the
    /// view's executor fails to build with `missing_state`, naming the tool.
    pub fn executor(
        mut self,
        build: impl Fn(ToolView) -> Result<Executor, ExecutorError> + Send + Sync + 'static,
    ) -> Self {
        self.executor = Some(Arc::new(build));
        self
    }

    /// How often [`Catalog::changes`] reads the change token when the store cannot push changes (a SQLite file;
    /// default [`DEFAULT_POLL_INTERVAL`], 100 ms). PostgreSQL pushes them and ignores this.
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every.max(Duration::from_millis(1));
        self
    }

    /// Checks the configuration and opens (creating or migrating) the SQLite file at `path`.
    pub fn open(self, path: impl AsRef<Path>) -> Result<Catalog, CatalogError> {
        let policy = self.policy()?;
        let store = Store::open(path.as_ref(), self.busy_timeout)?;
        Ok(self.finish(policy, Arc::new(SqliteStorage { store: store.clone() }), Some(store)))
    }

    /// Checks the configuration and opens a catalogue over `storage` (e.g. a
    /// [`PgStorage`](crate::postgres::PgStorage)). The sync methods ([`Catalog::put`], …) are for SQLite files; over
    /// any other storage they return `config_error`, and the `_async` methods do the work.
    pub fn storage(self, storage: impl Storage) -> Result<Catalog, CatalogError> {
        let policy = self.policy()?;
        Ok(self.finish(policy, Arc::new(storage), None))
    }

    /// Connects to the PostgreSQL database of `conninfo` (a `postgresql://` URL or `host=… port=… user=… dbname=…`)
    /// with [`PgStorage`](crate::postgres::PgStorage)'s defaults, creates or migrates the table, and opens a
    /// catalogue over it. For other settings, build the storage with
    /// [`PgStorage::builder`](crate::postgres::PgStorage::builder) and pass it to [`CatalogBuilder::storage`].
    #[cfg(feature = "postgres")]
    pub async fn connect_postgres(self, conninfo: &str) -> Result<Catalog, CatalogError> {
        let policy = self.policy()?;
        let storage =
            crate::storage::postgres::PgStorage::builder(conninfo).busy_timeout(self.busy_timeout).connect().await?;
        Ok(self.finish(policy, Arc::new(storage), None))
    }

    fn policy(&self) -> Result<Policy, CatalogError> {
        let mut policy = Policy::default();
        for m in &self.modules {
            let p = RustPath::parse(m)
                .ok_or_else(|| CatalogError::config(format!("module prefix {m:?} is not a Rust path (`a::b`)")))?;
            policy.modules.push(p);
        }
        for o in &self.http_origins {
            match locator::parse_remote(o) {
                Ok(Endpoint::Http { url, origin }) if url == format!("{origin}/") => policy.http_origins.push(origin),
                _ => {
                    return Err(CatalogError::config(format!(
                        "HTTP origin {o:?} is not `http(s)://host[:port]` (no path, no user info)"
                    )));
                }
            }
        }
        for c in &self.stdio_commands {
            let argv: Vec<String> = c.split(' ').filter(|w| !w.is_empty()).map(str::to_owned).collect();
            if argv.is_empty() || c.chars().any(|ch| ch.is_control()) {
                return Err(CatalogError::config(format!("stdio command {c:?} is empty or holds control characters")));
            }
            policy.stdio_commands.push(argv);
        }
        Ok(policy)
    }

    fn finish(self, policy: Policy, storage: Arc<dyn Storage>, sqlite: Option<Store>) -> Catalog {
        Catalog {
            inner: Arc::new(Inner {
                storage,
                sqlite,
                resolver: Resolver::new(policy, self.lookup, self.connect_timeout),
                executor: self.executor,
                poll_interval: self.poll_interval,
                feed: std::sync::OnceLock::new(),
            }),
        }
    }
}

struct Inner {
    storage: Arc<dyn Storage>,
    /// The SQLite file, for the sync methods.
    sqlite: Option<Store>,
    resolver: Resolver,
    executor: Option<Arc<ExecutorFactory>>,
    poll_interval: Duration,
    feed: std::sync::OnceLock<ChangeFeed>,
}

/// A tool catalogue over one SQLite file or a PostgreSQL database ([`Storage`]). Cheap to clone.
///
/// See the [crate documentation](crate) for the table, the resolution order and the error codes.
#[derive(Clone)]
pub struct Catalog {
    inner: Arc<Inner>,
}

impl fmt::Debug for Catalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Catalog").field("storage", &self.inner.storage.describe()).finish_non_exhaustive()
    }
}

impl Catalog {
    /// A builder whose local rows resolve against the compiled tools of `registry`.
    pub fn builder(registry: &Registry) -> CatalogBuilder {
        Catalog::builder_with_lookup(RegistryLookup::new(registry))
    }

    /// A builder with another way to find compiled tools (e.g. an instrumented [`RegistryLookup`]).
    pub fn builder_with_lookup(lookup: impl ToolLookup) -> CatalogBuilder {
        CatalogBuilder {
            lookup: Arc::new(lookup),
            modules: Vec::new(),
            http_origins: Vec::new(),
            stdio_commands: Vec::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            poll_interval: DEFAULT_POLL_INTERVAL,
            executor: None,
        }
    }

    /// The SQLite file (`None` for another [`Storage`]).
    pub fn path(&self) -> Option<&Path> {
        self.inner.sqlite.as_ref().map(Store::path)
    }

    /// Where the rows are (`sqlite:tools.db`, `postgresql://127.0.0.1:5432/keel`), for messages and logs.
    pub fn describe(&self) -> String {
        self.inner.storage.describe()
    }

    /// The SQLite file, for the sync methods; `config_error` over another storage.
    fn sqlite(&self, method: &str) -> Result<&Store, CatalogError> {
        self.inner.sqlite.as_ref().ok_or_else(|| {
            CatalogError::config(format!(
                "Catalog::{method} blocks the calling thread and is for SQLite files; this catalogue is over {}: use \
                 Catalog::{method}_async",
                self.inner.storage.describe()
            ))
        })
    }

    /// Every row as stored, enabled or not, each with its `rowid` (or the `bad_row` error of a row whose columns
    /// could not be read).
    ///
    /// Blocks the calling thread (up to the [busy timeout](CatalogBuilder::busy_timeout) while another connection
    /// holds a lock); in async code, and over PostgreSQL, use [`Catalog::rows_async`].
    pub fn rows(&self) -> Result<Vec<StoredRow>, CatalogError> {
        self.sqlite("rows")?.run("reading the tools table", |c| sqlite::rows(c, None)).map(|(_, rows)| rows)
    }

    /// [`Catalog::rows`] without blocking a runtime worker, with the token of the state the rows were read from
    /// (one read transaction: the rows are that state exactly).
    pub async fn rows_async(&self) -> Result<Versioned<Vec<StoredRow>>, CatalogError> {
        self.inner.storage.rows(None).await
    }

    /// Runs every check of resolution that needs no connection (row data, kind, locator, allowlists, the compiled
    /// target and its contract, schemas): what [`Catalog::put`] runs before writing.
    pub fn check(&self, row: &ToolRow) -> Result<(), RowError> {
        self.inner.resolver.check(&row.reference(None), row)
    }

    /// Checks `row` (see [`Catalog::check`]) and stores it, replacing the row of the same name and tenant. A
    /// refused row changes nothing. Returns the row's `rowid`.
    ///
    /// One transaction: when another connection holds the write lock past the
    /// [busy timeout](CatalogBuilder::busy_timeout), `busy`, and nothing was written. Blocks the calling thread
    /// meanwhile; in async code, and over PostgreSQL, use [`Catalog::put_async`].
    pub fn put(&self, row: &ToolRow) -> Result<i64, CatalogError> {
        let store = self.sqlite("put")?;
        self.check(row)?;
        let (id, _) = store.run(writing(&row.name), |c| sqlite::put(c, row))?;
        Ok(id)
    }

    /// [`Catalog::put`] without blocking a runtime worker: the check runs here, the write in the storage (SQLite:
    /// on the runtime's blocking pool, the pauses while the file is busy being timers). Returns the row's id and
    /// the token of the state the write committed. A write that has started commits even if the future is dropped.
    pub async fn put_async(&self, row: &ToolRow) -> Result<Versioned<i64>, CatalogError> {
        self.check(row)?;
        self.inner.storage.put(row).await
    }

    /// Enables or disables the row `name` of `tenant` (`None`: the row every tenant sees). Takes effect in the next
    /// view. Returns whether the row exists. Blocks like [`Catalog::put`]; in async code use
    /// [`Catalog::set_enabled_async`].
    pub fn set_enabled(&self, name: &str, tenant: Option<&str>, enabled: bool) -> Result<bool, CatalogError> {
        let (found, _) =
            self.sqlite("set_enabled")?.run(writing(name), |c| sqlite::set_enabled(c, name, tenant, enabled))?;
        Ok(found)
    }

    /// [`Catalog::set_enabled`] without blocking a runtime worker; with the token of the state it committed.
    pub async fn set_enabled_async(
        &self,
        name: &str,
        tenant: Option<&str>,
        enabled: bool,
    ) -> Result<Versioned<bool>, CatalogError> {
        self.inner.storage.set_enabled(name, tenant, enabled).await
    }

    /// Deletes the row `name` of `tenant` (`None`: the row every tenant sees). Returns whether it existed. Blocks
    /// like [`Catalog::put`]; in async code use [`Catalog::remove_async`].
    pub fn remove(&self, name: &str, tenant: Option<&str>) -> Result<bool, CatalogError> {
        let (found, _) = self.sqlite("remove")?.run(removing(name), |c| sqlite::remove(c, name, tenant))?;
        Ok(found)
    }

    /// [`Catalog::remove`] without blocking a runtime worker; with the token of the state it committed.
    pub async fn remove_async(&self, name: &str, tenant: Option<&str>) -> Result<Versioned<bool>, CatalogError> {
        self.inner.storage.remove(name, tenant).await
    }

    /// Resolves one row (stored or not): the compiled tool of a local row, the forwarder of a remote one
    /// (connecting if needed). A row that is not stored is forgotten by the next view of its tenant.
    pub async fn resolve(&self, row: &ToolRow) -> Result<Resolved, RowError> {
        self.inner.resolver.resolve(&row.reference(None), row).await
    }

    /// A token that grows whenever the rows change, through this catalogue or another connection (another
    /// process, `sqlite3`, `psql`): cheap to poll before building a view. Blocks like [`Catalog::rows`]; in async
    /// code use [`Catalog::change_token_async`].
    pub fn change_token(&self) -> Result<ChangeToken, CatalogError> {
        let generation = self.sqlite("change_token")?.run("reading the change counter", sqlite::read_generation)?;
        Ok(ChangeToken::new(generation))
    }

    /// [`Catalog::change_token`] without blocking a runtime worker.
    pub async fn change_token_async(&self) -> Result<ChangeToken, CatalogError> {
        self.inner.storage.change_token().await
    }

    /// The catalogue's changes as they happen: the newest [`ChangeToken`] and whether the store answers. PostgreSQL
    /// pushes them (`LISTEN`/`NOTIFY`, reconnecting with backoff and catching up by token after an outage); a
    /// SQLite file is polled every [`poll_interval`](CatalogBuilder::poll_interval). One feed per catalogue,
    /// started by the first call inside a Tokio runtime and shared by every clone; outside a runtime, a feed that
    /// reports [`StoreHealth::Degraded`](crate::StoreHealth::Degraded) with why, and never changes.
    pub fn changes(&self) -> ChangeFeed {
        if tokio::runtime::Handle::try_current().is_err() && self.inner.feed.get().is_none() {
            // Nothing can follow the store without a runtime: a feed that says so, and is not kept.
            return storage::stopped_feed(
                "Catalog::changes runs its listener on a Tokio runtime; call it inside one".to_owned(),
            );
        }
        self.inner
            .feed
            .get_or_init(|| {
                self.inner
                    .storage
                    .changes()
                    .unwrap_or_else(|| storage::polling_feed(self.inner.storage.clone(), self.inner.poll_interval))
            })
            .clone()
    }

    /// The tools `tenant` sees: its own rows and the rows of every tenant (a tenant's row overrides a row of the
    /// same name for every tenant, including when it is disabled), enabled, resolved. Rows are read fresh from the
    /// file, so an edit by any connection shows in the next view. A row that does not resolve is left out and
    /// reported in [`CatalogView::problems`]; it never fails the view.
    pub async fn view_for(&self, tenant: &str) -> Result<CatalogView, CatalogError> {
        if tenant.is_empty() {
            return Err(CatalogError::config("the tenant is empty; use shared_view() for the rows every tenant sees"));
        }
        self.build_view(Some(tenant.to_owned())).await
    }

    /// The tools every tenant sees: the rows whose tenant is `NULL`, enabled, resolved.
    pub async fn shared_view(&self) -> Result<CatalogView, CatalogError> {
        self.build_view(None).await
    }

    async fn build_view(&self, tenant: Option<String>) -> Result<CatalogView, CatalogError> {
        let Versioned { value: mut stored, token } = self.inner.storage.rows(tenant.as_deref()).await?;
        if tenant.is_none() {
            stored.retain(|r| r.row.as_ref().map_or_else(|e| e.row().tenant.is_none(), |r| r.tenant.is_none()));
        }

        // The most specific row of each name decides: the tenant's over every tenant's.
        let mut problems = Vec::new();
        // A row that could not be read still claims its name in its scope (when its name could be read), so a
        // tenant's broken override does not fall back to the shared row.
        let mut chosen: BTreeMap<String, Claim> = BTreeMap::new();
        let mut claim = |name: String, tenant: Option<String>, row: Option<(i64, ToolRow)>| {
            let replace = match chosen.get(&name) {
                None => true,
                Some((current, _)) => current.is_none() && tenant.is_some(),
            };
            if replace {
                chosen.insert(name, (tenant, row));
            }
        };
        let mut live_rows: HashSet<RowKey> = HashSet::new();
        let mut live: Vec<ToolRow> = Vec::new();
        for StoredRow { rowid, row } in stored {
            match row {
                Err(e) => {
                    if !e.row().name.is_empty() {
                        claim(e.row().name.clone(), e.row().tenant.clone(), None);
                    }
                    problems.push(e);
                }
                Ok(row) => {
                    if row.enabled {
                        live_rows.insert((row.tenant.clone(), row.name.clone()));
                        live.push(row.clone());
                    }
                    claim(row.name.clone(), row.tenant.clone(), Some((rowid, row)));
                }
            }
        }
        let mut tools = Vec::new();
        let mut resolved = Vec::new();
        for (rowid, row) in chosen.into_values().filter_map(|(_, row)| row) {
            if !row.enabled {
                continue;
            }
            match self.inner.resolver.resolve(&row.reference(Some(rowid)), &row).await {
                Ok(r) => {
                    tools.push(r.definition().clone());
                    resolved.push((rowid, r));
                }
                Err(e) => problems.push(e),
            }
        }
        let scopes: Vec<Option<String>> = match &tenant {
            Some(t) => vec![None, Some(t.clone())],
            None => vec![None],
        };
        self.inner.resolver.prune(&scopes, &live_rows, &live).await;
        problems.sort_by_key(|e| e.row().rowid);
        Ok(CatalogView {
            tenant,
            token,
            view: ToolView::new(tools),
            resolved,
            problems,
            executor: self.inner.executor.clone(),
        })
    }
}

/// The row that decides a name in a view: its scope, and the row (`None` when it could not be read).
type Claim = (Option<String>, Option<(i64, ToolRow)>);

/// One tenant's tools, built from the catalogue's rows: the model-visible list and the executor's allowlist in one
/// [`ToolView`], plus the rows that were left out and why.
#[derive(Clone)]
pub struct CatalogView {
    tenant: Option<String>,
    token: ChangeToken,
    view: ToolView,
    resolved: Vec<(i64, Resolved)>,
    problems: Vec<RowError>,
    executor: Option<Arc<ExecutorFactory>>,
}

impl fmt::Debug for CatalogView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CatalogView")
            .field("tenant", &self.tenant)
            .field("tools", &self.view.names().collect::<Vec<_>>())
            .field("problems", &self.problems.iter().map(RowError::code).collect::<Vec<_>>())
            .finish()
    }
}

impl CatalogView {
    /// The tenant (`None` for [`Catalog::shared_view`]).
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// The token of the state the view's rows were read from (in one read transaction: the view is built from
    /// exactly that state).
    pub fn change_token(&self) -> ChangeToken {
        self.token
    }

    /// The view: what the model sees ([`ToolView::schemas`]) and what the executor allows ([`ToolView::get`]).
    pub fn view(&self) -> &ToolView {
        &self.view
    }

    /// The view, by value.
    pub fn into_view(self) -> ToolView {
        self.view
    }

    /// The rows that were left out, with why, in `rowid` order.
    pub fn problems(&self) -> &[RowError] {
        &self.problems
    }

    /// Each row in the view, by `rowid`, with what it resolved to.
    pub fn resolved(&self) -> &[(i64, Resolved)] {
        &self.resolved
    }

    /// What the row named `name` resolved to, if it is in the view.
    pub fn resolution(&self, name: &str) -> Option<&Resolved> {
        self.resolved.iter().map(|(_, r)| r).find(|r| r.definition().name() == name)
    }

    /// An executor over the view, built as the catalogue was configured ([`CatalogBuilder::executor`]).
    pub fn executor(&self) -> Result<Executor, ExecutorError> {
        match &self.executor {
            Some(build) => build(self.view.clone()),
            None => Executor::new(self.view.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(label: &str) -> TempDir {
            let dir = std::env::temp_dir().join(format!("keel-catalog-errors-{label}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("temp dir");
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const COMMAND: &str = "/nonexistent/keel-catalog-test-mcp-server";

    fn catalog(dir: &TempDir) -> Catalog {
        let registry = Registry::builder().without_inventory().build().unwrap();
        Catalog::builder(&registry)
            .allow_stdio_command(COMMAND)
            .connect_timeout(Duration::from_secs(5))
            .open(dir.0.join("tools.db"))
            .unwrap()
    }

    fn remote(name: &str) -> ToolRow {
        ToolRow::remote(name, "d", json!({"type": "object", "properties": {}}), format!("stdio:{COMMAND}"), "search")
    }

    #[cfg(feature = "mcp")]
    #[tokio::test(flavor = "multi_thread")]
    async fn an_endpoint_that_cannot_start_keeps_the_connect_error() {
        let dir = TempDir::new("unreachable");
        let c = catalog(&dir);
        c.put_async(&remote("search")).await.unwrap();
        let view = c.shared_view().await.unwrap();
        let [e] = view.problems() else { panic!("{view:?}") };
        assert_eq!(e.code(), "endpoint_unreachable", "{e}");
        let connect = e
            .source()
            .and_then(|s| s.downcast_ref::<keel_tools_mcp::client::ConnectError>())
            .expect("the ConnectError");
        let io = connect.source().and_then(|s| s.downcast_ref::<std::io::Error>()).expect("the io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert!(e.to_string().contains(&format!("failed ({connect})")), "{e}");
    }

    #[cfg(not(feature = "mcp"))]
    #[tokio::test(flavor = "multi_thread")]
    async fn without_mcp_a_remote_row_is_stored_and_left_out_as_unreachable() {
        let dir = TempDir::new("no-mcp");
        let c = catalog(&dir);
        c.put_async(&remote("search")).await.expect("checked and stored as with `mcp`");
        // Still checked before it is written.
        assert_eq!(c.put_async(&remote("Not A Name")).await.unwrap_err().code(), "bad_row");
        let view = c.shared_view().await.unwrap();
        let [e] = view.problems() else { panic!("{view:?}") };
        assert_eq!(e.code(), "endpoint_unreachable", "{e}");
        assert!(e.to_string().contains("no MCP client: turn on its `mcp` feature"), "{e}");
        assert!(view.resolved().is_empty());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_refused_row_is_the_source_with_its_own() {
        let dir = TempDir::new("refused");
        let c = catalog(&dir);
        let e = c.put_async(&remote("Not A Name")).await.unwrap_err();
        assert_eq!(e.code(), "bad_row", "{e}");
        let row = e.source().and_then(|s| s.downcast_ref::<RowError>()).expect("the RowError");
        assert!(matches!(row, RowError::BadRow { column: "name", .. }), "{row:?}");
        assert!(row.source().is_some_and(|s| s.is::<keel_tools_core::name::NameError>()), "{row:?}");
        // Found by the catalogue: no source.
        let e = c.view_for("").await.unwrap_err();
        assert_eq!(e.code(), "config_error");
        assert!(e.source().is_none());
    }

    #[cfg(feature = "mcp")]
    #[tokio::test(flavor = "multi_thread")]
    async fn a_server_that_cannot_be_built_keeps_the_servers_error() {
        use keel_tools_mcp::McpServer;
        use keel_tools_mcp::server::McpServerError;

        let dir = TempDir::new("serve");
        let c = catalog(&dir);
        let short_key = |e: Executor| McpServer::builder(e).request_state_key("k", [7u8; 8]).build();
        let e = crate::CatalogServer::new(&c, None, short_key).await.expect_err("a short key is refused");
        assert_eq!(e.code(), "serve_error", "{e}");
        let server = e.source().and_then(|s| s.downcast_ref::<McpServerError>()).expect("the McpServerError");
        assert_eq!(e.to_string(), format!("serve_error: {server}"));
    }
}
