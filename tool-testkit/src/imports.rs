//! The one place this crate names keel-tools-core's and keel-tools-agent's items: when a path moves, only this file changes.

pub(crate) use keel_tools_agent::{
    AssistantMessage, BoxFuture, ChatModel, Message, Mode, ModelError, SeenTurn, Turn, WireFormat,
};
pub(crate) use keel_tools_core::definition::ToolDefinition;
pub(crate) use keel_tools_core::executor::{CallOptions, ExecutorBuilder, ExecutorError};
pub(crate) use keel_tools_core::policy::{PolicyDecision, PolicyRequest};
pub(crate) use keel_tools_core::schema::{CompiledSchema, Limits, vocabulary};
pub(crate) use keel_tools_core::{Executor, Provider, Registry, ToolCall, ToolResult, ToolView};
