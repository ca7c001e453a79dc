//! Fixtures shared by the benchmarks (`benches/executor.rs`, `benches/registry.rs`) and the profiling example.
//!
//! One tool, four ways:
//!
//! - keel `#[tool]`s over the same 5-field [`fixture::SearchArgs`] and the same handler body
//!   ([`fixture::search`]): inline (the default for a plain fn), on the blocking pool (`blocking = true`), async,
//!   and a `write` twin for the approval path;
//! - the floor ([`floor::dispatch`]): a hand-written `match name { .. }`, `serde_json` deserialization, the
//!   handler and serialization, with no validation;
//! - rmcp's `#[tool_router]`/`#[tool]` ([`rmcp_peer::RmcpServer`]), called in process through its `ToolRouter`.
//!
//! Plus [`dynamic::definitions`] (run-time `ToolDefinition::builder` tools for the 1,000/10,000-tool registry
//! benchmarks) and [`generated`] (200 compiled `#[tool]`s for the inventory benchmarks).

pub mod fixture {
    //! The 5-field argument struct, the result and the handler body every contender shares.

    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::{Value, json};

    /// How bad an incident is.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    pub enum Severity {
        /// Degraded, not down.
        Low,
        /// Some users are affected.
        Medium,
        /// Most users are affected.
        High,
    }

    /// Arguments of the benchmarked tool: five fields of the usual kinds (two strings, an enum, a bounded integer,
    /// a boolean).
    #[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct SearchArgs {
        /// The affected service, e.g. `auth-api`.
        pub service: String,
        /// The least severity to report.
        pub severity: Severity,
        /// Words to look for in the symptom.
        pub query: String,
        /// How many incidents at most (1 to 50).
        #[schemars(range(min = 1, max = 50))]
        pub limit: u32,
        /// Whether resolved incidents count.
        pub include_resolved: bool,
    }

    /// One incident (five fields, one of them a list).
    #[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
    pub struct Incident {
        /// The incident id.
        pub incident_id: String,
        /// The affected service.
        pub service: String,
        /// How bad it is.
        pub severity: Severity,
        /// What users see.
        pub symptom: String,
        /// What the on-call engineer found.
        pub evidence: Vec<String>,
    }

    /// The handler body shared by every contender: cheap and deterministic, so the benchmarks measure the
    /// machinery around it.
    pub fn search(args: SearchArgs) -> Incident {
        Incident {
            incident_id: format!("INC-{:03}", args.limit),
            service: args.service,
            severity: args.severity,
            symptom: args.query,
            evidence: vec![
                "auth-api timeout".to_owned(),
                if args.include_resolved { "resolved: no".to_owned() } else { "database pool exhausted".to_owned() },
            ],
        }
    }

    /// The arguments of the benchmarked call.
    pub fn valid_arguments() -> Value {
        json!({
            "service": "auth-api",
            "severity": "high",
            "query": "login returns 502",
            "limit": 10,
            "include_resolved": false
        })
    }

    /// Arguments with one violation (`severity` outside its enum): the `invalid_arguments` path.
    pub fn invalid_arguments() -> Value {
        json!({
            "service": "auth-api",
            "severity": "urgent",
            "query": "login returns 502",
            "limit": 10,
            "include_resolved": false
        })
    }
}

pub mod keel {
    //! The keel side: the same handler body declared with `#[tool]`, once per handler kind.

    use keel_tools_core::{Executor, Registry, ToolError, tool};

    use crate::fixture::{Incident, SearchArgs, search};

    /// Search incidents (inline, the default for a plain fn: the apples-to-apples contender against the floor).
    #[tool(effect = "read", version = "1.0")]
    pub fn search_incidents(args: SearchArgs) -> Result<Incident, ToolError> {
        Ok(search(args))
    }

    /// Search incidents (a plain fn marked `blocking = true`: runs on Tokio's blocking pool).
    #[tool(effect = "read", version = "1.0", blocking = true)]
    pub fn search_incidents_blocking(args: SearchArgs) -> Result<Incident, ToolError> {
        Ok(search(args))
    }

    /// Search incidents (an `async fn`, polled on the caller's task).
    #[tool(effect = "read", version = "1.0")]
    pub async fn search_incidents_async(args: SearchArgs) -> Result<Incident, ToolError> {
        Ok(search(args))
    }

    /// File an incident (a `write` tool: without an approval the call stops at `approval_required`).
    #[tool(effect = "write", version = "1.0")]
    pub fn file_incident(args: SearchArgs) -> Result<Incident, ToolError> {
        Ok(search(args))
    }

    /// The fixture tools' names.
    pub const NAMES: [&str; 4] =
        ["search_incidents", "search_incidents_blocking", "search_incidents_async", "file_incident"];

    /// An executor over a view of exactly the fixture tools (default policy, default limits).
    pub fn executor() -> Executor {
        let registry = Registry::from_inventory().expect("tool names are unique");
        let view = registry.view().names(NAMES).build().expect("the fixture tools are linked");
        Executor::new(view).expect("the fixture schemas compile")
    }
}

pub mod floor {
    //! The floor: what a hand-written dispatcher costs with no registry, no validation and no result envelope.

    use serde_json::Value;

    use crate::fixture::{SearchArgs, search};

    /// `match name { .. }`, `serde_json::from_value`, the handler, `serde_json::to_value`.
    pub async fn dispatch(name: &str, arguments: Value) -> Result<Value, String> {
        match name {
            "search_incidents" => {
                let args: SearchArgs = serde_json::from_value(arguments).map_err(|e| e.to_string())?;
                serde_json::to_value(search(args)).map_err(|e| e.to_string())
            }
            other => Err(format!("unknown tool {other}")),
        }
    }
}

pub mod rmcp_peer {
    //! The Rust peer: the same tool with rmcp's `#[tool_router]`/`#[tool]`, called in process through its
    //! `ToolRouter` (what `#[tool_handler]`'s `call_tool` does for each `tools/call` request).

    use rmcp::handler::server::router::tool::ToolRouter;
    use rmcp::handler::server::tool::ToolCallContext;
    use rmcp::handler::server::wrapper::{Json, Parameters};
    use rmcp::model::{CallToolRequestParams, CallToolResponse, JsonObject, NumberOrString};
    use rmcp::service::{Peer, RequestContext, RunningService};
    use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_router};

    use crate::fixture::{Incident, SearchArgs, search};

    /// A tools-only MCP server with the benchmarked tool.
    #[derive(Debug, Clone, Copy, Default)]
    pub struct RmcpServer;

    #[tool_router(vis = "pub")]
    impl RmcpServer {
        /// Search incidents.
        #[tool(name = "search_incidents")]
        fn search_incidents(&self, Parameters(args): Parameters<SearchArgs>) -> Result<Json<Incident>, ErrorData> {
            Ok(Json(search(args)))
        }
    }

    impl ServerHandler for RmcpServer {}

    /// What an in-process rmcp call needs: the router, the server and a peer for each call's `RequestContext`.
    pub struct RmcpHarness {
        /// The router `#[tool_router]` generated, built once.
        pub router: ToolRouter<RmcpServer>,
        /// The server the tools are methods of.
        pub server: RmcpServer,
        peer: Peer<RoleServer>,
        _running: RunningService<RoleServer, RmcpServer>,
    }

    impl RmcpHarness {
        /// Builds the router and obtains a `Peer` from a server served over an in-memory duplex pipe (rmcp
        /// constructs peers only inside its service loop). Must be called inside a Tokio runtime.
        pub fn start() -> RmcpHarness {
            let (server_side, _client_side) = tokio::io::duplex(4096);
            let running = rmcp::service::serve_directly(RmcpServer, server_side, None);
            RmcpHarness {
                router: RmcpServer::tool_router(),
                server: RmcpServer,
                peer: running.peer().clone(),
                _running: running,
            }
        }

        /// The `tools/call` params of one call (done outside the timed region, like building a keel `ToolCall`).
        pub fn params(name: &'static str, arguments: JsonObject) -> CallToolRequestParams {
            CallToolRequestParams::new(name).with_arguments(arguments)
        }

        /// One call: a fresh `RequestContext` (as rmcp's service loop makes per request) and `ToolRouter::call`.
        pub async fn call(&self, params: CallToolRequestParams) -> Result<CallToolResponse, ErrorData> {
            let context = RequestContext::new(NumberOrString::Number(1), self.peer.clone());
            self.router.call(ToolCallContext::new(&self.server, params, context)).await
        }
    }
}

pub mod dynamic {
    //! Run-time definitions for the 1,000/10,000-tool registry benchmarks.

    use std::sync::Arc;

    use keel_tools_core::CallContext;
    use keel_tools_core::definition::{DynHandler, ToolDefinition};
    use serde_json::Value;

    use crate::fixture::{Incident, SearchArgs};

    /// The canonical schemas of the fixture's argument and result types, generated once.
    pub fn schemas() -> (Value, Value) {
        let generate = |root: schemars::Schema| root.to_value();
        let input = generate(
            schemars::generate::SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<SearchArgs>(),
        );
        let output = generate(
            schemars::generate::SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<Incident>(),
        );
        (input, output)
    }

    /// `n` distinct run-time definitions (`dynamic.tool_00000` ...) with the fixture's schemas and one shared
    /// handler, built with `ToolDefinition::builder`.
    pub fn definitions(n: usize, input: &Value, output: &Value) -> Vec<ToolDefinition> {
        let handler: Arc<dyn DynHandler> = Arc::new(|_args: Value, _ctx: CallContext| async {
            Err::<Value, _>(keel_tools_core::tool_error!("unused", "unused"))
        });
        (0..n)
            .map(|i| {
                ToolDefinition::builder(format!("dynamic.tool_{i:05}"))
                    .description(format!("Searches the incidents of shard {i} (a benchmark fixture)."))
                    .version("1.0")
                    .input_schema(input.clone())
                    .output_schema(output.clone())
                    .handler(handler.clone())
                    .build()
                    .expect("generated definitions are valid")
            })
            .collect()
    }
}

pub mod generated {
    //! 200 compiled `#[tool]`s (written by `build.rs`), so `Registry::from_inventory()` and the schema benchmarks
    //! have a realistic catalogue of compiled tools.

    include!(concat!(env!("OUT_DIR"), "/generated_tools.rs"));
}
