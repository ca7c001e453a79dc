use keel_tools_core::{ToolError, tool, tool_error};

/// Waits for a job.
#[tool(effect = "read", version = "1.0")]
fn wait_for_job(id: String) -> Result<String, ToolError> {
    if id.is_empty() {
        return Err(tool_error!("timeout", "the job did not finish"));
    }
    Err(tool_error!("NotFound", "no job {id}"))
}

fn main() {}
