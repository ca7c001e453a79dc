//! [`ToolView`]: the tools one run or turn may see, which are exactly the tools it may call.

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::Serialize;
use serde_json::Value;

use crate::definition::{Effect, ToolDefinition};
use crate::name;
use crate::schema::Provider;

/// [`ToolView`]: the tools one run or turn may see, which are exactly the tools it may call.
///
/// A view is one object that answers both questions, "what does the model see?" ([`ToolView::schemas`]) and "what
/// may the executor run?" ([`ToolView::get`]), so the two cannot drift. A registry of 200 tools typically exposes
/// 10 to 40 of them per turn through a view chosen by names, tags or effect.
///
/// A fixed set of tools: the model-visible list and the executor's allowlist, from the same definitions.
///
/// ```
/// use tool_core::{tool, Executor, Provider, Registry};
///
/// /// Reads the weather.
/// #[tool(effect = "read", version = "1.0", tags = ["weather"])]
/// fn forecast(city: String) -> String {
///     format!("sunny in {city}")
/// }
///
/// let registry = Registry::from_inventory().unwrap();
/// let view = registry.view().tag("weather").build().unwrap();
/// // What the model is shown...
/// assert_eq!(view.schemas(Provider::OpenAiChat)[0]["function"]["name"], "forecast");
/// // ...is exactly what the executor built from the same view allows.
/// let executor = Executor::new(view.clone()).unwrap();
/// let both = executor.view().describe_tools();
/// assert_eq!(both.model_names(), both.executor_names());
/// assert!(executor.view().contains("forecast") && !executor.view().contains("other"));
/// ```
#[derive(Clone)]
pub struct ToolView {
    inner: Arc<Inner>,
}

struct Inner {
    /// Sorted by name, unique: looked up by binary search (a view holds tens of tools; a hash index costs more
    /// to build and, for short names, about as much to query).
    tools: Vec<Arc<ToolDefinition>>,
    rendered: [OnceLock<Vec<Value>>; Provider::ALL.len()],
}

impl fmt::Debug for ToolView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolView").field("tools", &self.names().collect::<Vec<_>>()).finish()
    }
}

impl ToolView {
    /// A view of exactly these definitions. Names must be unique (a registry guarantees it); on a repeated name
    /// the first definition wins.
    pub fn new(mut tools: Vec<Arc<ToolDefinition>>) -> ToolView {
        tools.sort_by(|a, b| a.name().cmp(b.name()));
        tools.dedup_by(|a, b| a.name() == b.name());
        ToolView { inner: Arc::new(Inner { tools, rendered: Default::default() }) }
    }

    /// The tool named `name`, if this view allows it. Exact match: no case folding, trimming or nearest name.
    pub fn get(&self, name: &str) -> Option<&Arc<ToolDefinition>> {
        let tools = &self.inner.tools;
        tools.binary_search_by(|d| d.name().cmp(name)).ok().map(|i| &tools[i])
    }

    /// The tool whose provider wire name is exactly `wire` (`incident-search` for `incident.search`), if this
    /// view allows it. A registered name that is not its own wire name (`incident.search`) finds nothing: a call
    /// must name a tool as the provider was shown it.
    pub fn get_by_wire_name(&self, wire: &str) -> Option<&Arc<ToolDefinition>> {
        if wire.contains('.') {
            return None;
        }
        name::from_wire(wire).and_then(|n| self.get(&n))
    }

    /// Whether the view allows `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The names, sorted: the executor's allowlist.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.inner.tools.iter().map(|d| d.name())
    }

    /// The definitions, sorted by name.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Arc<ToolDefinition>> + '_ {
        self.inner.tools.iter()
    }

    /// How many tools.
    pub fn len(&self) -> usize {
        self.inner.tools.len()
    }

    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.inner.tools.is_empty()
    }

    /// The cache of the view's list in `provider`'s format (filled by the codecs: [`ToolView::schemas`]).
    pub(crate) fn rendered(&self, provider: Provider) -> &OnceLock<Vec<Value>> {
        &self.inner.rendered[provider.slot()]
    }

    /// Chooses a subset of this view (by names, tags, effects), e.g. one turn's tools out of a run's.
    pub fn select(&self) -> ViewBuilder<'_> {
        ViewBuilder::new(self)
    }
}

/// The model-visible and the executor-internal description of one view.
#[derive(Debug, Clone, Serialize)]
pub struct ToolDescriptions {
    /// What the model is sent (Ollama format).
    pub model_visible: Vec<Value>,
    /// What the executor checks and runs.
    pub executor: Vec<ExecutorEntry>,
}

impl ToolDescriptions {
    /// The names in the model-visible list.
    pub fn model_names(&self) -> Vec<&str> {
        self.model_visible.iter().filter_map(|t| t.pointer("/function/name").and_then(Value::as_str)).collect()
    }
    /// The names the executor allows.
    pub fn executor_names(&self) -> Vec<&str> {
        self.executor.iter().map(|e| e.name.as_str()).collect()
    }
}

/// The executor's side of one tool.
#[derive(Debug, Clone, Serialize)]
pub struct ExecutorEntry {
    /// Tool name.
    pub name: String,
    /// Tool version.
    pub version: String,
    /// Effect.
    pub effect: Effect,
    /// Idempotency.
    pub idempotent: bool,
    /// The tool's own timeout.
    pub timeout_ms: Option<u64>,
    /// Where it was defined.
    pub origin: String,
}

/// Chooses the tools of a [`ToolView`]; see [`Registry::view`](crate::Registry::view) and [`ToolView::select`].
///
/// Filters combine with AND: `.tag("incident").effects([Effect::Read])` keeps read tools tagged `incident`.
#[must_use]
pub struct ViewBuilder<'r> {
    from: &'r ToolView,
    names: Option<Vec<String>>,
    tags: Vec<String>,
    effects: Option<Vec<Effect>>,
}

/// A view named tools that the registry does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownTools(pub Vec<String>);

impl fmt::Display for UnknownTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the view names tools the registry does not hold: {}", self.0.join(", "))
    }
}

impl std::error::Error for UnknownTools {}

impl<'r> ViewBuilder<'r> {
    pub(crate) fn new(from: &'r ToolView) -> Self {
        ViewBuilder { from, names: None, tags: Vec::new(), effects: None }
    }

    /// Keeps only these names (each must exist in the registry).
    pub fn names<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.names.get_or_insert_with(Vec::new).extend(names.into_iter().map(Into::into));
        self
    }

    /// Keeps only tools carrying `tag` (several calls: tools carrying all of them).
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Keeps only tools with one of these effects.
    pub fn effects(mut self, effects: impl IntoIterator<Item = Effect>) -> Self {
        self.effects.get_or_insert_with(Vec::new).extend(effects);
        self
    }

    /// Builds the view. Naming a tool the registry lacks is an error, not a silent omission.
    pub fn build(self) -> Result<ToolView, UnknownTools> {
        let mut chosen: Vec<Arc<ToolDefinition>> = match &self.names {
            Some(names) => {
                let missing: Vec<String> = names.iter().filter(|n| self.from.get(n).is_none()).cloned().collect();
                if !missing.is_empty() {
                    return Err(UnknownTools(missing));
                }
                names.iter().filter_map(|n| self.from.get(n).cloned()).collect()
            }
            None => self.from.iter().cloned().collect(),
        };
        chosen.retain(|d| {
            self.tags.iter().all(|t| d.has_tag(t)) && self.effects.as_ref().is_none_or(|e| e.contains(&d.effect()))
        });
        Ok(ToolView::new(chosen))
    }
}
