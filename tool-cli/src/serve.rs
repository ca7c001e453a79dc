//! `keel serve`: the linked tools as an MCP server, over stdio or Streamable HTTP, in both protocol eras, with
//! keel-tools-mcp's server (`McpServer`): a person approves each `write` or `destructive` call through MCP
//! elicitation (`ApprovalRules::elicit`), unless `--allow` or `--allow-effect write` approves it beforehand.
//! `--forward` serves remote MCP servers' tools beside them, pinned by the lock (`crate::forward`).

use std::collections::BTreeSet;
use std::io::Write;

use clap::{ArgGroup, Args as ClapArgs};
use keel_tools_core::{Executor, ToolView};
use keel_tools_mcp::McpServer;
use keel_tools_mcp::client::{Drift, RemoteTools};
use keel_tools_mcp::server::ApprovalRules;
use tokio_util::sync::CancellationToken;

use crate::failure::{Failure, Outcome, fail};
use crate::forward;

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
executor: `read` tools run; a call of a `write` or `destructive` tool needs a person's approval of its exact \
arguments. The server asks for it through MCP elicitation, when the host offers it: the person sees the tool, \
its effect and its arguments, and on accept the call runs once, with exactly those arguments; on decline the \
model reads `approval_denied` and nothing runs. A host without elicitation (or --no-elicit) gets \
`approval_required`, and the call does not run. On a host you trust, approve without asking: `--allow NAME` \
(any tool, `destructive` included) or `--allow-effect write` (every `write` tool; `destructive` tools are \
never approved by effect).

  keel serve --stdio                                 # ask the person for each write
  keel serve --stdio --allow add_note                # add_note runs without asking
  keel serve --stdio --allow-effect write            # every write tool runs without asking
  keel serve --stdio --no-elicit                     # read only: writes answer approval_required

Remote MCP servers' tools can be served beside the linked ones, under a namespace: `--forward NAME=URL` (Streamable HTTP) or `--forward 'NAME=COMMAND ARGS'` (stdio). They are pinned by keel.lock: only a tool whose `tools/list` entry (description, schemas, annotations) is exactly what `keel lock --forward NAME=...` recorded is served. A tool that changed, appeared or vanished is withheld, named on stderr, and never called; when the server changes a tool while keel runs (`tools/list_changed`), that tool leaves the list and its calls are refused (`tool_changed`). Review the change, then approve it with `keel lock --forward NAME=...` and restart. `--forward-unpinned` serves a server's tools as it lists them at start, unchecked: only for servers you control.

  keel lock --forward files=http://127.0.0.1:9000/mcp          # pin the server's tools as they are now
  keel serve --stdio --forward files=http://127.0.0.1:9000/mcp # serve them, pinned

Logs go to stderr (RUST_LOG sets the level; default warn); stdout is the stdio transport. Ctrl-C, or stdin closing under \
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
    /// Approve every call of this tool without asking (repeat for more tools). Any effect, `destructive`
    /// included: name only tools you trust the model with.
    #[arg(long = "allow", value_name = "NAME")]
    allow: Vec<String>,
    /// Approve every call of every tool of this effect without asking. Only `write`: `destructive` tools are
    /// approved by name (`--allow NAME`) or call by call.
    #[arg(long = "allow-effect", value_name = "EFFECT", value_parser = allow_effect)]
    allow_effect: Vec<AllowEffect>,
    /// Never ask the person through elicitation: a call that needs an approval (and is not allowed) is answered
    /// `approval_required`, as by a host without elicitation.
    #[arg(long)]
    no_elicit: bool,
    /// How deferred tools (`#[tool(defer)]`) are found, when any is: `keel` (the default; `native` is the same, MCP
    /// having no tool search of its own) lists keel's `search_tools` in their place, and a session lists what its
    /// searches surfaced; `off` lists every tool in full.
    #[arg(long, value_enum, default_value = "keel", value_name = "HOW")]
    tool_search: crate::tool_search::ToolSearchArg,
    #[command(flatten)]
    forward: forward::ForwardArgs,
}

/// An effect whose every tool `--allow-effect` may approve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AllowEffect {
    Write,
}

/// Reads `--allow-effect`: `write`, and nothing else (`destructive` is refused, and says why).
fn allow_effect(value: &str) -> Result<AllowEffect, String> {
    match value {
        "write" => Ok(AllowEffect::Write),
        "destructive" => Err("`destructive` tools are never approved by effect: approve each one by name \
             (`--allow NAME`), or let the person approve each call when the host asks"
            .to_owned()),
        "read" => Err("`read` tools need no approval".to_owned()),
        other => Err(format!("unknown effect `{other}`: the one effect that may be approved as a whole is `write`")),
    }
}

impl ServeArgs {
    /// The tags the served view is narrowed to.
    pub(crate) fn tags(&self) -> &[String] {
        &self.tags
    }
}

/// What the server approves without asking, and whether it asks the person for the rest. A tool `--allow` names
/// must be served.
fn approval_rules(executor: &Executor, args: &ServeArgs) -> Result<ApprovalRules, crate::failure::Failure> {
    let mut rules = ApprovalRules::new().elicitation(!args.no_elicit);
    for name in &args.allow {
        if executor.view().get(name).is_none() {
            return Err(fail(
                2,
                format!("--allow {name}: no tool of that name is served (see `keel list`, and any --tag narrowing it)"),
            ));
        }
        rules = rules.allow_tool(name.as_str());
    }
    if args.allow_effect.contains(&AllowEffect::Write) {
        rules = rules.allow_writes();
    }
    Ok(rules)
}

/// Serves `linked` (and the forwarded servers' tools) until the client goes (stdio), or until Ctrl-C. `executor`
/// makes the executor of a view.
pub(crate) fn serve(
    linked: ToolView,
    executor: &dyn Fn(ToolView) -> Result<Executor, Failure>,
    args: ServeArgs,
    err: &mut dyn Write,
) -> Outcome {
    // rmcp and keel log through `tracing`: to stderr, never stdout. A subscriber the program set already stays.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,rmcp=error,keel_tools_mcp::drift=error".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(1, format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async move {
        let remote = args.forward.import(err).await?;
        let served = args.tool_search.view(forward::with_forwarded(&linked, &remote)?)?;
        let tools = served.len();
        let first = executor(served.clone())?;
        let approvals = approval_rules(&first, &args)?;
        let server = McpServer::builder(first)
            .approvals(approvals)
            .name(args.name.clone())
            .version(env!("CARGO_PKG_VERSION"))
            .build()
            .map_err(|e| fail(1, e.to_string()))?;
        if !args.forward.forward.is_empty() {
            // A pinned tool that drifts leaves the list: clients cache `tools/list` for seconds, not minutes.
            server.expect_changes();
        }
        let serving = serve_on(&server, &args, tools, err);
        tokio::pin!(serving);
        let mut withheld = BTreeSet::new();
        let mut drifts = merged_drifts(&remote);
        loop {
            tokio::select! {
                done = &mut serving => return done,
                Some(drift) = drifts.recv() => {
                    // The drifted tool leaves the list; its forwarder refuses any call still made to it.
                    eprintln!("keel: withheld {}", forward::indented(&drift));
                    if let Ok(name) = keel_tools_mcp::names::map_tool_name(&drift.namespace, &drift.origin) {
                        withheld.insert(name);
                    }
                    let view = ToolView::new(served.iter().filter(|d| !withheld.contains(d.name())).cloned().collect());
                    match executor(view) {
                        Ok(next) => {
                            if let Err(e) = server.update(next).await {
                                eprintln!("keel: the tool list could not be updated: {e}");
                            }
                        }
                        Err(e) => eprintln!("keel: the tool list could not be updated: {}", e.message),
                    }
                }
            }
        }
    })
}

/// Every forwarded server's drifts, on one channel.
fn merged_drifts(remote: &[RemoteTools]) -> tokio::sync::mpsc::UnboundedReceiver<Drift> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    for r in remote {
        let mut drifts = r.drifts();
        let tx = tx.clone();
        tokio::spawn(async move {
            loop {
                match drifts.recv().await {
                    Ok(drift) => {
                        if tx.send(drift).is_err() {
                            return;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }
    rx
}

/// Serves `server` on the transport `args` name until the client goes (stdio), or until Ctrl-C.
async fn serve_on(server: &McpServer, args: &ServeArgs, tools: usize, err: &mut dyn Write) -> Outcome {
    {
        match &args.http {
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
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn parse(args: &[&str]) -> Result<ServeArgs, String> {
        Cli::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
            .map(|c| c.serve)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn allow_flags_parse_and_destructive_is_never_approved_by_effect() {
        let args = parse(&["--stdio", "--allow", "a", "--allow", "b", "--allow-effect", "write"]).unwrap();
        assert_eq!(args.allow, ["a", "b"]);
        assert_eq!(args.allow_effect, [AllowEffect::Write]);
        assert!(!args.no_elicit);
        assert!(parse(&["--stdio", "--no-elicit"]).unwrap().no_elicit);

        let refused = parse(&["--stdio", "--allow-effect", "destructive"]).unwrap_err();
        assert!(refused.contains("never approved by effect") && refused.contains("--allow NAME"), "{refused}");
        for other in ["read", "Write", "all", ""] {
            assert!(parse(&["--stdio", "--allow-effect", other]).is_err(), "{other}");
        }
    }
}
