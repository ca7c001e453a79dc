//! A fixed number of calls of one contender, for instruction-level profiling of the executor path.
//!
//! ```sh
//! CARGO_PROFILE_RELEASE_DEBUG=true cargo build --release -p keel-bench --features examples --example profile_executor
//! valgrind --tool=callgrind --toggle-collect='*profile_executor::timed_poll*' \
//!     --callgrind-out-file=target/callgrind.keel.out target/release/examples/profile_executor keel 20000
//! callgrind_annotate --inclusive=yes target/callgrind.keel.out | head -60
//! ```
//!
//! Contenders: `floor`, `keel` (inline handler), `keel-async`, `keel-blocking`, `rmcp`, `keel-mcp` (the inline
//! call rendered into an MCP `CallToolResult`, as keel's MCP server answers, to compare with `rmcp`, which renders
//! one too), `unknown`, `invalid`, `approval`, `run`, `registry` (a registry build of N run-time definitions)
//! `view` (N turns, each a view of the 200 compiled tools by name and its Ollama list, `schemas()`, serialised)
//! and `view-list` (the same with `tool_list().to_json()`). Only `timed_poll` (and what it calls) is collected
//! with the `--toggle-collect` above, so building each call's input is left out, as in the criterion benches.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll};

use keel_bench::rmcp_peer::RmcpHarness;
use keel_bench::{fixture, floor, keel};
use keel_tools_core::runs::{Run, StopPolicy};
use keel_tools_core::{Codec, Executor, Provider, ToolCall, ToolResult};
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData};
use serde_json::Value;

/// Polls `fut` in a frame of its own (never inlined), so that a profiler can attribute exactly the work done
/// while polling it: building the future happens inside this frame too, as the future is made lazily.
#[inline(never)]
fn timed_poll<F: Future>(fut: std::pin::Pin<&mut F>, cx: &mut Context<'_>) -> Poll<F::Output> {
    fut.poll(cx)
}

/// One turn's tool list in a frame of its own: a view of `names` chosen from `registry`, its Ollama list, and
/// that list serialised as a request body carries it. Returns the body's length.
#[inline(never)]
fn timed_poll_view_turn(registry: &keel_tools_core::Registry, names: &[&str]) -> usize {
    let view = registry.view().names(names.iter().copied()).build().expect("known names");
    let codec = view.codec(keel_tools_core::Provider::Ollama);
    serde_json::to_vec(codec.tools()).map_or(0, |body| body.len())
}

/// The same turn with the borrowed list: a view of `names`, its Ollama list as the JSON text a request carries
/// (each tool's cached text joined). Returns the text's length.
#[inline(never)]
fn timed_poll_view_list_turn(registry: &keel_tools_core::Registry, names: &[&str]) -> usize {
    let view = registry.view().names(names.iter().copied()).build().expect("known names");
    view.tool_list(keel_tools_core::Provider::Ollama).to_json().len()
}

/// Builds a registry of `defs` in a frame of its own (matched by the same `--toggle-collect` pattern).
#[inline(never)]
fn timed_poll_registry_build(defs: Vec<keel_tools_core::definition::ToolDefinition>) -> keel_tools_core::Registry {
    keel_tools_core::Registry::builder().without_inventory().tools(defs).build().expect("unique names")
}

async fn timed<F: Future>(make: impl FnOnce() -> F) -> F::Output {
    let mut fut = pin!(timed_make(make));
    std::future::poll_fn(|cx| timed_poll(fut.as_mut(), cx)).await
}

/// The future is made (and the input moved in) inside the first timed poll.
async fn timed_make<F: Future>(make: impl FnOnce() -> F) -> F::Output {
    make().await
}

async fn timed_keel(executor: &Executor, call: ToolCall) -> ToolResult {
    timed(|| executor.call(call)).await
}

/// The call and its MCP rendering, as keel's MCP server answers `tools/call`: `Executor::call`, then
/// `keel_tools_mcp::render::into_call_tool_result` with the MCP codec of the executor's view (the server's, built
/// once), the result's data moved into the `CallToolResult`; the rendered result is the output.
async fn timed_keel_mcp(executor: &Executor, codec: &Codec, call: ToolCall) -> CallToolResult {
    timed(|| async move { keel_tools_mcp::render::into_call_tool_result(executor.call(call).await, codec) }).await
}

async fn timed_floor(arguments: Value) -> Result<Value, String> {
    timed(|| floor::dispatch("search_incidents", arguments)).await
}

async fn timed_rmcp(rmcp: &RmcpHarness, params: CallToolRequestParams) -> Result<CallToolResponse, ErrorData> {
    timed(|| rmcp.call(params)).await
}

async fn timed_run(run: &mut Run, batch: Vec<ToolCall>) {
    black_box(timed(|| run.process_batch(batch)).await);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let contender = args.next().unwrap_or_else(|| "keel".to_owned());
    let n: usize = args.next().map_or(10_000, |s| s.parse().expect("a number of calls"));
    if contender == "registry" {
        // `n` run-time definitions, built untimed; only the registry build is collected.
        let (input, output) = keel_bench::dynamic::schemas();
        let defs = keel_bench::dynamic::definitions(n, &input, &output);
        black_box(timed_poll_registry_build(defs));
        return;
    }
    if contender == "view" || contender == "view-list" {
        // `n` turns, each a new view of the 200 compiled tools (rendered once, untimed, before the first turn).
        let registry = keel_tools_core::Registry::from_inventory().expect("unique names");
        black_box(registry.ollama_schemas().len());
        let names: Vec<&str> = registry.names().filter(|n| n.starts_with("generated.")).collect();
        assert_eq!(names.len(), keel_bench::generated::COUNT);
        let turn = if contender == "view" { timed_poll_view_turn } else { timed_poll_view_list_turn };
        for _ in 0..n {
            black_box(turn(&registry, &names));
        }
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a Tokio runtime");
    let executor = keel::executor();
    let valid = fixture::valid_arguments();
    let invalid = fixture::invalid_arguments();
    rt.block_on(async {
        let keel_call = |name: &str, args: &Value| ToolCall::new("call-1", name, args.clone());
        match contender.as_str() {
            "floor" => {
                for _ in 0..n {
                    black_box(timed_floor(valid.clone()).await.expect("floor answers"));
                }
            }
            "rmcp" => {
                let rmcp = RmcpHarness::start();
                let obj = valid.as_object().expect("an object").clone();
                for _ in 0..n {
                    let params = RmcpHarness::params("search_incidents", obj.clone());
                    black_box(timed_rmcp(&rmcp, params).await.expect("rmcp answers"));
                }
            }
            "keel-mcp" => {
                let codec = executor.view().codec(Provider::Mcp);
                for _ in 0..n {
                    let r = timed_keel_mcp(&executor, &codec, keel_call("search_incidents", &valid)).await;
                    assert!(r.is_error != Some(true) && r.structured_content.is_some(), "a structured success");
                    black_box(r);
                }
            }
            "run" => {
                let stop = StopPolicy { max_steps: u32::MAX, max_retries: u32::MAX };
                for _ in 0..n {
                    let mut run = Run::builder(executor.clone()).stop_policy(stop).build();
                    timed_run(&mut run, vec![keel_call("search_incidents", &valid)]).await;
                }
            }
            other => {
                let (name, args, code) = match other {
                    "keel" => ("search_incidents", &valid, None),
                    "keel-async" => ("search_incidents_async", &valid, None),
                    "keel-blocking" => ("search_incidents_blocking", &valid, None),
                    "unknown" => ("no_such_tool", &valid, Some("unknown_tool")),
                    "invalid" => ("search_incidents", &invalid, Some("invalid_arguments")),
                    "approval" => ("file_incident", &valid, Some("approval_required")),
                    _ => panic!("unknown contender {other:?}"),
                };
                for _ in 0..n {
                    let r = timed_keel(&executor, keel_call(name, args)).await;
                    assert_eq!(r.code(), code);
                    black_box(r);
                }
            }
        }
    });
}
