//! The [`Registry`]: every tool this process may list or run, built once and immutable afterwards.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::sync::Arc;

use crate::definition::{StaticTool, ToolDefinition, compiled};
use crate::name;
use crate::view::{ToolView, ViewBuilder};

/// The [`Registry`]: every tool this process may list or run, built once and immutable afterwards.
///
/// A registry gathers the tools `#[tool]` submitted to `inventory` (from every crate linked into the binary) plus
/// the definitions added on the [`RegistryBuilder`]. Names are unique: a name defined twice is an error that lists
/// every definition site, unless the builder is told to [`replace`](RegistryBuilder::replace) it.
///
/// ```
/// use tool_core::{tool, Registry, ToolError};
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
        RegistryBuilder { inventory: true, added: Vec::new(), replacements: Vec::new(), removed: Vec::new() }
    }

    /// Leaves the inventory out: the registry holds only what the builder adds.
    pub fn without_inventory(mut self) -> Self {
        self.inventory = false;
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

    /// Checks names, uniqueness, every tool's parameters and every schema, and builds the registry. Every problem
    /// is reported at once, each with the tool and where it is defined.
    pub fn build(self) -> Result<Registry, RegistryError> {
        let mut problems = Vec::new();
        let mut defs: Vec<ToolDefinition> = Vec::new();
        if self.inventory {
            defs.extend(inventory::iter::<StaticTool>.into_iter().map(ToolDefinition::from_static));
        }
        defs.extend(self.added);

        let mut sites: HashMap<&str, Vec<usize>> = HashMap::with_capacity(defs.len());
        for (i, d) in defs.iter().enumerate() {
            if let Err(e) = name::validate(d.name()) {
                problems.push(RegistryProblem::InvalidName { error: e, site: d.origin().to_string() });
                continue;
            }
            sites.entry(d.name()).or_default().push(i);
        }
        let replaced: std::collections::HashSet<&str> = self.replacements.iter().map(|r| r.name()).collect();
        let mut duplicates: Vec<RegistryProblem> = sites
            .iter()
            .filter(|(name, idx)| idx.len() > 1 && !replaced.contains(*name))
            .map(|(name, idx)| RegistryProblem::Duplicate {
                name: (*name).to_owned(),
                sites: idx.iter().map(|&i| defs[i].origin().to_string()).collect(),
            })
            .collect();
        duplicates.sort_by(|a, b| a.key().cmp(b.key()));
        problems.extend(duplicates);
        drop(sites);
        drop(replaced);

        let mut by_name: HashMap<Box<str>, ToolDefinition> = HashMap::with_capacity(defs.len());
        for d in defs {
            if let Entry::Vacant(v) = by_name.entry(d.name().into()) {
                v.insert(d);
            }
        }
        for r in self.replacements {
            match by_name.get_mut(r.name()) {
                Some(slot) => *slot = r,
                None => problems.push(RegistryProblem::NothingToReplace { name: r.name().to_owned() }),
            }
        }
        for n in self.removed {
            if by_name.remove(n.as_str()).is_none() {
                problems.push(RegistryProblem::NothingToRemove { name: n });
            }
        }
        // Every definition's parameters and schemas, so that a broken tool fails here, named, not at its first call.
        let mut broken: Vec<RegistryProblem> = Vec::new();
        for d in by_name.values() {
            if let Some(problem) = &d.problem {
                broken.push(RegistryProblem::Parameters {
                    name: d.name().to_owned(),
                    site: d.origin().to_string(),
                    problem: problem.clone(),
                });
            } else if let Err(problem) = compiled(d) {
                broken.push(RegistryProblem::Schema {
                    name: d.name().to_owned(),
                    site: d.origin().to_string(),
                    problem: problem.to_owned(),
                });
            }
        }
        broken.sort_by(|a, b| a.key().cmp(b.key()));
        problems.extend(broken);
        if !problems.is_empty() {
            return Err(RegistryError { problems });
        }

        Ok(Registry { all: ToolView::new(by_name.into_values().map(Arc::new).collect()) })
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

impl RegistryProblem {
    fn key(&self) -> &str {
        match self {
            RegistryProblem::Duplicate { name, .. }
            | RegistryProblem::NothingToReplace { name }
            | RegistryProblem::NothingToRemove { name }
            | RegistryProblem::Parameters { name, .. }
            | RegistryProblem::Schema { name, .. } => name,
            RegistryProblem::InvalidName { error, .. } => error.name(),
        }
    }
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
