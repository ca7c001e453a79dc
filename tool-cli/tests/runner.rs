//! The installed `keel` (this package's binary) run in crates of their own, outside this workspace, the way a user
//! runs it in theirs.
//!
//! `runs_over_the_tools_of_a_scratch_crate` builds a crate and keel over it: a second build of keel-tools-cli and its
//! dependencies (two to three minutes on two cores the first time; incremental after, since its target directory is
//! kept under this workspace's target directory, where `scripts/scratch-crate.sh` builds the same shim first). It
//! builds offline, from the workspace's `Cargo.lock` and the packages cargo downloaded to build this workspace (the
//! runner reads `cargo metadata` for the host platform only, so nothing else is needed). Being that slow, it runs
//! where the whole suite is required (`CI` or `KEEL_REQUIRE_PEERS` set, as `scripts/test-all.sh` does, or
//! `KEEL_RUNNER_BUILD=1`) and otherwise says on stderr that it did not run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root")
}

/// A crate in a fresh folder under the system's temporary directory: `files` are (path, content).
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(name: &str, files: &[(&str, &str)]) -> Scratch {
        let dir = std::env::temp_dir().join(format!("keel-runner-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (path, content) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        Scratch { dir }
    }

    /// Runs the installed-style `keel` in the crate's folder.
    fn keel(&self, args: &[&str]) -> (i32, String, String) {
        let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("keel-runner");
        // No debug info: the crate is outside this workspace, so its `.cargo/config.toml` does not apply.
        self.keel_with(
            Command::new(env!("CARGO_BIN_EXE_keel"))
                .env("CARGO_TARGET_DIR", target)
                .env("CARGO_PROFILE_DEV_DEBUG", "false")
                .args(args),
        )
    }

    fn keel_with(&self, command: &mut Command) -> (i32, String, String) {
        let Output { status, stdout, stderr } =
            command.current_dir(&self.dir).env_remove("KEEL_RUNNER").output().expect("keel runs");
        (status.code().unwrap_or(-1), String::from_utf8_lossy(&stdout).into(), String::from_utf8_lossy(&stderr).into())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A package named `name` depending on this workspace's keel-tools (the facade, as `cargo add keel-tools` gives),
/// with `lib` as its `src/lib.rs`.
fn package(name: &str, lib: &str) -> Scratch {
    let manifest = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\nkeel-tools = {{ path = {core} }}\n\n[workspace]\n",
        core = serde_json::Value::String(workspace().join("keel-tools").display().to_string()),
    );
    let lock = std::fs::read_to_string(workspace().join("Cargo.lock")).unwrap();
    Scratch::new(name, &[("Cargo.toml", &manifest), ("src/lib.rs", lib), ("Cargo.lock", &lock)])
}

const TOOLS: &str = r#"//! One tool.

/// Adds two numbers.
#[keel_tools::tool(effect = "read", version = "1.0")]
pub fn scratch_add(a: i64, b: i64) -> i64 {
    a + b
}
"#;

/// Whether `name` is set to anything but empty, `0` or `false`.
fn set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

#[test]
fn runs_over_the_tools_of_a_scratch_crate() {
    if !(set("CI") || set("KEEL_REQUIRE_PEERS") || set("KEEL_RUNNER_BUILD")) {
        eprintln!(
            "runner: runs_over_the_tools_of_a_scratch_crate did not run: it builds keel a second time, for a scratch \
             crate (minutes); CI, KEEL_REQUIRE_PEERS=1 (scripts/test-all.sh) or KEEL_RUNNER_BUILD=1 runs it"
        );
        return;
    }
    let scratch = package("scratch-tools", TOOLS);

    let (code, out, err) = scratch.keel(&["--offline", "list"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.lines().any(|l| l.starts_with("scratch_add") && l.contains("Adds two numbers.")), "{out}");
    assert!(out.contains("(1 tools)"), "only the crate's tools: {out}");

    let (code, out, err) = scratch.keel(&["--offline", "call", "scratch_add", "--args", r#"{"a": 2, "b": 3}"#]);
    assert_eq!(code, 0, "{out}{err}");
    let result: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(result["data"], 5, "{out}");
    let shim = Path::new(env!("CARGO_TARGET_TMPDIR")).join("keel-runner/keel/shim-scratch-tools");
    assert!(shim.join("Cargo.lock").is_file(), "the crate's lock is copied next to the shim");

    // A crate that does not compile: cargo's errors, and exit 2. (Its dependencies are the ones built above.)
    let broken = package("scratch-broken", "pub fn broken() -> i64 { \"not a number\" }\n");
    let (code, out, err) = broken.keel(&["--offline", "list"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("mismatched types") && err.contains("building"), "{err}");
    assert_eq!(out, "", "nothing on stdout");
}

#[test]
fn says_why_it_cannot_run() {
    let empty = Scratch::new("empty", &[("README", "no crate here")]);
    let (code, _, err) = empty.keel(&["list"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not in a cargo package"), "{err}");

    let bin_only = Scratch::new(
        "bin-only",
        &[
            ("Cargo.toml", "[package]\nname = \"bin-only\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n"),
            ("src/main.rs", "fn main() {}\n"),
        ],
    );
    let (code, _, err) = bin_only.keel(&["--offline", "list"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bin-only has no library target"), "{err}");

    let no_core = Scratch::new(
        "no-core",
        &[
            ("Cargo.toml", "[package]\nname = \"no-core\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n"),
            ("src/lib.rs", "pub fn f() {}\n"),
        ],
    );
    let (code, _, err) = no_core.keel(&["--offline", "list"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no-core does not depend on keel-tools (or keel-tools-core)"), "{err}");

    let (code, _, err) =
        no_core.keel_with(Command::new(env!("CARGO_BIN_EXE_keel")).env("CARGO", "/nonexistent/cargo").arg("list"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cargo was not found"), "{err}");
}

#[test]
fn help_needs_no_package() {
    let empty = Scratch::new("help", &[]);
    let (code, out, _) = empty.keel(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("serve") && out.contains("--manifest-path"), "{out}");
    let (code, out, _) = empty.keel(&["serve", "--help"]);
    assert_eq!(code, 0);
    assert!(
        out.contains(r#"{"mcpServers": {"my-tools": {"command": "keel", "args": ["serve", "--stdio"]}}}"#),
        "{out}"
    );
    assert!(out.contains("http://127.0.0.1:8080/mcp"), "{out}");
}
