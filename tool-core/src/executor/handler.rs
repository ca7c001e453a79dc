//! The executor's handler machinery: a handler started on its call's thread or a blocking one, its future polled
//! with panics caught, and waited for against its deadline, the grace period after it and the caller's
//! cancellation.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::TARGET;
use crate::call_context::CallContext;
use crate::clock::{Stopwatch, Timing};
use crate::error::ToolError;
use crate::result::HandlerState;
use crate::tool_definition::{BoxFuture, Handler};

/// How a handler run ended, before output validation: with its value, or without one.
pub(super) type HandlerOutcome = Result<Value, Fault>;

/// How a handler run ended for its call, and the handler itself when it outlived the call: still running after
/// its deadline (or the caller's cancellation) and the grace period, or ended too late (its outcome then is
/// `timeout`, and what it returned is in the [`Running`]). The caller awaits it or lets it run on
/// ([`detach`]); it is never dropped while it runs.
pub(super) type Ran = (HandlerOutcome, Option<Running>);

/// How a handler run ended without a value.
pub(super) enum Fault {
    /// Its own error: a business error, an internal one, arguments it could not take.
    Error(ToolError),
    Panicked(Box<dyn Any + Send>),
    /// The deadline and the grace period passed; where the handler stood then.
    TimedOut(HandlerState),
    /// The caller cancelled, and the grace period passed; where the handler stood then.
    Cancelled(HandlerState),
}

/// A call's deadline: its timeout, and the grace period after it (see
/// [`ExecutorBuilder::timeout_grace`](super::ExecutorBuilder::timeout_grace)).
#[derive(Clone, Copy)]
pub(super) struct Deadline {
    pub(super) timeout: Duration,
    grace: Duration,
    /// How the handler is timed against both: a handler that ends later is too late.
    pub(super) timing: Timing,
}

impl Deadline {
    pub(super) fn new(timeout: Duration, grace: Duration) -> Deadline {
        Deadline { timeout, grace, timing: Timing::new(timeout.saturating_add(grace)) }
    }

    /// The timeout and the grace period: the longest a handler is waited for.
    pub(super) fn total(&self) -> Duration {
        self.timeout.saturating_add(self.grace)
    }
}

/// A blocking handler's progress, shared with its thread: whoever moves it out of `QUEUED` first decides whether
/// it runs.
const QUEUED: u8 = 0;
const STARTED: u8 = 1;
const ABANDONED: u8 = 2;

/// A running handler's future, ending with its result or its panic.
///
/// An async handler's future is boxed already: it is held as it is, not boxed again.
pub(super) enum Running {
    /// An async or run-time handler's future, polled with panics caught.
    Polled(BoxFuture<Result<Value, ToolError>>),
    /// A blocking handler's join with its thread, which reports a panic itself, and its progress (shared with the
    /// thread).
    Joined { join: Pin<Box<dyn Future<Output = Caught> + Send>>, progress: Arc<AtomicU8> },
    /// A handler that has ended: what it returned (taken by the first poll).
    Ended(Option<Caught>),
}

impl Running {
    /// Whether the handler has ended already.
    pub(super) fn has_ended(&self) -> bool {
        matches!(self, Running::Ended(Some(_)))
    }

    /// What the handler returned, when it has ended already.
    pub(super) fn ended(&mut self) -> Option<Caught> {
        match self {
            Running::Ended(caught) => caught.take(),
            _ => None,
        }
    }
}

impl Future for Running {
    type Output = Caught;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Caught> {
        match self.get_mut() {
            Running::Polled(fut) => match std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
                Ok(Poll::Pending) => Poll::Pending,
                Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
                Err(panic) => Poll::Ready(Err(panic)),
            },
            Running::Joined { join, .. } => join.as_mut().poll(cx),
            Running::Ended(caught) => match caught.take() {
                Some(caught) => Poll::Ready(caught),
                None => Poll::Pending,
            },
        }
    }
}

/// A handler's result, or the payload of its panic.
pub(super) type Caught = Result<Result<Value, ToolError>, Box<dyn Any + Send>>;

/// A handler started: its future, or how it ended before it had one.
pub(super) enum Started {
    Running(Running),
    Ended(Ran),
}

/// Starts a handler: runs an inline one to its end (`deadline` judges it afterwards), makes an async one's future,
/// or hands a blocking one to a blocking thread.
pub(super) fn start(
    handler: &Handler,
    call_id: &str,
    arguments: Value,
    ctx: CallContext,
    deadline: Deadline,
) -> Started {
    let fut = match handler {
        Handler::Inline(f) => return Started::Ended(run_inline(*f, arguments, &ctx, deadline)),
        _ if tokio::runtime::Handle::try_current().is_err() => {
            tracing::error!(target: TARGET, call_id, "the executor needs a Tokio runtime (with time enabled)");
            // The handler never starts: not executed.
            let error = ToolError::internal("the executor needs a Tokio runtime (with time enabled)");
            return Started::Ended((Err(Fault::Error(error.before_handler())), None));
        }
        // Making the future runs the handler's synchronous part (none in `#[tool]`'s thunks), so a panic there is
        // caught too.
        Handler::Async(f) => catch(move || f(arguments, ctx)),
        Handler::Dynamic(h) => catch(move || h.call(arguments, ctx)),
        Handler::Blocking(f) => {
            let f = *f;
            // A handler still queued for a blocking thread when its call stops (deadline, cancellation) never
            // starts: the thread and the executor race to move it out of `QUEUED`, and exactly one wins.
            let flag = Arc::new(AtomicU8::new(QUEUED));
            let queued = Arc::clone(&flag);
            let join = tokio::task::spawn_blocking(move || {
                if queued.compare_exchange(QUEUED, STARTED, Ordering::SeqCst, Ordering::SeqCst).is_err() {
                    return Err(ToolError::internal("the call ended before a blocking thread was free"));
                }
                f(arguments, ctx)
            });
            let joined = Box::pin(async move {
                match join.await {
                    Ok(r) => Ok(r),
                    Err(e) if e.is_panic() => Err(e.into_panic()),
                    Err(_) => Ok(Err(ToolError::internal("blocking task was cancelled"))),
                }
            });
            return Started::Running(Running::Joined { join: joined, progress: flag });
        }
    };
    match fut {
        Ok(fut) => Started::Running(Running::Polled(fut)),
        Err(panic) => Started::Ended((Err(Fault::Panicked(panic)), None)),
    }
}

/// Makes a handler's future, catching a panic while it is made.
fn catch(
    make: impl FnOnce() -> BoxFuture<Result<Value, ToolError>>,
) -> Result<BoxFuture<Result<Value, ToolError>>, Box<dyn Any + Send>> {
    std::panic::catch_unwind(AssertUnwindSafe(make))
}

/// Waits for a started handler that did not finish on its first poll, until it ends, or until its deadline (or
/// the caller's cancellation) and the grace period after it. At the deadline `stop` (the call's own token) is
/// cancelled and a blocking handler still queued is abandoned; a handler still running after the grace period is
/// not dropped but handed back, to finish on its own task.
pub(super) async fn wait(
    mut fut: Running,
    watch: Stopwatch,
    deadline: Deadline,
    stop: Option<&CancellationToken>,
    caller: Option<&CancellationToken>,
) -> Ran {
    let timed_out = tokio::select! {
        biased;
        r = &mut fut => return finished(r, &watch),
        // (A duration beyond any representable instant sleeps "far away".)
        () = tokio::time::sleep(deadline.timeout.saturating_sub(watch.elapsed())) => true,
        () = cancelled(caller) => false,
    };
    let stopped = |state| Err(if timed_out { Fault::TimedOut(state) } else { Fault::Cancelled(state) });
    if let Running::Joined { progress, .. } = &fut
        && progress.compare_exchange(QUEUED, ABANDONED, Ordering::SeqCst, Ordering::SeqCst).is_ok()
    {
        return (stopped(HandlerState::NotStarted), None);
    }
    // Ask the handler to stop, and give it the grace period to do so (or to finish).
    if let Some(stop) = stop {
        stop.cancel();
    }
    match tokio::time::timeout(deadline.grace, &mut fut).await {
        Ok(r) => finished(r, &watch),
        // Dropping the future could cut its effects between two steps: it runs on to its end instead.
        Err(_) => (stopped(HandlerState::Running), Some(fut)),
    }
}

/// Lets a handler that outlived its call (and whose outcome no ledger records) run on to its end on a task of its
/// own, and says how it ended then.
pub(super) fn detach(mut fut: Running, call_id: &str, tool: &str) {
    if fut.ended().is_some() {
        return;
    }
    let (call_id, tool) = (call_id.to_owned(), tool.to_owned());
    tokio::spawn(async move {
        let ended = match fut.await {
            Ok(Ok(_)) => "a value",
            Ok(Err(_)) => "an error",
            Err(_) => "a panic",
        };
        tracing::warn!(target: TARGET, call_id, tool_name = tool, ended, "a tool handler ended after its call was answered");
    });
}

/// The outcome of a handler timed by `watch`: as it is, unless it ended past the deadline and the grace period (a
/// handler that blocked its thread finishes before any timer can fire), when it is too late for its call (what it
/// returned is handed back, to be recorded for a call that runs once).
#[inline]
pub(super) fn finished(r: Caught, watch: &Stopwatch) -> Ran {
    if watch.past_deadline() {
        return (Err(Fault::TimedOut(HandlerState::Finished)), Some(Running::Ended(Some(r))));
    }
    (outcome(r), None)
}

/// A handler's result, or its panic, as the outcome of its run.
#[inline]
pub(super) fn outcome(r: Caught) -> HandlerOutcome {
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Fault::Error(e)),
        Err(panic) => Err(Fault::Panicked(panic)),
    }
}

/// Completes when `token` is cancelled; never without one.
async fn cancelled(token: Option<&CancellationToken>) {
    match token {
        Some(token) => token.cancelled().await,
        None => std::future::pending().await,
    }
}

/// Runs a synchronous inline handler. It runs to completion on this thread, so no timer or cancellation could
/// interrupt it: it is called directly (no boxed future, no timer, no runtime needed) and judged by the clock
/// afterwards, like a handler that blocked its thread. Like an async handler that finishes on its first poll, it
/// runs even if the call's token was already cancelled.
pub(super) fn run_inline(
    f: fn(Value, &CallContext) -> Result<Value, ToolError>,
    arguments: Value,
    ctx: &CallContext,
    deadline: Deadline,
) -> Ran {
    let watch = Stopwatch::started(deadline.timing);
    let r = std::panic::catch_unwind(AssertUnwindSafe(move || f(arguments, ctx)));
    finished(r, &watch)
}

/// Awaits a running handler, each of its polls under the call's `span`. One that finishes on its first poll (most
/// async fns that do no I/O) is polled here, and needs no timer; only one still pending is waited for ([`wait`]).
/// A blocking handler's first poll would only find it queued, so it is waited for straight away.
pub(super) async fn settle(
    mut fut: Running,
    deadline: &Deadline,
    stop: Option<&CancellationToken>,
    caller: Option<&CancellationToken>,
    span: &tracing::Span,
) -> Ran {
    let watch = Stopwatch::started(deadline.timing);
    let first = match fut {
        Running::Polled(_) => {
            std::future::poll_fn(|cx| {
                let _entered = span.enter();
                Poll::Ready(Pin::new(&mut fut).poll(cx))
            })
            .await
        }
        Running::Joined { .. } | Running::Ended(_) => Poll::Pending,
    };
    match first {
        Poll::Ready(r) => finished(r, &watch),
        Poll::Pending => wait(fut, watch, *deadline, stop, caller).instrument(span.clone()).await,
    }
}
