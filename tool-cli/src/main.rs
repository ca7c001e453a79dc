//! The installed `keel` (`cargo install keel-tools-cli`): run in a cargo package, it builds and runs `keel` over that
//! package's tools (see `keel_tools_cli::runner`).

fn main() -> std::process::ExitCode {
    keel_tools_cli::runner::main()
}
