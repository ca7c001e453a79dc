//! The one place that knows how generated code names the runtime crate.

use proc_macro_crate::{FoundCrate, crate_name};
use proc_macro2::Span;
use syn::{Ident, Path};

use crate::attr::ToolAttr;

/// `#[tool(crate = "...")]` if given; else the name under which the calling crate depends on `keel-tools-core`, or
/// on the facade `keel-tools` that re-exports it (found in its Cargo.toml, so a renamed dependency such as
/// `keel = { package = "keel-tools" }` works); else `::keel_tools_core`.
pub fn root(attr: &ToolAttr) -> Path {
    if let Some(p) = &attr.krate {
        return p.value.clone();
    }
    let name = match crate_name("keel-tools-core") {
        Ok(FoundCrate::Name(n)) => n,
        // Inside keel-tools-core (its unit tests, examples, doc tests) `extern crate self as keel_tools_core` makes
        // this work.
        Ok(FoundCrate::Itself) => "keel_tools_core".to_owned(),
        Err(_) => match crate_name("keel-tools") {
            Ok(FoundCrate::Name(n)) => n,
            // Inside the facade, `extern crate self as keel_tools` makes this work.
            Ok(FoundCrate::Itself) => "keel_tools".to_owned(),
            Err(_) => "keel_tools_core".to_owned(),
        },
    };
    let ident = Ident::new(&name, Span::call_site());
    syn::parse_quote!(::#ident)
}
