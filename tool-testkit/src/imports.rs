//! The one place this crate names keel-tools-core's, keel-tools-agent's and keel-tools-schema's items: when a path
//! moves, only this file changes.

pub(crate) use keel_tools_agent::{
    AssistantMessage, BoxFuture, ChatModel, Message, Mode, ModelError, SeenTurn, Turn, WireFormat,
};
pub(crate) use keel_tools_core::definition::ToolDefinition;
pub(crate) use keel_tools_core::executor::{CallOptions, ExecutorBuilder, ExecutorError};
pub(crate) use keel_tools_core::policy::{PolicyDecision, PolicyRequest};
pub(crate) use keel_tools_core::{Executor, Provider, Registry, ToolCall, ToolResult, ToolView};
pub(crate) use keel_tools_schema::{CompiledSchema, Limits, vocabulary};
