//! The tests that need an external peer (PostgreSQL, the providers' and MCP's Python SDKs, Node's
//! server-everything, a model server, the example binaries), with the other tests of their files, and the OpenAI
//! client's tests, which add a tool to the demo's card tools. Each file is a module, its tests named `file::test`.
//!
//! Without a peer, its tests pass without running, and this binary ends with one line on stderr that names each of
//! them and the peer it lacked (`keel_tests::peers`); with `CI` or `KEEL_REQUIRE_PEERS` set, a missing peer fails
//! the test instead. `scripts/test-all.sh` installs every peer.

use examples::cards::CardStore;
use keel_tools_core::{State, tool};

/// Count the task cards that have a given status.
#[tool(name = "cards.count", effect = "read", version = "1.0", tags = ["cards"])]
fn count_cards(store: State<CardStore>, #[arg(description = "todo, doing or done")] status: String) -> usize {
    store.cards.iter().filter(|c| c.status == status).count()
}

#[path = "agent_choice.rs"]
mod agent_choice;
#[path = "agent_deferral.rs"]
mod agent_deferral;
#[path = "agent_llama.rs"]
mod agent_llama;
#[path = "agent_openai.rs"]
mod agent_openai;
#[path = "agent_options.rs"]
mod agent_options;
#[path = "agent_strict.rs"]
mod agent_strict;
#[path = "catalog_postgres_tls.rs"]
mod catalog_postgres_tls;
#[path = "catalog_replicas.rs"]
mod catalog_replicas;
#[path = "catalog_rows.rs"]
mod catalog_rows;
#[path = "mcp_auth_peers.rs"]
mod mcp_auth_peers;
#[path = "mcp_forwarder.rs"]
mod mcp_forwarder;
#[path = "mcp_pinning.rs"]
mod mcp_pinning;
#[path = "mcp_replicas.rs"]
mod mcp_replicas;
#[path = "mcp_task_store.rs"]
mod mcp_task_store;
#[path = "provider_sdks.rs"]
mod provider_sdks;
#[path = "provider_streams.rs"]
mod provider_streams;
#[path = "state_db.rs"]
mod state_db;
#[path = "state_stores.rs"]
mod state_stores;
#[path = "task_stores.rs"]
mod task_stores;
