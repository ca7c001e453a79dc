use keel_tools_core::{tool, CallContext};

/// Says what the weather is in a city.
#[tool(effect = "read", version = "1.0", example = r#"{"city": "Paris", "dayz": 3}"#)]
fn weather(city: String, days: Option<u8>, ctx: CallContext) -> String {
    let _ = ctx;
    format!("{city} {days:?}")
}

fn main() {}
