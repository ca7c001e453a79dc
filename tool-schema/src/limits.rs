//! [`Limits`]: the size and depth guards on untrusted values, checked on argument text before it is parsed and
//! on values before they are validated.

/// Size guards applied to untrusted values: on argument text before it is parsed (keel's `ToolCall` parsing and
/// every provider codec), on values before schema validation ([`check_limits`](crate::validate::check_limits), as
/// keel's executor does) and on results as they are serialised ([`bounded`](crate::bounded)).
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

    /// The defaults for results: depth 128, 8 MiB (keel's `ExecutorBuilder::output_limits` sets others).
    pub const OUTPUT_DEFAULT: Limits = Limits { max_depth: 128, max_bytes: 8 * 1024 * 1024 };
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}
