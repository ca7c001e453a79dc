//! Parallel tool calls in one batch (`RunBuilder::concurrency`): which calls overlap, the caps, the model's order
//! of events and results, and the batch rules after a terminal decision (no further start, running calls
//! cancelled and reported, the exact not-executed list).
//!
//! Overlap is shown without timing: handlers meet at a barrier that only as many calls as overlap can pass, with a
//! timeout that fails the test instead of hanging it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_tools_core::events::{Decision, EventKind};
use keel_tools_core::policy::{PolicyDecision, PolicyRequest};
use keel_tools_core::runs::{Concurrency, Run};
use keel_tools_core::{CallContext, Executor, Registry, State, ToolCall, ToolError, tool};
use serde_json::json;
use tokio::sync::Barrier;

/// What the handlers of one test share: a log of starts and ends, the calls in flight, and barriers by name.
#[derive(Default)]
struct Board {
    log: Mutex<Vec<String>>,
    in_flight: Mutex<HashMap<String, (usize, usize)>>,
    barriers: Mutex<HashMap<String, Arc<Barrier>>>,
}

impl Board {
    fn with_barrier(self, name: &str, n: usize) -> Board {
        self.barriers.lock().unwrap().insert(name.to_owned(), Arc::new(Barrier::new(n)));
        self
    }
    fn start(&self, tool: &str, label: &str) {
        self.log.lock().unwrap().push(format!("start {label}"));
        let mut f = self.in_flight.lock().unwrap();
        for key in [tool, "*"] {
            let e = f.entry(key.to_owned()).or_default();
            e.0 += 1;
            e.1 = e.1.max(e.0);
        }
    }
    fn end(&self, tool: &str, label: &str) {
        self.log.lock().unwrap().push(format!("end {label}"));
        let mut f = self.in_flight.lock().unwrap();
        for key in [tool, "*"] {
            f.get_mut(key).unwrap().0 -= 1;
        }
    }
    fn peak(&self, key: &str) -> usize {
        self.in_flight.lock().unwrap().get(key).map_or(0, |e| e.1)
    }
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// What one step of a handler does: meet at a barrier, sleep, wait for cancellation, or fail.
async fn act(board: &Board, ctx: &CallContext, tool: &str, label: &str, how: &str) -> Result<String, ToolError> {
    board.start(tool, label);
    let outcome = match how.split_once(':') {
        Some(("meet", name)) => {
            let barrier = board.barriers.lock().unwrap()[name].clone();
            match tokio::time::timeout(Duration::from_secs(10), barrier.wait()).await {
                Ok(_) => Ok(label.to_owned()),
                Err(_) => Err(ToolError::internal("the barrier was never passed: the calls did not overlap")),
            }
        }
        Some(("sleep", ms)) => {
            tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
            Ok(label.to_owned())
        }
        // Sees its cancellation, and goes on past the grace period: the call is answered without it.
        Some(("hang", _)) => {
            ctx.cancellation().cancelled().await;
            board.log.lock().unwrap().push(format!("cancelled {label}"));
            tokio::time::sleep(Duration::from_secs(2)).await;
            Ok(label.to_owned())
        }
        _ => Ok(label.to_owned()),
    };
    board.end(tool, label);
    outcome
}

/// Reads something slowly.
#[tool(name = "par.read", effect = "read", version = "1.0")]
async fn par_read(board: State<Board>, ctx: CallContext, label: String, how: String) -> Result<String, ToolError> {
    act(&board, &ctx, "par.read", &label, &how).await
}

/// Reads something else slowly.
#[tool(name = "par.other", effect = "read", version = "1.0")]
async fn par_other(board: State<Board>, ctx: CallContext, label: String, how: String) -> Result<String, ToolError> {
    act(&board, &ctx, "par.other", &label, &how).await
}

/// Writes something.
#[tool(name = "par.write", effect = "write", version = "1.0")]
async fn par_write(board: State<Board>, ctx: CallContext, label: String, how: String) -> Result<String, ToolError> {
    act(&board, &ctx, "par.write", &label, &how).await
}

/// A read tool that the test's policy refuses.
#[tool(name = "par.forbidden", effect = "read", version = "1.0")]
async fn par_forbidden(board: State<Board>, ctx: CallContext, label: String, how: String) -> Result<String, ToolError> {
    act(&board, &ctx, "par.forbidden", &label, &how).await
}

/// Allows everything but `par.forbidden` (writes too, so that they need no approval here).
fn policy(r: &PolicyRequest<'_>) -> PolicyDecision {
    if r.tool.name() == "par.forbidden" {
        PolicyDecision::Deny { reason: "not here".into() }
    } else {
        PolicyDecision::Allow
    }
}

fn setup(board: Board, concurrency: Concurrency) -> (Run, Arc<Board>) {
    let board = Arc::new(board);
    let registry = Registry::from_inventory().unwrap();
    let view = registry.view().names(["par.read", "par.other", "par.write", "par.forbidden"]).build().unwrap();
    let executor = Executor::builder(view)
        .policy(policy)
        .state_arc(board.clone())
        .timeout_grace(Duration::from_millis(50))
        .build()
        .unwrap();
    (Run::builder(executor).concurrency(concurrency).build(), board)
}

fn call(id: &str, tool: &str, how: &str) -> ToolCall {
    ToolCall::new(id, tool, json!({"label": id, "how": how}))
}

fn codes(results: &[keel_tools_core::ToolResult]) -> Vec<(String, String)> {
    results.iter().map(|r| (r.call_id.clone(), r.code().unwrap_or("ok").to_owned())).collect()
}

/// The log's tool events as `requested id` / `observed id code decision`.
fn events(run: &Run) -> Vec<String> {
    run.log()
        .events()
        .iter()
        .map(|e| match &e.kind {
            EventKind::ToolRequested { call_id, .. } => format!("requested {call_id}"),
            EventKind::ToolObservation { call_id, code, decision, .. } => {
                format!("observed {call_id} {} {decision}", code.as_deref().unwrap_or("ok"))
            }
            EventKind::ToolRejected { call_id, code, .. } => format!("rejected {call_id} {code}"),
            EventKind::RunFinished { reason, .. } => format!("finished {reason}"),
            other => format!("{other:?}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_calls_overlap_up_to_the_cap() {
    let (mut run, board) = setup(Board::default().with_barrier("all", 4), Concurrency::new(4));
    let batch = run.process_batch((1..=4).map(|i| call(&format!("c{i}"), "par.read", "meet:all")).collect()).await;
    assert_eq!(
        codes(&batch.results),
        [("c1", "ok"), ("c2", "ok"), ("c3", "ok"), ("c4", "ok")].map(|(a, b)| (a.into(), b.into()))
    );
    assert_eq!(board.peak("*"), 4);
    assert_eq!(batch.decision, Decision::Continue);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_is_the_default_and_no_two_calls_overlap() {
    let board = Arc::new(Board::default());
    let registry = Registry::from_inventory().unwrap();
    let view = registry.view().names(["par.read"]).build().unwrap();
    let executor = Executor::builder(view).state_arc(board.clone()).build().unwrap();
    let mut run = Run::new(executor);
    let batch = run.process_batch((1..=3).map(|i| call(&format!("c{i}"), "par.read", "sleep:20")).collect()).await;
    assert!(batch.results.iter().all(|r| r.is_ok()));
    assert_eq!(board.peak("*"), 1);
    assert_eq!(board.log(), ["start c1", "end c1", "start c2", "end c2", "start c3", "end c3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caps_hold_for_the_batch_and_for_each_tool() {
    // Two at once in all: pairs meet at a barrier of two.
    let (mut run, board) = setup(Board::default().with_barrier("pair", 2), Concurrency::new(2));
    let calls = (1..=4).map(|i| call(&format!("c{i}"), "par.read", "meet:pair")).collect();
    let batch = run.process_batch(calls).await;
    assert!(batch.results.iter().all(|r| r.is_ok()), "{:?}", codes(&batch.results));
    assert_eq!(board.peak("*"), 2);

    // Four at once, one per tool: a1 and b1 meet, then a2 and b2; two calls of one tool never overlap.
    let (mut run, board) = setup(Board::default().with_barrier("pair", 2), Concurrency::new(4).per_tool(1));
    let calls = vec![
        call("a1", "par.read", "meet:pair"),
        call("b1", "par.other", "meet:pair"),
        call("a2", "par.read", "meet:pair"),
        call("b2", "par.other", "meet:pair"),
    ];
    let batch = run.process_batch(calls).await;
    assert!(batch.results.iter().all(|r| r.is_ok()), "{:?}", codes(&batch.results));
    assert_eq!((board.peak("par.read"), board.peak("par.other"), board.peak("*")), (1, 1, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_runs_alone_in_its_place() {
    let (mut run, board) = setup(Board::default().with_barrier("two", 2), Concurrency::new(8));
    let calls = vec![
        call("r1", "par.read", "meet:two"),
        call("r2", "par.other", "meet:two"),
        call("w1", "par.write", "sleep:20"),
        call("w2", "par.write", "sleep:1"),
        call("r3", "par.read", "sleep:1"),
    ];
    let batch = run.process_batch(calls).await;
    assert!(batch.results.iter().all(|r| r.is_ok()), "{:?}", codes(&batch.results));
    let log = board.log();
    let at = |s: &str| log.iter().position(|l| l == s).unwrap_or_else(|| panic!("{s} in {log:?}"));
    assert!(at("end r1") < at("start w1") && at("end r2") < at("start w1"), "{log:?}");
    assert_eq!(&log[at("start w1")..], ["start w1", "end w1", "start w2", "end w2", "start r3", "end r3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_and_results_keep_the_models_order_whatever_finishes_first() {
    let (mut run, board) = setup(Board::default(), Concurrency::new(3));
    let calls = vec![
        call("slow", "par.read", "sleep:300"),
        call("fast", "par.read", "sleep:1"),
        call("mid", "par.other", "sleep:100"),
    ];
    let batch = run.process_batch(calls).await;
    // All three run at once (in whatever order the runtime starts them): the fast one ends first.
    assert!(board.log().iter().position(|l| l == "end fast") < board.log().iter().position(|l| l == "end slow"));
    let ids: Vec<&str> = batch.results.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, ["slow", "fast", "mid"]);
    assert_eq!(
        events(&run),
        [
            "requested slow",
            "observed slow ok continue",
            "requested fast",
            "observed fast ok continue",
            "requested mid",
            "observed mid ok continue"
        ]
    );
    assert_eq!(run.state().steps(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_terminal_decision_nothing_starts_and_running_calls_are_cancelled_and_reported() {
    let (mut run, board) = setup(Board::default(), Concurrency::new(3));
    // `ok` outlasts the policy's refusal of `denied` by far, even on a loaded machine: `queued` may start only once
    // a slot frees with every earlier call decided, and by then `denied` has stopped the batch.
    let calls = vec![
        call("ok", "par.read", "sleep:200"),
        call("denied", "par.forbidden", "sleep:1"),
        call("running", "par.other", "hang:"),
        call("queued", "par.read", "sleep:1"),
        call("later", "par.write", "sleep:1"),
    ];
    let batch = run.process_batch(calls).await;
    assert_eq!(batch.decision, Decision::Error);
    assert_eq!(
        codes(&batch.results),
        [("ok", "ok"), ("denied", "policy_denied"), ("running", "cancelled")].map(|(a, b)| (a.into(), b.into()))
    );
    assert_eq!(batch.results[2].handler_state(), Some(keel_tools_core::results::HandlerState::Running), "not finished");
    let not: Vec<&str> = batch.not_executed.iter().map(|n| n.call_id.as_str()).collect();
    assert_eq!(not, ["queued", "later"], "exactly the calls that never started");
    let log = board.log();
    assert!(log.contains(&"cancelled running".to_owned()), "the running call saw its cancellation: {log:?}");
    assert!(!log.iter().any(|l| l.ends_with("queued") || l.ends_with("later") || l.ends_with("denied")), "{log:?}");
    assert_eq!(
        events(&run),
        [
            "requested ok",
            "observed ok ok continue",
            "requested denied",
            "observed denied policy_denied error",
            "requested running",
            "observed running cancelled error",
            "finished after_observation"
        ]
    );
    let finished = run.log().events().last().unwrap();
    let EventKind::RunFinished { not_executed, steps, .. } = &finished.kind else { panic!("{finished:?}") };
    assert_eq!(not_executed.iter().map(|n| n.call_id.as_str()).collect::<Vec<_>>(), ["queued", "later"]);
    assert_eq!(*steps, 2, "the cancelled call ran: it is a step");
    assert_eq!(run.terminal(), Some(Decision::Error));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_call_id_does_not_join_a_parallel_group() {
    let (mut run, board) = setup(Board::default(), Concurrency::new(4));
    let calls =
        vec![call("a", "par.read", "sleep:1"), call("b", "par.read", "sleep:1"), call("a", "par.read", "sleep:1")];
    let batch = run.process_batch(calls).await;
    assert_eq!(codes(&batch.results), [("a", "ok"), ("b", "ok")].map(|(a, b)| (a.into(), b.into())));
    assert_eq!(batch.decision, Decision::Error);
    assert_eq!(board.log().iter().filter(|l| l.starts_with("start")).count(), 2);
    assert_eq!(events(&run).last().map(String::as_str), Some("finished duplicate_call_id"));
    assert!(events(&run).contains(&"rejected a duplicate_call_id".to_owned()));
}

/// Marks `par.write` parallel-safe (its writes commute, say) and allows every call.
struct CommutingWrites;

impl keel_tools_core::policy::Policy for CommutingWrites {
    fn decide(&self, _: &PolicyRequest<'_>) -> PolicyDecision {
        PolicyDecision::Allow
    }
    fn parallel_safe(&self, tool: &keel_tools_core::definition::ToolDefinition) -> bool {
        tool.effect() == keel_tools_core::definition::Effect::Read || tool.name() == "par.write"
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_may_mark_a_write_tool_parallel_safe() {
    let board = Arc::new(Board::default().with_barrier("two", 2));
    let registry = Registry::from_inventory().unwrap();
    let view = registry.view().names(["par.write"]).build().unwrap();
    let executor = Executor::builder(view).policy(CommutingWrites).state_arc(board.clone()).build().unwrap();
    assert!(executor.parallel_safe("par.write") && !executor.parallel_safe("par.read"), "par.read is not in the view");
    let mut run = Run::builder(executor).concurrency(Concurrency::new(2)).build();
    let batch = run.process_batch(vec![call("w1", "par.write", "meet:two"), call("w2", "par.write", "meet:two")]).await;
    assert!(batch.results.iter().all(|r| r.is_ok()), "{:?}", codes(&batch.results));
    assert_eq!(board.peak("par.write"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_restricted_to_some_tools_refuses_the_others_as_unknown_without_running_them() {
    // Three calls may overlap; the one outside the batch's tools is answered alone, as an unknown tool, and
    // stops the batch (the default decider), before anything after it starts.
    let (mut run, board) = setup(Board::default().with_barrier("pair", 2), Concurrency::new(4));
    let calls = vec![
        call("c1", "par.read", "meet:pair"),
        call("c2", "par.read", "meet:pair"),
        call("c3", "par.other", "sleep:1"),
        call("c4", "par.read", "sleep:1"),
    ];
    let batch = run.process_batch_allowed(calls, &["par.read"]).await;
    assert_eq!(
        codes(&batch.results),
        [("c1", "ok"), ("c2", "ok"), ("c3", "unknown_tool")].map(|(a, b)| (a.into(), b.into()))
    );
    assert!(!batch.results[2].executed);
    assert_eq!(batch.not_executed.iter().map(|n| n.call_id.as_str()).collect::<Vec<_>>(), ["c4"]);
    assert_eq!(board.peak("*"), 2, "the allowed calls overlapped");
    assert!(!board.log().iter().any(|l| l.contains("c3")), "the refused call never ran: {:?}", board.log());

    // The run's own options restrict every batch; a batch's tools restrict it further.
    let board = Arc::new(Board::default());
    let registry = Registry::from_inventory().unwrap();
    let view = registry.view().names(["par.read", "par.other"]).build().unwrap();
    let executor = Executor::builder(view).state_arc(board.clone()).build().unwrap();
    let options = keel_tools_core::executor::CallOptions::new().allowed_tools(["par.other"]);
    let mut run = Run::builder(executor).options(options).decider(|_: &_, _: &_, _: &_| Decision::Continue).build();
    let batch = run.process_batch(vec![call("d1", "par.read", ""), call("d2", "par.other", "")]).await;
    assert_eq!(codes(&batch.results), [("d1", "unknown_tool"), ("d2", "ok")].map(|(a, b)| (a.into(), b.into())));
    let batch = run.process_batch_allowed(vec![call("d3", "par.other", "")], &["par.read"]).await;
    assert_eq!(codes(&batch.results), [("d3", "unknown_tool")].map(|(a, b)| (a.into(), b.into())));
    assert_eq!(board.log(), ["start d2", "end d2"]);
}
