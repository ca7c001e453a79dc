//! Generates the compiled tools of the inventory benchmarks: `GENERATED_TOOLS` `#[tool]` fns, each with its own
//! name and description, all taking the fixture's 5-field `SearchArgs`.

use std::fmt::Write as _;
use std::path::PathBuf;

/// How many compiled tools the bench library declares (besides the fixture tools).
const GENERATED_TOOLS: usize = 200;

fn main() {
    let mut src = String::new();
    let _ = writeln!(src, "/// How many tools this file declares.\npub const COUNT: usize = {GENERATED_TOOLS};");
    for i in 0..GENERATED_TOOLS {
        let _ = writeln!(
            src,
            r#"
/// Generated tool {i:03}: searches the incidents of shard {i} (a benchmark fixture).
#[::keel_tools_core::tool(name = "generated.tool_{i:03}", effect = "read", version = "1.0")]
pub fn generated_tool_{i:03}(args: crate::fixture::SearchArgs) -> crate::fixture::Incident {{
    crate::fixture::search(args)
}}"#
        );
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("generated_tools.rs");
    std::fs::write(&out, src).expect("OUT_DIR is writable");
    println!("cargo::rerun-if-changed=build.rs");
}
