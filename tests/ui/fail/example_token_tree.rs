use keel_tools_core::tool;

/// Says what the weather is in a city.
#[tool(effect = "read", version = "1.0", example = {"city": "Paris", "days": 3})]
fn weather(city: String, days: Option<u8>) -> String {
    format!("{city} {days:?}")
}

fn main() {}
