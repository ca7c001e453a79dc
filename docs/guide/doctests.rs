//! The guide's chapters, the README, docs/DEPLOYMENT.md and the reference of `#[tool]`, as documentation of this
//! crate: `cargo test -p keel-guide` compiles each of their Rust blocks and runs those not marked `no_run`. The crate
//! has nothing else.
//!
//! Every block of every chapter shares one test binary (edition 2024 merges doctests), so each `#[tool]` a block
//! declares has a name no other block uses, and each block builds its view by names.

/// README.md.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct Readme;

/// The reference of `#[tool]` (tool-macros/src/tool.md, keel-tools-macros' documentation of the attribute).
#[cfg(doctest)]
#[doc = include_str!("../../tool-macros/src/tool.md")]
pub struct ToolAttribute;

/// docs/DEPLOYMENT.md.
#[cfg(doctest)]
#[doc = include_str!("../DEPLOYMENT.md")]
pub struct Deployment;

macro_rules! chapters {
    ($($name:ident = $file:literal;)*) => {$(
        #[doc = concat!("docs/guide/src/", $file, ".")]
        #[cfg(doctest)]
        #[doc = include_str!(concat!("src/", $file))]
        pub struct $name;
    )*};
}

chapters! {
    Introduction = "introduction.md";
    WritingTools = "writing-tools.md";
    Executor = "executor.md";
    Providers = "providers.md";
    McpServing = "mcp-serving.md";
    Forwarders = "forwarders.md";
    Agents = "agents.md";
    BigToolSets = "big-tool-sets.md";
    EffectsOnce = "effects-once.md";
    Testing = "testing.md";
    SchemaLock = "schema-lock.md";
    KeelCommand = "keel-command.md";
    Security = "security.md";
}
