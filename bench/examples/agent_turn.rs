//! The agent loop's own cost per model turn, and per streamed delta, against the in-process stub
//! (`keel_tools_agent::stub`), which answers at once.
//!
//! Each round times, interleaved, one-turn runs (`Agent::run` over an `OpenAiClient` whose answer is text) and the
//! floor under them: the same request body POSTed by a bare `reqwest` client to the same stub, its answer read
//! whole. The difference is what keel adds to a turn: the request body (conversation and tool list through the
//! codec), the answer's parse through the codec, the run's events. Streamed turns are timed the same way against
//! a recorded Chat Completions stream, every event going to a sink that counts them. For the per-delta figure, one answer streams `DELTAS` text deltas; keel's
//! work per delta is (the turn - the floor that reads the same bytes) / `DELTAS`.
//!
//! ```sh
//! cargo run --release -p keel-bench --features examples --example agent_turn -- [ROUNDS] [TURNS_PER_ROUND] [DELTAS]
//! ```

use std::time::{Duration, Instant};

use keel_tools_agent::stub::{OPENAI_CHAT, StubResponse, StubServer};
use keel_tools_agent::{Agent, Message, OpenAiClient, RetryPolicy, StreamEvent};
use keel_tools_core::runs::Run;
use keel_tools_core::{Executor, Registry, tool};
use serde_json::{Value, json};

/// Look up one incident by its id.
#[tool(name = "bench.lookup", effect = "read", version = "1.0")]
fn lookup(incident_id: String) -> usize {
    incident_id.len()
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A recorded Chat Completions stream of `deltas` text deltas.
fn text_stream(deltas: usize) -> String {
    let chunk = |delta: Value, finish: Value| {
        let c = json!({"id": "chatcmpl-b", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let mut s = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    for i in 0..deltas {
        s.push_str(&chunk(json!({"content": format!("word{i} ")}), Value::Null));
    }
    s.push_str(&chunk(json!({}), json!("stop")));
    s.push_str("data: [DONE]\n\n");
    s
}

struct Bench {
    runtime: tokio::runtime::Runtime,
    stub: StubServer,
    executor: Executor,
    raw: reqwest::Client,
}

impl Bench {
    /// One turn through the loop, answered by `answer`.
    fn turn(&self, model: &OpenAiClient, answer: StubResponse) -> Duration {
        self.stub.respond(OPENAI_CHAT, answer);
        // A sink that counts the events, as the least a consumer of the stream does.
        let counted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = counted.clone();
        let agent = Agent::new(model).max_turns(1).retry(RetryPolicy::none()).on_stream(move |_: &StreamEvent| {
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        let began = Instant::now();
        self.runtime.block_on(async {
            let mut run = Run::new(self.executor.clone());
            let mut messages = vec![Message::user("Look up incident INC-001.")];
            let outcome = agent.run(&mut run, &mut messages).await.expect("the turn ends");
            assert_eq!(outcome.turns, 1);
        });
        let elapsed = began.elapsed();
        assert!(counted.load(std::sync::atomic::Ordering::Relaxed) >= 1, "at least the waiting event");
        elapsed
    }

    /// The floor: `body` POSTed by a bare client, the answer read whole.
    fn floor(&self, body: &[u8], answer: StubResponse) -> Duration {
        self.stub.respond(OPENAI_CHAT, answer);
        let url = format!("{}{OPENAI_CHAT}", self.stub.url());
        let began = Instant::now();
        self.runtime.block_on(async {
            let response = self
                .raw
                .post(&url)
                .header("content-type", "application/json")
                .body(body.to_vec())
                .send()
                .await
                .expect("sent");
            let bytes = response.bytes().await.expect("read");
            assert!(!bytes.is_empty());
        });
        began.elapsed()
    }
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().expect("a number"));
    let rounds = args.next().unwrap_or(5);
    let turns = args.next().unwrap_or(2000);
    let deltas = args.next().unwrap_or(2000);

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let stub = runtime.block_on(StubServer::start()).unwrap();
    let registry = Registry::from_inventory().unwrap();
    let executor = Executor::new(registry.view().names(["bench.lookup"]).build().unwrap()).unwrap();
    let raw = reqwest::Client::new();
    let bench = Bench { runtime, stub, executor, raw };
    let base = format!("{}/v1", bench.stub.url());
    let whole = OpenAiClient::new(&base, "m").unwrap();
    let streamed = OpenAiClient::builder(&base, "m").stream(true).build().unwrap();

    let answer = json!({"id": "chatcmpl-b", "object": "chat.completion", "model": "m", "choices": [{"index": 0,
        "finish_reason": "stop", "message": {"role": "assistant", "content": "INC-001 is open."}}],
        "usage": {"prompt_tokens": 82, "completion_tokens": 6}});
    let whole_answer = || StubResponse::json(&answer);
    let short = text_stream(4);
    let short_answer = || StubResponse::stream_text(short.clone(), false);
    let long = text_stream(deltas);
    let long_answer = || StubResponse::stream_text(long.clone(), false);

    // The request bodies the loop sends, for the floor to send the same bytes.
    bench.turn(&whole, whole_answer());
    bench.turn(&streamed, short_answer());
    let sent = bench.stub.requests();
    let whole_body = serde_json::to_vec(&sent[0].body).unwrap();
    let streamed_body = serde_json::to_vec(&sent[1].body).unwrap();

    println!("agent turn against the in-process stub: {rounds} rounds of {turns} turns; per-delta: {deltas} deltas");
    println!(
        "{:<8} {:>14} {:>14} {:>14} {:>14} {:>14}",
        "round", "whole med µs", "whole p99 µs", "stream med µs", "stream p99 µs", "per delta µs"
    );
    let mut all = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        let (mut w, mut wf, mut s, mut sf) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..turns {
            w.push(bench.turn(&whole, whole_answer()));
            wf.push(bench.floor(&whole_body, whole_answer()));
            s.push(bench.turn(&streamed, short_answer()));
            sf.push(bench.floor(&streamed_body, short_answer()));
        }
        let (mut long_turns, mut long_floors) = (Vec::new(), Vec::new());
        for _ in 0..10 {
            long_turns.push(bench.turn(&streamed, long_answer()));
            long_floors.push(bench.floor(&streamed_body, long_answer()));
        }
        let floor_w = percentile(&mut wf, 0.5);
        let floor_s = percentile(&mut sf, 0.5);
        let own = |d: Duration, floor: Duration| micros(d.saturating_sub(floor));
        let row = (
            own(percentile(&mut w, 0.5), floor_w),
            own(percentile(&mut w, 0.99), floor_w),
            own(percentile(&mut s, 0.5), floor_s),
            own(percentile(&mut s, 0.99), floor_s),
            own(percentile(&mut long_turns, 0.5), percentile(&mut long_floors, 0.5)) / deltas as f64,
        );
        println!(
            "{round:<8} {:>14.1} {:>14.1} {:>14.1} {:>14.1} {:>14.3}   (floors: whole {:.1} µs, streamed {:.1} µs)",
            row.0,
            row.1,
            row.2,
            row.3,
            row.4,
            micros(floor_w),
            micros(floor_s)
        );
        all.0.push(row.0);
        all.1.push(row.1);
        all.2.push(row.2);
        all.3.push(row.3);
        all.4.push(row.4);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "{:<8} {:>14.1} {:>14.1} {:>14.1} {:>14.1} {:>14.3}",
        "median",
        median(&mut all.0),
        median(&mut all.1),
        median(&mut all.2),
        median(&mut all.3),
        median(&mut all.4)
    );
}
