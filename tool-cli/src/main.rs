//! The installed `keel` (`cargo install tool-cli`): run in a cargo package, it builds and runs `keel` over that
//! package's tools (see `tool_cli::runner`).

fn main() -> std::process::ExitCode {
    tool_cli::runner::main()
}
