use keel_tools_core::tool;

/// Rebuilds the search index.
#[tool(effect = "write", version = "1.0", task_start = "handler")]
async fn rebuild_index() -> String {
    String::new()
}

fn main() {}
