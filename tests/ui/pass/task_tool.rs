use keel_tools_core::definition::{TaskStart, TaskSupport};
use keel_tools_core::{CallContext, Registry, tool};

/// Rebuilds the search index.
#[tool(effect = "write", version = "1.0", task = "optional")]
async fn rebuild_index() -> String {
    String::new()
}

/// Asks which index to rebuild, then rebuilds it as a task.
#[tool(effect = "write", version = "1.0", task = "required", task_start = "handler")]
async fn rebuild_one(ctx: CallContext, #[arg(header = "Index")] index: String) -> String {
    ctx.begin_task();
    index
}

fn main() {
    let registry = Registry::from_inventory().unwrap();
    let optional = registry.get("rebuild_index").unwrap();
    assert_eq!((optional.task_support(), optional.task_start()), (TaskSupport::Optional, TaskStart::Admission));
    let required = registry.get("rebuild_one").unwrap();
    assert_eq!((required.task_support(), required.task_start()), (TaskSupport::Required, TaskStart::Handler));
    assert_eq!(required.input_schema()["properties"]["index"]["x-mcp-header"], "Index");
}
