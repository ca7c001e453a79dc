//! The rest of a server: a user's own rmcp [`ServerHandler`] that serves everything but tools.
//!
//! [`McpServerBuilder::handler`](crate::server::McpServerBuilder::handler) takes any `ServerHandler`; the session
//! answers `tools/*` (and `initialize`, `logging/setLevel`) itself and hands every other request and notification to
//! it through [`Rest`], an object-safe copy of the trait's methods that keel does not own. Those methods are listed
//! once, in [`rest_methods`], which writes [`Rest`], its implementation for every `ServerHandler`, and the session's
//! forwarding.

#![allow(deprecated)] // `resources/subscribe` and `unsubscribe` are legacy-only, and still served to legacy clients.

use std::future::Future;
use std::pin::Pin;

use rmcp::model::ServerConfig;
use rmcp::service::NotificationContext;
use rmcp::{RoleServer, ServerHandler};

pub(crate) type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The [`ServerHandler`] methods that keel hands to the rest of a server, listed once, written one of three ways:
///
/// * `rest_methods!(declare)`: the methods of [`Rest`] (an `async` one returns a boxed future);
/// * `rest_methods!(implement)`: their bodies for any `ServerHandler`: rmcp's method, its future boxed;
/// * `rest_methods!(forward to a.b)`: `ServerHandler` methods that hand the request to `self.a.b` (a [`Rest`]) as
///   it is. Only the `pass` entries: the session writes the `own` ones itself, and calls the rest's from them.
///
/// An entry reads as rmcp's method without its `&self` (an `async` one with its future's output), after whether the
/// session passes it on (`pass`) or answers it itself (`own`), and whether it is `sync` or `async`. The trait's
/// other methods are keel's alone and not listed: `ping`, `initialize`, `negotiate_initialize`,
/// `supported_protocol_versions`, `discover`, `set_level`, `list_tools`, `get_tool`, `call_tool`, `get_task`,
/// `update_task` and `cancel_task`. A method rmcp adds to the trait is answered by its default until it is listed
/// here.
macro_rules! rest_methods {
    (@one [declare] $_who:ident sync $name:ident ($($arg:ident: $ty:ty),*) $out:ty) => {
        fn $name(&self, $($arg: $ty),*) -> $out;
    };
    (@one [declare] $_who:ident async $name:ident ($($arg:ident: $ty:ty),*) $out:ty) => {
        fn $name(&self, $($arg: $ty),*) -> $crate::compose::Fut<'_, $out>;
    };
    (@one [implement] $_who:ident sync $name:ident ($($arg:ident: $ty:ty),*) $out:ty) => {
        fn $name(&self, $($arg: $ty),*) -> $out {
            rmcp::ServerHandler::$name(self, $($arg),*)
        }
    };
    (@one [implement] $_who:ident async $name:ident ($($arg:ident: $ty:ty),*) $out:ty) => {
        fn $name(&self, $($arg: $ty),*) -> $crate::compose::Fut<'_, $out> {
            Box::pin(rmcp::ServerHandler::$name(self, $($arg),*))
        }
    };
    (@one [forward to $($target:ident).+] pass async $name:ident ($($arg:ident: $ty:ty),*) $out:ty) => {
        async fn $name(&self, $($arg: $ty),*) -> $out {
            self.$($target).+.$name($($arg),*).await
        }
    };
    (@one [forward to $($target:ident).+] pass sync $name:ident ($($arg:ident: $ty:ty),*) $out:ty) => {
        fn $name(&self, $($arg: $ty),*) -> $out {
            self.$($target).+.$name($($arg),*)
        }
    };
    (@one [forward to $($target:ident).+] own $_kind:ident $name:ident ($($arg:ident: $ty:ty),*) $out:ty) => {};
    (@each $how:tt $($who:ident $kind:ident fn $name:ident ($($arg:ident: $ty:ty),*) -> $out:ty;)*) => {
        $($crate::compose::rest_methods!(@one $how $who $kind $name ($($arg: $ty),*) $out);)*
    };
    ($($how:tt)+) => {
        $crate::compose::rest_methods! { @each [$($how)+]
            own sync fn get_info() -> rmcp::model::ServerConfig;
            own sync fn accepted_subscription_filter(
                requested: &rmcp::model::SubscriptionFilter
            ) -> Option<rmcp::model::SubscriptionFilter>;
            own async fn listen(context: rmcp::service::SubscriptionContext) -> Result<(), rmcp::ErrorData>;
            own async fn on_initialized(context: rmcp::service::NotificationContext<rmcp::RoleServer>) -> ();
            pass async fn complete(
                request: rmcp::model::CompleteRequestParams,
                context: rmcp::service::RequestContext<rmcp::RoleServer>
            ) -> Result<rmcp::model::CompleteResult, rmcp::ErrorData>;
            pass async fn get_prompt(
                request: rmcp::model::GetPromptRequestParams,
                context: rmcp::service::RequestContext<rmcp::RoleServer>
            ) -> Result<rmcp::model::GetPromptResponse, rmcp::ErrorData>;
            pass async fn list_prompts(
                request: Option<rmcp::model::PaginatedRequestParams>,
                context: rmcp::service::RequestContext<rmcp::RoleServer>
            ) -> Result<rmcp::model::ListPromptsResult, rmcp::ErrorData>;
            pass async fn list_resources(
                request: Option<rmcp::model::PaginatedRequestParams>,
                context: rmcp::service::RequestContext<rmcp::RoleServer>
            ) -> Result<rmcp::model::ListResourcesResult, rmcp::ErrorData>;
            pass async fn list_resource_templates(
                request: Option<rmcp::model::PaginatedRequestParams>,
                context: rmcp::service::RequestContext<rmcp::RoleServer>
            ) -> Result<rmcp::model::ListResourceTemplatesResult, rmcp::ErrorData>;
            pass async fn read_resource(
                request: rmcp::model::ReadResourceRequestParams,
                context: rmcp::service::RequestContext<rmcp::RoleServer>
            ) -> Result<rmcp::model::ReadResourceResponse, rmcp::ErrorData>;
            pass async fn subscribe(
                request: rmcp::model::SubscribeRequestParams,
                context: rmcp::service::RequestContext<rmcp::RoleServer>
            ) -> Result<(), rmcp::ErrorData>;
            pass async fn unsubscribe(
                request: rmcp::model::UnsubscribeRequestParams,
                context: rmcp::service::RequestContext<rmcp::RoleServer>
            ) -> Result<(), rmcp::ErrorData>;
            pass async fn list_skills(
                request: Option<rmcp::model::PaginatedRequestParams>,
                context: rmcp::service::RequestContext<rmcp::RoleServer>
            ) -> Result<rmcp::model::ListSkillsResult, rmcp::ErrorData>;
            pass async fn get_skill(
                request: rmcp::model::GetSkillRequestParams,
                context: rmcp::service::RequestContext<rmcp::RoleServer>
            ) -> Result<rmcp::model::GetSkillResult, rmcp::ErrorData>;
            pass async fn read_resource_directory(
                request: rmcp::model::ReadResourceDirectoryRequestParams,
                context: rmcp::service::RequestContext<rmcp::RoleServer>
            ) -> Result<rmcp::model::ReadResourceDirectoryResult, rmcp::ErrorData>;
            pass async fn on_custom_request(
                request: rmcp::model::CustomRequest,
                context: rmcp::service::RequestContext<rmcp::RoleServer>
            ) -> Result<rmcp::model::CustomResult, rmcp::ErrorData>;
            pass async fn on_cancelled(
                notification: rmcp::model::CancelledNotificationParam,
                context: rmcp::service::NotificationContext<rmcp::RoleServer>
            ) -> ();
            pass async fn on_progress(
                notification: rmcp::model::ProgressNotificationParam,
                context: rmcp::service::NotificationContext<rmcp::RoleServer>
            ) -> ();
            pass async fn on_roots_list_changed(context: rmcp::service::NotificationContext<rmcp::RoleServer>) -> ();
            pass async fn on_custom_notification(
                notification: rmcp::model::CustomNotification,
                context: rmcp::service::NotificationContext<rmcp::RoleServer>
            ) -> ();
        }
    };
}
pub(crate) use rest_methods;

/// The methods of a [`ServerHandler`] that a keel session delegates: prompts, resources, completion, skills,
/// custom requests and notifications, and the non-tool part of `subscriptions/listen`.
pub(crate) trait Rest: Send + Sync + 'static {
    rest_methods!(declare);
}

impl<H: ServerHandler> Rest for H {
    rest_methods!(implement);
}

/// The rest of a server that has none: every method is the SDK's default (`-32601` for requests).
pub(crate) struct NoRest;

impl ServerHandler for NoRest {
    async fn on_initialized(&self, _context: NotificationContext<RoleServer>) {}
}

/// The server's capabilities: the handler's, with keel's tools (`listChanged`), logging and, when a tool may run as a
/// task, the tasks extension over them.
pub(crate) fn merge_capabilities(rest: &ServerConfig, tasks: bool) -> rmcp::model::ServerCapabilities {
    let keel = rmcp::model::ServerCapabilities::builder()
        .enable_logging()
        .enable_tools()
        .enable_tool_list_changed()
        .enable_tasks()
        .build();
    let mut capabilities = rest.capabilities.clone();
    capabilities.tools = keel.tools;
    capabilities.logging = capabilities.logging.or(keel.logging);
    if tasks && let Some(extensions) = keel.extensions {
        capabilities.extensions.get_or_insert_with(Default::default).extend(extensions);
    }
    capabilities
}
