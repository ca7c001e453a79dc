//! The user's own extractors: a tenant newtype, and a database handle that needs shared state.
use std::sync::Arc;

use keel_tools_core::context::{FromCallContext, Requirements};
use keel_tools_core::executor::CallOptions;
use keel_tools_core::{CallContext, Executor, Registry, ToolCall, ToolError, tool};

struct Tenant(String);

impl FromCallContext for Tenant {
    fn from_call_context(ctx: &CallContext) -> Result<Self, ToolError> {
        match ctx.tenant() {
            Some(t) => Ok(Tenant(t.to_owned())),
            None => Err(keel_tools_core::tool_error!("tenant_required", "this tool runs only for a tenant")),
        }
    }
}

struct Pool(Vec<&'static str>);

struct Db(Arc<Pool>);

impl FromCallContext for Db {
    fn from_call_context(ctx: &CallContext) -> Result<Self, ToolError> {
        ctx.state::<Pool>().map(Db).ok_or_else(|| ToolError::internal("no pool"))
    }
    fn requirements(requirements: &mut Requirements) {
        requirements.state::<Pool>();
    }
}

/// Lists the tenant's rows.
#[tool(effect = "read", version = "1.0")]
fn list_rows(tenant: Tenant, db: Db, limit: usize) -> Vec<String> {
    db.0.0.iter().take(limit).map(|r| format!("{}:{r}", tenant.0)).collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let view = registry.view().names(["list_rows"]).build().unwrap();
    let schema = view.get("list_rows").unwrap().input_schema().clone();
    let names: Vec<&String> = schema["properties"].as_object().expect("properties").keys().collect();
    assert_eq!(names, ["limit"], "{schema}");

    // Without the pool the executor does not build, naming the tool and the type.
    let err = Executor::new(view.clone()).unwrap_err().to_string();
    assert!(err.contains("list_rows") && err.contains("Pool"), "{err}");

    let executor = Executor::builder(view).state(Pool(vec!["a", "b", "c"])).build().unwrap();
    let call = || ToolCall::new("c1", "list_rows", serde_json::json!({"limit": 2}));
    let r = executor.call_with(call(), &CallOptions::new().tenant("acme")).await;
    assert_eq!(r.data(), Some(&serde_json::json!(["acme:a", "acme:b"])), "{r:?}");
    // The extractor's own business error; the handler never ran.
    let r = executor.call(call()).await;
    assert_eq!(r.code(), Some("tenant_required"), "{r:?}");
    assert!(!r.executed, "{r:?}");
}
