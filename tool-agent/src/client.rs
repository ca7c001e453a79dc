//! What every HTTP client shares: its [`Settings`] while it is built, its [`Common`] parts once it is, and the
//! one way a turn goes over HTTP ([`Common::turn`]).

use std::fmt;

use serde_json::{Map, Value};

use crate::http::{Auth, Http, HttpLimits, client_parts};
use crate::key::{ApiKey, check_key_transport};
use crate::model::{AssistantMessage, Mode, ModelError, Turn, WireFormat};
use crate::options::RequestOptions;
use crate::stream::Emit;
use crate::{api, wire};

/// A builder's settings: what `build` checks.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) base: String,
    pub(crate) model: String,
    pub(crate) api_key: Option<ApiKey>,
    pub(crate) http: HttpLimits,
    pub(crate) roots: Vec<Vec<u8>>,
    pub(crate) extra: Map<String, Value>,
    pub(crate) request: RequestOptions,
    pub(crate) stream: bool,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("base", &self.base)
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .finish_non_exhaustive()
    }
}

impl Settings {
    pub(crate) fn new(base: String, model: String) -> Settings {
        Settings {
            base,
            model,
            api_key: None,
            http: HttpLimits::default(),
            roots: Vec::new(),
            extra: Map::new(),
            request: RequestOptions::default(),
            stream: false,
        }
    }

    /// Checks the base URL, the model name, the roots and where the key may go; `path` makes the request URL of
    /// the checked base URL (no trailing `/`), the model name, and whether the client streams.
    pub(crate) fn build(self, path: impl FnOnce(&str, &str, bool) -> String) -> Result<Common, ModelError> {
        let (base, http) = client_parts(&self.base, &self.model, self.http, &self.roots)?;
        let url = path(&base, &self.model, self.stream);
        // The URL the request goes to, read as reqwest reads it, is the one checked.
        check_key_transport(&url, self.api_key.as_ref())?;
        Ok(Common {
            url,
            stream: self.stream,
            base,
            model: self.model,
            api_key: self.api_key,
            http,
            extra: self.extra,
            request: self.request,
        })
    }
}

impl Settings {
    /// [`Settings::build`] for an API without a seed (`api` names it): a seed set on the builder is refused, as the
    /// server would refuse the request.
    pub(crate) fn build_without_seed(
        self,
        api: &str,
        path: impl FnOnce(&str, &str, bool) -> String,
    ) -> Result<Common, ModelError> {
        if self.request.seed.is_some() {
            return Err(ModelError::config(format!("{api} takes no seed; leave it unset")));
        }
        self.build(path)
    }
}

/// A built client's parts.
#[derive(Clone)]
pub(crate) struct Common {
    pub(crate) base: String,
    pub(crate) url: String,
    pub(crate) model: String,
    pub(crate) api_key: Option<ApiKey>,
    pub(crate) http: Http,
    pub(crate) extra: Map<String, Value>,
    pub(crate) request: RequestOptions,
    pub(crate) stream: bool,
}

impl fmt::Debug for Common {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

impl Common {
    /// The request body's start: the extra fields, then `model` (for the APIs that name it in the body).
    pub(crate) fn body(&self, with_model: bool) -> Map<String, Value> {
        let mut body = self.extra.clone();
        if with_model {
            body.insert("model".into(), Value::String(self.model.clone()));
        }
        body
    }

    /// Sends `body` with the key as `auth` says and the `headers`, and reads the answer as `format`: whole, or
    /// (when the client streams) event by event into the turn's sink, folded into the body the API would have sent
    /// whole, which the same parser reads.
    pub(crate) async fn turn(
        &self,
        turn: &Turn<'_>,
        body: &Value,
        auth: Auth,
        headers: &[(&'static str, &'static str)],
        format: WireFormat,
    ) -> Result<AssistantMessage, ModelError> {
        let key = self.api_key.as_ref().map(|k| (k, auth));
        let response = if self.stream {
            let codec = turn.tools.codec(format.provider());
            let emit = Emit { sink: turn.stream, codec: &codec };
            let api = api::of(format);
            let framing = api.framing();
            let mut framer = framing.framer();
            let mut answer = api.accumulator();
            {
                let mut feed = |chunk: &[u8]| framer.push(chunk, &mut |e, d| answer.feed(e, d, &emit));
                self.http.post_stream(&self.url, body, key, headers, framing.accept(), &mut feed).await?;
            }
            framer.finish(&mut |e, d| answer.feed(e, d, &emit))?;
            if !answer.complete() {
                return Err(ModelError::Stream {
                    message: "the stream ended before the answer was complete".into(),
                    retryable: true,
                });
            }
            answer.body()
        } else {
            self.http.post_json(&self.url, body, key, headers).await?
        };
        wire::parse(format, &response, turn.tools, turn.calls_so_far(), Mode::Live)
    }

    /// `"stream": true` in the body when the client streams (for the APIs that ask in the body).
    pub(crate) fn stream_field(&self, body: &mut Map<String, Value>) {
        if self.stream {
            body.insert("stream".into(), Value::Bool(true));
        }
    }
}

/// The accessors every client has (a `common: Common` field); `$path` names the request URL.
macro_rules! client_accessors {
    ($path:literal) => {
        #[doc = concat!("The ", $path, " URL.")]
        pub fn url(&self) -> &str {
            &self.common.url
        }

        /// The model name.
        pub fn model(&self) -> &str {
            &self.common.model
        }

        /// The HTTP limits.
        pub fn http_limits(&self) -> crate::http::HttpLimits {
            self.common.http.limits()
        }
    };
}
pub(crate) use client_accessors;

/// [`ChatModel`](crate::ChatModel) for a client with a `common: Common` field and a `request_body(&Turn)`: live,
/// labelled `$label <model> at <base>`, `$provider` for telemetry, each turn sent as [`Common::turn`] sends it.
macro_rules! chat_model {
    ($client:ty, $label:literal, $provider:literal, $auth:expr, $headers:expr, $format:expr) => {
        impl crate::model::ChatModel for $client {
            fn mode(&self) -> crate::model::Mode {
                crate::model::Mode::Live
            }

            fn label(&self) -> String {
                format!(concat!($label, " {} at {}"), self.common.model, self.common.base)
            }

            fn telemetry(&self) -> Option<(&str, &'static str)> {
                Some((&self.common.model, $provider))
            }

            fn tool_choice(
                &self,
                turn: &crate::model::Turn<'_>,
            ) -> Result<Option<crate::options::ToolChoice>, crate::model::ModelError> {
                self.common.request.choice(turn)
            }

            fn chat<'a>(
                &'a self,
                turn: crate::model::Turn<'a>,
            ) -> crate::model::BoxFuture<'a, Result<crate::model::AssistantMessage, crate::model::ModelError>> {
                Box::pin(async move {
                    let turn = crate::deferral::prepare(turn, self.common.request.tool_search, $format.provider());
                    let body = self.request_body(&turn)?;
                    self.common.turn(&turn, &body, $auth, $headers, $format).await
                })
            }
        }
    };
}
pub(crate) use chat_model;
