use keel_tools_core::tool;

/// Books a table.
#[tool(
    effect = "write",
    version = "1.0",
    example = r#"{"restaurant": "Chez Nous", "guests": 4, "time": "19:30"}"#,
    example = r#"{"note": "by the window"}"#
)]
fn book_table(restaurant: String, guests: u8, time: String, note: Option<String>) -> String {
    format!("{restaurant} {guests} {time} {note:?}")
}

fn main() {}
