//! HTTPS in the model clients (feature `rustls`, on by default), against a local TLS server whose CA and leaf
//! certificate are made here with rcgen; no network is used. The client trusts the test CA through
//! `add_root_certificate`: the right CA is accepted, another CA and another host name are refused with an error
//! that names the certificate problem and keeps its source chain.
//!
//! `cargo test -p keel-tools-agent --test agent -- tls::`

use std::error::Error;
use std::sync::Arc;

use keel_tools_agent::{ModelError, OllamaClient, OpenAiClient};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::ask;

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

/// Serves `body` (JSON) over HTTPS on a free local port to every request, with the leaf of `pki`; returns the port.
async fn serve_tls(pki: &Pki, body: &'static str) -> u16 {
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
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A refused handshake ends here: the client reports it.
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let Ok(n @ 1..) = tls.read(&mut buf).await else { return };
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_owned))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    port
}

const OPENAI: &str = r#"{"choices": [{"index": 0, "message": {"role": "assistant", "content": "over TLS"}}]}"#;
const OLLAMA: &str = r#"{"model": "m", "message": {"role": "assistant", "content": "over TLS"}, "done": true}"#;

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

#[tokio::test]
async fn openai_over_https_with_the_right_ca() {
    let pki = pki("keel test CA", &["localhost"]);
    let port = serve_tls(&pki, OPENAI).await;
    let model = OpenAiClient::builder(format!("https://localhost:{port}/v1"), "m")
        .add_root_certificate(&pki.ca_pem)
        .build()
        .unwrap();
    assert_eq!(ask(&model).await.unwrap(), "over TLS");
}

#[tokio::test]
async fn ollama_over_https_with_the_right_ca() {
    let pki = pki("keel test CA", &["localhost"]);
    let port = serve_tls(&pki, OLLAMA).await;
    let model = OllamaClient::builder(format!("https://localhost:{port}"), "m")
        .add_root_certificate(&pki.ca_pem)
        .build()
        .unwrap();
    assert_eq!(ask(&model).await.unwrap(), "over TLS");
}

#[tokio::test]
async fn another_ca_is_refused_and_named() {
    let pki_server = pki("keel test CA", &["localhost"]);
    let other = pki("another CA", &["localhost"]);
    let port = serve_tls(&pki_server, OPENAI).await;
    // Neither a CA the server's certificate does not chain to, nor only the built-in roots.
    for model in [
        OpenAiClient::builder(format!("https://localhost:{port}/v1"), "m").add_root_certificate(&other.ca_pem),
        OpenAiClient::builder(format!("https://localhost:{port}/v1"), "m"),
    ] {
        let e = ask(&model.build().unwrap()).await.unwrap_err();
        assert!(matches!(e, ModelError::Connect { .. }), "{e:?}");
        let text = e.to_string();
        assert!(text.contains("invalid peer certificate") && text.contains("UnknownIssuer"), "{text}");
        assert!(text.contains("TLS handshake with localhost failed (its certificate was not accepted)"), "{text}");
        // The source is reqwest's error, whose own chain leads to rustls' error.
        let source = e.source().expect("a source");
        assert!(source.is::<reqwest::Error>(), "{source:?}");
        assert!(chain(&e).contains("UnknownIssuer"), "{}", chain(&e));
    }
}

#[tokio::test]
async fn another_host_name_is_refused_and_named() {
    let pki = pki("keel test CA", &["model.keel.test"]);
    let port = serve_tls(&pki, OPENAI).await;
    let model = OpenAiClient::builder(format!("https://localhost:{port}/v1"), "m")
        .add_root_certificate(&pki.ca_pem)
        .build()
        .unwrap();
    let e = ask(&model).await.unwrap_err();
    assert!(matches!(e, ModelError::Connect { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("certificate not valid for name") && text.contains("localhost"), "{text}");
    assert!(e.source().is_some_and(|s| s.is::<reqwest::Error>()));
}

#[tokio::test]
async fn plain_http_still_works() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let Ok((mut tcp, _)) = listener.accept().await else { return };
        let mut buf = vec![0u8; 65536];
        let mut seen = Vec::new();
        while let Ok(n @ 1..) = tcp.read(&mut buf).await {
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen);
            if text.contains("\r\n\r\n") && text.ends_with('}') {
                break;
            }
        }
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{OPENAI}",
            OPENAI.len()
        );
        let _ = tcp.write_all(response.as_bytes()).await;
    });
    let model = OpenAiClient::new(format!("http://127.0.0.1:{port}/v1"), "m").unwrap();
    assert_eq!(ask(&model).await.unwrap(), "over TLS");
}

#[test]
fn a_root_certificate_that_is_not_pem_fails_the_build() {
    let e = OpenAiClient::builder("https://localhost/v1", "m").add_root_certificate("not a certificate").build();
    let e = e.unwrap_err();
    assert!(matches!(e, ModelError::Config { .. }), "{e:?}");
    assert!(e.to_string().contains("root certificate 1 holds no PEM certificate"), "{e}");
}
