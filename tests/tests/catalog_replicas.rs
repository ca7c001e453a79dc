//! Replicas of one PostgreSQL catalogue (`keel-tools-catalog`, feature `postgres`), in the cluster of
//! `KEEL_TEST_POSTGRES` (started by `scripts/test-all.sh`): two MCP server processes (the example
//! `catalogue_replicas` in replica mode) over one database, each test in a database of its own.
//!
//! - an edit through either replica is served by the other (propagation delay p50/p99 printed);
//! - a 2026-07-28 client alternating between the replicas sees the same lists and calls;
//! - legacy-session clients of both replicas receive `notifications/tools/list_changed`;
//! - concurrent writers (eight catalogues in this process and both replicas) lose nothing;
//! - a replica killed mid-call loses no committed change;
//! - a server that loses the database keeps serving its last view, reports itself degraded on `/health`,
//!   reconnects, and catches up by change token on a change whose notification it missed.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use examples::replicas::{Replica, http_get, quantile};
use keel_tests::http::{RawClient, STATELESS_REVISION, stateless_call_request};
use keel_tools_catalog::postgres::PgStorage;
use keel_tools_catalog::{Catalog, CatalogServer, ToolRow};
use keel_tools_core::{Registry, ToolCall};
use keel_tools_mcp::rmcp::ServiceExt;
use keel_tools_mcp::{HttpConfig, McpServer};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use keel_tests::mcp::{ListWatcher, next_change};
use keel_tests::pg::PgDatabase;

keel_tools_core::link_tools!(examples);

fn required() -> bool {
    keel_tests::peers_required()
}

/// A fresh database and two replicas over it.
async fn two_replicas(label: &str) -> Option<(PgDatabase, Replica, Replica)> {
    let exe = keel_tests::peers::replica_exe()?;
    let db = PgDatabase::create(label, required()).await?;
    let a = Replica::spawn(&exe, "replica-a", &db.conninfo).await.expect("replica a");
    let b = Replica::spawn(&exe, "replica-b", &db.conninfo).await.expect("replica b");
    Some((db, a, b))
}

async fn bounded<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(Duration::from_secs(120), f).await.expect("test timed out");
}

fn addr_of(url: &str) -> SocketAddr {
    url.trim_start_matches("http://").split('/').next().unwrap().parse().expect("an address")
}

/// The tools of a replica over a stateless (2026-07-28) request: name → description.
async fn stateless_list(url: &str) -> Vec<(String, String)> {
    let mut client = RawClient::connect(addr_of(url), "/mcp").await.expect("connect");
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": STATELESS_REVISION,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0.1"}
        }}
    });
    let answer = client.post_stateless(&body).await.expect("tools/list");
    let messages = answer.messages();
    let result = messages.iter().find(|m| m.get("result").is_some()).unwrap_or_else(|| panic!("{answer:?}"));
    let mut tools: Vec<(String, String)> = result["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_owned(), t["description"].as_str().unwrap_or("").to_owned()))
        .collect();
    tools.sort();
    tools
}

/// A stateless `tools/call`: the JSON-RPC answer (its `result` or `error`).
async fn stateless_call(url: &str, tool: &str, args: Value) -> Value {
    try_stateless_call(url, tool, args).await.expect("tools/call")
}

/// [`stateless_call`], or why no answer came (the connection closed, say).
async fn try_stateless_call(url: &str, tool: &str, args: Value) -> Result<Value, String> {
    let mut client = RawClient::connect(addr_of(url), "/mcp").await.map_err(|e| e.to_string())?;
    let answer = client.post_stateless(&stateless_call_request(7, tool, args)).await?;
    let messages = answer.messages();
    messages.into_iter().find(|m| m.get("result").is_some() || m.get("error").is_some()).ok_or("no answer".into())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_edit_through_either_replica_is_served_by_the_other() {
    bounded(async {
        let Some((_db, mut a, mut b)) = two_replicas("propagation").await else { return };
        let mut delays = Vec::new();
        for i in 0..100 {
            let (writer, reader) = if i % 2 == 0 { (&mut a, &mut b) } else { (&mut b, &mut a) };
            let description = format!("Status, edit {i} through {}.", writer.name);
            let c = writer.put("service.status", &description).await.expect("put");
            let seen = reader.served_at_least(c.generation, Duration::from_secs(10)).await.expect("propagated");
            delays.push(seen.saturating_sub(c.at_us));
            if i % 25 == 0 || i == 99 {
                // What the other replica serves is the edit itself.
                let tools = stateless_list(&reader.url).await;
                assert_eq!(tools, [("service.status".to_owned(), description.clone())], "{}", reader.name);
            }
        }
        let (p50, p99) = (quantile(&mut delays, 0.5), quantile(&mut delays, 0.99));
        eprintln!("propagation delay between replicas over {} edits: p50 {p50} µs, p99 {p99} µs", delays.len());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_client_alternating_between_replicas_sees_the_same_lists_and_calls() {
    bounded(async {
        let Some((_db, mut a, mut b)) = two_replicas("alternating").await else { return };
        a.put("service.status", "Report a service's status.").await.expect("put");
        for i in 0..10 {
            let (writer, _) = if i % 2 == 0 { (&mut a, &mut b) } else { (&mut b, &mut a) };
            let c = writer.put(&format!("status.s{i}"), &format!("Status, copy {i}.")).await.expect("put");
            a.served_at_least(c.generation, Duration::from_secs(10)).await.expect("a");
            b.served_at_least(c.generation, Duration::from_secs(10)).await.expect("b");
            // Once both serve the write, each request of the client may go to either: the answers agree.
            let (from_a, from_b) = (stateless_list(&a.url).await, stateless_list(&b.url).await);
            assert_eq!(from_a, from_b, "after write {i}");
            assert_eq!(from_a.len(), i + 2);
            let url = if i % 2 == 0 { &b.url } else { &a.url };
            let r = stateless_call(url, &format!("status.s{i}"), json!({"service_name": "payments"})).await;
            assert_eq!(r["result"]["structuredContent"]["owner"], "payments-team", "{r}");
        }
        // A disabled row is refused by both.
        let c = a.write(json!({"op": "set_enabled", "name": "status.s0", "enabled": false})).await.expect("disable");
        // The writing replica applies its own write as the other does, from the notification.
        a.served_at_least(c.generation, Duration::from_secs(10)).await.expect("a");
        b.served_at_least(c.generation, Duration::from_secs(10)).await.expect("b");
        for url in [&a.url, &b.url] {
            let r = stateless_call(url, "status.s0", json!({"service_name": "payments"})).await;
            let refused = r.get("error").is_some() || r["result"]["isError"] == true;
            assert!(refused, "a disabled row is not callable: {r}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn legacy_session_clients_of_both_replicas_receive_list_changed() {
    bounded(async {
        let Some((_db, mut a, mut b)) = two_replicas("list_changed").await else { return };
        let (tx_a, mut rx_a) = mpsc::unbounded_channel();
        let (tx_b, mut rx_b) = mpsc::unbounded_channel();
        let transport =
            |url: &str| keel_tools_mcp::rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_owned());
        let client_a = ListWatcher { tx: tx_a }.serve(transport(&a.url)).await.expect("session with a");
        let client_b = ListWatcher { tx: tx_b }.serve(transport(&b.url)).await.expect("session with b");
        assert!(client_a.peer().list_all_tools().await.unwrap().is_empty());

        // Written through a: both sessions hear of it.
        a.put("service.status", "Written through a.").await.expect("put");
        next_change(&mut rx_a, "a's client").await;
        next_change(&mut rx_b, "b's client").await;
        let tools = client_b.peer().list_all_tools().await.unwrap();
        assert_eq!(tools[0].description.as_deref(), Some("Written through a."));

        // Written through b: both again.
        b.put("service.status", "Written through b.").await.expect("put");
        next_change(&mut rx_a, "a's client").await;
        next_change(&mut rx_b, "b's client").await;
        let tools = client_a.peer().list_all_tools().await.unwrap();
        assert_eq!(tools[0].description.as_deref(), Some("Written through b."));
        let _ = client_a.cancel().await;
        let _ = client_b.cancel().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_writers_lose_nothing() {
    bounded(async {
        let Some((db, mut a, mut b)) = two_replicas("writers").await else { return };
        let registry = Registry::from_inventory().expect("registry");
        let status = registry.get("get_service_status").unwrap().clone();
        const WRITERS: usize = 8;
        const EACH: usize = 20;
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let conninfo = db.conninfo.clone();
            let registry = registry.clone();
            let status = status.clone();
            tasks.push(tokio::spawn(async move {
                let storage = PgStorage::builder(conninfo).pool_size(2).connect().await.expect("connect");
                let c = Catalog::builder(&registry).allow_module("examples::status").storage(storage).unwrap();
                for i in 0..EACH {
                    let row = ToolRow::local(
                        format!("w{w}.t{i}"),
                        "Mine.",
                        status.input_schema().clone(),
                        "get_service_status",
                    );
                    c.put_async(&row).await.expect("own row");
                    // Every writer also rewrites one shared row: upserts of one key never conflict into an error.
                    let shared = ToolRow::local(
                        "shared",
                        format!("Last written by {w}."),
                        status.input_schema().clone(),
                        "get_service_status",
                    );
                    c.put_async(&shared).await.expect("shared row");
                }
            }));
        }
        // Both replicas write too, at the same time.
        let replica_writes = async {
            for i in 0..EACH {
                a.send(json!({"op": "put", "name": format!("a.t{i}")})).await.unwrap();
                b.send(json!({"op": "put", "name": format!("b.t{i}")})).await.unwrap();
            }
            for _ in 0..EACH {
                a.next_committed().await.expect("a committed");
                b.next_committed().await.expect("b committed");
            }
        };
        replica_writes.await;
        for t in tasks {
            t.await.expect("writer");
        }

        let reader =
            Catalog::builder(&registry).storage(PgStorage::connect(db.conninfo.clone()).await.unwrap()).unwrap();
        let rows = reader.rows_async().await.unwrap();
        let names: BTreeSet<String> = rows.value.iter().map(|r| r.row.as_ref().unwrap().name.clone()).collect();
        let mut expected: BTreeSet<String> = BTreeSet::from(["shared".to_owned()]);
        for i in 0..EACH {
            for w in 0..WRITERS {
                expected.insert(format!("w{w}.t{i}"));
            }
            expected.insert(format!("a.t{i}"));
            expected.insert(format!("b.t{i}"));
        }
        assert_eq!(names, expected, "every row written is there, once");
        // Each write is one counted change: inserts, and the shared row's updates.
        let writes = (WRITERS * EACH * 2 + 2 * EACH) as u64;
        assert_eq!(rows.token.generation(), writes, "no write lost or counted twice");
        // Both replicas converge on the final state.
        for r in [&mut a, &mut b] {
            r.served_at_least(writes, Duration::from_secs(20)).await.expect("converged");
            assert_eq!(stateless_list(&r.url).await.len(), expected.len(), "{}", r.name);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_killed_mid_call_loses_no_committed_change() {
    bounded(async {
        let Some((db, mut a, mut b)) = two_replicas("killed").await else { return };
        let c = a.write(json!({"op": "put", "name": "slow", "tool": "wait_a_while"})).await.expect("slow row");
        a.served_at_least(c.generation, Duration::from_secs(10)).await.expect("a serves it");
        // A call that is still running on a when it dies.
        let url = a.url.clone();
        let call = tokio::spawn(async move { try_stateless_call(&url, "slow", json!({"ms": 10000})).await });
        // A stream of writes through a, not waited for one by one.
        for i in 0..200 {
            a.send(json!({"op": "put", "name": format!("edit.e{i}")})).await.expect("send");
        }
        let mut committed = Vec::new();
        while committed.len() < 20 {
            committed.push(a.next_committed().await.expect("committed"));
        }
        a.kill().await;
        // Whatever a reported committed before it died (and what it committed without saying so).
        while let Ok(Ok(c)) = tokio::time::timeout(Duration::from_millis(200), a.next_committed()).await {
            committed.push(c);
        }
        let outcome = call.await.expect("the calling task");
        assert!(outcome.is_err(), "the 10 s call cannot have finished, its replica died: {outcome:?}");
        let newest = committed.iter().map(|c| c.generation).max().unwrap();

        let reader = Catalog::builder(&Registry::from_inventory().unwrap())
            .storage(PgStorage::connect(db.conninfo.clone()).await.unwrap())
            .unwrap();
        let rows = reader.rows_async().await.unwrap();
        let stored: BTreeSet<String> = rows.value.iter().map(|r| r.row.as_ref().unwrap().name.clone()).collect();
        for c in &committed {
            assert!(stored.contains(&c.name), "{} was committed, then lost", c.name);
        }
        // The other replica serves every committed change.
        b.served_at_least(newest, Duration::from_secs(10)).await.expect("b caught up");
        let listed: BTreeSet<String> = stateless_list(&b.url).await.into_iter().map(|(n, _)| n).collect();
        for c in &committed {
            assert!(listed.contains(&c.name), "b does not list {}", c.name);
        }
        eprintln!("killed replica a after {} reported commits; b serves generation {}", committed.len(), b.served());
    })
    .await;
}

// ---- Losing the database ----

/// A TCP proxy to the cluster that can be cut (every connection closed, new ones refused) and restored.
struct Proxy {
    port: u16,
    up: Arc<AtomicBool>,
    cut: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Proxy {
    async fn start(target: SocketAddr) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let cut = Arc::new(tokio::sync::watch::Sender::new(0u64));
        let (up2, cut2) = (up.clone(), cut.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else { return };
                if !up2.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let mut cut_rx = cut2.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut_rx.changed() => {}
                    }
                });
            }
        });
        Proxy { port, up, cut }
    }

    fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_loses_the_database_serves_its_last_view_and_catches_up() {
    bounded(async {
        let Some(db) = PgDatabase::create("outage", required()).await else { return };
        let config: tokio_postgres::Config = db.conninfo.parse().unwrap();
        let host = match &config.get_hosts()[0] {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            #[cfg(unix)]
            other => panic!("a TCP host is needed: {other:?}"),
        };
        let target: SocketAddr = format!("{host}:{}", config.get_ports()[0]).parse().unwrap();
        let proxy = Proxy::start(target).await;
        // Hosts and ports accumulate in a connection string: this one is written whole.
        let through_proxy = format!(
            "host=127.0.0.1 port={} user={} dbname={}",
            proxy.port,
            config.get_user().unwrap_or("postgres"),
            config.get_dbname().unwrap()
        );

        let registry = Registry::from_inventory().unwrap();
        let status = registry.get("get_service_status").unwrap().clone();
        let row = |name: &str| ToolRow::local(name, "Status.", status.input_schema().clone(), "get_service_status");
        // The writer goes straight to the cluster; the server only through the proxy.
        let direct = Catalog::builder(&registry)
            .allow_module("examples::status")
            .storage(PgStorage::connect(db.conninfo.clone()).await.unwrap())
            .unwrap();
        let storage = PgStorage::builder(through_proxy)
            .resync(Duration::from_millis(200))
            .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(200))
            .connect_timeout(Duration::from_secs(2))
            .connect()
            .await
            .unwrap();
        let catalog = Catalog::builder(&registry).allow_module("examples::status").storage(storage).unwrap();
        let first = direct.put_async(&row("before")).await.unwrap();
        let served = CatalogServer::new(&catalog, None, McpServer::new).await.unwrap();
        let stop = CancellationToken::new();
        let following = served.follow(stop.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let health_url = format!("http://{}/health", listener.local_addr().unwrap());
        {
            let (served, stop) = (served.clone(), stop.clone());
            // The report names the store: shown here, as on a route that is not public.
            tokio::spawn(async move {
                served.serve_http(listener, "/mcp", HttpConfig::default().health_details(true), stop).await
            });
        }
        let (code, body) = http_get(&health_url).await.unwrap();
        assert_eq!(code, 200, "{body}");
        assert_eq!(served.health().served, Some(first.token));

        // The database goes away.
        proxy.cut();
        let degraded = async {
            while !served.health().is_degraded() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), degraded).await.expect("reported degraded");
        let (code, body) = http_get(&health_url).await.unwrap();
        let report: Value = serde_json::from_str(&body).unwrap();
        assert_eq!((code, report["status"].as_str()), (503, Some("degraded")), "{body}");
        assert_eq!(report["store"]["status"], "degraded", "{body}");
        // The last good view is still served: calls work.
        let executor = served.server().executor();
        let r = executor.call(ToolCall::new("c1", "before", json!({"service_name": "auth-api"}))).await;
        assert!(r.is_ok(), "{r:?}");

        // A change committed while the server cannot hear of it: its NOTIFY is lost to this server.
        let missed = direct.put_async(&row("during")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(served.health().served, Some(first.token), "nothing could be read meanwhile");

        // The database comes back: the listener reconnects, reads the token, and the view catches up.
        proxy.restore();
        let mut served_rx = served.served();
        tokio::time::timeout(Duration::from_secs(10), served_rx.wait_for(|t| *t >= Some(missed.token)))
            .await
            .expect("caught up within 10 s")
            .unwrap();
        let recovered = async {
            while served.health().is_degraded() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), recovered).await.expect("healthy again");
        let (code, body) = http_get(&health_url).await.unwrap();
        assert_eq!(code, 200, "{body}");
        let r =
            served.server().executor().call(ToolCall::new("c2", "during", json!({"service_name": "payments"}))).await;
        assert!(r.is_ok(), "{r:?}");

        // A forged notification is a reason to read the counter, never the counter itself.
        db.exec("NOTIFY keel_catalog, '999999'").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let health = served.health();
        assert_eq!((health.latest, health.served), (Some(missed.token), Some(missed.token)), "{health:?}");
        stop.cancel();
        let _ = following.await;
    })
    .await;
}
