//! The executor comparisons again, interleaved: every round times one chunk of calls of each contender in turn, so a
//! load change on a shared machine hits all contenders of a round alike. Reports, per contender, the median time
//! per call over the rounds and the median over rounds of its ratio to the reference of its group (both numbers of
//! one ratio come from the same round).
//!
//! ```sh
//! cargo run --release -p keel-bench --features examples --example interleaved -- [ROUNDS] [CALLS_PER_CHUNK]
//! ```
//!
//! The criterion benches (`cargo bench -p keel-bench --bench executor`) remain the reference figures; this is the
//! cross-check when the machine is not idle. Same runtime (current-thread, time enabled), same inputs built outside
//! the timed region, outputs dropped outside it.
//!
//! After each group's timings, the allocations of one call of each contender: a separate pass of the same loop
//! (inputs built before it, outputs dropped after it) counted by [`Counting`], reported per call as allocations
//! (`alloc` + `realloc` calls, every thread: a blocking-pool handler's too), the bytes they asked for, and the frees
//! made during the call (the consumed input's among them). The floor's count is the baseline: the per-call path
//! should allocate no more than the floor does, plus the result envelope.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keel_bench::rmcp_peer::RmcpHarness;
use keel_bench::{fixture, floor, keel};
use keel_tools_core::runs::{Run, StopPolicy};
use keel_tools_core::{Executor, ToolCall};
use serde_json::Value;
use tokio::runtime::Runtime;

/// The system allocator, counting `alloc`, `realloc` and `dealloc` calls (of every thread) while [`COUNTING`] is set.
///
/// Counting happens only in the dedicated pass after the timed rounds: while timing, each allocation pays one relaxed
/// load of a flag nobody writes, so the timings are not distorted. While counting, each pays relaxed atomic
/// increments of uncontended counters.
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static FREES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to `System` unchanged; the counters only read the layout's size.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Ordering::Relaxed) {
            FREES.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(new_size.saturating_sub(layout.size()) as u64, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations (`alloc` + `realloc`), bytes asked for (a `realloc` counts its growth) and frees.
#[derive(Clone, Copy, Default)]
struct Allocs {
    allocs: u64,
    bytes: u64,
    frees: u64,
}

impl Allocs {
    fn now() -> Allocs {
        Allocs {
            allocs: ALLOCS.load(Ordering::SeqCst),
            bytes: BYTES.load(Ordering::SeqCst),
            frees: FREES.load(Ordering::SeqCst),
        }
    }
}

/// One measured loop: timed, or (in the counting pass) counted.
struct Span {
    count: bool,
    before: Allocs,
    t: Instant,
}

impl Span {
    fn begin(count: bool) -> Span {
        let before = Allocs::now();
        if count {
            COUNTING.store(true, Ordering::SeqCst);
        }
        Span { count, before, t: Instant::now() }
    }

    fn end(self) -> (Duration, Allocs) {
        let took = self.t.elapsed();
        if !self.count {
            return (took, Allocs::default());
        }
        COUNTING.store(false, Ordering::SeqCst);
        let after = Allocs::now();
        let counted = Allocs {
            allocs: after.allocs - self.before.allocs,
            bytes: after.bytes - self.before.bytes,
            frees: after.frees - self.before.frees,
        };
        (took, counted)
    }
}

#[derive(Clone, Copy)]
enum Contender {
    Floor,
    Keel(&'static str, bool),
    Rmcp,
    Run,
}

struct Setup {
    rt: Runtime,
    executor: Executor,
    rmcp: RmcpHarness,
    valid: Value,
    invalid: Value,
}

/// Times `m` calls of `c` (inputs built before, outputs dropped after the timed loop).
fn chunk(s: &Setup, c: Contender, m: usize) -> Duration {
    measure(s, c, m, false).0
}

/// The allocations of `m` calls of `c` (inputs built before, outputs dropped after the counted loop).
fn count(s: &Setup, c: Contender, m: usize) -> Allocs {
    measure(s, c, m, true).1
}

/// Runs `m` calls of `c`, timed or counted (`count`).
fn measure(s: &Setup, c: Contender, m: usize, count: bool) -> (Duration, Allocs) {
    let stop = StopPolicy { max_steps: u32::MAX, max_retries: u32::MAX };
    s.rt.block_on(async {
        match c {
            Contender::Floor => {
                let inputs: Vec<Value> = (0..m).map(|_| s.valid.clone()).collect();
                let mut out = Vec::with_capacity(m);
                let span = Span::begin(count);
                for a in inputs {
                    out.push(floor::dispatch("search_incidents", a).await);
                }
                span.end()
            }
            Contender::Keel(name, valid) => {
                let args = if valid { &s.valid } else { &s.invalid };
                let inputs: Vec<ToolCall> = (0..m).map(|_| ToolCall::new("call-1", name, args.clone())).collect();
                let mut out = Vec::with_capacity(m);
                let span = Span::begin(count);
                for call in inputs {
                    out.push(s.executor.call(call).await);
                }
                span.end()
            }
            Contender::Rmcp => {
                let obj = s.valid.as_object().expect("an object");
                let inputs: Vec<_> = (0..m).map(|_| RmcpHarness::params("search_incidents", obj.clone())).collect();
                let mut out = Vec::with_capacity(m);
                let span = Span::begin(count);
                for p in inputs {
                    out.push(s.rmcp.call(p).await);
                }
                span.end()
            }
            Contender::Run => {
                // The runs stay where they are built: a `Run` is moved neither into nor out of the timed loop.
                let mut runs: Vec<Run> =
                    (0..m).map(|_| Run::builder(s.executor.clone()).stop_policy(stop).build()).collect();
                // A batch is the input, built before the timed loop like the other contenders' calls.
                let inputs: Vec<Vec<ToolCall>> =
                    (0..m).map(|_| vec![ToolCall::new("call-1", "search_incidents", s.valid.clone())]).collect();
                let mut out = Vec::with_capacity(m);
                let span = Span::begin(count);
                for (run, batch) in runs.iter_mut().zip(inputs) {
                    out.push(run.process_batch(batch).await);
                }
                span.end()
            }
        }
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(101, |s| s.parse().expect("ROUNDS is a number"));
    let m: usize = args.next().map_or(500, |s| s.parse().expect("CALLS_PER_CHUNK is a number"));
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().enable_io().build().expect("a runtime");
    let rmcp = rt.block_on(async { RmcpHarness::start() });
    let executor = keel::executor();
    let s = Setup { rt, executor, rmcp, valid: fixture::valid_arguments(), invalid: fixture::invalid_arguments() };

    // The blocking pool gets its own group, last: its threads and their cross-thread frees slow down whatever runs
    // next to them.
    let groups: [(&str, Vec<(&str, Contender)>); 4] = [
        (
            "valid call",
            vec![
                ("floor (match + serde, no validation)", Contender::Floor),
                ("keel inline (blocking = false)", Contender::Keel("search_incidents", true)),
                ("keel async fn", Contender::Keel("search_incidents_async", true)),
                ("rmcp ToolRouter::call", Contender::Rmcp),
            ],
        ),
        (
            "rejections",
            vec![
                ("valid call (inline)", Contender::Keel("search_incidents", true)),
                ("unknown_tool", Contender::Keel("no_such_tool", true)),
                ("invalid_arguments (1 violation)", Contender::Keel("search_incidents", false)),
                ("approval_required", Contender::Keel("file_incident", true)),
            ],
        ),
        (
            "run overhead",
            vec![
                ("Executor::call", Contender::Keel("search_incidents", true)),
                ("Run::process_batch (1 call, in-memory log)", Contender::Run),
            ],
        ),
        (
            "blocking pool",
            vec![
                ("keel inline (blocking = false)", Contender::Keel("search_incidents", true)),
                ("keel blocking pool (blocking = true)", Contender::Keel("search_incidents_blocking", true)),
            ],
        ),
    ];

    println!("{rounds} rounds x {m} calls per contender and round; median per call, median per-round ratio");
    for (group, contenders) in &groups {
        // Warm-up: one chunk each.
        for (_, c) in contenders {
            chunk(&s, *c, m);
        }
        let mut per_call: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); contenders.len()];
        for _ in 0..rounds {
            for (i, (_, c)) in contenders.iter().enumerate() {
                per_call[i].push(chunk(&s, *c, m).as_secs_f64() * 1e9 / m as f64);
            }
        }
        println!("\n{group} (ratio to: {})", contenders[0].0);
        for (i, (label, _)) in contenders.iter().enumerate() {
            let mut ratios: Vec<f64> = per_call[i].iter().zip(&per_call[0]).map(|(x, r)| x / r).collect();
            let ratio = median(&mut ratios);
            let ns = median(&mut per_call[i].clone());
            println!("  {label:<48} {:>10.1} ns  {ratio:6.2}x", ns);
        }
        // A separate pass, after the timings: counting does not touch them.
        let counted: Vec<Allocs> = contenders.iter().map(|(_, c)| count(&s, *c, m)).collect();
        println!("\n  allocations per call (alloc + realloc, difference to {}; bytes asked; frees)", contenders[0].0);
        let per = |n: u64| n as f64 / m as f64;
        for ((label, _), a) in contenders.iter().zip(&counted) {
            let more = per(a.allocs) - per(counted[0].allocs);
            println!(
                "  allocations per call: {label:<48} {:>6.1} {more:>+7.1} {:>8.0} B {:>6.1} frees",
                per(a.allocs),
                per(a.bytes),
                per(a.frees)
            );
        }
    }
}
