//! keel declares LLM tools at compile time.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

// Lets `::tool_core::...` paths in generated code resolve inside this crate's own tests and examples too.
extern crate self as tool_core;

pub mod call;
pub mod canonical;
pub mod context;
pub mod definition;
pub mod error;
pub mod registry;
pub mod result;
pub mod schema;
pub mod validate;
pub mod view;

#[doc(hidden)]
pub mod __private;

/// The tool-name grammar: validation and the provider wire-name mapping.
pub mod name {
    pub use tool_names::{MAX_NAME_LEN, NameError, from_wire, is_valid_version, parse_version, to_wire, validate};
}

pub use context::{CallContext, FromCallContext, LogLevel, Notifier, State, StateMap};
pub use definition::{DynHandler, Effect, Handler, Origin, SourceLocation, ToolDefinition, ToolDefinitionBuilder};
pub use error::ToolError;
pub use registry::{Registry, RegistryBuilder, RegistryError};
pub use schema::{Provider, ToolSchemas};
pub use view::{ToolDescriptions, ToolView, ViewBuilder};

#[cfg(feature = "macros")]
pub use tool_macros::tool;
