use keel_tools_core::{Registry, tool};

/// Searches incidents.
#[tool(effect = "read", version = "1.2.3")]
fn search_incidents(
    #[arg(description = "Words to look for")] query: String,
    #[arg(description = "At most this many results")] limit: Option<u32>,
    open_only: bool,
) -> Vec<String> {
    let _ = (limit, open_only);
    vec![query]
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let tool = registry.get("search_incidents").expect("search_incidents is registered");
    assert_eq!(tool.version(), "1.2.3");
    let schema = tool.input_schema();
    let properties = schema["properties"].as_object().expect("properties");
    let mut names: Vec<&str> = properties.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["limit", "open_only", "query"], "{schema}");
    assert_eq!(properties["query"]["description"], "Words to look for", "{schema}");
    assert_eq!(properties["limit"]["description"], "At most this many results", "{schema}");
    let required: Vec<&str> =
        schema["required"].as_array().expect("required").iter().map(|v| v.as_str().unwrap()).collect();
    assert!(required.contains(&"query") && required.contains(&"open_only"), "{schema}");
    assert!(!required.contains(&"limit"), "an Option argument is optional: {schema}");
}
