//! The checks a request passes before the SDK reads it, each a method of the service: `Host` and `Origin`, the
//! bearer token, a tool's scopes, and the rate limits. [`McpHttpService::handle`] runs them in their order.

#[cfg(feature = "auth")]
use std::sync::Arc;
use std::sync::Mutex;

use bytes::Bytes;
use hyper::header::{HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};

use super::envelope::Message;
use super::rate::{self, Refusal};
use super::responses::response;
#[cfg(feature = "auth")]
use super::responses::text_response;
use super::{McpHttpService, RATE_LIMITED, ResponseBody};
#[cfg(feature = "auth")]
use super::{SESSION_HEADER, auth, envelope::StandardHeaders};

/// The most `Host` and `Origin` pairs [`McpHttpService::check_host_and_origin`] remembers as allowed.
pub(super) const ALLOWED_PAIRS: usize = 16;

/// `Host` and `Origin` pairs the SDK has allowed, so that the same pair is not asked about on every request. The
/// SDK's answer depends on the two headers and the configuration alone, which does not change once the service is
/// made. Only allowed pairs are kept, at most [`ALLOWED_PAIRS`]: a refused one is asked about each time.
#[derive(Default)]
pub(super) struct AllowedPairs(Mutex<Vec<(HeaderValue, Option<HeaderValue>)>>);

impl AllowedPairs {
    fn contains(&self, host: &HeaderValue, origin: Option<&HeaderValue>) -> bool {
        let pairs = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        pairs.iter().any(|(h, o)| h == host && o.as_ref() == origin)
    }

    fn insert(&self, host: &HeaderValue, origin: Option<&HeaderValue>) {
        let mut pairs = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if pairs.len() < ALLOWED_PAIRS && !pairs.iter().any(|(h, o)| h == host && o.as_ref() == origin) {
            pairs.push((host.clone(), origin.cloned()));
        }
    }
}

impl McpHttpService {
    /// Checks a request's `Host` and `Origin` exactly as the SDK does, and nothing else of it: `None` when both are
    /// allowed, else the SDK's own refusal. The SDK is asked with a request of those two headers only, no body, and
    /// a method it serves on no path, which it answers `405` once they have passed.
    pub(super) async fn check_host_and_origin(
        &self,
        uri: &hyper::Uri,
        headers: &hyper::HeaderMap,
    ) -> Option<Response<ResponseBody>> {
        let (host, origin) = (headers.get(hyper::header::HOST), headers.get(hyper::header::ORIGIN));
        if let Some(host) = host
            && self.allowed_pairs.contains(host, origin)
        {
            return None;
        }
        let mut probe = Request::new(http_body_util::Empty::<Bytes>::new());
        *probe.method_mut() = Method::from_bytes(b"KEEL-PROBE").expect("a valid method name");
        *probe.uri_mut() = uri.clone();
        for name in [hyper::header::HOST, hyper::header::ORIGIN] {
            if let Some(value) = headers.get(&name) {
                probe.headers_mut().insert(name, value.clone());
            }
        }
        let answer = self.inner.handle(probe).await;
        if answer.status() != StatusCode::METHOD_NOT_ALLOWED {
            return Some(answer);
        }
        // Without `Host` the SDK reads the URI's authority: such a request is asked about each time.
        if let Some(host) = host {
            self.allowed_pairs.insert(host, origin);
        }
        None
    }

    /// Checks the request's bearer token (on a protected server) and, when it names a session, that the session is
    /// its principal's: the request with its [`auth::Principal`] in its extensions, or the refusal.
    #[cfg(feature = "auth")]
    pub(super) async fn authenticate<B>(&self, mut request: Request<B>) -> Result<Request<B>, Response<ResponseBody>> {
        let Some(resource) = &self.auth else { return Ok(request) };
        let authorization = request.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        // The client's address, so that a verifier can bound what one client makes it do (introspection).
        let client = request.extensions().get::<std::net::SocketAddr>().map(std::net::SocketAddr::ip);
        let principal = match resource.authenticate_from(client, authorization).await {
            Ok(p) => p,
            Err((status, challenge)) => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::UNAUTHORIZED);
                let text = if status == StatusCode::FORBIDDEN {
                    "Forbidden: the token lacks a scope this server requires\n"
                } else {
                    "Unauthorized: a valid bearer token is required\n"
                };
                let mut response = text_response(status, text.to_owned());
                if let Ok(value) = HeaderValue::from_str(&challenge) {
                    response.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, value);
                }
                return Err(response);
            }
        };
        // The session header is text (checked before); every session of a protected server has an owner.
        if let Some(id) = request.headers().get(&SESSION_HEADER).and_then(|v| v.to_str().ok())
            && self.sessions.owned_by(id, &principal.subject) == Some(false)
        {
            return Err(text_response(
                StatusCode::FORBIDDEN,
                "Forbidden: this session belongs to another principal\n".to_owned(),
            ));
        }
        request.extensions_mut().insert(principal);
        Ok(request)
    }

    /// On a protected server, a `tools/call` of a tool whose scopes the caller's token lacks: `403` with
    /// `error="insufficient_scope"` and the scopes to ask for (the token's and the tool's), before anything runs.
    #[cfg(feature = "auth")]
    pub(super) fn step_up(
        &self,
        parts: &hyper::http::request::Parts,
        message: Option<&Message<'_>>,
    ) -> Option<Response<ResponseBody>> {
        let resource = self.auth.as_ref()?;
        let principal = parts.extensions.get::<Arc<auth::Principal>>()?;
        if !self.server.executor().view().has_scoped_tools() {
            return None;
        }
        let name = match StandardHeaders::of(parts) {
            Some(headers) => headers.tool()?,
            None => message?.tool()?,
        };
        let executor = self.server.executor();
        let def = executor.view().get(name)?;
        // A tool outside the principal's view is refused as an unknown one, by the server: never named here.
        if !self.server.visible_to(principal, name) || def.allowed_with(&principal.scopes) {
            return None;
        }
        let missing: Vec<&str> = def.scopes().filter(|s| !principal.has_scope(s)).collect();
        let mut wanted: Vec<&str> = principal.scopes.iter().map(String::as_str).collect();
        wanted.extend(missing.iter().copied());
        let description = format!("calling `{name}` needs the scope {}", missing.join(" "));
        let challenge = resource.challenge(Some(("insufficient_scope", &description)), Some(&wanted.join(" ")));
        let mut response = text_response(StatusCode::FORBIDDEN, format!("Forbidden: {description}\n"));
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, value);
        }
        Some(response)
    }

    /// Whether the caller of the request may call `tool`: the server has it and, on a protected server, the
    /// principal's view holds it (its scopes were checked before).
    pub(super) fn may_call(&self, _parts: &hyper::http::request::Parts, tool: &str) -> bool {
        #[cfg(feature = "auth")]
        if let Some(principal) = _parts.extensions.get::<Arc<auth::Principal>>() {
            return self.server.visible_to(principal, tool);
        }
        self.server.executor().view().contains(tool)
    }

    /// The refusal of a rate limit: `429` with the time until the client's bucket has a request again, or `503`
    /// when the limit tracks as many clients as it may; a JSON-RPC error with the request's id either way.
    pub(super) fn rate_limited(
        &self,
        refusal: Refusal,
        message: Option<&Message<'_>>,
        tool: Option<&str>,
    ) -> Response<ResponseBody> {
        let (status, retry_after_s, text) = match refusal {
            Refusal::Wait(wait) => {
                let s = rate::retry_after_secs(wait);
                let text = match tool {
                    Some(tool) => format!("rate limit exceeded for calls of `{tool}`; retry in {s} s"),
                    None => format!("rate limit exceeded; retry in {s} s"),
                };
                (StatusCode::TOO_MANY_REQUESTS, s, text)
            }
            Refusal::Full => (
                StatusCode::SERVICE_UNAVAILABLE,
                self.limits.retry_after_s,
                format!(
                    "the server is rate limiting as many clients as it may; retry in {} s",
                    self.limits.retry_after_s
                ),
            ),
        };
        let mut data = serde_json::json!({"code": "rate_limited", "retry_after_s": retry_after_s});
        if let Some(tool) = tool {
            data["tool"] = serde_json::Value::from(tool);
        }
        let id = message.and_then(|m| m.id.clone()).unwrap_or(serde_json::Value::Null);
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": RATE_LIMITED, "message": text, "data": data},
        });
        let mut response = response(status, "application/json", body.to_string());
        response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(retry_after_s));
        response
    }
}
