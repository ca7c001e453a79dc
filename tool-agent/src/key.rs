//! API keys: a value that never prints, read from the environment by name, and sent only where it cannot be read
//! off the wire.

use std::fmt;
use std::sync::Arc;

use crate::model::ModelError;

/// A provider's API key.
///
/// Its `Debug` form is `ApiKey(<redacted>)` and it has no `Display`, so a key cannot reach a log line, a span or an
/// error message by formatting; the clients send it as a header marked sensitive. A client refuses to send a key over
/// plain `http://` to a host that is not loopback (see the builders' `build`).
///
/// ```
/// use keel_tools_agent::ApiKey;
/// let key = ApiKey::new("sk-test-123").expect("not empty");
/// assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
/// // A variable that is not set is an error that names the variable, never a value.
/// let err = ApiKey::from_env("KEEL_DOC_SURELY_UNSET_VARIABLE").unwrap_err();
/// assert!(err.to_string().contains("KEEL_DOC_SURELY_UNSET_VARIABLE"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(Arc<str>);

impl ApiKey {
    /// The key, or `None` when `key` is empty or only whitespace (leading and trailing whitespace, such as the
    /// newline of a key read from a file, is dropped).
    pub fn new(key: impl AsRef<str>) -> Option<ApiKey> {
        let key = key.as_ref().trim();
        if key.is_empty() { None } else { Some(ApiKey(key.into())) }
    }

    /// The key in the environment variable `name`. An unset, empty or non-UTF-8 variable is a
    /// [`ModelError::Config`] that names the variable.
    pub fn from_env(name: &str) -> Result<ApiKey, ModelError> {
        match std::env::var(name) {
            Ok(value) => ApiKey::new(value)
                .ok_or_else(|| ModelError::config(format!("the environment variable {name} holds an empty API key"))),
            Err(std::env::VarError::NotPresent) => Err(ModelError::config(format!(
                "the environment variable {name} is not set (it should hold the API key)"
            ))),
            Err(std::env::VarError::NotUnicode(_)) => Err(ModelError::config(format!(
                "the environment variable {name} is not UTF-8, so it is not an API key"
            ))),
        }
    }

    /// The key itself, for the header that carries it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// The conventional variable of each provider's key, as their own SDKs read it.
pub mod vars {
    /// OpenAI (Chat Completions and Responses).
    pub const OPENAI: &str = "OPENAI_API_KEY";
    /// Anthropic.
    pub const ANTHROPIC: &str = "ANTHROPIC_API_KEY";
    /// Gemini; [`GOOGLE`] is the other name Google's SDK reads.
    pub const GEMINI: &str = "GEMINI_API_KEY";
    /// Gemini's other name.
    pub const GOOGLE: &str = "GOOGLE_API_KEY";
    /// Ollama's hosted API.
    pub const OLLAMA: &str = "OLLAMA_API_KEY";
}

/// `api_key` and `api_key_from_env` of a builder with a `settings: Settings` field: `$header` is how the key is
/// sent, `$who` says who wants it, `$var` links the provider's conventional variable.
macro_rules! api_key_methods {
    ($header:literal, $who:literal, $var:literal) => {
        #[doc = concat!("Sends the key as `", $header, "`, ", $who, " (an empty key sends nothing). The key goes")]
        /// only over `https://` or to a loopback host: [`build`](Self::build) refuses it with a plain `http://` URL
        /// to any other host.
        pub fn api_key(mut self, key: impl AsRef<str>) -> Self {
            self.settings.api_key = crate::key::ApiKey::new(key);
            self
        }
        #[doc = concat!("[`api_key`](Self::api_key) from the environment variable `name` (the usual one is ", $var, ");")]
        /// an unset or empty variable is an error naming it.
        pub fn api_key_from_env(mut self, name: &str) -> Result<Self, crate::model::ModelError> {
            self.settings.api_key = Some(crate::key::ApiKey::from_env(name)?);
            Ok(self)
        }
    };
}
pub(crate) use api_key_methods;

/// Refuses a key that would cross the network in clear: over `http://` to a host that is not loopback. `url` is
/// the request URL; it is parsed as the request parses it (reqwest's [`Url`](reqwest::Url), the WHATWG URL
/// standard), so the host checked is the host connected to: `http://192.0.2.10\@127.0.0.1/` goes to 192.0.2.10
/// (a `\` ends the authority as a `/` does), `http://127.0.0.1:80@evil.example/` to evil.example.
pub(crate) fn check_key_transport(url: &str, key: Option<&ApiKey>) -> Result<(), ModelError> {
    if key.is_none() {
        return Ok(());
    }
    let parsed = reqwest::Url::parse(url.trim()).map_err(|e| {
        ModelError::config(format!("an API key is sent only to a URL that can be read, and {url:?} cannot: {e}"))
    })?;
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if parsed.host_str().is_some_and(is_loopback) => Ok(()),
        _ => Err(ModelError::config(format!(
            "an API key is sent only over https:// or to a loopback host, and {url} is neither: use https://, or no key"
        ))),
    }
}

/// Whether `host`, as the URL parser wrote it (`localhost`, `127.0.0.1`, `[::1]`: lowercase, numbers normalized),
/// is loopback: `localhost` (not `localhost.`, which a resolver may send to DNS), or an IPv4 or IPv6 loopback
/// address (an IPv4-mapped one included).
fn is_loopback(host: &str) -> bool {
    if host == "localhost" {
        return true;
    }
    let ip = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(std::net::IpAddr::V6(ip)) => ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_never_prints() {
        let key = ApiKey::new(" sk-secret\n").unwrap();
        assert_eq!(key.expose(), "sk-secret");
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        assert_eq!(format!("{:?}", Some(&key)), "Some(ApiKey(<redacted>))");
        assert!(ApiKey::new("  ").is_none());
    }

    #[test]
    fn a_key_goes_over_https_or_to_loopback_only() {
        let key = ApiKey::new("k");
        for base in [
            "https://api.openai.com/v1",
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434",
            "http://[::1]:8080/v1",
            "http://127.0.0.2",
            "http://user@localhost:1/v1",
        ] {
            assert!(check_key_transport(base, key.as_ref()).is_ok(), "{base}");
        }
        for base in ["http://192.168.1.5:8080/v1", "http://api.example.com/v1", "http://localhost.example.com"] {
            let err = check_key_transport(base, key.as_ref()).unwrap_err().to_string();
            assert!(err.contains("https://") && err.contains(base), "{err}");
        }
        assert!(check_key_transport("http://api.example.com/v1", None).is_ok());
    }

    /// The host the check reads is the one the request goes to: the URL is parsed as reqwest parses it.
    #[test]
    fn the_loopback_check_reads_the_url_as_the_request_does() {
        let key = ApiKey::new("k");
        for base in [
            // `\` ends the authority as `/` does: the host is 192.0.2.10, the path `/@127.0.0.1/v1`.
            "http://192.0.2.10:9000\\@127.0.0.1/v1",
            "http://192.0.2.10\\@localhost/v1",
            "http://127.0.0.1:80@evil.example/v1",
            "http://localhost@evil.example",
            "http://127.0.0.1.evil.example/v1",
            "http://localhost.evil.example",
            "http://localhost./v1",
            "HTTP://192.168.1.5/v1",
            "Http://api.example.com",
            "http://[::ffff:c000:20a]/v1",
            "http://0x7f.evil.example",
            "http://example.com#@127.0.0.1",
            "http://example.com?@127.0.0.1/",
            "http://",
            "http://[::1",
        ] {
            let err = check_key_transport(base, key.as_ref());
            assert!(err.is_err(), "{base} passed as loopback");
        }
        for base in [
            "http://[::1]",
            "http://[::1]:8080/v1",
            "http://[0:0:0:0:0:0:0:1]/v1",
            "http://[::ffff:127.0.0.1]:1/v1",
            "HTTP://127.0.0.1:8080/v1",
            "http://LOCALHOST:11434",
            "http://127.1/v1",
            "http://0x7f000001/v1",
            "http://evil.example@127.0.0.1/v1",
            "https://api.example.com/v1",
            "HTTPS://api.example.com/v1",
        ] {
            assert!(check_key_transport(base, key.as_ref()).is_ok(), "{base}");
        }
    }
}
