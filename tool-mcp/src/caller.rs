//! The caller of a request on a protected server (feature `auth`): the [`Principal`] its bearer token names, and
//! where a tool call's context carries it ([`principal`]). Re-exported by [`crate::http::auth`].

/// Who a verified token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Principal {
    /// The subject (`sub`): the user or service the token was issued for.
    pub subject: String,
    /// The OAuth client that holds the token (`client_id`, or `azp`), when the token says.
    pub client_id: Option<String>,
    /// The scopes granted (`scope`, space-separated, or `scp`).
    pub scopes: Vec<String>,
    /// The issuer (`iss`), when the token says.
    pub issuer: Option<String>,
}

impl Principal {
    /// A principal for `subject` with `scopes`.
    pub fn new(subject: impl Into<String>, scopes: impl IntoIterator<Item = impl Into<String>>) -> Principal {
        Principal {
            subject: subject.into(),
            client_id: None,
            scopes: scopes.into_iter().map(Into::into).collect(),
            issuer: None,
        }
    }

    /// Whether the token granted `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }
}

/// The principal of a request or notification, shared, from its extensions (where the HTTP layer put it).
pub(crate) fn shared(extensions: &rmcp::model::Extensions) -> Option<std::sync::Arc<Principal>> {
    extensions.get::<hyper::http::request::Parts>()?.extensions.get::<std::sync::Arc<Principal>>().cloned()
}

/// The principal of the request a tool call came in, when the server is a
/// [`ResourceServer`](crate::http::auth::ResourceServer).
pub fn principal(context: &rmcp::service::RequestContext<rmcp::RoleServer>) -> Option<&Principal> {
    context.extensions.get::<hyper::http::request::Parts>()?.extensions.get::<std::sync::Arc<Principal>>().map(|p| &**p)
}
