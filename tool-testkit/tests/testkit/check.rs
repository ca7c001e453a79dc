//! How the check behaves: shrinking, the seed, what it runs, what it reports.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keel_tools_core::policy::EffectPolicy;
use keel_tools_core::{Registry, State, ToolError, ToolView, tool, tool_error};
use keel_tools_testkit::{CheckError, Outcome, Problem, Property, SEED_VAR, ToolCheck};
use serde_json::json;

fn view(names: &[&str]) -> ToolView {
    Registry::from_inventory().unwrap().view().names(names.iter().copied()).build().unwrap()
}

/// Refuses numbers above 200 with a panic.
#[tool(effect = "read", version = "1.0")]
fn picky(n: u8) -> u8 {
    assert!(n <= 200, "{n} is too big");
    n
}

#[test]
fn a_panic_is_shrunk_to_the_smallest_failing_arguments() {
    let e = ToolCheck::new(&view(&["picky"])).seed(5).cases(256).run().unwrap_err();
    let failure = e.report().unwrap().failures().next().unwrap();
    assert_eq!(failure.problem(), Problem::InternalError);
    assert_eq!(failure.code(), Some("tool_internal_error"));
    assert_eq!(failure.arguments(), &json!({"n": 201}));
    assert!(failure.internal().iter().any(|l| l.contains("201 is too big")), "{:?}", failure.internal());
}

#[test]
fn the_same_seed_finds_the_same_failure() {
    let find = || {
        let e = ToolCheck::new(&view(&["picky"])).seed(11).cases(256).run().unwrap_err();
        e.to_string()
            .lines()
            .filter(|l| !l.contains("call_id") && !l.contains("internal failure"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(find(), find());
}

/// Runs only under [`the_seed_variable_overrides_the_seed`], in a process of its own.
#[test]
fn seed_variable_probe() {
    let Ok(seed) = std::env::var(SEED_VAR) else { return };
    match ToolCheck::new(&view(&["picky"])).seed(1).cases(256).run() {
        Err(CheckError::Failed(report)) => {
            assert_eq!(report.seed().to_string(), seed);
            let failure = report.failures().next().unwrap();
            assert_eq!(failure.seed().to_string(), seed);
            assert!(report.to_string().contains(&format!("{SEED_VAR}={seed}")));
        }
        Err(CheckError::Setup(message)) => {
            assert!(message.contains(SEED_VAR), "{message}");
            println!("setup error: {message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_seed_variable_overrides_the_seed() {
    let probe = |value: &str| {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "check::seed_variable_probe", "--nocapture", "--test-threads=1"])
            .env(SEED_VAR, value)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(probe("1234").contains("1 passed"));
    assert!(probe("not-a-number").contains("setup error: KEEL_TESTKIT_SEED=\"not-a-number\" is not a seed"));
}

static CLOSED: AtomicUsize = AtomicUsize::new(0);

/// Held by the tests that run `close_ticket_counted` (this one counts its calls, the whole-registry check runs it
/// too), so that the count sees only its own test's calls whatever the number of test threads.
static COUNTED: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Closes a ticket (counts the calls).
#[tool(effect = "destructive", version = "1.0")]
fn close_ticket_counted(ticket: String) -> Result<String, ToolError> {
    CLOSED.fetch_add(1, Ordering::SeqCst);
    if ticket.is_empty() {
        return Err(tool_error!("no_ticket", "which ticket?"));
    }
    Ok(format!("{ticket} closed"))
}

#[test]
fn every_handler_runs_unless_a_policy_says_otherwise() {
    let _counted = COUNTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let before = CLOSED.load(Ordering::SeqCst);
    let report = ToolCheck::new(&view(&["close_ticket_counted"])).cases(8).seed(2).assert();
    assert!(matches!(report.tools()[0].valid_arguments(), Outcome::Passed(8)));
    // Business errors (`no_ticket`) are fine; the destructive handler ran every valid case, no invalid one.
    assert_eq!(CLOSED.load(Ordering::SeqCst) - before, 8);

    // The executor's default policy: approval_required, fine too, and the handler does not run.
    let before = CLOSED.load(Ordering::SeqCst);
    ToolCheck::new(&view(&["close_ticket_counted"])).cases(8).executor(|b| b.policy(EffectPolicy)).assert();
    assert_eq!(CLOSED.load(Ordering::SeqCst), before);
}

/// How long `slow_echo` sleeps.
struct Delay(Duration);

/// Echoes a text after a delay.
#[tool(effect = "read", version = "1.0")]
async fn slow_echo(delay: State<Delay>, text: String) -> String {
    tokio::time::sleep(delay.0.0).await;
    text
}

#[tokio::test]
async fn a_timeout_is_fine_and_the_check_runs_inside_a_runtime() {
    let report = ToolCheck::new(&view(&["slow_echo"]))
        .cases(2)
        .invalid_arguments(false)
        .executor(|b| {
            b.state(Delay(Duration::from_millis(300)))
                .default_timeout(Duration::from_millis(20))
                .timeout_grace(Duration::from_millis(5))
        })
        .assert();
    assert!(matches!(report.tools()[0].valid_arguments(), Outcome::Passed(2)));
    assert!(matches!(report.tools()[0].invalid_arguments(), Outcome::Skipped(why) if why.contains("turned off")));
}

#[test]
fn names_that_are_not_in_the_view_are_a_setup_error() {
    let e = ToolCheck::new(&view(&["picky"])).tools(["picky", "nope"]).run().unwrap_err();
    assert!(matches!(&e, CheckError::Setup(m) if m.contains("nope")), "{e}");
    let e = ToolCheck::new(&view(&["picky"])).skip(["nada"]).run().unwrap_err();
    assert!(matches!(&e, CheckError::Setup(m) if m.contains("nada")), "{e}");
}

#[test]
fn skip_and_tools_choose_what_is_checked() {
    let both = view(&["picky", "slow_echo"]);
    let report = ToolCheck::new(&both)
        .skip(["picky"])
        .cases(1)
        .invalid_arguments(false)
        .executor(|b| b.state(Delay(Duration::ZERO)))
        .assert();
    assert_eq!(report.tools().iter().map(|t| t.name()).collect::<Vec<_>>(), ["slow_echo"]);
    let e = ToolCheck::new(&both).tools(["picky"]).seed(3).cases(256).run().unwrap_err();
    // (`slow_echo` is left out, so the executor needs no `Delay`.)
    let report = e.report().unwrap();
    assert_eq!(report.tools().len(), 1);
    let failure = report.failures().next().unwrap();
    assert_eq!((failure.tool(), failure.property()), ("picky", Property::ValidArguments));
    // Invalid arguments never reach the panicking handler.
    assert!(matches!(report.tools()[0].invalid_arguments(), Outcome::Passed(256)));
}

/// A registry of the tools this module declares: the inventory without the other modules' tools and the `examples`
/// crate's, which share this test binary.
fn own_registry() -> Registry {
    let mine = |path: Option<String>| path.is_some_and(|p| p.starts_with(concat!(module_path!(), "::")));
    let all = Registry::from_inventory().unwrap();
    let others = all.all().iter().filter(|d| !mine(d.origin().rust_path())).map(|d| d.name().to_owned());
    others.fold(Registry::builder(), |builder, name| builder.remove(name)).build().unwrap()
}

#[test]
fn a_registry_is_checked_whole() {
    // Every tool of this module: `picky` fails, whatever the seed, with the smallest failing argument.
    let _counted = COUNTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let registry = own_registry();
    let check = || ToolCheck::new(&registry).executor(|b| b.state(Delay(Duration::ZERO))).assert();
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(check)).unwrap_err();
    let text = panic.downcast_ref::<String>().unwrap();
    assert!(text.contains("tool `picky` (valid arguments)"), "{text}");
    assert!(text.contains("arguments (shrunk): {\"n\":201}"), "{text}");
    assert!(text.contains("1 of 3 tools failed"), "{text}");
    // Without the state `slow_echo` takes, nothing runs.
    let e = keel_tools_testkit::try_check_tools(&registry).unwrap_err();
    assert!(matches!(e, CheckError::Executor(_)), "{e}");
}
