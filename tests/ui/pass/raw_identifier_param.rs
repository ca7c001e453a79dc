use keel_tools_core::{Registry, tool};

/// Counts incidents of one type.
#[tool(effect = "read", version = "1.0")]
fn count_by_type(r#type: String, r#async: Option<bool>) -> usize {
    let _ = r#async;
    r#type.len()
}

/// Tells whether an incident title matches a pattern.
#[tool(effect = "read", version = "1.0")]
fn r#match(pattern: String, title: String) -> bool {
    title.contains(&pattern)
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let tool = registry.get("count_by_type").expect("count_by_type is registered");
    let schema = tool.input_schema();
    let properties = schema["properties"].as_object().expect("properties");
    assert!(properties.contains_key("type"), "the argument is named without `r#`: {schema}");
    assert!(properties.contains_key("async"), "the argument is named without `r#`: {schema}");
    assert!(registry.get("match").is_some(), "the tool is named without `r#`");
}
