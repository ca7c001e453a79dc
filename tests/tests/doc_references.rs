//! What the documents point a reader to exists: every repository file they name in a code span (`scripts/guide.sh`,
//! or a path inside the package that documents it) and every test target they name in a command (`--test
//! with_peers`). A file moved or a test binary merged fails here, not in a reader's terminal. The records of what
//! was (CHANGELOG.md, docs/design/) name files as they were then, and are not read.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The documents a reader follows: the Markdown and Rust files of the repository (outside `target/`).
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                    stack.push(path);
                }
            } else if name.ends_with(".md") || name.ends_with(".rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The text's code spans that name a file under one of `tops` (the repository's top-level folders).
fn named_files(text: &str, tops: &BTreeSet<String>) -> Vec<String> {
    let mut names = Vec::new();
    for span in text.split('`').skip(1).step_by(2) {
        let candidate = span.split([' ', ':', '#']).next().unwrap_or_default();
        let Some((top, _)) = candidate.split_once('/') else { continue };
        let file = Path::new(candidate);
        let has_extension =
            file.extension().is_some_and(|e| ["rs", "sh", "py", "toml", "md", "json"].contains(&e.to_str().unwrap()));
        if tops.contains(top) && has_extension && !candidate.contains(['*', '<', '{', '$']) {
            names.push(candidate.to_owned());
        }
    }
    names
}

/// The test targets the text names after `--test`.
fn named_tests(text: &str) -> Vec<String> {
    text.split("--test ")
        .skip(1)
        .filter_map(|rest| {
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// Every test and example target of the workspace's packages, with keel-bench's measurement programs.
fn targets(root: &Path) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .current_dir(root)
        .args(["metadata", "--no-deps", "--format-version", "1", "--offline"])
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut names = BTreeSet::new();
    for package in metadata["packages"].as_array().unwrap() {
        for target in package["targets"].as_array().unwrap() {
            names.insert(target["name"].as_str().unwrap().to_owned());
        }
    }
    names
}

#[test]
fn every_file_and_test_target_the_documents_name_exists() {
    let root = workspace();
    let tops: BTreeSet<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && n != "target")
        .collect();
    let targets = targets(&root);
    let mut missing = Vec::new();
    for document in documents(&root) {
        let relative = document.strip_prefix(&root).unwrap().display().to_string();
        if relative.starts_with("fuzz/") || relative.starts_with("docs/design/") || relative == "CHANGELOG.md" {
            continue;
        }
        let text = std::fs::read_to_string(&document).unwrap();
        // A path may be the repository's or the package's that documents it (`tests/ui.rs` in tests/ui/lib.rs).
        let package = document.ancestors().skip(1).find(|d| d.join("Cargo.toml").is_file()).unwrap_or(&root);
        for file in named_files(&text, &tops) {
            if !root.join(&file).exists() && !package.join(&file).exists() {
                missing.push(format!("{relative}: the file `{file}`"));
            }
        }
        for test in named_tests(&text) {
            if !targets.contains(&test) {
                missing.push(format!("{relative}: the test target `--test {test}`"));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "named but not there:\n  {}", missing.join("\n  "));
}

#[test]
fn the_check_sees_files_and_test_targets() {
    let tops: BTreeSet<String> = ["tool-mcp", "scripts"].into_iter().map(String::from).collect();
    let text = "see `tool-mcp/tests/mcp/auth.rs` and `scripts/postgres.sh start`, not `src/bin/keel.rs` or `a*b`; \
                run `cargo test -p keel-tests --test with_peers catalog_rows`";
    assert_eq!(named_files(text, &tops), ["tool-mcp/tests/mcp/auth.rs", "scripts/postgres.sh"]);
    assert_eq!(named_tests(text), ["with_peers"]);
}
