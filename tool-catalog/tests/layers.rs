//! tool-catalog's modules form layers: each module imports (through `crate::`) only modules of lower layers. A
//! change that makes a module reach upwards, and so an import cycle, fails here. Test code (`#[cfg(test)]` items,
//! a folder's `tests.rs`) may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;

/// From the bottom up. Modules of one layer do not import each other.
const LAYERS: &[&[&str]] = &[
    &["error", "locator", "narrow"],
    &["row", "lookup"],
    // The storage trait, its vocabulary and both backends (`src/storage/`); the resolution of rows.
    &["storage", "resolve"],
    // The facade: the catalogue, its views and its server.
    &["catalog"],
];

/// Outside the layers: the crate root.
const ABOVE_ALL: &[&str] = &["lib"];

fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("cfg") && a.meta.to_token_stream().to_string().contains("test"))
}

/// Every `crate::<module>` in `tokens` (string literals, such as doc comments, are single tokens and never match).
fn crate_refs(tokens: TokenStream, out: &mut BTreeSet<String>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, t) in tokens.iter().enumerate() {
        match t {
            TokenTree::Group(g) => crate_refs(g.stream(), out),
            // `$crate` in a `macro_rules!` names the crate for its users, not an import.
            TokenTree::Ident(id)
                if id == "crate"
                    && !matches!(i.checked_sub(1).map(|p| &tokens[p]), Some(TokenTree::Punct(d)) if d.as_char() == '$') =>
            {
                if let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(TokenTree::Ident(m))) =
                    (tokens.get(i + 1), tokens.get(i + 2), tokens.get(i + 3))
                    && a.as_char() == ':'
                    && b.as_char() == ':'
                {
                    out.insert(m.to_string());
                }
            }
            _ => {}
        }
    }
}

/// The source files of `src`, each with the module it counts as: `src/x.rs` is `x`; anything under `src/x/` counts
/// as `x` (so `src/storage/postgres.rs` is `storage`). Test-only files (a folder's `tests.rs`) are left out.
fn sources(src: &Path) -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || (path.parent() != Some(src) && path.ends_with("tests.rs"))
            {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap();
            let first = relative.components().next().unwrap().as_os_str().to_str().unwrap();
            files.push((first.trim_end_matches(".rs").to_owned(), path));
        }
    }
    files
}

/// The modules each module of `src` imports, test code left out.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, path) in sources(src) {
        let text = std::fs::read_to_string(&path).unwrap();
        let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let refs = graph.entry(module.clone()).or_default();
        for item in file.items {
            let attrs: &[syn::Attribute] = match &item {
                syn::Item::Mod(m) => &m.attrs,
                syn::Item::Fn(f) => &f.attrs,
                syn::Item::Impl(i) => &i.attrs,
                syn::Item::Use(u) => &u.attrs,
                syn::Item::Struct(s) => &s.attrs,
                syn::Item::Const(c) => &c.attrs,
                _ => &[],
            };
            if is_test_only(attrs) {
                continue;
            }
            crate_refs(item.to_token_stream(), refs);
        }
        refs.remove(&module);
    }
    graph
}

#[test]
fn every_module_imports_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&src);
    let mut wrong = Vec::new();
    for (module, refs) in &graph {
        if ABOVE_ALL.contains(&module.as_str()) {
            continue;
        }
        let Some(own) = layer(module) else {
            wrong.push(format!("module `{module}` is in no layer: add it to LAYERS"));
            continue;
        };
        for r in refs {
            match layer(r) {
                Some(l) if l < own => {}
                Some(_) => wrong.push(format!("`{module}` imports `{r}`, which is not below it")),
                None if ABOVE_ALL.contains(&r.as_str()) => {
                    wrong.push(format!("`{module}` imports `{r}`, which is above every layer"))
                }
                None => wrong.push(format!("`{module}` imports `{r}`, which is in no layer")),
            }
        }
    }
    assert!(wrong.is_empty(), "tool-catalog's layers are broken:\n{}", wrong.join("\n"));
    // The check sees real imports: the catalogue does use its storage, and resolution the schema check.
    assert!(graph["catalog"].contains("storage") && graph["resolve"].contains("narrow"), "{graph:?}");
    // The files of a module's folder are read, and count as that module: the backends are `storage`.
    let files = sources(&src);
    for backend in ["storage/sqlite.rs", "storage/postgres.rs"] {
        assert!(files.iter().any(|(m, p)| m == "storage" && p.ends_with(backend)), "{backend}: {files:?}");
    }
    assert!(graph["storage"].contains("row"), "{graph:?}");
}
