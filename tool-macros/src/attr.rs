//! Parses `#[tool(...)]` into [`ToolAttr`]. Values are literals only; unknown and repeated keys are errors.

use proc_macro2::Span;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned as _;
use syn::{Expr, ExprLit, Lit, Meta, Token};

use crate::ctxt::Ctxt;

pub const KEYS: &str = "effect, version, name, description, idempotent, timeout_ms, tags, scopes, blocking, task, \
                         task_start, example, defer, crate";

/// A value with the span of its literal.
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    Read,
    Write,
    Destructive,
}

/// `task = "optional" | "required"`: whether an MCP client may get the call as a task.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Task {
    Optional,
    Required,
}

#[derive(Default)]
pub struct ToolAttr {
    pub effect: Option<Spanned<Effect>>,
    pub version: Option<Spanned<String>>,
    pub name: Option<Spanned<String>>,
    pub description: Option<Spanned<String>>,
    pub idempotent: Option<Spanned<bool>>,
    pub timeout_ms: Option<Spanned<u64>>,
    pub tags: Option<Spanned<Vec<String>>>,
    pub scopes: Option<Spanned<Vec<String>>>,
    pub blocking: Option<Spanned<bool>>,
    pub task: Option<Spanned<Task>>,
    /// `task_start = "handler"`: the handler says when the call becomes a task.
    pub task_start_handler: Option<Spanned<bool>>,
    pub krate: Option<Spanned<syn::Path>>,
    /// `example = r#"{...}"#`, repeatable: each a JSON object of arguments, as written (its text) and parsed.
    pub examples: Vec<Example>,
    /// `defer` or `defer = bool`.
    pub defer: Option<Spanned<bool>>,
    /// Every key written, valid or not: a bad value must not also read as a missing key.
    seen: Vec<String>,
}

impl ToolAttr {
    /// Whether `key` was written (whatever its value).
    pub fn has(&self, key: &str) -> bool {
        self.seen.iter().any(|k| k == key)
    }
}

/// One `example = "..."`: the JSON text as written, the object it parses to, and the literal's span.
pub struct Example {
    pub text: String,
    pub value: serde_json::Map<String, serde_json::Value>,
    pub span: Span,
}

/// The example shown in messages about `example`.
const EXAMPLE_SYNTAX: &str = "example = r#\"{\"incident_id\": \"INC-001\"}\"#";

fn set<T>(slot: &mut Option<Spanned<T>>, value: Option<Spanned<T>>) {
    if value.is_some() {
        *slot = value;
    }
}

fn value_example(key: &str) -> &'static str {
    match key {
        "effect" => "effect = \"read\"",
        "version" => "version = \"1.0\"",
        "name" => "name = \"incident.search\"",
        "description" => "description = \"Looks up one incident by its id.\"",
        "idempotent" => "idempotent = true",
        "timeout_ms" => "timeout_ms = 5000",
        "tags" => "tags = [\"incident\"]",
        "scopes" => "scopes = [\"tickets.write\"]",
        "blocking" => "blocking = true",
        "task" => "task = \"optional\"",
        "task_start" => "task_start = \"handler\"",
        "example" => EXAMPLE_SYNTAX,
        "defer" => "defer = true",
        "crate" => "crate = \"keel\"",
        _ => "key = value",
    }
}

const KNOWN: &[&str] = &[
    "effect",
    "version",
    "name",
    "description",
    "idempotent",
    "timeout_ms",
    "tags",
    "scopes",
    "blocking",
    "task",
    "task_start",
    "example",
    "defer",
    "crate",
];

/// Keys that may be given more than once.
const REPEATABLE: &[&str] = &["example"];

fn key_name(path: &syn::Path) -> String {
    path.get_ident().map(|i| i.to_string()).unwrap_or_else(|| quote::quote!(#path).to_string().replace(' ', ""))
}

fn lit_of(expr: &Expr) -> Option<&Lit> {
    match expr {
        Expr::Lit(ExprLit { lit, .. }) => Some(lit),
        Expr::Group(g) => lit_of(&g.expr),
        _ => None,
    }
}

/// An array of string literals (`key = [..]`, `example` its value in the errors), each checked by `refuse`, which
/// says what is wrong with one; every error is reported at its element's span.
fn string_array(
    cx: &Ctxt,
    expr: &Expr,
    key: &str,
    example: &str,
    refuse: impl Fn(&str) -> Option<String>,
) -> Option<Spanned<Vec<String>>> {
    let Expr::Array(arr) = expr else {
        cx.error_spanned_by(expr, format!("`{key}` takes an array of string literals, e.g. `{key} = {example}`"));
        return None;
    };
    let mut values = Vec::new();
    let mut ok = true;
    for elem in &arr.elems {
        match lit_of(elem) {
            Some(Lit::Str(s)) => match refuse(&s.value()) {
                None => values.push(s.value()),
                Some(why) => {
                    cx.error_spanned_by(s, why);
                    ok = false;
                }
            },
            _ => {
                cx.error_spanned_by(elem, format!("{key} are string literals, e.g. `{key} = {example}`"));
                ok = false;
            }
        }
    }
    ok.then(|| Spanned { value: values, span: arr.span() })
}

fn str_lit(cx: &Ctxt, key: &str, expr: &Expr, example: &str) -> Option<Spanned<String>> {
    match lit_of(expr) {
        Some(Lit::Str(s)) => Some(Spanned { value: s.value(), span: s.span() }),
        _ => {
            cx.error_spanned_by(expr, format_args!("`{key}` takes a string literal, e.g. `{key} = {example}`"));
            None
        }
    }
}

fn bool_lit(cx: &Ctxt, key: &str, expr: &Expr) -> Option<Spanned<bool>> {
    match lit_of(expr) {
        Some(Lit::Bool(b)) => Some(Spanned { value: b.value, span: b.span() }),
        _ => {
            cx.error_spanned_by(expr, format_args!("`{key}` takes `true` or `false`, e.g. `{key} = true`"));
            None
        }
    }
}

/// Takes out every `example = {...}` (or `[...]`): a JSON-like token tree, which `#[tool(...)]` does not read as a
/// value; each is an error that shows the string literal to write instead.
fn take_token_tree_examples(cx: &Ctxt, args: proc_macro2::TokenStream) -> proc_macro2::TokenStream {
    use proc_macro2::{Delimiter, TokenTree};
    let tokens: Vec<TokenTree> = args.into_iter().collect();
    let mut kept = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if let (TokenTree::Ident(key), Some(TokenTree::Punct(eq)), Some(TokenTree::Group(group))) =
            (&tokens[i], tokens.get(i + 1), tokens.get(i + 2))
            && key == "example"
            && eq.as_char() == '='
            && matches!(group.delimiter(), Delimiter::Brace | Delimiter::Bracket)
        {
            let write = match serde_json::from_str::<serde_json::Value>(&group.to_string()) {
                Ok(v) => format!("example = r#\"{v}\"#"),
                Err(_) => EXAMPLE_SYNTAX.to_owned(),
            };
            cx.error_spanned_by(
                group,
                format_args!("`example` takes the arguments as a string literal of JSON: write `{write}`"),
            );
            i += 3;
            if matches!(tokens.get(i), Some(TokenTree::Punct(p)) if p.as_char() == ',') {
                i += 1;
            }
            continue;
        }
        kept.push(tokens[i].clone());
        i += 1;
    }
    kept.into_iter().collect()
}

/// `example = "..."`: a string literal holding a JSON object.
fn example(cx: &Ctxt, expr: &Expr) -> Option<Example> {
    let s = str_lit(cx, "example", expr, "r#\"{\"incident_id\": \"INC-001\"}\"#")?;
    match serde_json::from_str::<serde_json::Value>(&s.value) {
        Ok(serde_json::Value::Object(value)) => Some(Example { text: s.value, value, span: s.span }),
        Ok(other) => {
            let found = match other {
                serde_json::Value::Null => "null",
                serde_json::Value::Bool(_) => "a boolean",
                serde_json::Value::Number(_) => "a number",
                serde_json::Value::String(_) => "a string",
                serde_json::Value::Array(_) => "an array",
                serde_json::Value::Object(_) => "an object",
            };
            cx.error_at(
                s.span,
                format_args!(
                    "an example is the tool's arguments, which are a JSON object, but this is {found}; write the \
                     arguments by name, e.g. `{EXAMPLE_SYNTAX}`"
                ),
            );
            None
        }
        Err(e) => {
            cx.error_at(
                s.span,
                format_args!(
                    "this example is not valid JSON: {e}; write one JSON object of arguments, e.g. `{EXAMPLE_SYNTAX}`"
                ),
            );
            None
        }
    }
}

pub fn parse(cx: &Ctxt, args: proc_macro2::TokenStream) -> ToolAttr {
    let mut attr = ToolAttr::default();
    let args = take_token_tree_examples(cx, args);
    let metas = match syn::parse::Parser::parse2(Punctuated::<Meta, Token![,]>::parse_terminated, args) {
        Ok(m) => m,
        Err(e) => {
            cx.syn_error(syn::Error::new(
                e.span(),
                format_args!(
                    "{e}; #[tool(...)] takes `key = literal` pairs, e.g. #[tool(effect = \"read\", version = \"1.0\")]"
                ),
            ));
            return attr;
        }
    };
    for meta in metas {
        let nv = match meta {
            Meta::NameValue(nv) => nv,
            // A bare `defer` is `defer = true`.
            Meta::Path(p) if key_name(&p) == "defer" => {
                if attr.has("defer") {
                    cx.error_spanned_by(&p, "duplicate `defer` in #[tool(...)]; give each key once");
                } else {
                    attr.seen.push("defer".to_owned());
                    attr.defer = Some(Spanned { value: true, span: p.span() });
                }
                continue;
            }
            Meta::Path(p) if KNOWN.contains(&key_name(&p).as_str()) => {
                let k = key_name(&p);
                cx.error_spanned_by(&p, format_args!("`{k}` needs a value: write `{}`", value_example(&k)));
                attr.seen.push(k);
                continue;
            }
            other => {
                cx.error_spanned_by(&other, format_args!("expected `key = value`; #[tool(...)] keys are: {KEYS}"));
                continue;
            }
        };
        let key = &nv.path;
        let v = &nv.value;
        let k = key_name(key);
        if KNOWN.contains(&k.as_str()) {
            if attr.has(&k) && !REPEATABLE.contains(&k.as_str()) {
                cx.error_spanned_by(key, format_args!("duplicate `{k}` in #[tool(...)]; give each key once"));
                continue;
            }
            attr.seen.push(k.clone());
        }
        match k.as_str() {
            "effect" => {
                let parsed = str_lit(cx, "effect", v, "\"read\"").and_then(|s| {
                    let e = match s.value.as_str() {
                        "read" => Effect::Read,
                        "write" => Effect::Write,
                        "destructive" => Effect::Destructive,
                        other => {
                            cx.error_at(
                                s.span,
                                format_args!(
                                    "effect must be one of \"read\", \"write\", \"destructive\"; found {other:?}"
                                ),
                            );
                            return None;
                        }
                    };
                    Some(Spanned { value: e, span: s.span })
                });
                set(&mut attr.effect, parsed);
            }
            "version" => {
                let parsed = str_lit(cx, "version", v, "\"1.0\"").and_then(|s| {
                    if keel_tools_names::is_valid_version(&s.value) {
                        Some(s)
                    } else {
                        cx.error_at(
                            s.span,
                            format_args!(
                                "version must be \"MAJOR.MINOR\" or \"MAJOR.MINOR.PATCH\" with numeric parts and no \
                                 leading zeros, e.g. \"1.0\" or \"2.1.3\"; found {:?}",
                                s.value
                            ),
                        );
                        None
                    }
                });
                set(&mut attr.version, parsed);
            }
            "name" => {
                let parsed =
                    str_lit(cx, "name", v, "\"incident.search\"").and_then(|s| {
                        match keel_tools_names::validate(&s.value) {
                            Ok(()) => Some(s),
                            Err(e) => {
                                match keel_tools_names::suggest(&s.value) {
                                    Some(fix) => cx.error_at(s.span, format_args!("{e}; did you mean \"{fix}\"?")),
                                    None => cx.error_at(s.span, e),
                                }
                                None
                            }
                        }
                    });
                set(&mut attr.name, parsed);
            }
            "description" => {
                let parsed = str_lit(cx, "description", v, "\"Looks up one incident by its id.\"").and_then(|s| {
                    if s.value.trim().is_empty() {
                        cx.error_at(
                            s.span,
                            "description must not be empty; the model reads it to decide when to call the tool",
                        );
                        None
                    } else {
                        Some(s)
                    }
                });
                set(&mut attr.description, parsed);
            }
            "idempotent" => set(&mut attr.idempotent, bool_lit(cx, "idempotent", v)),
            "blocking" => set(&mut attr.blocking, bool_lit(cx, "blocking", v)),
            "example" => attr.examples.extend(example(cx, v)),
            "defer" => {
                let parsed = match lit_of(v) {
                    Some(Lit::Bool(b)) => Some(Spanned { value: b.value, span: b.span() }),
                    _ => {
                        cx.error_spanned_by(
                            v,
                            "`defer` takes `true` or `false`, or no value at all: write `defer` to keep the tool out \
                             of the list the model is shown until a search surfaces it",
                        );
                        None
                    }
                };
                set(&mut attr.defer, parsed);
            }
            "task" => {
                let parsed = str_lit(cx, "task", v, "\"optional\"").and_then(|s| match s.value.as_str() {
                    "optional" => Some(Spanned { value: Task::Optional, span: s.span }),
                    "required" => Some(Spanned { value: Task::Required, span: s.span }),
                    _ => {
                        cx.error_at(
                            s.span,
                            "`task` is \"optional\" (an MCP client that supports tasks gets the call as a task) or \
                             \"required\" (only such clients may call it)",
                        );
                        None
                    }
                });
                set(&mut attr.task, parsed);
            }
            "task_start" => {
                let parsed = str_lit(cx, "task_start", v, "\"handler\"").and_then(|s| match s.value.as_str() {
                    "admission" => Some(Spanned { value: false, span: s.span }),
                    "handler" => Some(Spanned { value: true, span: s.span }),
                    _ => {
                        cx.error_at(
                            s.span,
                            "`task_start` is \"admission\" (the call becomes a task once it passes validation and policy, \
                             the default) or \"handler\" (when the handler calls `ctx.begin_task()`)",
                        );
                        None
                    }
                });
                set(&mut attr.task_start_handler, parsed);
            }
            "timeout_ms" => {
                let parsed = match lit_of(v) {
                    Some(Lit::Int(i)) => match i.base10_parse::<u64>() {
                        Ok(0) | Err(_) => {
                            cx.error_spanned_by(i, "timeout_ms must be a whole number of milliseconds greater than 0, e.g. `timeout_ms = 5000`");
                            None
                        }
                        Ok(n) => Some(Spanned { value: n, span: i.span() }),
                    },
                    _ => {
                        cx.error_spanned_by(v, "`timeout_ms` takes an integer literal, e.g. `timeout_ms = 5000`");
                        None
                    }
                };
                set(&mut attr.timeout_ms, parsed);
            }
            "tags" => {
                let parsed = string_array(cx, v, "tags", "[\"incident\", \"oncall\"]", |tag| {
                    (tag.trim().is_empty()).then(|| "a tag must not be empty".to_owned())
                });
                set(&mut attr.tags, parsed);
            }
            "scopes" => {
                let parsed = string_array(cx, v, "scopes", "[\"tickets.write\"]", |scope| {
                    (!keel_tools_names::is_valid_scope(scope)).then(|| {
                        format!(
                            "{scope:?} is not an OAuth scope: write one token of printable ASCII without spaces, \
                             quotes or backslashes, e.g. \"tickets.write\""
                        )
                    })
                });
                set(&mut attr.scopes, parsed);
            }
            "crate" => {
                let parsed =
                    str_lit(cx, "crate", v, "\"keel\"").and_then(|s| match syn::parse_str::<syn::Path>(&s.value) {
                        Ok(p) => Some(Spanned { value: p, span: s.span }),
                        Err(_) => {
                            cx.error_at(
                                s.span,
                                "`crate` takes the path of the keel-tools-core dependency, e.g. `crate = \"keel\"`",
                            );
                            None
                        }
                    });
                set(&mut attr.krate, parsed);
            }
            other => {
                cx.error_spanned_by(key, format_args!("unknown key `{other}` in #[tool(...)]; the keys are: {KEYS}"))
            }
        }
    }
    attr
}
