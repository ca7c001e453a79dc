//! The validated model of one `#[tool]` fn: how its parameters map to arguments and injections, and what it
//! returns. Built from the parsed fn; every problem goes to the [`Ctxt`].

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, Ident, Pat, PathArguments, ReturnType, Type};

use crate::attr::{Effect, ToolAttr};
use crate::ctxt::Ctxt;

/// One parameter of the fn, in call order. Its role (injected, a named argument, or the whole of the arguments)
/// is not decided here: the generated code resolves it from the type's traits (see `keel_tools_core::__private`), so an
/// alias, a renamed import or the user's own extractor is recognised for what it is.
pub struct Param {
    /// The binding's name; `None` for a pattern (`State(db): State<Db>`).
    pub ident: Option<Ident>,
    pub ty: Box<Type>,
    /// `#[arg]` was written: the parameter is a named argument, whatever its type implements.
    pub explicit: bool,
    pub description: Option<String>,
    /// `#[arg(header = "...")]`: the HTTP header MCP mirrors the argument into (`x-mcp-header`).
    pub header: Option<String>,
    pub span: Span,
}

pub enum Output {
    /// `-> Result<T, E>` (or an alias `Result<T>`, whose `E` is left to inference): `T` is the result type.
    Result { ok: Box<Type>, err: Option<Box<Type>> },
    /// `-> T`.
    Plain { ty: Box<Type> },
    /// No return type.
    Unit,
}

pub struct Tool {
    pub name: String,
    pub name_span: Span,
    pub description: String,
    pub version: String,
    pub effect: Effect,
    pub idempotent: bool,
    pub timeout_ms: Option<u64>,
    pub tags: Vec<String>,
    pub scopes: Vec<String>,
    pub is_async: bool,
    /// A plain fn run on the blocking pool (`blocking = true`); without the key it runs inline.
    pub blocking: bool,
    pub task: Option<crate::attr::Task>,
    pub task_start_handler: bool,
    /// `example = "..."`: each a JSON object of arguments, as written.
    pub examples: Vec<String>,
    /// `defer`: kept out of the list the model is shown until a search surfaces it.
    pub deferred: bool,
    pub params: Vec<Param>,
    pub output: Output,
}

fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        Type::Group(g) => last_segment(&g.elem),
        Type::Paren(p) => last_segment(&p.elem),
        _ => None,
    }
}

/// The owned type to suggest for a reference parameter: `String` for `&str`, `Vec<T>` for `&[T]`, `T` for `&T`.
fn owned_suggestion(elem: &Type) -> String {
    match elem {
        Type::Path(p) if p.path.is_ident("str") => "String".to_owned(),
        Type::Slice(s) => {
            let inner = &s.elem;
            format!("Vec<{}>", quote::quote!(#inner)).replace(' ', "")
        }
        other => quote::quote!(#other).to_string().replace(" < ", "<").replace(" >", ">").replace(" :: ", "::"),
    }
}

/// What `#[arg(...)]` says of a parameter.
#[derive(Default)]
struct ArgAttr {
    present: bool,
    description: Option<String>,
    header: Option<String>,
}

/// An RFC 9110 token character: what an HTTP header name is made of.
fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// Reads and removes `#[arg(...)]` from a parameter.
fn take_arg_attr(cx: &Ctxt, attrs: &mut Vec<syn::Attribute>) -> ArgAttr {
    let mut arg = ArgAttr::default();
    let mut kept = Vec::new();
    for attr in attrs.drain(..) {
        if attr.path().is_ident("doc") {
            cx.error_spanned_by(
                &attr,
                "doc comments are not allowed on parameters; write #[arg(description = \"...\")] instead",
            );
            continue;
        }
        if !attr.path().is_ident("arg") {
            kept.push(attr);
            continue;
        }
        if arg.present {
            cx.error_spanned_by(&attr, "duplicate #[arg(...)] on this parameter; merge them into one");
            continue;
        }
        arg.present = true;
        if matches!(attr.meta, syn::Meta::Path(_)) {
            continue;
        }
        let res = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("description") {
                let s: syn::LitStr = meta.value()?.parse()?;
                if arg.description.is_some() {
                    return Err(meta.error("duplicate `description` in #[arg(...)]"));
                }
                arg.description = Some(s.value());
                Ok(())
            } else if meta.path.is_ident("header") {
                let s: syn::LitStr = meta.value()?.parse()?;
                if arg.header.is_some() {
                    return Err(meta.error("duplicate `header` in #[arg(...)]"));
                }
                let header = s.value();
                if header.is_empty() || !header.chars().all(is_tchar) {
                    return Err(syn::Error::new(
                        s.span(),
                        "`header` is an HTTP header name: letters, digits and !#$%&'*+-.^_`|~, e.g. \
                         #[arg(header = \"Region\")]",
                    ));
                }
                arg.header = Some(header);
                Ok(())
            } else {
                Err(meta.error(
                    "unknown key in #[arg(...)]; the keys are `description` and `header`, e.g. \
                     #[arg(description = \"The incident id\")]",
                ))
            }
        });
        if let Err(e) = res {
            cx.syn_error(e);
        }
    }
    *attrs = kept;
    arg
}

/// Strips `#[arg]` from every parameter (used on the fallback path too).
pub fn strip_arg_attrs(sig: &mut syn::Signature) {
    for input in sig.inputs.iter_mut() {
        if let FnArg::Typed(pt) = input {
            pt.attrs.retain(|a| !a.path().is_ident("arg"));
        }
    }
}

fn doc_description(attrs: &[syn::Attribute]) -> Option<String> {
    let mut lines = Vec::new();
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &attr.meta
            && let syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) = &nv.value
        {
            let v = s.value();
            lines.push(v.strip_prefix(' ').unwrap_or(&v).trim_end().to_owned());
        }
    }
    let text = lines.join("\n").trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn output(cx: &Ctxt, ret: &ReturnType) -> Output {
    let ty = match ret {
        ReturnType::Default => return Output::Unit,
        ReturnType::Type(_, ty) => &**ty,
    };
    if let Type::ImplTrait(_) = ty {
        cx.error_spanned_by(ty, "#[tool] fns must name their return type; replace `impl Trait` with a concrete type");
        return Output::Unit;
    }
    if let Type::Reference(_) = ty {
        cx.error_spanned_by(ty, "#[tool] fns must return an owned value; return e.g. `String` instead of `&str`");
        return Output::Unit;
    }
    if let Some(seg) = last_segment(ty)
        && seg.ident == "Result"
        && let PathArguments::AngleBracketed(args) = &seg.arguments
        && let Some(GenericArgument::Type(ok)) = args.args.first()
    {
        let err = match args.args.iter().nth(1) {
            Some(GenericArgument::Type(e)) => Some(Box::new(e.clone())),
            _ => None,
        };
        return Output::Result { ok: Box::new(ok.clone()), err };
    }
    Output::Plain { ty: Box::new(ty.clone()) }
}

pub fn build(cx: &Ctxt, attr: &ToolAttr, func: &mut syn::ItemFn) -> Option<Tool> {
    let sig = &mut func.sig;
    if let Some(recv) = sig.receiver() {
        cx.error_spanned_by(
            recv,
            "#[tool] handlers are free functions; remove `self` and take what you need as arguments or `State<T>`",
        );
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        cx.error_spanned_by(
            &sig.generics,
            "#[tool] fns cannot be generic: the argument and result schemas are generated for concrete types; \
             remove the generic parameters",
        );
    }
    if let Some(abi) = &sig.abi {
        cx.error_spanned_by(
            abi,
            "#[tool] fns cannot be `extern`; remove the ABI and call the foreign fn from the body",
        );
    }
    if let syn::Safety::Unsafe(u) = &sig.safety {
        cx.error_spanned_by(
            u,
            "#[tool] fns cannot be `unsafe`: the model must not be able to call unsafe code; make the fn safe",
        );
    }
    if let Some(v) = &sig.variadic {
        cx.error_spanned_by(v, "#[tool] fns cannot be variadic");
    }
    if let Some(t) = &attr.task_start_handler
        && attr.task.is_none()
    {
        cx.error_at(t.span, "`task_start` applies to task tools; add `task = \"optional\"` or `task = \"required\"`");
    }
    if let Some(b) = &attr.blocking
        && sig.asyncness.is_some()
    {
        cx.error_at(b.span, "`blocking` applies to plain fns only; an async fn is always polled on the runtime");
    }

    // Parameters.
    let mut params: Vec<Param> = Vec::new();
    for input in sig.inputs.iter_mut() {
        let FnArg::Typed(pt) = input else { continue };
        let ArgAttr { present: explicit, description, header } = take_arg_attr(cx, &mut pt.attrs);
        if let Type::Reference(r) = &*pt.ty {
            cx.error_spanned_by(
                &pt.ty,
                format_args!(
                    "#[tool] parameters are taken by value: each call builds them anew, from the model's arguments \
                     or from the call; write `{}` instead",
                    owned_suggestion(&r.elem)
                ),
            );
            continue;
        }
        let ident = match &*pt.pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => Some(pi.ident.clone()),
            _ => None,
        };
        if ident.is_none() && explicit {
            cx.error_spanned_by(
                &pt.pat,
                "an #[arg] parameter needs a plain name (e.g. `incident_id: String`): the name is the argument's \
                 name in the schema",
            );
        }
        params.push(Param { ident, ty: pt.ty.clone(), explicit, description, header, span: pt.pat.span() });
    }

    // Name, description and flags.
    let (name, name_span) = match &attr.name {
        Some(n) => (n.value.clone(), n.span),
        None => {
            let n = sig.ident.to_string();
            let n = n.strip_prefix("r#").unwrap_or(&n).to_owned();
            if let Err(e) = keel_tools_names::validate(&n) {
                cx.error_spanned_by(
                    &sig.ident,
                    format_args!(
                        "{e}; the fn name is the default tool name: rename the fn or add `name = \"{}\"`",
                        keel_tools_names::suggest(&n).unwrap_or_else(|| "...".to_owned())
                    ),
                );
            }
            (n, sig.ident.span())
        }
    };
    let description = match (&attr.description, doc_description(&func.attrs)) {
        (Some(d), _) => Some(d.value.clone()),
        (None, Some(d)) => Some(d),
        (None, None) if attr.has("description") => None,
        (None, None) => {
            cx.error_spanned_by(
                &func.sig.ident,
                format_args!(
                    "tool `{name}` has no description; the model needs one to decide when to call it: add a doc \
                     comment (`/// Looks up ...`) or `description = \"...\"`"
                ),
            );
            None
        }
    };
    let sig = &func.sig;
    // A key written with a bad value has its own error already; only an absent key is "missing".
    let effect = match &attr.effect {
        Some(e) => Some(e.value),
        None if attr.has("effect") => None,
        None => {
            cx.error_at(
                Span::call_site(),
                "missing `effect`: add effect = \"read\", \"write\" or \"destructive\" to #[tool(...)]",
            );
            None
        }
    };
    let version = match &attr.version {
        Some(v) => Some(v.value.clone()),
        None if attr.has("version") => None,
        None => {
            cx.error_at(
                Span::call_site(),
                "missing `version`: add version = \"1.0\" (MAJOR.MINOR or MAJOR.MINOR.PATCH) to #[tool(...)]",
            );
            None
        }
    };
    let output = output(cx, &sig.output);
    check_examples(cx, &attr.examples, &params);
    let effect = effect?;
    Some(Tool {
        name,
        name_span,
        description: description?,
        version: version?,
        effect,
        idempotent: attr.idempotent.as_ref().map(|i| i.value).unwrap_or(effect == Effect::Read),
        timeout_ms: attr.timeout_ms.as_ref().map(|t| t.value),
        tags: attr.tags.as_ref().map(|t| t.value.clone()).unwrap_or_default(),
        scopes: attr.scopes.as_ref().map(|t| t.value.clone()).unwrap_or_default(),
        is_async: sig.asyncness.is_some(),
        blocking: attr.blocking.as_ref().is_some_and(|b| b.value),
        task: attr.task.as_ref().map(|t| t.value),
        task_start_handler: attr.task_start_handler.as_ref().is_some_and(|t| t.value),
        examples: attr.examples.iter().map(|e| e.text.clone()).collect(),
        deferred: attr.defer.as_ref().is_some_and(|d| d.value),
        params,
        output,
    })
}

// ---------------------------------------------------------------------------------------------------------------
// Examples. A parameter's role is resolved from its type's traits by the generated code, so what the macro can say
// of an example's keys is limited to what holds whatever those traits say:
//
// - a fn without parameters takes no arguments;
// - a parameter with `#[arg]`, or whose type is one of the standard value types below (which no extractor can be:
//   `FromCallContext` is keel's trait and these are std's types), is certainly a named argument, and then the
//   tool's arguments are its named parameters: an `Args<T>` beside it fails the registry's build, and a lone such
//   parameter is never taken for an args struct (its schema is not a struct's);
// - a certainly named argument whose type is certainly not an `Option` is required.
//
// Everything else (a tool whose lone parameter may be an args struct, the types of the user's own) is left to the
// registry's build, which validates every example against the tool's argument schema.
// ---------------------------------------------------------------------------------------------------------------

/// The single path segment of a type written as a plain path (`String`, `Vec<u8>`), or `None`.
fn plain_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(p) if p.qself.is_none() && p.path.leading_colon.is_none() && p.path.segments.len() == 1 => {
            p.path.segments.first()
        }
        Type::Group(g) => plain_segment(&g.elem),
        Type::Paren(p) => plain_segment(&p.elem),
        _ => None,
    }
}

/// The type argument of `Name<T>`.
fn only_type_argument(seg: &syn::PathSegment) -> Option<&Type> {
    match &seg.arguments {
        PathArguments::AngleBracketed(args) if args.args.len() == 1 => match args.args.first() {
            Some(GenericArgument::Type(t)) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

/// `(is a standard value type, may be left out)`: `String`, `bool`, `char`, the numbers, `Vec<T>`, and `Option<T>`
/// of one of these (an `Option<State<T>>` is injected).
fn value_type(ty: &Type) -> Option<bool> {
    const SCALARS: &[&str] = &[
        "String", "bool", "char", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128",
        "usize", "f32", "f64",
    ];
    let seg = plain_segment(ty)?;
    let name = seg.ident.to_string();
    match (name.as_str(), &seg.arguments) {
        (n, PathArguments::None) if SCALARS.contains(&n) => Some(false),
        ("Vec", _) => only_type_argument(seg).map(|_| false),
        ("Option", _) => only_type_argument(seg).and_then(value_type).map(|_| true),
        _ => None,
    }
}

/// Whether `ty` is certainly not an `Option` (so that the argument is required): a standard value type other than
/// `Option`.
fn certainly_required(ty: &Type) -> bool {
    value_type(ty) == Some(false)
}

/// The edit distance between two short names.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != *cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// The name of `names` nearest `key`, if one is near enough to be a slip.
fn nearest<'a>(key: &str, names: &[&'a str]) -> Option<&'a str> {
    let lower = key.to_lowercase();
    names
        .iter()
        .map(|n| (distance(&lower, n), *n))
        .filter(|(d, n)| *d <= (n.chars().count() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

fn backticked(names: &[&str]) -> String {
    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

/// Checks each example's keys against the parameters, as far as the parameters' syntax settles the arguments.
fn check_examples(cx: &Ctxt, examples: &[crate::attr::Example], params: &[Param]) {
    let names: Vec<String> = params.iter().filter_map(|p| p.ident.as_ref()).map(unraw).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let named = |p: &Param| p.explicit || value_type(&p.ty).is_some();
    let gathered = params.iter().any(named);
    for example in examples {
        if params.is_empty() {
            if !example.value.is_empty() {
                cx.error_at(example.span, "this tool has no parameters, so it takes no arguments; its example is `{}`");
            }
            continue;
        }
        if !gathered {
            continue;
        }
        for key in example.value.keys() {
            if names.contains(&key.as_str()) {
                continue;
            }
            let hint = match nearest(key, &names) {
                Some(n) => format!("; did you mean `{n}`?"),
                None => String::new(),
            };
            // A parameter of a type the macro cannot place may be injected (`CallContext`, `State<T>`) rather than
            // be an argument: named apart.
            let (known, other): (Vec<&Param>, Vec<&Param>) = params.iter().partition(|p| named(p));
            let list = |ps: &[&Param]| {
                let names: Vec<String> = ps.iter().filter_map(|p| p.ident.as_ref()).map(unraw).collect();
                backticked(&names.iter().map(String::as_str).collect::<Vec<_>>())
            };
            let others = match other.len() {
                0 => String::new(),
                1 => format!(" (and {}, unless it is injected)", list(&other)),
                _ => format!(" (and {}, unless they are injected)", list(&other)),
            };
            cx.error_at(
                example.span,
                format_args!(
                    "this example names `{key}`, which is not a parameter of the tool; its parameters are \
                     {}{others}{hint}",
                    list(&known)
                ),
            );
        }
        let missing: Vec<&str> = params
            .iter()
            .filter(|p| named(p) && certainly_required(&p.ty))
            .filter_map(|p| p.ident.as_ref())
            .map(unraw)
            .filter(|n| !example.value.contains_key(n))
            .filter_map(|n| names.iter().copied().find(|m| *m == n))
            .collect();
        match missing.as_slice() {
            [] => {}
            [one] => cx.error_at(
                example.span,
                format_args!(
                    "this example leaves out `{one}`, which the tool requires (only an `Option` parameter may be left \
                     out); add it, e.g. `\"{one}\": ...`"
                ),
            ),
            many => cx.error_at(
                example.span,
                format_args!(
                    "this example leaves out {}, which the tool requires (only an `Option` parameter may be left \
                     out); add them",
                    backticked(many)
                ),
            ),
        }
    }
}

fn unraw(ident: &Ident) -> String {
    let s = ident.to_string();
    s.strip_prefix("r#").map(str::to_owned).unwrap_or(s)
}
