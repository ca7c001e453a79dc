//! The tool catalogue (`keel-tools-catalog`): rows in a real SQLite file resolved to compiled tools or MCP forwarders.
//!
//! One test per error code; the instrumented lookup that bad rows never reach; edits by another SQLite connection
//! showing in the next view; disabled rows neither listed nor callable; tenant scopes; a remote row called over a
//! real MCP connection to a server started here (loopback only), with the same forwarder instance across
//! resolutions; `notifications/tools/list_changed` received by real rmcp clients.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_tools_catalog::{
    Catalog, CatalogBuilder, CatalogServer, LocalTarget, Lookup, RegistryLookup, Resolved, RowError, ToolLookup,
    ToolRow,
};
use keel_tools_core::definition::Effect;
use keel_tools_core::{Executor, Registry, ToolCall};
use keel_tools_mcp::McpServer;
use keel_tools_mcp::rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
use keel_tools_mcp::rmcp::service::ClientServiceExt;
use keel_tools_mcp::rmcp::{ClientLifecycleMode, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use keel_tests::mcp::{ListWatcher, next_change};
use keel_tests::pg::PgDatabase;

// The incident desk's tools (`examples::desk`), outside the catalogues' allowed modules.
keel_tools_core::link_tools!(examples);

keel_tools_core::link_tools!(examples);

// ---- Helpers ----

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("keel-catalog-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
    fn db(&self) -> PathBuf {
        self.0.join("tools.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A string as an SQL literal (both dialects: single quotes, doubled inside).
fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The store under test: a SQLite file, or a fresh database in the PostgreSQL cluster of `KEEL_TEST_POSTGRES`.
enum Db {
    Sqlite(TempDir),
    Postgres(PgDatabase),
}

impl Db {
    fn sqlite(label: &str) -> Db {
        Db::Sqlite(TempDir::new(label))
    }

    /// `None` when no cluster is configured and none is required (a skip, recorded: `keel_tests::peers`).
    async fn postgres(label: &str) -> Option<Db> {
        PgDatabase::create(label, prerequisites_required()).await.map(Db::Postgres)
    }

    fn is_sqlite(&self) -> bool {
        matches!(self, Db::Sqlite(_))
    }

    async fn open(&self, builder: CatalogBuilder) -> Catalog {
        match self {
            Db::Sqlite(dir) => builder.open(dir.db()).expect("open"),
            Db::Postgres(pg) => builder.connect_postgres(&pg.conninfo).await.expect("connect"),
        }
    }

    async fn catalog(&self) -> Catalog {
        self.open(Catalog::builder(&registry()).allow_module("examples::status")).await
    }

    /// Runs `sql` over a connection of its own (another writer: `sqlite3`, `psql`).
    async fn exec(&self, sql: &str) {
        match self {
            Db::Sqlite(dir) => rusqlite::Connection::open(dir.db()).expect("connect").execute_batch(sql).expect(sql),
            Db::Postgres(pg) => pg.exec(sql).await,
        }
    }

    /// A row written straight into the table, past the catalogue's checks (the write side that lacked validation).
    async fn insert_raw(&self, name: &str, kind: &str, locator: &str, input_schema: &str, extra: &str) {
        self.exec(&format!(
            "INSERT INTO tools (name, description, input_schema, kind, locator, version, effect, extra) \
             VALUES ({}, 'A row.', {}, {}, {}, '1.0', 'read', {})",
            lit(name),
            lit(input_schema),
            lit(kind),
            lit(locator),
            lit(extra)
        ))
        .await;
    }
}

/// Runs one test against a SQLite file (`NAME::sqlite`) and a PostgreSQL database (`NAME::postgres`).
macro_rules! both {
    ($flavor:meta, $name:ident) => {
        mod $name {
            use super::*;
            #[$flavor]
            async fn sqlite() {
                super::$name(Db::sqlite(stringify!($name))).await;
            }
            #[$flavor]
            async fn postgres() {
                if let Some(db) = Db::postgres(stringify!($name)).await {
                    super::$name(db).await;
                }
            }
        }
    };
}

fn registry() -> Registry {
    Registry::from_inventory().expect("registry")
}

fn catalog(db: &Path) -> Catalog {
    Catalog::builder(&registry()).allow_module("examples::status").open(db).expect("open")
}

/// The compiled schema of a tool (what a row copies to keep the contract).
fn compiled_schema(name: &str) -> Value {
    registry().get(name).expect("linked").input_schema().clone()
}

pub(super) fn status_row() -> ToolRow {
    let r = registry();
    let d = r.get("get_service_status").unwrap();
    ToolRow::local(
        "get_service_status",
        d.description(),
        d.input_schema().clone(),
        "examples::status::get_service_status",
    )
}

/// A row written straight into the file, past the catalogue's checks (the write side that lacked validation).
fn insert_raw_file(db: &Path, name: &str, kind: &str, locator: &str, input_schema: &str, extra: &str) {
    let conn = rusqlite::Connection::open(db).expect("second connection");
    conn.execute(
        "INSERT INTO tools (name, description, input_schema, kind, locator, version, effect, extra) \
         VALUES (?1, 'A row.', ?2, ?3, ?4, '1.0', 'read', ?5)",
        rusqlite::params![name, input_schema, kind, locator, extra],
    )
    .expect("insert");
}

const EMPTY_OBJECT: &str = r#"{"type": "object", "properties": {}}"#;

/// The problem reported for row `name` in the shared view.
async fn problem(catalog: &Catalog, name: &str) -> RowError {
    let view = catalog.shared_view().await.expect("view");
    assert!(!view.view().contains(name), "a bad row is never in the view");
    view.problems()
        .iter()
        .find(|e| e.row().name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no problem for {name}: {view:?}"))
}

async fn bounded<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(Duration::from_secs(60), f).await.expect("test timed out");
}

/// An MCP server hosting `search_incidents` on a loopback port: `(origin, url, shutdown)`.
async fn start_remote() -> (String, String, CancellationToken) {
    let view = registry().view().names(["search_incidents", "get_service_status"]).build().expect("view");
    let server = McpServer::new(Executor::new(view).expect("executor")).expect("server");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move { server.serve_http(listener, "/mcp", stop).await });
    (format!("http://{addr}"), format!("http://{addr}/mcp"), shutdown)
}

fn search_row(url: &str) -> ToolRow {
    ToolRow::remote(
        "incident.search",
        "Search recent incidents of one service.",
        json!({
            "type": "object",
            "properties": {"service": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 5}},
            "required": ["service"]
        }),
        url,
        "search_incidents",
    )
    .effect(Effect::Read)
    .output_schema(registry().get("search_incidents").unwrap().output_schema().unwrap().clone())
}

// ---- One test per error code ----

both!(tokio::test, bad_row_a_column_of_the_wrong_shape);
async fn bad_row_a_column_of_the_wrong_shape(db: Db) {
    let c = db.catalog().await;
    db.insert_raw("broken_json", "local", "get_service_status", "{not json", "{}").await;
    db.insert_raw("empty_schema", "remote", "http://127.0.0.1:1/mcp", "{}", r#"{"origin_name": "x"}"#).await;
    db.insert_raw("Bad-Name", "local", "get_service_status", EMPTY_OBJECT, "{}").await;
    db.insert_raw("extra_list", "local", "get_service_status", EMPTY_OBJECT, "[1]").await;
    db.exec(&format!("INSERT INTO tools (name, description, input_schema, kind, locator, enabled) VALUES ('flag', 'd', {}, 'local', 'x', 2)", lit(EMPTY_OBJECT))).await;
    db.exec(&format!("INSERT INTO tools (name, description, input_schema, kind, locator, effect) VALUES ('fx', 'd', {}, 'local', 'x', 'harmless')", lit(EMPTY_OBJECT))).await;
    let mut cases = vec![
        ("broken_json", "input_schema", "not valid JSON"),
        ("empty_schema", "input_schema", "will not call"),
        ("Bad-Name", "name", ""),
        ("extra_list", "extra", "not a JSON object"),
        ("flag", "enabled", "0 or 1"),
        ("fx", "effect", "read, write or destructive"),
    ];
    if db.is_sqlite() {
        // SQLite stores what it is given; PostgreSQL's typed column refuses text in `enabled` at the write.
        db.exec(&format!("INSERT INTO tools (name, description, input_schema, kind, locator, enabled) VALUES ('flag_text', 'd', {}, 'local', 'x', 'yes')", lit(EMPTY_OBJECT))).await;
        cases.push(("flag_text", "enabled", "0 or 1"));
    }

    for (name, column, says) in cases {
        let e = problem(&c, name).await;
        assert_eq!(e.code(), "bad_row", "{e}");
        assert!(matches!(&e, RowError::BadRow { column: col, .. } if *col == column), "{e}");
        let text = e.to_string();
        assert!(text.contains(&format!("{name:?}")) && text.contains(says), "{text}");
    }
}

both!(tokio::test, kind_unknown_code_is_never_evaluated);
async fn kind_unknown_code_is_never_evaluated(db: Db) {
    let c = db.catalog().await;
    db.insert_raw("evil", "python", "__import__('os').system('touch /tmp/pwned')", EMPTY_OBJECT, "{}").await;
    db.insert_raw("shouting", "LOCAL", "get_service_status", EMPTY_OBJECT, "{}").await;
    for name in ["evil", "shouting"] {
        let e = problem(&c, name).await;
        assert_eq!(e.code(), "kind_unknown", "{e}");
        assert!(e.to_string().contains("never evaluates code"), "{e}");
    }
}

both!(tokio::test, bad_locator_malformed_recipes);
async fn bad_locator_malformed_recipes(db: Db) {
    let c = db.catalog().await;
    let cases = [
        ("python_style", "local", "examples.status:get_service_status", "{}"),
        ("single_colon", "local", "examples::status:get_service_status", "{}"),
        ("with_call", "local", "examples::status::get_service_status()", "{}"),
        ("spaced", "local", "examples::status:: get_service_status", "{}"),
        ("empty", "local", "", "{}"),
        ("remote_ftp", "remote", "ftp://127.0.0.1/mcp", r#"{"origin_name": "search_incidents"}"#),
        ("remote_creds", "remote", "http://admin:pw@127.0.0.1:9/mcp", r#"{"origin_name": "search_incidents"}"#),
        ("remote_no_origin", "remote", "http://127.0.0.1:9/mcp", "{}"),
        ("remote_bad_origin", "remote", "http://127.0.0.1:9/mcp", r#"{"origin_name": "search incidents; rm"}"#),
    ];
    for (name, kind, locator, extra) in cases {
        db.insert_raw(name, kind, locator, EMPTY_OBJECT, extra).await;
    }
    for (name, ..) in cases {
        let e = problem(&c, name).await;
        assert_eq!(e.code(), "bad_locator", "{name}: {e}");
        assert!(e.to_string().contains("lacked validation"), "{e}");
    }
}

both!(tokio::test, module_not_allowed_by_path_and_by_name);
async fn module_not_allowed_by_path_and_by_name(db: Db) {
    let c = db.catalog().await;
    // A path outside the allowlist; a tool name whose module (examples::desk) is outside it too; a prefix that
    // matches only part of a segment.
    db.insert_raw("path_join", "local", "std::path::Path::join", EMPTY_OBJECT, "{}").await;
    db.insert_raw("desk_tool", "local", "lookup_incident", EMPTY_OBJECT, "{}").await;
    db.insert_raw("look_alike", "local", "examples::statuses::get_service_status", EMPTY_OBJECT, "{}").await;
    for (name, module) in
        [("path_join", "std::path::Path"), ("desk_tool", "examples::desk"), ("look_alike", "examples::statuses")]
    {
        let e = problem(&c, name).await;
        assert_eq!(e.code(), "module_not_allowed", "{e}");
        assert!(e.to_string().contains(module) && e.to_string().contains("examples::status"), "{e}");
    }
    // Nothing is allowed by default.
    let strict = db.open(Catalog::builder(&registry())).await;
    assert_eq!(strict.check(&status_row()).unwrap_err().code(), "module_not_allowed");
}

both!(tokio::test, target_missing_says_to_compare_code_versions);
async fn target_missing_says_to_compare_code_versions(db: Db) {
    let c = db.catalog().await;
    db.insert_raw("gone_fn", "local", "examples::status::no_such_function", EMPTY_OBJECT, "{}").await;
    db.insert_raw("gone_name", "local", "renamed_long_ago", EMPTY_OBJECT, "{}").await;
    for name in ["gone_fn", "gone_name"] {
        let e = problem(&c, name).await;
        assert_eq!(e.code(), "target_missing", "{e}");
        assert!(e.to_string().contains("compare the deployed code version with the catalogue"), "{e}");
        assert!(e.to_string().contains(&format!("{name:?}")), "names the row: {e}");
    }
}

both!(tokio::test, not_callable_a_module_not_a_tool_fn);
async fn not_callable_a_module_not_a_tool_fn(db: Db) {
    let c = db.catalog().await;
    db.insert_raw("the_module", "local", "examples::status", EMPTY_OBJECT, "{}").await;
    let e = problem(&c, "the_module").await;
    assert_eq!(e.code(), "not_callable", "{e}");
    let RowError::NotCallable { holds, .. } = &e else { panic!("{e:?}") };
    assert_eq!(holds, &["get_service_status", "search_incidents"]);
    assert!(e.to_string().contains("holds get_service_status, search_incidents"), "{e}");
}

both!(tokio::test, version_mismatch_is_drift);
async fn version_mismatch_is_drift(db: Db) {
    let c = db.catalog().await;
    for v in ["2.0", "1.1", "0.9"] {
        let e = c.check(&status_row().version(v)).unwrap_err();
        assert_eq!(e.code(), "version_mismatch", "{v}: {e}");
        assert!(e.to_string().contains("compare the deployed code version"), "{e}");
    }
    c.check(&status_row().version("1.0")).expect("same version");
}

both!(tokio::test, effect_weakens_only_stricter_is_allowed);
async fn effect_weakens_only_stricter_is_allowed(db: Db) {
    let c =
        db.open(Catalog::builder(&registry()).allow_module("examples::desk").allow_module("examples::status")).await;
    let d = registry();
    let ticket = d.get("create_ticket").unwrap();
    let row = ToolRow::local("create_ticket", ticket.description(), ticket.input_schema().clone(), "create_ticket");
    let e = c.check(&row.clone().effect(Effect::Read)).unwrap_err();
    assert_eq!(e.code(), "effect_weakens", "{e}");
    c.check(&row.clone().effect(Effect::Write)).expect("same effect");

    // Stricter is fine: a read tool catalogued as write needs an approval.
    c.put_async(&status_row().effect(Effect::Write)).await.expect("stricter");
    let view = c.shared_view().await.unwrap();
    let r = view
        .executor()
        .unwrap()
        .call(ToolCall::new("c1", "get_service_status", json!({"service_name": "auth-api"})))
        .await;
    assert_eq!(r.code(), Some("approval_required"));
}

both!(tokio::test, schema_widens_is_refused_and_narrowing_applies);
async fn schema_widens_is_refused_and_narrowing_applies(db: Db) {
    let reg = registry();
    let c = db.open(Catalog::builder(&reg).allow_module("examples::status")).await;
    let base = compiled_schema("get_service_status");

    let mut optional = base.clone();
    optional["required"] = json!([]);
    let mut extra_prop = base.clone();
    extra_prop["properties"]["region"] = json!({"type": "string"});
    let mut nullable = base.clone();
    nullable["properties"]["service_name"]["type"] = json!(["string", "null"]);
    let mut opened = base.clone();
    opened["additionalProperties"] = json!(true);
    for (label, schema, pointer) in [
        ("optional", optional, ""),
        ("extra property", extra_prop, "/properties/region"),
        ("nullable", nullable, "/properties/service_name"),
        ("opened", opened, ""),
    ] {
        let row = ToolRow::local("get_service_status", "Status.", schema, "examples::status::get_service_status");
        let e = c.put_async(&row).await.unwrap_err();
        assert_eq!(e.code(), "schema_widens", "{label}: {e}");
        let keel_tools_catalog::CatalogError::Row(e) = e else { unreachable!() };
        let RowError::SchemaWidens { pointer: p, .. } = &*e else { panic!("{e:?}") };
        assert_eq!(p, pointer, "{label}: {e}");
        assert!(e.to_string().contains("\"get_service_status\"") && e.to_string().contains("never widen"), "{e}");
    }
    assert!(c.rows_async().await.unwrap().value.is_empty(), "a refused row changes nothing");

    // A narrower row: only two services, described for this tenant. The model sees the row's schema and the
    // executor validates against it; the handler is the compiled one.
    let mut narrow = base.clone();
    narrow["properties"]["service_name"]["enum"] = json!(["auth-api", "payments"]);
    let row = ToolRow::local(
        "service.status",
        "Status of auth-api or payments.",
        narrow,
        "examples::status::get_service_status",
    );
    c.put_async(&row).await.expect("narrowing is allowed");
    let view = c.shared_view().await.unwrap();
    let Some(Resolved::Local { target, definition }) = view.resolution("service.status") else { panic!("{view:?}") };
    assert!(Arc::ptr_eq(target, reg.get("get_service_status").unwrap()), "the handler's definition is the registry's");
    assert!(!Arc::ptr_eq(target, definition), "a narrowed row is served through a derived definition");
    assert_eq!(definition.input_schema()["properties"]["service_name"]["enum"], json!(["auth-api", "payments"]));
    assert_eq!(definition.description(), "Status of auth-api or payments.");
    let ex = view.executor().unwrap();
    let ok = ex.call(ToolCall::new("c1", "service.status", json!({"service_name": "payments"}))).await;
    assert_eq!(ok.data().unwrap()["owner"], "payments-team", "{ok:?}");
    let refused = ex.call(ToolCall::new("c2", "service.status", json!({"service_name": "billing"}))).await;
    assert_eq!((refused.code(), refused.executed), (Some("invalid_arguments"), false));
}

both!(tokio::test, endpoint_not_allowed_http_and_stdio);
async fn endpoint_not_allowed_http_and_stdio(db: Db) {
    let c = db
        .open(
            Catalog::builder(&registry())
                .allow_http_origin("http://127.0.0.1:8931")
                .allow_stdio_command("keel-mcp-test-server --stdio"),
        )
        .await;
    let row = |locator: &str| {
        ToolRow::remote("r.t", "A remote tool.", json!({"type": "object", "properties": {}}), locator, "t")
    };
    for locator in [
        "http://127.0.0.1:8932/mcp",
        "https://127.0.0.1:8931/mcp",
        "http://localhost:8931/mcp",
        "stdio:sh -c id",
        "stdio:keel-mcp-test-server --stdio --extra",
    ] {
        let e = c.check(&row(locator)).unwrap_err();
        assert_eq!(e.code(), "endpoint_not_allowed", "{locator}: {e}");
    }
    c.check(&row("http://127.0.0.1:8931/mcp")).expect("allowed origin");
    c.check(&row("stdio:keel-mcp-test-server  --stdio")).expect("allowed command");
}

both!(tokio::test, endpoint_unreachable_leaves_the_row_out);
async fn endpoint_unreachable_leaves_the_row_out(db: Db) {
    bounded(async {
        // A loopback port nothing listens on.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let c = db
            .open(
                Catalog::builder(&registry())
                    .allow_module("examples::status")
                    .allow_http_origin(format!("http://127.0.0.1:{port}"))
                    .connect_timeout(Duration::from_secs(5)),
            )
            .await;
        c.put_async(&status_row()).await.unwrap();
        c.put_async(&search_row(&format!("http://127.0.0.1:{port}/mcp"))).await.unwrap();
        let view = c.shared_view().await.unwrap();
        assert_eq!(view.view().names().collect::<Vec<_>>(), ["get_service_status"]);
        let [e] = view.problems() else { panic!("{view:?}") };
        assert_eq!(e.code(), "endpoint_unreachable", "{e}");
        assert!(e.to_string().contains("\"incident.search\""), "{e}");
    })
    .await;
}

// ---- Bad rows never reach the lookup ----

/// Records every target looked up.
struct CountingLookup {
    inner: RegistryLookup,
    seen: Arc<Mutex<Vec<LocalTarget>>>,
}

impl ToolLookup for CountingLookup {
    fn lookup(&self, target: &LocalTarget) -> Lookup {
        self.seen.lock().unwrap().push(target.clone());
        self.inner.lookup(target)
    }
}

both!(tokio::test, bad_rows_never_reach_the_lookup);
async fn bad_rows_never_reach_the_lookup(db: Db) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let lookup = CountingLookup { inner: RegistryLookup::new(&registry()), seen: seen.clone() };
    let c = db.open(Catalog::builder_with_lookup(lookup).allow_module("examples::status")).await;
    db.insert_raw("out_of_bounds", "local", "std::process::Command::new", EMPTY_OBJECT, "{}").await;
    db.insert_raw("out_of_bounds_2", "local", "std::process::exit", EMPTY_OBJECT, "{}").await;
    db.insert_raw("malformed", "local", "examples.status:get_service_status", EMPTY_OBJECT, "{}").await;
    db.insert_raw("code", "exec", "examples::status::get_service_status", EMPTY_OBJECT, "{}").await;
    db.insert_raw("broken", "local", "examples::status::get_service_status", "{", "{}").await;
    db.insert_raw("remote_elsewhere", "remote", "http://127.0.0.1:9/mcp", EMPTY_OBJECT, r#"{"origin_name": "x"}"#)
        .await;

    let view = c.shared_view().await.unwrap();
    let codes: Vec<&str> = view.problems().iter().map(RowError::code).collect();
    assert_eq!(
        codes,
        ["module_not_allowed", "module_not_allowed", "bad_locator", "kind_unknown", "bad_row", "endpoint_not_allowed"]
    );
    assert!(seen.lock().unwrap().is_empty(), "bad rows reached the lookup: {:?}", seen.lock().unwrap());
    assert!(view.view().is_empty());

    // The instrument works: a good row is looked up, exactly once per resolution.
    db.insert_raw(
        "fine",
        "local",
        "examples::status::get_service_status",
        &compiled_schema("get_service_status").to_string(),
        "{}",
    )
    .await;
    let view = c.shared_view().await.unwrap();
    assert_eq!(view.view().names().collect::<Vec<_>>(), ["fine"]);
    assert_eq!(
        seen.lock().unwrap().iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["examples::status::get_service_status"]
    );
}

// ---- Local rows are the registry's own definitions ----

both!(tokio::test, a_local_row_resolves_to_the_registrys_definition);
async fn a_local_row_resolves_to_the_registrys_definition(db: Db) {
    let registry = registry();
    let c = db.open(Catalog::builder(&registry).allow_module("examples::status")).await;
    c.put_async(&status_row()).await.unwrap();
    let by_name = ToolRow { locator: "get_service_status".into(), ..status_row() };
    let compiled = registry.get("get_service_status").unwrap();
    for row in [status_row(), by_name] {
        let Resolved::Local { target, definition } = c.resolve(&row).await.unwrap() else { panic!("local") };
        assert!(Arc::ptr_eq(&target, compiled), "the same definition, not a copy");
        assert!(Arc::ptr_eq(&definition, compiled), "an unchanged contract is served as is");
    }
    let view = c.shared_view().await.unwrap();
    assert!(Arc::ptr_eq(view.view().get("get_service_status").unwrap(), compiled));
}

// The demo's card tools take a `State<CardStore>` (this binary's whole inventory is read by `agent_llama`, which
// gives the executor that store: a state tool of this file's own would fail that executor).
both!(tokio::test, a_row_serves_a_tool_that_takes_state_from_the_views_executor);
async fn a_row_serves_a_tool_that_takes_state_from_the_views_executor(db: Db) {
    let registry = registry();
    let d = registry.get("read_task_cards").expect("linked");
    let row = ToolRow::local(
        "read_task_cards",
        d.description(),
        d.input_schema().clone(),
        "examples::cards::read_task_cards",
    );

    // The state is not the row's to give: the row resolves, and the view's executor names what it lacks.
    let bare = db.open(Catalog::builder(&registry).allow_module("examples::cards")).await;
    bare.put_async(&row).await.expect("a tool that takes state is a good row");
    let view = bare.shared_view().await.unwrap();
    assert!(view.problems().is_empty(), "{:?}", view.problems());
    let e = view.executor().expect_err("no state given");
    assert_eq!(e.problems().len(), 1, "{e}");
    assert_eq!((e.problems()[0].code(), e.problems()[0].tool()), ("missing_state", "read_task_cards"));

    // The executor the catalogue is configured with holds it, for every view it builds.
    let store = Arc::new(examples::cards::store(true));
    let cards = serde_json::to_value(&store.cards).unwrap();
    let c = db
        .open(
            Catalog::builder(&registry)
                .allow_module("examples::cards")
                .executor(move |view| Executor::builder(view).state_arc(store.clone()).build()),
        )
        .await;
    for id in ["c1", "c2"] {
        let ex = c.shared_view().await.unwrap().executor().expect("the state is there");
        let r = ex.call(ToolCall::new(id, "read_task_cards", json!({}))).await;
        assert_eq!(r.data(), Some(&cards), "{r:?}");
    }
}

// ---- Edits, disabled rows, tenants ----

both!(tokio::test, editing_the_file_changes_the_next_view);
async fn editing_the_file_changes_the_next_view(db: Db) {
    let c = db.catalog().await;
    c.put_async(&status_row()).await.unwrap();
    let before = c.shared_view().await.unwrap();
    assert_eq!(before.view().names().collect::<Vec<_>>(), ["get_service_status"]);

    let token = c.change_token_async().await.unwrap();
    db.exec("UPDATE tools SET description = 'Edited in the file.' WHERE name = 'get_service_status'").await;
    assert_ne!(c.change_token_async().await.unwrap(), token, "another connection's commit changes the token");
    let after = c.shared_view().await.unwrap();
    let d = after.view().get("get_service_status").unwrap();
    assert_eq!(d.description(), "Edited in the file.");
    assert_eq!(
        after.view().ollama_schemas()[0]["function"]["description"],
        "Edited in the file.\n\nArguments: Which service to report on."
    );
    // The view taken before is a snapshot: it keeps what it had.
    assert_ne!(before.view().get("get_service_status").unwrap().description(), "Edited in the file.");

    let schema = compiled_schema("search_incidents").to_string();
    db.exec(&format!(
        "INSERT INTO tools (name, description, input_schema, kind, locator, effect) \
         VALUES ('incidents', 'Search incidents.', {}, 'local', 'examples::status::search_incidents', 'read')",
        lit(&schema)
    ))
    .await;
    let added = c.shared_view().await.unwrap();
    assert_eq!(added.view().names().collect::<Vec<_>>(), ["get_service_status", "incidents"]);
    let r = added.executor().unwrap().call(ToolCall::new("c1", "incidents", json!({"service": "auth-api"}))).await;
    assert_eq!(r.data().unwrap()["incidents"][0]["incident_id"], "INC-001");
}

both!(tokio::test, a_disabled_row_is_neither_listed_nor_callable);
async fn a_disabled_row_is_neither_listed_nor_callable(db: Db) {
    let c = db.catalog().await;
    c.put_async(&status_row()).await.unwrap();
    let call = || ToolCall::new("c1", "get_service_status", json!({"service_name": "auth-api"}));
    let ex = c.shared_view().await.unwrap().executor().unwrap();
    assert!(ex.call(call()).await.is_ok());

    db.exec("UPDATE tools SET enabled = 0 WHERE name = 'get_service_status'").await;
    let view = c.shared_view().await.unwrap();
    assert!(view.view().is_empty() && view.problems().is_empty(), "{view:?}");
    assert!(view.view().ollama_schemas().is_empty());
    let r = view.executor().unwrap().call(call()).await;
    assert_eq!((r.code(), r.executed), (Some("unknown_tool"), false));

    assert!(c.set_enabled_async("get_service_status", None, true).await.unwrap().value);
    assert!(c.shared_view().await.unwrap().executor().unwrap().call(call()).await.is_ok());
    assert!(c.set_enabled_async("get_service_status", None, false).await.unwrap().value);
    let r = c.shared_view().await.unwrap().executor().unwrap().call(call()).await;
    assert_eq!(r.code(), Some("unknown_tool"));
    assert!(!c.set_enabled_async("no_such_row", None, true).await.unwrap().value);
}

both!(tokio::test, tenants_see_their_rows_and_the_shared_ones);
async fn tenants_see_their_rows_and_the_shared_ones(db: Db) {
    let c = db.catalog().await;
    let search = compiled_schema("search_incidents");
    c.put_async(&status_row()).await.unwrap();
    c.put_async(&ToolRow::local("incidents", "Search incidents.", search.clone(), "search_incidents").tenant("acme"))
        .await
        .unwrap();
    c.put_async(&status_row().tenant("globex").enabled(false)).await.unwrap();
    c.put_async(&ToolRow { description: "Acme's status tool.".into(), ..status_row().tenant("acme") }).await.unwrap();

    let names = |v: &keel_tools_catalog::CatalogView| v.view().names().map(str::to_owned).collect::<Vec<_>>();
    let acme = c.view_for("acme").await.unwrap();
    assert_eq!(names(&acme), ["get_service_status", "incidents"]);
    assert_eq!(acme.view().get("get_service_status").unwrap().description(), "Acme's status tool.");
    let globex = c.view_for("globex").await.unwrap();
    assert!(names(&globex).is_empty(), "globex's disabled row hides the shared one: {globex:?}");
    let initech = c.view_for("initech").await.unwrap();
    assert_eq!(names(&initech), ["get_service_status"]);
    assert_eq!(names(&c.shared_view().await.unwrap()), ["get_service_status"]);
    let r = initech.executor().unwrap().call(ToolCall::new("c1", "incidents", json!({"service": "payments"}))).await;
    assert_eq!(r.code(), Some("unknown_tool"), "another tenant's row is not callable");
    assert_eq!(c.view_for("").await.unwrap_err().code(), "config_error");

    // A tenant's override that cannot be read hides the shared row too, rather than falling back to it.
    db.exec(
        "INSERT INTO tools (name, description, input_schema, kind, locator, tenant) \
         VALUES ('get_service_status', 'Broken.', '{', 'local', 'get_service_status', 'umbrella')",
    )
    .await;
    let umbrella = c.view_for("umbrella").await.unwrap();
    assert!(names(&umbrella).is_empty(), "{umbrella:?}");
    assert_eq!(umbrella.problems().iter().map(RowError::code).collect::<Vec<_>>(), ["bad_row"]);
}

#[tokio::test]
async fn a_seed_shaped_table_is_migrated_on_open() {
    let dir = TempDir::new("migrate");
    {
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        conn.execute_batch(
            "CREATE TABLE tools (name TEXT, description TEXT, input_schema TEXT, kind TEXT, locator TEXT);",
        )
        .unwrap();
        conn.execute(
            "INSERT INTO tools VALUES ('get_service_status', 'Status.', ?1, 'local', 'examples::status::get_service_status')",
            [compiled_schema("get_service_status").to_string()],
        )
        .unwrap();
    }
    let c = catalog(&dir.db());
    let rows = c.rows().unwrap();
    let row = rows[0].row.as_ref().unwrap();
    assert_eq!(
        (row.version.as_str(), row.effect.as_str(), row.enabled, &row.tenant),
        ("1.0", "destructive", true, &None)
    );
    let view = c.shared_view().await.unwrap();
    // Adopted rows need an approval until someone sets their effect.
    assert_eq!(view.view().get("get_service_status").unwrap().effect(), Effect::Destructive);
    let version: i64 =
        rusqlite::Connection::open(dir.db()).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, keel_tools_catalog::SCHEMA_VERSION);
    drop(c);
    catalog(&dir.db()); // opening again is a no-op
}

// ---- Remote rows over a real MCP connection ----

both!(tokio::test(flavor = "multi_thread"), a_remote_row_forwards_over_mcp_with_one_forwarder_instance);
async fn a_remote_row_forwards_over_mcp_with_one_forwarder_instance(db: Db) {
    bounded(async {
        let (origin, url, shutdown) = start_remote().await;
        let c = db.open(Catalog::builder(&registry()).allow_http_origin(&origin)).await;
        c.put_async(&search_row(&url)).await.unwrap();

        let first = c.shared_view().await.unwrap();
        let second = c.shared_view().await.unwrap();
        let Some(Resolved::Remote { forwarder: f1, definition: d1 }) = first.resolution("incident.search") else {
            panic!("{first:?}")
        };
        let Some(Resolved::Remote { forwarder: f2, definition: d2 }) = second.resolution("incident.search") else {
            panic!("{second:?}")
        };
        assert!(Arc::ptr_eq(f1, f2), "the same row yields the same forwarder");
        assert!(Arc::ptr_eq(d1, d2));
        let Resolved::Remote { forwarder: f3, .. } = c.resolve(&search_row(&url)).await.unwrap() else { panic!() };
        assert!(Arc::ptr_eq(f1, &f3));
        assert_eq!((f1.name(), f1.origin()), ("incident.search", "search_incidents"));

        // The model sees the row's schema, and the executor validates against it before anything is sent.
        assert_eq!(d1.input_schema()["properties"]["limit"]["maximum"], 5);
        let ex = second.executor().unwrap();
        let r = ex.call(ToolCall::new("c1", "incident.search", json!({"service": "payments", "limit": 1}))).await;
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(r.data().unwrap()["incidents"], json!([{"incident_id": "INC-104", "service": "payments", "title": "card authorisations time out"}]));
        assert_eq!(f1.calls(), 1);
        let r = ex.call(ToolCall::new("c2", "incident.search", json!({"service": "payments", "limit": 50}))).await;
        assert_eq!(r.code(), Some("invalid_arguments"));
        assert_eq!(f1.calls(), 1, "an invalid call never reaches the server");

        // An edited recipe gets a new forwarder; an unrelated edit keeps it.
        db.exec("UPDATE tools SET description = 'Search incidents (edited).'").await;
        let edited = c.shared_view().await.unwrap();
        let Some(Resolved::Remote { forwarder: f4, .. }) = edited.resolution("incident.search") else { panic!() };
        assert!(Arc::ptr_eq(f1, f4), "the recipe did not change");
        db.exec(&format!("UPDATE tools SET extra = '{{\"origin_name\": \"get_service_status\"}}', input_schema = {}, output_schema = NULL",
            lit(&json!({"type": "object", "properties": {"service_name": {"type": "string"}}, "required": ["service_name"]}).to_string()))).await;
        let rerouted = c.shared_view().await.unwrap();
        let Some(Resolved::Remote { forwarder: f5, .. }) = rerouted.resolution("incident.search") else { panic!("{rerouted:?}") };
        assert!(!Arc::ptr_eq(f1, f5), "a new origin name is a new forwarder");
        assert_eq!(f5.origin(), "get_service_status");
        let r = rerouted.executor().unwrap().call(ToolCall::new("c3", "incident.search", json!({"service_name": "auth-api"}))).await;
        assert!(r.is_ok(), "{r:?}");
        // Without an output schema the result is the remote's content blocks.
        let data = r.data().unwrap();
        let text = data[0]["text"].as_str().unwrap_or_else(|| panic!("{data}")).to_owned();
        assert!(text.contains("identity-team"), "{text}");
        shutdown.cancel();
    })
    .await;
}

// ---- notifications/tools/list_changed ----

both!(tokio::test(flavor = "multi_thread"), a_served_view_sends_list_changed_on_refresh);
async fn a_served_view_sends_list_changed_on_refresh(db: Db) {
    bounded(async {
        let c = db.catalog().await;
        c.put_async(&status_row()).await.unwrap();
        let served = CatalogServer::new(&c, None, McpServer::new).await.unwrap();

        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let server = served.server().clone();
        tokio::spawn(async move {
            if let Ok(s) = server.serve(server_io).await {
                let _ = s.waiting().await;
            }
        });
        let (tx, mut rx) = mpsc::unbounded_channel();
        let client = ListWatcher { tx }.serve(client_io).await.expect("handshake");
        let caps = client.peer_info().unwrap().capabilities.tools.clone().unwrap();
        assert_eq!(caps.list_changed, Some(true));
        let names = |tools: Vec<keel_tools_mcp::rmcp::model::Tool>| {
            tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(names(client.peer().list_all_tools().await.unwrap()), ["get_service_status"]);

        // Nothing changed: no notification.
        assert!(!served.refresh().await.unwrap().changed);
        assert!(rx.try_recv().is_err());

        // Another connection adds a row and disables the first.
        db.exec(&format!(
            "INSERT INTO tools (name, description, input_schema, kind, locator, effect) \
             VALUES ('incidents', 'Search incidents.', {}, 'local', 'search_incidents', 'read')",
            lit(&compiled_schema("search_incidents").to_string())
        ))
        .await;
        db.exec("UPDATE tools SET enabled = 0 WHERE name = 'get_service_status'").await;
        assert!(served.refresh().await.unwrap().changed);
        next_change(&mut rx, "the client").await;
        assert_eq!(names(client.peer().list_all_tools().await.unwrap()), ["incidents"]);
        let gone = client
            .peer()
            .call_tool(
                keel_tools_mcp::rmcp::model::CallToolRequestParams::new("get_service_status")
                    .with_arguments(json!({"service_name": "auth-api"}).as_object().cloned().unwrap()),
            )
            .await;
        assert!(gone.is_err(), "a disabled row is not callable over MCP");
        let _ = client.cancel().await;
    })
    .await;
}

both!(tokio::test(flavor = "multi_thread"), follow_notifies_http_and_subscribed_clients_of_edits);
async fn follow_notifies_http_and_subscribed_clients_of_edits(db: Db) {
    bounded(async {
        let c = db.catalog().await;
        c.put_async(&status_row()).await.unwrap();
        let served = CatalogServer::new(&c, Some("acme"), McpServer::new).await.unwrap();
        let stop = CancellationToken::new();
        // SQLite: the file polled every 100 ms; PostgreSQL: NOTIFY.
        let watching = served.follow(stop.clone());

        // A Streamable HTTP client (protocol 2025-11-25, initialize handshake).
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let server = served.server().clone();
        let http_stop = stop.clone();
        tokio::spawn(async move { server.serve_http(listener, "/mcp", http_stop).await });
        let (tx, mut rx) = mpsc::unbounded_channel();
        let transport = keel_tools_mcp::rmcp::transport::StreamableHttpClientTransport::from_uri(url);
        let http_client = ListWatcher { tx }.serve(transport).await.expect("http handshake");

        // A protocol 2026-07-28 client, which asks for the notification with subscriptions/listen.
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let server = served.server().clone();
        tokio::spawn(async move {
            if let Ok(s) = server.serve(server_io).await {
                let _ = s.waiting().await;
            }
        });
        let (tx2, _rx2) = mpsc::unbounded_channel();
        let modern = ListWatcher { tx: tx2 }
            .serve_with_lifecycle(
                client_io,
                ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
            )
            .await
            .expect("discover");
        let mut subscription =
            modern.peer().listen(SubscriptionFilter::builder().tools_list_changed().build()).await.expect("listen");
        assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));

        // An edit by another connection, picked up by the watcher.
        db.exec("UPDATE tools SET description = 'Status, as edited.'").await;
        next_change(&mut rx, "the client").await;
        let note = tokio::time::timeout(Duration::from_secs(10), subscription.next()).await.expect("in time");
        assert!(matches!(note, Ok(Some(ServerNotification::ToolListChangedNotification(_)))), "{note:?}");
        let tools = http_client.peer().list_all_tools().await.unwrap();
        assert_eq!(tools[0].description.as_deref(), Some("Status, as edited."));

        stop.cancel();
        let _ = watching.await;
        let _ = http_client.cancel().await;
        let _ = modern.cancel().await;
    })
    .await;
}

// ---- A stdio endpoint from the allowlist ----

/// Whether a missing prerequisite fails the test: `CI` is set (to anything but `0` or `false`) or
/// `KEEL_REQUIRE_PEERS=1` (as `scripts/test-all.sh` sets for the Rust tests).
fn prerequisites_required() -> bool {
    keel_tests::peers_required()
}

/// The example MCP server binary (`examples/examples/conformance_server.rs`), as a command line a stdio locator can
/// hold: `KEEL_CONFORMANCE_SERVER`, or the binary `cargo test --workspace` and `scripts/mcp-conformance.sh` build
/// beside this test's own (`<target>/debug/examples/`). A locator separates words with spaces, so a binary whose
/// path holds one is run through a link in a fresh temporary directory. Missing: the test says why and passes,
/// unless prerequisites are required ([`prerequisites_required`]: `CI` or `KEEL_REQUIRE_PEERS`), where it fails.
struct ConformanceServer {
    command: String,
    _link: Option<TempDir>,
}

fn conformance_server() -> Option<ConformanceServer> {
    let default = std::env::current_exe().ok().and_then(|exe| {
        Some(
            exe.parent()?
                .parent()?
                .join("examples")
                .join(format!("conformance_server{}", std::env::consts::EXE_SUFFIX)),
        )
    });
    let path = std::env::var_os("KEEL_CONFORMANCE_SERVER").map(PathBuf::from).or(default);
    let found = match path {
        Some(p) if p.is_file() => usable_command(&p),
        Some(p) => Err(format!("no file at {}", p.display())),
        None => Err("the test binary's own path is unknown".to_owned()),
    };
    match found {
        Ok(server) => Some(server),
        Err(why) => {
            let message = format!(
                "the example conformance_server binary is not usable here ({why}); build it with `cargo build -p \
                 examples --example conformance_server`, or set KEEL_CONFORMANCE_SERVER to its path"
            );
            keel_tests::missing_peer(&keel_tests::peers::CONFORMANCE_SERVER, &message);
            None
        }
    }
}

/// `path` as one word of a stdio command line: itself, or a link to it from a path without spaces.
fn usable_command(path: &Path) -> Result<ConformanceServer, String> {
    let fits = |p: &Path| p.to_str().is_some_and(|s| !s.contains(' ') && !s.chars().any(char::is_control));
    if fits(path) {
        return Ok(ConformanceServer { command: path.to_string_lossy().into_owned(), _link: None });
    }
    let dir = TempDir::new("conformance-server");
    let link = dir.0.join(format!("conformance_server{}", std::env::consts::EXE_SUFFIX));
    #[cfg(unix)]
    let linked = std::os::unix::fs::symlink(path, &link);
    #[cfg(not(unix))]
    let linked = std::fs::copy(path, &link).map(drop);
    match linked {
        Ok(()) if fits(&link) => {
            Ok(ConformanceServer { command: link.to_string_lossy().into_owned(), _link: Some(dir) })
        }
        Ok(()) => Err(format!("{} and the temporary directory {} both hold a space", path.display(), link.display())),
        Err(e) => Err(format!("{} holds a space, and linking it into {} failed: {e}", path.display(), link.display())),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stdio_row_starts_only_the_allowed_command() {
    let Some(server) = conformance_server() else { return };
    bounded(async {
        let dir = TempDir::new("stdio");
        let command = server.command.clone();
        let c = Catalog::builder(&registry()).allow_stdio_command(&command).open(dir.db()).unwrap();
        let row = ToolRow::remote(
            "math.add",
            "Add two integers.",
            json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
            format!("stdio:{command}"),
            "add_numbers",
        )
        .effect(Effect::Read)
        .output_schema(json!({"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}));
        c.put(&row).unwrap();
        // The same program with another argument is another command line: refused before anything starts.
        insert_raw_file(&dir.db(), "math.other", "remote", &format!("stdio:{command} --http 127.0.0.1:0"), EMPTY_OBJECT, r#"{"origin_name": "add_numbers"}"#);

        let view = c.shared_view().await.unwrap();
        assert_eq!(view.problems().iter().map(RowError::code).collect::<Vec<_>>(), ["endpoint_not_allowed"]);
        let r = view.executor().unwrap().call(ToolCall::new("c1", "math.add", json!({"a": 2, "b": 3}))).await;
        assert_eq!(r.data(), Some(&json!({"sum": 5})), "{r:?}");
        let again = c.shared_view().await.unwrap();
        let (Some(Resolved::Remote { forwarder: f1, .. }), Some(Resolved::Remote { forwarder: f2, .. })) =
            (view.resolution("math.add"), again.resolution("math.add"))
        else {
            panic!("remote rows")
        };
        assert!(Arc::ptr_eq(f1, f2));
        assert_eq!(f2.calls(), 1);
    })
    .await;
}

// ---- PostgreSQL: adoption, versions, the sync methods ----

#[tokio::test]
async fn postgres_adopts_a_seed_shaped_table_and_refuses_a_newer_schema() {
    let Some(pg) = PgDatabase::create("pg_adopt", prerequisites_required()).await else { return };
    pg.exec("CREATE TABLE tools (name text, description text, input_schema text, kind text, locator text)").await;
    pg.exec(&format!(
        "INSERT INTO tools VALUES ('get_service_status', 'Status.', {}, 'local', 'examples::status::get_service_status')",
        lit(&compiled_schema("get_service_status").to_string())
    ))
    .await;
    let builder = || Catalog::builder(&registry()).allow_module("examples::status");
    let c = builder().connect_postgres(&pg.conninfo).await.expect("adopted");
    let rows = c.rows_async().await.unwrap();
    let row = rows.value[0].row.as_ref().unwrap();
    assert_eq!(
        (row.version.as_str(), row.effect.as_str(), row.enabled, &row.tenant),
        ("1.0", "destructive", true, &None)
    );
    assert_eq!(rows.value[0].rowid, 1, "adopted rows get ids in order");
    let view = c.shared_view().await.unwrap();
    assert_eq!(view.view().get("get_service_status").unwrap().effect(), Effect::Destructive);
    assert!(c.describe().starts_with("postgresql://") && !c.describe().contains("password"), "{}", c.describe());
    assert_eq!(c.path(), None);

    // The sync methods are the SQLite file's: over PostgreSQL they say which method to use instead.
    let e = c.put(&status_row()).unwrap_err();
    assert_eq!(e.code(), "config_error");
    assert!(e.to_string().contains("put_async"), "{e}");
    assert_eq!(c.change_token().unwrap_err().code(), "config_error");

    // Connecting again writes nothing; a database of a newer build is refused.
    let token = c.change_token_async().await.unwrap();
    builder().connect_postgres(&pg.conninfo).await.expect("again");
    assert_eq!(c.change_token_async().await.unwrap(), token);
    pg.exec("UPDATE catalog_state SET schema_version = 99").await;
    let e = builder().connect_postgres(&pg.conninfo).await.unwrap_err();
    assert_eq!(e.code(), "store_error");
    assert!(e.to_string().contains("newer than this build"), "{e}");

    // Nothing answers: `store_unavailable`, within the connect timeout.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let e = builder().connect_postgres(&format!("host=127.0.0.1 port={port} user=keel dbname=x")).await.unwrap_err();
    assert_eq!(e.code(), "store_unavailable", "{e}");
    // A connection string that does not parse is the configuration's fault.
    let e = builder().connect_postgres("postgresql://[").await.unwrap_err();
    assert_eq!(e.code(), "config_error", "{e}");
}

#[tokio::test]
async fn postgres_a_writer_held_up_past_the_busy_timeout_gets_busy_and_changes_nothing() {
    let Some(pg) = PgDatabase::create("pg_busy", prerequisites_required()).await else { return };
    let c = Catalog::builder(&registry())
        .allow_module("examples::status")
        .busy_timeout(Duration::from_millis(300))
        .connect_postgres(&pg.conninfo)
        .await
        .expect("connect");
    let first = c.put_async(&status_row()).await.unwrap();
    // Another client holds the row's lock in an open transaction.
    let other = pg.client().await;
    other
        .batch_execute("BEGIN; UPDATE tools SET description = 'Held.' WHERE name = 'get_service_status'")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let e = c.put_async(&ToolRow { description: "Mine.".into(), ..status_row() }).await.unwrap_err();
    assert_eq!(e.code(), "busy", "{e}");
    assert!(started.elapsed() < Duration::from_secs(5), "bounded by the busy timeout: {:?}", started.elapsed());
    other.batch_execute("ROLLBACK").await.unwrap();
    let rows = c.rows_async().await.unwrap();
    assert_eq!(rows.token, first.token, "the refused write changed nothing");
    assert_eq!(rows.value[0].row.as_ref().unwrap().description, status_row().description);
    // The lock is gone: the same write goes through.
    c.put_async(&ToolRow { description: "Mine.".into(), ..status_row() }).await.expect("after the other commit");
}

// ---- A remote row pinned to the digest it was approved with ----

both!(tokio::test(flavor = "multi_thread"), a_pinned_remote_row_is_withheld_where_its_tool_changed);
/// Two replicas (two catalogues on one database), each with its own child of the Python SDK server that changes its
/// tool `add` when asked (tests/mcp/python_drifting.py). A row pinned to `add`'s digest resolves on both; when one
/// replica's server changes `add`, that replica refuses the call (`tool_changed`, never sent) and withholds the row,
/// while the other, whose server did not change, goes on. Approving the change (writing the new digest into the
/// row, on either replica) brings the row back where the server lists the new version, and withholds it where it
/// still lists the old one.
async fn a_pinned_remote_row_is_withheld_where_its_tool_changed(db: Db) {
    use super::mcp_forwarder::{prerequisite, workspace_root};
    let default = workspace_root().join("target/ci-venv/bin/python");
    let Some(python) = prerequisite("KEEL_PYTHON_MCP", Some(default), &keel_tests::peers::PYTHON_MCP) else {
        return;
    };
    let drifting = workspace_root().join("tests/mcp/python_drifting.py");
    let command = format!("{} {}", python.display(), drifting.display());
    if command.split_whitespace().count() != 2 {
        eprintln!("skipped: a path holds a space ({command})");
        return;
    }
    bounded(async {
        // The digest of `add` as a catalogue's connection to this command sees it.
        let mut child = tokio::process::Command::new(&python);
        child.arg(&drifting).stderr(std::process::Stdio::null());
        let probe = keel_tools_mcp::RemoteServer::connect_child("probe", child).await.expect("connect");
        let approved = keel_tools_mcp::client::Pins::of(&probe).await.unwrap().get("add").unwrap().digest.clone();
        probe.close().await;

        let open = || db.open(Catalog::builder(&registry()).allow_stdio_command(&command));
        let (one, two) = (open().await, open().await);
        let locator = format!("stdio:{command}");
        let add = |digest: &str| {
            ToolRow::remote(
                "py.add",
                "Add two integers.",
                json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
                locator.clone(),
                "add",
            )
            .effect(Effect::Read)
            .output_schema(json!({"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]}))
            .pinned(digest)
        };
        let drift = ToolRow::remote(
            "py.drift",
            "Change add.",
            json!({"type": "object", "properties": {"step": {"type": "string"}}, "required": ["step"]}),
            locator.clone(),
            "drift",
        )
        .effect(Effect::Read);
        one.put_async(&add(&approved)).await.unwrap();
        one.put_async(&drift).await.unwrap();

        let call = |view: &keel_tools_catalog::CatalogView, name: &str, args: Value| {
            let (executor, call) = (view.executor().unwrap(), ToolCall::new("c", name, args));
            async move { executor.call(call).await }
        };
        let (view_one, view_two) = (one.shared_view().await.unwrap(), two.shared_view().await.unwrap());
        assert!(view_one.problems().is_empty() && view_two.problems().is_empty(), "{view_one:?} {view_two:?}");
        for view in [&view_one, &view_two] {
            let r = call(view, "py.add", json!({"a": 2, "b": 40})).await;
            assert_eq!(r.data(), Some(&json!({"result": 42})), "{r:?}");
        }
        let Some(Resolved::Remote { forwarder, .. }) = view_one.resolution("py.add") else { panic!("remote") };
        let forwarder = forwarder.clone();

        // Replica one's server changes `add`: its forwarder refuses before sending, and its next view withholds the row.
        call(&view_one, "py.drift", json!({"step": "description"})).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while forwarder.withheld().is_none() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let changed = forwarder.withheld().expect("the change was noticed within 10 s");
        let r = call(&view_one, "py.add", json!({"a": 1, "b": 1})).await;
        assert_eq!((r.code(), r.executed), (Some("tool_changed"), false), "{r:?}");
        assert_eq!(forwarder.calls(), 1, "the refused call was not sent");
        let withheld = one.shared_view().await.unwrap();
        assert_eq!(withheld.problems().iter().map(RowError::code).collect::<Vec<_>>(), ["tool_changed"]);
        assert!(withheld.resolution("py.add").is_none());
        let text = withheld.problems()[0].to_string();
        assert!(text.contains("/description") && text.contains("<IMPORTANT>"), "{text}");
        // Replica two's server did not change.
        let r = call(&two.shared_view().await.unwrap(), "py.add", json!({"a": 1, "b": 2})).await;
        assert_eq!(r.data(), Some(&json!({"result": 3})), "{r:?}");

        // The change approved on replica two: the row comes back on one, and is withheld on two, whose server still
        // lists the version approved before.
        two.put_async(&add(changed.current.as_deref().unwrap())).await.unwrap();
        let back = one.shared_view().await.unwrap();
        assert!(back.problems().is_empty(), "{:?}", back.problems());
        assert_eq!(call(&back, "py.add", json!({"a": 2, "b": 2})).await.data(), Some(&json!({"result": 4})));
        let stale = two.shared_view().await.unwrap();
        assert_eq!(stale.problems().iter().map(RowError::code).collect::<Vec<_>>(), ["tool_changed"]);
    })
    .await;
}
