//! [`ToolView`]: the tools one run or turn may see, which are exactly the tools it may call.

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::ser::SerializeSeq;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::name;
use crate::tool_definition::{Effect, ToolDefinition};
use crate::tool_schemas::{Provider, RENDERINGS, Strict, rendering_slot};

/// [`ToolView`]: the tools one run or turn may see, which are exactly the tools it may call.
///
/// A view is one object that answers both questions, "what does the model see?" ([`ToolView::schemas`]) and "what
/// may the executor run?" ([`ToolView::get`]), so the two cannot drift. A registry of 200 tools typically exposes
/// 10 to 40 of them per turn through a view chosen by names, tags or effect.
///
/// A fixed set of tools: the model-visible list and the executor's allowlist, from the same definitions.
///
/// ```
/// use keel_tools_core::{tool, Executor, Provider, Registry};
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
    /// Sorted by name, unique: looked up by binary search (a view is often built per turn, and an index costs
    /// more to build than a few lookups save; an executor builds its own, once, for the calls it looks up).
    tools: Vec<Arc<ToolDefinition>>,
    rendered: [OnceLock<Vec<Value>>; RENDERINGS],
    /// Whether any tool needs a scope, found once.
    scoped: OnceLock<bool>,
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
        // Strictly increasing names are already sorted and unique: nothing to move.
        if !tools.is_sorted_by(|a, b| a.name() < b.name()) {
            tools.sort_by(|a, b| a.name().cmp(b.name()));
            tools.dedup_by(|a, b| a.name() == b.name());
        }
        ToolView::from_sorted(tools)
    }

    /// A view of `tools`, which are already sorted by name and unique.
    pub(crate) fn from_sorted(tools: Vec<Arc<ToolDefinition>>) -> ToolView {
        debug_assert!(tools.is_sorted_by(|a, b| a.name() < b.name()));
        ToolView { inner: Arc::new(Inner { tools, rendered: Default::default(), scoped: OnceLock::new() }) }
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

    /// The definitions, sorted by name, as a slice.
    pub(crate) fn tools(&self) -> &[Arc<ToolDefinition>] {
        &self.inner.tools
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

    /// Whether any tool of the view needs a scope ([`ToolDefinition::scopes`]); found once per view. A server
    /// whose tools need none has no per-tool scope to check before a call.
    pub fn has_scoped_tools(&self) -> bool {
        *self.inner.scoped.get_or_init(|| self.inner.tools.iter().any(|d| d.scopes().len() > 0))
    }

    /// The view's tools in `provider`'s format, in name order, without copying them: each entry is the tool's own
    /// rendering ([`ToolDefinition::render`]), made once per tool and shared by every view that holds the tool.
    /// Getting the list costs nothing; serialising it copies each tool's cached JSON text
    /// ([`ToolList::to_json`]). The same entries as [`ToolView::schemas`], which copies them into a list of its own.
    ///
    /// ```
    /// use keel_tools_core::{tool, Provider, Registry};
    ///
    /// /// Reads the weather.
    /// #[tool(effect = "read", version = "1.0")]
    /// fn forecast(city: String) -> String {
    ///     format!("sunny in {city}")
    /// }
    ///
    /// let registry = Registry::from_inventory().unwrap();
    /// let view = registry.view().names(["forecast"]).build().unwrap();
    /// let tools = view.tool_list(Provider::OpenAiChat);
    /// assert_eq!(tools.get(0).unwrap()["function"]["name"], "forecast");
    /// // The request body's `tools`, as JSON text:
    /// assert_eq!(tools.to_json(), serde_json::to_string(view.schemas(Provider::OpenAiChat)).unwrap());
    /// ```
    pub fn tool_list(&self, provider: Provider) -> ToolList<'_> {
        ToolList { tools: &self.inner.tools, provider, strict: Strict::Auto }
    }

    /// The cache of the view's list in `provider`'s format under `strict` (filled by the codecs:
    /// [`ToolView::schemas`]).
    pub(crate) fn rendered(&self, provider: Provider, strict: Strict) -> &OnceLock<Vec<Value>> {
        &self.inner.rendered[rendering_slot(provider, strict)]
    }

    /// Chooses a subset of this view (by names, tags, effects), e.g. one turn's tools out of a run's.
    pub fn select(&self) -> ViewBuilder<'_> {
        ViewBuilder::new(self)
    }
}

/// One view's tool list in one provider's format, borrowed from the view: see [`ToolView::tool_list`] and
/// [`Codec::tool_list`](crate::Codec::tool_list).
///
/// Each entry is the tool's own cached rendering, shared by every view of the tool, so a list is free to get and
/// holds no copy. It serialises as a JSON array of the entries: exactly the bytes of
/// `serde_json::to_string(view.schemas(provider))`. [`ToolList::to_json`] makes that text from each tool's cached
/// JSON text (no tree is walked), and [`ToolList::json_entries`] lends each entry's text for a request body written
/// some other way.
#[derive(Clone, Copy)]
pub struct ToolList<'v> {
    tools: &'v [Arc<ToolDefinition>],
    provider: Provider,
    strict: Strict,
}

impl<'v> ToolList<'v> {
    /// The provider whose format the entries are in.
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// The same list with the provider's strict mode as `strict` says ([`Strict`]; a list is
    /// [`Strict::Auto`] unless it comes from a codec that says otherwise).
    #[must_use]
    pub fn with_strict(mut self, strict: Strict) -> ToolList<'v> {
        self.strict = strict;
        self
    }

    /// The strict-mode setting the entries are rendered with.
    pub fn strict(&self) -> Strict {
        self.strict
    }

    /// How many tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The entry at `index` (name order), if there is one.
    pub fn get(&self, index: usize) -> Option<&'v Value> {
        self.tools.get(index).map(|d| d.render_strict(self.provider, self.strict))
    }

    /// The entries, in name order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'v Value> + 'v {
        let (provider, strict) = (self.provider, self.strict);
        self.tools.iter().map(move |d| d.render_strict(provider, strict))
    }

    /// The entries as compact JSON text, in name order: each the tool's cached [`ToolDefinition::render_json`].
    pub fn json_entries(&self) -> impl ExactSizeIterator<Item = &'v str> + 'v {
        let (provider, strict) = (self.provider, self.strict);
        self.tools.iter().map(move |d| d.render_json_strict(provider, strict))
    }

    /// The list as compact JSON text (an array), made by joining each tool's cached JSON text: the same bytes as
    /// `serde_json::to_string` of the list.
    pub fn to_json(&self) -> String {
        let mut json = String::with_capacity(2 + self.json_entries().map(|e| e.len() + 1).sum::<usize>());
        json.push('[');
        for (i, entry) in self.json_entries().enumerate() {
            if i > 0 {
                json.push(',');
            }
            json.push_str(entry);
        }
        json.push(']');
        json
    }

    /// The entries copied into a list of their own.
    pub fn to_vec(&self) -> Vec<Value> {
        self.iter().cloned().collect()
    }
}

impl fmt::Debug for ToolList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolList")
            .field("provider", &self.provider)
            .field("strict", &self.strict)
            .field("tools", &self.tools.iter().map(|d| d.name()).collect::<Vec<_>>())
            .finish()
    }
}

/// A JSON array of the entries, in name order.
impl Serialize for ToolList<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len()))?;
        for entry in self.iter() {
            seq.serialize_element(entry)?;
        }
        seq.end()
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
/// Names are looked up as they are given (no copy of them is kept, except of a name the view lacks).
#[must_use]
pub struct ViewBuilder<'r> {
    from: &'r ToolView,
    /// With a name filter, the positions in `from` of the names found, in the order given.
    chosen: Option<Vec<usize>>,
    /// The names given that `from` lacks, in the order given.
    missing: Vec<String>,
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
        ViewBuilder { from, chosen: None, missing: Vec::new(), tags: Vec::new(), effects: None }
    }

    /// Keeps only these names (each must exist in the registry). Names in the registry's (sorted) order are
    /// found fastest; any order and repeats are accepted.
    pub fn names<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let tools = &self.from.inner.tools;
        let names = names.into_iter();
        let chosen = self.chosen.get_or_insert_with(Vec::new);
        chosen.reserve(names.size_hint().0);
        for name in names {
            let name = name.as_ref();
            // The tool after the last one found, when names come in order; otherwise a binary search.
            let next = chosen.last().map_or(0, |&i| i + 1);
            let found = match tools.get(next) {
                Some(d) if d.name() == name => Ok(next),
                _ => tools.binary_search_by(|d| d.name().cmp(name)),
            };
            match found {
                Ok(i) => chosen.push(i),
                Err(_) => self.missing.push(name.to_owned()),
            }
        }
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
        if !self.missing.is_empty() {
            return Err(UnknownTools(self.missing));
        }
        let tools = &self.from.inner.tools;
        let keep = |d: &&Arc<ToolDefinition>| {
            self.tags.iter().all(|t| d.has_tag(t)) && self.effects.as_ref().is_none_or(|e| e.contains(&d.effect()))
        };
        // `from` is sorted and unique, so positions in increasing order give a sorted, unique view.
        let chosen: Vec<Arc<ToolDefinition>> = match self.chosen {
            Some(mut positions) => {
                if !positions.is_sorted() {
                    positions.sort_unstable();
                }
                positions.dedup();
                positions.iter().filter_map(|&i| tools.get(i)).filter(keep).cloned().collect()
            }
            None => tools.iter().filter(keep).cloned().collect(),
        };
        Ok(ToolView::from_sorted(chosen))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tool_schemas::fixtures::definition;

    fn base() -> ToolView {
        let schema = json!({"type": "object", "properties": {"q": {"type": "string", "description": "Words."}}});
        let names = ["notes.search", "b_tool", "a_tool", "c_tool", "d.e_tool"];
        ToolView::new(names.map(|n| Arc::new(definition(n, schema.clone()))).into())
    }

    #[test]
    fn a_tool_list_is_the_schemas_list_byte_for_byte_for_every_provider() {
        let view = base().select().names(["notes.search", "a_tool", "d.e_tool"]).build().expect("known names");
        for provider in Provider::ALL {
            let list = view.tool_list(provider);
            let expected = serde_json::to_string(view.schemas(provider)).expect("serialisable");
            assert_eq!(serde_json::to_string(&list).expect("serialisable"), expected, "{provider:?}");
            assert_eq!(list.to_json(), expected, "{provider:?}");
            assert_eq!(list.to_vec(), view.schemas(provider), "{provider:?}");
            assert_eq!(list.len(), 3);
            assert_eq!(list.provider(), provider);
            let codec = view.codec(provider);
            assert_eq!(codec.tool_list().to_json(), expected, "{provider:?}");
            for (i, (entry, text)) in list.iter().zip(list.json_entries()).enumerate() {
                assert_eq!(serde_json::to_string(entry).expect("serialisable"), text);
                assert_eq!(Some(entry), list.get(i));
                assert_eq!(Some(entry), codec.tool(view.iter().nth(i).expect("a tool").name()));
            }
            assert_eq!(list.get(3), None);
        }
        let empty = ToolView::new(Vec::new());
        assert_eq!(empty.tool_list(Provider::Ollama).to_json(), "[]");
        assert_eq!(serde_json::to_string(&empty.tool_list(Provider::Mcp)).expect("serialisable"), "[]");
    }

    #[test]
    fn views_share_each_tools_rendering() {
        let base = base();
        let one = base.select().names(["a_tool", "c_tool"]).build().expect("known names");
        let two = base.select().names(["c_tool", "notes.search"]).build().expect("known names");
        for provider in Provider::ALL {
            let (a, b) = (one.tool_list(provider), two.tool_list(provider));
            // `c_tool` is the second entry of `one` and the first of `two`: the same value and text, not copies.
            assert!(Arc::ptr_eq(one.get("c_tool").expect("c_tool"), two.get("c_tool").expect("c_tool")));
            assert!(std::ptr::eq(a.get(1).expect("c_tool"), b.get(0).expect("c_tool")), "{provider:?}");
            let (ta, tb) = (a.json_entries().nth(1).expect("c_tool"), b.json_entries().next().expect("c_tool"));
            assert!(std::ptr::eq(ta, tb), "{provider:?}");
            assert!(std::ptr::eq(a.get(1).expect("c_tool"), base.tool_list(provider).get(2).expect("c_tool")));
        }
    }

    #[test]
    fn names_in_any_order_with_repeats_choose_a_sorted_view() {
        let base = base();
        let names = |v: &ToolView| v.names().map(str::to_owned).collect::<Vec<_>>();
        let sorted = base.select().names(["a_tool", "b_tool", "d.e_tool"]).build().expect("known names");
        assert_eq!(names(&sorted), ["a_tool", "b_tool", "d.e_tool"]);
        let shuffled = base.select().names(["d.e_tool", "a_tool", "d.e_tool", "b_tool", "a_tool"]).build();
        assert_eq!(names(&shuffled.expect("known names")), ["a_tool", "b_tool", "d.e_tool"]);
        // Several calls add up; owned names work as well as borrowed ones.
        let added = base.select().names(["c_tool"]).names(vec!["a_tool".to_owned()]).build().expect("known names");
        assert_eq!(names(&added), ["a_tool", "c_tool"]);
        let none = base.select().names(Vec::<String>::new()).build().expect("no names");
        assert!(none.is_empty());
        let err = base.select().names(["zz", "a_tool", "yy", "zz"]).build().expect_err("unknown names");
        assert_eq!(err, UnknownTools(vec!["zz".to_owned(), "yy".to_owned(), "zz".to_owned()]));
        assert_eq!(names(&base.select().build().expect("every tool")), names(&base));
    }

    #[test]
    fn a_view_of_unsorted_definitions_is_sorted_and_keeps_the_first_of_a_name() {
        let first = Arc::new(definition("b_tool", json!({"type": "object"})));
        let second = Arc::new(definition("b_tool", json!({"type": "object"})));
        let a = Arc::new(definition("a_tool", json!({"type": "object"})));
        let view = ToolView::new(vec![first.clone(), a, second]);
        assert_eq!(view.names().collect::<Vec<_>>(), ["a_tool", "b_tool"]);
        assert!(Arc::ptr_eq(view.get("b_tool").expect("b_tool"), &first));
    }
}
