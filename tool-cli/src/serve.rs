//! `keel serve`: the linked tools as an MCP server, over stdio or Streamable HTTP, in both protocol eras, with
//! keel-tools-mcp's server (`McpServer`) as it is.

use std::io::Write;

use clap::{ArgGroup, Args as ClapArgs};
use keel_tools_core::Executor;
use keel_tools_mcp::McpServer;
use tokio_util::sync::CancellationToken;

use crate::failure::{Outcome, fail};

/// The arguments of `keel serve`.
#[derive(ClapArgs, Debug)]
#[command(
    group(ArgGroup::new("transport").required(true).args(["stdio", "http"])),
    after_help = "\
An MCP host starts `keel serve --stdio` itself; in its configuration (Claude Desktop's \
claude_desktop_config.json, a `.mcp.json`, an editor's MCP settings):

  {\"mcpServers\": {\"my-tools\": {\"command\": \"keel\", \"args\": [\"serve\", \"--stdio\"]}}}

Run from your crate's directory, or give the host `\"args\": [\"--manifest-path\", \"/path/to/Cargo.toml\", \
\"serve\", \"--stdio\"]`. Over HTTP, start `keel serve --http 127.0.0.1:8080` and point the host at the URL:

  {\"mcpServers\": {\"my-tools\": {\"url\": \"http://127.0.0.1:8080/mcp\"}}}

Both protocol eras are served: `initialize` sessions (up to 2025-11-25) and stateless 2026-07-28 requests \
(`server/discover`). `tools/list` is what `keel list --format mcp` prints; `tools/call` runs through the \
executor, so `write` and `destructive` tools are refused with `approval_required`. Logs go to stderr \
(RUST_LOG sets the level; default warn); stdout is the stdio transport. Ctrl-C, or stdin closing under \
--stdio, ends the server."
)]
pub(crate) struct ServeArgs {
    /// Serve one session on stdin and stdout (how an MCP host runs a local server).
    #[arg(long)]
    stdio: bool,
    /// Serve Streamable HTTP on this address (e.g. `127.0.0.1:8080`; port 0 picks a free one), at `--path`. Only
    /// loopback `Host` and `Origin` headers are accepted.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// The HTTP path of the endpoint.
    #[arg(long, default_value = "/mcp", requires = "http")]
    path: String,
    /// Only tools carrying this tag (repeat for tools carrying all of them).
    #[arg(long = "tag", value_name = "T")]
    tags: Vec<String>,
    /// The server name reported to clients.
    #[arg(long, default_value = "keel")]
    name: String,
}

impl ServeArgs {
    /// The tags the served view is narrowed to.
    pub(crate) fn tags(&self) -> &[String] {
        &self.tags
    }
}

/// Serves `executor`'s view until the client goes (stdio), or until Ctrl-C.
pub(crate) fn serve(executor: Executor, args: ServeArgs, err: &mut dyn Write) -> Outcome {
    // rmcp and keel log through `tracing`: to stderr, never stdout. A subscriber the program set already stays.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,rmcp=error".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let tools = executor.view().len();
    let server = McpServer::builder(executor)
        .name(args.name)
        .version(env!("CARGO_PKG_VERSION"))
        .build()
        .map_err(|e| fail(1, e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(1, format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async move {
        match args.http {
            None => {
                let _ = writeln!(err, "keel: serving {tools} tool(s) over MCP on stdio");
                tokio::select! {
                    served = server.serve_stdio() => served.map_err(|e| fail(1, format!("the MCP session failed: {e}")))?,
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(addr.as_str())
                    .await
                    .map_err(|e| fail(2, format!("cannot listen on {addr}: {e}")))?;
                let local = listener.local_addr().map_err(|e| fail(1, e.to_string()))?;
                let _ = writeln!(err, "keel: serving {tools} tool(s) over MCP at http://{local}{}", args.path);
                let shutdown = CancellationToken::new();
                let on_signal = shutdown.clone();
                tokio::spawn(async move {
                    if tokio::signal::ctrl_c().await.is_ok() {
                        on_signal.cancel();
                    }
                });
                server.serve_http(listener, &args.path, shutdown).await.map_err(|e| fail(1, e.to_string()))?;
            }
        }
        Ok(0)
    })
}
