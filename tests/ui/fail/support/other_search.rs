// Not a ui case: a module of `duplicate_name_across_files.rs`, included with `#[path]`.

use keel_tools_core::tool;

/// Searches tickets.
#[tool(effect = "read", version = "1.0")]
pub fn search(query: String) -> Vec<String> {
    vec![query]
}
