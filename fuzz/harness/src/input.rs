//! Inputs: one call to check, and how its arguments reach the executor.

use std::fmt;

use keel_tools_core::{Provider, ToolCall, ToolView};
use proptest::prelude::*;
use serde_json::{Value, json};

/// How the arguments reach the executor.
#[derive(Clone)]
pub enum Args {
    /// `ToolCall::new` with a value.
    Value(Value),
    /// `ToolCall::from_json_text` with text (OpenAI style).
    Text(String),
    /// A whole provider message, read by that provider's constructor.
    Provider(ProviderShape, Value),
}

#[derive(Debug, Clone, Copy)]
pub enum ProviderShape {
    Ollama,
    OpenAi,
    OpenAiResponses,
    Anthropic,
    Gemini,
    Mcp,
}

pub const SHAPES: [ProviderShape; 6] = [
    ProviderShape::Ollama,
    ProviderShape::OpenAi,
    ProviderShape::OpenAiResponses,
    ProviderShape::Anthropic,
    ProviderShape::Gemini,
    ProviderShape::Mcp,
];

impl ProviderShape {
    /// A well-formed message of this provider carrying `id`, `name` and `args`.
    pub fn message(self, id: &str, name: &str, args: &Value) -> Value {
        let text = serde_json::to_string(args).unwrap_or_default();
        match self {
            ProviderShape::Ollama => json!({"function": {"name": name, "arguments": args}}),
            ProviderShape::OpenAi => {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": text}})
            }
            ProviderShape::OpenAiResponses => {
                json!({"type": "function_call", "id": "fc_1", "call_id": id, "name": name, "arguments": text})
            }
            ProviderShape::Anthropic => json!({"type": "tool_use", "id": id, "name": name, "input": args}),
            ProviderShape::Gemini => json!({"functionCall": {"name": name, "args": args, "id": id}}),
            ProviderShape::Mcp => json!({"name": name, "arguments": args}),
        }
    }

    /// The provider this shape is.
    pub fn provider(self) -> Provider {
        match self {
            ProviderShape::Ollama => Provider::Ollama,
            ProviderShape::OpenAi => Provider::OpenAiChat,
            ProviderShape::OpenAiResponses => Provider::OpenAiResponses,
            ProviderShape::Anthropic => Provider::Anthropic,
            ProviderShape::Gemini => Provider::Gemini,
            ProviderShape::Mcp => Provider::Mcp,
        }
    }

    /// The call `message` carries, read by this provider's codec of `view` (an MCP message is wrapped in a
    /// `tools/call` request with `id`).
    pub fn call(self, view: &ToolView, message: &Value, id: &str) -> ToolCall {
        let codec = view.codec(self.provider());
        match self {
            ProviderShape::Mcp => {
                codec.call(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": message}), 0)
            }
            ProviderShape::Gemini => codec.call(message, 1),
            _ => codec.call(message, 0),
        }
    }
}

/// What the approval of a call covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approve {
    None,
    /// The arguments before any mutation.
    Original,
    /// Exactly the arguments sent.
    Sent,
}

/// One call to check.
#[derive(Clone)]
pub struct Input {
    pub id: String,
    pub name: String,
    pub args: Args,
    /// The approval the call carries: `(tool, arguments)`.
    pub approval: Option<(String, Value)>,
    /// The call runs for a tenant the policy denies.
    pub deny: bool,
}

/// Shortens long strings in debug output (a failing case may hold a 1 MiB string).
pub(crate) fn short(s: &str) -> String {
    if s.len() <= 300 {
        return format!("{s:?}");
    }
    let mut end = 300;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}… ({} bytes)", &s[..end], s.len())
}

impl fmt::Debug for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let args = match &self.args {
            Args::Value(v) => format!("Value({})", short(&v.to_string())),
            Args::Text(t) => format!("Text({})", short(t)),
            Args::Provider(p, m) => format!("Provider({p:?}, {})", short(&m.to_string())),
        };
        f.debug_struct("Input")
            .field("id", &short(&self.id))
            .field("name", &short(&self.name))
            .field("args", &format_args!("{args}"))
            .field("approval", &self.approval.as_ref().map(|(t, a)| format!("{t} {}", short(&a.to_string()))))
            .field("deny", &self.deny)
            .finish()
    }
}

/// How a structured input is delivered.
#[derive(Debug, Clone, Copy)]
pub enum Delivery {
    Value,
    Text,
    Provider(usize),
}

pub(crate) fn delivery() -> impl Strategy<Value = Delivery> + Clone {
    prop_oneof![6 => Just(Delivery::Value), 2 => Just(Delivery::Text), 2 => (0..SHAPES.len()).prop_map(Delivery::Provider)]
}

pub(crate) fn deliver(id: &str, name: &str, args: Value, how: Delivery) -> Args {
    match how {
        Delivery::Value => Args::Value(args),
        Delivery::Text => Args::Text(serde_json::to_string(&args).unwrap_or_default()),
        Delivery::Provider(i) => Args::Provider(SHAPES[i], SHAPES[i].message(id, name, &args)),
    }
}
