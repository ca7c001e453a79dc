use keel_tools_core::tool;

/// Says what the weather is in a city.
#[tool(effect = "read", version = "1.0", example = r#""Paris""#)]
fn weather(city: String) -> String {
    city
}

fn main() {}
