//! keel's contract tools, for CI and for `keel check` / `keel lock`: they read a registry's tools and change
//! nothing.
//!
//! - [`lock`]: the schema lock. A committed file pins each tool's name, version and schemas;
//!   [`lock::assert_lock`] in a test fails when a tool's contract changed without the version bump the change
//!   needs (breaking: major, additive: minor, wording: patch).
//! - [`lint`]: what each provider will silently drop or reject from a tool, found before a model sees it; and
//!   ([`lint::description`]) the signs of tool poisoning in a description: hidden characters, instructions to the
//!   model, length the arguments do not need, an imported tool named like another.
//!
//! ```no_run
//! # fn registry() -> keel_tools_core::Registry { unimplemented!() }
//! // In a test of the crate that links your tools:
//! keel_tools_contract::lock::assert_lock(&registry(), include_str!("../../keel.lock"));
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

// The modules form one layer: neither imports the other (checked by the `layers` test of `tests/`).
pub mod lint;
pub mod lock;
