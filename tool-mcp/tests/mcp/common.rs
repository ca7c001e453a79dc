//! A small MCP client over real HTTP for the protected server's tests: JSON-RPC requests in either protocol era,
//! with or without a bearer token, and what the server answered (status, `Retry-After`, the JSON-RPC message).

#![allow(dead_code)]

use std::net::IpAddr;

use serde_json::{Value, json};

/// The revision with sessions.
pub const SESSION_REVISION: &str = "2025-11-25";
/// The stateless revision.
pub const STATELESS_REVISION: &str = "2026-07-28";

/// A protocol era.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25: `initialize`, then requests on the session.
    Session,
    /// 2026-07-28: every request on its own, with its `_meta`.
    Stateless,
}

/// One answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub retry_after: Option<String>,
    pub session: Option<String>,
    /// The JSON-RPC message (the last SSE event with data, when the answer is a stream), or the text as a string.
    pub body: Value,
}

impl Reply {
    /// `Retry-After` in seconds.
    pub fn retry_after_s(&self) -> Option<u64> {
        self.retry_after.as_deref().and_then(|v| v.parse().ok())
    }

    /// The text of a tool call's result, read as JSON when it is.
    pub fn call_text(&self) -> Option<Value> {
        let text = self.body.pointer("/result/content/0/text")?.as_str()?;
        Some(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned())))
    }
}

/// A client of one MCP endpoint, in one era, with one token.
pub struct Peer {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
    pub era: Era,
    pub session: Option<String>,
}

impl Peer {
    pub fn new(url: &str, token: Option<&str>, era: Era) -> Peer {
        Peer::from(url, token, era, None)
    }

    /// A client whose connections come from `local` (another loopback address, for a server keyed by address).
    pub fn from(url: &str, token: Option<&str>, era: Era, local: Option<IpAddr>) -> Peer {
        let http = reqwest::Client::builder().local_address(local).build().expect("an HTTP client");
        Peer { http, url: url.to_owned(), token: token.map(str::to_owned), era, session: None }
    }

    /// In the session era, `initialize` and `notifications/initialized`: the `initialize` answer. Nothing in the
    /// stateless era.
    pub async fn open(&mut self) -> Option<Reply> {
        if self.era == Era::Stateless {
            return None;
        }
        let params = json!({"protocolVersion": SESSION_REVISION, "capabilities": {},
            "clientInfo": {"name": "keel-test", "version": "1"}});
        let reply = self.request(0, "initialize", params).await;
        if reply.status == 200 {
            self.session = reply.session.clone();
            let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            let ack = self.post(&note, "notifications/initialized", None).await;
            assert_eq!(ack.status, 202, "{ack:?}");
        }
        Some(reply)
    }

    /// One JSON-RPC request.
    pub async fn request(&self, id: u64, method: &str, mut params: Value) -> Reply {
        if self.era == Era::Stateless {
            let given = params["_meta"].as_object().cloned().unwrap_or_default();
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": STATELESS_REVISION,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "keel-test", "version": "1"}
            });
            params["_meta"].as_object_mut().expect("an object").extend(given);
        }
        // The `Mcp-Name` header names the tool of a call, and the task of a `tasks/*` request.
        let name = params["name"].as_str().or(params["taskId"].as_str()).map(str::to_owned);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.post(&body, method, name.as_deref()).await
    }

    /// A `tools/call` of `tool` with `arguments`.
    pub async fn call(&self, id: u64, tool: &str, arguments: Value) -> Reply {
        self.request(id, "tools/call", json!({"name": tool, "arguments": arguments})).await
    }

    /// The names `tools/list` answers, in order.
    pub async fn list(&self, id: u64) -> Vec<String> {
        let reply = self.request(id, "tools/list", json!({})).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        let tools = reply.body["result"]["tools"].as_array().unwrap_or_else(|| panic!("{reply:?}"));
        tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    }

    async fn post(&self, body: &Value, method: &str, name: Option<&str>) -> Reply {
        let revision = match self.era {
            Era::Session if method == "initialize" => None,
            Era::Session => Some(SESSION_REVISION),
            Era::Stateless => Some(STATELESS_REVISION),
        };
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(revision) = revision {
            request = request.header("mcp-protocol-version", revision);
        }
        if self.era == Era::Stateless {
            request = request.header("mcp-method", method);
            if let Some(name) = name {
                request = request.header("mcp-name", name);
            }
        }
        if let Some(token) = &self.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        let response = request.send().await.expect("the server answers");
        let status = response.status().as_u16();
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let (retry_after, session) = (header("retry-after"), header("mcp-session-id"));
        let text = response.text().await.expect("a body");
        let data = text
            .lines()
            .rev()
            .filter_map(|l| l.strip_prefix("data:").map(str::trim))
            .find(|d| !d.is_empty())
            .unwrap_or(&text)
            .to_owned();
        let body = serde_json::from_str(&data).unwrap_or(Value::String(text));
        Reply { status, retry_after, session, body }
    }
}
