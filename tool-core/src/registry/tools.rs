//! The [`Registry`]: every tool this process may list or run, built once and immutable afterwards.

use std::fmt;
use std::sync::Arc;

use crate::name;
use crate::registry::view::{ToolView, ViewBuilder};
use crate::tool_definition::{CompiledTool, StaticTool, ToolDefinition, compiled};

/// The [`Registry`]: every tool this process may list or run, built once and immutable afterwards.
///
/// A registry gathers the tools `#[tool]` submitted to `inventory` (from every crate linked into the binary) plus
/// the definitions added on the [`RegistryBuilder`]. Names are unique: a name defined twice is an error that lists
/// every definition site, unless the builder is told to [`replace`](RegistryBuilder::replace) it.
///
/// ```
/// use keel_tools_core::{tool, Registry, ToolError};
///
/// /// Says hello.
/// #[tool(effect = "read", version = "1.0")]
/// fn greet(name: String) -> String {
///     format!("hello, {name}")
/// }
///
/// let registry = Registry::from_inventory().expect("tool names are unique");
/// assert!(registry.get("greet").is_some());
/// ```
///
/// An immutable set of uniquely named tools. Cheap to clone, `Send + Sync`.
///
/// A registry is a [`ToolView`] of every tool (it derefs to it) plus the guarantee that its names are unique;
/// choose subsets with [`Registry::view`].
#[derive(Clone)]
pub struct Registry {
    all: ToolView,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry").field("tools", &self.names().collect::<Vec<_>>()).finish()
    }
}

impl Registry {
    /// The tools every linked crate declared with `#[tool]`.
    pub fn from_inventory() -> Result<Registry, RegistryError> {
        RegistryBuilder::new().build()
    }

    /// A builder that starts from the inventory tools.
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder::new()
    }

    /// A view of every tool (model-visible list and executor allowlist in one object).
    pub fn all(&self) -> &ToolView {
        &self.all
    }

    /// Chooses a subset of tools for one run or turn.
    pub fn view(&self) -> ViewBuilder<'_> {
        ViewBuilder::new(&self.all)
    }
}

/// A registry is the view of every tool it holds: `registry.get(name)`, `registry.ollama_schemas()` and every
/// other [`ToolView`] method read that view.
impl std::ops::Deref for Registry {
    type Target = ToolView;
    fn deref(&self) -> &ToolView {
        &self.all
    }
}

/// Builds a [`Registry`]; see [`Registry::builder`].
#[must_use]
pub struct RegistryBuilder {
    inventory: bool,
    defer_schemas: bool,
    added: Vec<ToolDefinition>,
    replacements: Vec<ToolDefinition>,
    removed: Vec<String>,
}

impl Default for RegistryBuilder {
    fn default() -> Self {
        RegistryBuilder::new()
    }
}

impl RegistryBuilder {
    /// Starts from the inventory tools.
    pub fn new() -> RegistryBuilder {
        RegistryBuilder {
            inventory: true,
            defer_schemas: false,
            added: Vec::new(),
            replacements: Vec::new(),
            removed: Vec::new(),
        }
    }

    /// Leaves the inventory out: the registry holds only what the builder adds.
    pub fn without_inventory(mut self) -> Self {
        self.inventory = false;
        self
    }

    /// Leaves compiling the schemas to the executors. [`build`](Self::build) still checks names, uniqueness and
    /// every tool's parameters; each schema is compiled (once per definition, shared by every view) when an
    /// executor over a view that holds the tool is built
    /// ([`ExecutorBuilder::build`](crate::executor::ExecutorBuilder::build)), and a schema that does not compile fails
    /// that build, with the tool named. So nothing reaches a call unchecked either way; what moves is *when* a broken
    /// schema is reported. The tools' examples are checked only here, so deferring leaves them unchecked.
    ///
    /// For registries far larger than any one view, e.g. thousands of run-time tools of which each turn sees a
    /// few hundred: compiling a tool's two schemas costs about 240 µs, so a 10,000-tool registry takes seconds to
    /// build with the default and milliseconds with this (BENCHMARKS.md). By default every schema is compiled here,
    /// so that a broken tool fails the registry.
    pub fn defer_schema_checks(mut self) -> Self {
        self.defer_schemas = true;
        self
    }

    /// Adds a definition. Its name must not be taken: a duplicate fails [`build`](Self::build).
    pub fn tool(mut self, def: ToolDefinition) -> Self {
        self.added.push(def);
        self
    }

    /// Adds several definitions.
    pub fn tools(mut self, defs: impl IntoIterator<Item = ToolDefinition>) -> Self {
        self.added.extend(defs);
        self
    }

    /// Replaces every definition of the same name (from the inventory or added) with `def`. This is the explicit
    /// override: without it a second definition is an error, and it is also how a binary settles two linked crates
    /// that declare the same name. Fails [`build`](Self::build) when no tool of that name exists.
    pub fn replace(mut self, def: ToolDefinition) -> Self {
        self.replacements.push(def);
        self
    }

    /// Leaves out the tool named `name` (fails [`build`](Self::build) when there is none).
    pub fn remove(mut self, name: impl Into<String>) -> Self {
        self.removed.push(name.into());
        self
    }

    /// Checks names, uniqueness, every tool's parameters, and every schema and every tool's examples against its
    /// argument schema (unless [deferred](Self::defer_schema_checks)), and builds the registry. Every problem is
    /// reported at once, each with the tool and where it is defined.
    pub fn build(self) -> Result<Registry, RegistryError> {
        let mut problems = Vec::new();
        // Each definition goes into its `Arc` once; from here on only pointers move.
        let mut defs: Vec<Arc<ToolDefinition>> = Vec::with_capacity(self.added.len());
        if self.inventory {
            defs.extend(inventory::iter::<StaticTool>.into_iter().map(|t| Arc::new(ToolDefinition::from_static(t))));
        }
        defs.extend(self.added.into_iter().map(Arc::new));

        for d in &defs {
            if let Err(e) = name::validate(d.name()) {
                problems.push(RegistryProblem::InvalidName { error: e, site: d.origin().to_string() });
            }
        }
        // A stable sort by name: the definitions of one name stay in the order given (the first is kept, and a
        // duplicate's sites are listed in that order), and duplicates come out sorted by name.
        if !defs.is_sorted_by(|a, b| a.name() <= b.name()) {
            defs.sort_by(|a, b| a.name().cmp(b.name()));
        }
        {
            let mut replaced: Vec<&str> = self.replacements.iter().map(|r| r.name()).collect();
            replaced.sort_unstable();
            for same in defs.chunk_by(|a, b| a.name() == b.name()) {
                let Some(name) = same.first().map(|d| d.name()) else { continue };
                // An invalid name is reported as such, not again as a duplicate.
                if same.len() > 1 && replaced.binary_search(&name).is_err() && name::validate(name).is_ok() {
                    problems.push(RegistryProblem::Duplicate {
                        name: name.to_owned(),
                        sites: same.iter().map(|d| d.origin().to_string()).collect(),
                    });
                }
            }
        }
        defs.dedup_by(|later, first| later.name() == first.name());

        let find = |defs: &[Arc<ToolDefinition>], name: &str| defs.binary_search_by(|d| d.name().cmp(name)).ok();
        for r in self.replacements {
            match find(&defs, r.name()).and_then(|i| defs.get_mut(i)) {
                Some(slot) => *slot = Arc::new(r),
                None => problems.push(RegistryProblem::NothingToReplace { name: r.name().to_owned() }),
            }
        }
        if !self.removed.is_empty() {
            let mut kept = vec![true; defs.len()];
            for n in self.removed {
                match find(&defs, &n).and_then(|i| kept.get_mut(i)) {
                    Some(slot) if *slot => *slot = false,
                    _ => problems.push(RegistryProblem::NothingToRemove { name: n }),
                }
            }
            let mut kept = kept.into_iter();
            defs.retain(|_| kept.next().unwrap_or(true));
        }
        // Every definition's parameters and schemas, so that a broken tool fails here, named, not at its first call.
        // `defs` is sorted, so these come out sorted by name.
        for d in &defs {
            if let Some(problem) = &d.problem {
                problems.push(RegistryProblem::Parameters {
                    name: d.name().to_owned(),
                    site: d.origin().to_string(),
                    problem: problem.clone(),
                });
            } else if self.defer_schemas {
                // Compiled by the first executor over a view that holds it.
            } else {
                match compiled(d) {
                    Ok(tool) => example_problems(d, tool, &mut problems),
                    Err(problem) => problems.push(RegistryProblem::Schema {
                        name: d.name().to_owned(),
                        site: d.origin().to_string(),
                        problem: problem.to_owned(),
                    }),
                }
            }
        }
        if !problems.is_empty() {
            return Err(RegistryError { problems });
        }

        Ok(Registry { all: ToolView::from_sorted(defs) })
    }
}

/// Each of `def`'s examples against its argument schema, as the executor checks a call's arguments (in their
/// canonical form): every violation is a problem.
fn example_problems(def: &ToolDefinition, tool: &CompiledTool, problems: &mut Vec<RegistryProblem>) {
    for (index, example) in def.examples().iter().enumerate() {
        let mut arguments = example.clone();
        def.canonical_arguments(&mut arguments);
        let Err(violations) = tool.input.validate(&arguments) else { continue };
        problems.extend(violations.into_iter().map(|v| RegistryProblem::Example {
            name: def.name().to_owned(),
            site: def.origin().to_string(),
            index,
            pointer: v.pointer,
            message: format!("expected {}; found {}", v.expected, v.found),
        }));
    }
}

/// One reason a registry could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryProblem {
    /// A name is defined more than once; `sites` lists every definition.
    Duplicate {
        /// The duplicated name.
        name: String,
        /// Every definition site, e.g. `fn search at crates/a/src/lib.rs:10 (in a::tools)`.
        sites: Vec<String>,
    },
    /// A definition's name breaks the grammar.
    InvalidName {
        /// What is wrong.
        error: name::NameError,
        /// Where the definition came from.
        site: String,
    },
    /// `replace` named a tool that does not exist.
    NothingToReplace {
        /// The name given to `replace`.
        name: String,
    },
    /// `remove` named a tool that does not exist.
    NothingToRemove {
        /// The name given to `remove`.
        name: String,
    },
    /// A tool's parameters cannot be mapped to arguments (e.g. `Args<T>` beside other arguments).
    Parameters {
        /// The tool.
        name: String,
        /// Where it is defined.
        site: String,
        /// What is wrong.
        problem: String,
    },
    /// One of a tool's examples does not match its argument schema: one problem per violation.
    Example {
        /// The tool.
        name: String,
        /// Where it is defined.
        site: String,
        /// The example's index in [`ToolDefinition::examples`] (0 for the first `example = ...`).
        index: usize,
        /// JSON pointer (RFC 6901) into the example: `""` for the whole of it, `/filter/since` for a nested field.
        pointer: String,
        /// What is wrong there, e.g. `expected integer; found "ten"`.
        message: String,
    },
    /// A tool's argument or result schema does not compile, or the arguments are not an object.
    Schema {
        /// The tool.
        name: String,
        /// Where it is defined.
        site: String,
        /// What is wrong.
        problem: String,
    },
}

impl fmt::Display for RegistryProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryProblem::Duplicate { name, sites } => {
                write!(f, "tool name `{name}` is defined {} times:", sites.len())?;
                for s in sites {
                    write!(f, "\n    - {s}")?;
                }
                write!(
                    f,
                    "\n  give each tool its own `name = \"...\"`, or call `.replace(..)` on the registry builder \
                     to override one on purpose"
                )
            }
            RegistryProblem::InvalidName { error, site } => write!(f, "{error} ({site})"),
            RegistryProblem::NothingToReplace { name } => {
                write!(f, "`.replace(..)` names `{name}`, but no tool of that name exists; use `.tool(..)` to add it")
            }
            RegistryProblem::NothingToRemove { name } => {
                write!(f, "`.remove({name:?})` names no tool of this registry")
            }
            RegistryProblem::Parameters { name, site, problem } => write!(f, "tool `{name}` ({site}): {problem}"),
            RegistryProblem::Schema { name, site, problem } => write!(f, "tool `{name}` ({site}): {problem}"),
            RegistryProblem::Example { name, site, index, pointer, message } => {
                let at = if pointer.is_empty() { "(root)" } else { pointer };
                write!(
                    f,
                    "tool `{name}` ({site}): its example at index {index} does not match the argument schema: at \
                     {at}: {message}; correct the example, or the schema if the example is right"
                )
            }
        }
    }
}

/// Why a registry could not be built: every problem found, not just the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryError {
    problems: Vec<RegistryProblem>,
}

impl RegistryError {
    /// The problems, duplicates sorted by name.
    pub fn problems(&self) -> &[RegistryProblem] {
        &self.problems
    }
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the tool registry could not be built ({} problem(s))", self.problems.len())?;
        for p in &self.problems {
            write!(f, "\n- {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RegistryError {}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn def(name: &'static str, source: &'static str) -> ToolDefinition {
        ToolDefinition::builder(name)
            .description("A run-time tool.")
            .source(source)
            .handler(|_args, _ctx| async { Ok(Value::Null) })
            .build()
            .expect("a valid definition")
    }

    fn unchecked(name: &'static str, source: &'static str, input: Value) -> ToolDefinition {
        let mut d = def("placeholder", source);
        d.name = name.into();
        d.wire_name = name::to_wire(name);
        d.input_schema = crate::tool_definition::SchemaSource::Value(input);
        d
    }

    fn site(source: &str) -> String {
        format!("dynamic definition from {source}")
    }

    #[test]
    fn every_problem_is_reported_in_order() {
        let err = Registry::builder()
            .without_inventory()
            .tools([
                def("b", "one"),
                def("a", "two"),
                def("b", "three"),
                def("c", "four"),
                def("b", "five"),
                def("a", "six"),
                def("d", "seven"),
                def("d", "eight"),
                unchecked("Bad Name", "nine", json!({"type": "object"})),
                unchecked("Bad Name", "ten", json!({"type": "object"})),
                unchecked("e", "eleven", json!({"type": "object", "properties": {"x": {"type": 7}}})),
            ])
            .replace(def("d", "twelve"))
            .replace(def("zz", "thirteen"))
            .remove("c")
            .remove("c")
            .remove("nope")
            .build()
            .expect_err("problems");
        let shown: Vec<String> = err.problems().iter().map(ToString::to_string).collect();
        for p in &shown {
            eprintln!("{p}\n--");
        }
        let duplicate = |name: &str, sites: &[&str]| RegistryProblem::Duplicate {
            name: name.to_owned(),
            sites: sites.iter().map(|s| site(s)).collect(),
        };
        let problems = err.problems();
        assert!(matches!(&problems[0], RegistryProblem::InvalidName { site: s, .. } if *s == site("nine")));
        assert!(matches!(&problems[1], RegistryProblem::InvalidName { site: s, .. } if *s == site("ten")));
        assert_eq!(problems[2], duplicate("a", &["two", "six"]));
        assert_eq!(problems[3], duplicate("b", &["one", "three", "five"]));
        assert_eq!(problems[4], RegistryProblem::NothingToReplace { name: "zz".to_owned() });
        assert_eq!(problems[5], RegistryProblem::NothingToRemove { name: "c".to_owned() });
        assert_eq!(problems[6], RegistryProblem::NothingToRemove { name: "nope".to_owned() });
        assert!(matches!(&problems[7], RegistryProblem::Schema { name, .. } if name == "e"), "{shown:?}");
        assert_eq!(problems.len(), 8, "{shown:?}");
    }

    #[test]
    fn the_first_definition_is_kept_and_replacements_and_removals_apply() {
        let registry = Registry::builder()
            .without_inventory()
            .tools([def("c", "one"), def("a", "two"), def("b", "three"), def("x", "four")])
            .replace(def("b", "five"))
            .replace(def("b", "six"))
            .remove("x")
            .build()
            .expect("no problem");
        assert_eq!(registry.names().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(registry.get("b").map(|d| d.origin().to_string()), Some(site("six")));
        assert_eq!(registry.get("c").map(|d| d.origin().to_string()), Some(site("one")));

        // Replaced duplicates are no error: the replacement stands for all of them.
        let registry = Registry::builder()
            .without_inventory()
            .tools([def("a", "one"), def("a", "two")])
            .replace(def("a", "three"))
            .build()
            .expect("replaced");
        assert_eq!(registry.len(), 1);
        assert_eq!(registry.get("a").map(|d| d.origin().to_string()), Some(site("three")));
    }
}
