//! Serve your tools over MCP, to any MCP host, on stdio or over Streamable HTTP.
//!
//! ```text
//! cargo run -p examples --example serve_tools -- --stdio
//! cargo run -p examples --example serve_tools -- --http 127.0.0.1:8080     # http://127.0.0.1:8080/mcp
//! ```
//!
//! An MCP host starts the stdio server from its configuration:
//!
//! ```text
//! {"mcpServers": {"notes": {"command": "/path/to/target/debug/examples/serve_tools", "args": ["--stdio"]}}}
//! ```
//!
//! `count_words` is a `read` tool: it runs when called. `add_note` is a `write` tool: the default policy answers
//! its calls `approval_required`, and it runs only once approved.

use std::error::Error;
use std::sync::Mutex;

use keel_tools::executor::CancellationToken;
use keel_tools::mcp::McpServer;
use keel_tools::{Executor, Registry, State, tool};

/// Counts the words of a text.
#[tool(effect = "read", version = "1.0")]
pub fn count_words(text: String) -> usize {
    text.split_whitespace().count()
}

/// The notes taken since the server started.
#[derive(Default)]
pub struct Notes(Mutex<Vec<String>>);

/// Adds a note, and returns how many there are.
#[tool(effect = "write", version = "1.0")]
pub fn add_note(State(notes): State<Notes>, note: String) -> usize {
    let mut notes = notes.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    notes.push(note);
    notes.len()
}

/// The server: these two tools, behind the executor's checks.
pub fn server() -> Result<McpServer, Box<dyn Error>> {
    let view = Registry::from_inventory()?.view().names(["count_words", "add_note"]).build()?;
    let executor = Executor::builder(view).state(Notes::default()).build()?;
    Ok(McpServer::builder(executor).name("notes").build()?)
}

/// Serves `server` over Streamable HTTP at `/mcp` on `listener` until `shutdown` is cancelled.
pub async fn serve_http(
    server: McpServer,
    listener: tokio::net::TcpListener,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    server.serve_http(listener, "/mcp", shutdown).await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let server = server()?;
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["--stdio"] => server.serve_stdio().await?,
        ["--http", addr] => {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            // Logs go to stderr: on stdio, stdout is the protocol's.
            eprintln!("serving http://{}/mcp (Ctrl-C ends it)", listener.local_addr()?);
            let shutdown = CancellationToken::new();
            let stop = shutdown.clone();
            tokio::spawn(async move {
                let _ = tokio::signal::ctrl_c().await;
                stop.cancel();
            });
            serve_http(server, listener, shutdown).await?;
        }
        _ => {
            eprintln!("usage: serve_tools --stdio | --http ADDR");
            std::process::exit(2);
        }
    }
    Ok(())
}
