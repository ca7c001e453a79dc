//! MCP helpers shared by the `mcp_*` tests.

use std::time::Duration;

use keel_tools_mcp::McpServer;
use keel_tools_mcp::rmcp::model::{
    CallToolResult, ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion,
};
use keel_tools_mcp::rmcp::service::{ClientServiceExt, NotificationContext, RunningService};
use keel_tools_mcp::rmcp::{ClientHandler, ClientLifecycleMode, RoleClient};
use tokio::sync::mpsc;

/// Serves `server` on an in-process pipe and connects `client` on `version`: through `initialize` when the
/// revision has it, else through `server/discover` (stateless).
pub async fn connect<C: ClientHandler>(
    server: &McpServer,
    client: C,
    version: ProtocolVersion,
) -> RunningService<RoleClient, C> {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let server = server.clone();
    tokio::spawn(async move {
        if let Ok(s) = server.serve(server_io).await {
            let _ = s.waiting().await;
        }
    });
    let lifecycle = if version.has_initialize() {
        ClientLifecycleMode::Initialize
    } else {
        ClientLifecycleMode::Discover { preferred_versions: vec![version] }
    };
    client.serve_with_lifecycle(client_io, lifecycle).await.expect("connect")
}

/// The text of a result's first content block.
pub fn text_of(r: &CallToolResult) -> String {
    r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default()
}

/// A client that reports each `notifications/tools/list_changed` on `tx`.
#[derive(Clone)]
pub struct ListWatcher {
    /// Where each notification is reported.
    pub tx: mpsc::UnboundedSender<()>,
}

impl ClientHandler for ListWatcher {
    fn get_info(&self) -> InitializeRequestParams {
        InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("keel-test", "0.1"))
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        let _ = self.tx.send(());
    }
}

/// Waits up to 10 s for the next `list_changed` reported by a [`ListWatcher`] (`who` names it in the failure).
pub async fn next_change(rx: &mut mpsc::UnboundedReceiver<()>, who: &str) {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap_or_else(|_| panic!("{who}: no list_changed within 10 s"))
        .expect("open");
}
