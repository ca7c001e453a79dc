use keel_tools_core::tool;

/// Closes a ticket.
#[tool(effect = "write", version = "1.0", scopes = ["tickets.read", "tickets write"])]
fn close_ticket(id: String) -> String {
    id
}

fn main() {}
