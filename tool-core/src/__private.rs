//! Support for the code `#[tool]` generates. Not public API: names here may change in any release.

pub use ::core;
pub use ::inventory;
pub use ::schemars;
pub use ::serde;
pub use ::serde_json;
pub use ::std::boxed::Box;

pub use crate::context::{CallContext, FromCallContext};
pub use crate::definition::{BoxFuture, Effect, Handler, SourceLocation, StaticTool};
pub use crate::error::ToolError;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What an args struct needs. A bound of its own so the compiler's message says what to derive. Only the schema
/// functions carry these bounds (the conversion functions need just the serde half), so a missing `JsonSchema` is
/// reported once.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the arguments of a #[tool]: it must implement `Deserialize` and `JsonSchema`",
    label = "the arguments type of this tool",
    note = "derive both on it: `#[derive(serde::Deserialize, schemars::JsonSchema)]`"
)]
pub trait ToolArgs: DeserializeOwned + schemars::JsonSchema {}
impl<T: DeserializeOwned + schemars::JsonSchema> ToolArgs for T {}

/// What a result type needs.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the result of a #[tool]: it must implement `Serialize` and `JsonSchema`",
    label = "the result type of this tool",
    note = "derive both on it: `#[derive(serde::Serialize, schemars::JsonSchema)]`"
)]
pub trait ToolOutput: Serialize + schemars::JsonSchema {}
impl<T: Serialize + schemars::JsonSchema> ToolOutput for T {}

/// The argument schema of an args struct.
pub fn args_schema_for<T: ToolArgs>() -> Value {
    schema_for::<T>()
}

/// The result schema of a tool.
pub fn output_schema_for<T: ToolOutput>() -> Value {
    schema_for::<T>()
}

/// The JSON Schema 2020-12 of `T`, as schemars generates it.
pub fn schema_for<T: schemars::JsonSchema>() -> Value {
    schemars::generate::SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<T>().to_value()
}

/// The schema of a tool without parameters: an object with no properties.
pub fn empty_object_schema() -> Value {
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {},
        "additionalProperties": false
    })
}

/// Deserializes validated arguments. A failure here means the schema and the serde shape disagree; the executor
/// reports it as `invalid_arguments` without the serde text.
pub fn parse_args<T: DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(ToolError::arguments_mismatch)
}

/// Serializes a plain return value.
pub fn output<T: Serialize>(value: T) -> Result<Value, ToolError> {
    serde_json::to_value(value).map_err(ToolError::internal)
}

/// Serializes a `Result` return value; the error converts into [`ToolError`].
pub fn output_result<T: Serialize, E: IntoToolError>(result: Result<T, E>) -> Result<Value, ToolError> {
    match result {
        Ok(v) => output(v),
        Err(e) => Err(e.into_tool_error()),
    }
}

/// Extracts an injected parameter.
pub fn inject<T: FromCallContext>(ctx: &CallContext) -> Result<T, ToolError> {
    T::from_call_context(ctx)
}

/// What a handler's error type needs.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the error of a #[tool]: it must convert into `ToolError`",
    label = "the error type of this tool",
    note = "implement `std::error::Error` for it (it then becomes an internal error), implement \
            `From<{Self}> for ToolError`, or return `ToolError::new(code, message)` for errors the model should see"
)]
pub trait IntoToolError {
    /// Converts the error.
    fn into_tool_error(self) -> ToolError;
}

impl<E: Into<ToolError>> IntoToolError for E {
    fn into_tool_error(self) -> ToolError {
        self.into()
    }
}
