//! No false alarms: the description checks (tool poisoning) find nothing in keel's own tools: those of this test
//! binary's inventory (the examples' in `demo`, the test files' in `integration`) and those of the golden tool lists
//! of `tests/golden/`, as each provider is sent them.

use std::path::PathBuf;

use keel_tools_contract::lint::description::{NamedTool, check_description, check_shadowing};
use keel_tools_core::Registry;
use serde_json::Value;

#[test]
fn the_tools_of_this_binary_raise_no_description_finding() {
    let registry = Registry::from_inventory().unwrap();
    assert!(registry.len() >= 8, "{} tools", registry.len());
    let mut found = Vec::new();
    for def in registry.iter() {
        for f in check_description(def.name(), def.description(), def.input_schema()) {
            found.push(format!("{}: {f}", def.name()));
        }
    }
    let names: Vec<NamedTool<'_>> = registry.iter().map(|d| NamedTool::local(d.name())).collect();
    found.extend(check_shadowing(&names).into_iter().map(|(tool, f)| format!("{tool}: {f}")));
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_golden_tool_lists_raise_no_description_finding() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 7, "{files:?}");
    let mut found = Vec::new();
    for file in files {
        let value: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let mut tools = 0;
        each_tool(&value, &mut |name, description, schema| {
            tools += 1;
            for f in check_description(name, description, schema) {
                found.push(format!("{}: {name}: {f}", file.display()));
            }
        });
        assert!(tools >= 8, "{}: {tools} tools", file.display());
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// Calls `f(name, description, argument schema)` for every object of `value` with a string `name` and `description`:
/// a tool in any provider's list. The schema is the object's `inputSchema`, `input_schema`, `parameters` or
/// `parametersJsonSchema`, or `null`.
fn each_tool(value: &Value, f: &mut dyn FnMut(&str, &str, &Value)) {
    match value {
        Value::Object(map) => {
            if let (Some(Value::String(name)), Some(Value::String(description))) =
                (map.get("name"), map.get("description"))
            {
                let schema = ["inputSchema", "input_schema", "parameters", "parametersJsonSchema"]
                    .iter()
                    .find_map(|k| map.get(*k))
                    .unwrap_or(&Value::Null);
                f(name, description, schema);
            }
            map.values().for_each(|v| each_tool(v, f));
        }
        Value::Array(items) => items.iter().for_each(|v| each_tool(v, f)),
        _ => {}
    }
}
