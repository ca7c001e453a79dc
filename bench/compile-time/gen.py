"""Generates the compile-time benchmark crates (used by run.sh; not meant to be run alone).

    python3 gen.py OUT_DIR KEEL_DIR LOCKFILE TOOLS MODULES

writes three library crates, each its own workspace (so the enclosing repository's workspace is not involved):

- `OUT_DIR/plain`: TOOLS tool fns, each with its own 5-field args struct deriving Debug, Clone, Serialize,
  Deserialize and JsonSchema, in MODULES files; no attribute on the fns. Depends on keel-tools-core like `keel`, so the two
  differ only by the `#[tool]` lines.
- `OUT_DIR/hand`: `plain` plus, per tool, the glue `#[tool]` generates written by hand: a thunk
  (`serde_json::from_value` -> fn -> `serde_json::to_value`), input and output schema fns (schemars), and a static
  table of (name, description, schema fns, thunk). The serde/schemars monomorphizations any dispatcher needs are
  here, so `keel` minus `hand` is the macro's own share.
- `OUT_DIR/keel`: `plain` with each fn under `#[tool(effect = "read", version = "1.0")]`.
- `OUT_DIR/rmcp`: the same tools as rmcp `#[tool]` methods, one `#[tool_router]` impl block per file, combined into
  one `ToolRouter` in lib.rs.

KEEL_DIR holds the keel-tools-core (and keel-tools-macros, keel-tools-names, keel-tools-schema) the crates depend on by path.
"""

from __future__ import annotations

import pathlib
import shutil
import sys

ARGS = """\
/// Arguments of `tool_{i:03}`.
#[derive(Debug, Clone, ::serde::Serialize, ::serde::Deserialize, ::schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args{i:03} {{
    /// The affected service, e.g. `auth-api`.
    pub service: String,
    /// The least severity to report.
    pub severity: crate::Severity,
    /// Words to look for in the symptom.
    pub query: String,
    /// How many incidents at most (1 to 50).
    #[schemars(range(min = 1, max = 50))]
    pub limit: u32,
    /// Whether resolved incidents count.
    pub include_resolved: bool,
}}
"""

BODY = """\
        let _edit = 0;
        crate::Incident {{
            incident_id: format!("INC-{i:03}-{{}}", args.limit),
            service: args.service,
            severity: args.severity,
            symptom: args.query,
            evidence: vec![if args.include_resolved {{ "resolved".to_owned() }} else {{ "open".to_owned() }}],
        }}"""

FN = """\
/// Searches the incidents of shard {i} (tool {i:03} of the compile-time benchmark).
{attr}pub fn tool_{i:03}(args: Args{i:03}) -> Result<crate::Incident, ::keel_tools_core::ToolError> {{
    Ok({{
{body}
    }})
}}
"""

RMCP_METHOD = """\
    /// Searches the incidents of shard {i} (tool {i:03} of the compile-time benchmark).
    #[::rmcp::tool]
    fn tool_{i:03}(
        &self,
        ::rmcp::handler::server::wrapper::Parameters(args): ::rmcp::handler::server::wrapper::Parameters<Args{i:03}>,
    ) -> Result<::rmcp::handler::server::wrapper::Json<crate::Incident>, ::rmcp::ErrorData> {{
        Ok(::rmcp::handler::server::wrapper::Json({{
    {body}
        }}))
    }}
"""

HAND = """\
fn call_{i:03}(value: ::serde_json::Value) -> Result<::serde_json::Value, ::keel_tools_core::ToolError> {{
    let args: Args{i:03} = ::serde_json::from_value(value).map_err(::keel_tools_core::ToolError::internal)?;
    ::serde_json::to_value(tool_{i:03}(args)?).map_err(::keel_tools_core::ToolError::internal)
}}
fn input_schema_{i:03}() -> ::serde_json::Value {{
    ::schemars::generate::SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<Args{i:03}>().to_value()
}}
fn output_schema_{i:03}() -> ::serde_json::Value {{
    ::schemars::generate::SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<crate::Incident>().to_value()
}}
/// The hand-written registration of `tool_{i:03}`.
pub const TOOL_{i:03}: crate::HandTool = crate::HandTool {{
    name: "tool_{i:03}",
    description: "Searches the incidents of shard {i} (tool {i:03} of the compile-time benchmark).",
    input_schema: input_schema_{i:03},
    output_schema: output_schema_{i:03},
    call: call_{i:03},
}};
"""

HAND_TABLE_HEAD = """
/// A hand-written tool entry: what `#[tool]` generates, minus inventory and the duplicate-name guard.
pub struct HandTool {
    /// The tool name.
    pub name: &'static str,
    /// What the model reads.
    pub description: &'static str,
    /// The argument schema.
    pub input_schema: fn() -> ::serde_json::Value,
    /// The result schema.
    pub output_schema: fn() -> ::serde_json::Value,
    /// Deserialize, run, serialize.
    pub call: fn(::serde_json::Value) -> Result<::serde_json::Value, ::keel_tools_core::ToolError>,
}

/// Every tool, by hand.
pub static TOOLS: &[HandTool] = &[
"""

COMMON = """\
/// How bad an incident is.
#[derive(Debug, Clone, Copy, ::serde::Serialize, ::serde::Deserialize, ::schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Degraded, not down.
    Low,
    /// Some users are affected.
    Medium,
    /// Most users are affected.
    High,
}

/// One incident (shared by every tool).
#[derive(Debug, Clone, ::serde::Serialize, ::schemars::JsonSchema)]
pub struct Incident {
    /// The incident id.
    pub incident_id: String,
    /// The affected service.
    pub service: String,
    /// How bad it is.
    pub severity: Severity,
    /// What users see.
    pub symptom: String,
    /// What the on-call engineer found.
    pub evidence: Vec<String>,
}
"""


def manifest(name: str, deps: str) -> str:
    return f"""\
[package]
name = "{name}"
version = "0.0.0"
edition = "2024"
publish = false

[workspace]

[lib]
path = "src/lib.rs"

[dependencies]
serde = {{ version = "1", features = ["derive"] }}
serde_json = "1"
schemars = "1.2"
{deps}
"""


def write_crate(root: pathlib.Path, name: str, deps: str, lib: str, modules: dict[str, str], lock: pathlib.Path):
    if root.exists():
        shutil.rmtree(root)
    (root / "src").mkdir(parents=True)
    (root / "Cargo.toml").write_text(manifest(name, deps))
    shutil.copy(lock, root / "Cargo.lock")
    (root / "src" / "lib.rs").write_text(lib)
    for mod, text in modules.items():
        (root / "src" / f"{mod}.rs").write_text(text)


def main() -> None:
    out, keel_dir, lock = (pathlib.Path(a).resolve() for a in sys.argv[1:4])
    tools, modules = int(sys.argv[4]), int(sys.argv[5])
    per_module = -(-tools // modules)
    groups = [list(range(m * per_module, min(tools, (m + 1) * per_module))) for m in range(modules)]
    groups = [g for g in groups if g]
    mods = [f"m{m:02}" for m in range(len(groups))]
    body = lambda i: BODY.format(i=i)  # noqa: E731
    keel_tools_core = f'keel-tools-core = {{ path = "{keel_dir / "tool-core"}" }}'

    for variant, attr in [("plain", ""), ("hand", ""), ("keel", '#[::keel_tools_core::tool(effect = "read", version = "1.0")]\n')]:
        glue = HAND if variant == "hand" else ""
        files = {
            mod: "".join(
                ARGS.format(i=i) + "\n" + FN.format(i=i, attr=attr, body=body(i)) + "\n" + glue.format(i=i)
                for i in group
            )
            for mod, group in zip(mods, groups)
        }
        lib = f"//! {tools} tools ({variant}).\n\n" + COMMON + "".join(f"\npub mod {m};" for m in mods) + "\n"
        if variant == "hand":
            lib += HAND_TABLE_HEAD + "".join(
                f"    {m}::TOOL_{i:03},\n" for m, group in zip(mods, groups) for i in group
            ) + "];\n"
        write_crate(out / variant, f"ct_{variant}", keel_tools_core, lib, files, lock)

    files = {}
    for mod, group in zip(mods, groups):
        methods = "\n".join(RMCP_METHOD.format(i=i, body=body(i).replace("\n", "\n    ")) for i in group)
        files[mod] = (
            "".join(ARGS.format(i=i) + "\n" for i in group)
            + f'#[::rmcp::tool_router(router = router_{mod}, vis = "pub")]\nimpl crate::Server {{\n{methods}}}\n'
        )
    lib = (
        f"//! {tools} tools (rmcp).\n\n"
        + COMMON
        + "\n/// The server the tools are methods of.\n#[derive(Debug, Clone, Default)]\npub struct Server;\n\n"
        + "impl ::rmcp::ServerHandler for Server {}\n"
        + "".join(f"\npub mod {m};" for m in mods)
        + "\n\n/// Every tool in one router.\npub fn router() -> ::rmcp::handler::server::router::tool::ToolRouter<Server> {\n    "
        + " + ".join(f"Server::router_{m}()" for m in mods)
        + "\n}\n"
    )
    rmcp = 'rmcp = { version = "3.11", default-features = false, features = ["server", "macros"] }'
    write_crate(out / "rmcp", "ct_rmcp", rmcp, lib, files, lock)


if __name__ == "__main__":
    main()
