//! Tasks kept in a [`TaskStore`] (see [`McpServerBuilder::task_store`](crate::server::McpServerBuilder::task_store)):
//! the replica that runs a call records it, renews its lease and records its end; any replica answers `tasks/get`,
//! `tasks/update` and `tasks/cancel` from the store.
//!
//! | the store's task | `tasks/get` |
//! |---|---|
//! | `working`, `input_required` (with its `inputRequests`), `completed`, `failed`, `cancelled` | the same |
//! | `lost`: its replica stopped renewing the lease before the call ended | `failed`, with the JSON-RPC error `-32603` whose data has `code: "task_lost"`; the status message says the call may have run |
//!
//! The owner learns of a cancel made on any replica from the store's change feed (or, at the latest, from its next
//! heartbeat) and fires the call's cancellation token. A heartbeat that finds the lease lost does the same: the task
//! reads `lost` everywhere, and the call stops.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_tools_core::context::InputError;
use keel_tools_core::tasks::{
    LOST_MESSAGE, NewTask, Task, TaskChange, TaskLease, TaskStatus, TaskStore, TaskStoreError, Terminal, WaitFor,
};
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, DetailedTask, InputRequests, InputResponses, JsonObject, TaskPayload};
use rmcp::task_manager::TaskExit;
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::Bound;

/// A store's error as the server uses it: the code, and the message for the log (never for the client).
#[derive(Debug)]
pub(crate) struct Failure {
    code: Cow<'static, str>,
    message: String,
}

impl Failure {
    fn of(e: &impl TaskStoreError) -> Failure {
        Failure { code: e.code(), message: e.to_string() }
    }

    /// The owner's operation was refused because the task ended, or is no longer its own.
    fn ends_ownership(&self) -> bool {
        matches!(&*self.code, "task_ended" | "lease_lost" | "unknown_task")
    }
}

type Fut<'a, T> = Pin<Box<dyn Future<Output = Result<T, Failure>> + Send + 'a>>;

/// What the server asks of a task store, whatever its error type.
trait Tasks: Send + Sync {
    fn create<'a>(&'a self, task: &'a NewTask) -> Fut<'a, (Task, TaskLease)>;
    fn get<'a>(&'a self, id: &'a str) -> Fut<'a, Option<Task>>;
    fn wait<'a>(&'a self, id: &'a str, until: WaitFor, timeout: Duration) -> Fut<'a, Option<Task>>;
    fn input_required<'a>(&'a self, lease: &'a TaskLease, request: &'a Value) -> Fut<'a, Task>;
    fn answer<'a>(&'a self, id: &'a str, answer: &'a Value) -> Fut<'a, Task>;
    fn take_answers<'a>(&'a self, lease: &'a TaskLease) -> Fut<'a, Vec<Value>>;
    fn heartbeat<'a>(&'a self, lease: &'a TaskLease) -> Fut<'a, TaskLease>;
    fn finish<'a>(&'a self, lease: &'a TaskLease, outcome: Terminal) -> Fut<'a, Task>;
    fn cancel<'a>(&'a self, id: &'a str) -> Fut<'a, Task>;
    fn purge_expired(&self) -> Fut<'_, u64>;
    fn changes(&self) -> broadcast::Receiver<TaskChange>;
}

fn erased<'a, T: Send + 'a, E: TaskStoreError>(
    f: Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'a>>,
) -> Fut<'a, T> {
    Box::pin(async move { f.await.map_err(|e| Failure::of(&e)) })
}

struct Erased<S: ?Sized>(Arc<S>);

/// Any task store, its error erased to its code and message.
#[derive(Clone)]
pub(crate) struct AnyTaskStore(Arc<dyn Tasks>);

impl AnyTaskStore {
    pub(crate) fn new<S: TaskStore + ?Sized + 'static>(store: Arc<S>) -> AnyTaskStore {
        AnyTaskStore(Arc::new(Erased(store)))
    }
}

impl<S: TaskStore + ?Sized> Tasks for Erased<S> {
    fn create<'a>(&'a self, task: &'a NewTask) -> Fut<'a, (Task, TaskLease)> {
        erased(self.0.create(task))
    }
    fn get<'a>(&'a self, id: &'a str) -> Fut<'a, Option<Task>> {
        erased(self.0.get(id))
    }
    fn wait<'a>(&'a self, id: &'a str, until: WaitFor, timeout: Duration) -> Fut<'a, Option<Task>> {
        erased(self.0.wait(id, until, timeout))
    }
    fn input_required<'a>(&'a self, lease: &'a TaskLease, request: &'a Value) -> Fut<'a, Task> {
        erased(self.0.input_required(lease, request))
    }
    fn answer<'a>(&'a self, id: &'a str, answer: &'a Value) -> Fut<'a, Task> {
        erased(self.0.answer(id, answer))
    }
    fn take_answers<'a>(&'a self, lease: &'a TaskLease) -> Fut<'a, Vec<Value>> {
        erased(self.0.take_answers(lease))
    }
    fn heartbeat<'a>(&'a self, lease: &'a TaskLease) -> Fut<'a, TaskLease> {
        erased(self.0.heartbeat(lease))
    }
    fn finish<'a>(&'a self, lease: &'a TaskLease, outcome: Terminal) -> Fut<'a, Task> {
        erased(self.0.finish(lease, outcome))
    }
    fn cancel<'a>(&'a self, id: &'a str) -> Fut<'a, Task> {
        erased(self.0.cancel(id))
    }
    fn purge_expired(&self) -> Fut<'_, u64> {
        erased(self.0.purge_expired())
    }
    fn changes(&self) -> broadcast::Receiver<TaskChange> {
        self.0.changes()
    }
}

/// How often ended tasks past their keep time are removed, at most (when a task is created).
const PURGE_EVERY: Duration = Duration::from_secs(60);

/// The server's tasks in a store.
pub(crate) struct StoredTasks {
    store: Arc<dyn Tasks>,
    lease: Duration,
    keep_for: Duration,
    poll_interval: Duration,
    purged_at: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for StoredTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredTasks").field("lease", &self.lease).field("keep_for", &self.keep_for).finish()
    }
}

/// Who runs or asks for a task: its tenant, as the call's options named it, and its owner (`principal`): the
/// token's subject on a protected server (`server::session::task_owner`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Whose {
    pub(crate) tenant: Option<String>,
    pub(crate) principal: Option<String>,
}

impl StoredTasks {
    pub(crate) fn new(
        store: AnyTaskStore,
        lease: Duration,
        keep_for: Duration,
        poll_interval: Duration,
    ) -> StoredTasks {
        StoredTasks {
            store: store.0,
            lease: lease.max(Duration::from_millis(10)),
            keep_for,
            poll_interval,
            purged_at: Mutex::new(None),
        }
    }

    /// Makes a running call a task: records it `working` under a lease, binds the call's input requests to it, and
    /// drives it in the background (heartbeats, a cancel from any replica, its end). On a store failure, the call is
    /// cancelled and the request gets `-32603` with `code: "state_unavailable"`.
    pub(crate) async fn begin<F>(
        &self,
        tool: &str,
        whose: Whose,
        outcome: F,
        bind: &watch::Sender<Option<Bound>>,
        token: CancellationToken,
    ) -> Result<rmcp::model::Task, ErrorData>
    where
        F: Future<Output = Result<CallToolResult, TaskExit>> + Send + 'static,
    {
        self.purge_now_and_then();
        let mut new = NewTask::new(task_id()?, tool).lease(self.lease).keep_for(self.keep_for);
        new = new.poll_interval(self.poll_interval);
        if let Some(tenant) = whose.tenant {
            new = new.tenant(tenant);
        }
        if let Some(principal) = whose.principal {
            new = new.principal(principal);
        }
        let (task, lease) = match self.store.create(&new).await {
            Ok(created) => created,
            Err(e) => {
                token.cancel();
                tracing::warn!(code = %e.code, error = %e.message, "a task could not be recorded; its call is cancelled");
                return Err(unavailable(&e));
            }
        };
        let owner = Arc::new(Owner {
            store: self.store.clone(),
            id: task.id.clone(),
            lease: Mutex::new(lease),
            lease_time: self.lease,
            asking: Mutex::new(Asking::default()),
            posting: tokio::sync::Mutex::new(()),
        });
        let _ = bind.send(Some(Bound::Stored(owner.clone())));
        tokio::spawn(drive(owner, outcome, token));
        Ok(detailed(&task).task)
    }

    /// `tasks/get`: the task as the store holds it, for its own principal only.
    pub(crate) async fn get(&self, id: &str, asker: Option<&str>) -> Result<DetailedTask, ErrorData> {
        let task = self.visible(id, asker).await?;
        Ok(detailed(&task))
    }

    /// `tasks/update`: answers the task's input request. Answers for a task that asks for none, or that ended, are
    /// ignored (SEP-2663).
    pub(crate) async fn update(
        &self,
        id: &str,
        responses: InputResponses,
        asker: Option<&str>,
    ) -> Result<(), ErrorData> {
        self.visible(id, asker).await?;
        let answer = Value::Object(responses.into_iter().collect());
        match self.store.answer(id, &answer).await {
            Ok(_) => Ok(()),
            Err(e) if matches!(&*e.code, "input_not_requested" | "task_ended") => Ok(()),
            Err(e) => Err(refused(id, &e)),
        }
    }

    /// `tasks/cancel`: cancels the task, whichever replica runs it. A task that ended stays as it ended.
    pub(crate) async fn cancel(&self, id: &str, asker: Option<&str>) -> Result<(), ErrorData> {
        self.visible(id, asker).await?;
        match self.store.cancel(id).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == "task_ended" => Ok(()),
            Err(e) => Err(refused(id, &e)),
        }
    }

    /// The task `id`, when `asker` may see it: a task started for a principal is that principal's alone, and any
    /// other asker, an anonymous one included, is told it does not exist.
    async fn visible(&self, id: &str, asker: Option<&str>) -> Result<Task, ErrorData> {
        let task = self.store.get(id).await.map_err(|e| refused(id, &e))?.ok_or_else(|| unknown(id))?;
        if may_see(task.principal.as_deref(), asker) { Ok(task) } else { Err(unknown(id)) }
    }

    fn purge_now_and_then(&self) {
        let mut at = self.purged_at.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if at.is_some_and(|at| at.elapsed() < PURGE_EVERY) {
            return;
        }
        *at = Some(Instant::now());
        let store = self.store.clone();
        tokio::spawn(async move {
            if let Err(e) = store.purge_expired().await {
                tracing::warn!(code = %e.code, error = %e.message, "ended tasks could not be purged");
            }
        });
    }
}

/// The owner's hold on a task while its call runs.
pub(crate) struct Owner {
    store: Arc<dyn Tasks>,
    id: String,
    lease: Mutex<TaskLease>,
    lease_time: Duration,
    /// The call's input requests that wait for answers.
    asking: Mutex<Asking>,
    /// Held while the open requests are written to the store or its answers taken, so that what the store shows
    /// is always every request open at the time.
    posting: tokio::sync::Mutex<()>,
}

/// The input requests of a task's call that wait for answers, and the answers taken for them. A handler may ask
/// several at once: the task shows them all in `inputRequests`, and a `tasks/update` may answer any of them.
#[derive(Default)]
struct Asking {
    /// Each open request, by its key.
    open: JsonObject,
    /// Answers taken from the store, each waiting for its request to pick it up.
    answered: JsonObject,
}

/// Withdraws a request whose asker stopped waiting (it was answered, failed, or its future was dropped).
struct Withdraw<'a> {
    owner: &'a Owner,
    key: &'a str,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        let mut asking = self.owner.asking();
        asking.open.remove(self.key);
        asking.answered.remove(self.key);
    }
}

impl Owner {
    fn lease(&self) -> TaskLease {
        self.lease.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn asking(&self) -> std::sync::MutexGuard<'_, Asking> {
        self.asking.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Asks the client for input through the task (`input_required`, answered by `tasks/update` on any replica);
    /// the answer to `key`. Requests asked at once are shown together, and each is answered as its answer comes.
    pub(crate) async fn request_input(&self, key: String, request: Value) -> Result<Value, InputError> {
        let _withdraw = Withdraw { owner: self, key: &key };
        let ended = |e: Failure| {
            if e.ends_ownership() {
                InputError::Failed("the task ended: it was cancelled, or its lease was lost".to_owned())
            } else {
                tracing::warn!(code = %e.code, error = %e.message, "a task's input request failed in its store");
                InputError::Failed(format!("the task store failed ({})", e.code))
            }
        };
        let mut seen = {
            let _posting = self.posting.lock().await;
            {
                let mut asking = self.asking();
                asking.answered.remove(&key);
                asking.open.insert(key.clone(), request);
            }
            self.post_open().await.map_err(ended)?.map_or(0, |task| task.version)
        };
        loop {
            let task = self.store.wait(&self.id, WaitFor::ChangedSince(seen), self.lease_time).await.map_err(ended)?;
            let task = task.ok_or_else(|| InputError::Failed("the task is gone".to_owned()))?;
            seen = task.version;
            match task.status {
                TaskStatus::InputRequired => {}
                TaskStatus::Working => {
                    // Answers came, or a request was asked again: take what answers there are for every open
                    // request (another asker may have taken them first), then show what is still open.
                    let _posting = self.posting.lock().await;
                    let answers = self.store.take_answers(&self.lease()).await.map_err(ended)?;
                    {
                        let mut asking = self.asking();
                        for (k, v) in answers
                            .into_iter()
                            .filter_map(|a| match a {
                                Value::Object(map) => Some(map),
                                _ => None,
                            })
                            .flatten()
                        {
                            if asking.open.remove(&k).is_some() {
                                asking.answered.insert(k, v);
                            }
                        }
                    }
                    if let Some(task) = self.post_open().await.map_err(ended)? {
                        seen = task.version;
                    }
                }
                _ => return Err(InputError::Failed(format!("the task ended ({})", task.status))),
            }
            if let Some(answer) = self.asking().answered.remove(&key) {
                return Ok(answer);
            }
        }
    }

    /// Shows every open request in the store (`input_required`); `None` when none is open. The caller holds
    /// `posting`.
    async fn post_open(&self) -> Result<Option<Task>, Failure> {
        let open = self.asking().open.clone();
        if open.is_empty() {
            return Ok(None);
        }
        self.store.input_required(&self.lease(), &Value::Object(open)).await.map(Some)
    }

    /// Renews the lease; `Err` when the task ended or is no longer this owner's.
    async fn heartbeat(&self) -> Result<(), Failure> {
        let renewed = self.store.heartbeat(&self.lease()).await?;
        *self.lease.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = renewed;
        Ok(())
    }

    /// Records the call's end, trying again for up to a lease's time while the store fails.
    async fn finish(&self, outcome: Terminal) {
        let deadline = Instant::now() + self.lease_time;
        let mut pause = Duration::from_millis(50);
        loop {
            match self.store.finish(&self.lease(), outcome.clone()).await {
                Ok(_) => return,
                Err(e) if e.ends_ownership() => return,
                Err(e) if Instant::now() + pause >= deadline => {
                    tracing::warn!(task = %self.id, code = %e.code, error = %e.message,
                        "a task's end could not be recorded: it will read lost once its lease expires");
                    return;
                }
                Err(_) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
            }
        }
    }
}

/// Runs the task to its end: heartbeats every third of the lease, a cancel (or loss) seen in the store cancels the
/// call, and the call's outcome is recorded unless the task ended before it.
async fn drive<F>(owner: Arc<Owner>, outcome: F, token: CancellationToken)
where
    F: Future<Output = Result<CallToolResult, TaskExit>> + Send + 'static,
{
    let mut changes = owner.store.changes();
    let mut listening = true;
    let every = (owner.lease_time / 3).max(Duration::from_millis(5));
    let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut outcome = std::pin::pin!(outcome);
    let mut ended = false;
    loop {
        tokio::select! {
            exit = &mut outcome => {
                if !ended {
                    owner.finish(terminal(exit)).await;
                }
                return;
            }
            _ = beat.tick(), if !ended => {
                if let Err(e) = owner.heartbeat().await {
                    if e.ends_ownership() {
                        ended = true;
                        token.cancel();
                    } else {
                        tracing::warn!(task = %owner.id, code = %e.code, error = %e.message, "a task's heartbeat failed");
                    }
                }
            }
            change = changes.recv(), if listening && !ended => match change {
                Ok(change) if change.id == owner.id && change.status.is_terminal() => {
                    ended = true;
                    token.cancel();
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => listening = false,
            },
        }
    }
}

/// The task's end for the call's outcome (see [`super::outcome`]).
fn terminal(exit: Result<CallToolResult, TaskExit>) -> Terminal {
    match exit {
        Ok(result) => Terminal::Completed(serde_json::to_value(&result).unwrap_or_else(|_| json!({}))),
        Err(TaskExit::Error(error)) => Terminal::Failed(serde_json::to_value(&error).unwrap_or_else(|_| json!({}))),
        Err(TaskExit::Cancelled) => Terminal::Failed(
            json!({"code": -32603, "message": "the task was cancelled", "data": {"code": "cancelled"}}),
        ),
    }
}

/// The task as MCP shows it (see the module's table).
fn detailed(task: &Task) -> DetailedTask {
    let status = match task.status {
        TaskStatus::Working => rmcp::model::TaskStatus::Working,
        TaskStatus::InputRequired => rmcp::model::TaskStatus::InputRequired,
        TaskStatus::Completed => rmcp::model::TaskStatus::Completed,
        TaskStatus::Cancelled => rmcp::model::TaskStatus::Cancelled,
        _ => rmcp::model::TaskStatus::Failed,
    };
    let mut base = rmcp::model::Task::new(&task.id, status, rfc3339(task.created_ms), rfc3339(task.updated_ms))
        .with_ttl_ms(task.keep_for_ms)
        .with_poll_interval_ms(task.poll_interval_ms);
    if let Some(message) = &task.message {
        base = base.with_status_message(message);
    }
    let object = |v: &Option<Value>| match v {
        Some(Value::Object(o)) => o.clone(),
        _ => JsonObject::new(),
    };
    let payload = match task.status {
        TaskStatus::Working => TaskPayload::Working,
        TaskStatus::InputRequired => {
            let input_requests: InputRequests =
                task.input_request.clone().and_then(|r| serde_json::from_value(r).ok()).unwrap_or_default();
            TaskPayload::InputRequired { input_requests }
        }
        TaskStatus::Completed => TaskPayload::Completed { result: object(&task.result) },
        TaskStatus::Failed => TaskPayload::Failed { error: object(&task.error) },
        TaskStatus::Cancelled => TaskPayload::Cancelled,
        _ => TaskPayload::Failed { error: lost(&task.id) },
    };
    DetailedTask::new(base, payload)
}

/// The error of a task its replica lost.
fn lost(id: &str) -> JsonObject {
    let error = ErrorData::internal_error(LOST_MESSAGE, Some(json!({"code": "task_lost", "task_id": id})));
    match serde_json::to_value(error) {
        Ok(Value::Object(o)) => o,
        _ => JsonObject::new(),
    }
}

fn rfc3339(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A new task's id: 128 random bits, hex.
fn task_id() -> Result<String, ErrorData> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|_| ErrorData::internal_error("no random task id", None))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `asker` may see a task of `owner`: a task with an owner is that owner's alone; one without is anyone's
/// who holds its id.
pub(crate) fn may_see(owner: Option<&str>, asker: Option<&str>) -> bool {
    match (owner, asker) {
        (None, _) => true,
        (Some(owner), Some(asker)) => owner == asker,
        (Some(_), None) => false,
    }
}

pub(crate) fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown task: {id}"), None)
}

fn unavailable(e: &Failure) -> ErrorData {
    ErrorData::internal_error("the task store failed", Some(json!({"code": "state_unavailable", "store_code": e.code})))
}

/// A store's refusal of a request about the task `id`.
fn refused(id: &str, e: &Failure) -> ErrorData {
    match &*e.code {
        "unknown_task" | "invalid_key" => unknown(id),
        _ => {
            tracing::warn!(task = %id, code = %e.code, error = %e.message, "a task request failed in its store");
            unavailable(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(status: TaskStatus) -> Task {
        Task {
            id: "t-1".into(),
            tool: "slow".into(),
            tenant: None,
            principal: None,
            status,
            message: None,
            version: 1,
            created_ms: 1_700_000_000_123,
            updated_ms: 1_700_000_001_000,
            keep_for_ms: 60_000,
            poll_interval_ms: 500,
            result: None,
            error: None,
            input_request: None,
        }
    }

    #[test]
    fn a_principals_task_is_unknown_to_every_other_asker() {
        assert!(may_see(Some("alice"), Some("alice")));
        assert!(!may_see(Some("alice"), Some("bob")));
        assert!(!may_see(Some("alice"), None), "an asker without a principal sees no principal's task");
        assert!(may_see(None, None) && may_see(None, Some("bob")), "a task without an owner is its id's holder's");
    }

    #[test]
    fn a_lost_task_reads_failed_with_its_code() {
        let mut t = task(TaskStatus::Lost);
        t.message = Some(LOST_MESSAGE.into());
        let shown = serde_json::to_value(detailed(&t)).unwrap();
        assert_eq!(shown["status"], "failed");
        assert_eq!(shown["error"]["code"], -32603);
        assert_eq!(shown["error"]["data"]["code"], "task_lost");
        assert_eq!(shown["statusMessage"], LOST_MESSAGE);
        assert_eq!(shown["createdAt"], "2023-11-14T22:13:20.123Z");
        assert_eq!(shown["ttlMs"], 60_000);
        assert_eq!(shown["pollIntervalMs"], 500);
    }

    #[test]
    fn each_status_keeps_its_payload() {
        let mut t = task(TaskStatus::Completed);
        t.result = Some(json!({"content": [], "isError": false}));
        assert_eq!(serde_json::to_value(detailed(&t)).unwrap()["result"]["isError"], false);
        let mut t = task(TaskStatus::InputRequired);
        t.input_request = Some(json!({"k": {"method": "elicitation/create", "params": {"mode": "form",
            "message": "name?", "requestedSchema": {"type": "object", "properties": {}}}}}));
        let shown = serde_json::to_value(detailed(&t)).unwrap();
        assert_eq!(shown["status"], "input_required");
        assert_eq!(shown["inputRequests"]["k"]["method"], "elicitation/create");
        assert_eq!(serde_json::to_value(detailed(&task(TaskStatus::Cancelled))).unwrap()["status"], "cancelled");
    }

    #[test]
    fn ends_record_the_outcome() {
        assert!(matches!(terminal(Ok(CallToolResult::success(vec![]))), Terminal::Completed(_)));
        let failed = terminal(Err(TaskExit::Error(ErrorData::internal_error("x", Some(json!({"code": "timeout"}))))));
        assert_eq!(failed.value()["data"]["code"], "timeout");
    }
}
