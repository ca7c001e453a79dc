//! What the registry knows of a compiled tool's parameters: each one's role, name and schema ([`ParamInfo`], built
//! by the code `#[tool]` generates), and how the model's arguments map onto them ([`Plan`]). Internal: the
//! generated code reaches these through `__private`.

use serde_json::Value;

use crate::call_context::Requirements;

/// A parameter's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Filled from the call.
    Injected,
    /// One named argument.
    Named,
    /// The whole of the arguments (`Args<T>`).
    Whole,
}

/// What the registry and the thunk know of one parameter.
#[derive(Clone, Copy)]
pub struct ParamInfo {
    /// The parameter's name (the argument's name for a named argument).
    pub name: &'static str,
    /// `#[arg(description = "...")]`.
    pub description: Option<&'static str>,
    /// `#[arg(header = "...")]`: the HTTP header MCP mirrors the argument into.
    pub header: Option<&'static str>,
    /// The role.
    pub kind: Kind,
    /// Whether `#[arg]` was written (a lone `#[arg]` parameter is never the args struct).
    pub explicit: bool,
    /// The argument's schemas; `None` for an injected parameter.
    pub schema: Option<ArgSchema>,
    /// What an injected parameter needs from the executor.
    pub requirements: fn(&mut Requirements),
}

/// How to produce an argument's schema.
#[derive(Clone, Copy)]
pub struct ArgSchema {
    /// As a property of the generated args object.
    pub property: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
    /// As the root schema of the whole arguments.
    pub root: fn() -> Value,
    /// Whether the property may be left out (`Option<T>`).
    pub is_option: fn() -> bool,
}

/// How a tool's arguments map to its parameters, decided once from the parameters' roles and schemas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// No argument parameters: the schema is an empty object.
    Empty,
    /// The named arguments are the properties of one object.
    Gathered,
    /// The parameter at this index is the whole of the arguments: an `Args<T>`, or a lone parameter (without
    /// `#[arg]`) whose type is a struct.
    Whole(usize),
    /// The parameters cannot be mapped (e.g. `Args<T>` beside other arguments); the registry's build reports it.
    Invalid(String),
}

impl Plan {
    /// Decides the plan.
    pub fn new(params: &[ParamInfo]) -> Plan {
        let args: Vec<(usize, &ParamInfo)> =
            params.iter().enumerate().filter(|(_, p)| p.kind != Kind::Injected).collect();
        if let Some((i, p)) = params.iter().enumerate().find(|(_, p)| p.header.is_some() && p.kind != Kind::Named) {
            return Plan::Invalid(format!(
                "its parameter {} has #[arg(header = ...)], which mirrors one named argument into an HTTP header, \
                 but the parameter is {}; put the header on a field of the args struct instead \
                 (#[schemars(extend(\"x-mcp-header\" = \"{}\"))])",
                i + 1,
                if p.kind == Kind::Whole { "the whole of the arguments" } else { "filled from the call" },
                p.header.unwrap_or_default()
            ));
        }
        let wholes: Vec<&(usize, &ParamInfo)> = args.iter().filter(|(_, p)| p.kind == Kind::Whole).collect();
        match (wholes.as_slice(), args.as_slice()) {
            ([(i, _)], [_]) => Plan::Whole(*i),
            ([(at, _), ..], _) => {
                let others: Vec<String> = args
                    .iter()
                    .filter(|(i, _)| i != at)
                    .map(
                        |(i, p)| {
                            if p.name.is_empty() { format!("parameter {}", i + 1) } else { format!("`{}`", p.name) }
                        },
                    )
                    .collect();
                Plan::Invalid(format!(
                    "its parameter {} takes the whole of the arguments (`Args<T>`), so the tool can have no other \
                     argument parameters, but it also has {}; move them into the args struct, or make every argument a \
                     named parameter instead of `Args<T>`",
                    at + 1,
                    others.join(", ")
                ))
            }
            (_, []) => Plan::Empty,
            (_, [(i, p)]) if !p.explicit && p.schema.is_some_and(|s| is_args_struct(&(s.root)())) => Plan::Whole(*i),
            _ => Plan::Gathered,
        }
    }
}

/// Whether a root schema describes a struct (an object with named properties, or with neither properties nor a
/// schema for arbitrary keys): such a lone parameter is the args struct. A map, a string, an enum, an `Option` are
/// named arguments.
fn is_args_struct(schema: &Value) -> bool {
    let Some(object) = schema.as_object() else { return false };
    object.get("type").and_then(Value::as_str) == Some("object")
        && (object.contains_key("properties")
            || matches!(object.get("additionalProperties"), None | Some(Value::Bool(false))))
}
