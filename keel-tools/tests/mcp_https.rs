//! The facade's `mcp-client` speaks HTTPS: an `https://` MCP server is reached over TLS, with nothing else turned
//! on. Run by `scripts/test-all.sh` as `cargo test -p keel-tools --features mcp-client --test mcp_https`, so that
//! keel-tools-mcp gets the facade's features alone (a workspace build unifies them with other crates').

#![cfg(feature = "mcp-client")]

use std::io::Read;
use std::net::TcpListener;
use std::time::Duration;

/// A loopback server that is not MCP: it reads what the client sends first and closes. A TLS client's first
/// bytes are a handshake record (content type 22) of TLS (major version 3), its ClientHello.
#[test]
fn an_https_url_gets_a_tls_handshake() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut first = [0u8; 3];
        stream.read_exact(&mut first).map(|()| first)
    });

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let url = format!("https://127.0.0.1:{port}/mcp");
    let connected = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(20),
            keel_tools::mcp::RemoteServer::http(url.clone()).connect("remote"),
        )
        .await
    });
    let error = match connected {
        Ok(Ok(_)) => panic!("a server that speaks no TLS cannot have answered"),
        Ok(Err(e)) => e.to_string(),
        Err(_) => "timed out".to_owned(),
    };
    assert!(!error.contains("feature"), "a TLS client, not a feature error: {error}");
    let first = seen.join().unwrap().expect("the client sent its first bytes");
    assert_eq!(first[0], 0x16, "a TLS handshake record, not {first:?} ({error})");
    assert_eq!(first[1], 0x03, "of TLS: {first:?}");
}
