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
pub mod event;
pub mod executor;
pub mod policy;
pub mod registry;
pub mod run;
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
pub use call::ToolCall;
pub use error::ToolError;
pub use executor::{CallOptions, Executor, ExecutorBuilder, ExecutorError};
pub use policy::{Approval, Approvals, EffectPolicy, Policy, PolicyDecision};
pub use result::{ErrorBody, ToolResult};
pub use run::{Decision, Run};
pub use registry::{Registry, RegistryBuilder, RegistryError};
pub use schema::{Provider, ToolSchemas};
pub use view::{ToolDescriptions, ToolView, ViewBuilder};

#[cfg(feature = "macros")]
pub use tool_macros::tool;

/// Makes sure the tools of library crates are collected into this binary's registry.
///
/// `#[tool]` registers through `inventory`, which sees only crates that the final binary actually links. A crate
/// listed in `Cargo.toml` but never named in code is not linked, so its tools silently do not appear. Name each
/// tool crate once, anywhere in the binary (typically next to `main`):
///
/// ```ignore
/// tool_core::link_tools!(incident_tools, billing_tools);
/// ```
///
/// This expands to `use incident_tools as _;` for each crate, which is enough for the linker to keep their
/// registrations. To catch a forgotten crate in CI, assert on the expected names after building the registry.
#[macro_export]
macro_rules! link_tools {
    ($($krate:ident),+ $(,)?) => {
        $(
            #[allow(unused_imports)]
            use $krate as _;
        )+
    };
}
