//! The one place this crate names tool-core's and tool-agent's items: when a path moves, only this file changes.

pub(crate) use tool_agent::{
    AssistantMessage, BoxFuture, ChatModel, Message, Mode, ModelError, SeenTurn, Turn, WireFormat,
};
pub(crate) use tool_core::definition::ToolDefinition;
pub(crate) use tool_core::executor::{CallOptions, ExecutorBuilder, ExecutorError};
pub(crate) use tool_core::policy::{PolicyDecision, PolicyRequest};
pub(crate) use tool_core::schema::{CompiledSchema, Limits};
pub(crate) use tool_core::{Executor, Provider, Registry, ToolCall, ToolResult, ToolView};
