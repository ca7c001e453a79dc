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

// The reference (src/tool.md): keel-guide's doctests compile and run its examples against keel-tools-core, so that
// this crate needs no dev-dependencies (a proc-macro's tests and doctests build them for the host: a second build of
// keel-tools-core and its dependencies in every `cargo test --workspace`).
#[doc = include_str!("tool.md")]
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
