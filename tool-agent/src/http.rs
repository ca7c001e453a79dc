//! The HTTP layer shared by the clients: one `reqwest` client with timeouts, a bounded body read, and every
//! failure mapped to a [`ModelError`].

use std::time::Duration;

use serde_json::Value;

use crate::model::ModelError;
use crate::wire::error_message;

/// Limits of the HTTP layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpConfig {
    /// The whole request, body included (default 120 s: a local model may take a while).
    pub timeout: Duration,
    /// Connecting (default 10 s).
    pub connect_timeout: Duration,
    /// The largest response body read (default 8 MiB).
    pub max_response_bytes: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            max_response_bytes: 8 * 1024 * 1024,
        }
    }
}

/// A configured client.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
    config: HttpConfig,
}

/// Checks that `base` is an `http://` or `https://` URL this build can reach, and trims a trailing `/`.
pub(crate) fn base_url(base: &str) -> Result<String, ModelError> {
    let trimmed = base.trim().trim_end_matches('/');
    let host = trimmed.strip_prefix("http://").or_else(|| trimmed.strip_prefix("https://"));
    if host.is_none_or(str::is_empty) {
        return Err(ModelError::Config { message: format!("base URL {base:?} is not an http:// or https:// URL") });
    }
    if trimmed.starts_with("https://") && !cfg!(feature = "rustls") {
        return Err(ModelError::Config {
            message: format!(
                "base URL {base:?} needs HTTPS; enable tool-agent's `rustls` feature (this build speaks plain HTTP only)"
            ),
        });
    }
    Ok(trimmed.to_owned())
}

/// What both clients' `build` check: the base URL (see [`base_url`]) and a non-empty model name. Returns the
/// trimmed base URL and the HTTP client.
pub(crate) fn client_parts(base: &str, model: &str, config: HttpConfig) -> Result<(String, Http), ModelError> {
    let base = base_url(base)?;
    if model.trim().is_empty() {
        return Err(ModelError::Config { message: "the model name is empty".into() });
    }
    Ok((base, Http::new(config)?))
}

/// The builder methods both clients share; the builder has `http: HttpConfig` and `extra: Map<String, Value>`.
macro_rules! http_builder_methods {
    ($examples:literal, $reserved:literal) => {
        /// The whole-request timeout (default 120 s).
        pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
            self.http.timeout = timeout;
            self
        }
        /// The connect timeout (default 10 s).
        pub fn connect_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.http.connect_timeout = timeout;
            self
        }
        /// The largest response body accepted (default 8 MiB).
        pub fn max_response_bytes(mut self, limit: usize) -> Self {
            self.http.max_response_bytes = limit;
            self
        }
        #[doc = concat!("Another top-level request field (", $examples, ", ...). ", $reserved, " are set by the client.")]
        pub fn field(mut self, key: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
            self.extra.insert(key.into(), value.into());
            self
        }
    };
}
pub(crate) use http_builder_methods;

impl Http {
    pub(crate) fn new(config: HttpConfig) -> Result<Http, ModelError> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| ModelError::Config { message: format!("cannot build the HTTP client: {e}") })?;
        Ok(Http { client, config })
    }

    pub(crate) fn config(&self) -> HttpConfig {
        self.config
    }

    fn transport_error(&self, url: &str, e: &reqwest::Error) -> ModelError {
        if e.is_timeout() {
            ModelError::Timeout { url: url.to_owned(), after: self.config.timeout }
        } else if e.is_connect() {
            ModelError::Connect { url: url.to_owned(), message: error_chain(e) }
        } else {
            ModelError::Http { url: url.to_owned(), message: error_chain(e) }
        }
    }

    /// POSTs `body` as JSON and reads a JSON answer. A non-success status is [`ModelError::Status`] (with the
    /// server's error message when it sent one); a body that is not JSON is [`ModelError::Malformed`].
    pub(crate) async fn post_json(&self, url: &str, body: &Value, bearer: Option<&str>) -> Result<Value, ModelError> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| ModelError::Config { message: format!("cannot serialize the request: {e}") })?;
        let mut request = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "application/json")
            .body(bytes);
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        let mut response = request.send().await.map_err(|e| self.transport_error(url, &e))?;
        let status = response.status();
        let limit = self.config.max_response_bytes;
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport_error(url, &e))? {
            if body.len() + chunk.len() > limit {
                return Err(ModelError::TooLarge { url: url.to_owned(), limit });
            }
            body.extend_from_slice(&chunk);
        }
        let parsed: Result<Value, _> = serde_json::from_slice(&body);
        if !status.is_success() {
            let message = match &parsed {
                Ok(v) => error_message(v).unwrap_or_else(|| crate::model::shorten(&v.to_string(), 300)),
                Err(_) => crate::model::shorten(&String::from_utf8_lossy(&body), 300),
            };
            return Err(ModelError::Status { url: url.to_owned(), status: status.as_u16(), message });
        }
        parsed.map_err(|e| {
            ModelError::malformed(format!("the body is not JSON (line {}, column {})", e.line(), e.column()))
        })
    }
}

/// The error and its sources, joined: reqwest's own text is often just "error sending request".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls() {
        assert_eq!(base_url("http://localhost:11434/").unwrap(), "http://localhost:11434");
        assert_eq!(base_url(" http://h/v1 ").unwrap(), "http://h/v1");
        assert!(base_url("localhost:11434").is_err());
        assert!(base_url("ftp://x").is_err());
        assert!(base_url("https://").is_err());
        assert_eq!(base_url("https://api.example.com/v1").is_ok(), cfg!(feature = "rustls"));
    }
}
