//! What one principal of a protected server sees and runs for ([`McpServerBuilder::principal_view`]): its tenant
//! and the tools it may call.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use keel_tools_core::ToolView;

#[cfg(doc)]
use super::McpServerBuilder;
use super::{McpServer, Shared};
use crate::caller::Principal;

/// Maps a principal to what it sees and runs for; see [`McpServerBuilder::principal_view`].
pub type PrincipalViewFn = dyn Fn(&Principal) -> PrincipalView + Send + Sync;

/// What one principal sees and runs for: the tenant its calls run for, and the tools it may call out of the
/// server's. Returned by the hook of [`McpServerBuilder::principal_view`].
///
/// The tools are a subset of the server's view: naming a tool the server does not serve adds nothing. Cheap to
/// clone (the tool set is shared), so a hook can hand out values it built once.
///
/// ```
/// use keel_tools_mcp::server::PrincipalView;
///
/// let support = PrincipalView::names(["tickets.read", "tickets.search"]).tenant("acme");
/// assert!(support.allows("tickets.read") && !support.allows("billing.refund"));
/// assert_eq!(support.get_tenant(), Some("acme"));
/// assert!(PrincipalView::all().allows("billing.refund"));
/// assert!(!PrincipalView::none().allows("tickets.read"));
/// ```
#[derive(Clone, Default)]
#[must_use]
pub struct PrincipalView {
    tenant: Option<Arc<str>>,
    tools: Tools,
}

/// The tools of a [`PrincipalView`].
#[derive(Clone, Default)]
enum Tools {
    /// Every tool of the server.
    #[default]
    All,
    /// The tools of a keel view.
    View(ToolView),
    /// Tools by name.
    Names(Arc<BTreeSet<Box<str>>>),
}

impl fmt::Debug for PrincipalView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("PrincipalView");
        out.field("tenant", &self.tenant);
        match &self.tools {
            Tools::All => out.field("tools", &"all"),
            Tools::View(view) => out.field("tools", &view.names().collect::<Vec<_>>()),
            Tools::Names(names) => out.field("tools", names),
        };
        out.finish()
    }
}

impl PrincipalView {
    /// Every tool of the server (its scopes still apply), and no tenant.
    pub fn all() -> PrincipalView {
        PrincipalView::default()
    }

    /// No tool at all: the principal's `tools/list` is empty, and every call is refused as of an unknown tool.
    pub fn none() -> PrincipalView {
        PrincipalView { tenant: None, tools: Tools::Names(Arc::default()) }
    }

    /// The tools of `view` (by name; e.g. a selection of the server's view, by tags or effects) that the server
    /// serves.
    pub fn view(view: ToolView) -> PrincipalView {
        PrincipalView { tenant: None, tools: Tools::View(view) }
    }

    /// The tools named `names` (exactly, as MCP clients name them) that the server serves.
    pub fn names(names: impl IntoIterator<Item = impl AsRef<str>>) -> PrincipalView {
        let names = names.into_iter().map(|n| Box::from(n.as_ref())).collect();
        PrincipalView { tenant: None, tools: Tools::Names(Arc::new(names)) }
    }

    /// The tenant the principal's calls run for ([`CallOptions::tenant`](keel_tools_core::executor::CallOptions::tenant)),
    /// unless [`McpServerBuilder::call_options`] sets one.
    pub fn tenant(mut self, tenant: impl Into<Arc<str>>) -> PrincipalView {
        self.tenant = Some(tenant.into());
        self
    }

    /// The tenant set with [`PrincipalView::tenant`], if any.
    pub fn get_tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// Whether the view holds the tool named `name` (whether the server serves it is the server's to say).
    pub fn allows(&self, name: &str) -> bool {
        match &self.tools {
            Tools::All => true,
            Tools::View(view) => view.contains(name),
            Tools::Names(names) => names.contains(name),
        }
    }

    pub(super) fn tenant_arc(&self) -> Option<Arc<str>> {
        self.tenant.clone()
    }
}

impl Shared {
    /// What `principal` sees: the hook's answer, or every tool.
    pub(super) fn view_of(&self, principal: &Principal) -> PrincipalView {
        match &self.principal_view {
            Some(hook) => hook(principal),
            None => PrincipalView::all(),
        }
    }
}

impl McpServer {
    /// Whether `principal` may see the tool named `name`: the server serves it and the principal's view holds it.
    /// Its scopes are checked apart.
    pub(crate) fn visible_to(&self, principal: &Principal, name: &str) -> bool {
        self.shared.listing().executor.view().contains(name) && self.shared.view_of(principal).allows(name)
    }
}
