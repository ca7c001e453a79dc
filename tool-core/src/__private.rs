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
pub fn output_result<T: Serialize, E: Into<ToolError>>(result: Result<T, E>) -> Result<Value, ToolError> {
    match result {
        Ok(v) => output(v),
        Err(e) => Err(e.into()),
    }
}

/// Extracts an injected parameter.
pub fn inject<T: FromCallContext>(ctx: &CallContext) -> Result<T, ToolError> {
    T::from_call_context(ctx)
}
