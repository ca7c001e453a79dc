//! MCP helpers shared by the `mcp_*` tests.

use tool_mcp::McpServer;
use tool_mcp::rmcp::model::{CallToolResult, ProtocolVersion};
use tool_mcp::rmcp::service::{ClientServiceExt, RunningService};
use tool_mcp::rmcp::{ClientHandler, ClientLifecycleMode, RoleClient};

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
