//! The tests whose `#[tool]` inventory is exactly the examples crate's tools (the demo): the golden wire output and
//! `keel.lock` of every tool, the `keel` CLI over them, the description checks over them, and the card bureau's runs
//! and recorded agent sessions. No file here declares a tool or links another crate of tools. Each file is a module,
//! its tests named `file::test`.

#[path = "agent_ollama.rs"]
mod agent_ollama;
#[path = "agent_replay.rs"]
mod agent_replay;
#[path = "cli_keel.rs"]
mod cli_keel;
#[path = "description_lint.rs"]
mod description_lint;
#[path = "lock_check.rs"]
mod lock_check;
#[path = "run_batches.rs"]
mod run_batches;
#[path = "wire_golden.rs"]
mod wire_golden;
