//! `RemoteServer` over HTTPS (feature `rustls`, on by default): a keel MCP server served over TLS here, with a CA
//! and a leaf certificate made with rcgen; no network is used. The client trusts the test CA through
//! `HttpConnect::add_root_certificate`: the right CA imports the tools and calls one, another CA and another host
//! name are refused with an error that names the certificate problem.
//!
//! `cargo test -p keel-tools-mcp --features client,http,server --test mcp -- tls::`

use std::convert::Infallible;
use std::error::Error;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use keel_tools_core::{Executor, Registry, ToolCall, tool};
use keel_tools_mcp::client::RemoteServer;
use keel_tools_mcp::{HttpConfig, McpServer};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;

/// Look up one incident.
#[tool(effect = "read", version = "1.0")]
async fn tls_lookup(incident_id: String) -> String {
    format!("found {incident_id}")
}

/// A CA named `ca_name`, and a leaf certificate it signed for `names`.
struct Pki {
    ca_pem: String,
    leaf: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
}

fn pki(ca_name: &str, names: &[&str]) -> Pki {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, ca_name);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        leaf: leaf.der().clone(),
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    }
}

/// Serves the `tls_lookup` tool over MCP Streamable HTTP with TLS (the leaf of `pki`) on a free local port;
/// returns the port.
async fn serve_mcp_tls(pki: &Pki) -> u16 {
    let served = Registry::from_inventory().unwrap().view().names(["tls_lookup"]).build().unwrap();
    let server = McpServer::new(Executor::new(served).unwrap()).unwrap();
    let service = server.http_service(HttpConfig::default());
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![pki.leaf.clone()], pki.key.clone_key())
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, service) = (acceptor.clone(), service.clone());
            tokio::spawn(async move {
                // A refused handshake ends here: the client reports it.
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let handler = hyper::service::service_fn(move |request| {
                    let service = service.clone();
                    async move { Ok::<_, Infallible>(service.handle(request).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), handler).await;
            });
        }
    });
    port
}

/// The error's text and every source's, joined.
fn chain(e: &(dyn Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.join(" / ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_import_and_run_over_https_with_the_right_ca() {
    let pki = pki("keel test CA", &["localhost"]);
    let port = serve_mcp_tls(&pki).await;
    let remote = RemoteServer::http(format!("https://localhost:{port}/mcp"))
        .add_root_certificate(&pki.ca_pem)
        .connect("remote")
        .await
        .expect("connect over https");
    let forwarded = remote.import_unpinned().await.expect("import").into_definitions();
    let name = forwarded[0].name().to_owned();
    assert_eq!(name, "remote.tls_lookup");
    let registry = Registry::builder().without_inventory().tools(forwarded).build().unwrap();
    let local = Executor::new(registry.view().names([name.as_str()]).build().unwrap()).unwrap();
    let result = local.call(ToolCall::new("call-1", name, json!({"incident_id": "INC-1"}))).await;
    assert!(result.is_ok(), "{result:?}");
    assert!(format!("{:?}", result.outcome).contains("found INC-1"), "{result:?}");
    remote.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_ca_is_refused_and_named() {
    let pki_server = pki("keel test CA", &["localhost"]);
    let other = pki("another CA", &["localhost"]);
    let port = serve_mcp_tls(&pki_server).await;
    let url = format!("https://localhost:{port}/mcp");
    for connect in [RemoteServer::http(&url).add_root_certificate(&other.ca_pem), RemoteServer::http(&url)] {
        let Err(e) = connect.connect("remote").await else { panic!("connected with another CA") };
        let text = e.to_string();
        assert!(text.contains("invalid peer certificate") && text.contains("UnknownIssuer"), "{text}");
        assert!(e.source().is_some(), "{}", chain(&e));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_host_name_is_refused_and_named() {
    let pki = pki("keel test CA", &["mcp.keel.test"]);
    let port = serve_mcp_tls(&pki).await;
    let Err(e) = RemoteServer::http(format!("https://localhost:{port}/mcp"))
        .add_root_certificate(&pki.ca_pem)
        .connect("remote")
        .await
    else {
        panic!("connected to a server named otherwise")
    };
    let text = e.to_string();
    assert!(text.contains("certificate not valid for name") && text.contains("localhost"), "{text}");
}

#[tokio::test]
async fn a_root_certificate_that_is_not_pem_is_refused() {
    let Err(e) =
        RemoteServer::http("https://localhost:1/mcp").add_root_certificate("not a certificate").connect("remote").await
    else {
        panic!("connected with no root certificate")
    };
    assert!(e.to_string().contains("root certificate 1 holds no PEM certificate"), "{e}");
}

/// reqwest's features are shared by every reqwest user in a build. keel turns on reqwest's `rustls` (its default
/// provider, aws-lc-rs), so a client that brings no TLS settings of its own, such as rmcp's `from_uri`, still has a
/// provider and builds instead of panicking; it then reaches a plain `http://` keel server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reqwest_client_without_tls_settings_of_its_own_still_builds() {
    use keel_tools_mcp::rmcp::ServiceExt;
    use keel_tools_mcp::rmcp::transport::StreamableHttpClientTransport;
    let served = Registry::from_inventory().unwrap().view().names(["tls_lookup"]).build().unwrap();
    let server = McpServer::new(Executor::new(served).unwrap()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let serving = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { server.serve_http(listener, "/mcp", shutdown).await }
    });
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    let client = ().serve(transport).await.expect("handshake");
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "tls_lookup"), "{tools:?}");
    let _ = client.cancel().await;
    shutdown.cancel();
    serving.await.expect("join").expect("served");
}
