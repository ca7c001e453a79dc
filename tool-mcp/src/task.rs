//! Calls that run as tasks (the MCP Tasks extension, SEP-2663): `tools/call` answers with a task at once, the call
//! runs on, and the client polls `tasks/get`, answers the task's input requests with `tasks/update`, or stops it
//! with `tasks/cancel`.
//!
//! The executor's fixed order holds: the call starts as any other, and becomes a task only once it has passed every
//! check before its handler (registered, arguments valid, policy:
//! [`CallOptions::on_admitted`](keel_tools_core::executor::CallOptions::on_admitted)), or, for a tool declared
//! `task_start = "handler"`, when its handler calls
//! [`CallContext::begin_task`](keel_tools_core::CallContext::begin_task) (input asked for before that is asked in the
//! request itself). A call refused before its handler, or that ends before it becomes a task, is answered in the
//! request. The task's result is the call's result, output validation included:
//!
//! | the call's outcome | the task |
//! |---|---|
//! | success, or a business error of the tool | `completed`, with the `CallToolResult` (`isError: true` for the error) |
//! | `tool_internal_error`, `invalid_tool_output`, `timeout`, `cancelled` (no result the tool stands by) | `failed`, with a JSON-RPC error `-32603` carrying keel's code and the call id, never internals |
//! | `tasks/cancel` | `cancelled`; the call's cancellation token fires |
//!
//! A call that may become a task holds one of the server's task slots
//! ([`McpServerBuilder::max_tasks`](crate::server::McpServerBuilder::max_tasks)) from before it starts until it
//! ends; one that finds none free is refused at once, before any check or handler of it runs.

#![allow(deprecated)] // Sampling and roots are deprecated by SEP-2577 from 2026-07-28 on, and still served.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use keel_tools_core::context::{ClientInput, InputError, InputFuture, InputKind, InputRequest};
use keel_tools_core::results::ErrorCode;
use keel_tools_core::{Codec, ToolResult};
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ClientCapabilities, InputRequest as McpInputRequest};
use rmcp::task_manager::{TaskContext, TaskExit};
use serde_json::Value;
use tokio::sync::{oneshot, watch};

use crate::input::supports;

pub(crate) mod stored;

/// Where a call's task is kept once it becomes one: this process's task manager, or a task store every replica
/// shares.
#[derive(Clone)]
pub(crate) enum Bound {
    Local(TaskContext),
    Stored(Arc<stored::Owner>),
}

/// The requests of a call that may become a task: before it does, through the request's own way (a session's
/// requests, or input-required results); after, through `tasks/update`.
pub(crate) struct TaskCallInput {
    direct: Arc<dyn ClientInput>,
    capabilities: ClientCapabilities,
    task: watch::Receiver<Option<Bound>>,
    begun: AtomicBool,
    begin: Mutex<Option<oneshot::Sender<()>>>,
}

/// Fires when the call becomes a task.
pub(crate) type Begun = oneshot::Receiver<()>;

impl TaskCallInput {
    pub(crate) fn new(
        direct: Arc<dyn ClientInput>,
        capabilities: ClientCapabilities,
    ) -> (TaskCallInput, Begun, watch::Sender<Option<Bound>>) {
        let (bind, task) = watch::channel(None);
        let (begin, begun) = oneshot::channel();
        let input =
            TaskCallInput { direct, capabilities, task, begun: AtomicBool::new(false), begin: Mutex::new(Some(begin)) };
        (input, begun, bind)
    }

    async fn in_task(&self, key: String, request: InputRequest) -> Result<Value, InputError> {
        if !supports(&self.capabilities, request.kind()) {
            return Err(InputError::Unsupported(request.kind()));
        }
        let wire = crate::input::wire(&request);
        let request: McpInputRequest = serde_json::from_value(wire.clone())
            .map_err(|e| InputError::Failed(format!("the request is not a valid MCP input request: {e}")))?;
        let mut task = self.task.clone();
        let bound = task
            .wait_for(Option::is_some)
            .await
            .map_err(|_| InputError::Failed("the task is gone".to_owned()))?
            .clone()
            .ok_or_else(|| InputError::Failed("the task is gone".to_owned()))?;
        match bound {
            Bound::Local(context) => context.request_input(key, request).await.map_err(|exit| match exit {
                TaskExit::Cancelled => InputError::Failed("the task was cancelled".to_owned()),
                TaskExit::Error(e) => InputError::Failed(e.message.into_owned()),
            }),
            Bound::Stored(owner) => owner.request_input(key, wire).await,
        }
    }
}

impl ClientInput for TaskCallInput {
    fn supports(&self, kind: InputKind) -> bool {
        supports(&self.capabilities, kind)
    }

    fn request(&self, key: &str, request: InputRequest) -> InputFuture<'_> {
        if self.begun.load(Ordering::Acquire) {
            Box::pin(self.in_task(key.to_owned(), request))
        } else {
            self.direct.request(key, request)
        }
    }

    fn state(&self) -> Option<Value> {
        self.direct.state()
    }

    fn set_state(&self, state: Value) {
        self.direct.set_state(state);
    }

    fn begin_task(&self) -> bool {
        if !self.begun.swap(true, Ordering::AcqRel)
            && let Some(begin) = self.begin.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
        {
            let _ = begin.send(());
        }
        true
    }
}

/// The task's terminal payload for the call's result (see the module's table).
pub(crate) fn outcome(result: &ToolResult, codec: &Codec) -> Result<CallToolResult, TaskExit> {
    match result.error() {
        Some(error)
            if matches!(
                error.code,
                ErrorCode::ToolInternalError | ErrorCode::InvalidToolOutput | ErrorCode::Timeout | ErrorCode::Cancelled
            ) =>
        {
            Err(TaskExit::Error(ErrorData::internal_error(
                error.message.clone(),
                Some(serde_json::json!({"code": error.code.as_str(), "call_id": result.call_id})),
            )))
        }
        _ => Ok(crate::render::call_tool_result(result, codec)),
    }
}
