//! Finding a local row's target among the tools compiled into the binary.
//!
//! [`ToolLookup`] is the one place a local locator meets the compiled tools. The catalogue calls it only after the
//! locator parsed and (for a path) its module passed the allowlist, so a test can wrap it to prove that bad rows
//! never reach it. [`RegistryLookup`] is the implementation over a [`Registry`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use keel_tools_core::Registry;
use keel_tools_core::definition::{Origin, ToolDefinition};

use crate::locator::{LocalTarget, RustPath};

/// What a local target turned out to be.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Lookup {
    /// A compiled tool: the registry's own definition (not a copy).
    Found(Arc<ToolDefinition>),
    /// A module that holds compiled tools, not a tool: what it holds (`fn_name`, `submodule::`).
    Module(Vec<String>),
    /// Nothing compiled has this name or path.
    Missing,
}

/// Looks local targets up among the compiled tools.
pub trait ToolLookup: Send + Sync + 'static {
    /// The tool (or module) `target` names.
    fn lookup(&self, target: &LocalTarget) -> Lookup;
}

impl<L: ToolLookup + ?Sized> ToolLookup for Arc<L> {
    fn lookup(&self, target: &LocalTarget) -> Lookup {
        (**self).lookup(target)
    }
}

/// [`ToolLookup`] over the compiled tools of a [`Registry`] (definitions whose origin is
/// [`Origin::Compiled`]; run-time definitions such as MCP imports are not local targets).
///
/// By name: the registry's tool of that name. By path: the tool whose [`Origin::rust_path`] is the path
/// (`module_path!()` of the declaration, then the fn's name). A path that is a module holding tools (or a parent of
/// such a module) is reported as [`Lookup::Module`].
#[derive(Debug, Clone)]
pub struct RegistryLookup {
    by_name: HashMap<String, Arc<ToolDefinition>>,
    by_path: HashMap<String, Arc<ToolDefinition>>,
    /// Every module path that holds tools, or holds a module that does, with what it holds.
    modules: BTreeMap<String, BTreeSet<String>>,
}

impl RegistryLookup {
    /// Indexes the compiled tools of `registry`.
    pub fn new(registry: &Registry) -> RegistryLookup {
        let mut by_name = HashMap::new();
        let mut by_path = HashMap::new();
        let mut modules: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for def in registry.iter() {
            let Origin::Compiled { location, fn_name } = def.origin() else { continue };
            by_name.insert(def.name().to_owned(), def.clone());
            by_path.insert(format!("{}::{fn_name}", location.module_path), def.clone());
            modules.entry(location.module_path.to_owned()).or_default().insert((*fn_name).to_owned());
            // Each ancestor module holds the next one down.
            if let Some(path) = RustPath::parse(location.module_path) {
                let segs = path.segments();
                for i in 1..segs.len() {
                    modules.entry(segs[..i].join("::")).or_default().insert(format!("{}::", segs[i]));
                }
            }
        }
        RegistryLookup { by_name, by_path, modules }
    }

    /// The definition of a compiled tool by name, if any.
    pub fn get(&self, name: &str) -> Option<&Arc<ToolDefinition>> {
        self.by_name.get(name)
    }
}

impl ToolLookup for RegistryLookup {
    fn lookup(&self, target: &LocalTarget) -> Lookup {
        match target {
            LocalTarget::Name(n) => self.by_name.get(n).cloned().map_or(Lookup::Missing, Lookup::Found),
            LocalTarget::Path(p) => {
                let key = p.to_string();
                if let Some(def) = self.by_path.get(&key) {
                    return Lookup::Found(def.clone());
                }
                match self.modules.get(&key) {
                    Some(holds) => Lookup::Module(holds.iter().cloned().collect()),
                    None => Lookup::Missing,
                }
            }
        }
    }
}

/// The module path a compiled definition was declared in.
pub(crate) fn module_of(def: &ToolDefinition) -> Option<RustPath> {
    match def.origin() {
        Origin::Compiled { location, .. } => RustPath::parse(location.module_path),
        _ => None,
    }
}
