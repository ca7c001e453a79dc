//! `--tool-search`: how the command lets a model find the deferred tools (`#[tool(defer)]`).

use clap::ValueEnum;
use keel_tools_core::ToolView;

use crate::failure::{Failure, fail};

/// `--tool-search`: how a model finds the deferred tools (`#[tool(defer)]`), when any tool is deferred.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum ToolSearchArg {
    /// The provider's own tool search where its API has one (Anthropic, OpenAI Responses); keel's `search_tools`
    /// elsewhere.
    #[default]
    Native,
    /// keel's `search_tools` tool, on every API.
    Keel,
    /// No search: every tool is listed in full, deferred or not.
    Off,
}

impl ToolSearchArg {
    /// The view the executor runs over: with keel's search tool when a tool is deferred, or with nothing deferred
    /// (`off`).
    pub(crate) fn view(self, view: ToolView) -> Result<ToolView, Failure> {
        if !view.has_deferred() {
            return Ok(view);
        }
        match self {
            ToolSearchArg::Off => {
                let tools = view
                    .iter()
                    .map(|d| if d.deferred() { std::sync::Arc::new(d.with_deferred(false)) } else { d.clone() })
                    .collect();
                Ok(ToolView::new(tools))
            }
            ToolSearchArg::Native | ToolSearchArg::Keel => view.with_tool_search().map_err(|e| fail(1, e.to_string())),
        }
    }

    /// The model clients' setting.
    pub(crate) fn agent(self) -> keel_tools_agent::ToolSearch {
        match self {
            ToolSearchArg::Native => keel_tools_agent::ToolSearch::Native,
            ToolSearchArg::Keel | ToolSearchArg::Off => keel_tools_agent::ToolSearch::Keel,
        }
    }
}
