//! The one place that knows how generated code names the runtime crate.

use proc_macro_crate::{FoundCrate, crate_name};
use proc_macro2::Span;
use syn::{Ident, Path};

use crate::attr::ToolAttr;

/// `#[tool(crate = "...")]` if given; else the name under which the calling crate depends on `tool-core`
/// (found in its Cargo.toml, so a renamed dependency such as `keel = { package = "tool-core" }` works);
/// else `::tool_core`.
pub fn root(attr: &ToolAttr) -> Path {
    if let Some(p) = &attr.krate {
        return p.value.clone();
    }
    let name = match crate_name("tool-core") {
        Ok(FoundCrate::Name(n)) => n,
        // Inside tool-core (its unit tests, examples, doc tests) `extern crate self as tool_core` makes this work.
        Ok(FoundCrate::Itself) | Err(_) => "tool_core".to_owned(),
    };
    let ident = Ident::new(&name, Span::call_site());
    syn::parse_quote!(::#ident)
}
