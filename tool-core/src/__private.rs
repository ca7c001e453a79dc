//! Support for the code `#[tool]` generates. Not public API: names here may change in any release.

pub use ::core;
pub use ::inventory;
pub use ::schemars;
pub use ::serde;
pub use ::serde_json;
pub use ::std::borrow::Cow;
pub use ::std::boxed::Box;
pub use ::std::sync::OnceLock;
pub use ::std::vec::Vec;

pub use crate::call_context::{Args, CallContext, FromCallContext, Requirements};
pub use crate::effect::Effect;
pub use crate::error::ToolError;
pub use crate::params::{ArgSchema, Kind, ParamInfo, Plan};
pub use crate::tool_definition::{BoxFuture, Handler, SourceLocation, StaticTool, TaskStart, TaskSupport};
pub use keel_tools_schema::Limits;

use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What the whole arguments (`Args<T>`) need. A bound of its own so the compiler's message says what to derive.
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

/// The result schema of a tool.
pub fn output_schema_for<T: ToolOutput>() -> Value {
    schema_for::<T>()
}

/// The JSON Schema 2020-12 of `T`, as schemars generates it, minus what only Rust knows: the root `title` schemars
/// makes up from the type's name (`SearchArgs`, `Map_of_uint64`, the generated `__KeelArgs`) is left out, and
/// rustdoc's intra-doc links in descriptions and titles become plain text (``Arguments of [`search`].`` reads
/// ``Arguments of `search`.``). A title the user wrote (`#[schemars(title = "...")]`, or a doc comment that starts
/// with a `# Heading`) is kept, even when it is the type's name.
pub fn schema_for<T: schemars::JsonSchema>() -> Value {
    let mut schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<Untitled<T>>()
        .to_value();
    if let Value::Object(map) = &mut schema
        && map.get("title").and_then(Value::as_str) == Some(GENERATED_TITLE)
    {
        map.shift_remove("title");
    }
    crate::tool_schemas::plain_schema(&mut schema);
    schema
}

/// The name [`Untitled`] gives its type. schemars uses a root type's name only as the root `title` it adds when
/// the schema has none (definitions never get one), so a root titled this has no title of the user's.
const GENERATED_TITLE: &str = "\u{0}keel: the title schemars makes up";

/// `T`, under a name no user writes: the same schema and identity (so a recursive root still refers to itself as
/// `#`), and a root `title` that says it was made up.
struct Untitled<T>(PhantomData<fn() -> T>);

impl<T: schemars::JsonSchema> schemars::JsonSchema for Untitled<T> {
    fn inline_schema() -> bool {
        T::inline_schema()
    }
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed(GENERATED_TITLE)
    }
    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
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

/// The limits a handler's result is serialised within: the executor's output limits.
pub fn output_limits(ctx: &CallContext) -> Limits {
    ctx.output_limits()
}

/// Serializes a return value within `limits`, stopping as soon as it is certainly beyond them
/// (`invalid_tool_output`, and the result is never built whole). What it returns is within `limits`: a value the
/// serializer's counts cannot vouch for is checked exactly here, so the executor does not check it again
/// (`ToolDefinition::output_within_limits`).
pub fn output<T: Serialize>(value: T, limits: Limits) -> Result<Value, ToolError> {
    match keel_tools_schema::bounded::to_value_within(&value, &limits) {
        Ok((v, keel_tools_schema::bounded::Within::Certainly)) => Ok(v),
        Ok((v, keel_tools_schema::bounded::Within::Unsure)) => {
            match keel_tools_schema::validate::check_limits(&v, &limits) {
                Ok(()) => Ok(v),
                Err(violation) => Err(ToolError::output_limit(violation.expected)),
            }
        }
        Err(keel_tools_schema::bounded::OutputError::Exceeded(what)) => Err(ToolError::output_limit(what)),
        Err(keel_tools_schema::bounded::OutputError::Serde(e)) => Err(ToolError::internal(e)),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Parameter roles. Each parameter's role is found from its type's traits, never from how the type is spelled:
// `(&&&Slot::<T>::NEW).role()` resolves, by autoref, to the first of these that applies:
//   1. `T: FromCallContext`           -> `Injected<T>`: filled from the call;
//   2. `T` is `Args<U>`               -> `Whole<U>`: the whole of the arguments;
//   3. anything else                  -> `Named<T>`: one named argument (whose bounds are then required).
// Tool fns are never generic, so `T` is always concrete where this resolves.
// ---------------------------------------------------------------------------------------------------------------

/// A parameter's type, as a value to resolve its role on.
pub struct Slot<T>(PhantomData<fn() -> T>);

impl<T> Slot<T> {
    /// The slot of `T`.
    pub const NEW: Slot<T> = Slot(PhantomData);
}

/// The role of an injected parameter.
pub struct Injected<T>(PhantomData<fn() -> T>);
/// The role of the whole-arguments parameter `Args<T>`.
pub struct Whole<T>(PhantomData<fn() -> T>);
/// The role of a named argument.
pub struct Named<T>(PhantomData<fn() -> T>);

impl<T> Named<T> {
    /// The role of a named argument.
    pub const NEW: Named<T> = Named(PhantomData);
}

/// Role 1: an extractor.
pub trait ViaExtractor<T> {
    /// The role.
    fn role(&self) -> Injected<T>;
}
impl<T: FromCallContext> ViaExtractor<T> for &&Slot<T> {
    fn role(&self) -> Injected<T> {
        Injected(PhantomData)
    }
}

/// Role 2: `Args<T>`.
pub trait ViaWholeArgs<T> {
    /// The role.
    fn role(&self) -> Whole<T>;
}
impl<T> ViaWholeArgs<T> for &Slot<Args<T>> {
    fn role(&self) -> Whole<T> {
        Whole(PhantomData)
    }
}

/// Role 3: a named argument.
pub trait ViaNamed<T> {
    /// The role.
    fn role(&self) -> Named<T>;
}
impl<T> ViaNamed<T> for Slot<T> {
    fn role(&self) -> Named<T> {
        Named(PhantomData)
    }
}

/// What a named argument's type needs.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is neither a tool argument nor an injected parameter",
    label = "a tool argument must implement `Deserialize` and `JsonSchema`",
    note = "derive both for an argument: `#[derive(serde::Deserialize, schemars::JsonSchema)]`; a parameter filled \
            from the call implements `FromCallContext` instead (as `CallContext` and `State<T>` do), and takes no \
            `#[arg]`"
)]
pub trait ToolArgField: DeserializeOwned + schemars::JsonSchema {}
impl<T: DeserializeOwned + schemars::JsonSchema> ToolArgField for T {}

fn no_requirements(_: &mut Requirements) {}

fn property_schema<T: schemars::JsonSchema>(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    generator.subschema_for::<T>()
}

fn is_option<T: schemars::JsonSchema>() -> bool {
    T::_schemars_private_is_option()
}

fn arg_schema<T: schemars::JsonSchema>() -> ArgSchema {
    ArgSchema { property: property_schema::<T>, root: schema_for::<T>, is_option: is_option::<T> }
}

/// What `#[tool]` writes of one parameter: its name and its `#[arg(...)]`.
#[derive(Clone, Copy)]
pub struct ParamAttr {
    /// The parameter's name.
    pub name: &'static str,
    /// `#[arg(description = "...")]`.
    pub description: Option<&'static str>,
    /// `#[arg(header = "...")]`.
    pub header: Option<&'static str>,
    /// Whether `#[arg]` was written.
    pub explicit: bool,
}

impl ParamAttr {
    fn info(self, kind: Kind, schema: Option<ArgSchema>, requirements: fn(&mut Requirements)) -> ParamInfo {
        let ParamAttr { name, description, header, explicit } = self;
        ParamInfo { name, description, header, kind, explicit, schema, requirements }
    }
}

impl<T: FromCallContext> Injected<T> {
    /// What the registry knows of this parameter.
    pub fn info(&self, attr: ParamAttr) -> ParamInfo {
        attr.info(Kind::Injected, None, T::requirements)
    }
    /// Fills the parameter from the call. A failure ends the call before the handler runs.
    pub fn extract(&self, _: &mut Input, _: &str, ctx: &CallContext) -> Result<T, ToolError> {
        T::from_call_context(ctx).map_err(ToolError::before_handler)
    }
}

// The bounds are on the methods, not the impls, so that a type missing one is reported with the trait's own
// message (`on_unimplemented`), at the parameter.
impl<T> Whole<T> {
    /// What the registry knows of this parameter.
    pub fn info(&self, attr: ParamAttr) -> ParamInfo
    where
        T: ToolArgs,
    {
        attr.info(Kind::Whole, Some(arg_schema::<T>()), no_requirements)
    }

    /// The whole of the arguments.
    pub fn extract(&self, input: &mut Input, _: &str, _: &CallContext) -> Result<Args<T>, ToolError>
    where
        T: DeserializeOwned,
    {
        parse_args(input.whole.take().unwrap_or(Value::Null)).map(Args)
    }
}

impl<T> Named<T> {
    /// What the registry knows of this parameter.
    pub fn info(&self, attr: ParamAttr) -> ParamInfo
    where
        T: ToolArgField,
    {
        attr.info(Kind::Named, Some(arg_schema::<T>()), no_requirements)
    }

    /// The argument: the whole of the arguments when it is the args struct, else its property.
    #[inline]
    pub fn extract(&self, input: &mut Input, name: &str, _: &CallContext) -> Result<T, ToolError>
    where
        T: DeserializeOwned,
    {
        match input.whole.take() {
            Some(whole) => parse_args(whole),
            // A property the model left out reads as `null`: `None` for an `Option`, a mismatch otherwise (the
            // schema requires every other property, so validation has already refused such a call).
            None => parse_args(input.fields.as_mut().and_then(|f| f.shift_remove(name)).unwrap_or(Value::Null)),
        }
    }
}

/// The argument schema of a tool under its plan.
pub fn input_schema<A: schemars::JsonSchema>(params: &[ParamInfo], plan: &Plan) -> Value {
    match plan {
        Plan::Whole(i) => params[*i].schema.map_or_else(empty_object_schema, |s| (s.root)()),
        Plan::Gathered => schema_for::<A>(),
        Plan::Empty | Plan::Invalid(_) => empty_object_schema(),
    }
}

/// The schema of the generated args object: one property per named argument, in declaration order, exactly as
/// `#[derive(JsonSchema)]` with `#[serde(deny_unknown_fields)]` writes a struct of those fields.
pub fn gathered_schema(generator: &mut schemars::SchemaGenerator, params: &[ParamInfo]) -> schemars::Schema {
    let mut schema = schemars::json_schema!({"type": "object", "additionalProperties": false});
    for p in params.iter().filter(|p| p.kind == Kind::Named) {
        let Some(arg) = p.schema else { continue };
        let mut property = (arg.property)(generator);
        if let Some(description) = p.description {
            let (title, description) = schemars::_private::get_title_and_description(description);
            schemars::_private::insert_metadata_property_if_nonempty(&mut property, "title", title);
            schemars::_private::insert_metadata_property_if_nonempty(&mut property, "description", description);
        }
        if let Some(header) = p.header {
            property.insert(keel_tools_schema::vocabulary::MCP_HEADER.to_owned(), Value::String(header.to_owned()));
        }
        let optional = generator.contract().is_deserialize() && (arg.is_option)();
        schemars::_private::insert_object_property(&mut schema, p.name, optional, property);
    }
    schema
}

/// A call's arguments on their way to the parameters.
pub struct Input {
    whole: Option<Value>,
    /// The named arguments not yet taken (none is made for a plan without named arguments: an empty map costs a
    /// hasher's keys).
    fields: Option<serde_json::Map<String, Value>>,
}

impl Input {
    /// Splits the validated arguments as the plan says.
    #[inline(always)]
    pub fn new(value: Value, plan: &Plan) -> Result<Input, ToolError> {
        match plan {
            Plan::Whole(_) => Ok(Input { whole: Some(value), fields: None }),
            Plan::Empty => Ok(Input { whole: None, fields: None }),
            Plan::Gathered => match value {
                Value::Object(fields) => Ok(Input { whole: None, fields: Some(fields) }),
                _ => Err(not_an_object()),
            },
            Plan::Invalid(problem) => Err(invalid_plan(problem)),
        }
    }

    /// Refuses properties that no parameter took (the schema refuses them first).
    #[inline(always)]
    pub fn finish(self) -> Result<(), ToolError> {
        match self.fields.as_ref().and_then(|f| f.keys().next()) {
            Some(key) => Err(unknown_argument(key)),
            None => Ok(()),
        }
    }
}

#[cold]
fn not_an_object() -> ToolError {
    ToolError::arguments_mismatch("the arguments are not an object")
}

#[cold]
fn invalid_plan(problem: &str) -> ToolError {
    ToolError::before_handler(ToolError::internal(problem.to_owned()))
}

#[cold]
fn unknown_argument(key: &str) -> ToolError {
    ToolError::arguments_mismatch(format_args!("unknown argument `{key}`"))
}

// ---------------------------------------------------------------------------------------------------------------
// Handler errors. `(&&&ErrorSlot::new(e)).take_tool_error()` resolves, by autoref, to the first that applies:
//   1. `E: Into<ToolError>`: `ToolError` itself, any `std::error::Error` (an internal error), the user's own `From`;
//   2. `E: Into<Box<dyn Error + Send + Sync>>`: `Box<dyn Error + Send + Sync>`, `anyhow::Error`, `String`;
//   3. anything else: `Unsupported<E>`, which `error_of` refuses with a message saying what to do.
// ---------------------------------------------------------------------------------------------------------------

/// A handler's error, held to resolve its conversion on.
pub struct ErrorSlot<E>(std::cell::Cell<Option<E>>);

impl<E> ErrorSlot<E> {
    /// Holds `e`.
    pub fn new(e: E) -> ErrorSlot<E> {
        ErrorSlot(std::cell::Cell::new(Some(e)))
    }
}

/// An error type that converts into neither `ToolError` nor a boxed error.
pub struct Unsupported<E>(PhantomData<E>);

/// Conversion 1.
pub trait ViaToolError {
    /// The converted error.
    fn take_tool_error(&self) -> ToolError;
}
impl<E: Into<ToolError>> ViaToolError for &&ErrorSlot<E> {
    fn take_tool_error(&self) -> ToolError {
        match self.0.take() {
            Some(e) => e.into(),
            None => ToolError::internal("a handler error was converted twice"),
        }
    }
}

/// Conversion 2.
pub trait ViaBoxedError {
    /// The converted error.
    fn take_tool_error(&self) -> ToolError;
}
impl<E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>> ViaBoxedError for &ErrorSlot<E> {
    fn take_tool_error(&self) -> ToolError {
        match self.0.take() {
            Some(e) => ToolError::internal(e),
            None => ToolError::internal("a handler error was converted twice"),
        }
    }
}

/// Conversion 3: none.
pub trait ViaUnsupported<E> {
    /// Not a conversion: `error_of` refuses it.
    fn take_tool_error(&self) -> Unsupported<E>;
}
impl<E> ViaUnsupported<E> for ErrorSlot<E> {
    fn take_tool_error(&self) -> Unsupported<E> {
        Unsupported(PhantomData)
    }
}

/// The result of a handler error's conversion.
#[diagnostic::on_unimplemented(
    message = "the error type of this #[tool] cannot become a `ToolError`",
    label = "the error type of this tool",
    note = "return `tool_error!(code, message)` for errors the model should see; any `std::error::Error + Send + \
            Sync + 'static`, `Box<dyn Error + Send + Sync>` or `anyhow::Error` becomes an internal error; or implement \
            `From<YourError> for ToolError`"
)]
pub trait ConvertedError {
    /// The `ToolError`.
    fn tool_error(self) -> ToolError;
}
impl ConvertedError for ToolError {
    fn tool_error(self) -> ToolError {
        self
    }
}

/// The converted error of a handler.
pub fn error_of<C: ConvertedError>(converted: C) -> ToolError {
    converted.tool_error()
}

// ---------------------------------------------------------------------------------------------------------------
// Checks that only type-check: the macro emits a call for a parameter bound to a pattern or named `_x`; it
// compiles only when the parameter's role is not a named argument.
// ---------------------------------------------------------------------------------------------------------------

/// A role that needs no name of its own.
#[diagnostic::on_unimplemented(
    message = "a tool argument needs a plain name: it is the argument's name in the schema",
    label = "a pattern, where a named argument needs a name",
    note = "bind it to a name (`incident_id: String`), or take the whole arguments as `Args(pattern): Args<T>`; \
            patterns are fine on injected parameters, e.g. `State(db): State<Db>`"
)]
pub trait Unnamed {}
impl<T> Unnamed for Injected<T> {}
impl<T> Unnamed for Whole<T> {}

/// A role whose name is never shown to the model.
#[diagnostic::on_unimplemented(
    message = "the parameter's name is the argument's name the model sees; rename it without the leading `_`",
    label = "a named argument"
)]
pub trait Unshown {}
impl<T> Unshown for Injected<T> {}
impl<T> Unshown for Whole<T> {}

/// The role `#[arg]` applies to.
#[diagnostic::on_unimplemented(
    message = "#[arg] applies to named arguments only",
    label = "this parameter is filled from the call (its type implements `FromCallContext`) or takes the whole \
             arguments (`Args<T>`)",
    note = "remove the #[arg] attribute from this parameter"
)]
pub trait ArgTarget {}
impl<T> ArgTarget for Named<T> {}

/// Compiles only for a named argument.
pub fn arg_attribute<R: ArgTarget>(_: R) {}

/// Compiles only for a parameter that is not a named argument.
pub fn pattern_parameter<R: Unnamed>(_: R) {}

/// Compiles only for a parameter that is not a named argument.
pub fn underscore_parameter<R: Unshown>(_: R) {}

#[cfg(test)]
mod tests {
    // Only the types' schemas are used.
    #![allow(dead_code)]

    use std::collections::HashMap;

    use schemars::JsonSchema;
    use serde_json::json;

    use super::*;

    /// Which incidents to search, as [`Query`] says.
    #[derive(JsonSchema)]
    struct SearchArgs {
        /// Where, e.g. [`Place::Office`](crate::definition::Effect).
        place: Place,
    }

    /// Where to look.
    #[derive(JsonSchema)]
    enum Place {
        /// The [`Office`][o].
        ///
        /// [o]: crate::definition::Effect
        Office,
        /// At home.
        Home,
    }

    /// What to look for.
    #[derive(JsonSchema)]
    #[schemars(title = "Query")]
    struct Query {
        text: String,
    }

    /// # Filter
    ///
    /// Which incidents to keep.
    #[derive(JsonSchema)]
    struct Filter {
        open: bool,
    }

    /// A tree.
    #[derive(JsonSchema)]
    struct Node {
        children: Vec<Node>,
    }

    #[test]
    fn generated_titles_are_left_out_and_written_ones_kept() {
        for schema in [schema_for::<SearchArgs>(), schema_for::<HashMap<String, u64>>(), schema_for::<Vec<Node>>()] {
            assert!(schema.get("title").is_none(), "{schema}");
        }
        // Definitions never get a made-up title.
        let search = schema_for::<SearchArgs>();
        assert!(search["$defs"]["Place"].get("title").is_none(), "{search}");
        // Titles the user wrote stay, even when they are the type's name.
        assert_eq!(schema_for::<Query>()["title"], "Query");
        assert_eq!(schema_for::<Filter>()["title"], "Filter");
        assert_eq!(schema_for::<Filter>()["description"], "Which incidents to keep.");
        // A recursive root still refers to itself.
        assert_eq!(schema_for::<Node>()["properties"]["children"]["items"], json!({"$ref": "#"}));
        assert_eq!(schema_for::<Node>()["$schema"], "https://json-schema.org/draft/2020-12/schema");
    }

    #[test]
    fn descriptions_are_plain_text() {
        let s = schema_for::<SearchArgs>();
        assert_eq!(s["description"], "Which incidents to search, as `Query` says.");
        assert_eq!(s["properties"]["place"]["description"], "Where, e.g. `Place::Office`.");
        assert_eq!(s["$defs"]["Place"]["oneOf"][0]["description"], "The `Office`.");
        assert_eq!(s["$defs"]["Place"]["oneOf"][1]["description"], "At home.");
    }
}
