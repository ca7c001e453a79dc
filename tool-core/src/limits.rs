//! [`Limits`]: the size and depth guards on untrusted values, checked on argument text before it is parsed and
//! on values before they are validated.

/// Size guards applied to untrusted values: on argument text before it is parsed
/// ([`ToolCall::from_json_text_with_limits`](crate::ToolCall::from_json_text_with_limits), every
/// [`Codec`](crate::Codec)), and on values before schema validation (the [`Executor`](crate::Executor)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most nested arrays/objects: `{}` is depth 1, `{"a":[1]}` depth 2, a scalar depth 0. Default 64.
    pub max_depth: usize,
    /// Most bytes of the value's compact JSON text (computed exactly, without serializing). Default 1 MiB.
    pub max_bytes: usize,
}

impl Limits {
    /// The defaults: depth 64, 1 MiB.
    pub const DEFAULT: Limits = Limits { max_depth: 64, max_bytes: 1024 * 1024 };

    /// The defaults for results: depth 128, 8 MiB
    /// ([`ExecutorBuilder::output_limits`](crate::ExecutorBuilder::output_limits)).
    pub const OUTPUT_DEFAULT: Limits = Limits { max_depth: 128, max_bytes: 8 * 1024 * 1024 };
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}
