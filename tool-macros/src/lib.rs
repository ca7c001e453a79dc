//! The `#[tool]` attribute of keel. Use it through `keel-tools-core` (`use keel_tools_core::tool;`), which provides
//! everything the generated code needs; [`macro@tool`] is its full reference.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

// Stages, each in its own module: `attr` parses `#[tool(...)]`, `model` checks the fn and builds the model,
// `expand` generates code. Errors are collected (`ctxt`) so one build reports every mistake; on error the user's fn
// is emitted unchanged beside the errors so that its callers do not cascade. Set `KEEL_MACROS_DEBUG=1` to print
// each expansion to stderr.

mod attr;
mod ctxt;
mod expand;
mod model;
mod paths;
mod site;

use proc_macro::TokenStream;
use quote::quote;

/// Declares an LLM tool: the fn's signature and doc comment become the tool's contract (name, description,
/// version, effect, argument and result JSON Schemas), registered for `keel_tools_core::Registry::from_inventory`.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
/// use keel_tools_core::{tool, tool_error, CallContext, ToolError};
///
/// /// Which incident to look up.
/// #[derive(Deserialize, JsonSchema)]
/// struct LookupArgs {
///     /// The incident id, e.g. `INC-001`.
///     incident_id: String,
/// }
///
/// #[derive(Serialize, JsonSchema)]
/// struct Incident {
///     incident_id: String,
///     status: String,
/// }
///
/// /// Look up one incident by its id.
/// #[tool(effect = "read", version = "1.0", tags = ["incident"])]
/// async fn lookup_incident(args: LookupArgs, ctx: CallContext) -> Result<Incident, ToolError> {
///     if args.incident_id != "INC-001" {
///         return Err(tool_error!("incident_not_found", "there is no incident {}", args.incident_id));
///     }
///     ctx.progress(1.0, Some(1.0), Some("found"));
///     Ok(Incident { incident_id: args.incident_id, status: "open".into() })
/// }
/// # fn main() {}
/// ```
///
/// # Keys
///
/// Every value is a literal. Unknown and malformed keys are compile errors at the key, and so is a repeated key
/// other than `example`.
///
/// | key | required | meaning |
/// |---|---|---|
/// | `effect = "read" \| "write" \| "destructive"` | yes | what the tool does to the world; `write` and `destructive` need an approval under the default policy |
/// | `version = "MAJOR.MINOR[.PATCH]"` | yes | the contract's version, reported in every result |
/// | `name = "incident.search"` | no | dot-separated snake_case segments, 1-64 characters (default: the fn name) |
/// | `description = "..."` | if no doc comment | what the model reads (default: the fn's doc comment) |
/// | `idempotent = bool` | no | default: `true` for `read`, `false` otherwise |
/// | `timeout_ms = N` | no | the tool's own timeout in milliseconds (default: the executor's) |
/// | `tags = ["..."]` | no | for choosing views (`registry.view().tag("incident")`) |
/// | `scopes = ["..."]` | no | OAuth scopes a caller needs (all of them); a caller granted fewer is refused `insufficient_scope`, and a protected MCP server does not list the tool to it |
/// | `blocking = true` | no | plain fns only: run on Tokio's blocking pool instead of inline (default: `false`, inline); see below |
/// | `example = r#"{...}"#` | no, repeatable | example arguments for the model: a string literal of one JSON object; see below |
/// | `defer` or `defer = bool` | no | a deferred tool, kept out of the list the model is shown until a search surfaces it (default: `false`) |
/// | `crate = "path"` | no | the path of keel-tools-core when `Cargo.toml` does not name it (e.g. re-exported) |
///
/// # Parameters
///
/// Each parameter's role comes from what its type implements, never from how it is spelled, so aliases and
/// renamed imports work:
///
/// - **Injected**: a type that implements `keel_tools_core::context::FromCallContext` is filled from the call and never
///   appears in a schema: `CallContext` (call id, tenant, cancellation, progress and log notifications), `State<T>`
///   (shared state given to the executor with `.state(value)`; an executor without it does not build), and your own
///   extractors (a tenant newtype, a database handle). Patterns are fine: `State(db): State<Db>`.
/// - **The whole arguments**: `Args<T>` takes the model's arguments as one `T: Deserialize + JsonSchema`
///   (`Args(query): Args<Query>`). A lone argument parameter whose type is a struct is the same (as
///   `args: LookupArgs` above). A tool with the whole arguments has no other argument parameters.
/// - **Named arguments**: every other parameter is one property of the argument object, named after the
///   parameter. Its type needs `Deserialize + JsonSchema`; `Option<T>` is optional. Document one with
///   `#[arg(description = "...")]` (doc comments are not allowed on parameters); `#[arg]` also keeps a lone
///   struct parameter a named argument.
/// - **None**: the schema is an empty object.
///
/// ```
/// use keel_tools_core::{tool, CallContext, State};
///
/// struct Notes {
///     list: std::sync::Mutex<Vec<String>>,
/// }
///
/// /// Add a note to an incident.
/// #[tool(effect = "write", version = "1.0")]
/// fn add_note(
///     #[arg(description = "The incident id")] id: String,
///     text: String,
///     priority: Option<u8>,
///     notes: State<Notes>,
///     ctx: CallContext,
/// ) -> usize {
///     let mut notes = notes.list.lock().unwrap();
///     notes.push(format!("{} {id} p{}: {text}", ctx.call_id(), priority.unwrap_or(3)));
///     notes.len()
/// }
/// # fn main() {}
/// ```
///
/// # Return types
///
/// `T`, `Result<T, E>` (or an alias such as `anyhow::Result<T>`) or nothing, with `T: Serialize + JsonSchema`
/// (its schema is the result schema the executor checks every result against). The error `E` may be:
///
/// - `ToolError`: `tool_error!("code", "message")` is a business error whose code and message reach the model
///   (the code is checked at compile time: `snake_case` and not one of the executor's own codes);
/// - any `std::error::Error + Send + Sync + 'static`, `Box<dyn Error + Send + Sync>` or `anyhow::Error`: an internal
///   error; the model reads only `tool_internal_error`, and the error with its source chain goes to the
///   executor's internal-failure hook (`ExecutorBuilder::on_internal_failure`);
/// - your own type with `impl From<YourError> for ToolError`.
///
/// A panic in the handler is caught and becomes an internal error too.
///
/// # Plain fns run inline; `blocking = true` for handlers that block
///
/// An `async fn` is polled on the caller's task. A plain `fn` is called directly on the caller's thread (a runtime
/// worker): the cheapest path, for handlers that compute a little and return. A handler that may block (file or
/// network I/O through `std`, `std::thread::sleep`, a synchronous database driver, CPU-heavy work) would hold that
/// worker for as long as it runs, so mark it `blocking = true`: it then runs on Tokio's blocking pool, which costs a
/// thread hand-off each way (tens of microseconds per call, 12 to 30 times a whole inline call).
///
/// ```
/// use keel_tools_core::tool;
///
/// /// Read a runbook from disk.
/// #[tool(effect = "read", version = "1.0", blocking = true)]
/// fn read_runbook(service: String) -> Result<String, std::io::Error> {
///     std::fs::read_to_string(format!("runbooks/{service}.md"))
/// }
/// # fn main() {}
/// ```
///
/// Either way a panic is caught and a timeout is honoured: an inline handler cannot be interrupted, so one that
/// runs past its timeout and the grace period is answered `timeout` with its result withheld
/// (`details.handler = "finished"`); a blocking-pool handler still running after the grace period is answered
/// `timeout` without waiting for it (`"running"`), and one still queued for a thread never starts (`"not_started"`).
///
/// # Examples of arguments
///
/// `example = "..."` shows the model a call: a string literal holding one JSON object, the arguments exactly as the
/// model would send them (a raw string, `r#"..."#`, spares the escapes). Give it once per example. Anthropic takes
/// them as the entry's `input_examples`; the other providers read them at the end of the description.
///
/// ```
/// use keel_tools_core::tool;
///
/// /// Open a ticket that tracks an incident.
/// #[tool(
///     effect = "write",
///     version = "1.0",
///     example = r#"{"incident_id": "INC-001", "title": "Logins fail"}"#,
///     example = r#"{"incident_id": "INC-002", "title": "Checkout is slow", "priority": 1}"#
/// )]
/// fn create_ticket(incident_id: String, title: String, priority: Option<u8>) -> String {
///     format!("{incident_id}: {title} (p{})", priority.unwrap_or(3))
/// }
/// # fn main() {}
/// ```
///
/// The macro checks each example at its literal: it must be valid JSON and an object. Where the parameters alone
/// settle what the arguments are (a fn without parameters, or one with a named parameter of a standard type:
/// `String`, a number, `bool`, `char`, `Vec<T>`, `Option<T>`, or one marked `#[arg]`), a key that is no parameter
/// and a required parameter left out are errors too. What only the types can tell (an args struct's fields, a
/// nested value of the wrong type) is checked when the registry is built: every example is validated against the
/// tool's argument schema, and one that does not match fails the build
/// (`keel_tools_core::registry::RegistryProblem::Example`, with the example's index and the JSON pointer).
///
/// # Compile errors
///
/// Each misuse is an error at the offending token that says what to write instead: an unknown, repeated or
/// non-literal key; an effect outside the closed set; a malformed version or name; an example that is not a JSON
/// object, or that names no parameter or leaves out a required one; a missing description; a
/// generic, `extern`, `unsafe` or variadic fn; a method (`self`) or an associated fn; a reference parameter
/// (`&str`, `&State<T>`); a parameter that is neither an argument nor injected; `#[arg]` on an injected
/// parameter; a pattern or a `_name` for a named argument; a result or error type that does not convert.
///
/// Two tools with the same name in one crate fail at both names with "the name
/// `duplicate_tool_name_search` is defined multiple times"; across crates, `Registry::from_inventory` fails and
/// lists every definition site.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, input: TokenStream) -> TokenStream {
    let args = proc_macro2::TokenStream::from(args);
    let input = proc_macro2::TokenStream::from(input);
    let mut func: syn::ItemFn = match syn::parse2(input.clone()) {
        Ok(f) => f,
        Err(e) => {
            let msg = format!(
                "{e}; #[tool] goes on a free fn, e.g. `async fn lookup_incident(args: LookupArgs) -> Result<Incident, ToolError>`"
            );
            let err = syn::Error::new(e.span(), msg).to_compile_error();
            return quote!(#err #input).into();
        }
    };
    if func.sig.receiver().is_none() && site::is_associated(&func.sig) {
        let name = &func.sig.ident;
        let err = syn::Error::new(
            name.span(),
            format!(
                "#[tool] goes on a free fn, not on an associated fn: move `{name}` out of the `impl` block, and take \
                 what it needs from the type as a `State<T>` parameter (given to the executor with `.state(value)`)"
            ),
        );
        return fallback(err, func).into();
    }
    let cx = ctxt::Ctxt::new();
    let attr = attr::parse(&cx, args);
    let tool = model::build(&cx, &attr, &mut func);
    let root = paths::root(&attr);
    let out = match (cx.check(), tool) {
        (Ok(()), Some(tool)) => expand::expand(&tool, &func, &root),
        (Err(e), _) => fallback(e, func),
        (Ok(()), None) => fallback(syn::Error::new(proc_macro2::Span::call_site(), "invalid #[tool]"), func),
    };
    if std::env::var_os("KEEL_MACROS_DEBUG").is_some() {
        eprintln!("{out}");
    }
    out.into()
}

/// The user's fn unchanged (minus `#[arg]`), plus the errors, so callers of the fn do not cascade.
fn fallback(err: syn::Error, mut func: syn::ItemFn) -> proc_macro2::TokenStream {
    model::strip_arg_attrs(&mut func.sig);
    let errors = ctxt::to_compile_errors(err);
    quote!(#errors #func)
}
