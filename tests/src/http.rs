//! A bare HTTP/1.1 client over one keep-alive connection, for tests that need to see exactly what an MCP server
//! answers on the wire (statuses, headers, each SSE event of a response stream) and to control their connections.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::HeaderMap;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// The protocol revision with sessions that the tests speak.
pub const SESSION_REVISION: &str = "2025-11-25";
/// The stateless protocol revision.
pub const STATELESS_REVISION: &str = "2026-07-28";

/// One answer: status, headers and the whole body.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    /// The session id the server assigned, if any.
    pub fn session(&self) -> Option<String> {
        self.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned)
    }

    /// The JSON of each `data:` event of an SSE body (events without data, such as the priming event, are left
    /// out), or the body itself when it is plain JSON.
    pub fn messages(&self) -> Vec<Value> {
        let text = String::from_utf8_lossy(&self.body);
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            return vec![v];
        }
        text.split("\n\n")
            .filter_map(|event| {
                let data: Vec<&str> = event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect();
                if data.is_empty() || data.iter().all(|d| d.is_empty()) {
                    return None;
                }
                serde_json::from_str(&data.join("\n")).ok()
            })
            .collect()
    }
}

/// One HTTP/1.1 connection to `addr`.
pub struct RawClient {
    send: SendRequest<Full<Bytes>>,
    pub local: SocketAddr,
    addr: SocketAddr,
    path: String,
}

impl RawClient {
    /// Connects to `http://addr/path`.
    pub async fn connect(addr: SocketAddr, path: &str) -> std::io::Result<RawClient> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        let local = stream.local_addr()?;
        let (send, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(std::io::Error::other)?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(RawClient { send, local, addr, path: path.to_owned() })
    }

    /// Sends one request and reads its whole answer.
    pub async fn request(
        &mut self,
        method: Method,
        session: Option<&str>,
        protocol: Option<&str>,
        body: Option<&Value>,
    ) -> Result<Answer, String> {
        self.request_with(method, session, protocol, &[], body).await
    }

    /// Sends one request with extra headers and reads its whole answer.
    pub async fn request_with(
        &mut self,
        method: Method,
        session: Option<&str>,
        protocol: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Answer, String> {
        let mut builder = Request::builder()
            .method(method)
            .uri(format!("http://{}{}", self.addr, self.path))
            .header("accept", "application/json, text/event-stream");
        // The `Host` the server sees: the loopback address, unless the test names another.
        if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
            builder = builder.header("host", format!("127.0.0.1:{}", self.addr.port()));
        }
        if body.is_some() {
            builder = builder.header("content-type", "application/json");
        }
        if let Some(session) = session {
            builder = builder.header("mcp-session-id", session);
        }
        if let Some(protocol) = protocol {
            builder = builder.header("mcp-protocol-version", protocol);
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let bytes = body.map(|b| Bytes::from(serde_json::to_vec(b).unwrap())).unwrap_or_default();
        self.send(builder, bytes).await
    }

    /// POSTs `body` as it is, bytes the test wrote (a JSON text no serializer would write, or not JSON).
    pub async fn post_bytes(
        &mut self,
        session: Option<&str>,
        protocol: Option<&str>,
        body: &[u8],
    ) -> Result<Answer, String> {
        let mut builder = Request::builder()
            .method(Method::POST)
            .uri(format!("http://{}{}", self.addr, self.path))
            .header("accept", "application/json, text/event-stream")
            .header("host", format!("127.0.0.1:{}", self.addr.port()))
            .header("content-type", "application/json");
        if let Some(session) = session {
            builder = builder.header("mcp-session-id", session);
        }
        if let Some(protocol) = protocol {
            builder = builder.header("mcp-protocol-version", protocol);
        }
        self.send(builder, Bytes::copy_from_slice(body)).await
    }

    async fn send(&mut self, builder: hyper::http::request::Builder, bytes: Bytes) -> Result<Answer, String> {
        let request = builder.body(Full::new(bytes)).map_err(|e| e.to_string())?;
        self.send.ready().await.map_err(|e| e.to_string())?;
        let response = self.send.send_request(request).await.map_err(|e| e.to_string())?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok(Answer { status: parts.status, headers: parts.headers, body })
    }

    /// POSTs one JSON-RPC message.
    pub async fn post(
        &mut self,
        session: Option<&str>,
        protocol: Option<&str>,
        body: &Value,
    ) -> Result<Answer, String> {
        self.request(Method::POST, session, protocol, Some(body)).await
    }

    /// POSTs one stateless request (revision 2026-07-28), with the headers that revision requires: the protocol
    /// version, `Mcp-Method`, and `Mcp-Name` for a tool call.
    pub async fn post_stateless(&mut self, body: &Value) -> Result<Answer, String> {
        let method = body["method"].as_str().unwrap_or_default().to_owned();
        let name = body["params"]["name"].as_str().map(str::to_owned);
        let mut headers = vec![("mcp-method", method.as_str())];
        if let Some(name) = &name {
            headers.push(("mcp-name", name.as_str()));
        }
        self.request_with(Method::POST, None, Some(STATELESS_REVISION), &headers, Some(body)).await
    }

    /// `initialize` (revision 2025-11-25); the answer carries the session id.
    pub async fn initialize(&mut self, client: &str) -> Result<Answer, String> {
        self.post(None, None, &initialize_request(client)).await
    }

    /// `initialize`, then `notifications/initialized`: the id of a session ready for requests.
    pub async fn open_session(&mut self, client: &str) -> Result<String, String> {
        let answer = self.initialize(client).await?;
        let session = answer.session().ok_or_else(|| format!("no session: {answer:?}"))?;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let ack = self.post(Some(&session), Some(SESSION_REVISION), &note).await?;
        if ack.status != StatusCode::ACCEPTED {
            return Err(format!("notifications/initialized answered {ack:?}"));
        }
        Ok(session)
    }

    /// `DELETE` of a session.
    pub async fn delete(&mut self, session: &str) -> Result<Answer, String> {
        self.request(Method::DELETE, Some(session), Some(SESSION_REVISION), None).await
    }
}

/// The `initialize` request of a client named `client`.
pub fn initialize_request(client: &str) -> Value {
    json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": SESSION_REVISION,
            "capabilities": {},
            "clientInfo": {"name": client, "version": "0.1"}
        }
    })
}

/// A `tools/call` request over a session.
pub fn call_request(id: u64, tool: &str, arguments: Value, progress_token: Option<&str>) -> Value {
    let mut params = json!({"name": tool, "arguments": arguments});
    if let Some(token) = progress_token {
        params["_meta"] = json!({"progressToken": token});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// A stateless `tools/call` request (revision 2026-07-28: the protocol version and the client's capabilities in
/// `_meta`).
pub fn stateless_call_request(id: u64, tool: &str, arguments: Value) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "name": tool, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": STATELESS_REVISION,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0.1"}
            }
        }
    })
}

/// `GET url` (`http://host:port/path`) over a connection of its own: the status and the body.
pub async fn get(url: &str) -> Result<(u16, String), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("not an http:// URL: {url}"))?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    let mut stream = tokio::net::TcpStream::connect(authority).await.map_err(|e| format!("{url}: {e}"))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.map_err(|e| e.to_string())?;
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or("no status line")?;
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    Ok((status, body))
}
