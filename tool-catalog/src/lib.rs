//! A tool catalogue: tools stored as rows of a table, in a SQLite file or a PostgreSQL database shared by replicas,
//! resolved at run time into tools keel can list and run, per tenant.
//!
//! A database cannot hold a function: a function means something only inside the process that compiled it (its
//! code version, its captured state). A row holds a **recipe** for getting a callable back, and the catalogue
//! knows exactly two recipes:
//!
//! | kind | locator | resolved to |
//! |---|---|---|
//! | `local` | a tool compiled into this binary: its tool name (`get_service_status`) or the Rust path of its fn (`my_app::status::get_service_status`) | the registry's own [`ToolDefinition`](keel_tools_core::definition::ToolDefinition): the same `Arc`, not a copy |
//! | `remote` | an MCP endpoint: a Streamable HTTP URL (`http://127.0.0.1:8931/mcp`) or `stdio:<command line>`, plus `extra.origin_name`, the tool's name there | a [`Forwarder`](keel_tools_mcp::Forwarder) that sends `tools/call` over a shared MCP connection, the same instance every time |
//!
//! A third recipe, code text to evaluate, is refused outright: whoever could write the table could then run code
//! in this process. Custom logic belongs out of process, behind an MCP server, added as a `remote` row.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use keel_tools_catalog::{Catalog, ToolRow};
//! use keel_tools_core::{Registry, ToolCall};
//!
//! let registry = Registry::from_inventory()?;
//! let catalog = Catalog::builder(&registry)
//!     .allow_module("my_app::status")                 // local rows may name tools in this module
//!     .allow_http_origin("http://127.0.0.1:8931")       // remote rows may use this MCP server
//!     .open("tools.db")?;                               // created, or migrated, on open
//!
//! let status = registry.get("get_service_status").unwrap();
//! catalog.put_async(&ToolRow::local(                   // async code: the write never holds a runtime worker
//!     "get_service_status",
//!     status.description(),
//!     status.input_schema().clone(),
//!     "my_app::status::get_service_status",
//! )).await?;
//!
//! let view = catalog.view_for("acme").await?;          // rows read fresh from the file
//! for problem in view.problems() {
//!     eprintln!("{problem}");                           // bad rows are left out, with why
//! }
//! let executor = view.executor()?;                      // what the model sees = what may run
//! let result = executor.call(ToolCall::new("c1", "get_service_status",
//!     serde_json::json!({"service_name": "auth-api"}))).await;
//! # Ok(()) }
//! ```
//!
//! # Stores
//!
//! The rows live in a [`Storage`]: a SQLite file ([`CatalogBuilder::open`], bundled, nothing to install), or a
//! PostgreSQL database shared by any number of replicas ([`CatalogBuilder::connect_postgres`], feature `postgres`;
//! [`postgres`] has the details), or any other implementation ([`CatalogBuilder::storage`]). Both built-in stores
//! hold the same table with the same codes and the same resolution order. PostgreSQL pushes every change to every
//! replica (`LISTEN`/`NOTIFY`); a SQLite file is polled. [`CatalogServer::follow`] keeps a served view current
//! either way and reports degraded health while the store does not answer; `docs/DEPLOYMENT.md` compares the two
//! deployments. PostgreSQL connections use TLS when the connection string says `sslmode=require`, `verify-ca` or
//! `verify-full` (libpq's meanings; `sslrootcert=PATH` for a private CA; features `postgres` and `rustls`): the
//! [TLS section of `postgres`](postgres#tls) has the table of modes.
//!
//! # The table
//!
//! One table, `tools`, in a SQLite file ([`Catalog::builder`]`(..).open(path)`; bundled SQLite, nothing to
//! install). A new file gets the table; a file holding an older `tools` table with at least `name`, `description`,
//! `input_schema`, `kind` and `locator` (the minimal shape) is migrated by adding the other columns with their
//! defaults. `PRAGMA user_version` records the schema version ([`SCHEMA_VERSION`]); version 2 adds the
//! `catalog_state` table and its triggers (below), and a version 1 file gains them on open. Opening a file that is
//! already current writes nothing.
//!
//! | column | type | meaning |
//! |---|---|---|
//! | `name` | text | the name the model sees (keel's tool-name grammar: `incident.search`) |
//! | `description` | text | what the model reads |
//! | `input_schema` | JSON text | the argument schema (an object schema); see [the schema rule](#the-schema-rule) |
//! | `output_schema` | JSON text or `NULL` | local: `NULL` or the compiled result schema; remote: the tool's `outputSchema` (`NULL`: content blocks) |
//! | `kind` | text | `local` or `remote` |
//! | `locator` | text | where the tool is (table above) |
//! | `version` | text | `MAJOR.MINOR[.PATCH]`; local: the compiled contract the row was written for |
//! | `effect` | text | `read`, `write` or `destructive` (default `destructive` for adopted rows) |
//! | `enabled` | integer | `1` listed and callable, `0` neither |
//! | `tenant` | text or `NULL` | the tenant that sees the row; `NULL`: every tenant |
//! | `extra` | JSON object | `origin_name` (remote, required), `timeout_ms`, `idempotent`, `tags` |
//!
//! `(name, tenant)` is unique. [`Catalog::put`] checks a row before writing it (a refused row changes nothing);
//! rows written by anything else (another process, `sqlite3`) are checked when read.
//!
//! # Resolution order
//!
//! Each row is resolved in this order; the first failure leaves the row out of the view with its [`RowError`]:
//!
//! 1. the columns read as what they should be (JSON, grammar, version, effect): else `bad_row`;
//! 2. `kind` is `local` or `remote`: else `kind_unknown`. Nothing in a row is ever evaluated;
//! 3. the locator parses ([`locator`] has the grammars): else `bad_locator`;
//! 4. **local**: a Rust path's module is checked against the allowlist of module prefixes **before any lookup**
//!    (`module_not_allowed`); then the compiled tools are searched through a [`ToolLookup`]: nothing there is
//!    `target_missing` (almost always drift: compare the deployed code version with the catalogue), a module
//!    holding tools rather than a tool fn is `not_callable`. A tool name is looked up first (its module is only
//!    known then) and its module checked right after. Then the contract: `version_mismatch`, `effect_weakens`,
//!    `schema_widens`;
//! 5. **remote**: the endpoint must be allowed (`endpoint_not_allowed`: an HTTP origin, or a stdio command line
//!    word for word, from the configuration) before anything connects; `extra.origin_name` must be a valid MCP
//!    tool name (`bad_locator`); then the connection (one per endpoint, shared by every row using it, reopened when
//!    it closed): `endpoint_unreachable`. A row that pins its tool (`extra.digest`, [`ToolRow::pinned`]: the digest
//!    of the remote's `tools/list` entry it was approved with) resolves only while the server lists the tool with
//!    that digest (`tool_changed`); a change the server announces later (`tools/list_changed`) makes the row's
//!    forwarder refuse calls (`tool_changed`, never sent) and the next view withhold the row. Approving the change
//!    is a row change (the new digest written into the row), which reaches every replica as any other.
//!
//! Allowlists are empty by default: nothing resolves until the configuration says where tools may come from.
//!
//! # Error codes
//!
//! | code | meaning | what to do |
//! |---|---|---|
//! | `bad_row` | a column holds data of the wrong shape | fix the row; the write side let it through |
//! | `kind_unknown` | `kind` is neither `local` nor `remote` | code is never evaluated: serve it over MCP, add it as `remote` |
//! | `bad_locator` | the locator (or `extra.origin_name`) does not parse | fix the row; the write side lacked validation |
//! | `module_not_allowed` | a local locator points outside the allowed module prefixes | fix the row, or allow the module |
//! | `target_missing` | no compiled tool has that name or path | drift: compare the deployed code version with the catalogue |
//! | `not_callable` | the path names a module, not a tool fn (the error lists what it holds) | point the row at one of its tool fns |
//! | `version_mismatch` | the compiled tool is of another breaking series (or older) than the row's version | drift: compare versions, then update the row |
//! | `effect_weakens` | a local row declares a weaker effect than the compiled tool | a row may only make the effect stricter |
//! | `schema_widens` | a local row's input schema accepts what the compiled one does not (with a JSON pointer) | narrow the row's schema or copy the compiled one |
//! | `endpoint_not_allowed` | the remote endpoint is not allowed | use an allowed endpoint, or allow it |
//! | `endpoint_unreachable` | connecting failed | check the server; the row comes back once it answers |
//! | `tool_changed` | a pinned remote tool is not listed with the row's digest (changed or removed) | review the change; write the new digest into the row |
//!
//! Every message names the row (`catalogue row #3 "incident.search" (tenant "acme")`). The catalogue's own
//! failures are [`CatalogError`]s: `busy`, `store_error`, `store_unavailable`, `config_error`, `serve_error`, or a
//! refused row's code.
//!
//! # One file, many processes
//!
//! Any number of connections and processes may read and write one file at once:
//!
//! - **WAL mode.** Opening puts the file in SQLite's write-ahead-log mode (it stays so; `tools.db-wal` and
//!   `tools.db-shm` sit beside it). Readers never wait for a writer, and a writer never waits for readers; writers
//!   take turns. A file system without shared memory (some network mounts) keeps the rollback journal, with a
//!   warning logged.
//! - **Every operation is one transaction.** A view's rows and its [`ChangeToken`] come from one read transaction,
//!   so a view is always a state that existed; a write takes the write lock first (`BEGIN IMMEDIATE`), so two
//!   writers never interleave and no update is lost.
//! - **A bounded wait.** When another connection holds the lock an operation needs, it is tried again after short
//!   jittered pauses until the [busy timeout](CatalogBuilder::busy_timeout) (default 2 s) is spent, then fails with
//!   [`CatalogError::Busy`] (code `busy`, with how long it waited and how many attempts it made). A `busy`
//!   operation changed nothing and may be repeated as it is. Nothing waits without bound and nothing panics.
//! - **Async without blocking.** The `_async` methods ([`Catalog::put_async`], [`Catalog::set_enabled_async`],
//!   [`Catalog::remove_async`], [`Catalog::rows_async`], [`Catalog::change_token_async`]) and the views run each
//!   attempt on the runtime's blocking pool and pause on a timer: a runtime worker never waits on SQLite. The sync
//!   methods ([`Catalog::put`], …) block the calling thread, up to the busy timeout; use them outside async code.
//!   The async writes return a [`Versioned`] value: the result and the token of the state the write committed.
//! - **Ordered change tokens.** The file counts every row change in a table of its own (`catalog_state`, kept by
//!   triggers on `tools`, so edits by `sqlite3` or another program count too). [`ChangeToken`]s are ordered: a later
//!   state has a greater one, and they never go back while the file is changed in place.
//!
//! # The schema rule
//!
//! **Local rows** may narrow the compiled tool, never widen it: the handler deserializes what its own schema
//! describes. The row's input schema is checked against the compiled one when the row is loaded
//! ([`narrow::check_narrows`]: a conservative structural subset check; what it cannot prove is reported as
//! `schema_widens` with the JSON pointer). A row that keeps the compiled contract (same name, description, schema
//! and effect) is served as the registry's very definition; a row that renames, re-describes, narrows or makes the
//! effect stricter is served as a definition *derived* from it
//! ([`ToolDefinition::derived`](keel_tools_core::definition::ToolDefinition::derived)): the model sees and the executor
//! validates the row's contract, and the handler, version, origin and result schema are the compiled tool's.
//! [`Resolved::Local`] gives both, `target` being the registry's `Arc`.
//!
//! **Remote rows**: the row's input schema is the only description of the arguments, and it is what the model
//! sees and what the executor validates before anything is sent. The forwarder takes any arguments, so nothing
//! else could supply the shape; a row without one (an empty schema, no `properties`) is `bad_row`, since the
//! model would see a tool without parameters and decline to call it.
//!
//! # Tenants and views
//!
//! [`Catalog::view_for`]`(tenant)` reads the rows of that tenant and of every tenant (`tenant IS NULL`) fresh
//! from the file; for each name the tenant's row wins over the shared one, even when it is disabled (so a tenant
//! can switch a shared tool off). Enabled rows are resolved and form one [`ToolView`](keel_tools_core::ToolView): the
//! model-visible list and the executor's allowlist, from the same rows. A disabled row is neither listed nor
//! callable (`unknown_tool`); a bad row is left out and reported in [`CatalogView::problems`], never failing the
//! view. Enabling, disabling or editing a row, by any connection, shows in the next view without a restart.
//!
//! Resolutions are cached per row: an unchanged row yields the same definition and, for a remote row, the same
//! forwarder (per-tool counters, limits and metrics stay with one instance); editing its endpoint, origin name or
//! output schema yields a new forwarder. Views are snapshots: one taken before an edit keeps what it had.
//!
//! [`CatalogServer`] serves a tenant's view over MCP ([`keel_tools_mcp::McpServer`]) and keeps it current: a
//! [`refresh`](CatalogServer::refresh) swaps the new view in and sends `notifications/tools/list_changed` to the
//! connected clients; [`follow`](CatalogServer::follow) refreshes whenever the [change feed](Catalog::changes)
//! passes the served token (pushed by PostgreSQL, polled from a SQLite file), and [`watch`](CatalogServer::watch)
//! polls [`Catalog::change_token`] at an interval of its own. [`CatalogServer::serve_http`] serves MCP and
//! `GET /health` ([`Health`]).
//!
//! # Features
//!
//! | feature | default | what |
//! |---|---|---|
//! | `mcp` | yes | `remote` rows resolved to forwarders over MCP, and [`CatalogServer`]; without it the crate builds no MCP (rmcp, hyper, reqwest): `remote` rows are checked and stored, and resolve to `endpoint_unreachable` |
//! | `rustls` | yes | TLS for `https://` locators (with `mcp`) and for PostgreSQL's `sslmode`s that need it (with `postgres`) |
//! | `postgres` | no | the catalogue in PostgreSQL, shared by replicas ([`postgres`]) |
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod catalog;
pub mod error;
pub mod locator;
pub mod lookup;
pub mod narrow;
mod resolve;
pub mod row;
#[cfg(feature = "mcp")]
mod server;
mod storage;

pub use catalog::{Catalog, CatalogBuilder, CatalogView, DEFAULT_CONNECT_TIMEOUT, DEFAULT_POLL_INTERVAL};
pub use error::{CatalogError, RowError, RowRef, ToolChange};
pub use locator::{Endpoint, LocalTarget, RustPath};
pub use lookup::{Lookup, RegistryLookup, ToolLookup};
pub use resolve::Resolved;
pub use row::{Kind, StoredRow, ToolRow};
#[cfg(feature = "mcp")]
pub use server::{CatalogServer, Health, Refresh};
#[cfg(feature = "postgres")]
pub use storage::postgres;
pub use storage::{
    ChangeFeed, ChangeToken, DEFAULT_BUSY_TIMEOUT, FeedState, SCHEMA_VERSION, Storage, StoreFuture, StoreHealth,
    Versioned,
};
