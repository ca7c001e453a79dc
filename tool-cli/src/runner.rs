//! The installed `keel`: the command over the tools of the cargo package it is run in.
//!
//! `#[tool]` registers through `inventory`, so a binary sees exactly the tools of the crates it links; an installed
//! binary links none of yours. So `keel`, installed with `cargo install`, builds one that does and runs it, the way
//! `cargo fuzz` and `cargo expand` work inside your crate:
//!
//! 1. `cargo metadata` finds the package (the one of the current directory, `--manifest-path`, or `--package` in
//!    a workspace), its library, the workspace's target directory and the `keel-tools-core` the package resolves to.
//! 2. When the package has a bin target named `keel` (your own two-line `main`, say one that gives
//!    [`Cli::executor`](crate::Cli::executor) the state your tools read), or names one in its manifest
//!    (`[package.metadata.keel]` `bin = "my-keel"`), that binary is built and run.
//! 3. Otherwise a shim crate is written under `<target dir>/keel/shim-<package>/`: it depends on your package by
//!    path and on `keel-tools-cli` from where your `keel-tools-core` comes from (the `keel-tools-cli` next to a path `keel-tools-core`,
//!    the same git revision, or the registry version `=<keel-tools-core's>`), with your `Cargo.lock` copied next to it
//!    so that both resolve to one `keel-tools-core` (a second copy would see none of your tools), and its `main` is
//!    `use your_crate as _; fn main() -> std::process::ExitCode { keel_tools_cli::main() }`. It is built with
//!    `cargo build --target-dir <target dir>/keel` (cargo rebuilds only what changed) and run.
//!
//! The binary runs with the remaining arguments, the same stdin, stdout and stderr, and its exit code is `keel`'s
//! (on Unix it replaces this process). Nothing is written to stdout before it runs, so `keel serve --stdio` works
//! through the runner. `--help` and `--version` are answered without building.
//!
//! The runner's own options come before the command: `keel [--manifest-path PATH] [-p NAME] [--offline]
//! [--release] COMMAND ...`. It exits 2, saying why, when there is no cargo package here, the package has no
//! library, it does not depend on `keel-tools-core`, cargo cannot be run, or the build fails (cargo's errors are shown).

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use serde_json::Value;

use crate::failure::{Failure, fail};

/// Set in the environment of the binary the runner runs: a runner started under it (a package whose `keel` bin
/// is this runner, such as `keel-tools-cli` itself) stops instead of running itself again.
const NESTED: &str = "KEEL_RUNNER";

const OPTIONS_HELP: &str = "\
Installed keel (cargo install keel-tools-cli): run in your crate, it builds and runs keel over that crate's tools.
Its options come before the command:
      --manifest-path PATH  The package's Cargo.toml (default: the one cargo finds from the current directory)
  -p, --package NAME        The workspace member whose tools to serve (needed at a virtual workspace's root)
      --offline             Build without the network (cargo's --offline; CARGO_NET_OFFLINE=true does the same)
      --release             Build the tools with the release profile
The package needs a library target that depends on keel-tools-core. If it has a bin named `keel` (your own
`fn main() -> std::process::ExitCode { keel_tools_cli::main() }`, e.g. to give the tools their state), or names one
with `[package.metadata.keel] bin = \"NAME\"`, that bin runs; otherwise keel builds one under
<target dir>/keel/shim-<package>/. The first build compiles keel and its dependencies (cargo shows its progress);
later runs rebuild only what changed.
Examples:
  keel list
  keel -p my-tools serve --stdio
  keel --manifest-path ../tools/Cargo.toml --release chat --url http://127.0.0.1:8080/v1 --model m 'Hello'";

/// The installed `keel`: runs the `keel` of the package it is run in, with the process's arguments; see
/// [the module](self).
pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match run(args) {
        Ok(code) => code,
        Err(f) => {
            eprintln!("keel: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// What the runner was asked: its own options, then the command it passes on. Parsed by clap; `--help` and
/// `--version` are not the runner's (they are answered with the command's help, see [`help`]), so they are left in
/// `rest` like any other argument of the command.
#[derive(clap::Parser, Debug, Default)]
#[command(name = "keel", disable_help_flag = true, disable_version_flag = true, no_binary_name = true)]
struct Options {
    /// The package's Cargo.toml.
    #[arg(long, value_name = "PATH")]
    manifest_path: Option<PathBuf>,
    /// The workspace member whose tools to serve.
    #[arg(short = 'p', long, value_name = "NAME")]
    package: Option<String>,
    /// Build without the network.
    #[arg(long)]
    offline: bool,
    /// Build with the release profile.
    #[arg(long)]
    release: bool,
    /// The command and its arguments, passed on as they are.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0.., value_parser = clap::value_parser!(OsString))]
    rest: Vec<OsString>,
}

fn parse(args: Vec<OsString>) -> Result<Options, Failure> {
    use clap::Parser;
    Options::try_parse_from(args).map_err(|e| {
        // clap's own rendering, less its usage block, which names the runner's options only.
        let text = e.render().to_string();
        let first = text.lines().next().unwrap_or("").trim_start_matches("error: ").to_owned();
        fail(2, format!("{first}; see `keel --help`"))
    })
}

fn run(args: Vec<OsString>) -> Result<ExitCode, Failure> {
    let options = parse(args)?;
    if let Some(code) = help(&options.rest) {
        return Ok(code);
    }
    if std::env::var_os(NESTED).is_some() {
        return Err(fail(
            2,
            "the package's `keel` bin is this runner itself (is this keel-tools-cli's own package?); run keel in a package \
             whose tools it should serve",
        ));
    }
    let cargo = Cargo::new(&options);
    let metadata = cargo.metadata()?;
    let package = Package::select(&metadata, options.package.as_deref())?;
    if package.name == "keel-tools-cli" {
        return Err(fail(
            2,
            "keel-tools-cli has no tools of its own: run keel in a package whose tools it should serve",
        ));
    }
    let exe = if let Some(bin) = package.own_bin()? {
        cargo.build(&package.manifest_path, &["--bin", &bin], None, &bin, false)?
    } else {
        let shim = Shim::new(&metadata, &package)?;
        let target_dir = metadata.target_dir.join("keel");
        // The first build compiles keel and its dependencies: minutes, so cargo shows its progress. Later builds
        // recompile what changed, quietly, so that the command's own output comes alone.
        let first = !target_dir.join(if options.release { "release" } else { "debug" }).exists();
        if first {
            eprintln!(
                "keel: building keel over the tools of {} into {} (the first build takes a few minutes)",
                package.name,
                target_dir.display()
            );
        }
        shim.write()?;
        cargo.build(&shim.dir.join("Cargo.toml"), &[], Some(&target_dir), &shim.bin, first)?
    };
    Ok(exec(&exe, &options.rest))
}

/// `keel`, `keel --help`, `keel help`, `keel --version` and any `--help` of a command: answered here, since the help
/// is the same over any tools. The first three show the runner's options too.
fn help(rest: &[OsString]) -> Option<ExitCode> {
    let first = rest.first().and_then(|a| a.to_str());
    let top = matches!(first, None | Some("-h" | "--help")) || (first == Some("help") && rest.len() == 1);
    let asks =
        top || matches!(first, Some("help" | "-V" | "--version")) || rest.iter().any(|a| a == "-h" || a == "--help");
    if !asks {
        return None;
    }
    let argv =
        std::iter::once(OsString::from("keel")).chain(if top { vec![OsString::from("--help")] } else { rest.to_vec() });
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = crate::Cli::new().run(argv, &mut out, &mut err);
    if top {
        out.extend_from_slice(format!("\n{OPTIONS_HELP}\n").as_bytes());
    }
    let _ = std::io::stdout().write_all(&out);
    let _ = std::io::stderr().write_all(&err);
    Some(ExitCode::from(code))
}

/// Runs `exe` with `args` in place of this process (Unix), or as a child whose exit code is returned.
fn exec(exe: &Path, args: &[OsString]) -> ExitCode {
    let mut command = Command::new(exe);
    command.args(args).env(NESTED, "1");
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let e = command.arg0("keel").exec();
        eprintln!("keel: cannot run {}: {e}", exe.display());
        ExitCode::from(2)
    }
    #[cfg(not(unix))]
    match command.status() {
        Ok(status) => ExitCode::from(status.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(1)),
        Err(e) => {
            eprintln!("keel: cannot run {}: {e}", exe.display());
            ExitCode::from(2)
        }
    }
}

/// How cargo is run: `$CARGO` or `cargo` on the PATH, with the runner's `--offline` and `--release`.
struct Cargo {
    program: OsString,
    manifest_path: Option<PathBuf>,
    offline: bool,
    release: bool,
}

impl Cargo {
    fn new(options: &Options) -> Cargo {
        Cargo {
            program: std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
            manifest_path: options.manifest_path.clone(),
            offline: options.offline,
            release: options.release,
        }
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        // Cargo never reads the stdin that the tools' command (`keel serve --stdio`) is given.
        command.stdin(Stdio::null());
        command
    }

    fn not_found(&self, e: &std::io::Error) -> Failure {
        if e.kind() == std::io::ErrorKind::NotFound {
            fail(
                2,
                format!(
                    "cargo was not found ({}): keel builds your tools with it; install Rust (rustup.rs) or set CARGO",
                    self.program.to_string_lossy()
                ),
            )
        } else {
            fail(2, format!("cannot run {}: {e}", self.program.to_string_lossy()))
        }
    }

    /// The platform cargo builds for when given no `--target`, from `cargo -vV`'s `host:` line.
    fn host(&self) -> Result<String, Failure> {
        let output = self.command().arg("-vV").output().map_err(|e| self.not_found(&e))?;
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .find_map(|line| line.strip_prefix("host: "))
            .map(|host| host.trim().to_owned())
            .ok_or_else(|| fail(2, format!("`{} -vV` named no host platform", self.program.to_string_lossy())))
    }

    fn metadata(&self) -> Result<Metadata, Failure> {
        let mut command = self.command();
        // The host's packages only: the build is for the host, and without the filter cargo wants every package of
        // the lock, for every platform, downloaded (so `--offline` fails where only a host build has fetched).
        command.args(["metadata", "--format-version", "1", "--filter-platform"]).arg(self.host()?);
        if let Some(path) = &self.manifest_path {
            command.arg("--manifest-path").arg(path);
        }
        if self.offline {
            command.arg("--offline");
        }
        let output = command.output().map_err(|e| self.not_found(&e))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            if stderr.contains("could not find `Cargo.toml`") {
                let here = match &self.manifest_path {
                    Some(path) => path.display().to_string(),
                    None => std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default(),
                };
                return Err(fail(
                    2,
                    format!(
                        "not in a cargo package ({here} has no Cargo.toml, nor has any folder above it): run keel in \
                         your crate's directory, or pass --manifest-path PATH/Cargo.toml"
                    ),
                ));
            }
            return Err(fail(2, format!("`cargo metadata` failed:\n{}", stderr.trim_end())));
        }
        let value: Value = serde_json::from_slice(&output.stdout)
            .map_err(|e| fail(2, format!("`cargo metadata` printed something that is not its JSON: {e}")))?;
        Metadata::read(value)
    }

    /// Builds `manifest`'s bin `bin` and returns its path; cargo's errors go to stderr as they come, and with
    /// `progress` its progress too (its `Compiling` lines, and its bar on a terminal).
    fn build(
        &self,
        manifest: &Path,
        args: &[&str],
        target_dir: Option<&Path>,
        bin: &str,
        progress: bool,
    ) -> Result<PathBuf, Failure> {
        let mut command = self.command();
        command.arg("build");
        if !progress {
            command.arg("--quiet");
        }
        command.args(["--message-format=json-render-diagnostics", "--manifest-path"]).arg(manifest).args(args);
        if let Some(dir) = target_dir {
            command.arg("--target-dir").arg(dir);
        }
        if self.offline {
            command.arg("--offline");
        }
        if self.release {
            command.arg("--release");
        }
        let output = command.stderr(Stdio::inherit()).output().map_err(|e| self.not_found(&e))?;
        if !output.status.success() {
            return Err(fail(2, format!("building `{bin}` ({}) failed; cargo's errors are above", manifest.display())));
        }
        // The artifact messages name the executable, wherever the target directory is.
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .rev()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == bin)
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .ok_or_else(|| fail(2, format!("cargo built {} but named no executable `{bin}`", manifest.display())))
    }
}

/// What keel reads of `cargo metadata`.
struct Metadata {
    packages: Vec<Value>,
    members: Vec<String>,
    root: Option<String>,
    nodes: Vec<Value>,
    target_dir: PathBuf,
    workspace_root: PathBuf,
}

impl Metadata {
    fn read(mut value: Value) -> Result<Metadata, Failure> {
        let strings = |v: &Value| -> Vec<String> {
            v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_owned)).collect()
        };
        let path = |v: &Value, what: &str| {
            v.as_str().map(PathBuf::from).ok_or_else(|| fail(2, format!("`cargo metadata` gave no {what}")))
        };
        Ok(Metadata {
            members: strings(&value["workspace_members"]),
            root: value["resolve"]["root"].as_str().map(str::to_owned),
            nodes: value["resolve"]["nodes"].as_array().cloned().unwrap_or_default(),
            target_dir: path(&value["target_directory"], "target directory")?,
            workspace_root: path(&value["workspace_root"], "workspace root")?,
            packages: match value["packages"].take() {
                Value::Array(packages) => packages,
                _ => return Err(fail(2, "`cargo metadata` gave no packages")),
            },
        })
    }

    fn package(&self, id: &str) -> Option<&Value> {
        self.packages.iter().find(|p| p["id"] == id)
    }

    fn deps(&self, id: &str) -> Vec<String> {
        let node = self.nodes.iter().find(|n| n["id"] == id);
        node.and_then(|n| n["deps"].as_array())
            .into_iter()
            .flatten()
            .filter(|d| {
                // Normal dependencies only (`kind: null`): dev and build dependencies are not linked into the lib.
                d["dep_kinds"].as_array().is_none_or(|kinds| kinds.iter().any(|k| k["kind"].is_null()))
            })
            .filter_map(|d| d["pkg"].as_str().map(str::to_owned))
            .collect()
    }

    /// The `keel-tools-core` package `id` links: its own dependency, else the one it reaches through its dependencies.
    fn tool_core(&self, id: &str) -> Option<&Value> {
        let is_core = |p: &&Value| p["name"] == "keel-tools-core";
        let direct = self.deps(id);
        if let Some(core) = direct.iter().filter_map(|d| self.package(d)).find(is_core) {
            return Some(core);
        }
        let mut seen: Vec<String> = vec![id.to_owned()];
        let mut queue = direct;
        while let Some(next) = queue.pop() {
            if seen.contains(&next) {
                continue;
            }
            if let Some(core) = self.package(&next).filter(is_core) {
                return Some(core);
            }
            queue.extend(self.deps(&next));
            seen.push(next);
        }
        None
    }
}

/// The package keel runs over.
struct Package {
    id: String,
    name: String,
    manifest_path: PathBuf,
    targets: Vec<Value>,
    /// `[package.metadata]`.
    metadata: Value,
}

impl Package {
    fn select(metadata: &Metadata, wanted: Option<&str>) -> Result<Package, Failure> {
        let members: Vec<&Value> = metadata.members.iter().filter_map(|id| metadata.package(id)).collect();
        let chosen = match (wanted, &metadata.root) {
            (Some(name), _) => members.iter().find(|p| p["name"] == name).copied().ok_or_else(|| {
                fail(2, format!("the workspace has no package {name:?}; its members: {}", names(&members)))
            })?,
            (None, Some(root)) => metadata.package(root).ok_or_else(|| fail(2, "`cargo metadata` lost its root"))?,
            (None, None) => {
                let with_tools: Vec<&Value> = members
                    .iter()
                    .copied()
                    .filter(|p| p["id"].as_str().is_some_and(|id| metadata.tool_core(id).is_some()))
                    .collect();
                return Err(fail(
                    2,
                    format!(
                        "{} is a virtual workspace: pass --package NAME (the members that depend on keel-tools-core: {})",
                        metadata.workspace_root.display(),
                        names(&with_tools)
                    ),
                ));
            }
        };
        let text = |key: &str| chosen[key].as_str().unwrap_or_default().to_owned();
        Ok(Package {
            id: text("id"),
            name: text("name"),
            manifest_path: PathBuf::from(text("manifest_path")),
            targets: chosen["targets"].as_array().cloned().unwrap_or_default(),
            metadata: chosen["metadata"].clone(),
        })
    }

    /// The package's own `keel`: the bin its `[package.metadata.keel] bin` names, else its bin named `keel`.
    fn own_bin(&self) -> Result<Option<String>, Failure> {
        let is_bin = |name: &str| self.targets.iter().any(|t| t["name"] == name && kinds(t).any(|k| k == "bin"));
        match self.metadata["keel"]["bin"].as_str() {
            Some(name) if is_bin(name) => Ok(Some(name.to_owned())),
            Some(name) => Err(fail(
                2,
                format!("{}'s [package.metadata.keel] names the bin {name:?}, which it does not have", self.name),
            )),
            None => Ok(is_bin("keel").then(|| "keel".to_owned())),
        }
    }

    /// The name other crates `use` the library by.
    fn lib_crate(&self) -> Option<String> {
        self.targets
            .iter()
            .find(|t| kinds(t).any(|k| matches!(k, "lib" | "rlib" | "dylib")))
            .and_then(|t| t["name"].as_str())
            .map(|name| name.replace('-', "_"))
    }

    fn dir(&self) -> &Path {
        self.manifest_path.parent().unwrap_or(Path::new("."))
    }
}

fn kinds(target: &Value) -> impl Iterator<Item = &str> {
    target["kind"].as_array().into_iter().flatten().filter_map(Value::as_str)
}

fn names(packages: &[&Value]) -> String {
    let names: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
}

/// The generated crate: `keel` over the package's tools.
struct Shim {
    dir: PathBuf,
    bin: String,
    manifest: String,
    main: String,
    lock: Option<PathBuf>,
}

impl Shim {
    fn new(metadata: &Metadata, package: &Package) -> Result<Shim, Failure> {
        let lib = package.lib_crate().ok_or_else(|| {
            fail(
                2,
                format!(
                    "{} has no library target: keel links the tools of a library, so move the #[tool] functions into \
                     src/lib.rs, or give the package a bin named `keel` (src/bin/keel.rs: \
                     `fn main() -> std::process::ExitCode {{ keel_tools_cli::main() }}`)",
                    package.name
                ),
            )
        })?;
        let core = metadata.tool_core(&package.id).ok_or_else(|| {
            fail(
                2,
                format!(
                    "{} does not depend on keel-tools (or keel-tools-core), so it has no #[tool] for keel to serve; add \
                     keel-tools to its [dependencies]",
                    package.name
                ),
            )
        })?;
        let cli = tool_cli_dependency(core)?;
        let bin = format!("keel-shim-{}", package.name);
        let manifest = format!(
            "# Written by keel: the `keel` command over the tools of {name}. Rewritten when it changes.\n\
             [package]\nname = {bin_q}\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
             [dependencies]\n{name_key} = {{ path = {dir} }}\nkeel-tools-cli = {cli}\n\n\
             # A workspace of its own: it is no member of the package's workspace.\n[workspace]\n",
            name = package.name,
            bin_q = quote(&bin),
            name_key = quote(&package.name),
            dir = quote(&package.dir().to_string_lossy()),
        );
        let main = format!(
            "// Written by keel: links {name}'s tools and runs the `keel` command over them.\n\
             use {lib} as _;\n\nfn main() -> std::process::ExitCode {{\n    keel_tools_cli::main()\n}}\n",
            name = package.name
        );
        let lock = Some(metadata.workspace_root.join("Cargo.lock")).filter(|p| p.is_file());
        let dir = metadata.target_dir.join("keel").join(format!("shim-{}", package.name));
        Ok(Shim { dir, bin, manifest, main, lock })
    }

    /// Writes the crate; a file whose content is already right is left alone, so cargo sees nothing new.
    fn write(&self) -> Result<(), Failure> {
        let src = self.dir.join("src");
        std::fs::create_dir_all(&src).map_err(|e| fail(2, format!("cannot create {}: {e}", src.display())))?;
        write_if_changed(&self.dir.join("Cargo.toml"), self.manifest.as_bytes())?;
        write_if_changed(&src.join("main.rs"), self.main.as_bytes())?;
        if let Some(lock) = &self.lock {
            // The package's lock, copied when it changed (the copy kept beside it says which it was): between
            // changes, the shim's own lock keeps what cargo added for keel-tools-cli, so nothing is resolved again.
            let theirs = std::fs::read(lock).map_err(|e| fail(2, format!("cannot read {}: {e}", lock.display())))?;
            let seen = self.dir.join("Cargo.lock.package");
            if std::fs::read(&seen).ok().as_deref() != Some(theirs.as_slice()) {
                write_if_changed(&self.dir.join("Cargo.lock"), &theirs)?;
                write_if_changed(&seen, &theirs)?;
            }
        }
        Ok(())
    }
}

fn write_if_changed(path: &Path, content: &[u8]) -> Result<(), Failure> {
    if std::fs::read(path).ok().as_deref() == Some(content) {
        return Ok(());
    }
    std::fs::write(path, content).map_err(|e| fail(2, format!("cannot write {}: {e}", path.display())))
}

/// A TOML basic string (JSON's string syntax is a subset of it).
fn quote(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// Where keel-tools-cli comes from, as a dependency table: the same source as the package's `keel-tools-core`.
fn tool_cli_dependency(core: &Value) -> Result<String, Failure> {
    let version = core["version"].as_str().unwrap_or_default();
    let manifest = PathBuf::from(core["manifest_path"].as_str().unwrap_or_default());
    match core["source"].as_str() {
        None => {
            let dir = manifest.parent().and_then(Path::parent).map(|d| d.join("tool-cli")).unwrap_or_default();
            if !dir.join("Cargo.toml").is_file() {
                return Err(fail(
                    2,
                    format!(
                        "keel-tools-core is a path dependency ({}) with no keel-tools-cli next to it ({}); give the package a \
                         bin named `keel` that depends on keel-tools-cli",
                        manifest.display(),
                        dir.display()
                    ),
                ));
            }
            Ok(format!("{{ path = {} }}", quote(&dir.to_string_lossy())))
        }
        Some(source) if is_crates_io(source) => Ok(format!("{{ version = {} }}", quote(&format!("={version}")))),
        Some(source) if source.starts_with("git+") => {
            // `git+URL?branch=b#commit`: the same commit.
            let rest = &source["git+".len()..];
            let (url, commit) = rest.rsplit_once('#').unwrap_or((rest, ""));
            let url = url.split('?').next().unwrap_or(url);
            Ok(format!("{{ git = {}, rev = {} }}", quote(url), quote(commit)))
        }
        Some(source) => Err(fail(
            2,
            format!(
                "keel-tools-core comes from {source}, a source keel cannot build keel-tools-cli from; give the package a bin \
                 named `keel` that depends on keel-tools-cli"
            ),
        )),
    }
}

fn is_crates_io(source: &str) -> bool {
    source == "registry+https://github.com/rust-lang/crates.io-index" || source == "sparse+https://index.crates.io/"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn options_come_before_the_command() {
        let o = parse(os(&["--manifest-path", "x/Cargo.toml", "-p", "tools", "--offline", "list", "--offline"]))
            .ok()
            .unwrap();
        assert_eq!(o.manifest_path, Some(PathBuf::from("x/Cargo.toml")));
        assert_eq!(o.package.as_deref(), Some("tools"));
        assert!(o.offline && !o.release);
        assert_eq!(o.rest, os(&["list", "--offline"]));
        let o = parse(os(&["--package=a", "--manifest-path=b", "--release", "serve", "--stdio"])).ok().unwrap();
        assert_eq!((o.package.as_deref(), o.manifest_path), (Some("a"), Some(PathBuf::from("b"))));
        assert!(o.release);
        assert_eq!(o.rest, os(&["serve", "--stdio"]));
        let missing = parse(os(&["-p"])).err().unwrap();
        assert_eq!(missing.code, 2);
        assert!(missing.message.contains("--package") && missing.message.ends_with("see `keel --help`"), "{missing:?}");
        // Help and version belong to the command: left for it, wherever they stand.
        for args in [&["--help"][..], &["-h"], &["-V"], &["list", "--help"], &["help", "serve"]] {
            assert_eq!(parse(os(args)).ok().unwrap().rest, os(args), "{args:?}");
        }
        let o = parse(os(&["-p", "t", "--help"])).ok().unwrap();
        assert_eq!((o.package.as_deref(), o.rest), (Some("t"), os(&["--help"])));
        assert!(parse(os(&[])).ok().unwrap().rest.is_empty());
    }

    #[test]
    fn tool_cli_comes_from_where_tool_core_does() {
        let registry = serde_json::json!({"version": "0.3.1", "manifest_path": "/r/tool-core-0.3.1/Cargo.toml",
            "source": "registry+https://github.com/rust-lang/crates.io-index"});
        assert_eq!(tool_cli_dependency(&registry).ok().unwrap(), r#"{ version = "=0.3.1" }"#);
        let git = serde_json::json!({"version": "0.3.1", "manifest_path": "/g/tool-core/Cargo.toml",
            "source": "git+https://example.com/keel?branch=main#0123abc"});
        assert_eq!(tool_cli_dependency(&git).ok().unwrap(), r#"{ git = "https://example.com/keel", rev = "0123abc" }"#);
        let other = serde_json::json!({"version": "1.0.0", "manifest_path": "/o/Cargo.toml",
            "source": "registry+https://my.registry/index"});
        assert_eq!(tool_cli_dependency(&other).err().map(|f| f.code), Some(2));
        let path = serde_json::json!({"version": "0.2.0", "manifest_path": "/nowhere/keel/tool-core/Cargo.toml",
            "source": null});
        assert!(tool_cli_dependency(&path).err().unwrap().message.contains("no keel-tools-cli next to it"));
    }

    #[test]
    fn quoting_is_toml() {
        assert_eq!(quote(r#"C:\a "b""#), r#""C:\\a \"b\"""#);
    }
}
