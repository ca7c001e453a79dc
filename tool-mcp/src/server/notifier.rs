//! One call's log messages and progress, sent to its client in order before the result.

use std::sync::Mutex;
use std::time::Duration;

use keel_tools_core::context::{LogLevel, Notifier};
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// How long the server waits, after a call, for its notifications to be written before sending the result.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Notifications queued per call before new ones are dropped.
const NOTIFICATION_QUEUE: usize = 1024;

/// A minimum level above every level: no log message is sent.
pub(super) const NO_LOGS: u8 = u8::MAX;

pub(super) fn level_rank(level: LogLevel) -> u8 {
    match level {
        LogLevel::Debug => 0,
        LogLevel::Info => 1,
        LogLevel::Notice => 2,
        LogLevel::Warning => 3,
        LogLevel::Error => 4,
        LogLevel::Critical => 5,
        LogLevel::Alert => 6,
        LogLevel::Emergency => 7,
    }
}

pub(super) fn mcp_level_rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

fn mcp_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}

enum Note {
    Log(LoggingMessageNotificationParam),
    Progress(ProgressNotificationParam),
    Flush(oneshot::Sender<()>),
}

/// Sends one call's log messages and progress to the client, in order, through a per-call queue. The queue and the
/// task that drains it are made at the call's first notification: a call that sends none costs neither.
pub(super) struct PeerNotifier {
    peer: Peer<RoleServer>,
    runtime: tokio::runtime::Handle,
    queue: Mutex<Queue>,
    min_level: u8,
    progress_token: Option<ProgressToken>,
    last_progress: Mutex<Option<f64>>,
}

/// A call's notification queue.
enum Queue {
    /// No notification yet.
    Unused,
    Open(mpsc::Sender<Note>),
    /// The result has been sent: notifications are dropped.
    Closed,
}

impl PeerNotifier {
    /// A notifier for one call on the current runtime, sending log messages at or above `min_level`, and progress
    /// when the request carried a token.
    pub(super) fn new(peer: Peer<RoleServer>, min_level: u8, progress_token: Option<ProgressToken>) -> PeerNotifier {
        PeerNotifier {
            peer,
            runtime: tokio::runtime::Handle::current(),
            queue: Mutex::new(Queue::Unused),
            min_level,
            progress_token,
            last_progress: Mutex::new(None),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn send(&self, note: Note) -> bool {
        let mut queue = self.queue();
        if matches!(*queue, Queue::Unused) {
            let (tx, rx) = mpsc::channel(NOTIFICATION_QUEUE);
            self.runtime.spawn(forward_notifications(self.peer.clone(), rx));
            *queue = Queue::Open(tx);
        }
        match &*queue {
            Queue::Open(tx) => tx.try_send(note).is_ok(),
            Queue::Unused | Queue::Closed => false,
        }
    }

    /// Waits (within [`FLUSH_TIMEOUT`]) until every notification sent so far has been handed to the transport, and
    /// closes the queue: later notifications of the call are dropped.
    pub(super) async fn flush(&self) {
        let queue = std::mem::replace(&mut *self.queue(), Queue::Closed);
        let Queue::Open(tx) = queue else { return };
        let flush = async move {
            let (done_tx, done_rx) = oneshot::channel();
            if tx.send(Note::Flush(done_tx)).await.is_ok() {
                let _ = done_rx.await;
            }
        };
        if tokio::time::timeout(FLUSH_TIMEOUT, flush).await.is_err() {
            tracing::debug!("MCP notifications of a call were not all written before its result");
        }
    }
}

impl Notifier for PeerNotifier {
    fn log(&self, level: LogLevel, logger: Option<&str>, data: Value) {
        if level_rank(level) < self.min_level {
            return;
        }
        let mut param = LoggingMessageNotificationParam::new(mcp_level(level), data);
        if let Some(logger) = logger {
            param = param.with_logger(logger);
        }
        if !self.send(Note::Log(param)) {
            tracing::debug!("MCP log notification dropped (queue full or call over)");
        }
    }

    fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(token) = &self.progress_token else { return };
        if !progress.is_finite() || total.is_some_and(|t| !t.is_finite()) {
            return;
        }
        {
            let Ok(mut last) = self.last_progress.lock() else { return };
            // MCP requires progress to increase with each notification.
            if last.is_some_and(|l| progress <= l) {
                return;
            }
            *last = Some(progress);
        }
        let mut param = ProgressNotificationParam::new(token.clone(), progress);
        if let Some(total) = total {
            param = param.with_total(total);
        }
        if let Some(message) = message {
            param = param.with_message(message);
        }
        if !self.send(Note::Progress(param)) {
            tracing::debug!("MCP progress notification dropped (queue full or call over)");
        }
    }
}

/// Forwards queued notifications to the peer until flushed.
async fn forward_notifications(peer: Peer<RoleServer>, mut rx: mpsc::Receiver<Note>) {
    while let Some(note) = rx.recv().await {
        let sent = match note {
            Note::Log(p) => peer.notify_logging_message(p).await,
            Note::Progress(p) => peer.notify_progress(p).await,
            Note::Flush(done) => {
                let _ = done.send(());
                return;
            }
        };
        if let Err(e) = sent {
            tracing::debug!(error = %e, "MCP notification not delivered");
        }
    }
}
