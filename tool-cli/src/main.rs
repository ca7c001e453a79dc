//! `keel` over the example tools (the incident desk and the task-card bureau).
//!
//! Over your own tools, the whole `main` is two lines:
//!
//! ```ignore
//! tool_core::link_tools!(my_tools);
//! fn main() -> std::process::ExitCode { tool_cli::main() }
//! ```

tool_core::link_tools!(examples);

fn main() -> std::process::ExitCode {
    // The card tools read a `State<CardStore>`; give `keel call` the demo store.
    tool_cli::Cli::new().executor(|b| b.state(examples::cards::store(true))).main()
}
