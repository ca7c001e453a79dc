//! Each library crate's modules form layers: a module imports (through `crate::`) only modules of lower layers. A
//! change that makes a module reach upwards, and so an import cycle, fails here, for every library crate of the
//! workspace.
//!
//! How a crate is read:
//! - `src/x.rs` is module `x`, and every file under `src/x/` counts as `x` too;
//! - test code may reach anywhere: `#[cfg(test)]` items, a folder's `tests.rs` and the crate's listed test-only
//!   files are left out;
//! - `$crate` in a `macro_rules!` names the crate for its users, not an import, and string literals (doc comments
//!   among them) are single tokens, so neither counts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;

/// One crate's design: its layers from the bottom up (modules of one layer do not import each other), the modules
/// above every layer (the root; they may use anything), and files that are test code only.
struct Crate {
    dir: &'static str,
    layers: &'static [&'static [&'static str]],
    above_all: &'static [&'static str],
    test_only: &'static [&'static str],
}

const CRATES: &[Crate] = &[
    Crate { dir: "tool-names", layers: &[], above_all: &["lib"], test_only: &[] },
    // The facade: one file of re-exports.
    Crate { dir: "keel-tools", layers: &[], above_all: &["lib"], test_only: &[] },
    Crate {
        dir: "tool-schema",
        layers: &[
            &["limits", "text", "vocabulary"],
            &["canonical", "rustdoc", "transform", "validate", "bounded"],
            &["dialect"],
        ],
        above_all: &["lib"],
        test_only: &[],
    },
    Crate {
        dir: "tool-macros",
        layers: &[&["ctxt", "site"], &["attr"], &["model", "paths"], &["expand"]],
        above_all: &["lib"],
        test_only: &[],
    },
    Crate {
        dir: "tool-core",
        layers: &[
            &["effect", "error", "failure", "name", "clock", "lease", "tasks"],
            &["input"],
            &["call", "call_context", "content"],
            &["params", "result"],
            &["tool_schemas"],
            &["tool_definition"],
            &["arguments"],
            // The registry and its views (`src/registry/`).
            &["registry"],
            &["codec"],
            &["call_policy", "otel"],
            // Effects that happen once: the ledger's trait and the executor's step.
            &["once"],
            &["executor"],
            &["event"],
            // Deferred tools: the views' side and the search tool.
            &["deferral"],
            &["runs"],
        ],
        // The support of generated code may use anything.
        above_all: &["lib", "__private"],
        test_only: &["tool_schemas/fixtures.rs"],
    },
    Crate {
        dir: "tool-search",
        layers: &[&["analyze", "document", "query"], &["index"]],
        above_all: &["lib"],
        test_only: &[],
    },
    Crate {
        dir: "tool-state",
        layers: &[
            &["error", "sql"],
            &["effect", "pending", "schema"],
            // Tasks: the trait, its vocabulary and what both backends share.
            &["task"],
            // The backends (`src/sqlite/`, `src/postgres/`: their task stores too).
            &["sqlite", "postgres"],
            &["ledger"],
        ],
        above_all: &["lib"],
        test_only: &[],
    },
    // The TLS client configuration: one file.
    Crate { dir: "tool-tls", layers: &[], above_all: &["lib"], test_only: &[] },
    // PostgreSQL connections: the connection string's TLS settings, then the TLS that uses them.
    Crate { dir: "tool-postgres", layers: &[&["error"], &["conninfo"], &["tls"]], above_all: &["lib"], test_only: &[] },
    Crate {
        dir: "tool-testkit",
        layers: &[&["imports", "seed"], &["schema"], &["check", "model"]],
        above_all: &["lib"],
        test_only: &[],
    },
    Crate { dir: "tool-contract", layers: &[&["lint", "lock"]], above_all: &["lib"], test_only: &[] },
    Crate {
        dir: "tool-mcp",
        layers: &[
            &["names", "otel", "input", "render", "caller"],
            // Tasks, the list of rmcp's handler methods a server hands on, the client.
            &["task", "compose", "client"],
            // The server: its builder, listing, sessions and calls (`src/server/`).
            &["server"],
            // Streamable HTTP around the server.
            &["http"],
        ],
        above_all: &["lib"],
        test_only: &[],
    },
    Crate {
        dir: "tool-catalog",
        layers: &[
            &["error", "locator", "narrow"],
            &["row", "lookup"],
            // The storage trait, its vocabulary and both backends (`src/storage/`); the resolution of rows.
            &["storage", "resolve"],
            // The facade: the catalogue and its views; then its server over MCP (feature `mcp`).
            &["catalog"],
            &["server"],
        ],
        above_all: &["lib"],
        test_only: &[],
    },
    Crate {
        dir: "tool-agent",
        layers: &[
            &["stream_event", "choice"],
            &["model"],
            // The framing of a streamed answer and what the accumulators share.
            &["stream"],
            // One HTTP API's side of a turn, its accumulator among it, a file each under `src/api/`.
            &["api"],
            &["deferral"],
            &["wire", "otel", "options", "key", "retry"],
            &["http", "stub"],
            &["client"],
            &["replay", "ollama", "openai", "responses", "anthropic", "gemini"],
            &["agent"],
        ],
        above_all: &["lib"],
        test_only: &[],
    },
    Crate {
        dir: "tool-cli",
        layers: &[&["failure"], &["tool_search", "forward"], &["chat", "serve"]],
        // `main.rs` is the binary, a crate of its own that uses the library by name; the runner (what the installed
        // binary runs) sits above the command it answers `--help` with.
        above_all: &["lib", "main", "runner"],
        test_only: &[],
    },
];

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("cfg") && a.meta.to_token_stream().to_string().contains("test"))
}

/// Every `crate::<module>` in `tokens`.
fn crate_refs(tokens: TokenStream, out: &mut BTreeSet<String>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, t) in tokens.iter().enumerate() {
        match t {
            TokenTree::Group(g) => crate_refs(g.stream(), out),
            TokenTree::Ident(id)
                if id == "crate"
                    && !matches!(i.checked_sub(1).map(|p| &tokens[p]), Some(TokenTree::Punct(d)) if d.as_char() == '$') =>
            {
                if let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) = (tokens.get(i + 1), tokens.get(i + 2))
                    && a.as_char() == ':'
                    && b.as_char() == ':'
                {
                    match tokens.get(i + 3) {
                        Some(TokenTree::Ident(m)) => {
                            out.insert(m.to_string());
                        }
                        // `crate::{a::X, b}`: the first name of each path in the group.
                        Some(TokenTree::Group(g)) if g.delimiter() == proc_macro2::Delimiter::Brace => {
                            let mut first = true;
                            for t in g.stream() {
                                match t {
                                    TokenTree::Ident(m) if first => {
                                        out.insert(m.to_string());
                                        first = false;
                                    }
                                    TokenTree::Punct(p) if p.as_char() == ',' => first = true,
                                    _ => first = false,
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
}

/// The source files of `src`, each with the module it counts as; test-only files left out.
fn sources(src: &Path, test_only: &[&str]) -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs")
                || test_only.iter().any(|t| path.ends_with(t))
                || (path.parent() != Some(src) && path.ends_with("tests.rs"))
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
fn imports(src: &Path, test_only: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, path) in sources(src, test_only) {
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

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// What breaks `krate`'s layers in `graph`, one line each.
fn broken(krate: &Crate, graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let layer = |module: &str| krate.layers.iter().position(|l| l.contains(&module));
    let mut wrong = Vec::new();
    for (module, refs) in graph {
        if krate.above_all.contains(&module.as_str()) {
            continue;
        }
        let Some(own) = layer(module) else {
            wrong.push(format!("module `{module}` is in no layer: add it to the layers of {}", krate.dir));
            continue;
        };
        for r in refs {
            match layer(r) {
                Some(l) if l < own => {}
                Some(_) => wrong.push(format!("`{module}` imports `{r}`, which is not below it")),
                None if krate.above_all.contains(&r.as_str()) => {
                    wrong.push(format!("`{module}` imports `{r}`, which is above every layer"))
                }
                None => wrong.push(format!("`{module}` imports `{r}`, which is in no layer")),
            }
        }
    }
    // A layer that names a module the crate no longer has is a stale design. (A module written inline in the
    // root, such as keel-tools-core's `name`, has no file and so no entry in the graph.)
    let root = std::fs::read_to_string(workspace().join(krate.dir).join("src/lib.rs")).unwrap();
    let inline: Vec<String> = syn::parse_file(&root)
        .unwrap()
        .items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(m) if m.content.is_some() => Some(m.ident.to_string()),
            _ => None,
        })
        .collect();
    for module in krate.layers.iter().flat_map(|l| l.iter()) {
        if !graph.contains_key(*module) && !inline.iter().any(|m| m == module) {
            wrong.push(format!("the layers of {} name `{module}`, which is no module of the crate", krate.dir));
        }
    }
    wrong
}

#[test]
fn every_library_crate_imports_only_lower_layers() {
    let mut wrong = Vec::new();
    for krate in CRATES {
        let graph = imports(&workspace().join(krate.dir).join("src"), krate.test_only);
        wrong.extend(broken(krate, &graph).into_iter().map(|w| format!("{}: {w}", krate.dir)));
    }
    assert!(wrong.is_empty(), "layers are broken:\n{}", wrong.join("\n"));
}

/// Every library crate of the workspace is checked: a new one must be given its layers.
#[test]
fn every_library_crate_is_listed() {
    let libraries: Vec<String> = std::fs::read_dir(workspace())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").is_file() && p.join("src/lib.rs").is_file())
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
        .filter(|name| name.starts_with("tool-") || name.starts_with("keel-tools"))
        .collect();
    assert!(libraries.len() >= 7, "{libraries:?}");
    for lib in libraries {
        assert!(CRATES.iter().any(|c| c.dir == lib.as_str()), "library crate {lib} has no layers in this test");
    }
}

/// The packages `package` (with `features`) builds on, for this machine: `cargo tree`'s normal and build
/// dependencies, one name a line.
fn dependencies(package: &str, features: &str) -> BTreeSet<String> {
    tree(package, features, false)
}

/// As [`dependencies`], without `package`'s default features.
fn dependencies_without_defaults(package: &str, features: &str) -> BTreeSet<String> {
    tree(package, features, true)
}

fn tree(package: &str, features: &str, no_defaults: bool) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = std::process::Command::new(cargo)
        .current_dir(workspace())
        .args(["tree", "--locked", "--quiet", "-p", package, "--features", features, "-e", "normal,build"])
        .args(no_defaults.then_some("--no-default-features"))
        .args(["--prefix", "none", "--format", "{p}"])
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo tree -p {package}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// Dependencies follow the layers: the call-state stores in PostgreSQL open their connections through
/// keel-tools-postgres, as the catalogue does, and so build nothing of MCP or of the catalogue; the catalogue
/// builds MCP only with its `mcp` feature.
#[test]
fn the_stores_in_postgresql_build_nothing_of_mcp() {
    let deps = dependencies("keel-tools-state", "postgres,rustls");
    assert!(deps.contains("keel-tools-postgres") && deps.contains("tokio-postgres"), "the check sees them: {deps:?}");
    for package in ["keel-tools-catalog", "keel-tools-mcp", "rmcp", "hyper", "reqwest"] {
        assert!(!deps.contains(package), "keel-tools-state with `postgres` builds {package}");
    }
    // The catalogue without its `mcp` feature: rows in SQLite or PostgreSQL, no MCP.
    let catalog = dependencies_without_defaults("keel-tools-catalog", "postgres,rustls");
    assert!(catalog.contains("keel-tools-postgres") && catalog.contains("rusqlite"), "{catalog:?}");
    for package in ["keel-tools-mcp", "rmcp", "hyper", "reqwest"] {
        assert!(!catalog.contains(package), "keel-tools-catalog without `mcp` builds {package}");
    }
    let connector = dependencies("keel-tools-postgres", "rustls");
    let keel: Vec<&str> = connector.iter().map(String::as_str).filter(|p| p.starts_with("keel-tools")).collect();
    assert_eq!(keel, ["keel-tools-postgres", "keel-tools-tls"], "keel-tools-postgres builds on keel's TLS alone");
}

/// The testkit's test models build on the agent loop alone: keel-tools-agent without its HTTP clients, so no
/// HTTP stack. The agent with its default features does build one (the check sees it).
#[test]
fn the_testkit_builds_no_http_client() {
    let testkit = dependencies("keel-tools-testkit", "");
    assert!(testkit.contains("keel-tools-agent") && testkit.contains("proptest"), "the check sees them: {testkit:?}");
    for package in ["reqwest", "hyper", "rustls", "rmcp"] {
        assert!(!testkit.contains(package), "keel-tools-testkit builds {package}");
    }
    assert!(dependencies("keel-tools-agent", "").contains("reqwest"), "keel-tools-agent's clients use reqwest");
}

/// The check sees real imports: it would not pass by reading nothing.
#[test]
fn the_check_sees_imports_and_folders() {
    let core = imports(&workspace().join("tool-core/src"), &["tool_schemas/fixtures.rs"]);
    assert!(core["executor"].contains("registry") && core["tool_definition"].contains("tool_schemas"), "{core:?}");
    // Files in a module's folder count: the codecs' renderers use the canonical schemas.
    assert!(core["codec"].contains("tool_schemas") && core["codec"].contains("registry"), "{core:?}");
    let catalog_src = workspace().join("tool-catalog/src");
    let catalog = imports(&catalog_src, &[]);
    assert!(catalog["catalog"].contains("storage") && catalog["resolve"].contains("narrow"), "{catalog:?}");
    let files = sources(&catalog_src, &[]);
    for backend in ["storage/sqlite.rs", "storage/postgres.rs"] {
        assert!(files.iter().any(|(m, p)| m == "storage" && p.ends_with(backend)), "{backend}: {files:?}");
    }
    let mcp = imports(&workspace().join("tool-mcp/src"), &[]);
    assert!(mcp["http"].contains("server"), "{mcp:?}");
    // A module reaching upwards is reported.
    let upside_down =
        Crate { dir: "tool-core", layers: &[&["view"], &["executor"]], above_all: &["lib"], test_only: &[] };
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("view".to_owned(), BTreeSet::from(["executor".to_owned()])),
        ("executor".to_owned(), BTreeSet::from(["view".to_owned()])),
    ]
    .into();
    assert_eq!(broken(&upside_down, &graph), ["`view` imports `executor`, which is not below it"]);
}
