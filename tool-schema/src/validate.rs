//! JSON Schema validation of untrusted tool arguments and tool results.

use std::fmt::{self, Write as _};
use std::sync::Arc;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{Draft, ValidationError, Validator};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod fast;
mod size;

pub use size::{MAX_RECURSIVE_DEPTH, check_limits, check_limits_scan};

/// At most this many violations are reported by [`CompiledSchema::validate`]; a final entry says when there were
/// more.
pub const MAX_VIOLATIONS: usize = 32;

/// Value previews in [`Violation::found`] (and values quoted in [`Violation::expected`]) are cut at this many
/// characters.
pub const PREVIEW_CHARS: usize = 40;

/// Longest pointer kept verbatim; longer pointers have their long segments shortened (see [`Violation::pointer`]).
const MAX_POINTER_BYTES: usize = 256;

/// Most alternatives listed in a "one of: ..." expectation.
const MAX_LISTED_OPTIONS: usize = 20;

/// How deep `anyOf`/`oneOf` explanations descend into their alternatives.
const MAX_ALTERNATIVE_NESTING: usize = 8;

/// One way a value fails its schema (or its [`Limits`](crate::Limits)), phrased for a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// JSON pointer (RFC 6901) into the instance: `""` for the root, `/severity`, `/tags/0`, `/a~1b` for key `a/b`.
    /// For a missing required property it is the pointer the property would have. A pointer longer than 256 bytes
    /// (only possible with absurdly long keys) has each segment longer than 40 characters shortened to 39 characters
    /// and `…`.
    pub pointer: String,
    /// What the schema wants, e.g. `integer`, `one of: "low", "high"`, `at most 64 characters`,
    /// ``no property `force` (not in the schema)``, ``required property `incident_id` ``.
    pub expected: String,
    /// What was found: a value preview cut at 40 characters (`"urgent"`, `1.5`, `null`), a JSON type name (`array`,
    /// `object`), a size (`a string of 70 characters`) or `missing`.
    pub found: String,
}

impl Violation {
    /// A violation from its three parts.
    pub fn new(pointer: impl Into<String>, expected: impl Into<String>, found: impl Into<String>) -> Violation {
        Violation { pointer: pointer.into(), expected: expected.into(), found: found.into() }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            f.write_str("(root)")?;
        } else {
            write_one_line(f, &self.pointer)?;
        }
        f.write_str(": expected ")?;
        write_one_line(f, &self.expected)?;
        f.write_str("; found ")?;
        write_one_line(f, &self.found)
    }
}

/// Writes `s` with control characters escaped, so that a violation always stays on one line.
fn write_one_line(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    if !s.chars().any(char::is_control) {
        return f.write_str(s);
    }
    for c in s.chars() {
        match c {
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if c.is_control() => write!(f, "\\u{{{:04x}}}", u32::from(c))?,
            c => f.write_char(c)?,
        }
    }
    Ok(())
}

/// One line per violation: `/severity: expected one of: "low", "high"; found "urgent"`. The root pointer is shown as
/// `(root)`. Control characters are escaped so each violation stays on its line.
pub fn summary(violations: &[Violation]) -> String {
    let mut out = String::new();
    for (i, v) in violations.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = write!(out, "{v}");
    }
    out
}

// ---------------------------------------------------------------------------------------------------------------
// Compiled schemas
// ---------------------------------------------------------------------------------------------------------------

/// A schema that failed to compile. Developer-facing (a tool's own schema is broken); never sent to a model.
/// The validator's own error, when there is one, is its [`source`](std::error::Error::source). Two errors are
/// equal when their messages are.
#[derive(Debug, Clone)]
pub struct SchemaError {
    message: String,
    source: Option<Arc<ValidationError<'static>>>,
}

impl PartialEq for SchemaError {
    fn eq(&self, other: &SchemaError) -> bool {
        self.message == other.message
    }
}

impl Eq for SchemaError {}

impl SchemaError {
    /// What is wrong with the schema.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid JSON Schema: {}", self.message)
    }
}

impl std::error::Error for SchemaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// JSON Schema validation of untrusted tool arguments and tool results.
///
/// - `check_limits` guards a value *before* it is validated: nesting depth and serialized size, measured with an
///   explicit stack (a value nested 100,000 deep gives a [`Violation`], not a stack overflow). The executor runs it
///   first, because schema validation itself recurses along the value.
/// - [`CompiledSchema`] is a JSON Schema draft 2020-12 validator compiled once per schema. [`CompiledSchema::is_valid`]
///   is the allocation-free fast path; [`CompiledSchema::validate`] explains a failure as a list of [`Violation`]s
///   built from the validator's error *kinds* (never from its `Debug`/`Display` text), so no Rust type name or
///   library wording reaches the model, and no large input is copied into a message (previews are cut at 40
///   characters).
/// - `summary` renders violations one per line for a model-facing error message.
///
/// No coercion happens anywhere: `"42"` is a string, not an integer, as JSON Schema says.
///
/// A JSON Schema (draft 2020-12) compiled once, shared freely (`Send + Sync`, cheap to clone).
///
/// Compilation checks the schema against the draft 2020-12 meta-schema and resolves internal `$ref`s; external
/// references cannot be fetched (no network or file resolution is compiled in) and make compilation fail.
/// `format` is asserted for the formats the validator knows (`date-time`, `date`, `time`, `email`, `uuid`, `uri`,
/// `ipv4`, ...); unknown formats, such as schemars' `uint32` or `double`, are ignored.
#[derive(Clone)]
pub struct CompiledSchema {
    validator: Validator,
    /// The same schema specialised for the plain-struct subset, when it lies inside it (see `fast`): explains
    /// violations without jsonschema's error collection.
    fast: Option<Arc<fast::Fast>>,
    /// The verdict plan of the same form, when every node of it lowers (`fast::Verdict`): the verdict of
    /// [`is_valid`](Self::is_valid) without jsonschema's walk.
    verdict: Option<Arc<fast::Verdict>>,
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CompiledSchema>();
};

impl fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledSchema").finish_non_exhaustive()
    }
}

impl CompiledSchema {
    /// Compiles `schema` as draft 2020-12 (whatever its `$schema` says).
    ///
    /// # Errors
    ///
    /// A [`SchemaError`] when the schema is not a valid draft 2020-12 schema (bad keyword values, invalid
    /// `pattern` regexes, unresolvable `$ref`s). Never panics: a panic inside the schema compiler is caught and
    /// reported as an error too.
    pub fn compile(schema: &Value) -> Result<CompiledSchema, SchemaError> {
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            jsonschema::options()
                .with_draft(Draft::Draft202012)
                .should_validate_formats(true)
                .should_ignore_unknown_formats(true)
                .build(schema)
        }));
        match built {
            Ok(Ok(validator)) => {
                let fast = fast::Fast::compile(schema);
                let verdict = fast.as_ref().and_then(fast::Verdict::lower).map(Arc::new);
                Ok(CompiledSchema { validator, fast: fast.map(Arc::new), verdict })
            }
            Ok(Err(err)) => {
                let mut message = String::new();
                let at = err.instance_path().as_str();
                if !at.is_empty() {
                    let _ = write!(message, "at {}: ", truncate_chars(at, 200));
                }
                message.push_str(&truncate_chars(&err.to_string(), 500));
                Err(SchemaError { message, source: Some(Arc::new(err.to_owned())) })
            }
            Err(_) => {
                Err(SchemaError { message: "the schema compiler panicked on this schema".to_owned(), source: None })
            }
        }
    }

    /// Whether `instance` is valid. The fast path: stops at the first failure and does not allocate.
    #[inline]
    pub fn is_valid(&self, instance: &Value) -> bool {
        // The verdict plan where the schema lowers to one (plain Rust types), jsonschema's walk elsewhere.
        match &self.verdict {
            Some(verdict) => verdict.is_valid(instance),
            None => self.validator.is_valid(instance),
        }
    }

    /// Validates `instance`, explaining every failure (at most `MAX_VIOLATIONS`, then a final entry saying more
    /// were left out).
    ///
    /// Run `check_limits` first on untrusted input: validation recurses along the value.
    ///
    /// # Errors
    ///
    /// The violations, in the validator's order, never empty.
    pub fn validate(&self, instance: &Value) -> Result<(), Vec<Violation>> {
        if self.is_valid(instance) {
            return Ok(());
        }
        Err(self.explain(instance))
    }

    /// The violations of an instance the caller already knows to be invalid ([`is_valid`](Self::is_valid) said
    /// so): [`validate`](Self::validate) without its first, redundant check. Never empty: on a valid instance it
    /// answers with one violation at the root.
    pub fn explain(&self, instance: &Value) -> Vec<Violation> {
        let mut sink = Sink::default();
        // The specialised form answers when it finds a single violation (the common case, and the one whose
        // text and place it always shares with jsonschema); several are listed in jsonschema's order.
        let explained = match &self.fast {
            Some(fast) => fast.explain(instance, &mut sink).is_ok() && sink.out.len() == 1 && !sink.overflowed,
            None => false,
        };
        if !explained {
            sink = self.explain_with_jsonschema(instance);
        }
        let mut out = sink.out;
        if sink.overflowed {
            out.push(Violation::new(
                "",
                format!("no more than {MAX_VIOLATIONS} violations (the rest are not listed)"),
                "more",
            ));
        }
        if out.is_empty() {
            // `is_valid` and `iter_errors` disagreeing would be a validator bug; still answer with something true.
            out.push(Violation::new("", "a value valid against the schema", preview(instance)));
        }
        out
    }
}

impl CompiledSchema {
    /// The violations as jsonschema's errors give them.
    fn explain_with_jsonschema(&self, instance: &Value) -> Sink {
        let mut sink = Sink::default();
        for err in self.validator.iter_errors(instance) {
            convert(&err, instance, &mut sink, 0);
            if sink.overflowed {
                break;
            }
        }
        sink
    }
}

/// Collects violations up to the cap.
#[derive(Default)]
struct Sink {
    out: Vec<Violation>,
    overflowed: bool,
}

impl Sink {
    fn push(&mut self, v: Violation) {
        if self.out.len() < MAX_VIOLATIONS {
            self.out.push(v);
        } else {
            self.overflowed = true;
        }
    }
}

/// Turns one validator error into violations.
///
/// `root` is the whole instance that was validated (error paths are absolute).
fn convert(err: &ValidationError<'_>, root: &Value, sink: &mut Sink, nesting: usize) {
    let path = err.instance_path().as_str();
    let instance: &Value = err.instance();
    match err.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            sink.push(Violation::new(
                join_pointer(path, name),
                format!("required property `{}`", name_preview(name)),
                "nothing",
            ));
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            for name in unexpected {
                if sink.overflowed {
                    return;
                }
                let found = instance.get(name.as_str()).map_or_else(|| "a value".to_owned(), preview);
                sink.push(Violation::new(
                    join_pointer(path, name),
                    format!("no property `{}` (not in the schema)", name_preview(name)),
                    found,
                ));
            }
        }
        ValidationErrorKind::FalseSchema => match closed_object(err, root) {
            Some(object) => {
                for (name, value) in object {
                    if sink.overflowed {
                        return;
                    }
                    sink.push(Violation::new(
                        join_pointer(path, name),
                        format!("no property `{}` (not in the schema)", name_preview(name)),
                        preview(value),
                    ));
                }
            }
            None => {
                let (expected, found) = describe(err.kind(), instance);
                sink.push(Violation::new(shorten_pointer(path), expected, found));
            }
        },
        ValidationErrorKind::AnyOf { context } => alternatives(path, instance, root, context, false, sink, nesting),
        ValidationErrorKind::OneOfNotValid { context } => {
            alternatives(path, instance, root, context, true, sink, nesting)
        }
        ValidationErrorKind::PropertyNames { error } => {
            let name = error.instance().as_str().unwrap_or_default();
            let (expected, _) = describe(error.kind(), error.instance());
            sink.push(Violation::new(
                join_pointer(path, name),
                format!("a property name that is {expected}"),
                format!("property `{}`", name_preview(name)),
            ));
        }
        kind => {
            let (expected, found) = describe(kind, instance);
            sink.push(Violation::new(shorten_pointer(path), expected, found));
        }
    }
}

/// Explains a failed `anyOf`/`oneOf`.
///
/// 1. When every alternative failed with a single type/`const`/`enum` mismatch at the same place (a documented enum,
///    `Option<Enum>`, an unknown tag of a tagged enum), they merge into one `one of: ...` violation.
/// 2. Otherwise, the alternatives that failed only because the value has another JSON type are discarded; if a
///    single alternative with the fewest failures remains, its own violations are reported (e.g. the `T` of an
///    `Option<T>`).
/// 3. Otherwise one generic violation.
fn alternatives(
    path: &str,
    instance: &Value,
    root: &Value,
    context: &[Vec<ValidationError<'static>>],
    one_of: bool,
    sink: &mut Sink,
    nesting: usize,
) {
    if let Some(v) = merge_simple_alternatives(context) {
        sink.push(v);
        return;
    }
    if nesting < MAX_ALTERNATIVE_NESTING {
        let relevant = context.iter().filter(|branch| {
            // Discard empty branches and those that failed only on the value's type here.
            let type_mismatch_only = matches!(branch.as_slice(), [only]
                if only.instance_path().as_str() == path && matches!(only.kind(), ValidationErrorKind::Type { .. }));
            !branch.is_empty() && !type_mismatch_only
        });
        let mut best: Option<&Vec<ValidationError<'static>>> = None;
        let mut tied = false;
        for branch in relevant {
            match best {
                Some(b) if branch.len() == b.len() => tied = true,
                Some(b) if branch.len() > b.len() => {}
                _ => {
                    best = Some(branch);
                    tied = false;
                }
            }
        }
        if let (Some(branch), false) = (best, tied) {
            for err in branch {
                if sink.overflowed {
                    return;
                }
                convert(err, root, sink, nesting + 1);
            }
            return;
        }
    }
    let n = context.len();
    let expected = if one_of {
        format!("a value matching exactly one of {n} alternatives")
    } else {
        format!("a value matching at least one of {n} alternatives")
    };
    sink.push(Violation::new(shorten_pointer(path), expected, preview(instance)));
}

/// The object behind a `false`-schema error that really means "no property is allowed here":
///
/// - `additionalProperties: false` without `properties` reports one such error at the *object* (its instance is the
///   object's first member value): every member is unexpected;
/// - `propertyNames: false` reports it at the object itself.
fn closed_object<'r>(err: &ValidationError<'_>, root: &'r Value) -> Option<&'r Map<String, Value>> {
    let keyword = err.schema_path().as_str().rsplit('/').next()?;
    let at = root.pointer(err.instance_path().as_str())?;
    let object = at.as_object()?;
    let instance: &Value = err.instance();
    let same = |a: &Value, b: &Value| std::ptr::eq(a, b) || a == b;
    let matches = match keyword {
        "additionalProperties" => same(object.values().next()?, instance),
        "propertyNames" => same(at, instance),
        _ => false,
    };
    matches.then_some(object)
}

/// Rule 1 of [`alternatives`].
fn merge_simple_alternatives(context: &[Vec<ValidationError<'static>>]) -> Option<Violation> {
    let first = context.first()?.first()?;
    let at = first.instance_path().as_str();
    let mut options: Vec<String> = Vec::new();
    let mut only_types = true;
    for branch in context {
        let [err] = branch.as_slice() else { return None };
        if err.instance_path().as_str() != at {
            return None;
        }
        match err.kind() {
            ValidationErrorKind::Type { kind } => {
                for t in type_kind_names(kind) {
                    if !options.iter().any(|o| o == t) {
                        options.push(t.to_owned());
                    }
                }
            }
            ValidationErrorKind::Constant { expected_value } => {
                only_types = false;
                let text = schema_value_text(expected_value);
                if !options.contains(&text) {
                    options.push(text);
                }
            }
            ValidationErrorKind::Enum { options: values } => {
                only_types = false;
                for value in values.as_array().map(Vec::as_slice).unwrap_or_default() {
                    let text = schema_value_text(value);
                    if !options.contains(&text) {
                        options.push(text);
                    }
                }
            }
            _ => return None,
        }
    }
    let expected = if only_types { options.join(" or ") } else { format!("one of: {}", list_options(&options)) };
    Some(Violation::new(shorten_pointer(at), expected, preview(first.instance())))
}

/// Type names, `null` last (`string or null` reads better than `null or string`).
fn type_kind_names(kind: &TypeKind) -> Vec<&'static str> {
    match kind {
        TypeKind::Single(t) => vec![t.as_str()],
        TypeKind::Multiple(set) => {
            let mut names: Vec<&'static str> = set.iter().map(|t| t.as_str()).collect();
            names.sort_by_key(|n| *n == "null");
            names
        }
    }
}

/// `"a", "b", … (3 more)`.
fn list_options(options: &[String]) -> String {
    let mut out = String::new();
    for (i, o) in options.iter().take(MAX_LISTED_OPTIONS).enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(o);
    }
    if options.len() > MAX_LISTED_OPTIONS {
        let _ = write!(out, ", … ({} more)", options.len() - MAX_LISTED_OPTIONS);
    }
    out
}

/// `(expected, found)` for a single error kind.
fn describe(kind: &ValidationErrorKind, instance: &Value) -> (String, String) {
    use ValidationErrorKind as K;
    let found = || preview(instance);
    match kind {
        K::Type { kind } => (type_kind_names(kind).join(" or "), found()),
        K::Constant { expected_value } => (format!("exactly {}", schema_value_text(expected_value)), found()),
        K::Enum { options } => {
            let texts: Vec<String> =
                options.as_array().map(Vec::as_slice).unwrap_or_default().iter().map(schema_value_text).collect();
            (format!("one of: {}", list_options(&texts)), found())
        }
        K::MaxLength { limit } => (format!("at most {limit} {}", plural(*limit, "character")), string_size(instance)),
        K::MinLength { limit } => (format!("at least {limit} {}", plural(*limit, "character")), string_size(instance)),
        K::MaxItems { limit } => (format!("at most {limit} {}", plural(*limit, "item")), array_size(instance)),
        K::MinItems { limit } => (format!("at least {limit} {}", plural(*limit, "item")), array_size(instance)),
        K::AdditionalItems { limit } => {
            (format!("at most {limit} {}", plural(*limit as u64, "item")), array_size(instance))
        }
        K::MaxProperties { limit } => {
            (format!("at most {limit} {}", plural(*limit, "property")), object_size(instance))
        }
        K::MinProperties { limit } => {
            (format!("at least {limit} {}", plural(*limit, "property")), object_size(instance))
        }
        K::Maximum { limit } => (format!("a number at most {}", schema_value_text(limit)), found()),
        K::Minimum { limit } => (format!("a number at least {}", schema_value_text(limit)), found()),
        K::ExclusiveMaximum { limit } => (format!("a number less than {}", schema_value_text(limit)), found()),
        K::ExclusiveMinimum { limit } => (format!("a number greater than {}", schema_value_text(limit)), found()),
        K::MultipleOf { multiple_of } => {
            (format!("a multiple of {}", truncate_chars(&multiple_of.to_string(), PREVIEW_CHARS)), found())
        }
        K::Pattern { pattern } => {
            (format!("a string matching the pattern `{}`", truncate_chars(pattern, 100)), found())
        }
        K::BacktrackLimitExceeded { .. } | K::RegexEngineFailure { .. } => {
            ("a string the pattern can be checked against (the check gave up)".to_owned(), found())
        }
        K::Format { format } => (format!("a string in `{}` format", truncate_chars(format, PREVIEW_CHARS)), found()),
        K::ContentEncoding { content_encoding } => {
            (format!("a string encoded as `{}`", truncate_chars(content_encoding, PREVIEW_CHARS)), found())
        }
        K::ContentMediaType { content_media_type } => {
            (format!("a string of media type `{}`", truncate_chars(content_media_type, PREVIEW_CHARS)), found())
        }
        K::FromUtf8 { .. } => ("encoded content that decodes to UTF-8 text".to_owned(), found()),
        K::Contains => ("an array with enough items matching the `contains` schema".to_owned(), array_size(instance)),
        K::UniqueItems => ("an array without duplicate items".to_owned(), "an array with duplicate items".to_owned()),
        K::UnevaluatedItems { unexpected } => (
            "no items beyond those the schema describes".to_owned(),
            format!("{} unexpected {}", unexpected.len(), plural(unexpected.len() as u64, "item")),
        ),
        K::FalseSchema => ("no value here (the schema allows nothing)".to_owned(), found()),
        K::Not { .. } => ("a value not matching the `not` schema".to_owned(), found()),
        K::OneOfMultipleValid { context } => {
            (format!("a value matching exactly one of {} alternatives (it matches several)", context.len()), found())
        }
        K::AnyOf { context } => (format!("a value matching at least one of {} alternatives", context.len()), found()),
        K::OneOfNotValid { context } => {
            (format!("a value matching exactly one of {} alternatives", context.len()), found())
        }
        K::Required { property } => {
            (format!("required property `{}`", name_preview(property.as_str().unwrap_or_default())), found())
        }
        K::AdditionalProperties { .. } | K::UnevaluatedProperties { .. } => {
            ("no properties beyond those in the schema".to_owned(), found())
        }
        K::PropertyNames { .. } => ("valid property names".to_owned(), found()),
        K::Referencing(_) => ("a value checkable against the schema (a reference did not resolve)".to_owned(), found()),
        // `Custom` (keywords keel never registers) and any kind a later version adds: name the keyword only.
        other => {
            (format!("a value satisfying the `{}` keyword", truncate_chars(other.keyword(), PREVIEW_CHARS)), found())
        }
    }
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        word.to_owned()
    } else if let Some(stem) = word.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{word}s")
    }
}

fn string_size(v: &Value) -> String {
    match v {
        Value::String(s) => {
            let n = s.chars().count() as u64;
            format!("a string of {n} {}", plural(n, "character"))
        }
        other => preview(other),
    }
}

fn array_size(v: &Value) -> String {
    match v {
        Value::Array(a) => {
            let n = a.len() as u64;
            format!("an array of {n} {}", plural(n, "item"))
        }
        other => preview(other),
    }
}

fn object_size(v: &Value) -> String {
    match v {
        Value::Object(o) => {
            let n = o.len() as u64;
            format!("an object with {n} {}", plural(n, "property"))
        }
        other => preview(other),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Previews and pointers
// ---------------------------------------------------------------------------------------------------------------

/// A short description of an instance value: scalars as JSON text cut at [`PREVIEW_CHARS`] characters (a 10 MB
/// string is never copied), arrays and objects as their type name.
pub fn preview(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => truncate_chars(&n.to_string(), PREVIEW_CHARS),
        Value::String(s) => string_preview(s),
        Value::Array(_) => "array".to_owned(),
        Value::Object(_) => "object".to_owned(),
    }
}

/// JSON text of a (trusted, schema-side) value, cut at [`PREVIEW_CHARS`] characters.
fn schema_value_text(v: &Value) -> String {
    match v {
        Value::String(s) => string_preview(s),
        Value::Array(_) | Value::Object(_) => {
            truncate_chars(&serde_json::to_string(v).unwrap_or_default(), PREVIEW_CHARS)
        }
        scalar => preview(scalar),
    }
}

/// `"..."` JSON string syntax of at most [`PREVIEW_CHARS`] characters; only a prefix of `s` is ever escaped.
fn string_preview(s: &str) -> String {
    let prefix = prefix_chars(s, PREVIEW_CHARS);
    let escaped = serde_json::to_string(prefix).unwrap_or_default();
    if prefix.len() == s.len() && escaped.chars().count() <= PREVIEW_CHARS {
        escaped
    } else {
        let mut out: String = escaped.chars().take(PREVIEW_CHARS - 1).collect();
        out.push('…');
        out
    }
}

/// A property name for a message: JSON escapes (no quotes), at most [`PREVIEW_CHARS`] characters.
fn name_preview(name: &str) -> String {
    let prefix = prefix_chars(name, PREVIEW_CHARS);
    let escaped = serde_json::to_string(prefix).unwrap_or_default();
    let inner = escaped.get(1..escaped.len().saturating_sub(1)).unwrap_or_default();
    if prefix.len() == name.len() && inner.chars().count() <= PREVIEW_CHARS {
        inner.to_owned()
    } else {
        let mut out: String = inner.chars().take(PREVIEW_CHARS - 1).collect();
        out.push('…');
        out
    }
}

/// The first `n` characters of `s`.
fn prefix_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// `s` cut to `n` characters, the last being `…` when something was cut.
fn truncate_chars(s: &str, n: usize) -> String {
    let prefix = prefix_chars(s, n);
    if prefix.len() == s.len() {
        s.to_owned()
    } else {
        let mut out: String = prefix_chars(s, n.saturating_sub(1)).to_owned();
        out.push('…');
        out
    }
}

/// Appends `/` and `segment` escaped per RFC 6901 (`~` as `~0`, `/` as `~1`).
fn push_escaped_segment(out: &mut String, segment: &str) {
    let mut rest = segment;
    // Both are ASCII: a byte search finds them, and `at` is a char boundary.
    while let Some(at) = rest.bytes().position(|b| b == b'~' || b == b'/') {
        out.push_str(&rest[..at]);
        out.push_str(if rest.as_bytes()[at] == b'~' { "~0" } else { "~1" });
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
}

/// `base` (an escaped pointer) joined with an unescaped property name.
fn join_pointer(base: &str, name: &str) -> String {
    let mut out = String::with_capacity(base.len() + name.len() + 1);
    out.push_str(base);
    out.push('/');
    push_escaped_segment(&mut out, prefix_chars(name, MAX_POINTER_BYTES + 1));
    shorten_pointer(&out)
}

/// Keeps a pointer verbatim up to [`MAX_POINTER_BYTES`]; beyond, shortens each segment longer than
/// [`PREVIEW_CHARS`] characters.
fn shorten_pointer(pointer: &str) -> String {
    if pointer.len() <= MAX_POINTER_BYTES {
        return pointer.to_owned();
    }
    let mut out = String::new();
    for segment in pointer.split('/').skip(1) {
        out.push('/');
        if segment.chars().count() > PREVIEW_CHARS {
            let mut cut = prefix_chars(segment, PREVIEW_CHARS - 1);
            // Do not leave half of a `~0`/`~1` escape.
            if cut.ends_with('~') {
                cut = &cut[..cut.len() - 1];
            }
            out.push_str(cut);
            out.push('…');
        } else {
            out.push_str(segment);
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests_support {
    use serde_json::Value;

    /// Drops a deeply nested value without recursion (`Value`'s own drop recurses).
    pub(crate) fn drop_deep(v: Value) {
        let mut stack = vec![v];
        while let Some(mut v) = stack.pop() {
            match &mut v {
                Value::Array(a) => stack.append(a),
                Value::Object(o) => {
                    let keys: Vec<String> = o.keys().cloned().collect();
                    for k in keys {
                        if let Some(child) = o.remove(&k) {
                            stack.push(child);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    pub(crate) fn deep_array(depth: usize) -> Value {
        let mut v = Value::Null;
        for _ in 0..depth {
            v = Value::Array(vec![v]);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::size::check_limits_exact;
    use super::tests_support::{deep_array, drop_deep};
    use super::*;
    use crate::limits::Limits;
    use serde_json::json;

    fn compile(schema: Value) -> CompiledSchema {
        CompiledSchema::compile(&schema).expect("schema compiles")
    }

    fn violations(schema: Value, instance: Value) -> Vec<Violation> {
        let s = compile(schema);
        assert!(!s.is_valid(&instance));
        s.validate(&instance).expect_err("invalid")
    }

    fn one(schema: Value, instance: Value) -> Violation {
        let v = violations(schema, instance);
        assert_eq!(v.len(), 1, "{v:?}");
        v.into_iter().next().unwrap()
    }

    fn incident_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "incident_id": {"type": "string", "maxLength": 64},
                "severity": {"type": "string", "enum": ["low", "high"]},
                "count": {"type": "integer", "minimum": 0},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}
            },
            "required": ["incident_id"],
            "additionalProperties": false
        })
    }

    #[test]
    fn valid_instance_passes_both_paths() {
        let s = compile(incident_schema());
        let ok = json!({"incident_id": "INC-1", "severity": "low", "count": 3, "tags": ["a"]});
        assert!(s.is_valid(&ok));
        assert_eq!(s.validate(&ok), Ok(()));
    }

    /// The schemas `#[derive(JsonSchema)]` gives plain structs (closed or open objects, unit-variant enums with doc
    /// comments, bounded integers, options, lists, nested structs) get the verdict plan, and its verdicts are
    /// jsonschema's on valid instances and on one mistake of each kind.
    #[test]
    fn derived_schemas_get_the_verdict_plan() {
        use schemars::JsonSchema;

        /// How bad.
        #[derive(JsonSchema)]
        #[serde(rename_all = "lowercase")]
        #[allow(dead_code)]
        enum Severity {
            /// Degraded.
            Low,
            /// Down.
            High,
        }
        #[derive(JsonSchema)]
        #[allow(dead_code)]
        struct Owner {
            team: String,
            pager: Option<u32>,
        }
        #[derive(JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Args {
            /// The service.
            service: String,
            /// How bad.
            severity: Severity,
            #[schemars(range(min = 1, max = 50))]
            limit: u32,
            include_resolved: bool,
            owner: Option<Owner>,
            tags: Vec<String>,
            ratio: f64,
        }
        let schema = schemars::generate::SchemaSettings::draft2020_12()
            .into_generator()
            .into_root_schema_for::<Args>()
            .to_value();
        let compiled = compile(schema);
        assert!(compiled.verdict.is_some(), "a derived struct lowers to a verdict plan");
        let valid = json!({"service": "auth", "severity": "high", "limit": 10, "include_resolved": false,
            "owner": {"team": "sre", "pager": 7}, "tags": ["a", "b"], "ratio": 0.5});
        let mut cases = vec![(valid.clone(), true), (json!({"owner": null}), false)];
        let mistakes: [(&str, Value); 9] = [
            ("severity", json!("urgent")),
            ("limit", json!(0)),
            ("limit", json!(50.0)),
            ("limit", json!(10.5)),
            ("owner", json!(null)),
            ("owner", json!({"team": "sre", "pager": -1})),
            ("owner", json!({"pager": 1})),
            ("tags", json!(["a", 1])),
            ("extra", json!(1)),
        ];
        for (key, value) in mistakes {
            let mut instance = valid.clone();
            instance[key] = value;
            let expected = compiled.validator.is_valid(&instance);
            cases.push((instance, expected));
        }
        let mut missing = valid.clone();
        missing.as_object_mut().unwrap().remove("service");
        cases.push((missing, false));
        for (instance, expected) in &cases {
            assert_eq!(compiled.validator.is_valid(instance), *expected, "{instance}");
            assert_eq!(compiled.is_valid(instance), *expected, "{instance}");
        }
        // Both verdicts occur: `limit: 50.0` and `owner: null` are valid, the rest are not.
        assert_eq!(cases.iter().filter(|(_, valid)| *valid).count(), 3, "{cases:?}");
    }

    #[test]
    fn string_42_is_not_an_integer() {
        let v = one(incident_schema(), json!({"incident_id": "x", "count": "42"}));
        assert_eq!(v, Violation::new("/count", "integer", "\"42\""));
        let s = compile(incident_schema());
        assert!(s.is_valid(&json!({"incident_id": "x", "count": 42})));
        // 42.0 is an integer in JSON Schema; 42.5 is not.
        assert!(s.is_valid(&json!({"incident_id": "x", "count": 42.0})));
        let v = one(incident_schema(), json!({"incident_id": "x", "count": 42.5}));
        assert_eq!(v, Violation::new("/count", "integer", "42.5"));
    }

    #[test]
    fn enum_violation() {
        let v = one(incident_schema(), json!({"incident_id": "x", "severity": "urgent"}));
        assert_eq!(v, Violation::new("/severity", "one of: \"low\", \"high\"", "\"urgent\""));
        assert_eq!(summary(&[v]), "/severity: expected one of: \"low\", \"high\"; found \"urgent\"");
    }

    #[test]
    fn required_property_pointer_is_the_would_be_path() {
        let v = one(incident_schema(), json!({}));
        assert_eq!(v, Violation::new("/incident_id", "required property `incident_id`", "nothing"));
    }

    #[test]
    fn additional_property() {
        let v = one(incident_schema(), json!({"incident_id": "x", "force": true}));
        assert_eq!(v, Violation::new("/force", "no property `force` (not in the schema)", "true"));
    }

    #[test]
    fn unevaluated_property() {
        let schema = json!({"type": "object", "properties": {"a": {}}, "unevaluatedProperties": false});
        let v = one(schema, json!({"a": 1, "b": [1]}));
        assert_eq!(v, Violation::new("/b", "no property `b` (not in the schema)", "array"));
    }

    #[test]
    fn every_violation_is_collected() {
        let v = violations(incident_schema(), json!({"severity": 3, "count": -1, "tags": ["a", 2, "c"], "x": null}));
        let mut got: Vec<String> = v.iter().map(|v| v.to_string()).collect();
        got.sort();
        let mut want = vec![
            "/count: expected a number at least 0; found -1",
            "/incident_id: expected required property `incident_id`; found nothing",
            "/severity: expected string; found 3",
            "/severity: expected one of: \"low\", \"high\"; found 3",
            "/tags: expected at most 2 items; found an array of 3 items",
            "/tags/1: expected string; found 2",
            "/x: expected no property `x` (not in the schema); found null",
        ];
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn size_kinds() {
        let schema = json!({"type": "object", "properties": {
            "s": {"type": "string", "maxLength": 3, "minLength": 2},
            "o": {"type": "object", "minProperties": 1},
            "n": {"type": "number", "exclusiveMaximum": 10, "multipleOf": 3}
        }});
        let v = one(schema.clone(), json!({"s": "abcé"}));
        assert_eq!(v, Violation::new("/s", "at most 3 characters", "a string of 4 characters"));
        let v = one(schema.clone(), json!({"s": "a"}));
        assert_eq!(v, Violation::new("/s", "at least 2 characters", "a string of 1 character"));
        let v = one(schema.clone(), json!({"o": {}}));
        assert_eq!(v, Violation::new("/o", "at least 1 property", "an object with 0 properties"));
        let v = violations(schema, json!({"n": 11}));
        let texts: Vec<String> = v.iter().map(|v| v.to_string()).collect();
        assert!(texts.contains(&"/n: expected a number less than 10; found 11".to_owned()), "{texts:?}");
        assert!(texts.contains(&"/n: expected a multiple of 3; found 11".to_owned()), "{texts:?}");
    }

    #[test]
    fn const_pattern_format_and_root() {
        let v = one(json!({"const": "on"}), json!("off"));
        assert_eq!(v, Violation::new("", "exactly \"on\"", "\"off\""));
        assert_eq!(v.to_string(), "(root): expected exactly \"on\"; found \"off\"");
        let v = one(json!({"type": "string", "pattern": "^[a-z]+$"}), json!("ABC"));
        assert_eq!(v, Violation::new("", "a string matching the pattern `^[a-z]+$`", "\"ABC\""));
        let v = one(json!({"type": "string", "format": "date"}), json!("2024-13-45"));
        assert_eq!(v, Violation::new("", "a string in `date` format", "\"2024-13-45\""));
        // Unknown formats (schemars emits some) are ignored.
        assert!(compile(json!({"type": "integer", "format": "uint32"})).is_valid(&json!(5)));
        let v = one(json!({"type": "object"}), json!([1]));
        assert_eq!(v, Violation::new("", "object", "array"));
        let v = one(json!({"type": ["string", "null"]}), json!(1));
        assert_eq!(v.expected, "string or null");
        assert_eq!(v.found, "1");
    }

    #[test]
    fn pointer_escaping() {
        let schema = json!({
            "type": "object",
            "properties": {"a/b": {"type": "integer"}, "m~n": {"type": "object", "properties": {"x/~y": {"type": "string"}}}},
            "required": ["r/s~"],
            "additionalProperties": false
        });
        let v = violations(schema, json!({"a/b": "1", "m~n": {"x/~y": 2}, "p~q/": 0}));
        let mut pointers: Vec<&str> = v.iter().map(|v| v.pointer.as_str()).collect();
        pointers.sort_unstable();
        assert_eq!(pointers, ["/a~1b", "/m~0n/x~1~0y", "/p~0q~1", "/r~1s~0"]);
        let required = v.iter().find(|v| v.pointer == "/r~1s~0").unwrap();
        assert_eq!(required.expected, "required property `r/s~`");
    }

    #[test]
    fn array_item_pointers() {
        let schema = json!({"type": "array", "items": {"type": "object", "properties": {"k": {"type": "boolean"}}}});
        let v = one(schema, json!([{"k": true}, {"k": "no"}]));
        assert_eq!(v, Violation::new("/1/k", "boolean", "\"no\""));
    }

    #[test]
    fn huge_string_is_not_copied_into_violations() {
        let huge = "A".repeat(10 * 1024 * 1024);
        let schema = json!({"type": "object", "properties": {
            "s": {"type": "string", "maxLength": 64},
            "e": {"enum": ["x"]},
            "i": {"type": "integer"},
            "p": {"type": "string", "pattern": "^b"}
        }, "additionalProperties": false});
        let mut instance = serde_json::Map::new();
        for key in ["s", "e", "i", "p", "extra"] {
            instance.insert(key.to_owned(), Value::String(huge.clone()));
        }
        // A huge key too.
        instance.insert(huge.clone(), json!(1));
        let v = violations(schema, Value::Object(instance));
        assert_eq!(v.len(), 6, "{v:?}");
        let text = summary(&v);
        assert!(text.len() < 4000, "summary is {} bytes", text.len());
        for v in &v {
            assert!(v.expected.chars().count() < 120, "{v:?}");
            assert!(v.found.chars().count() <= 40, "{v:?}");
            assert!(v.pointer.len() <= MAX_POINTER_BYTES, "{}", v.pointer.len());
        }
        let s = v.iter().find(|v| v.pointer == "/s").unwrap();
        assert_eq!(s.expected, "at most 64 characters");
        assert_eq!(s.found, "a string of 10485760 characters");
        let e = v.iter().find(|v| v.pointer == "/e").unwrap();
        assert_eq!(e.found, format!("\"{}…", "A".repeat(38)));
        assert_eq!(e.found.chars().count(), 40);
        let huge_key = v.iter().find(|v| v.pointer.starts_with("/AAAA")).unwrap();
        assert_eq!(huge_key.pointer, format!("/{}…", "A".repeat(39)));
        assert_eq!(huge_key.expected, format!("no property `{}…` (not in the schema)", "A".repeat(39)));
    }

    #[test]
    fn violations_are_capped() {
        let schema = json!({"type": "array", "items": {"type": "string"}});
        let instance = Value::Array((0..1000).map(|i| json!(i)).collect());
        let v = violations(schema, instance);
        assert_eq!(v.len(), MAX_VIOLATIONS + 1);
        assert_eq!(v[0], Violation::new("/0", "string", "0"));
        assert_eq!(v[31].pointer, "/31");
        assert_eq!(v[32], Violation::new("", "no more than 32 violations (the rest are not listed)", "more"));
        // Exactly 32 violations: no final entry.
        let instance = Value::Array((0..32).map(|i| json!(i)).collect());
        let v = violations(json!({"type": "array", "items": {"type": "string"}}), instance);
        assert_eq!(v.len(), 32);
    }

    #[test]
    fn documented_enum_as_one_of_consts_merges() {
        // What schemars emits for an enum whose variants have doc comments.
        let schema = json!({"type": "object", "properties": {"sev": {"oneOf": [
            {"const": "low", "description": "Low."},
            {"const": "high", "description": "High."}
        ]}}});
        let v = one(schema, json!({"sev": "urgent"}));
        assert_eq!(v, Violation::new("/sev", "one of: \"low\", \"high\"", "\"urgent\""));
    }

    /// Folding a `oneOf` of consts into an `enum` (what the executor compiles) does not change what is accepted,
    /// and explains a violation the same way or better; for documented enums alone, inside `Option`, and with
    /// typed branches.
    #[test]
    fn folded_documented_enum_explains_like_the_one_of() {
        let sev = json!({"oneOf": [
            {"const": "low", "description": "Low.", "type": "string"},
            {"const": "medium", "description": "Medium.", "type": "string"},
            {"const": "high", "description": "High.", "type": "string"}
        ]});
        let schemas = [
            json!({"type": "object", "properties": {"sev": sev}, "required": ["sev"], "additionalProperties": false}),
            json!({
                "type": "object",
                "properties": {"sev": {"anyOf": [{"$ref": "#/$defs/Sev"}, {"type": "null"}]}},
                "$defs": {"Sev": sev}
            }),
            json!({"type": "object", "properties": {"n": {"oneOf": [{"const": 1}, {"const": 2, "title": "Two"}]}}}),
        ];
        let instances = [
            json!({"sev": "low"}),
            json!({"sev": "urgent"}),
            json!({"sev": 3}),
            json!({"sev": null}),
            json!({"sev": {"a": 1}}),
            json!({"sev": ["low"]}),
            json!({"n": 1}),
            json!({"n": 3}),
            json!({"n": "1"}),
            json!({}),
        ];
        for schema in &schemas {
            let mut folded = schema.clone();
            crate::transform::fold_const_one_of(&mut folded);
            assert_ne!(&folded, schema, "nothing was folded in {schema}");
            let (a, b) = (compile(schema.clone()), compile(folded));
            for instance in &instances {
                assert_eq!(a.is_valid(instance), b.is_valid(instance), "{schema} {instance}");
                match (a.validate(instance), b.validate(instance)) {
                    // Where the texts differ, the folded one says more: typed branches and a value of another type
                    // get the values instead of "exactly one of 3 alternatives", and inside an `Option` the `null`
                    // is merged in ("one of: "low", ..., null").
                    (Err(x), Err(y)) if x != y => {
                        assert_eq!(x.len(), y.len(), "{x:?} {y:?}");
                        for (x, y) in x.iter().zip(&y) {
                            assert_eq!((&x.pointer, &x.found), (&y.pointer, &y.found));
                            assert!(y.expected.starts_with("one of: "), "{y:?}");
                            if x.expected.starts_with("one of: ") {
                                assert!(y.expected.starts_with(&x.expected), "{x:?} {y:?}");
                            } else {
                                assert!(x.expected.starts_with("a value matching exactly one of"), "{x:?}");
                            }
                        }
                    }
                    (x, y) => assert_eq!(x, y, "{schema} {instance}"),
                }
            }
        }
    }

    /// A `oneOf` whose consts repeat, or whose branch type does not fit its const, is not an `enum`: left alone.
    #[test]
    fn one_of_that_is_not_an_enum_is_not_folded() {
        for schema in [
            json!({"oneOf": [{"const": "a"}, {"const": "a"}]}),
            json!({"oneOf": [{"const": "a", "type": "integer"}, {"const": "b"}]}),
            json!({"oneOf": [{"const": 1}, {"type": "string", "minLength": 2}]}),
            json!({"oneOf": []}),
        ] {
            let mut folded = schema.clone();
            crate::transform::fold_const_one_of(&mut folded);
            assert_eq!(folded, schema);
        }
    }

    /// The fast path of `check_limits` answers exactly what the exact walk answers, limit by limit, including at,
    /// just below and just above the exact size.
    #[test]
    fn fast_limits_agree_with_exact_limits() {
        let values = [
            json!({}),
            json!([]),
            json!(null),
            json!("\u{1}\"\\é"),
            json!({"a": [1, -2, 2.5e-300, u64::MAX, i64::MIN, "x\ny"], "b": {"c": {"d": [[[]]]}}, "": false}),
            json!({"s": "x".repeat(5000), "k\u{7f}\u{0}": true}),
            incident_schema(),
        ];
        for v in &values {
            let exact_len = serde_json::to_string(v).expect("serializable").len();
            for max_depth in [0, 1, 2, 3, 4, 5, 64, 128, 129, 1000] {
                for max_bytes in [0, 1, exact_len.saturating_sub(1), exact_len, exact_len + 1, 1 << 20] {
                    let limits = Limits { max_depth, max_bytes };
                    assert_eq!(check_limits(v, &limits), check_limits_exact(v, &limits), "{v} {limits:?}");
                }
            }
        }
    }

    /// The fast path stops one level past `max_depth`: 100,000 levels do not overflow the stack.
    #[test]
    fn fast_limits_do_not_recurse_past_max_depth() {
        let v = deep_array(100_000);
        for max_depth in [64, MAX_RECURSIVE_DEPTH] {
            let limits = Limits { max_depth, max_bytes: usize::MAX };
            let err = check_limits(&v, &limits).expect_err("too deep");
            assert_eq!(Err(err), check_limits_exact(&v, &limits));
        }
        drop_deep(v);
    }

    #[test]
    fn option_of_enum_merges_with_null() {
        let schema = json!({
            "type": "object",
            "properties": {"sev": {"anyOf": [{"$ref": "#/$defs/Sev"}, {"type": "null"}]}},
            "$defs": {"Sev": {"type": "string", "enum": ["low", "high"]}}
        });
        let v = violations(schema, json!({"sev": "urgent"}));
        // The `$ref` branch fails on the enum only; the null branch on its type.
        assert_eq!(v, vec![Violation::new("/sev", "one of: \"low\", \"high\", null", "\"urgent\"")]);
    }

    #[test]
    fn option_of_struct_reports_the_struct_violations() {
        let schema = json!({
            "type": "object",
            "properties": {"addr": {"anyOf": [{"$ref": "#/$defs/Addr"}, {"type": "null"}]}},
            "$defs": {"Addr": {"type": "object", "properties": {"zip": {"type": "string"}}, "required": ["street"]}}
        });
        let mut v = violations(schema, json!({"addr": {"zip": 75001}}));
        v.sort_by(|a, b| a.pointer.cmp(&b.pointer));
        assert_eq!(
            v,
            vec![
                Violation::new("/addr/street", "required property `street`", "nothing"),
                Violation::new("/addr/zip", "string", "75001"),
            ]
        );
    }

    #[test]
    fn tagged_enum_unknown_tag_and_wrong_field() {
        let schema = json!({"oneOf": [
            {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind", "x"]},
            {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}}, "required": ["kind", "y"]}
        ]});
        let v = one(schema.clone(), json!({"kind": "c"}));
        // Each branch also misses its own field, so no merge; the generic message remains.
        assert_eq!(v, Violation::new("", "a value matching exactly one of 2 alternatives", "object"));
        let v = one(schema.clone(), json!({"kind": "z", "x": 1, "y": "s"}));
        assert_eq!(v, Violation::new("/kind", "one of: \"a\", \"b\"", "\"z\""));
        let v = one(schema, json!({"kind": "b", "y": 5}));
        assert_eq!(v, Violation::new("/y", "string", "5"));
    }

    #[test]
    fn one_of_matching_several() {
        let v = one(json!({"oneOf": [{"type": "integer"}, {"minimum": 0}]}), json!(3));
        assert_eq!(v, Violation::new("", "a value matching exactly one of 2 alternatives (it matches several)", "3"));
    }

    #[test]
    fn false_schema_not_and_unique() {
        let v = one(json!({"properties": {"a": false}}), json!({"a": 1}));
        assert_eq!(v, Violation::new("/a", "no value here (the schema allows nothing)", "1"));
        let v = one(json!({"not": {"type": "string"}}), json!("s"));
        assert_eq!(v, Violation::new("", "a value not matching the `not` schema", "\"s\""));
        let v = one(json!({"uniqueItems": true}), json!([1, 1]));
        assert_eq!(v, Violation::new("", "an array without duplicate items", "an array with duplicate items"));
    }

    #[test]
    fn property_names() {
        let v = one(json!({"propertyNames": {"maxLength": 3}}), json!({"long_name": 1}));
        assert_eq!(v.pointer, "/long_name");
        assert_eq!(v.expected, "a property name that is at most 3 characters");
        assert_eq!(v.found, "property `long_name`");
    }

    #[test]
    fn closed_object_without_properties() {
        // A hand-written schema for a tool without parameters.
        let schema = json!({"type": "object", "additionalProperties": false});
        assert!(compile(schema.clone()).is_valid(&json!({})));
        let v = violations(schema.clone(), json!({"force": true, "x": [1]}));
        let mut v: Vec<String> = v.iter().map(ToString::to_string).collect();
        v.sort();
        assert_eq!(
            v,
            [
                "/force: expected no property `force` (not in the schema); found true",
                "/x: expected no property `x` (not in the schema); found array"
            ]
        );
        // Nested, and inside an array.
        let schema = json!({"type": "array", "items": {"type": "object", "additionalProperties": false}});
        let v = one(schema, json!([{}, {"a": 1}]));
        assert_eq!(v, Violation::new("/1/a", "no property `a` (not in the schema)", "1"));
        // `propertyNames: false`.
        let v = one(json!({"propertyNames": false}), json!({"k": 2}));
        assert_eq!(v, Violation::new("/k", "no property `k` (not in the schema)", "2"));
        // A property *named* additionalProperties whose schema is `false` is an ordinary false schema.
        let schema = json!({"properties": {"additionalProperties": false}});
        let v = one(schema, json!({"additionalProperties": {"a": 1}}));
        assert_eq!(v, Violation::new("/additionalProperties", "no value here (the schema allows nothing)", "object"));
    }

    #[test]
    fn summary_stays_one_line_per_violation() {
        let v = one(json!({"additionalProperties": false}), json!({"a\nb": "x\ny"}));
        assert_eq!(v.pointer, "/a\nb");
        assert_eq!(v.expected, "no property `a\\nb` (not in the schema)");
        assert_eq!(v.found, "\"x\\ny\"");
        assert_eq!(summary(&[v.clone(), v]).lines().count(), 2);
        assert_eq!(summary(&[]), "");
    }

    #[test]
    fn bad_schemas_are_errors_not_panics() {
        for bad in [
            json!({"type": "strnig"}),
            json!({"type": 5}),
            json!({"minLength": -1}),
            json!({"pattern": "(unclosed"}),
            json!({"$ref": "#/$defs/Missing"}),
            json!({"$ref": "https://example.com/remote.json"}),
            json!({"$ref": "file:///etc/passwd"}),
            json!({"required": "x"}),
            json!(42),
        ] {
            let err = CompiledSchema::compile(&bad).expect_err(&bad.to_string());
            assert!(err.to_string().starts_with("invalid JSON Schema: "), "{err}");
            assert!(!err.message().is_empty());
            let _: &dyn std::error::Error = &err;
        }
        let err = CompiledSchema::compile(&json!({"type": 5})).unwrap_err();
        let source = std::error::Error::source(&err).expect("the validator's error");
        assert!(source.is::<ValidationError<'static>>(), "{source:?}");
        // Boolean schemas are schemas.
        assert!(compile(json!(true)).is_valid(&json!(1)));
        assert!(!compile(json!(false)).is_valid(&json!(1)));
    }

    /// A `$ref` to a URL that answers is refused without being fetched: a listener on loopback that accepts (and
    /// at once closes) every connection counts none while the schemas are compiled.
    #[test]
    fn a_ref_to_a_reachable_url_is_never_fetched() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (connections, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let counter = {
            let (connections, stop) = (connections.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            connections.fetch_add(1, Ordering::SeqCst);
                            drop(stream);
                        }
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                    }
                }
                // A connection still queued counts too.
                while listener.accept().is_ok() {
                    connections.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        for schema in [
            json!({"$ref": format!("http://{addr}/remote.json")}),
            json!({"type": "object", "properties": {"a": {"$ref": format!("http://{addr}/a.json#/$defs/x")}}}),
            json!({"$defs": {"x": {"$ref": format!("http://{addr}/x.json")}}, "$ref": "#/$defs/x"}),
        ] {
            let err = CompiledSchema::compile(&schema).expect_err(&schema.to_string());
            assert!(err.to_string().starts_with("invalid JSON Schema: "), "{err}");
        }
        stop.store(true, Ordering::SeqCst);
        counter.join().unwrap();
        assert_eq!(connections.load(Ordering::SeqCst), 0, "a schema reference was fetched from {addr}");
    }

    #[test]
    fn compiled_schema_is_shareable() {
        let s = std::sync::Arc::new(compile(incident_schema()));
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let s = s.clone();
                std::thread::spawn(move || s.is_valid(&json!({"incident_id": format!("INC-{i}")})))
            })
            .collect();
        for h in handles {
            assert!(h.join().unwrap());
        }
    }

    #[test]
    fn limits_accept_ordinary_values() {
        let v = json!({"a": [1, 2.5, "x", null, true, {"b": {}}], "c": "é\"\n"});
        assert_eq!(check_limits(&v, &Limits::default()), Ok(()));
        assert_eq!(check_limits(&json!(1), &Limits { max_depth: 0, max_bytes: 10 }), Ok(()));
    }

    #[test]
    fn the_limits_walk_notes_nulls() {
        let scan = |v: Value| super::check_limits_scan(&v, &Limits::default());
        assert_eq!(scan(json!({"a": 1, "b": [true, "x"], "c": {"d": 2.5}})), Ok(false));
        assert_eq!(scan(json!(null)), Ok(true));
        assert_eq!(scan(json!({"a": 1, "b": null})), Ok(true));
        assert_eq!(scan(json!({"a": [1, [{"b": null}]]})), Ok(true));
        // Decided by the exact walk (the bound is over the limit, the size is not): it does not look, so it says
        // "maybe".
        let tight = Limits { max_depth: 8, max_bytes: 9 };
        assert_eq!(super::check_limits_scan(&json!({"a": "b"}), &tight), Ok(true));
        assert!(super::check_limits_scan(&json!({"a": "bcdefgh"}), &tight).is_err());
    }

    #[test]
    fn limits_byte_count_is_exact() {
        for v in [
            json!({"a": [1, 2.5, "x", null, true, false, {"b": {}}], "c": "é\"\n\u{1}", "": []}),
            json!([]),
            json!({}),
            json!("\t\\"),
            json!(-12345678901234i64),
            json!(1e300),
            json!(u64::MAX),
        ] {
            let len = serde_json::to_string(&v).unwrap().len();
            let at = |max_bytes| check_limits(&v, &Limits { max_depth: 64, max_bytes });
            assert_eq!(at(len), Ok(()), "{v}");
            let err = at(len - 1).expect_err("one byte too many");
            assert_eq!(
                err,
                Violation::new(
                    "",
                    format!("at most {} bytes of JSON", len - 1),
                    format!("more than {} bytes", len - 1)
                )
            );
        }
    }

    #[test]
    fn limits_depth() {
        let limits = Limits { max_depth: 3, max_bytes: usize::MAX };
        assert_eq!(check_limits(&json!({"a": [{"b": 1}]}), &limits), Ok(()));
        let err = check_limits(&json!({"a": [1, {"b/~": [[]]}]}), &limits).unwrap_err();
        assert_eq!(err.pointer, "/a/1/b~1~0");
        assert_eq!(err.expected, "at most 3 levels of nested arrays and objects");
        assert_eq!(err.found, "more than 3 levels");
        let err = check_limits(&json!([]), &Limits { max_depth: 0, max_bytes: 100 }).unwrap_err();
        assert_eq!(err.pointer, "");
    }

    #[test]
    fn limits_on_100k_deep_array_do_not_overflow() {
        let v = deep_array(100_000);
        let err = check_limits(&v, &Limits::default()).unwrap_err();
        assert_eq!(err.pointer, "/0".repeat(64));
        assert_eq!(err.expected, "at most 64 levels of nested arrays and objects");
        // The size limit is also enforced without recursion.
        let err = check_limits(&v, &Limits { max_depth: usize::MAX, max_bytes: 1000 }).unwrap_err();
        assert_eq!(err.pointer, "");
        assert_eq!(check_limits(&v, &Limits { max_depth: usize::MAX, max_bytes: usize::MAX }), Ok(()));
        drop_deep(v);
    }

    #[test]
    fn limits_on_huge_string() {
        let v = json!({"s": "x".repeat(2 * 1024 * 1024)});
        let err = check_limits(&v, &Limits::default()).unwrap_err();
        assert_eq!(err, Violation::new("", "at most 1048576 bytes of JSON", "more than 1048576 bytes"));
    }

    #[test]
    fn previews() {
        assert_eq!(preview(&json!(null)), "null");
        assert_eq!(preview(&json!(false)), "false");
        assert_eq!(preview(&json!("é")), "\"é\"");
        assert_eq!(preview(&json!("a".repeat(38))), format!("\"{}\"", "a".repeat(38)));
        assert_eq!(preview(&json!("a".repeat(39))), format!("\"{}…", "a".repeat(38)));
        assert_eq!(preview(&json!("\u{0}".repeat(100))).chars().count(), 40);
        assert_eq!(preview(&json!([1])), "array");
        assert_eq!(preview(&json!({"a": 1})), "object");
        assert_eq!(truncate_chars("héllo", 3), "hé…");
        assert_eq!(truncate_chars("hé", 3), "hé");
    }
}
