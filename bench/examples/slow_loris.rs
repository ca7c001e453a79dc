//! A normal MCP client's latency while 1,000 connections hold half-sent request heads (slow loris), against the
//! same client on a quiet server, in one sitting.
//!
//! ```sh
//! cargo run --release -p keel-bench --features examples --example slow_loris -- \
//!     [SECONDS_PER_ROUND] [ROUNDS] [SLOW_CONNECTIONS] [ADDRESSES]
//! # defaults: 5 5 1000 1
//! ```
//!
//! How:
//! - keel's server (`McpServer::serve_http`, the default `HttpConfig`) runs on a multi-thread Tokio runtime of its
//!   own (2 workers) in this process; the client and the attackers run on another.
//! - The normal client, from 127.0.0.1: one keep-alive connection, one session (protocol 2025-11-25), one
//!   `tools/call` at a time for SECONDS_PER_ROUND; each answer is read whole and checked.
//! - The attackers, from 127.0.0.2 (or spread over ADDRESSES addresses from 127.0.0.2 up): SLOW_CONNECTIONS
//!   connections, each sending half a request head and then nothing. From one address, the per-client cap (512)
//!   refuses the connections past it at once; spread over 4, every one is admitted and held until the header
//!   timeout closes it. A connection the server closes (header timeout) or refuses (a cap) is opened again 100 ms later, so
//!   the pressure holds for the whole round.
//! - Each round measures the quiet server, then the attacked one (attackers started and given 1 s to connect
//!   first), and prints both; the summary gives the medians and the median over rounds of attacked/quiet p50.
//!
//! All traffic goes to loopback addresses.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use keel_tools_core::content::Content;
use keel_tools_core::{Executor, Registry, tool};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;

/// The text the tool returns, and what every answer is checked for.
const TEXT: &str = "This is a simple text response for testing.";

/// Returns a fixed text.
#[tool(effect = "read", version = "1.0", blocking = false)]
fn test_simple_text() -> Content {
    Content::text(TEXT)
}

fn main() {
    let args: Vec<f64> = std::env::args().skip(1).map(|a| a.parse().expect("a number")).collect();
    let seconds = args.first().copied().unwrap_or(5.0);
    let rounds = args.get(1).copied().unwrap_or(5.0) as usize;
    let slow = args.get(2).copied().unwrap_or(1000.0) as usize;
    let addresses = (args.get(3).copied().unwrap_or(1.0) as usize).clamp(1, 200);

    let server_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let shutdown = CancellationToken::new();
    let addr = server_rt.block_on(async {
        let registry = Registry::from_inventory().expect("registry");
        let executor = Executor::new(registry.view().names(["test_simple_text"]).build().unwrap()).unwrap();
        let server = keel_tools_mcp::McpServer::new(executor).expect("server");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = shutdown.clone();
        tokio::spawn(async move { server.serve_http(listener, "/mcp", stop).await });
        addr
    });

    let client_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let window = Duration::from_secs_f64(seconds);
    let mut quiet = Vec::new();
    let mut attacked = Vec::new();
    client_rt.block_on(async {
        for round in 1..=rounds {
            let q = measure(addr, window).await;
            let attack = CancellationToken::new();
            let holders = (0..slow)
                .map(|i| {
                    let from = std::net::Ipv4Addr::new(127, 0, 0, 2 + (i % addresses) as u8);
                    tokio::spawn(hold(addr, from, attack.clone()))
                })
                .collect::<Vec<_>>();
            tokio::time::sleep(Duration::from_secs(1)).await;
            let a = measure(addr, window).await;
            attack.cancel();
            let mut cycles = 0;
            for h in holders {
                cycles += h.await.unwrap();
            }
            eprintln!(
                "round {round}/{rounds}: quiet {} calls, p50 {:.3} ms, p99 {:.3} ms; under {slow} slow connections \
                 ({cycles} connections opened) {} calls, p50 {:.3} ms, p99 {:.3} ms",
                q.calls, q.p50_ms, q.p99_ms, a.calls, a.p50_ms, a.p99_ms
            );
            quiet.push(q);
            attacked.push(a);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    shutdown.cancel();

    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ratios: Vec<f64> = quiet.iter().zip(&attacked).map(|(q, a)| a.p50_ms / q.p50_ms).collect();
    println!("normal client, one session on one connection, {rounds} round(s) x {seconds} s; medians over rounds");
    println!();
    println!("| server | p50 | p99 | calls/s | p50 attacked/quiet (per round) |");
    println!("|---|---:|---:|---:|---|");
    for (label, set) in [("quiet", &quiet), (&*format!("{slow} slow connections"), &attacked)] {
        println!(
            "| {label} | {:.3} ms | {:.3} ms | {:.0} | {} |",
            median(set.iter().map(|m| m.p50_ms).collect()),
            median(set.iter().map(|m| m.p99_ms).collect()),
            median(set.iter().map(|m| m.calls as f64 / seconds).collect()),
            if label == "quiet" {
                String::new()
            } else {
                format!(
                    "median {:.2} ({})",
                    median(ratios.clone()),
                    ratios.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(", ")
                )
            }
        );
    }
}

struct Measurement {
    calls: usize,
    p50_ms: f64,
    p99_ms: f64,
}

/// One session's sequential calls for `window`.
async fn measure(addr: SocketAddr, window: Duration) -> Measurement {
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let mut post = async |session: Option<&str>, body: String| {
        let mut request = Request::post(format!("http://{addr}/mcp"))
            .header("host", format!("127.0.0.1:{}", addr.port()))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(session) = session {
            request = request.header("mcp-session-id", session).header("mcp-protocol-version", "2025-11-25");
        }
        send.ready().await.unwrap();
        let response = send.send_request(request.body(Full::new(Bytes::from(body))).unwrap()).await.unwrap();
        let session = response.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_owned());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (session, body)
    };
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;
    let (session, _) = post(None, init.to_owned()).await;
    let session = session.expect("a session");
    post(Some(&session), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned()).await;
    let mut latencies = Vec::new();
    let began = Instant::now();
    let mut id = 0u64;
    while began.elapsed() < window {
        id += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"test_simple_text","arguments":{{}}}}}}"#
        );
        let start = Instant::now();
        let (_, answer) = post(Some(&session), body).await;
        latencies.push(start.elapsed().as_secs_f64() * 1e3);
        assert!(answer.windows(TEXT.len()).any(|w| w == TEXT.as_bytes()), "{answer:?}");
    }
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Measurement { calls: latencies.len(), p50_ms: at(0.5), p99_ms: at(0.99) }
}

/// Holds one slow connection from `from` until `stop`, opening it again whenever the server closes it; returns how
/// many connections it opened.
async fn hold(addr: SocketAddr, from: std::net::Ipv4Addr, stop: CancellationToken) -> usize {
    let mut opened = 0;
    while !stop.is_cancelled() {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::from((from, 0))).unwrap();
        if let Ok(mut stream) = socket.connect(addr).await {
            opened += 1;
            let _ = stream.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty").await;
            let mut sink = [0u8; 512];
            tokio::select! {
                () = stop.cancelled() => {}
                _ = async { while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {} } => {}
            }
        }
        tokio::select! {
            () = stop.cancelled() => {}
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    opened
}
