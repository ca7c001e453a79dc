//! Deferred tools: kept out of the list a model is shown until a search surfaces them, and refused until then.
//!
//! A view of hundreds of tools costs every turn the tokens of every definition, and a model picks worse among
//! many. A tool marked deferred (`#[tool(defer)]`, [`ToolDefinitionBuilder::defer`](crate::definition::ToolDefinitionBuilder::defer), or [`ToolView::defer`] for a
//! view) is not listed; the model finds it with a search tool, [`SEARCH_TOOL`], which
//! [`ToolView::with_tool_search`] adds to the view. The search returns the matching tools' definitions, and from
//! then on the tool is *surfaced*: listed in the run's later turns ([`Run::shown`](crate::runs::Run::shown)) and callable.
//!
//! **The allowlist follows what the model has been shown.** A [`Run`](crate::runs::Run) over a view with deferred tools answers a
//! call of a deferred tool that no search of this run has surfaced exactly as a call of a tool the view lacks
//! (`unknown_tool`, not executed), though the executor holds the tool. The run records each surfacing in its log
//! ([`EventKind::ToolsSurfaced`]), and a run made again from that log
//! ([`RunBuilder::surfaced`](crate::runs::RunBuilder::surfaced), [`surfaced_in`]) starts with the same tools surfaced.
//!
//! ```
//! # use keel_tools_core::{tool, Executor, Registry, ToolCall};
//! # use keel_tools_core::runs::Run;
//! use keel_tools_core::deferral::SEARCH_TOOL;
//!
//! /// Looks up an invoice by its id: its amount, its customer and whether it is paid.
//! #[tool(effect = "read", version = "1.0", defer)]
//! fn lookup_invoice(invoice_id: String) -> String { format!("{invoice_id}: 120 EUR, paid") }
//!
//! /// Says which day it is.
//! #[tool(effect = "read", version = "1.0")]
//! fn today() -> String { "Monday".into() }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let view = Registry::from_inventory().unwrap().view().names(["lookup_invoice", "today"]).build().unwrap();
//! let executor = Executor::new(view.with_tool_search().unwrap()).unwrap();
//! let mut run = Run::new(executor.clone());
//! // Shown: the tools that are not deferred, and the search.
//! assert_eq!(run.shown().names().collect::<Vec<_>>(), [SEARCH_TOOL, "today"]);
//!
//! // The model searches; what the search returned is surfaced, listed and callable.
//! let found = run.process_batch(vec![ToolCall::new("c1", SEARCH_TOOL, serde_json::json!({"query": "look up an invoice"}))]).await;
//! assert_eq!(found.results[0].data().unwrap()["tools"][0]["name"], "lookup_invoice");
//! assert!(run.shown().contains("lookup_invoice"));
//! let paid = run.process_batch(vec![ToolCall::new("c2", "lookup_invoice", serde_json::json!({"invoice_id": "I-1"}))]).await;
//! assert!(paid.results[0].is_ok());
//!
//! // In another run, where no search surfaced it: refused as unknown, and nothing runs.
//! let mut other = Run::new(executor);
//! let early = other.process_batch(vec![ToolCall::new("c1", "lookup_invoice", serde_json::json!({"invoice_id": "I-1"}))]).await;
//! assert_eq!(early.results[0].code(), Some("unknown_tool"));
//! assert!(!early.results[0].executed);
//! # });
//! ```

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, OnceLock};

pub use keel_tools_search::Embedder;
use keel_tools_search::{Document, SearchError, SearchIndex};
use serde_json::{Value, json};

use crate::error::ToolError;
use crate::event::{Event, EventKind};
use crate::registry::view::{ToolView, UnknownTools};
use crate::tool_definition::{Effect, ToolDefinition};

/// The registered name of the search tool that [`ToolView::with_tool_search`] adds.
pub const SEARCH_TOOL: &str = "search_tools";

/// The most tools one search returns, and the default.
pub const MAX_SEARCH_RESULTS: u64 = 10;
const DEFAULT_SEARCH_RESULTS: u64 = 5;

/// Why [`ToolView::with_tool_search`] cannot add the search tool.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeferralError {
    /// The view already holds a tool named [`SEARCH_TOOL`] that is not keel's search.
    NameTaken,
    /// The search tool's definition was refused (a defect of keel's, reported rather than panicking).
    Definition(String),
}

impl fmt::Display for DeferralError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeferralError::NameTaken => write!(
                f,
                "the view already holds a tool named `{SEARCH_TOOL}`; rename it (`#[tool(name = \"...\")]`) so that \
                 keel's tool search can take the name"
            ),
            DeferralError::Definition(e) => write!(f, "keel's search tool could not be defined: {e}"),
        }
    }
}

impl std::error::Error for DeferralError {}

/// The deferred tools that have been surfaced in one run, in the order they were.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Surfaced {
    order: Vec<Arc<str>>,
    set: HashSet<Arc<str>>,
}

impl Surfaced {
    /// None surfaced.
    pub fn new() -> Surfaced {
        Surfaced::default()
    }

    /// Whether the tool named `name` (registered name) has been surfaced.
    pub fn contains(&self, name: &str) -> bool {
        self.set.contains(name)
    }

    /// The surfaced tools' names, in the order they were surfaced.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.order.iter().map(|n| &**n)
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Adds `name`; whether it is new.
    pub fn insert(&mut self, name: &str) -> bool {
        if self.set.contains(name) {
            return false;
        }
        let name: Arc<str> = Arc::from(name);
        self.set.insert(name.clone());
        self.order.push(name);
        true
    }
}

impl<S: AsRef<str>> FromIterator<S> for Surfaced {
    fn from_iter<I: IntoIterator<Item = S>>(names: I) -> Surfaced {
        let mut surfaced = Surfaced::new();
        for name in names {
            surfaced.insert(name.as_ref());
        }
        surfaced
    }
}

/// The tools surfaced in a run's log: every [`EventKind::ToolsSurfaced`] in order. For a run made again from its
/// log ([`RunBuilder::surfaced`](crate::runs::RunBuilder::surfaced)).
pub fn surfaced_in(events: &[Event]) -> Surfaced {
    let mut surfaced = Surfaced::new();
    for event in events {
        if let EventKind::ToolsSurfaced { tools, .. } = &event.kind {
            for name in tools {
                surfaced.insert(name);
            }
        }
    }
    surfaced
}

impl ToolView {
    /// Whether any tool of the view is deferred.
    pub fn has_deferred(&self) -> bool {
        self.iter().any(|d| d.deferred())
    }

    /// The view with the tools named `names` deferred as well (copies of their definitions marked
    /// [`deferred`](ToolDefinition::deferred)); the others as they are.
    ///
    /// # Errors
    ///
    /// [`UnknownTools`] naming what the view lacks.
    pub fn defer<I, S>(&self, names: I) -> Result<ToolView, UnknownTools>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let names: HashSet<String> = names.into_iter().map(|n| n.as_ref().to_owned()).collect();
        let mut missing: Vec<String> = names.iter().filter(|n| !self.contains(n)).cloned().collect();
        if !missing.is_empty() {
            missing.sort();
            return Err(UnknownTools(missing));
        }
        let tools = self
            .iter()
            .map(
                |d| if names.contains(d.name()) && !d.deferred() { Arc::new(d.with_deferred(true)) } else { d.clone() },
            )
            .collect();
        Ok(ToolView::new(tools))
    }

    /// Every tool of the view deferred (but the search tool).
    pub fn defer_all(&self) -> ToolView {
        let tools = self
            .iter()
            .map(|d| if d.deferred() || is_search_tool(d) { d.clone() } else { Arc::new(d.with_deferred(true)) })
            .collect();
        ToolView::new(tools)
    }

    /// The view with keel's search tool, [`SEARCH_TOOL`], when it has deferred tools (the view as it is
    /// otherwise). The search covers the deferred tools' names, descriptions and parameters (BM25F, with
    /// `keel-tools-search`); its index is built at the first search.
    ///
    /// # Errors
    ///
    /// [`DeferralError::NameTaken`] when the view holds another tool of that name.
    pub fn with_tool_search(&self) -> Result<ToolView, DeferralError> {
        self.add_search(None)
    }

    /// [`ToolView::with_tool_search`], the search also ranking by the meaning of the words: each deferred tool's
    /// text and each query are embedded by `embedder`, and the two rankings (BM25F and cosine similarity) are fused
    /// (`keel-tools-search`'s `SearchIndex::with_embedder`). An embedder that gives vectors of differing sizes, or
    /// NaNs, makes the searches fail with an internal error (logged; the model is told only that the search
    /// failed).
    ///
    /// # Errors
    ///
    /// [`DeferralError::NameTaken`] when the view holds another tool of that name.
    pub fn with_tool_search_embedded(&self, embedder: impl Embedder + 'static) -> Result<ToolView, DeferralError> {
        self.add_search(Some(Arc::new(embedder)))
    }

    fn add_search(&self, embedder: Option<Arc<dyn Embedder>>) -> Result<ToolView, DeferralError> {
        match self.get(SEARCH_TOOL) {
            Some(d) if is_search_tool(d) => return Ok(self.clone()),
            Some(_) => return Err(DeferralError::NameTaken),
            None => {}
        }
        if !self.has_deferred() {
            return Ok(self.clone());
        }
        let deferred: Vec<Arc<ToolDefinition>> = self.iter().filter(|d| d.deferred()).cloned().collect();
        let mut tools: Vec<Arc<ToolDefinition>> = self.iter().cloned().collect();
        tools.push(Arc::new(search_tool(deferred, embedder).map_err(|e| DeferralError::Definition(e.to_string()))?));
        Ok(ToolView::new(tools))
    }

    /// What a model is shown, and may call, once `surfaced` tools have been surfaced: every tool that is not
    /// deferred, and the deferred ones in `surfaced`.
    pub fn shown(&self, surfaced: &Surfaced) -> ToolView {
        if !self.has_deferred() {
            return self.clone();
        }
        ToolView::new(self.iter().filter(|d| !d.deferred() || surfaced.contains(d.name())).cloned().collect())
    }
}

/// The tag keel's search tool carries, to tell it from a user's tool of the same name.
const SEARCH_TAG: &str = "keel.tool_search";

/// Whether `def` is keel's search tool, the one [`ToolView::with_tool_search`] adds (not a tool of the same name).
pub fn is_search_tool(def: &ToolDefinition) -> bool {
    def.name() == SEARCH_TOOL && def.has_tag(SEARCH_TAG)
}

/// The deferred tools one search tool covers, and their index, built at the first search.
struct Catalogue {
    tools: Vec<Arc<ToolDefinition>>,
    embedder: Option<Arc<dyn Embedder>>,
    index: OnceLock<Result<SearchIndex, SearchError>>,
}

impl Catalogue {
    fn index(&self) -> Result<&SearchIndex, ToolError> {
        let index = self.index.get_or_init(|| {
            let documents =
                self.tools.iter().map(|d| Document::from_schema(d.name(), d.description(), d.input_schema()));
            match &self.embedder {
                Some(embedder) => SearchIndex::with_embedder(documents, embedder.clone()),
                None => Ok(SearchIndex::build(documents)),
            }
        });
        index.as_ref().map_err(|e| ToolError::internal(e.clone()))
    }

    fn search(&self, arguments: &Value) -> Result<Value, ToolError> {
        let query = arguments.get("query").and_then(Value::as_str).unwrap_or_default();
        let limit = arguments.get("limit").and_then(Value::as_u64).unwrap_or(DEFAULT_SEARCH_RESULTS);
        let limit = usize::try_from(limit.clamp(1, MAX_SEARCH_RESULTS)).unwrap_or(1);
        let hits = self.index()?.try_search(query, limit).map_err(ToolError::internal)?;
        let tools: Vec<Value> = hits
            .iter()
            .filter_map(|hit| self.tools.get(hit.index()))
            .map(|d| json!({"name": d.wire_name(), "description": d.description(), "input_schema": d.input_schema()}))
            .collect();
        Ok(json!({ "tools": tools }))
    }
}

/// keel's search tool over `deferred`.
fn search_tool(
    deferred: Vec<Arc<ToolDefinition>>,
    embedder: Option<Arc<dyn Embedder>>,
) -> Result<ToolDefinition, crate::tool_definition::DefinitionError> {
    let catalogue = Arc::new(Catalogue { tools: deferred, embedder, index: OnceLock::new() });
    let input = json!({
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": 500,
                "description": "What the tool you need does, in a few words from the request, e.g. \"refund invoice I-42\"."
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_SEARCH_RESULTS,
                "description": "The most tools to return (5 if absent)."
            }
        },
        "required": ["query"],
        "additionalProperties": false
    });
    let output = json!({
        "type": "object",
        "properties": {
            "tools": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "description": {"type": "string"},
                        "input_schema": {"type": "object"}
                    },
                    "required": ["name", "description", "input_schema"]
                }
            }
        },
        "required": ["tools"]
    });
    ToolDefinition::builder(SEARCH_TOOL)
        .description(
            "Search for tools beyond the ones listed. Returns the definitions of the tools that match: their \
             names, descriptions and parameters. A tool found this way can be called by its name from then on.",
        )
        .version("1.0")
        .effect(Effect::Read)
        .idempotent(true)
        .tag(SEARCH_TAG)
        .input_schema(input)
        .output_schema(output)
        .handler(move |arguments: Value, _ctx| {
            let catalogue = catalogue.clone();
            async move { catalogue.search(&arguments) }
        })
        .build()
}

/// The deferred tools of `view` that a result of keel's search tool names (its `data`): registered names, in the
/// result's order. A [`Run`](crate::runs::Run) surfaces them itself; a server that keeps what each of its clients
/// was shown uses this.
pub fn found_by(view: &ToolView, data: &Value) -> Vec<String> {
    let Some(tools) = data.get("tools").and_then(Value::as_array) else { return Vec::new() };
    tools
        .iter()
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .filter_map(|wire| view.get_by_wire_name(wire).or_else(|| view.get(wire)))
        .filter(|d| d.deferred())
        .map(|d| d.name().to_owned())
        .collect()
}
