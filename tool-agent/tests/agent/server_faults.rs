//! What a hostile or broken model server can make of the real clients: no panic, no key sent where it should not
//! go, and an error that names the cause. Each server is a loopback one made here (the `stub` feature's server is
//! not built by a plain `cargo test`); nothing leaves the machine.
//!
//! `cargo test -p keel-tools-agent --test agent -- server_faults::`

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_tools_agent::{
    Agent, AgentError, AnthropicClient, ChatModel, GeminiClient, Message, ModelError, OpenAiClient,
};
use keel_tools_core::Executor;
use keel_tools_core::runs::Run;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::{ask, view};

/// A loopback HTTP server that answers every request with the same raw response and records the head (request
/// line and headers) of each request it read.
struct Loopback {
    /// `http://127.0.0.1:<port>`.
    url: String,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Loopback {
    async fn start(response: String) -> Loopback {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = heads.clone();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                let (seen, response) = (seen.clone(), response.clone());
                tokio::spawn(async move {
                    let Some(head) = read_request(&mut tcp).await else { return };
                    seen.lock().unwrap().push(head);
                    let _ = tcp.write_all(response.as_bytes()).await;
                    let _ = tcp.shutdown().await;
                });
            }
        });
        Loopback { url, heads }
    }

    /// The heads of the requests received so far, in lowercase.
    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().iter().map(|h| h.to_ascii_lowercase()).collect()
    }
}

/// Reads one request (the head, then a body of its `content-length`) and returns its head.
async fn read_request(tcp: &mut TcpStream) -> Option<String> {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tcp.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        request.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&request);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_owned))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if request.len() >= end + 4 + length {
                return Some(text[..end].to_owned());
            }
        }
    }
}

/// A raw HTTP/1.1 response: `status` (`429 Too Many Requests`), the headers, a JSON body.
fn response(status: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut head = format!("HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n", body.len());
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    format!("{head}connection: close\r\n\r\n{body}")
}

/// The key every test sends: it must never reach a server it was not meant for, nor an error's text.
const KEY: &str = "sk-keel-test-secret";

const RATE_LIMITED: &str = r#"{"error": {"message": "slow down"}}"#;

/// The loop over `model` with the default retry policy (waits of one turn add up to at most 60 s), one turn.
async fn run_once(model: &impl ChatModel) -> Result<(), AgentError> {
    let executor = Executor::new(view()).unwrap();
    let mut run = Run::new(executor);
    Agent::new(model).run(&mut run, &mut vec![Message::user("hello")]).await.map(|_| ())
}

/// The wait a status error names, which must be a wait a `Duration` and an `Instant` can hold.
fn asked_wait(e: &ModelError) -> Duration {
    match e {
        ModelError::Status { retry_after: Some(wait), .. } => *wait,
        other => panic!("not a status error with a wait: {other:?}"),
    }
}

/// The longest wait the clients report a server asking for (a day): anything longer reads as that.
const CEILING: Duration = Duration::from_secs(24 * 60 * 60);

#[tokio::test]
async fn an_absurd_retry_after_is_bounded_and_not_waited_for() {
    for (header, value) in [
        ("retry-after", "1e20"),
        ("retry-after-ms", "1e300"),
        ("retry-after", "18446744073709551616"),
        ("x-ratelimit-reset-requests", "100000000000000000000000h"),
        ("anthropic-ratelimit-tokens-reset", "9999-12-31T23:59:59Z"),
    ] {
        let server = Loopback::start(response("429 Too Many Requests", &[(header, value)], RATE_LIMITED)).await;
        let model = OpenAiClient::builder(format!("{}/v1", server.url), "m").api_key(KEY).build().unwrap();
        let e = ask(&model).await.unwrap_err();
        let wait = asked_wait(&e);
        assert!(wait <= CEILING, "{header}: {value} -> {wait:?}");
        assert!(wait >= Duration::from_secs(60), "{header}: {value} -> {wait:?}: the server asked for long");
        assert!(std::time::Instant::now().checked_add(wait).is_some());
        // The loop does not wait past its budget: the turn fails at once, with the server's answer, and says the
        // server asked for a wait longer than the loop would make.
        let started = std::time::Instant::now();
        let e = run_once(&model).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(30), "{header}: waited {:?}", started.elapsed());
        let text = e.to_string();
        assert!(text.contains("answered 429: slow down"), "{text}");
        assert!(text.contains("asked to wait"), "{text}");
        assert_eq!(server.heads().len(), 2, "{header}: one request per call, no retry");
    }
}

#[tokio::test]
async fn a_wait_that_is_no_number_is_ignored() {
    for value in ["-1", "NaN", "inf", "-inf", "1e", ""] {
        let server = Loopback::start(response("429 Too Many Requests", &[("retry-after", value)], RATE_LIMITED)).await;
        let model = OpenAiClient::new(format!("{}/v1", server.url), "m").unwrap();
        let e = ask(&model).await.unwrap_err();
        assert!(matches!(e, ModelError::Status { status: 429, retry_after: None, .. }), "{value:?}: {e:?}");
    }
}

#[tokio::test]
async fn geminis_absurd_retry_delay_is_bounded() {
    for delay in ["100000000000000000000000000000s", "99999999999999999999h1s", &format!("{}s", "9".repeat(400))] {
        let body = serde_json::json!({"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}]}});
        let server = Loopback::start(response("429 Too Many Requests", &[], &body.to_string())).await;
        let model = GeminiClient::builder(format!("{}/v1beta", server.url), "m").api_key(KEY).build().unwrap();
        let e = ask(&model).await.unwrap_err();
        if let ModelError::Status { retry_after: Some(wait), .. } = e {
            assert!(wait <= CEILING, "{delay}: {wait:?}");
        }
        let started = std::time::Instant::now();
        assert!(run_once(&model).await.is_err());
        assert!(started.elapsed() < Duration::from_secs(30), "{delay}: waited {:?}", started.elapsed());
    }
    // An ordinary delay is read as before.
    let body = serde_json::json!({"error": {"code": 429, "message": "Resource exhausted",
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}});
    let server = Loopback::start(response("429 Too Many Requests", &[], &body.to_string())).await;
    let model = GeminiClient::builder(format!("{}/v1beta", server.url), "m").build().unwrap();
    assert_eq!(asked_wait(&ask(&model).await.unwrap_err()), Duration::from_secs(37));
}

const ANTHROPIC_OK: &str = r#"{"id": "msg_1", "type": "message", "role": "assistant",
    "content": [{"type": "text", "text": "redirected"}], "stop_reason": "end_turn"}"#;
const GEMINI_OK: &str = r#"{"candidates": [{"content": {"role": "model", "parts": [{"text": "redirected"}]}}]}"#;
const OPENAI_OK: &str = r#"{"choices": [{"index": 0, "message": {"role": "assistant", "content": "redirected"}}]}"#;

#[tokio::test]
async fn a_key_never_follows_a_redirect() {
    for status in ["307 Temporary Redirect", "308 Permanent Redirect", "302 Found", "301 Moved Permanently"] {
        for api in ["anthropic", "gemini", "openai"] {
            let ok = match api {
                "anthropic" => ANTHROPIC_OK,
                "gemini" => GEMINI_OK,
                _ => OPENAI_OK,
            };
            // B answers anything, and records what it was sent.
            let b = Loopback::start(response("200 OK", &[], ok)).await;
            let target = format!("{}/elsewhere", b.url);
            let a = Loopback::start(response(status, &[("location", &target)], "")).await;
            let e = match api {
                "anthropic" => ask(&AnthropicClient::builder(&a.url, "m").api_key(KEY).build().unwrap()).await,
                "gemini" => {
                    ask(&GeminiClient::builder(format!("{}/v1beta", a.url), "m").api_key(KEY).build().unwrap()).await
                }
                _ => ask(&OpenAiClient::builder(format!("{}/v1", a.url), "m").api_key(KEY).build().unwrap()).await,
            };
            let heads = b.heads();
            assert!(
                heads.iter().all(|h| !h.contains(&KEY.to_ascii_lowercase())),
                "{api} {status}: B got the key: {heads:?}"
            );
            assert!(heads.is_empty(), "{api} {status}: the redirect was followed: {heads:?}");
            let e = e.unwrap_err();
            let code: u16 = status[..3].parse().unwrap();
            assert!(matches!(e, ModelError::Status { status, .. } if status == code), "{api}: {e:?}");
            let text = e.to_string();
            assert!(text.contains(&format!("redirected to {target}")), "{api}: {text}");
            assert!(text.contains("does not follow redirects with an API key: use the final URL"), "{api}: {text}");
            assert!(!text.contains(KEY), "{api}: {text}");
            assert_eq!(e.retry_reason(), None, "a redirect is not retried");
            assert_eq!(a.heads().len(), 1);
        }
    }
}

#[tokio::test]
async fn a_redirect_is_not_followed_without_a_key_either() {
    let b = Loopback::start(response("200 OK", &[], OPENAI_OK)).await;
    let a =
        Loopback::start(response("307 Temporary Redirect", &[("location", "/v2/chat/completions?sig=x")], "")).await;
    let e = ask(&OpenAiClient::new(format!("{}/v1", a.url), "m").unwrap()).await.unwrap_err();
    let text = e.to_string();
    // A relative target is named in full (its query left out), on the same server.
    assert!(text.contains(&format!("redirected to {}/v2/chat/completions;", a.url)), "{text}");
    assert!(text.contains("keel does not follow redirects: use the final URL"), "{text}");
    assert!(b.heads().is_empty());
}

#[test]
fn a_key_is_refused_for_a_url_that_only_looks_loopback() {
    for base in ["http://192.0.2.10:9000\\@127.0.0.1", "http://127.0.0.1:80@192.0.2.10", "http://127.0.0.1.example"] {
        let e = AnthropicClient::builder(base, "m").api_key(KEY).build().unwrap_err();
        assert!(matches!(e, ModelError::Config { .. }), "{base}: {e:?}");
        assert!(e.to_string().contains("https://") && !e.to_string().contains(KEY), "{e}");
        assert!(OpenAiClient::builder(format!("{base}/v1"), "m").api_key(KEY).build().is_err(), "{base}");
        assert!(GeminiClient::builder(format!("{base}/v1beta"), "m").api_key(KEY).build().is_err(), "{base}");
    }
    // Without a key any host will do, and loopback with one.
    assert!(AnthropicClient::builder("http://192.0.2.10:9000\\@127.0.0.1", "m").build().is_ok());
    assert!(AnthropicClient::builder("http://[::1]:9", "m").api_key(KEY).build().is_ok());
}

/// A plain-HTTP server that answers whatever it is sent, a TLS ClientHello included, with `400 Bad Request`, as
/// an HTTP server does.
#[cfg(feature = "rustls")]
async fn plain_http_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = tcp.read(&mut buf).await;
                let _ =
                    tcp.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
                let _ = tcp.shutdown().await;
            });
        }
    });
    port
}

#[cfg(feature = "rustls")]
#[tokio::test]
async fn https_to_a_plain_http_server_says_tls() {
    let port = plain_http_server().await;
    let model = OpenAiClient::builder(format!("https://127.0.0.1:{port}/v1"), "m").api_key(KEY).build().unwrap();
    let e = ask(&model).await.unwrap_err();
    assert!(matches!(e, ModelError::Connect { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("TLS handshake with 127.0.0.1 failed (is the server speaking https?)"), "{text}");
    // The cause underneath is still there.
    assert!(text.contains("InvalidContentType"), "{text}");
    assert!(!text.contains(KEY), "{text}");
}

#[tokio::test]
async fn a_closed_port_says_nothing_listens() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };
    let model = AnthropicClient::builder(format!("http://127.0.0.1:{port}"), "m").api_key(KEY).build().unwrap();
    let e = ask(&model).await.unwrap_err();
    assert!(matches!(e, ModelError::Connect { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains(&format!("connection refused: nothing listens at 127.0.0.1:{port}")), "{text}");
    assert!(!text.contains(KEY), "{text}");
}

#[tokio::test]
async fn a_refused_key_is_named_as_such() {
    for (status, api) in
        [("401 Unauthorized", "anthropic"), ("403 Forbidden", "gemini"), ("401 Unauthorized", "openai")]
    {
        let server = Loopback::start(response(status, &[], r#"{"error": {"message": "invalid key"}}"#)).await;
        let e = match api {
            "anthropic" => ask(&AnthropicClient::builder(&server.url, "m").api_key(KEY).build().unwrap()).await,
            "gemini" => {
                ask(&GeminiClient::builder(format!("{}/v1beta", server.url), "m").api_key(KEY).build().unwrap()).await
            }
            _ => ask(&OpenAiClient::builder(format!("{}/v1", server.url), "m").api_key(KEY).build().unwrap()).await,
        }
        .unwrap_err();
        let text = e.to_string();
        assert!(text.contains("the API key was refused"), "{api}: {text}");
        // The server's own words stay at the end, as before.
        assert!(text.ends_with(&format!("answered {}: invalid key", &status[..3])), "{api}: {text}");
        assert!(!text.contains(KEY), "{api}: {text}");
    }
}
