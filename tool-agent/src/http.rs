//! The HTTP layer shared by the clients: one `reqwest` client with timeouts, a bounded body read, and every
//! failure mapped to a [`ModelError`].

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::model::{ModelError, error_message};

/// Limits of the HTTP layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// The whole request, body included (default 120 s: a local model may take a while).
    pub timeout: Duration,
    /// Connecting (default 10 s).
    pub connect_timeout: Duration,
    /// The largest response body read (default 8 MiB).
    pub max_response_bytes: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            max_response_bytes: 8 * 1024 * 1024,
        }
    }
}

/// How a client sends its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth {
    /// `Authorization: Bearer <key>` (OpenAI, Ollama).
    Bearer,
    /// The key as the value of this header (`x-api-key` for Anthropic, `x-goog-api-key` for Gemini).
    Header(&'static str),
}

/// A configured client.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
    config: HttpLimits,
}

/// Checks that `base` is an `http://` or `https://` URL (any case) with a host, without a query or fragment (the
/// client appends the API's path), that this build can reach, and trims a trailing `/`. It is parsed as the request
/// parses it (reqwest's [`Url`](reqwest::Url)).
pub(crate) fn base_url(base: &str) -> Result<String, ModelError> {
    let trimmed = base.trim().trim_end_matches('/');
    let parsed = reqwest::Url::parse(trimmed)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty()));
    let Some(parsed) = parsed else {
        return Err(ModelError::config(format!("base URL {base:?} is not an http:// or https:// URL")));
    };
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(ModelError::config(format!(
            "base URL {base:?} has a query or a fragment; the client appends the API's path to it, so leave them out"
        )));
    }
    if parsed.scheme() == "https" && !cfg!(feature = "rustls") {
        return Err(ModelError::config(format!(
            "base URL {base:?} needs HTTPS; enable keel-tools-agent's `rustls` feature (this build speaks plain HTTP only)"
        )));
    }
    Ok(trimmed.to_owned())
}

/// What both clients' `build` check: the base URL (see [`base_url`]), a non-empty model name and the extra root
/// certificates (PEM). Returns the trimmed base URL and the HTTP client.
pub(crate) fn client_parts(
    base: &str,
    model: &str,
    config: HttpLimits,
    roots: &[Vec<u8>],
) -> Result<(String, Http), ModelError> {
    let base = base_url(base)?;
    if model.trim().is_empty() {
        return Err(ModelError::config("the model name is empty"));
    }
    Ok((base, Http::with_roots(config, roots)?))
}

/// The TLS configuration of one client (feature `rustls`): keel-tools-tls's, Mozilla's roots plus `extra` (PEM,
/// one or more certificates each), the `aws-lc-rs` provider given to this configuration only.
#[cfg(feature = "rustls")]
pub(crate) fn tls_config(extra: &[Vec<u8>]) -> Result<rustls::ClientConfig, ModelError> {
    keel_tools_tls::client_config(extra)
        .map_err(|e| ModelError::Config { message: e.to_string(), source: Some(Arc::new(e)) })
}

/// The builder methods every client shares; the builder has `settings: Settings`.
macro_rules! http_builder_methods {
    ($examples:literal, $reserved:literal) => {
        /// The whole-request timeout (default 120 s).
        pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.http.timeout = timeout;
            self
        }
        /// The connect timeout (default 10 s).
        pub fn connect_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.http.connect_timeout = timeout;
            self
        }
        /// Whether each turn's answer is streamed (default off): text and tool-call deltas go to the turn's
        /// [`StreamSink`](crate::StreamSink) as they arrive, and the whole answer, once it is complete, is read
        /// as a whole response is. A stream cut short is an error worth a retry.
        pub fn stream(mut self, stream: bool) -> Self {
            self.settings.stream = stream;
            self
        }
        /// The largest response body accepted (default 8 MiB), streamed or not.
        pub fn max_response_bytes(mut self, limit: usize) -> Self {
            self.settings.http.max_response_bytes = limit;
            self
        }
        /// Trusts the CA certificate(s) in `pem` (PEM text, one or more `CERTIFICATE` blocks) for `https://`, in
        /// addition to the built-in Mozilla roots: for a server whose certificate a private CA signed. Checked by
        /// `build`, which fails with [`ModelError::Config`](crate::ModelError::Config) when `pem` holds no
        /// certificate. Feature `rustls`.
        #[cfg(feature = "rustls")]
        pub fn add_root_certificate(mut self, pem: impl AsRef<[u8]>) -> Self {
            self.settings.roots.push(pem.as_ref().to_vec());
            self
        }
        #[doc = concat!("Another top-level request field (", $examples, ", ...). ", $reserved, " are set by the client.")]
        pub fn field(mut self, key: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
            self.settings.extra.insert(key.into(), value.into());
            self
        }
    };
}
pub(crate) use http_builder_methods;

impl Http {
    #[cfg(test)]
    pub(crate) fn new(config: HttpLimits) -> Result<Http, ModelError> {
        Http::with_roots(config, &[])
    }

    /// A client with `config`'s limits that also trusts the CA certificates `roots` (PEM; ignored without the
    /// `rustls` feature, where no `https://` URL is accepted).
    pub(crate) fn with_roots(config: HttpLimits, roots: &[Vec<u8>]) -> Result<Http, ModelError> {
        // No redirect is followed: reqwest drops only `Authorization` and `Cookie` on the way to another host, and
        // a key sent as `x-api-key` or `x-goog-api-key` would go wherever a 307 points, `http://` included. A
        // redirect is answered as a status error that names its target (see `redirect_error`).
        let builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.connect_timeout)
            .redirect(reqwest::redirect::Policy::none());
        #[cfg(feature = "rustls")]
        let builder = builder.tls_backend_preconfigured(tls_config(roots)?);
        #[cfg(not(feature = "rustls"))]
        let _ = roots;
        let client = builder.build().map_err(|e| ModelError::Config {
            message: format!("cannot build the HTTP client: {e}"),
            source: Some(Arc::new(e)),
        })?;
        Ok(Http { client, config })
    }

    pub(crate) fn limits(&self) -> HttpLimits {
        self.config
    }

    /// The error of a request that failed in the transport, keeping reqwest's error as its source.
    fn transport_error(&self, url: &str, e: reqwest::Error) -> ModelError {
        let url = url.to_owned();
        if e.is_timeout() {
            // A connect that timed out ran into the connect timeout, the rest into the whole request's.
            let after = if e.is_connect() { self.config.connect_timeout } else { self.config.timeout };
            ModelError::Timeout { url, after, source: Arc::new(e) }
        } else if e.is_connect() {
            ModelError::Connect { url, source: Arc::new(e) }
        } else {
            ModelError::Http { url, source: Arc::new(e) }
        }
    }

    /// POSTs `body` as JSON, with the key as its [`Auth`] says and the extra `headers`, and reads a JSON answer. A
    /// non-success status is [`ModelError::Status`] (with the server's error message when it sent one, and the
    /// wait it asked for, see [`retry_after`]); a body that is not JSON is [`ModelError::Malformed`].
    pub(crate) async fn post_json(
        &self,
        url: &str,
        body: &Value,
        key: Option<(&crate::key::ApiKey, Auth)>,
        headers: &[(&'static str, &'static str)],
    ) -> Result<Value, ModelError> {
        let mut response = self.send(url, body, key, headers, "application/json").await?;
        let status = response.status();
        if status.is_redirection() {
            return Err(redirect_error(url, &response, key.is_some()));
        }
        let wait = if status.is_success() { None } else { retry_after(response.headers(), status.as_u16()) };
        let bytes = self.read_all(url, &mut response).await?;
        let parsed: Result<Value, _> = serde_json::from_slice(&bytes);
        if !status.is_success() {
            return Err(status_error(url, status.as_u16(), wait, &bytes));
        }
        parsed.map_err(|e| ModelError::Malformed {
            message: format!("the body is not JSON (line {}, column {})", e.line(), e.column()),
            source: Some(Arc::new(e)),
        })
    }

    /// POSTs `body` as JSON asking for a stream (`accept`: `text/event-stream`, `application/x-ndjson`) and hands
    /// each chunk of a success response's body to `feed` as it arrives, under the same byte limit as a whole
    /// answer. A non-success status is read whole and answered as [`post_json`](Http::post_json) does.
    pub(crate) async fn post_stream(
        &self,
        url: &str,
        body: &Value,
        key: Option<(&crate::key::ApiKey, Auth)>,
        headers: &[(&'static str, &'static str)],
        accept: &'static str,
        feed: &mut (dyn FnMut(&[u8]) -> Result<(), ModelError> + Send),
    ) -> Result<(), ModelError> {
        let mut response = self.send(url, body, key, headers, accept).await?;
        let status = response.status();
        if status.is_redirection() {
            return Err(redirect_error(url, &response, key.is_some()));
        }
        if status.is_success() {
            return self.read(url, &mut response, feed).await;
        }
        let wait = retry_after(response.headers(), status.as_u16());
        let bytes = self.read_all(url, &mut response).await?;
        Err(status_error(url, status.as_u16(), wait, &bytes))
    }

    async fn send(
        &self,
        url: &str,
        body: &Value,
        key: Option<(&crate::key::ApiKey, Auth)>,
        headers: &[(&'static str, &'static str)],
        accept: &'static str,
    ) -> Result<reqwest::Response, ModelError> {
        let bytes = serde_json::to_vec(body).map_err(|e| ModelError::Config {
            message: format!("cannot serialize the request: {e}"),
            source: Some(Arc::new(e)),
        })?;
        let mut request = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, accept)
            .body(bytes);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        match key {
            // reqwest marks the header sensitive: it is left out of its Debug output.
            Some((key, Auth::Bearer)) => request = request.bearer_auth(key.expose()),
            Some((key, Auth::Header(name))) => {
                let mut value = reqwest::header::HeaderValue::from_str(key.expose())
                    .map_err(|_| ModelError::config("the API key holds characters an HTTP header cannot carry"))?;
                value.set_sensitive(true);
                request = request.header(name, value);
            }
            None => {}
        }
        request.send().await.map_err(|e| self.transport_error(url, e))
    }

    /// The whole body, at most `max_response_bytes`.
    async fn read_all(&self, url: &str, response: &mut reqwest::Response) -> Result<Vec<u8>, ModelError> {
        let mut bytes = Vec::new();
        self.read(url, response, &mut |chunk| {
            bytes.extend_from_slice(chunk);
            Ok(())
        })
        .await?;
        Ok(bytes)
    }

    /// Reads the body chunk by chunk into `feed`, at most `max_response_bytes` in all.
    async fn read(
        &self,
        url: &str,
        response: &mut reqwest::Response,
        feed: &mut (dyn FnMut(&[u8]) -> Result<(), ModelError> + Send),
    ) -> Result<(), ModelError> {
        let limit = self.config.max_response_bytes;
        let mut read = 0;
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport_error(url, e))? {
            read += chunk.len();
            if read > limit {
                return Err(ModelError::TooLarge { url: url.to_owned(), limit });
            }
            feed(&chunk)?;
        }
        Ok(())
    }
}

/// The error of a redirect, which is never followed: a [`ModelError::Status`] whose message names where it points
/// (resolved against `url`, without its query, fragment or user name, which may hold a credential) and says to use
/// that URL. `keyed`: the request carried an API key.
fn redirect_error(url: &str, response: &reqwest::Response, keyed: bool) -> ModelError {
    let location = response.headers().get(reqwest::header::LOCATION).map(|v| v.to_str().map(str::trim));
    let target = match location {
        None => "nowhere (it sent no Location)".to_owned(),
        Some(Err(_)) => "a Location that is not text".to_owned(),
        Some(Ok(location)) => match reqwest::Url::parse(url).and_then(|base| base.join(location)) {
            Ok(mut target) => {
                target.set_query(None);
                target.set_fragment(None);
                let _ = target.set_username("");
                let _ = target.set_password(None);
                crate::model::shorten(target.as_str(), 200)
            }
            Err(_) => format!("{:?}, which is not a URL", crate::model::shorten(location, 200)),
        },
    };
    let with = if keyed { " with an API key" } else { "" };
    ModelError::Status {
        url: url.to_owned(),
        status: response.status().as_u16(),
        message: format!(
            "the model server redirected to {target}; keel does not follow redirects{with}: use the final URL"
        ),
        retry_after: None,
    }
}

/// The error of a non-success status: the server's error message when the body has one, else its start.
fn status_error(url: &str, status: u16, retry_after: Option<Duration>, body: &[u8]) -> ModelError {
    let parsed = serde_json::from_slice::<Value>(body);
    let message = match &parsed {
        Ok(v) => error_message(v).unwrap_or_else(|| crate::model::shorten(&v.to_string(), 300)),
        Err(_) => crate::model::shorten(&String::from_utf8_lossy(body), 300),
    };
    let retry_after = retry_after.or_else(|| parsed.ok().as_ref().and_then(body_retry_delay));
    ModelError::Status { url: url.to_owned(), status, message, retry_after }
}

/// The wait a failed response's headers ask for, from (first that is present) `retry-after-ms` (OpenAI's and
/// Anthropic's SDKs read it), `Retry-After` (seconds or an HTTP date), and on a 429 the rate-limit reset headers:
/// OpenAI's `x-ratelimit-reset-requests`/`-tokens` (`1s`, `6m0s`, `250ms`) and Anthropic's
/// `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset` (RFC 3339 times), the latest of them.
/// Gemini says it in the body instead ([`body_retry_delay`]).
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap, status: u16) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(wait) =
        text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()).and_then(|ms| wait_of_secs(ms / 1000.0))
    {
        return Some(wait);
    }
    if let Some(v) = text("retry-after") {
        if let Some(wait) = v.parse::<f64>().ok().and_then(wait_of_secs) {
            return Some(wait);
        }
        if let Ok(at) = httpdate::parse_http_date(v) {
            return Some(wait_until(at, std::time::SystemTime::now()));
        }
    }
    if status == 429 {
        let openai = ["x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"]
            .into_iter()
            .filter_map(|name| text(name).and_then(go_duration));
        let now = std::time::SystemTime::now();
        let anthropic = ["requests", "tokens", "input-tokens", "output-tokens"].into_iter().filter_map(|what| {
            let at = rfc3339(text(&format!("anthropic-ratelimit-{what}-reset"))?)?;
            Some(wait_until(at, now))
        });
        return openai.chain(anthropic).max();
    }
    None
}

/// The longest wait a server's answer is read as asking for: a day. A longer one (any number of seconds, however
/// large) reads as a day, so that a wait is always one a `Duration` and an `Instant` can hold; the loop itself waits
/// at most its [`RetryPolicy::max_wait`](crate::RetryPolicy::max_wait) (60 s by default) and ends the turn when the
/// server asks for more.
pub(crate) const MAX_SERVER_WAIT: Duration = Duration::from_secs(24 * 60 * 60);

/// A wait of `secs` seconds as a server wrote it: `None` for a negative, infinite or NaN number, at most
/// [`MAX_SERVER_WAIT`] otherwise.
fn wait_of_secs(secs: f64) -> Option<Duration> {
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    Some(Duration::try_from_secs_f64(secs).map_or(MAX_SERVER_WAIT, |wait| wait.min(MAX_SERVER_WAIT)))
}

/// The wait from `now` until `at` (none when `at` has passed), at most [`MAX_SERVER_WAIT`].
fn wait_until(at: std::time::SystemTime, now: std::time::SystemTime) -> Duration {
    at.duration_since(now).unwrap_or(Duration::ZERO).min(MAX_SERVER_WAIT)
}

/// The wait a Gemini error body asks for: `error.details[]`'s `google.rpc.RetryInfo` `retryDelay` (`"37s"`).
pub(crate) fn body_retry_delay(body: &Value) -> Option<Duration> {
    body.pointer("/error/details")?
        .as_array()?
        .iter()
        .filter(|d| d.get("@type").and_then(Value::as_str).is_some_and(|t| t.ends_with("google.rpc.RetryInfo")))
        .find_map(|d| d.get("retryDelay").and_then(Value::as_str).and_then(go_duration))
}

/// A time in RFC 3339 (`2026-12-05T21:13:08Z`, `2026-12-05T21:13:08.5+01:00`), or `None`.
fn rfc3339(text: &str) -> Option<std::time::SystemTime> {
    let b = text.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(r)?;
        if part.bytes().all(|c| c.is_ascii_digit()) { part.parse().ok() } else { None }
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut fraction = 0.0;
    if let Some(f) = rest.strip_prefix('.') {
        let digits = f.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        fraction = format!("0.{}", &f[..digits]).parse().ok()?;
        rest = &f[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (h, m) = rest[1..].split_once(':')?;
            if h.len() != 2 || m.len() != 2 {
                return None;
            }
            sign * (h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60)
        }
    };
    // Days from 1970-01-01 to the date (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset;
    let secs = u64::try_from(secs).ok()?;
    std::time::UNIX_EPOCH
        .checked_add(Duration::from_secs(secs))?
        .checked_add(Duration::try_from_secs_f64(fraction).ok()?)
}

/// A duration as OpenAI's rate-limit headers write it: `1s`, `6m0s`, `1h2m3.5s`, `250ms`; at most
/// [`MAX_SERVER_WAIT`].
fn go_duration(text: &str) -> Option<Duration> {
    let mut total = 0.0f64;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..end].parse().ok()?;
        rest = &rest[end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[unit_end..];
    }
    wait_of_secs(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_a_failed_response_asks_for() {
        use reqwest::header::{HeaderMap, HeaderValue};
        fn at(pairs: &[(&'static str, &'static str)], status: u16) -> Option<Duration> {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, HeaderValue::from_static(v));
            }
            retry_after(&h, status)
        }
        assert_eq!(at(&[("retry-after", "2")], 429), Some(Duration::from_secs(2)));
        assert_eq!(at(&[("retry-after-ms", "150"), ("retry-after", "9")], 503), Some(Duration::from_millis(150)));
        assert_eq!(at(&[("retry-after", "0.5")], 529), Some(Duration::from_millis(500)));
        assert_eq!(at(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")], 429), Some(Duration::ZERO), "in the past");
        let reset = [("x-ratelimit-reset-requests", "1s"), ("x-ratelimit-reset-tokens", "6m0s")];
        assert_eq!(at(&reset, 429), Some(Duration::from_secs(360)));
        assert_eq!(at(&reset, 500), None, "reset headers speak of rate limits only");
        assert_eq!(at(&[("x-ratelimit-reset-tokens", "250ms")], 429), Some(Duration::from_millis(250)));
        for bad in ["", "-1", "soon", "1x", "NaN"] {
            let pairs = [("retry-after", bad), ("x-ratelimit-reset-requests", bad)];
            assert_eq!(at(&pairs, 429), None, "{bad:?}");
        }
        assert_eq!(go_duration("1h2m3.5s"), Some(Duration::from_secs_f64(3723.5)));
        // Anthropic's reset times, RFC 3339: one in the past waits nothing, and the latest counts.
        let past = [("anthropic-ratelimit-requests-reset", "2015-10-21T07:28:00Z")];
        assert_eq!(at(&past, 429), Some(Duration::ZERO));
        let mut h = HeaderMap::new();
        let in_a_minute = std::time::SystemTime::now() + Duration::from_secs(61);
        let secs = in_a_minute.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let stamp = rfc3339_of(secs);
        h.insert("anthropic-ratelimit-tokens-reset", HeaderValue::from_str(&stamp).unwrap());
        h.insert("anthropic-ratelimit-requests-reset", HeaderValue::from_static("2015-10-21T07:28:00Z"));
        let wait = retry_after(&h, 429).expect("a wait");
        assert!(wait > Duration::from_secs(55) && wait <= Duration::from_secs(61), "{wait:?} from {stamp}");
    }

    #[test]
    fn a_wait_is_a_number_a_duration_holds_and_at_most_a_day() {
        use reqwest::header::{HeaderMap, HeaderValue};
        let at = |name: &'static str, value: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(name, HeaderValue::from_static(value));
            retry_after(&h, 429)
        };
        for (name, value) in [
            ("retry-after", "1e20"),
            ("retry-after", "86401"),
            ("retry-after-ms", "1e300"),
            ("retry-after-ms", "1.7976931348623157e308"),
            ("x-ratelimit-reset-tokens", "100000000000000000000000h"),
            ("anthropic-ratelimit-requests-reset", "9999-12-31T23:59:59Z"),
            ("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT"),
        ] {
            assert_eq!(at(name, value), Some(MAX_SERVER_WAIT), "{name}: {value}");
        }
        for value in ["-0.5", "inf", "-inf", "NaN", "1e400"] {
            assert_eq!(at("retry-after", value), None, "{value}");
            assert_eq!(at("retry-after-ms", value), None, "{value}");
        }
        assert_eq!(wait_of_secs(86_399.5), Some(Duration::from_secs_f64(86_399.5)));
        assert_eq!(go_duration(&format!("{}s", "9".repeat(400))), None, "infinite");
        let body = serde_json::json!({"error": {"details": [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "100000000000000000000000000000s"}]}});
        assert_eq!(body_retry_delay(&body), Some(MAX_SERVER_WAIT));
    }

    /// `secs` since the epoch as RFC 3339, the other way round from [`rfc3339`], for the test.
    fn rfc3339_of(secs: u64) -> String {
        let days = (secs / 86_400) as i64;
        let rem = secs % 86_400;
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = doy - (153 * mp + 2) / 5 + 1;
        let m = if mp < 10 { mp + 3 } else { mp - 9 };
        let y = yoe + era * 400 + i64::from(m <= 2);
        format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
    }

    #[test]
    fn rfc3339_times() {
        let at = |t: &str| rfc3339(t).map(|t| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64());
        assert_eq!(at("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(at("2015-10-21T07:28:00Z"), Some(1_445_412_480.0));
        assert_eq!(at("2015-10-21T09:28:00+02:00"), Some(1_445_412_480.0));
        assert_eq!(at("2015-10-21T07:28:00.25Z"), Some(1_445_412_480.25));
        assert_eq!(at("2024-02-29T00:00:00Z"), Some(1_709_164_800.0));
        for bad in [
            "",
            "2015-10-21",
            "2015-13-21T07:28:00Z",
            "2015-10-21T07:28:00",
            "2015-10-21T07:28:00.Z",
            "x015-10-21T07:28:00Z",
        ] {
            assert_eq!(at(bad), None, "{bad:?}");
        }
        assert_eq!(rfc3339_of(1_445_412_480), "2015-10-21T07:28:00Z");
    }

    #[test]
    fn gemini_names_its_wait_in_the_body() {
        let body = serde_json::json!({"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}});
        assert_eq!(body_retry_delay(&body), Some(Duration::from_secs(37)));
        let e = status_error("u", 429, None, body.to_string().as_bytes());
        assert!(matches!(e, ModelError::Status { retry_after: Some(w), .. } if w == Duration::from_secs(37)), "{e:?}");
        // A header's wait comes first.
        let e = status_error("u", 429, Some(Duration::from_secs(2)), body.to_string().as_bytes());
        assert!(matches!(e, ModelError::Status { retry_after: Some(w), .. } if w == Duration::from_secs(2)), "{e:?}");
        assert_eq!(body_retry_delay(&serde_json::json!({"error": {"message": "x"}})), None);
    }

    #[test]
    fn base_urls() {
        assert_eq!(base_url("http://localhost:11434/").unwrap(), "http://localhost:11434");
        assert_eq!(base_url(" http://h/v1 ").unwrap(), "http://h/v1");
        assert!(base_url("localhost:11434").is_err());
        assert!(base_url("ftp://x").is_err());
        assert!(base_url("https://").is_err());
        assert!(base_url("http://[::1").is_err());
        assert!(base_url("http://h/v1?key=x").is_err());
        assert!(base_url("http://h/v1#x").is_err());
        assert_eq!(base_url("HTTP://h/v1").unwrap(), "HTTP://h/v1");
        assert_eq!(base_url("http://[::1]:8080/").unwrap(), "http://[::1]:8080");
        assert_eq!(base_url("https://api.example.com/v1").is_ok(), cfg!(feature = "rustls"));
    }

    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A server on a free local port that answers one request with `response` once it has read the request,
    /// after `delay`.
    fn serve_once(response: &'static [u8], delay: Duration) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/api/chat", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else { return };
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            // The headers, then the body (the client always sends a Content-Length).
            while let Ok(n @ 1..) = stream.read(&mut buf) {
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
            std::thread::sleep(delay);
            let _ = stream.write_all(response);
        });
        url
    }

    fn http(timeout: Duration) -> Http {
        Http::new(HttpLimits { timeout, connect_timeout: Duration::from_secs(5), ..HttpLimits::default() }).unwrap()
    }

    /// The reqwest error an error keeps as its source.
    fn reqwest_source(e: &ModelError) -> &reqwest::Error {
        let source = std::error::Error::source(e).expect("a transport error keeps its source");
        source.downcast_ref::<reqwest::Error>().expect("the source is reqwest's error")
    }

    #[tokio::test]
    async fn a_refused_connection_keeps_reqwests_error() {
        let url = {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}/api/chat", listener.local_addr().unwrap())
        };
        let e = http(Duration::from_secs(5)).post_json(&url, &Value::Null, None, &[]).await.unwrap_err();
        assert!(matches!(e, ModelError::Connect { .. }), "{e:?}");
        assert!(reqwest_source(&e).is_connect());
        // The text names the cause, as it did when the chain was flattened into a string.
        assert!(e.to_string().starts_with(&format!("cannot reach {url}: ")), "{e}");
        assert!(e.to_string().len() > format!("cannot reach {url}: ").len() + 10, "{e}");
    }

    #[tokio::test]
    async fn a_timeout_keeps_reqwests_error() {
        let url = serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}", Duration::from_secs(3));
        let e = http(Duration::from_millis(200)).post_json(&url, &Value::Null, None, &[]).await.unwrap_err();
        assert!(matches!(e, ModelError::Timeout { after, .. } if after == Duration::from_millis(200)), "{e:?}");
        assert!(reqwest_source(&e).is_timeout());
        assert_eq!(e.to_string(), format!("{url} did not answer within 200 ms"));
    }

    #[tokio::test]
    async fn a_connect_that_times_out_says_so() {
        // A listener whose queue of connections is full and never accepted: the next connect hangs unanswered.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(1).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut held = Vec::new();
        while let Ok(Ok(c)) = tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(addr)).await {
            held.push(c);
            assert!(held.len() < 64, "the queue never filled");
        }
        let url = format!("http://{addr}/api/chat");
        let config = HttpLimits {
            timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_millis(300),
            ..HttpLimits::default()
        };
        let e = Http::new(config).unwrap().post_json(&url, &Value::Null, None, &[]).await.unwrap_err();
        assert!(matches!(e, ModelError::Timeout { after, .. } if after == Duration::from_millis(300)), "{e:?}");
        assert_eq!(e.to_string(), format!("{url}: nothing at {addr} accepted a connection within 300 ms"));
        drop((held, listener));
    }

    #[tokio::test]
    async fn another_transport_failure_keeps_reqwests_error() {
        let url = serve_once(b"this is not HTTP\r\n\r\n", Duration::ZERO);
        let e = http(Duration::from_secs(5)).post_json(&url, &Value::Null, None, &[]).await.unwrap_err();
        assert!(matches!(e, ModelError::Http { .. }), "{e:?}");
        let source = reqwest_source(&e);
        assert!(!source.is_connect() && !source.is_timeout());
        assert!(e.to_string().starts_with(&format!("request to {url} failed: ")), "{e}");
    }

    #[tokio::test]
    async fn a_body_that_is_not_json_keeps_the_parsers_error() {
        let url = serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", Duration::ZERO);
        let e = http(Duration::from_secs(5)).post_json(&url, &Value::Null, None, &[]).await.unwrap_err();
        assert_eq!(e.to_string(), "malformed model response: the body is not JSON (line 1, column 1)");
        let source = std::error::Error::source(&e).unwrap();
        let json = source.downcast_ref::<serde_json::Error>().expect("serde_json's error");
        assert_eq!((json.line(), json.column()), (1, 1));
        // A status error has no source: it is the server's answer, not another error.
        let url = serve_once(b"HTTP/1.1 404 Not Found\r\ncontent-length: 4\r\n\r\nnope", Duration::ZERO);
        let e = http(Duration::from_secs(5)).post_json(&url, &Value::Null, None, &[]).await.unwrap_err();
        assert_eq!(e, ModelError::Status { url, status: 404, message: "nope".into(), retry_after: None });
        assert!(std::error::Error::source(&e).is_none());
    }
}
