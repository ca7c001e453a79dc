//! The testkit's integration tests, in one test binary (one link instead of one per file), each file a module
//! (`file::test`): the check's behaviour, the check over the `examples` crate's tools, the test and scripted
//! models, and the generator over schemas.
//!
//! A binary has one `#[tool]` inventory: the modules' tools (and the `examples` crate's) have distinct names, and
//! each module checks the tools it names, or those its module path holds, never the whole inventory.

#[path = "testkit/check.rs"]
mod check;
#[path = "testkit/examples.rs"]
mod examples;
#[path = "testkit/models.rs"]
mod models;
#[path = "testkit/schemas.rs"]
mod schemas;
