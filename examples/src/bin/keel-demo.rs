//! This repository's demo `keel`: the command line over the example tools (the incident desk and the task-card
//! bureau), with the demo card store.
//!
//! ```text
//! cargo run -q -p examples --bin keel-demo -- list
//! ```
//!
//! It is not named `keel`, since keel-tools-cli's installed `keel` is built into the same target directory. The
//! installed `keel` runs it over this package all the same (`keel -p examples list` from the repository root):
//! the package names it in `[package.metadata.keel] bin`. Over your own tools, the whole `main` is two lines:
//! `keel_tools_core::link_tools!(my_tools);` and `fn main() -> ExitCode { keel_tools_cli::main() }` (keel-tools-cli's
//! documentation shows it whole).

keel_tools_core::link_tools!(examples);

fn main() -> std::process::ExitCode {
    // The card tools read a `State<CardStore>`; give `keel call` the demo store.
    keel_tools_cli::Cli::new().executor(|b| b.state(examples::cards::store(true))).main()
}
