//! [`check_tools`]: a property test of every tool of a view, through a real [`Executor`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use proptest::strategy::{BoxedStrategy, Strategy};
use proptest::test_runner::{TestCaseError, TestError};
use serde_json::Value;

use crate::imports::{
    CallOptions, Executor, ExecutorBuilder, ExecutorError, Limits, PolicyDecision, PolicyRequest, Registry, ToolCall,
    ToolDefinition, ToolResult, ToolView,
};
use crate::schema::{self, Invalid};
use crate::seed::runner;

/// The environment variable that re-runs a check with a given seed: `KEEL_TESTKIT_SEED=1234 cargo test`.
pub const SEED_VAR: &str = "KEEL_TESTKIT_SEED";

/// What [`check_tools`] takes: a [`ToolView`] or a [`Registry`] (all of its tools).
pub trait Tools {
    /// The tools to check.
    fn tool_view(&self) -> ToolView;
}

impl Tools for ToolView {
    fn tool_view(&self) -> ToolView {
        self.clone()
    }
}

impl Tools for Registry {
    fn tool_view(&self) -> ToolView {
        self.all().clone()
    }
}

impl<T: Tools + ?Sized> Tools for &T {
    fn tool_view(&self) -> ToolView {
        (**self).tool_view()
    }
}

/// Checks every tool of `tools` (see [`ToolCheck`]) and panics with every failure, each with its shrunk arguments
/// and the seed that reproduces it. Returns the report when every tool passed or was skipped.
///
/// A tool that takes `State<T>` needs the state: use [`ToolCheck::executor`].
#[track_caller]
pub fn check_tools<T: Tools + ?Sized>(tools: &T) -> Report {
    ToolCheck::new(tools).assert()
}

/// [`check_tools`] without the panic: the report, or why the check failed.
pub fn try_check_tools<T: Tools + ?Sized>(tools: &T) -> Result<Report, CheckError> {
    ToolCheck::new(tools).run()
}

/// A property test of every tool of a view, through a real [`Executor`].
///
/// For each tool, two properties, each over [`cases`](ToolCheck::cases) generated arguments:
///
/// 1. **Valid arguments** generated from the tool's canonical argument schema
///    ([`ToolDefinition::input_schema`]; see [`schema`](crate::schema) for what is understood) never end in
///    `tool_internal_error` (an internal error or a panic) or `invalid_tool_output` (a result that breaks the
///    tool's own result schema). Business errors (the tool's own codes), `timeout` and `approval_required` are
///    fine. A generated value the executor answers `invalid_arguments` is a bug of this generator, reported as such.
/// 2. **Invalid arguments** (a valid value with one thing broken: a wrong type, a missing required property, an
///    unknown property where the object is closed, a bound, a length or an `enum` violated) always end in
///    `invalid_arguments`, with `executed == false`, and the handler never starts.
///
/// The executor approves every call (its policy answers allow), so **the handlers of `write` and `destructive`
/// tools run** with generated arguments: give them test doubles through [`ToolCheck::executor`], or leave them
/// out with [`ToolCheck::skip`]. A policy set in [`ToolCheck::executor`] replaces the approving one (then
/// `approval_required` answers are fine, and those handlers do not run).
///
/// A failure is shrunk (proptest) to small arguments and reported with the tool, the arguments, the result's
/// code and body, what the executor's internal-failure hook heard (a panic's text, the result's violations) and
/// the seed. [`SEED_VAR`] (`KEEL_TESTKIT_SEED`) re-runs a seed; without it, and without
/// [`ToolCheck::seed`], each run draws a new one. A tool whose schema the generator does not understand is
/// skipped with a note (printed, and in the [`Report`]), never failed.
///
/// The check runs on a thread of its own with its own Tokio runtime, so it may be called from a plain `#[test]`
/// or from inside an async test alike.
///
/// ```
/// use keel_tools_core::{tool, Registry};
/// use keel_tools_testkit::ToolCheck;
///
/// /// Adds two small numbers.
/// #[tool(effect = "read", version = "1.0")]
/// fn add_small(a: u8, b: u8) -> u16 {
///     u16::from(a) + u16::from(b)
/// }
///
/// let registry = Registry::from_inventory().unwrap();
/// let report = ToolCheck::new(&registry.view().names(["add_small"]).build().unwrap()).cases(16).seed(7).assert();
/// assert_eq!(report.tools()[0].name(), "add_small");
/// ```
#[must_use]
pub struct ToolCheck<'a> {
    view: ToolView,
    cases: u32,
    seed: Option<u64>,
    only: Option<Vec<String>>,
    skip: Vec<String>,
    invalid: bool,
    configure: Option<Box<dyn FnMut(ExecutorBuilder) -> ExecutorBuilder + 'a>>,
}

impl fmt::Debug for ToolCheck<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolCheck")
            .field("view", &self.view)
            .field("cases", &self.cases)
            .field("seed", &self.seed)
            .field("only", &self.only)
            .field("skip", &self.skip)
            .field("invalid", &self.invalid)
            .finish_non_exhaustive()
    }
}

impl<'a> ToolCheck<'a> {
    /// A check of every tool of `tools`, 64 cases per property.
    pub fn new<T: Tools + ?Sized>(tools: &T) -> ToolCheck<'a> {
        ToolCheck {
            view: tools.tool_view(),
            cases: 64,
            seed: None,
            only: None,
            skip: Vec::new(),
            invalid: true,
            configure: None,
        }
    }

    /// How many generated arguments each property is checked on (default 64, at least 1).
    pub fn cases(mut self, cases: u32) -> Self {
        self.cases = cases.max(1);
        self
    }

    /// The seed (default: a new one each run). [`SEED_VAR`] in the environment overrides it, so that the seed a
    /// failure reports re-runs it.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Checks only these tools (each must be in the view).
    pub fn tools<I, N>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = N>,
        N: Into<String>,
    {
        self.only = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Leaves these tools out (each must be in the view).
    pub fn skip<I, N>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = N>,
        N: Into<String>,
    {
        self.skip.extend(names.into_iter().map(Into::into));
        self
    }

    /// Whether to check that invalid arguments are refused (default `true`).
    pub fn invalid_arguments(mut self, check: bool) -> Self {
        self.invalid = check;
        self
    }

    /// Configures the executor the calls run through: the state the tools take (`State<T>`), timeouts, limits.
    /// It receives a builder that already approves every call and records internal failures for the report;
    /// a `policy` or `on_internal_failure` set here replaces those.
    ///
    /// ```no_run
    /// # let registry = keel_tools_core::Registry::from_inventory().unwrap();
    /// # struct Store;
    /// keel_tools_testkit::ToolCheck::new(&registry).executor(|b| b.state(Store)).assert();
    /// ```
    pub fn executor(mut self, configure: impl FnMut(ExecutorBuilder) -> ExecutorBuilder + 'a) -> Self {
        self.configure = Some(Box::new(configure));
        self
    }

    /// Runs the check and panics with every failure (see [`CheckError`]'s text); returns the report otherwise.
    #[track_caller]
    pub fn assert(self) -> Report {
        match self.run() {
            Ok(report) => report,
            Err(e) => panic!("{e}"),
        }
    }

    /// Runs the check: the report when no tool failed, [`CheckError::Failed`] with it otherwise.
    pub fn run(mut self) -> Result<Report, CheckError> {
        let seed = match std::env::var(SEED_VAR) {
            Ok(text) if !text.trim().is_empty() => text.trim().parse::<u64>().map_err(|_| {
                CheckError::Setup(format!("{SEED_VAR}={text:?} is not a seed (a number from 0 to {})", u64::MAX))
            })?,
            _ => self.seed.unwrap_or_else(random_seed),
        };
        let view = self.selected()?;
        let failures: Arc<Mutex<HashMap<String, Vec<String>>>> = Arc::default();
        let heard = Arc::clone(&failures);
        let mut builder = Executor::builder(view.clone()).policy(approve_all).on_internal_failure(move |f| {
            let mut heard = heard.lock().unwrap_or_else(|p| p.into_inner());
            heard.entry(f.call_id.to_owned()).or_default().push(f.to_string());
        });
        if let Some(configure) = &mut self.configure {
            builder = configure(builder);
        }
        let executor = builder.build().map_err(CheckError::Executor)?;
        let context = Context { executor, failures, cases: self.cases, seed, invalid: self.invalid };
        let tools = std::thread::scope(|s| {
            let worker = s.spawn(|| context.check_all(&view));
            match worker.join() {
                Ok(tools) => tools,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
        .map_err(|e| CheckError::Setup(format!("cannot start a Tokio runtime for the check: {e}")))?;
        let report = Report { seed, tools };
        for note in report.notes() {
            eprintln!("keel-tools-testkit: {note}");
        }
        if report.failures().next().is_some() { Err(CheckError::Failed(report)) } else { Ok(report) }
    }

    /// The view restricted to [`tools`](Self::tools), without [`skip`](Self::skip).
    fn selected(&self) -> Result<ToolView, CheckError> {
        let named: Vec<&String> = self.only.iter().flatten().chain(&self.skip).collect();
        let unknown: Vec<String> = named.iter().filter(|n| !self.view.contains(n)).map(|n| (*n).clone()).collect();
        if !unknown.is_empty() {
            return Err(CheckError::Setup(format!("the view has no tool named {}", unknown.join(", "))));
        }
        let tools = self
            .view
            .iter()
            .filter(|d| self.only.as_ref().is_none_or(|only| only.iter().any(|n| n == d.name())))
            .filter(|d| !self.skip.iter().any(|n| n == d.name()))
            .cloned()
            .collect();
        Ok(ToolView::new(tools))
    }
}

/// Whether `v` is within `limits`, as the executor measures: nesting depth (`{}` is 1) and compact JSON bytes.
fn within(v: &Value, limits: &Limits) -> bool {
    fn depth(v: &Value, limit: usize) -> usize {
        match v {
            _ if limit == 0 => 1,
            Value::Array(a) => 1 + a.iter().map(|x| depth(x, limit - 1)).max().unwrap_or(0),
            Value::Object(o) => 1 + o.values().map(|x| depth(x, limit - 1)).max().unwrap_or(0),
            _ => 0,
        }
    }
    depth(v, limits.max_depth + 1) <= limits.max_depth && v.to_string().len() <= limits.max_bytes
}

/// A seed of its own for each run.
fn random_seed() -> u64 {
    use std::hash::BuildHasher as _;
    std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now())
}

struct Context {
    executor: Executor,
    failures: Arc<Mutex<HashMap<String, Vec<String>>>>,
    cases: u32,
    seed: u64,
    invalid: bool,
}

/// What one call produced.
#[derive(Clone)]
struct Observed {
    result: ToolResult,
    admitted: bool,
    internal: Vec<String>,
}

static CALLS: AtomicU64 = AtomicU64::new(0);

impl Context {
    fn check_all(&self, view: &ToolView) -> std::io::Result<Vec<ToolReport>> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        Ok(view.iter().map(|def| self.check(&runtime, def)).collect())
    }

    fn check(&self, runtime: &tokio::runtime::Runtime, def: &ToolDefinition) -> ToolReport {
        let schema = def.input_schema();
        let mut notes = Vec::new();
        let valid = match schema::arguments_with_notes(schema) {
            Ok((strategy, left_out)) => {
                notes.extend(left_out);
                // Arguments beyond the executor's size and depth limits are not valid for it.
                let limits = *self.executor.limits();
                let strategy =
                    strategy.prop_filter("arguments within the executor's limits", move |v| within(v, &limits)).boxed();
                self.property(runtime, def, &strategy)
            }
            Err(e) if e.is_pattern() => {
                Outcome::Skipped(format!("valid arguments not checked: the generator cannot match a pattern ({e})"))
            }
            Err(e) => Outcome::Skipped(format!("valid arguments not checked: the schema is not understood ({e})")),
        };
        let invalid = if !self.invalid {
            Outcome::Skipped("invalid arguments not checked: turned off".to_owned())
        } else {
            match schema::invalid_arguments(schema) {
                Ok(Some(strategy)) => self.property(runtime, def, &strategy),
                Ok(None) => Outcome::Skipped("invalid arguments not checked: the schema accepts any value".to_owned()),
                Err(e) => {
                    Outcome::Skipped(format!("invalid arguments not checked: the schema is not understood ({e})"))
                }
            }
        };
        ToolReport { name: def.name().to_owned(), valid, invalid, notes }
    }

    fn call(&self, runtime: &tokio::runtime::Runtime, tool: &str, arguments: Value) -> Observed {
        let id = format!("testkit-{}", CALLS.fetch_add(1, Ordering::Relaxed));
        let admitted = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&admitted);
        let options = CallOptions::new().on_admitted(move || flag.store(true, Ordering::SeqCst));
        let result = runtime.block_on(self.executor.call_with(ToolCall::new(id.clone(), tool, arguments), &options));
        let internal = self.failures.lock().unwrap_or_else(|p| p.into_inner()).remove(&id).unwrap_or_default();
        Observed { result, admitted: admitted.load(Ordering::SeqCst), internal }
    }

    /// Runs one property of one tool.
    fn property<C: Case>(
        &self,
        runtime: &tokio::runtime::Runtime,
        def: &ToolDefinition,
        strategy: &BoxedStrategy<C>,
    ) -> Outcome {
        let mut runner = runner(self.seed, def.name(), C::STREAM, self.cases);
        let seen: RefCell<HashMap<String, (Observed, Problem)>> = RefCell::default();
        let result = runner.run(strategy, |case| {
            let observed = self.call(runtime, def.name(), case.arguments().clone());
            match C::verdict(&observed) {
                None => Ok(()),
                Some(problem) => {
                    let why = format!("{problem}: {}", observed.result.to_json());
                    seen.borrow_mut().insert(case.arguments().to_string(), (observed, problem));
                    Err(TestCaseError::fail(why))
                }
            }
        });
        match result {
            Ok(()) => Outcome::Passed(self.cases),
            Err(TestError::Abort(reason)) => Outcome::Skipped(format!(
                "{} not checked: too many generated values were rejected ({reason})",
                C::PROPERTY.label()
            )),
            Err(TestError::Fail(_, minimal)) => {
                let found = seen.borrow_mut().remove(&minimal.arguments().to_string());
                let (observed, problem) = found.unwrap_or_else(|| {
                    // The runner returns a case that failed, so this is not expected; call it again.
                    let observed = self.call(runtime, def.name(), minimal.arguments().clone());
                    let problem = C::verdict(&observed).unwrap_or(Problem::Flaky);
                    (observed, problem)
                });
                Outcome::Failed(Box::new(Failure {
                    tool: def.name().to_owned(),
                    property: C::PROPERTY,
                    problem,
                    arguments: minimal.arguments().clone(),
                    broken: minimal.broken(),
                    result: observed.result,
                    admitted: observed.admitted,
                    internal: observed.internal,
                    seed: self.seed,
                }))
            }
        }
    }
}

/// A generated case of one property.
trait Case: fmt::Debug + Clone {
    const PROPERTY: Property;
    /// The property's own random stream.
    const STREAM: u64;
    fn arguments(&self) -> &Value;
    fn broken(&self) -> Option<String>;
    /// The problem of a call that fails the property.
    fn verdict(observed: &Observed) -> Option<Problem>;
}

impl Case for Value {
    const PROPERTY: Property = Property::ValidArguments;
    const STREAM: u64 = 1;
    fn arguments(&self) -> &Value {
        self
    }
    fn broken(&self) -> Option<String> {
        None
    }
    fn verdict(observed: &Observed) -> Option<Problem> {
        match observed.result.code() {
            Some("tool_internal_error") => Some(Problem::InternalError),
            Some("invalid_tool_output") => Some(Problem::InvalidOutput),
            Some("invalid_arguments") => Some(Problem::GeneratorBug),
            _ => None,
        }
    }
}

impl Case for Invalid {
    const PROPERTY: Property = Property::InvalidArguments;
    const STREAM: u64 = 2;
    fn arguments(&self) -> &Value {
        &self.value
    }
    fn broken(&self) -> Option<String> {
        Some(self.broken.clone())
    }
    fn verdict(observed: &Observed) -> Option<Problem> {
        if observed.result.code() != Some("invalid_arguments") {
            Some(Problem::Accepted)
        } else if observed.result.executed || observed.admitted {
            Some(Problem::HandlerRan)
        } else {
            None
        }
    }
}

/// Why a check could not pass.
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckError {
    /// The check could not start: a tool named in [`ToolCheck::tools`] or [`ToolCheck::skip`] is not in the
    /// view, [`SEED_VAR`] is not a number, or no runtime could be started.
    Setup(String),
    /// The executor could not be built, typically a tool's `State<T>` the executor lacks: give it with
    /// [`ToolCheck::executor`].
    Executor(ExecutorError),
    /// At least one tool failed; the report holds every tool's outcome.
    Failed(Report),
}

impl CheckError {
    /// The report, when tools were checked.
    pub fn report(&self) -> Option<&Report> {
        match self {
            CheckError::Failed(report) => Some(report),
            _ => None,
        }
    }
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Setup(message) => write!(f, "keel-tools-testkit: {message}"),
            CheckError::Executor(e) => write!(
                f,
                "keel-tools-testkit: {e}\n(give the tools what they take with `ToolCheck::new(..).executor(|b| b.state(..))`)"
            ),
            CheckError::Failed(report) => report.fmt(f),
        }
    }
}

impl std::error::Error for CheckError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckError::Executor(e) => Some(e),
            _ => None,
        }
    }
}

/// What a check found, tool by tool.
#[derive(Debug, Clone)]
pub struct Report {
    seed: u64,
    tools: Vec<ToolReport>,
}

impl Report {
    /// The seed the check ran with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Each tool's outcome, in name order.
    pub fn tools(&self) -> &[ToolReport] {
        &self.tools
    }

    /// The failures, at most two per tool (one per property).
    pub fn failures(&self) -> impl Iterator<Item = &Failure> {
        self.tools.iter().flat_map(|t| [&t.valid, &t.invalid]).filter_map(|o| match o {
            Outcome::Failed(f) => Some(&**f),
            _ => None,
        })
    }

    /// What was not checked, and why: the skipped properties and the parts of schemas left out.
    pub fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        for t in &self.tools {
            for o in [&t.valid, &t.invalid] {
                if let Outcome::Skipped(why) = o {
                    out.push(format!("tool `{}`: {why}", t.name));
                }
            }
            for note in &t.notes {
                out.push(format!("tool `{}`: {note}", t.name));
            }
        }
        out
    }

    /// Whether no tool failed.
    pub fn is_ok(&self) -> bool {
        self.failures().next().is_none()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failed: Vec<&Failure> = self.failures().collect();
        let tools_failed = self.tools.iter().filter(|t| t.failed()).count();
        if failed.is_empty() {
            write!(f, "keel-tools-testkit: {} tools checked, none failed (seed {})", self.tools.len(), self.seed)?;
        } else {
            write!(
                f,
                "keel-tools-testkit: {tools_failed} of {} tools failed (seed {}; re-run with {SEED_VAR}={})",
                self.tools.len(),
                self.seed,
                self.seed
            )?;
        }
        for failure in failed {
            write!(f, "\n\n{failure}")?;
        }
        let notes = self.notes();
        if !notes.is_empty() {
            write!(f, "\n\nnot checked:")?;
            for note in notes {
                write!(f, "\n  {note}")?;
            }
        }
        let passed: Vec<String> =
            self.tools.iter().filter(|t| !t.failed()).map(|t| format!("{} ({})", t.name, t.summary())).collect();
        if !passed.is_empty() {
            write!(f, "\n\npassed: {}", passed.join(", "))?;
        }
        Ok(())
    }
}

/// One tool's outcome.
#[derive(Debug, Clone)]
pub struct ToolReport {
    name: String,
    valid: Outcome,
    invalid: Outcome,
    notes: Vec<String>,
}

impl ToolReport {
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The outcome of the valid-arguments property.
    pub fn valid_arguments(&self) -> &Outcome {
        &self.valid
    }

    /// The outcome of the invalid-arguments property.
    pub fn invalid_arguments(&self) -> &Outcome {
        &self.invalid
    }

    /// Parts of the argument schema left out of the generated values (optional properties, branches), and why.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    fn failed(&self) -> bool {
        matches!(self.valid, Outcome::Failed(_)) || matches!(self.invalid, Outcome::Failed(_))
    }

    fn summary(&self) -> String {
        let part = |o: &Outcome, what: &str| match o {
            Outcome::Passed(n) => format!("{n} {what}"),
            Outcome::Skipped(_) => format!("{what} skipped"),
            Outcome::Failed(_) => format!("{what} failed"),
        };
        format!("{}, {}", part(&self.valid, "valid"), part(&self.invalid, "invalid"))
    }
}

/// The outcome of one property of one tool.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Outcome {
    /// Every case passed: how many.
    Passed(u32),
    /// Not checked, and why.
    Skipped(String),
    /// A case failed: the smallest one found.
    Failed(Box<Failure>),
}

/// Which property failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Property {
    /// Valid arguments must not end in an internal error or an invalid result.
    ValidArguments,
    /// Invalid arguments must end in `invalid_arguments`, the handler not run.
    InvalidArguments,
}

impl Property {
    fn label(self) -> &'static str {
        match self {
            Property::ValidArguments => "valid arguments",
            Property::InvalidArguments => "invalid arguments",
        }
    }
}

/// What went wrong in a failing case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// `tool_internal_error`: the handler returned an internal error or panicked.
    InternalError,
    /// `invalid_tool_output`: the result breaks the tool's own result schema (or the output limits).
    InvalidOutput,
    /// The executor refused generated arguments as `invalid_arguments`: a bug of this testkit's generator, not
    /// of the tool.
    GeneratorBug,
    /// Arguments that break the schema were not answered `invalid_arguments`.
    Accepted,
    /// Arguments that break the schema reached the handler.
    HandlerRan,
    /// The case failed once and passed when called again.
    Flaky,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Problem::InternalError => "the tool failed internally (tool_internal_error)",
            Problem::InvalidOutput => "the tool's result breaks its own result schema (invalid_tool_output)",
            Problem::GeneratorBug => {
                "keel-tools-testkit generated arguments the executor refuses (invalid_arguments): a bug of the \
                 testkit's generator, not of the tool; please report it, and leave the tool out with \
                 `ToolCheck::skip` meanwhile"
            }
            Problem::Accepted => "arguments that break the schema were not refused with invalid_arguments",
            Problem::HandlerRan => "arguments that break the schema reached the handler",
            Problem::Flaky => "the case failed, then passed when called again",
        })
    }
}

/// One failing case, shrunk.
#[derive(Debug, Clone)]
pub struct Failure {
    tool: String,
    property: Property,
    problem: Problem,
    arguments: Value,
    broken: Option<String>,
    result: ToolResult,
    admitted: bool,
    internal: Vec<String>,
    seed: u64,
}

impl Failure {
    /// The tool.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The property that failed.
    pub fn property(&self) -> Property {
        self.property
    }

    /// What went wrong.
    pub fn problem(&self) -> Problem {
        self.problem
    }

    /// The arguments of the case, shrunk.
    pub fn arguments(&self) -> &Value {
        &self.arguments
    }

    /// For invalid arguments: what was broken in them.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// The executor's answer.
    pub fn result(&self) -> &ToolResult {
        &self.result
    }

    /// The result's error code, if any.
    pub fn code(&self) -> Option<&str> {
        self.result.code()
    }

    /// What the executor's internal-failure hook heard about the call (a panic's text, an error chain, the
    /// result's violations); empty when a policy or hook of the caller's replaced the testkit's.
    pub fn internal(&self) -> &[String] {
        &self.internal
    }

    /// The seed that reproduces the failure (with [`SEED_VAR`]).
    pub fn seed(&self) -> u64 {
        self.seed
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let property = self.property.label();
        writeln!(f, "tool `{}` ({property}): {}", self.tool, self.problem)?;
        writeln!(f, "  arguments (shrunk): {}", self.arguments)?;
        if let Some(broken) = &self.broken {
            writeln!(f, "  broken: {broken}")?;
        }
        writeln!(
            f,
            "  code: {}, executed: {}{}",
            self.code().unwrap_or("none (ok)"),
            self.result.executed,
            if self.admitted && !self.result.executed { ", the handler was started" } else { "" }
        )?;
        writeln!(f, "  result: {}", self.result.to_json())?;
        for line in &self.internal {
            writeln!(f, "  internal failure: {line}")?;
        }
        write!(f, "  seed: {} (re-run with {SEED_VAR}={})", self.seed, self.seed)
    }
}

/// The policy that approves every call, so that every handler runs.
fn approve_all(_: &PolicyRequest<'_>) -> PolicyDecision {
    PolicyDecision::Allow
}
