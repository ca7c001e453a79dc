//! The `keel` command line over the tools linked into the binary.
//!
//! ```text
//! keel list [--format ollama|openai|openai-responses|anthropic|gemini|mcp] [--tag T]... [--tool-search native|keel|off]
//! keel schema NAME
//! keel call NAME [--args JSON] [--approve]
//! keel call --from ollama|openai|openai-responses|anthropic|gemini|mcp MESSAGE [--approve]
//! keel check [--json] [--deny-warnings]
//! keel lock [--path keel.lock] [--force]
//! keel lock --check [--strict] [--path keel.lock]
//! keel chat --url URL --model M [--api openai|openai-responses|anthropic|gemini|ollama] [--stream]
//!           [--tool-choice C] [--then-tool-choice C] [--temperature T] [--seed N] [--max-tokens N]
//!           [--approve NAME]... [--transcript FILE] [--events text|json|none | --quiet] PROMPT
//! keel chat --replay FILE PROMPT
//! keel serve --stdio | --http ADDR [--path /mcp] [--tag T]... [--name NAME] [--allow NAME]... [--allow-effect write]
//!            [--no-elicit] [--tool-search keel|off]
//! ```
//!
//! `keel serve` serves the tools as an MCP server with [`keel_tools_mcp::McpServer`], in both protocol eras
//! (`initialize` sessions and stateless 2026-07-28 requests): over stdio for an MCP host that starts it
//! (`{"mcpServers": {"my-tools": {"command": "keel", "args": ["serve", "--stdio"]}}}`), or over Streamable HTTP
//! (`http://ADDR/mcp`, loopback `Host` and `Origin` only). Logs go to stderr; Ctrl-C, or stdin closing under
//! `--stdio`, ends it.
//!
//! `#[tool]` registers through `inventory`, so the command sees exactly the tools of the crates its binary links.
//! The installed binary (`cargo install keel-tools-cli`, or `cargo install --path tool-cli` in a checkout) links
//! none: run in your package, it builds `keel` over the package's library and runs it ([`runner`]: `keel list`,
//! `keel serve --stdio` in your crate's folder, or `keel --manifest-path PATH/Cargo.toml -p NAME ...`). Or build it
//! yourself with a two-line `main` (in `src/bin/keel.rs` of your package, depending on `keel-tools-cli` and
//! `keel-tools`), which the installed `keel` then runs in its place:
//!
//! ```no_run
//! # mod my_tools {}
//! keel_tools_core::link_tools!(my_tools);
//! fn main() -> std::process::ExitCode { keel_tools_cli::main() }
//! ```
//!
//! Tools that take [`State<T>`](keel_tools_core::State) need that state to run under `keel call`; give it with
//! [`Cli::executor`]:
//!
//! ```no_run
//! # mod my_tools {
//! #     pub struct Store;
//! #     impl Store { pub fn open_readonly() -> Store { Store } }
//! # }
//! keel_tools_core::link_tools!(my_tools);
//! fn main() -> std::process::ExitCode {
//!     keel_tools_cli::Cli::new().executor(|b| b.state(my_tools::Store::open_readonly())).main()
//! }
//! ```
//!
//! Exit codes: 0 success; 1 a failed check, a lock violation, a tool call that did not succeed, an unknown tool;
//! 2 a usage error.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

mod chat;
mod failure;
mod forward;
pub mod runner;
mod serve;
mod tool_search;

use clap::{Parser, Subcommand, ValueEnum};
use failure::{Failure, Outcome, fail, io};
use keel_tools_contract::lint::{Finding, Severity, lint_all};
use keel_tools_contract::lock::{self, Lock, ToolStatus};
use keel_tools_core::executor::{CallOptions, ExecutorBuilder};
use keel_tools_core::{Approval, Executor, Provider, Registry, ToolCall, ToolView};
use serde_json::{Value, json};
use tool_search::ToolSearchArg;

/// The `keel` command over the tools linked into this binary: `keel_tools_cli::main()` in a binary's `main`.
pub fn main() -> ExitCode {
    Cli::new().main()
}

type Configure = Box<dyn Fn(ExecutorBuilder) -> ExecutorBuilder + Send + Sync>;

/// The command, configurable: another registry than the inventory, state for the tools `keel call` runs.
#[must_use]
pub struct Cli {
    registry: Option<Registry>,
    configure: Option<Configure>,
}

impl Default for Cli {
    fn default() -> Self {
        Cli::new()
    }
}

impl std::fmt::Debug for Cli {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cli").field("registry", &self.registry).finish_non_exhaustive()
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "keel",
    version,
    about = "List, inspect, call, check and lock the keel tools linked into this binary, chat with a model over them, and \
             serve them over MCP"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the tools: a table, or exactly what a provider is sent (`--format`).
    #[command(
        after_help = "Examples:\n  keel list\n  keel list --tag billing\n  keel list --format anthropic > tools.json\n  \
        keel list --format ollama --tool-search off"
    )]
    List {
        /// Print the provider's tool list as JSON (the same values `ToolView::schemas` returns).
        #[arg(long, value_enum)]
        format: Option<Format>,
        /// Only tools carrying this tag (repeat for tools carrying all of them).
        #[arg(long = "tag", value_name = "T")]
        tags: Vec<String>,
        /// How deferred tools (`#[tool(defer)]`) are found, when any is: `native` lists them marked
        /// `defer_loading` with the provider's own search tool where its API has one (Anthropic, OpenAI Responses)
        /// and lists keel's `search_tools` in their place elsewhere; `keel` lists `search_tools` on every API;
        /// `off` lists every tool in full.
        #[arg(long, value_enum, default_value = "native", value_name = "HOW")]
        tool_search: ToolSearchArg,
    },
    /// Print one tool's contract: version, effect, description, canonical argument and result schemas.
    #[command(after_help = "Examples:\n  keel schema lookup_incident\n  keel schema lookup_incident | jq .input")]
    Schema {
        /// The tool name.
        name: String,
    },
    /// Run one call through the executor (validation, policy, handler) and print the ToolResult; with `--from`,
    /// replay one tool call exactly as a provider's response carries it and print that provider's reply.
    #[command(after_help = "Examples:\n  keel call lookup_incident --args '{\"incident_id\": \"INC-001\"}'\n  \
        keel call --from openai '{\"id\": \"call_1\", \"type\": \"function\", \"function\": \
        {\"name\": \"lookup_incident\", \"arguments\": \"{\\\"incident_id\\\": \\\"INC-001\\\"}\"}}'")]
    Call {
        /// The tool name; with `--from`, the tool-call item as JSON (an OpenAI `tool_calls` item, an Anthropic
        /// `tool_use` block, a Gemini `functionCall` part, an OpenAI Responses `function_call` item, an Ollama
        /// `tool_calls` item, an MCP `tools/call` request).
        #[arg(value_name = "NAME | MESSAGE")]
        target: String,
        /// The arguments, a JSON object.
        #[arg(long, default_value = "{}", value_name = "JSON", conflicts_with = "from")]
        args: String,
        /// Read the argument as a tool call in this provider's format (names as `keel list --format` takes them), and
        /// answer with that provider's reply message.
        #[arg(long, value_enum, value_name = "PROVIDER")]
        from: Option<Format>,
        /// Approve exactly this call (needed for `write` and `destructive` tools).
        #[arg(long)]
        approve: bool,
    },
    /// Report what each provider will silently drop or reject; exits 1 on errors.
    #[command(
        after_help = "Examples:\n  keel check\n  keel check --deny-warnings    # in CI\n  keel check --json | jq '.[] | select(.severity == \"error\")'"
    )]
    Check {
        /// Print the findings as JSON.
        #[arg(long)]
        json: bool,
        /// Exit 1 on warnings too.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Ask a model, over the linked tools: the model's answer on stdout, the calls it makes and how they were
    /// answered on stderr; exits 0 when the model answered, 1 when the run stopped otherwise.
    Chat(Box<chat::ChatArgs>),
    /// Serve the tools as an MCP server, over stdio (`--stdio`) or Streamable HTTP (`--http ADDR`).
    Serve(serve::ServeArgs),
    /// Write the schema lock, or check the tools against it (`--check`).
    #[command(after_help = "Examples:\n  keel lock                        # write keel.lock\n  \
        keel lock --check --strict       # in CI: exit 1 on an unbumped schema change or a stale lock\n  \
        keel lock --path contracts/keel.lock\n  \
        keel lock --forward files=http://127.0.0.1:8080/mcp   # pin (approve) a remote server's tools as they are\n\n\
        The pins of remote servers (`keel serve --forward`) stay as recorded until `keel lock --forward NAME=...` \
        records that server again; `keel lock --check` connects to each pinned server and exits 1 when a tool \
        changed, appeared or vanished.")]
    Lock {
        /// Check instead of writing: exit 1 when a schema changed without the version bump it needs, or a tool
        /// appeared or vanished.
        #[arg(long)]
        check: bool,
        /// With `--check`: also exit 1 when the lock is out of date (a bumped tool not yet recorded).
        #[arg(long, requires = "check")]
        strict: bool,
        /// Write even when the current lock shows a schema change without its version bump.
        #[arg(long, conflicts_with = "check")]
        force: bool,
        /// The lock file.
        #[arg(long, default_value = lock::DEFAULT_PATH)]
        path: PathBuf,
        /// Pin the tools a remote MCP server lists now, under its namespace: `NAME=URL` (Streamable HTTP) or
        /// `NAME=COMMAND ARGS` (stdio). Repeat for more servers. This approves them as they are.
        #[arg(long = "forward", value_name = "NAME=URL|CMD", value_parser = forward::parse_forward, conflicts_with = "check")]
        forward: Vec<forward::Forward>,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Ollama,
    Openai,
    OpenaiResponses,
    Anthropic,
    Gemini,
    Mcp,
}

impl Format {
    fn provider(self) -> Provider {
        match self {
            Format::Ollama => Provider::Ollama,
            Format::Openai => Provider::OpenAiChat,
            Format::OpenaiResponses => Provider::OpenAiResponses,
            Format::Anthropic => Provider::Anthropic,
            Format::Gemini => Provider::Gemini,
            Format::Mcp => Provider::Mcp,
        }
    }
}

impl Cli {
    /// Over the inventory (every `#[tool]` linked into the binary).
    pub fn new() -> Cli {
        Cli { registry: None, configure: None }
    }

    /// Over this registry instead of the inventory.
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Configures the executor `keel call` uses (state, policy, timeout).
    pub fn executor(mut self, configure: impl Fn(ExecutorBuilder) -> ExecutorBuilder + Send + Sync + 'static) -> Self {
        self.configure = Some(Box::new(configure));
        self
    }

    /// Runs with the process's arguments, printing to stdout and stderr.
    pub fn main(self) -> ExitCode {
        // Not locked for the whole run: `keel serve --stdio` writes to stdout from the server's threads.
        let code = self.run(std::env::args_os(), &mut std::io::stdout(), &mut std::io::stderr());
        ExitCode::from(code)
    }

    /// Runs with `args` (the first is the program name), writing to `out` and `err`; returns the exit code.
    ///
    /// `serve --stdio` speaks MCP on the process's own stdin and stdout whatever `out` is: do not hold a lock on
    /// stdout or stderr (`std::io::stdout().lock()`) as `out` or `err` when running it.
    pub fn run<I, T>(&self, args: I, out: &mut dyn Write, err: &mut dyn Write) -> u8
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let args = match Args::try_parse_from(args) {
            Ok(a) => a,
            Err(e) => {
                let text = e.render().to_string();
                let _ = if e.use_stderr() { err.write_all(text.as_bytes()) } else { out.write_all(text.as_bytes()) };
                return u8::try_from(e.exit_code()).unwrap_or(2);
            }
        };
        let registry = match &self.registry {
            Some(r) => r.clone(),
            None => match Registry::from_inventory() {
                Ok(r) => r,
                Err(e) => {
                    let _ = writeln!(err, "keel: {e}");
                    return 1;
                }
            },
        };
        let result = match args.command {
            Command::List { format, tags, tool_search } => list(&registry, format, &tags, tool_search, out),
            Command::Schema { name } => schema(&registry, &name, out),
            Command::Call { target, args, from: None, approve } => self.call(&registry, &target, &args, approve, out),
            Command::Call { target, from: Some(format), approve, .. } => {
                self.replay(&registry, format.provider(), &target, approve, out)
            }
            Command::Check { json, deny_warnings } => check(&registry, json, deny_warnings, out),
            Command::Lock { check: true, strict, path, .. } => lock_check(&registry, &path, strict, out),
            Command::Lock { check: false, force, path, forward, .. } => {
                lock_write(&registry, &path, force, &forward, out)
            }
            Command::Chat(chat) => chat::chat(registry.all().clone(), &|v| self.executor_over(v), *chat, out, err),
            // Over MCP, deferred tools are found through keel's `search_tools`, and a session lists what its
            // searches surfaced (keel-tools-mcp).
            Command::Serve(args) => {
                view(&registry, args.tags()).and_then(|v| serve::serve(v, &|v| self.executor_over(v), args, err))
            }
        };
        match result {
            Ok(code) => code,
            Err(f) => {
                let _ = writeln!(err, "keel: {}", f.message);
                f.code
            }
        }
    }

    fn build_executor(&self, registry: &Registry) -> Result<Executor, Failure> {
        self.executor_over(registry.all().clone())
    }

    fn executor_over(&self, view: ToolView) -> Result<Executor, Failure> {
        let mut builder = Executor::builder(view);
        if let Some(configure) = &self.configure {
            builder = configure(builder);
        }
        builder.build().map_err(|e| fail(1, e.to_string()))
    }

    fn call(&self, registry: &Registry, name: &str, args: &str, approve: bool, out: &mut dyn Write) -> Outcome {
        let executor = self.build_executor(registry)?;
        let call = ToolCall::from_json_text_with_limits("cli-1", name, args, executor.limits());
        let result = run(&executor, call, approve)?;
        let text = serde_json::to_string_pretty(&result).map_err(|e| fail(1, e.to_string()))?;
        writeln!(out, "{text}").map_err(io)?;
        Ok(if result.is_ok() { 0 } else { 1 })
    }

    /// `keel call --from PROVIDER MESSAGE`: the call read by the provider's codec, the reply it writes.
    fn replay(
        &self,
        registry: &Registry,
        provider: Provider,
        message: &str,
        approve: bool,
        out: &mut dyn Write,
    ) -> Outcome {
        let item: Value = serde_json::from_str(message).map_err(|e| {
            fail(
                2,
                format!(
                    "the message is not JSON (line {}, column {}); pass one tool call as a JSON value",
                    e.line(),
                    e.column()
                ),
            )
        })?;
        let executor = self.build_executor(registry)?;
        let codec = executor.codec(provider);
        let result = run(&executor, codec.call(&item, 0), approve)?;
        let text = serde_json::to_string_pretty(&codec.reply(&result)).map_err(|e| fail(1, e.to_string()))?;
        writeln!(out, "{text}").map_err(io)?;
        Ok(if result.is_ok() { 0 } else { 1 })
    }
}

/// Runs one call (approved for exactly its arguments with `approve`) on a one-thread runtime.
fn run(executor: &Executor, call: ToolCall, approve: bool) -> Result<keel_tools_core::ToolResult, Failure> {
    let mut options = CallOptions::new();
    if approve && let Ok(arguments) = call.arguments() {
        options = options.approve(Approval::new(call.name(), arguments));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| fail(1, format!("cannot start the runtime: {e}")))?;
    Ok(runtime.block_on(executor.call_with(call, &options)))
}

fn view(registry: &Registry, tags: &[String]) -> Result<ToolView, Failure> {
    let mut builder = registry.view();
    for t in tags {
        builder = builder.tag(t.clone());
    }
    builder.build().map_err(|e| fail(1, e.to_string()))
}

fn list(
    registry: &Registry,
    format: Option<Format>,
    tags: &[String],
    search: ToolSearchArg,
    out: &mut dyn Write,
) -> Outcome {
    let view = view(registry, tags)?;
    if let Some(format) = format {
        let sent = search.view(view)?;
        let tools = keel_tools_agent::deferral::first_turn_tools(&sent, format.provider(), search.agent());
        let text = serde_json::to_string_pretty(&tools).map_err(|e| fail(1, e.to_string()))?;
        writeln!(out, "{text}").map_err(io)?;
        return Ok(0);
    }
    let rows: Vec<[String; 5]> = view
        .iter()
        .map(|d| {
            let first_line = d.description().lines().next().unwrap_or("").to_owned();
            let effect = if d.deferred() { format!("{} (deferred)", d.effect()) } else { d.effect().to_string() };
            [
                d.name().to_owned(),
                d.version().to_owned(),
                effect,
                d.tags().collect::<Vec<_>>().join(","),
                shorten(&first_line, 72),
            ]
        })
        .collect();
    table(out, ["NAME", "VERSION", "EFFECT", "TAGS", "DESCRIPTION"], &rows).map_err(io)?;
    let deferred = view.iter().filter(|d| d.deferred()).count();
    if deferred == 0 {
        writeln!(out, "({} tools)", rows.len()).map_err(io)?;
    } else {
        let how = match search {
            ToolSearchArg::Off => "listed in full (--tool-search off)",
            _ => "found by tool search",
        };
        writeln!(out, "({} tools; {deferred} deferred, {how})", rows.len()).map_err(io)?;
    }
    Ok(0)
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let mut s: String = text.chars().take(max).collect();
        s.push('…');
        s
    }
}

fn table<const N: usize>(out: &mut dyn Write, header: [&str; N], rows: &[[String; N]]) -> std::io::Result<()> {
    let mut widths = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut line = |cells: Vec<&str>| -> std::io::Result<()> {
        let padded: Vec<String> = cells.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        writeln!(out, "{}", padded.join("  ").trim_end())
    };
    line(header.to_vec())?;
    for row in rows {
        line(row.iter().map(String::as_str).collect())?;
    }
    Ok(())
}

fn unknown_tool(registry: &Registry, name: &str) -> Failure {
    let names: Vec<&str> = registry.names().collect();
    fail(1, format!("no tool named {name:?}; the linked tools are: {}", names.join(", ")))
}

fn schema(registry: &Registry, name: &str, out: &mut dyn Write) -> Outcome {
    let def = registry.get(name).ok_or_else(|| unknown_tool(registry, name))?;
    let strictness = |s: Result<(), String>| match s {
        Ok(()) => Value::Bool(true),
        Err(reason) => Value::String(reason),
    };
    let strict = strictness(def.openai_strictness());
    let anthropic_strict = strictness(def.anthropic_strictness());
    let value = json!({
        "name": def.name(),
        "wire_name": def.wire_name(),
        "version": def.version(),
        "effect": def.effect(),
        "idempotent": def.idempotent(),
        "tags": def.tags().collect::<Vec<_>>(),
        "description": def.description(),
        "input": def.input_schema(),
        "output": def.output_schema(),
        "openai_strict": strict,
        "anthropic_strict": anthropic_strict,
        "fingerprints": {
            "input": lock::fingerprint(def.input_schema()),
            "output": def.output_schema().map(lock::fingerprint),
        },
    });
    let text = serde_json::to_string_pretty(&value).map_err(|e| fail(1, e.to_string()))?;
    writeln!(out, "{text}").map_err(io)?;
    Ok(0)
}

fn check(registry: &Registry, json: bool, deny_warnings: bool, out: &mut dyn Write) -> Outcome {
    let findings = lint_all(registry.iter().map(|d| &**d));
    let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    let (errors, warnings, infos) = (count(Severity::Error), count(Severity::Warning), count(Severity::Info));
    if json {
        let text = serde_json::to_string_pretty(&findings).map_err(|e| fail(1, e.to_string()))?;
        writeln!(out, "{text}").map_err(io)?;
    } else {
        let mut tools: Vec<&str> = findings.iter().map(|f| f.tool.as_str()).collect();
        tools.dedup();
        for tool in tools {
            writeln!(out, "{tool}").map_err(io)?;
            let mut of_tool: Vec<&Finding> = findings.iter().filter(|f| f.tool == tool).collect();
            of_tool.sort_by_key(|f| std::cmp::Reverse(f.severity));
            for f in of_tool {
                let provider = f.provider.map_or("all", Provider::as_str);
                writeln!(out, "  {:<7}  {:<16}  {}", f.severity.as_str(), provider, f.message).map_err(io)?;
            }
        }
        writeln!(out, "check: {} tools, {errors} error(s), {warnings} warning(s), {infos} note(s)", registry.len())
            .map_err(io)?;
    }
    Ok(if errors > 0 || (deny_warnings && warnings > 0) { 1 } else { 0 })
}

fn read_lock(path: &PathBuf) -> Result<String, Failure> {
    std::fs::read_to_string(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            fail(1, format!("there is no lock at {}; run `keel lock` to write one", path.display()))
        } else {
            fail(1, format!("cannot read {}: {e}", path.display()))
        }
    })
}

fn lock_check(registry: &Registry, path: &PathBuf, strict: bool, out: &mut dyn Write) -> Outcome {
    let text = read_lock(path)?;
    let report = lock::check(registry, &text).map_err(|e| fail(1, format!("{}: {e}", path.display())))?;
    let remote = Lock::parse(&text).map(|l| l.remote).unwrap_or_default();
    let drifted = if remote.is_empty() { 0 } else { block_on(check_remote(&remote, path, out))?? };
    if report.is_current() {
        writeln!(out, "{}: {} tool(s), the lock is current", path.display(), report.tools.len()).map_err(io)?;
        return Ok(if drifted > 0 { 1 } else { 0 });
    }
    writeln!(out, "{}: {report}", path.display()).map_err(io)?;
    Ok(if !report.is_ok() || strict || drifted > 0 { 1 } else { 0 })
}

/// Connects to each pinned remote server and prints each tool that differs from its pin; returns how many differ.
async fn check_remote(
    remote: &std::collections::BTreeMap<String, lock::RemoteLock>,
    path: &std::path::Path,
    out: &mut dyn Write,
) -> Result<usize, Failure> {
    let mut drifted = 0;
    for (namespace, section) in remote {
        let forward = forward::Forward { namespace: namespace.clone(), connect: section.connect.clone() };
        let server = forward.connect().await?;
        let current = keel_tools_mcp::client::Pins::of(&server)
            .await
            .map_err(|e| fail(1, format!("{namespace}: tools/list failed: {e}")));
        server.close().await;
        let drifts = forward::pins_of(section).compare(namespace, &current?);
        if drifts.is_empty() {
            writeln!(out, "{}: {namespace}: {} pinned tool(s), unchanged", path.display(), section.tools.len())
                .map_err(io)?;
        }
        for drift in &drifts {
            writeln!(out, "{}: {}", path.display(), forward::indented(drift)).map_err(io)?;
        }
        drifted += drifts.len();
    }
    if drifted > 0 {
        writeln!(
            out,
            "{drifted} remote tool(s) differ from their pins; review them, then approve with `keel lock --forward NAME=...`"
        )
        .map_err(io)?;
    }
    Ok(drifted)
}

/// Runs `future` on a runtime of its own (the commands that talk to remote servers).
fn block_on<F: std::future::Future>(future: F) -> Result<F::Output, Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| fail(1, format!("cannot start the runtime: {e}")))?;
    Ok(runtime.block_on(future))
}

/// Pins what each `--forward` server lists now into `lock`'s remote sections, saying what it approves.
async fn pin_forwards(lock: &mut Lock, forwards: &[forward::Forward], out: &mut dyn Write) -> Result<(), Failure> {
    for f in forwards {
        let server = f.connect().await?;
        let listed =
            server.list_tools().await.map_err(|e| fail(1, format!("--forward {}: tools/list failed: {e}", f.shown())));
        server.close().await;
        let listed = listed?;
        // What is approved here is shown to the model: say what looks like tool poisoning before it is pinned.
        for tool in &listed {
            let schema = Value::Object((*tool.input_schema).clone());
            let description = tool.description.as_deref().unwrap_or_default();
            for finding in keel_tools_contract::lint::description::check_description(&tool.name, description, &schema) {
                writeln!(out, "warning: {}: tool {:?}: {finding}", f.namespace, tool.name).map_err(io)?;
            }
        }
        let pins = keel_tools_mcp::client::Pins::of_listing(server.identity(), &listed);
        if let Some(old) = lock.remote.get(&f.namespace) {
            for drift in forward::pins_of(old).compare(&f.namespace, &pins) {
                writeln!(out, "approving {}", forward::indented(&drift)).map_err(io)?;
            }
        }
        writeln!(out, "pinned {} tool(s) of {} ({})", pins.tools.len(), f.namespace, pins.server).map_err(io)?;
        lock.remote.insert(f.namespace.clone(), forward::section_of(f.connect.clone(), &pins));
    }
    Ok(())
}

fn lock_write(
    registry: &Registry,
    path: &PathBuf,
    force: bool,
    forwards: &[forward::Forward],
    out: &mut dyn Write,
) -> Outcome {
    if !force && let Ok(old) = std::fs::read_to_string(path) {
        // Regenerating must not launder a schema change whose version was not bumped.
        if let Ok(report) = lock::check(registry, &old) {
            let violations: Vec<String> = report
                .errors()
                .filter(|t| matches!(t.status, ToolStatus::NeedsBump { .. } | ToolStatus::VersionDecreased { .. }))
                .map(ToString::to_string)
                .collect();
            if !violations.is_empty() {
                return Err(fail(
                    1,
                    format!(
                        "not writing {}: bump the versions first (or pass --force):\n{}",
                        path.display(),
                        violations.join("\n")
                    ),
                ));
            }
        }
    }
    let mut lock = Lock::of_registry(registry);
    // The pins of remote servers stay as they were approved, unless `--forward` records a server again.
    if let Ok(Some(old)) = forward::read_lock(path) {
        lock.remote = old.remote;
    }
    if !forwards.is_empty() {
        block_on(pin_forwards(&mut lock, forwards, out))??;
    }
    std::fs::write(path, lock.to_json()).map_err(|e| fail(1, format!("cannot write {}: {e}", path.display())))?;
    writeln!(out, "wrote {} ({} tools)", path.display(), lock.tools.len()).map_err(io)?;
    Ok(0)
}
