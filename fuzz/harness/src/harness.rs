//! The harness: runs one call and asserts every invariant ([`Harness::check`]), or the same from raw fuzzer bytes
//! ([`Harness::fuzz_one`]).

use std::cell::RefCell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use keel_tools_core::definition::{Effect, Handler};
use keel_tools_core::executor::CallOptions;
use keel_tools_core::{Approval, Executor, Registry, ToolCall, ToolResult, ToolView};
use proptest::prelude::*;
use proptest::strategy::{SBoxedStrategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::Value;

use crate::input::{Approve, Args, Input, SHAPES, deliver, delivery, short};
use crate::instance::instance;
use crate::leaks::assert_clean;
use crate::mutation::{mutation, name_change};
use crate::oracle::{Oracle, assert_supported};
use crate::policy::{DENY_SUFFIX, RecordingPolicy};
use crate::record::{Decided, take_record};
use crate::tools::{HIDDEN, TOOL_CODES, VIEW, dynamic_tools};

/// What the executor must answer for an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// The handler runs once; the result is ok or one of the tool's own codes.
    Run,
    /// The call is refused with this code and the handler does not run.
    Refused(&'static str),
}

/// One checked call: the input's prediction and the executor's result.
#[derive(Debug)]
pub struct Outcome {
    pub expect: Expect,
    pub result: ToolResult,
}

pub struct Harness {
    pub registry: Registry,
    pub executor: Executor,
    /// Valid arguments per tool of the view, from the tool's own input schema.
    pub valid: Vec<(&'static str, SBoxedStrategy<Value>)>,
}

thread_local! {
    static RUNTIME: RefCell<Option<tokio::runtime::Runtime>> = const { RefCell::new(None) };
}

/// Runs `f` to completion on this thread's current-thread runtime (built on first use).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    RUNTIME.with(|rt| {
        let mut rt = rt.borrow_mut();
        let rt = rt.get_or_insert_with(|| {
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a Tokio runtime")
        });
        rt.block_on(f)
    })
}

static KEYS: AtomicU64 = AtomicU64::new(0);

impl Harness {
    pub fn new() -> Harness {
        let registry = Registry::builder().tools(dynamic_tools()).build().expect("unique names");
        for name in VIEW.iter().chain(&HIDDEN) {
            let def = registry.get(name).unwrap_or_else(|| panic!("{name} is registered"));
            assert_supported(name, def.input_schema());
        }
        let view = registry.view().names(VIEW).build().expect("the view's tools exist");
        let executor = Executor::builder(view)
            .policy(RecordingPolicy)
            .default_timeout(std::time::Duration::from_secs(20))
            .build()
            .expect("every schema compiles");
        let valid = VIEW
            .iter()
            .map(|name| {
                let def = registry.get(name).expect("registered");
                let schema = def.input_schema().clone();
                let oracle_schema = schema.clone();
                let serde_integers = !matches!(def.handler(), Handler::Dynamic(_));
                let strategy = instance(&schema, &schema, 0)
                    .prop_filter("valid against the oracle", move |v| {
                        Oracle::new(&oracle_schema, serde_integers).valid(v)
                    })
                    .sboxed();
                (*name, strategy)
            })
            .collect();
        Harness { registry, executor, valid }
    }

    /// One shared harness per process.
    pub fn get() -> &'static Harness {
        static HARNESS: OnceLock<Harness> = OnceLock::new();
        HARNESS.get_or_init(Harness::new)
    }

    /// Valid calls of any tool in the view (with an approval for exactly their arguments when `approve`).
    pub fn valid_input(&self) -> impl Strategy<Value = Input> + use<> {
        let per_tool: Vec<_> = self.valid.iter().map(|(name, s)| (Just(*name), s.clone()).sboxed()).collect::<Vec<_>>();
        (proptest::strategy::Union::new(per_tool), delivery(), "[a-zA-Z0-9_-]{1,24}").prop_map(
            |((name, args), how, id)| Input {
                approval: Some((name.to_owned(), args.clone())),
                args: deliver(&id, name, args, how),
                name: name.to_owned(),
                id,
                deny: false,
            },
        )
    }

    /// Valid calls, then mutated: arguments, approvals, tenant and name.
    pub fn mutated_input(&self) -> impl Strategy<Value = Input> + use<> {
        let per_tool: Vec<_> = self.valid.iter().map(|(name, s)| (Just(*name), s.clone()).sboxed()).collect::<Vec<_>>();
        (
            proptest::strategy::Union::new(per_tool),
            prop::collection::vec(mutation(), 1..=3),
            prop_oneof![Just(Approve::None), Just(Approve::Original), Just(Approve::Sent)],
            prop::bool::weighted(0.1),
            prop::option::weighted(0.1, name_change()),
            delivery(),
            prop_oneof![4 => "[a-zA-Z0-9_-]{1,24}", 1 => any::<String>()],
        )
            .prop_map(|((name, original), mutations, approve, deny, rename, how, id)| {
                let mut args = original.clone();
                for m in &mutations {
                    m.apply(&mut args);
                }
                let approval = match approve {
                    Approve::None => None,
                    Approve::Original => Some((name.to_owned(), original)),
                    Approve::Sent => Some((name.to_owned(), args.clone())),
                };
                let name = rename.map_or_else(|| name.to_owned(), |r| r.apply(name));
                Input { args: deliver(&id, &name, args, how), name, id, approval, deny }
            })
    }

    /// Builds the call the input describes.
    pub fn call_of(input: &Input) -> ToolCall {
        match &input.args {
            Args::Value(v) => ToolCall::new(input.id.clone(), input.name.clone(), v.clone()),
            Args::Text(t) => ToolCall::from_json_text(input.id.clone(), input.name.clone(), t),
            // The raw reading (a codec of no tools): names reach the executor as the message spells them.
            Args::Provider(shape, message) => shape.call(&ToolView::new(Vec::new()), message, &input.id),
        }
    }

    /// What the executor must answer for `call`.
    pub fn predict(&self, call: &ToolCall, input: &Input) -> Expect {
        let Some(def) = self.executor.view().get(call.name()) else { return Expect::Refused("unknown_tool") };
        let Ok(args) = call.arguments() else { return Expect::Refused("invalid_arguments") };
        // JSON Schema validity decides whether the policy is asked.
        let schema = Oracle::new(def.input_schema(), false);
        let Some(cleaned) = schema.cleaned(args) else { return Expect::Refused("invalid_arguments") };
        if input.deny {
            return Expect::Refused("policy_denied");
        }
        let approved = match &input.approval {
            Some((tool, approved)) => tool == def.name() && json_identical(&schema.canonical(approved), &cleaned),
            None => false,
        };
        if def.effect() != Effect::Read && !approved {
            return Expect::Refused("approval_required");
        }
        // A compiled tool then converts the arguments into its parameters: an integral float where an integer
        // belongs fails there, before the fn runs.
        if !Oracle::for_tool(def).valid_strict(&cleaned) {
            return Expect::Refused("invalid_arguments");
        }
        Expect::Run
    }

    /// Runs one call and asserts every invariant; returns the prediction and the result.
    pub fn check(&self, input: &Input) -> Outcome {
        let call = Harness::call_of(input);
        let key = format!("k{}", KEYS.fetch_add(1, Ordering::Relaxed));
        let tenant = if input.deny { format!("{key}{DENY_SUFFIX}") } else { key };
        let mut options = CallOptions::new().tenant(tenant.as_str());
        if let Some((tool, args)) = &input.approval {
            options = options.approve(Approval::new(tool.as_str(), args));
        }
        let expect = self.predict(&call, input);
        let result = block_on(self.executor.call_with(call.clone(), &options));
        let record = take_record(&tenant);
        let ctx =
            || format!("input: {input:?}\nresult: {}", short(&serde_json::to_string(&result).unwrap_or_default()));

        // 1. The result answers this call.
        assert_eq!(result.call_id, call.id(), "the result lost its call id; {}", ctx());
        assert_eq!(result.is_ok(), result.error().is_none(), "{}", ctx());
        assert_eq!(result.is_ok(), result.data().is_some(), "{}", ctx());

        // 2. Handlers ran only as allowed.
        assert!(!record.untracked, "a handler ran without a tenant; {}", ctx());
        assert!(record.invoked.len() <= 1, "a handler ran {} times; {}", record.invoked.len(), ctx());
        assert_eq!(result.executed, record.invoked.len() == 1, "`executed` does not match the handler; {}", ctx());
        for (tool, problem) in &record.invoked {
            assert!(VIEW.contains(&tool.as_str()), "{tool} is not in the view but ran; {}", ctx());
            assert_eq!(tool, call.name(), "another tool ran; {}", ctx());
            assert_eq!(problem, &None, "{tool} received invalid arguments; {}", ctx());
            assert!(
                record.policy.iter().any(|(t, d, _)| t == tool && *d == Decided::Allow),
                "{tool} ran without the policy allowing it; {}",
                ctx()
            );
        }
        // 3. The policy saw only valid arguments, and at most once.
        assert!(record.policy.len() <= 1, "the policy was asked {} times; {}", record.policy.len(), ctx());
        for (tool, _, valid) in &record.policy {
            assert!(valid, "the policy was asked about invalid arguments of {tool}; {}", ctx());
        }

        // 4. The answer is the prediction.
        match &expect {
            Expect::Run => {
                assert!(result.executed, "a valid, allowed call did not run; {}", ctx());
                if let Some(e) = &result.error() {
                    assert!(TOOL_CODES.contains(&e.code.as_str()), "a valid call failed; {}", ctx());
                }
            }
            Expect::Refused(code) => {
                assert_eq!(result.code(), Some(*code), "wrong code; {}", ctx());
                assert!(!result.executed, "{}", ctx());
            }
        }
        match self.executor.view().get(call.name()) {
            Some(def) => {
                assert_eq!(result.tool_name, def.name(), "{}", ctx());
                assert_eq!(result.tool_version.as_deref(), Some(def.version()), "{}", ctx());
            }
            None => assert_eq!(result.tool_version, None, "{}", ctx()),
        }

        // 5. Nothing internal in the result.
        assert_clean(&result, &call, input);
        Outcome { expect, result }
    }

    /// Runs one fuzzer input (see `docs/FUZZING.md` for the layout): the outcome of the call it made and checked, or
    /// `None` when the input made none (it is empty, or the generator found nothing to build from it).
    pub fn fuzz_one(&self, data: &[u8]) -> Option<Outcome> {
        let (&mode, rest) = data.split_first()?;
        let deny = mode & 0x80 != 0;
        match mode & 0x3 {
            // Raw: name and argument text, split at the first NUL byte.
            0 => {
                let (name, text) = match rest.iter().position(|&b| b == 0) {
                    Some(at) => (&rest[..at], &rest[at + 1..]),
                    None => (&rest[..0], rest),
                };
                let name = String::from_utf8_lossy(name).into_owned();
                let text = String::from_utf8_lossy(text).into_owned();
                let input = Input { id: "fuzz-raw".into(), name, args: Args::Text(text), approval: None, deny };
                Some(self.check(&input))
            }
            // Raw provider message: the bytes as JSON (or as a string), read by one provider's constructor.
            1 => {
                let message = serde_json::from_slice::<Value>(rest)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(rest).into_owned()));
                let shape = SHAPES[usize::from(mode >> 2) % SHAPES.len()];
                let input = Input {
                    id: "fuzz-mcp".into(),
                    name: String::new(),
                    args: Args::Provider(shape, message),
                    approval: None,
                    deny,
                };
                Some(self.check(&input))
            }
            // Structured: the bytes drive the generator (valid or mutated instances of the tools' own schemas).
            m => {
                let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_of(rest));
                let mut runner = TestRunner::new_with_rng(Config::default(), rng);
                let input = if m == 2 {
                    self.valid_input().new_tree(&mut runner).map(|t| t.current())
                } else {
                    self.mutated_input().new_tree(&mut runner).map(|t| t.current())
                };
                let mut input = input.ok()?;
                input.deny |= deny;
                Some(self.check(&input))
            }
        }
    }
}

/// A ChaCha seed (32 bytes) that depends on every byte of `data`.
///
/// Not `RngAlgorithm::PassThrough` (the input bytes as the random stream): every union a strategy picks from gives
/// each alternative it did not pick a clone of the runner whose stream is half of what is left, so the bytes run
/// out after a dozen unions, the stream turns to zeros, and rand 0.10's rejection sampling of an integer range
/// rejects zero forever: the generator hangs. A seeded generator keeps every input deterministic instead.
fn seed_of(data: &[u8]) -> [u8; 32] {
    let mut seed = [0u8; 32];
    for (lane, chunk) in seed.chunks_mut(8).enumerate() {
        let mut h = 0xcbf2_9ce4_8422_2325u64 ^ (lane as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for &b in data {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        chunk.copy_from_slice(&h.to_le_bytes());
    }
    seed
}

impl Default for Harness {
    fn default() -> Self {
        Harness::new()
    }
}

/// Exact JSON identity as approvals compare it: canonical text (so `1` and `1.0` differ).
fn json_identical(a: &Value, b: &Value) -> bool {
    keel_tools_core::schema::canonical::canonical_json(a) == keel_tools_core::schema::canonical::canonical_json(b)
}
