//! The catalogue's integration tests, in one test binary (one link instead of one per file), each file a module
//! (`file::test`): a busy catalogue (`busy`), and two OS processes editing one file (`two_processes`, whose test
//! runs this binary twice more, each child running only `two_processes::child_process`).

#[path = "catalog/busy.rs"]
mod busy;
#[path = "catalog/two_processes.rs"]
mod two_processes;
