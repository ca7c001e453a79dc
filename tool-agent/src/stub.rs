//! [`StubServer`]: a local HTTP server that answers each API's path (Ollama's `/api/chat`, Chat Completions,
//! Responses, Anthropic Messages, Gemini `generateContent`) from recorded responses, so tests exercise the real
//! clients, HTTP included, without a model server.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use keel_tools_agent::stub::{OLLAMA_CHAT, StubServer};
//!
//! let stub = StubServer::start().await.unwrap();
//! stub.respond_jsonl(OLLAMA_CHAT, r#"{"message": {"role": "assistant", "content": "hi"}, "done": true}"#).unwrap();
//! let model = keel_tools_agent::OllamaClient::new(stub.url(), "recorded").unwrap();
//! // ... run an Agent over `model`, then look at what it sent:
//! assert!(stub.requests().is_empty());
//! # });
//! ```

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Ollama's chat path.
pub const OLLAMA_CHAT: &str = "/api/chat";
/// The Chat Completions path under `/v1` (as Ollama and most compatible servers serve it).
pub const OPENAI_CHAT: &str = "/v1/chat/completions";
/// The Responses path under `/v1`.
pub const OPENAI_RESPONSES: &str = "/v1/responses";
/// Anthropic's Messages path.
pub const ANTHROPIC_MESSAGES: &str = "/v1/messages";

/// Gemini's `generateContent` path of `model` under `/v1beta`.
pub fn gemini_generate(model: &str) -> String {
    format!("/v1beta/models/{model}:generateContent")
}

/// Gemini's streaming path of `model` under `/v1beta` (the client adds the query `?alt=sse`, which routes ignore).
pub fn gemini_stream(model: &str) -> String {
    format!("/v1beta/models/{model}:streamGenerateContent")
}

/// One scripted answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubResponse {
    /// The HTTP status.
    pub status: u16,
    /// The body, sent as `application/json`.
    pub body: String,
    /// A pause before answering (to test timeouts).
    pub delay: Option<Duration>,
    /// Response headers besides `content-type` (e.g. `retry-after`).
    pub headers: Vec<(String, String)>,
    /// The `content-type` (`application/json` unless a stream).
    pub content_type: String,
}

impl StubResponse {
    /// `200` with this JSON body.
    pub fn json(body: &Value) -> StubResponse {
        StubResponse::raw(200, body.to_string())
    }
    /// Any status and raw body.
    pub fn raw(status: u16, body: impl Into<String>) -> StubResponse {
        StubResponse {
            status,
            body: body.into(),
            delay: None,
            headers: Vec::new(),
            content_type: "application/json".to_owned(),
        }
    }
    /// `200` with a stream of server-sent events, each `(name, data)` written as `event: <name>` (left out when
    /// the name is empty) and `data: <data>`; the data is JSON, or `[DONE]` as a string.
    pub fn sse<'a>(events: impl IntoIterator<Item = (&'a str, Value)>) -> StubResponse {
        let mut body = String::new();
        for (name, data) in events {
            if !name.is_empty() {
                body.push_str("event: ");
                body.push_str(name);
                body.push('\n');
            }
            body.push_str("data: ");
            match data {
                Value::String(s) => body.push_str(&s),
                other => body.push_str(&other.to_string()),
            }
            body.push_str("\n\n");
        }
        StubResponse { content_type: "text/event-stream".to_owned(), ..StubResponse::raw(200, body) }
    }
    /// `200` with a recorded stream, as it was received: server-sent events (`text/event-stream`) or, when
    /// `json_lines`, Ollama's JSON Lines (`application/x-ndjson`).
    pub fn stream_text(text: impl Into<String>, json_lines: bool) -> StubResponse {
        let content_type = if json_lines { "application/x-ndjson" } else { "text/event-stream" };
        StubResponse { content_type: content_type.to_owned(), ..StubResponse::raw(200, text) }
    }
    /// `200` with a stream of JSON Lines (Ollama's), one value per line.
    pub fn json_lines(lines: impl IntoIterator<Item = Value>) -> StubResponse {
        let body: String = lines.into_iter().map(|v| format!("{v}\n")).collect();
        StubResponse { content_type: "application/x-ndjson".to_owned(), ..StubResponse::raw(200, body) }
    }
    /// Adds a response header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> StubResponse {
        self.headers.push((name.into(), value.into()));
        self
    }
    /// Answers after `delay`.
    #[must_use]
    pub fn delayed(mut self, delay: Duration) -> StubResponse {
        self.delay = Some(delay);
        self
    }
}

/// One request the stub received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// `POST`, `GET`, ...
    pub method: String,
    /// The path, e.g. `/api/chat`.
    pub path: String,
    /// The query string, if any (`alt=sse`).
    pub query: Option<String>,
    /// The body as JSON (`null` when it is not JSON).
    pub body: Value,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// Every header, names in lowercase, in the order received.
    pub headers: Vec<(String, String)>,
}

impl RecordedRequest {
    /// The first value of the header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Default)]
struct Script {
    routes: HashMap<String, VecDeque<StubResponse>>,
    requests: Vec<RecordedRequest>,
}

/// The running stub: answers each path's requests with its scripted responses, in order, and records every
/// request. Stops when dropped.
#[derive(Debug)]
pub struct StubServer {
    addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    stop: watch::Sender<bool>,
}

impl StubServer {
    /// Starts on `127.0.0.1`, on a free port, with nothing scripted (every request answers 500 until responses are
    /// added). Needs a Tokio runtime.
    pub async fn start() -> std::io::Result<StubServer> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let script = Arc::new(Mutex::new(Script::default()));
        let (stop, mut stopped) = watch::channel(false);
        let shared = script.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    _ = stopped.changed() => break,
                };
                let Ok((stream, _)) = accepted else { continue };
                let script = shared.clone();
                let mut stop_conn = stopped.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| answer(script.clone(), req));
                    let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                    tokio::select! {
                        _ = conn => {}
                        _ = stop_conn.changed() => {}
                    }
                });
            }
        });
        Ok(StubServer { addr, script, stop })
    }

    /// `http://127.0.0.1:<port>`: the base URL of Ollama and Anthropic (the OpenAI base is this plus `/v1`,
    /// Gemini's this plus `/v1beta`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Appends a response for `path`.
    pub fn respond(&self, path: &str, response: StubResponse) {
        self.lock().routes.entry(path.to_owned()).or_default().push_back(response);
    }

    /// Appends one `200` response per non-blank line of JSON Lines text (each line a recorded response body).
    pub fn respond_jsonl(&self, path: &str, text: &str) -> Result<usize, String> {
        let mut n = 0;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
            self.respond(path, StubResponse::json(&v));
            n += 1;
        }
        Ok(n)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    /// How many scripted responses `path` has left.
    pub fn remaining(&self, path: &str) -> usize {
        self.lock().routes.get(path).map_or(0, VecDeque::len)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for StubServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

async fn answer(script: Arc<Mutex<Script>>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let method = req.method().to_string();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().map(str::to_owned);
    let authorization = req.headers().get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let next = {
        let mut s = script.lock().unwrap_or_else(|p| p.into_inner());
        s.requests.push(RecordedRequest { method, path: path.clone(), query, body, authorization, headers });
        match s.routes.get_mut(&path) {
            Some(queue) => queue.pop_front().unwrap_or_else(|| {
                StubResponse::raw(
                    500,
                    json!({"error": format!("stub: no recorded response left for {path}")}).to_string(),
                )
            }),
            None => StubResponse::raw(404, json!({"error": format!("stub: nothing is served at {path}")}).to_string()),
        }
    };
    if let Some(d) = next.delay {
        tokio::time::sleep(d).await;
    }
    let mut response = Response::new(Full::new(Bytes::from(next.body)));
    *response.status_mut() = StatusCode::from_u16(next.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = hyper::header::HeaderValue::from_str(&next.content_type)
        .unwrap_or_else(|_| hyper::header::HeaderValue::from_static("application/json"));
    response.headers_mut().insert("content-type", content_type);
    for (name, value) in &next.headers {
        if let (Ok(name), Ok(value)) =
            (hyper::header::HeaderName::from_bytes(name.as_bytes()), hyper::header::HeaderValue::from_str(value))
        {
            response.headers_mut().append(name, value);
        }
    }
    Ok(response)
}
