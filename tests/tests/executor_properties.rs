//! Property tests of the executor's invariants, on inputs generated from the tools' own schemas and then mutated,
//! on raw argument text and on arbitrary provider messages.
//!
//! The tools, the oracle (an independent validator for the schema subset the tools use), the generator, the
//! mutations and the per-call invariant checks live in the `keel-fuzz-harness` crate (`fuzz/harness/`), which the
//! cargo-fuzz target shares (see `docs/FUZZING.md`). Every call checked here asserts, besides what each test says:
//!
//! - no panic, and the result carries the call's id;
//! - a handler runs at most once, only for a name in the view, only with arguments valid against its schema, only
//!   after the policy allowed that call, and `executed` says whether it ran;
//! - the answer is the oracle's prediction (`unknown_tool`, `invalid_arguments`, `policy_denied`,
//!   `approval_required`, or a run ending in `ok` or the tool's own code);
//! - no file path, `panicked`, Rust type path or serde/jsonschema wording in the result unless it lies inside a copy
//!   of one of the input's own strings.
//!
//! `PROPTEST_CASES=N` overrides the number of cases of every test.

use std::cell::RefCell;
use std::collections::BTreeMap;

// Naming the crate links it, and with it the harness's `#[tool]` registrations.
use keel_fuzz_harness::{self as harness, Args, Expect, Harness, Input, SHAPES, VIEW};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestRunner};
use serde_json::Value;

fn runner(cases: u32) -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(cases);
    // No regression files: a failure prints its minimal input, which belongs in a named test.
    TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() })
}

/// Counts outcomes by a label, for the coverage assertions at the end of a test.
#[derive(Default)]
struct Tally(RefCell<BTreeMap<String, usize>>);

impl Tally {
    fn add(&self, label: impl Into<String>) {
        *self.0.borrow_mut().entry(label.into()).or_default() += 1;
    }
    fn get(&self, label: &str) -> usize {
        self.0.borrow().get(label).copied().unwrap_or(0)
    }
    fn total(&self) -> usize {
        self.0.borrow().values().sum()
    }
}

impl std::fmt::Debug for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.borrow().fmt(f)
    }
}

fn label(o: &harness::Outcome) -> String {
    match (&o.expect, o.result.code()) {
        (Expect::Run, None) => "ran ok".into(),
        (Expect::Run, Some(code)) => format!("ran {code}"),
        (Expect::Refused(code), _) => (*code).to_owned(),
    }
}

fn assert_no_untracked_runs() {
    assert_eq!(harness::untracked_invocations(), 0, "a handler ran for a call the harness did not make");
}

/// Valid instances of each tool's own schema, with an approval for exactly those arguments, always run the
/// handler once and end in `ok` (or the tool's own code), whichever way they are delivered.
#[test]
fn valid_arguments_run_the_handler_once_and_succeed() {
    let h = Harness::get();
    let tally = Tally::default();
    runner(512)
        .run(&h.valid_input(), |input| {
            let o = h.check(&input);
            prop_assert_eq!(&o.expect, &Expect::Run, "the oracle refused a generated instance: {:?}", input);
            tally.add(o.result.tool_name.clone());
            Ok(())
        })
        .unwrap();
    for name in VIEW {
        assert!(tally.get(name) >= 10, "{name} ran only {} times: {tally:?}", tally.get(name));
    }
    assert_no_untracked_runs();
}

/// Generated instances broken by one to three mutations (a required key dropped, an unknown key added, a type
/// changed, a node nested deeper, a huge or long string, deep nesting, an edge number, null), with the approval
/// for the original or the sent arguments or none, sometimes a denied tenant or a near-miss name: the executor
/// answers exactly what the independent oracle predicts, and no handler runs for a refused call.
#[test]
fn mutated_arguments_end_as_the_oracle_predicts() {
    let h = Harness::get();
    let tally = Tally::default();
    let ran =
        |t: &Tally| t.get("ran ok") + harness::TOOL_CODES.iter().map(|c| t.get(&format!("ran {c}"))).sum::<usize>();
    let rare = ["unknown_tool", "approval_required", "policy_denied"];
    // The rarer outcomes come up a few times in a thousand cases, by chance: rounds of fresh cases go on (at most
    // eight) until each has come up, so the coverage below never fails for want of luck.
    for _ in 0..8 {
        runner(1000)
            .run(&h.mutated_input(), |input| {
                tally.add(label(&h.check(&input)));
                Ok(())
            })
            .unwrap();
        if rare.iter().all(|code| tally.get(code) > 0) && ran(&tally) > 0 {
            break;
        }
    }
    let total = tally.total();
    let ran = ran(&tally);
    eprintln!("mutated arguments: {tally:?}");
    assert!(tally.get("invalid_arguments") * 2 > total, "most mutations must break the arguments: {tally:?}");
    for code in rare {
        assert!(tally.get(code) > 0, "no case ended in {code}: {tally:?}");
    }
    assert!(ran > 0, "some mutations keep the arguments valid (e.g. an optional key dropped): {tally:?}");
    assert_no_untracked_runs();
}

/// An approval covers one tool and exactly one set of arguments: another valid set of arguments of the same
/// tool is refused with `approval_required` (unless it is canonically the same), the approved set runs.
#[test]
fn approvals_are_bound_to_the_exact_arguments() {
    let h = Harness::get();
    let effectful: Vec<_> = h
        .valid
        .iter()
        .filter(|(name, _)| {
            h.registry.get(name).is_some_and(|d| d.effect() != keel_tools_core::definition::Effect::Read)
        })
        .map(|(name, s)| (Just(*name), s.clone(), s.clone()))
        .collect();
    assert_eq!(effectful.len(), 3, "create_ticket, delete_incident, fx.transfer");
    let tally = Tally::default();
    runner(300)
        .run(&proptest::strategy::Union::new(effectful), |(name, approved, other)| {
            let approval = Some((name.to_owned(), approved.clone()));
            let call = |id: &str, args: &Value| Input {
                id: id.to_owned(),
                name: name.to_owned(),
                args: Args::Value(args.clone()),
                approval: approval.clone(),
                deny: false,
            };
            let o = h.check(&call("other", &other));
            tally.add(label(&o));
            let o = h.check(&call("approved", &approved));
            prop_assert_eq!(o.expect, Expect::Run);
            // An approval for the same arguments under another tool's name approves nothing.
            let elsewhere = Input { approval: Some(("fx.echo".to_owned(), approved.clone())), ..call("x", &approved) };
            prop_assert_eq!(h.check(&elsewhere).expect, Expect::Refused("approval_required"));
            Ok(())
        })
        .unwrap();
    assert!(tally.get("approval_required") > 100, "{tally:?}");
    assert_no_untracked_runs();
}

/// Names that are not exactly a name in the view (case, inserted or deleted characters, homoglyphs, the provider
/// wire form, path prefixes, names registered but outside the view, arbitrary strings) end in `unknown_tool`
/// and run nothing, whatever the arguments.
#[test]
fn near_miss_names_never_run_anything() {
    let h = Harness::get();
    let tally = Tally::default();
    let strategy = (h.valid_input(), harness::name_change());
    runner(600)
        .run(&strategy, |(input, change)| {
            let name = change.apply(&input.name);
            let input = Input { args: Args::Value(args_value(&input)), name, ..input };
            tally.add(label(&h.check(&input)));
            Ok(())
        })
        .unwrap();
    assert!(tally.get("unknown_tool") * 10 > tally.total() * 8, "{tally:?}");
    assert_no_untracked_runs();
}

/// The arguments an input carries, as a value (provider messages and text are unwrapped).
fn args_value(input: &Input) -> Value {
    match harness::Harness::call_of(input).into_arguments() {
        Ok(v) => v,
        Err(_) => Value::Null,
    }
}

fn json_like_text() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => any::<String>(),
        3 => r#"[\[\]{}:,"a-z0-9 .eE+\-\\]{0,48}"#,
        2 => arbitrary_json().prop_map(|v| v.to_string()),
        1 => r#"\{"[a-z_]{1,8}": ?[\[{"0-9a-z]{0,12}"#,
    ]
}

/// Valid arguments as text, with a few bytes replaced, inserted or removed.
fn edited_text(h: &Harness) -> impl Strategy<Value = (String, String)> + use<> {
    let per_tool: Vec<_> = h.valid.iter().map(|(name, s)| (Just(*name), s.clone())).collect();
    let edits = prop::collection::vec((any::<Index>(), 0u8..3, any::<u8>()), 1..4);
    (proptest::strategy::Union::new(per_tool), edits).prop_map(|((name, args), edits)| {
        let mut bytes = serde_json::to_vec(&args).unwrap_or_default();
        for (at, op, byte) in edits {
            let i = at.index(bytes.len().max(1));
            match op {
                0 if i < bytes.len() => bytes[i] = byte,
                1 => bytes.insert(i.min(bytes.len()), byte),
                _ if i < bytes.len() => {
                    bytes.remove(i);
                }
                _ => {}
            }
        }
        (name.to_owned(), String::from_utf8_lossy(&bytes).into_owned())
    })
}

/// Raw argument text (arbitrary strings, JSON-like text, valid arguments with bytes edited) for any name: never a
/// panic, never a handler with invalid arguments, never parser wording in the result.
#[test]
fn raw_argument_text_is_answered_cleanly() {
    let h = Harness::get();
    let tally = Tally::default();
    let names = prop_oneof![3 => prop::sample::select(VIEW.to_vec()).prop_map(str::to_owned), 1 => any::<String>()];
    let strategy = prop_oneof![(names, json_like_text()), edited_text(h)];
    runner(800)
        .run(&strategy, |(name, text)| {
            let input = Input { id: "raw".into(), name, args: Args::Text(text), approval: None, deny: false };
            tally.add(label(&h.check(&input)));
            Ok(())
        })
        .unwrap();
    eprintln!("raw argument text: {tally:?}");
    assert!(tally.get("invalid_arguments") > 100, "{tally:?}");
    assert_no_untracked_runs();
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
        ".{0,12}".prop_map(Value::String),
        prop::sample::select(VIEW.to_vec()).prop_map(|n| Value::String(n.to_owned())),
    ];
    let key = prop_oneof![
        prop::sample::select(vec![
            "id",
            "name",
            "function",
            "arguments",
            "input",
            "args",
            "functionCall",
            "call_id",
            "type",
            "count",
            "colour",
            "query",
            "incident_id",
            "from",
            "to",
            "amount",
        ])
        .prop_map(str::to_owned),
        ".{0,8}",
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Arbitrary JSON read by every provider's call constructor, as a whole message or as the arguments of a
/// well-formed one: every call is answered with its id and nothing internal.
#[test]
fn arbitrary_provider_messages_are_answered_cleanly() {
    let h = Harness::get();
    let tally = Tally::default();
    let message = prop_oneof![
        arbitrary_json().prop_map(|m| (m, None)),
        (prop::sample::select(VIEW.to_vec()), arbitrary_json()).prop_map(|(n, a)| (a, Some(n))),
    ];
    runner(600)
        .run(&(0..SHAPES.len(), message, "[a-z0-9_]{1,12}"), |(shape, (value, name), id)| {
            let shape = SHAPES[shape];
            let message = match name {
                Some(name) => shape.message(&id, name, &value),
                None => value,
            };
            let input =
                Input { id, name: String::new(), args: Args::Provider(shape, message), approval: None, deny: false };
            tally.add(label(&h.check(&input)));
            Ok(())
        })
        .unwrap();
    eprintln!("provider messages: {tally:?}");
    assert_no_untracked_runs();
}

/// The oracle itself, on hand-picked values: the property tests are only as good as it is.
#[test]
fn the_oracle_agrees_with_hand_picked_cases() {
    use serde_json::json;
    let h = Harness::get();
    let oracle = |name: &str| harness::Oracle::for_tool(h.registry.get(name).unwrap());
    let echo = oracle("fx.echo");
    assert!(echo.valid(&json!({"id": "a", "count": 1, "colour": "red"})));
    assert!(echo.valid(&json!({"id": "a", "count": 100, "colour": "blue", "note": null, "meta": {"k": 5.0}})));
    assert!(!echo.valid(&json!({"id": "", "count": 1, "colour": "red"})), "minLength");
    assert!(!echo.valid(&json!({"id": "a", "count": 101, "colour": "red"})), "maximum");
    assert!(!echo.valid(&json!({"id": "a", "count": 1, "colour": "pink"})), "enum behind $ref");
    assert!(!echo.valid(&json!({"id": "a", "count": 1, "colour": "red", "x": 1})), "closed object");
    assert!(!echo.valid(&json!({"id": "a", "count": 1, "colour": "red", "points": [{"x": 1, "y": 1001}]})));
    assert!(!echo.valid(&json!({"id": "a", "count": 1.5, "colour": "red"})), "fraction");
    assert!(echo.valid(&json!({"id": "a", "count": 2.0, "colour": "red"})), "an integral float is an integer");
    let search = oracle("search_incidents");
    let ok = json!({"query": "db", "severity": "low", "tags": [], "page": 255});
    assert!(search.valid(&ok));
    assert!(!search.valid(&json!({"query": "db", "severity": "low", "tags": [], "page": 256})), "uint8");
    assert!(!search.valid(&json!({"query": "db", "severity": "low", "tags": [], "page": 2.0})), "serde integer");
    let list = oracle("list_incidents");
    assert!(list.valid(&json!({"limit": null})), "strict-mode null of a defaulted field is dropped");
    assert!(list.valid(&json!({})));
    assert!(!list.valid(&json!({"limit": 101})));
    let ticket = oracle("create_ticket");
    let target = json!({"kind": "host", "host": "h", "port": 65535});
    assert!(ticket.valid(&json!({"title": "t", "severity": "high", "targets": [target], "labels": {"a": 1}})));
    let bad = json!({"kind": "host", "service": "s"});
    assert!(!ticket.valid(&json!({"title": "t", "severity": "high", "targets": [bad], "labels": {}})));
    assert!(!echo.valid(&json!({"id": "a", "count": 1, "colour": "red", "meta": {"k": "x".repeat(1 << 20)}})), "size");
}

/// The depth limit on its own, on a tool with a recursive schema: a chain of `count_nodes` nodes (each an object
/// holding an array of children) is valid against the schema at any length (the oracle's schema check, without the
/// limits, says so), so what refuses the longer chains is the depth limit alone: a chain of 32 nodes (depth 64, the
/// limit) runs, one of 33 (depth 66) is refused as too deep, before the handler.
#[test]
fn schema_valid_deep_trees_show_the_depth_limit() {
    use serde_json::json;
    let h = Harness::get();
    let oracle = harness::Oracle::for_tool(h.registry.get("count_nodes").unwrap());
    let chain = |n: usize| {
        let mut node = json!({"name": "leaf", "children": []});
        for _ in 1..n {
            node = json!({"name": "n", "children": [node]});
        }
        node
    };
    let longest = harness::MAX_DEPTH / 2;
    for n in [1, longest - 1, longest, longest + 1, longest + 2, 64] {
        let args = chain(n);
        assert!(oracle.valid_strict(&args), "a chain of {n} nodes is valid against the schema");
        assert_eq!(harness::depth(&args), 2 * n);
        let input = Input {
            id: format!("chain-{n}"),
            name: "count_nodes".into(),
            args: Args::Value(args),
            approval: None,
            deny: false,
        };
        let o = h.check(&input);
        if n <= longest {
            assert_eq!(o.expect, Expect::Run, "a chain of {n} nodes");
            assert_eq!(o.result.data(), Some(&json!(n)), "a chain of {n} nodes");
        } else {
            assert_eq!(o.expect, Expect::Refused("invalid_arguments"), "a chain of {n} nodes");
            let message = &o.result.error().expect("refused").message;
            assert!(message.contains("deep") || message.contains("depth") || message.contains("nest"), "{message}");
        }
    }
    assert_no_untracked_runs();
}

/// No code is ever built from data: argument values and keys that look like references, templates, shell or SQL
/// reach a handler as the very same data (the echo tool returns them unchanged) or are refused by the schema; a
/// `$ref` in the arguments is never followed; names that look like code select nothing.
#[test]
fn data_that_looks_like_code_stays_data() {
    use serde_json::json;
    let h = Harness::get();
    let hostile = [
        "file:///etc/passwd",
        "https://example.com/schema.json",
        "#/$defs/Point",
        "{{7*7}}",
        "${jndi:ldap://127.0.0.1/a}",
        "'; DROP TABLE incidents; --",
        "$(rm -rf /)",
        "__proto__",
        "<script>alert(1)</script>",
        "\u{0}\u{1b}[2J",
    ];
    let call = |id: String, name: &str, args: Value| Input {
        id,
        name: name.to_owned(),
        args: Args::Value(args),
        approval: None,
        deny: false,
    };
    for (i, s) in hostile.iter().enumerate() {
        // As a value and as a key: run, and come back unchanged.
        let args = json!({"id": "a", "count": 2, "colour": "red", "note": s, "meta": {*s: 7}});
        let o = h.check(&call(format!("data-{i}"), "fx.echo", args.clone()));
        assert_eq!(o.result.data(), Some(&json!({"received": args})), "{s:?} was not echoed unchanged");
        // A reference where an object belongs is an object without the required keys, not a reference.
        let args = json!({"id": "a", "count": 2, "colour": "red", "points": [{"$ref": s}]});
        assert_eq!(h.check(&call(format!("ref-{i}"), "fx.echo", args)).expect, Expect::Refused("invalid_arguments"));
        // Keys the schema does not declare, whatever they say, are refused.
        for key in ["$ref", "$schema", "__proto__", "constructor", s] {
            let args = json!({"id": "a", "count": 2, "colour": "red", key: s});
            assert_eq!(
                h.check(&call(format!("key-{i}"), "fx.echo", args)).expect,
                Expect::Refused("invalid_arguments")
            );
        }
        // As a name.
        for name in [s.to_string(), format!("fx.echo{s}"), format!("fx.echo; {s}")] {
            let args = json!({"id": "a", "count": 2, "colour": "red"});
            assert_eq!(h.check(&call(format!("name-{i}"), &name, args)).expect, Expect::Refused("unknown_tool"));
        }
    }
    assert_no_untracked_runs();
}

/// The leak check is about what the executor adds, not about how it escapes what the model sent: a control
/// character before `::` becomes `\u0003::` in JSON and `\u{3}::` in a message, a `~` or `/` in a key becomes `~0::`
/// or `~1::` in a JSON pointer, a key `std:` becomes `/std:: expected` in a violation, keys `src` and `x` become
/// `/src/x`: none of it is an internal (the fuzzer's first findings, all in the harness).
#[test]
fn escaped_input_next_to_colons_is_not_taken_for_a_leak() {
    use serde_json::json;
    let h = Harness::get();
    let text = |name: &str, text: &str| Input {
        id: "esc".into(),
        name: name.to_owned(),
        args: Args::Text(text.to_owned()),
        approval: None,
        deny: false,
    };
    assert_eq!(h.check(&text("x\u{3}::fu", "{}")).expect, Expect::Refused("unknown_tool"));
    assert_eq!(h.check(&text("a\n::b", "{}")).expect, Expect::Refused("unknown_tool"));
    let args = json!({"id": "a", "count": 2, "colour": "red", "k\n::v": 1, "t\t::u": "\u{3}::x", "a~::b/::c": 0});
    let input = Input { args: Args::Value(args), ..text("fx.echo", "") };
    assert_eq!(h.check(&input).expect, Expect::Refused("invalid_arguments"));
    // A key whose control character JSON escapes as `\u0000` (Rust's `Debug` writes `\0`), next to `::`.
    let args = json!({"id": "a", "count": 2, "colour": "red", "\u{0}::a": null});
    let input = Input { args: Args::Value(args), ..text("fx.echo", "") };
    assert_eq!(h.check(&input).expect, Expect::Refused("invalid_arguments"));
    // Keys that end like a needle before the summary's `: expected`, or nest into one (`/src/x`).
    let keys =
        json!({"id": "a", "count": 2, "colour": "red", "std:": 1, "x.rs": 2, "invalid type": 3, "src": {"a": 1}});
    let input = Input { args: Args::Value(keys), ..text("fx.echo", "") };
    assert_eq!(h.check(&input).expect, Expect::Refused("invalid_arguments"));
}

/// The leak check itself catches what it must: a path, a panic message, a Rust type path, serde wording; also when
/// the caller's input held the very same text at another place (in a longer string of its own), and it lets through
/// the same text when the result copies it from the input whole.
#[test]
fn the_leak_check_catches_internals() {
    use keel_tools_core::ToolResult;
    use keel_tools_core::results::ErrorBody;
    use serde_json::json;
    let with_args = |args: Value| Input {
        id: "x".into(),
        name: "ping".into(),
        args: Args::Value(args),
        approval: None,
        deny: false,
    };
    let failure = |message: &str| {
        ToolResult::failure(
            "x",
            "ping",
            Some("1.0".into()),
            true,
            ErrorBody::new(keel_tools_core::results::ErrorCode::ToolInternalError, message),
        )
    };
    let clean = |r: &ToolResult, input: &Input| {
        let call = Harness::call_of(input);
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| harness::assert_clean(r, &call, input))).is_ok()
    };
    for leak in [
        "thread 'main' panicked at src/lib.rs:3:5",
        "expected alloc::string::String",
        "invalid type: integer `5`, expected a string",
        "missing field `id`",
        "\"id\" is a required property",
    ] {
        let r = failure(leak);
        assert!(!clean(&r, &with_args(json!({}))), "the leak check missed {leak:?}");
        // The input holds the leak's every needle, but inside a string of its own, not where the result has it.
        let elsewhere = with_args(json!({"note": format!("a model wrote: {leak} (twice)"), format!("{leak}!"): 1}));
        assert!(!clean(&r, &elsewhere), "the leak check took {leak:?} for the input's own text");
        // A result that copies the input's string whole (here: cut short by `…`, as previews are) echoes the caller.
        let echoed = failure(&format!("bad value \"a model wrote: {leak}…"));
        assert!(clean(&echoed, &elsewhere), "the leak check refused an echo of the input: {leak:?}");
    }
}

/// The fuzzer's seed corpus (`fuzz/corpus/executor`), replayed through the fuzz target's own entry point: every seed
/// makes a call and passes every invariant of the harness, as it must for `cargo fuzz run` to start from it, and
/// the seeds between them cover every input layout (raw text, provider message, valid and mutated generated calls),
/// a denied tenant, a run and a refusal.
#[test]
fn the_fuzz_seed_corpus_replays_clean() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/executor");
    let mut seeds: Vec<_> =
        std::fs::read_dir(&dir).expect("the seed corpus").map(|e| e.expect("a corpus entry").path()).collect();
    seeds.sort();
    assert!(seeds.len() >= 9, "seeds in {}: {}", dir.display(), seeds.len());
    let (modes, outcomes) = (Tally::default(), Tally::default());
    for seed in &seeds {
        let data = std::fs::read(seed).expect("a seed");
        let outcome = Harness::get().fuzz_one(&data).unwrap_or_else(|| panic!("{} makes no call", seed.display()));
        modes.add(format!("mode {}", data[0] & 3));
        if data[0] & 0x80 != 0 {
            modes.add("denied");
        }
        outcomes.add(label(&outcome));
    }
    for mode in ["mode 0", "mode 1", "mode 2", "mode 3", "denied"] {
        assert!(modes.get(mode) > 0, "no seed of {mode}: {modes:?}");
    }
    assert!(outcomes.get("ran ok") > 0, "no seed runs a handler: {outcomes:?}");
    assert!(outcomes.total() > outcomes.get("ran ok"), "every seed runs a handler: {outcomes:?}");
    assert_no_untracked_runs();
}
