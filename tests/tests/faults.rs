//! The executor under faulty handlers and adversarial input, and `keel chat`: executor_faults and the `keel` CLI
//! serve every tool of the binary, so every tool here needs no state (integration's tools do), and
//! executor_adversarial declares tool names that executor_calls declares too. Each file is a module, its tests
//! named `file::test`.

#[path = "cli_chat.rs"]
mod cli_chat;
#[path = "cli_chat_apis.rs"]
mod cli_chat_apis;
#[path = "executor_adversarial.rs"]
mod executor_adversarial;
#[path = "executor_faults.rs"]
mod executor_faults;
