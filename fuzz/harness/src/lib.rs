//! The executor's invariant harness, shared by the property tests (`tests/tests/executor_properties.rs`, run in CI)
//! and the fuzz target (`fuzz/fuzz_targets/executor.rs`, run by hand; see `docs/FUZZING.md`).
//!
//! It holds:
//!
//! - a set of tools (compiled `#[tool]` fns of each handler kind and two dynamic definitions with hand-written
//!   schemas), two of them registered but left out of the executor's view (`tools`; what their handlers and the
//!   policy record is in `record`, the policy in `policy`);
//! - [`Oracle`]: an independent validator for the JSON Schema subset those tools use (object, properties, required,
//!   additionalProperties, type, enum, const, string/integer/number/boolean/array/null, items, lengths, bounds,
//!   fixed-width integer formats, anyOf/oneOf/allOf, `$ref` into `$defs`), used to predict what the executor must do
//!   (`oracle`);
//! - [`instance()`]: a generator of valid instances of such a schema, as proptest strategies (`instance`), and
//!   [`Mutation`]s that break them (drop a required key, add an unknown key, change a type, nest deeper, huge and
//!   long strings, deep nesting, edge numbers, null), with [`NameChange`]s of a tool's name (`mutation`);
//! - the inputs ([`Input`]) and how their arguments reach the executor (`input`);
//! - [`Harness::check`]: runs one call and asserts every invariant; [`Harness::fuzz_one`]: the same from raw bytes
//!   (`harness`; the leak check of invariant 5, [`assert_clean`], is in `leaks`).
//!
//! Invariants asserted on every call:
//!
//! 1. the executor returns (no panic) and the result carries the call's id;
//! 2. a handler runs at most once, only for a name in the view, only with arguments the oracle finds valid (the
//!    dynamic handlers re-check what they receive), only after the policy allowed that very call (the policy
//!    records its decisions under the call's tenant, a unique key per call), and `executed` says whether it ran;
//! 3. the policy is only ever asked about schema-valid arguments;
//! 4. the executor's answer is the oracle's prediction: `unknown_tool`, `invalid_arguments`, `policy_denied`,
//!    `approval_required`, or a run that ends in `ok` or the tool's own code;
//! 5. no result contains a file path, `panicked`, a Rust type path or serde/jsonschema error wording, unless it is
//!    inside a copy of one of the caller's own strings at that place (a model's name, keys or values may be echoed
//!    back; the same text elsewhere in the input excuses nothing).
//!
//! The tools are declared with `#[tool]`, which registers through `inventory`: a binary sees them only if it names
//! this crate (`use keel_fuzz_harness as _;` or `keel_tools_core::link_tools!(keel_fuzz_harness);`), as both users do by
//! importing from it.

mod codecs;
mod harness;
mod input;
mod instance;
mod leaks;
mod mcp;
mod mutation;
mod oracle;
mod policy;
mod record;
mod tools;

pub use codecs::{check_codec, check_codecs};
pub use harness::{Expect, Harness, Outcome, block_on};
pub use input::{Approve, Args, Delivery, Input, ProviderShape, SHAPES};
pub use instance::instance;
pub use leaks::{MAX_ERROR_BYTES, NEEDLES, assert_clean};
pub use mcp::{McpSession, REVISIONS, check_mcp};
pub use mutation::{Mutation, NameChange, mutation, name_change};
pub use oracle::{MAX_BYTES, MAX_DEPTH, Oracle, assert_supported, depth, within_limits};
pub use policy::DENY_SUFFIX;
pub use record::{Decided, Record, untracked_invocations};
pub use tools::{
    HIDDEN, Hit, ListArgs, Node, Person, SearchArgs, Severity, TOOL_CODES, Target, TicketArgs, Unit, VIEW, Window,
};
