//! The rest of a server: a user's own rmcp [`ServerHandler`] that serves everything but tools.
//!
//! [`McpServerBuilder::handler`](crate::server::McpServerBuilder::handler) takes any `ServerHandler`; the session
//! answers `tools/*` (and `initialize`, `logging/setLevel`) itself and hands every other request and notification to
//! it through [`Rest`], an object-safe copy of the trait's methods that keel does not own.

#![allow(deprecated)] // `resources/subscribe` and `unsubscribe` are legacy-only, and still served to legacy clients.

use std::future::Future;
use std::pin::Pin;

use rmcp::model::{
    CancelledNotificationParam, CompleteRequestParams, CompleteResult, CustomNotification, CustomRequest, CustomResult,
    GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams, GetSkillResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult,
    ReadResourceRequestParams, ReadResourceResponse, ServerConfig, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

pub(crate) type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The methods of a [`ServerHandler`] that a keel session delegates: prompts, resources, completion, skills,
/// custom requests and notifications, and the non-tool part of `subscriptions/listen`.
pub(crate) trait Rest: Send + Sync + 'static {
    fn info(&self) -> ServerConfig;
    fn complete(
        &self,
        r: CompleteRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<CompleteResult, ErrorData>>;
    fn get_prompt(
        &self,
        r: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<GetPromptResponse, ErrorData>>;
    fn list_prompts(
        &self,
        r: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<ListPromptsResult, ErrorData>>;
    fn list_resources(
        &self,
        r: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<ListResourcesResult, ErrorData>>;
    fn list_resource_templates(
        &self,
        r: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<ListResourceTemplatesResult, ErrorData>>;
    fn read_resource(
        &self,
        r: ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<ReadResourceResponse, ErrorData>>;
    fn subscribe(&self, r: SubscribeRequestParams, cx: RequestContext<RoleServer>) -> Fut<'_, Result<(), ErrorData>>;
    fn unsubscribe(
        &self,
        r: UnsubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<(), ErrorData>>;
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter>;
    fn listen(&self, cx: SubscriptionContext) -> Fut<'_, Result<(), ErrorData>>;
    fn list_skills(
        &self,
        r: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<ListSkillsResult, ErrorData>>;
    fn get_skill(
        &self,
        r: GetSkillRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<GetSkillResult, ErrorData>>;
    fn read_resource_directory(
        &self,
        r: ReadResourceDirectoryRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<ReadResourceDirectoryResult, ErrorData>>;
    fn on_custom_request(
        &self,
        r: CustomRequest,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<CustomResult, ErrorData>>;
    fn on_initialized(&self, cx: NotificationContext<RoleServer>) -> Fut<'_, ()>;
    fn on_cancelled(&self, n: CancelledNotificationParam, cx: NotificationContext<RoleServer>) -> Fut<'_, ()>;
    fn on_progress(&self, n: ProgressNotificationParam, cx: NotificationContext<RoleServer>) -> Fut<'_, ()>;
    fn on_roots_list_changed(&self, cx: NotificationContext<RoleServer>) -> Fut<'_, ()>;
    fn on_custom_notification(&self, n: CustomNotification, cx: NotificationContext<RoleServer>) -> Fut<'_, ()>;
}

impl<H: ServerHandler> Rest for H {
    fn info(&self) -> ServerConfig {
        self.get_info()
    }
    fn complete(
        &self,
        r: CompleteRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<CompleteResult, ErrorData>> {
        Box::pin(ServerHandler::complete(self, r, cx))
    }
    fn get_prompt(
        &self,
        r: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<GetPromptResponse, ErrorData>> {
        Box::pin(ServerHandler::get_prompt(self, r, cx))
    }
    fn list_prompts(
        &self,
        r: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<ListPromptsResult, ErrorData>> {
        Box::pin(ServerHandler::list_prompts(self, r, cx))
    }
    fn list_resources(
        &self,
        r: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<ListResourcesResult, ErrorData>> {
        Box::pin(ServerHandler::list_resources(self, r, cx))
    }
    fn list_resource_templates(
        &self,
        r: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<ListResourceTemplatesResult, ErrorData>> {
        Box::pin(ServerHandler::list_resource_templates(self, r, cx))
    }
    fn read_resource(
        &self,
        r: ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<ReadResourceResponse, ErrorData>> {
        Box::pin(ServerHandler::read_resource(self, r, cx))
    }
    fn subscribe(&self, r: SubscribeRequestParams, cx: RequestContext<RoleServer>) -> Fut<'_, Result<(), ErrorData>> {
        Box::pin(ServerHandler::subscribe(self, r, cx))
    }
    fn unsubscribe(
        &self,
        r: UnsubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<(), ErrorData>> {
        Box::pin(ServerHandler::unsubscribe(self, r, cx))
    }
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        ServerHandler::accepted_subscription_filter(self, requested)
    }
    fn listen(&self, cx: SubscriptionContext) -> Fut<'_, Result<(), ErrorData>> {
        Box::pin(ServerHandler::listen(self, cx))
    }
    fn list_skills(
        &self,
        r: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<ListSkillsResult, ErrorData>> {
        Box::pin(ServerHandler::list_skills(self, r, cx))
    }
    fn get_skill(
        &self,
        r: GetSkillRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<GetSkillResult, ErrorData>> {
        Box::pin(ServerHandler::get_skill(self, r, cx))
    }
    fn read_resource_directory(
        &self,
        r: ReadResourceDirectoryRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<ReadResourceDirectoryResult, ErrorData>> {
        Box::pin(ServerHandler::read_resource_directory(self, r, cx))
    }
    fn on_custom_request(
        &self,
        r: CustomRequest,
        cx: RequestContext<RoleServer>,
    ) -> Fut<'_, Result<CustomResult, ErrorData>> {
        Box::pin(ServerHandler::on_custom_request(self, r, cx))
    }
    fn on_initialized(&self, cx: NotificationContext<RoleServer>) -> Fut<'_, ()> {
        Box::pin(ServerHandler::on_initialized(self, cx))
    }
    fn on_cancelled(&self, n: CancelledNotificationParam, cx: NotificationContext<RoleServer>) -> Fut<'_, ()> {
        Box::pin(ServerHandler::on_cancelled(self, n, cx))
    }
    fn on_progress(&self, n: ProgressNotificationParam, cx: NotificationContext<RoleServer>) -> Fut<'_, ()> {
        Box::pin(ServerHandler::on_progress(self, n, cx))
    }
    fn on_roots_list_changed(&self, cx: NotificationContext<RoleServer>) -> Fut<'_, ()> {
        Box::pin(ServerHandler::on_roots_list_changed(self, cx))
    }
    fn on_custom_notification(&self, n: CustomNotification, cx: NotificationContext<RoleServer>) -> Fut<'_, ()> {
        Box::pin(ServerHandler::on_custom_notification(self, n, cx))
    }
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
