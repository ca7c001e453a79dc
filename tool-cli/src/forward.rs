//! `--forward NAME=TARGET`: a remote MCP server's tools beside the linked ones, under the namespace `NAME`, pinned
//! by the lock (`keel lock --forward` records the pins; keel-tools-mcp's `client::pin` holds them at run time).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args as ClapArgs;
use keel_tools_contract::lock::{Lock, RemoteConnect, RemoteLock};
use keel_tools_core::ToolView;
use keel_tools_mcp::client::{Drift, Pins, RemoteServer, RemoteTools};

use crate::failure::{Failure, fail};

/// `--forward`, `--forward-unpinned` and `--lock`, as `keel serve` and `keel chat` take them.
#[derive(ClapArgs, Debug, Default)]
pub(crate) struct ForwardArgs {
    /// Add a remote MCP server's tools as NAME.TOOL, pinned by the lock: `NAME=URL` (Streamable HTTP) or
    /// `NAME=COMMAND ARGS` (stdio). Repeat for more servers. A tool that differs from its pin is withheld.
    #[arg(long = "forward", value_name = "NAME=URL|CMD", value_parser = parse_forward)]
    pub(crate) forward: Vec<Forward>,
    /// Add a remote MCP server's tools without pins, as it lists them at start (a change reaches the model
    /// unchecked): only for a server you control.
    #[arg(long = "forward-unpinned", value_name = "NAME=URL|CMD", value_parser = parse_forward)]
    pub(crate) forward_unpinned: Vec<Forward>,
    /// Withhold a forwarded tool whose description the description checks flag (signs of tool poisoning: hidden
    /// characters, instructions addressed to the model), instead of serving it with a warning.
    #[arg(long = "forward-strict")]
    pub(crate) strict: bool,
    /// The lock holding the pins of `--forward` servers.
    #[arg(long = "lock", default_value = keel_tools_contract::lock::DEFAULT_PATH, value_name = "PATH")]
    pub(crate) lock: PathBuf,
}

impl ForwardArgs {
    /// Whether any server is forwarded.
    pub(crate) fn any(&self) -> bool {
        !self.forward.is_empty() || !self.forward_unpinned.is_empty()
    }

    /// Connects to the forwarded servers and imports their tools ([`import`]); nothing when none is forwarded.
    pub(crate) async fn import(&self, err: &mut dyn Write) -> Result<Vec<RemoteTools>, Failure> {
        if !self.any() {
            return Ok(Vec::new());
        }
        let lock = read_lock(&self.lock)?;
        import(self, lock.as_ref(), err).await
    }
}

/// The tools of `linked` and the forwarded ones, as one view. A forwarded tool whose name is a linked tool's
/// fails: the namespace must not shadow a linked tool.
pub(crate) fn with_forwarded(linked: &ToolView, remote: &[RemoteTools]) -> Result<ToolView, Failure> {
    let mut tools: Vec<_> = linked.iter().cloned().collect();
    for r in remote {
        for def in r.definitions() {
            if linked.contains(def.name()) {
                return Err(fail(
                    2,
                    format!(
                        "--forward: `{}` is also a linked tool's name; forward that server under another NAME",
                        def.name()
                    ),
                ));
            }
            tools.push(Arc::new(def.renamed(def.name().to_owned()).map_err(|e| fail(1, e.to_string()))?));
        }
    }
    Ok(ToolView::new(tools))
}

/// One `--forward NAME=TARGET`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Forward {
    /// The namespace its tools are served under (`NAME.tool`).
    pub(crate) namespace: String,
    /// How the server is reached.
    pub(crate) connect: RemoteConnect,
}

/// Reads `NAME=https://host/mcp` (Streamable HTTP) or `NAME=CMD ARGS…` (a command speaking stdio; its words are
/// split on whitespace).
pub(crate) fn parse_forward(value: &str) -> Result<Forward, String> {
    let Some((name, target)) = value.split_once('=') else {
        return Err("write NAME=URL (e.g. files=http://127.0.0.1:8080/mcp) or NAME=COMMAND ARGS (e.g. \
                    files=\"npx -y @modelcontextprotocol/server-filesystem .\")"
            .to_owned());
    };
    let name = name.trim();
    if !keel_tools_mcp::names::is_valid_namespace(name) {
        return Err(format!(
            "`{name}` is not a namespace: one lowercase name segment, e.g. `files` (the tools become files.TOOL)"
        ));
    }
    let target = target.trim();
    let connect = if target.starts_with("http://") || target.starts_with("https://") {
        RemoteConnect::Url(target.to_owned())
    } else {
        let words: Vec<String> = target.split_whitespace().map(str::to_owned).collect();
        if words.is_empty() {
            return Err(format!("--forward {name}=: give the server's URL or the command that starts it"));
        }
        RemoteConnect::Command(words)
    };
    Ok(Forward { namespace: name.to_owned(), connect })
}

impl Forward {
    /// `NAME=TARGET`, as written.
    pub(crate) fn shown(&self) -> String {
        match &self.connect {
            RemoteConnect::Url(url) => format!("{}={url}", self.namespace),
            RemoteConnect::Command(words) => format!("{}={}", self.namespace, words.join(" ")),
        }
    }

    /// Connects to the server.
    pub(crate) async fn connect(&self) -> Result<RemoteServer, Failure> {
        let connected = match &self.connect {
            RemoteConnect::Url(url) => RemoteServer::connect_http(&self.namespace, url).await,
            RemoteConnect::Command(words) => {
                let mut command = tokio::process::Command::new(&words[0]);
                command.args(&words[1..]).stderr(std::process::Stdio::null()).kill_on_drop(true);
                RemoteServer::connect_child(&self.namespace, command).await
            }
        };
        connected.map_err(|e| fail(1, format!("--forward {}: {e}", self.shown())))
    }
}

/// The pins a lock section holds.
pub(crate) fn pins_of(section: &RemoteLock) -> Pins {
    let mut pins = Pins::new(section.server.clone());
    pins.tools.clone_from(&section.tools);
    pins
}

/// The lock section of `pins`, for a server reached as `connect`.
pub(crate) fn section_of(connect: RemoteConnect, pins: &Pins) -> RemoteLock {
    RemoteLock { connect, server: pins.server.clone(), tools: pins.tools.clone() }
}

/// The lock at `path`, when there is one that reads; `Ok(None)` when there is no file.
pub(crate) fn read_lock(path: &Path) -> Result<Option<Lock>, Failure> {
    match std::fs::read_to_string(path) {
        Ok(text) => Lock::parse(&text).map(Some).map_err(|e| fail(1, format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(fail(1, format!("cannot read {}: {e}", path.display()))),
    }
}

/// Connects to each forwarded server and imports its tools: pinned by the lock's section for its namespace (a
/// server without one has no pins, so each of its tools is withheld until `keel lock --forward` records it), or
/// unpinned. Each withheld tool is named on `err`.
pub(crate) async fn import(
    args: &ForwardArgs,
    lock: Option<&Lock>,
    err: &mut dyn Write,
) -> Result<Vec<RemoteTools>, Failure> {
    let lock_path = &args.lock;
    let mut imported = Vec::new();
    for forward in &args.forward {
        let server = forward.connect().await?;
        let pins = match lock.and_then(|l| l.remote.get(&forward.namespace)) {
            Some(section) => pins_of(section),
            None => {
                let _ = writeln!(
                    err,
                    "keel: {} has no pins in {}: its tools are withheld until `keel lock --forward {}` records them",
                    forward.namespace,
                    lock_path.display(),
                    forward.shown()
                );
                Pins::new(server.identity())
            }
        };
        let tools = server
            .importer()
            .pinned(pins)
            .strict(args.strict)
            .import()
            .await
            .map_err(|e| fail(1, format!("--forward {}: {e}", forward.shown())))?;
        for drift in tools.drift() {
            let _ = writeln!(err, "keel: withheld {}", indented(&drift));
        }
        show_findings(&forward.namespace, &tools, args.strict, err);
        imported.push(tools);
    }
    for forward in &args.forward_unpinned {
        let server = forward.connect().await?;
        let tools = server
            .importer()
            .strict(args.strict)
            .import()
            .await
            .map_err(|e| fail(1, format!("--forward-unpinned {}: {e}", forward.shown())))?;
        show_findings(&forward.namespace, &tools, args.strict, err);
        let _ = writeln!(
            err,
            "keel: forwarding {} tool(s) of {} unpinned: a change on that server reaches the model unchecked",
            tools.names().count(),
            forward.namespace
        );
        imported.push(tools);
    }
    Ok(imported)
}

/// What the description checks found in the forwarded tools of `namespace`, one line each.
fn show_findings(namespace: &str, tools: &RemoteTools, strict: bool, err: &mut dyn Write) {
    let what = if strict { "withheld" } else { "warning:" };
    for (origin, finding) in tools.findings() {
        let _ = writeln!(err, "keel: {what} {namespace}: tool {origin:?}: {finding}");
    }
}

/// A drift as lines for stderr.
pub(crate) fn indented(drift: &Drift) -> String {
    drift.to_string().replace('\n', "\n  ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwards_parse_as_a_url_or_a_command() {
        let f = parse_forward("files=https://mcp.example/mcp").unwrap();
        assert_eq!(
            f,
            Forward { namespace: "files".into(), connect: RemoteConnect::Url("https://mcp.example/mcp".into()) }
        );
        let f = parse_forward("py=python3 server.py --flag").unwrap();
        assert_eq!(f.connect, RemoteConnect::Command(vec!["python3".into(), "server.py".into(), "--flag".into()]));
        assert_eq!(f.shown(), "py=python3 server.py --flag");
        for bad in ["files", "Files=http://x", "a.b=http://x", "files=", "=http://x"] {
            assert!(parse_forward(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_lock_section_and_pins_carry_the_same_digests() {
        let mut pins = Pins::new("http://x/mcp");
        pins.tools.insert(
            "add".into(),
            keel_tools_mcp::client::Pin { digest: "sha256:ab".into(), entry: Some(serde_json::json!({"name": "add"})) },
        );
        let section = section_of(RemoteConnect::Url("http://x/mcp".into()), &pins);
        assert_eq!(pins_of(&section), pins);
    }
}
