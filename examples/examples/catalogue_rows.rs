//! Tools from database rows: a SQLite table whose rows say which compiled tools each tenant's model is shown, under
//! which names and descriptions, with which narrower schemas. A row holds a recipe, never code.
//!
//! ```text
//! cargo run -p examples --example catalogue_rows
//! ```
//!
//! 1. Two rows point at one compiled tool: a shared one, and one for the tenant `acme` that narrows its schema.
//! 2. Each tenant's view is read from the table afresh, and called through its executor.
//! 3. A row that points at a tool not compiled in is refused with its code (`target_missing`); a row disabled in
//!    the table leaves the next view.

use std::error::Error;
use std::path::Path;

use keel_tools::catalog::{Catalog, ToolRow};
use keel_tools::{Registry, ToolCall, tool};
use serde_json::json;

/// Quotes the shipping cost of a parcel, in cents.
#[tool(effect = "read", version = "1.0")]
pub fn quote_shipping(weight_grams: u32) -> u32 {
    500 + weight_grams / 10
}

/// What each step showed: the tools of each view and the answers of each call, in order.
pub async fn demo(db: &Path) -> Result<Vec<String>, Box<dyn Error>> {
    let mut seen = Vec::new();
    let registry = Registry::from_inventory()?;
    // Local rows may point only at tools of allowlisted modules: here, this file's.
    let catalog = Catalog::builder(&registry).allow_module(module_path!()).open(db)?;

    // 1. Rows: the compiled tool for everyone; for acme, under another name, parcels of at most 2 kg.
    let weight = |max: u32| {
        json!({
            "type": "object",
            "properties": {"weight_grams": {"type": "integer", "minimum": 0, "maximum": max}},
            "required": ["weight_grams"],
            "additionalProperties": false
        })
    };
    let shared = ToolRow::local("quote_shipping", "Quotes shipping, in cents.", weight(u32::MAX), "quote_shipping");
    catalog.put_async(&shared).await?;
    let small =
        ToolRow::local("quote_small_parcel", "Quotes a small parcel, in cents.", weight(2000), "quote_shipping");
    catalog.put_async(&small.tenant("acme")).await?;
    // A row that names a tool this binary lacks is refused when written, with its code; nothing is stored.
    let freight = ToolRow::local("quote_freight", "Quotes freight.", weight(u32::MAX), "quote_freight");
    if let Err(refused) = catalog.put_async(&freight).await {
        seen.push(format!("row quote_freight refused: {}", refused.code()));
    }

    // 2. Each tenant's view, and a call through it.
    for tenant in ["globex", "acme"] {
        let view = catalog.view_for(tenant).await?;
        let names: Vec<&str> = view.view().names().collect();
        seen.push(format!("{tenant} sees {names:?}"));
        for problem in view.problems() {
            seen.push(format!("{tenant}: row {} left out: {}", problem.row().name, problem.code()));
        }
    }
    let acme = catalog.view_for("acme").await?.executor()?;
    for (id, grams) in [("c1", 1200), ("c2", 5000)] {
        let r = acme.call(ToolCall::new(id, "quote_small_parcel", json!({"weight_grams": grams}))).await;
        seen.push(match r.data() {
            Some(cents) => format!("acme: {grams} g costs {cents} cents"),
            None => format!("acme: {grams} g refused: {}", r.code().unwrap_or("?")),
        });
    }

    // 3. A row disabled leaves the next view.
    catalog.set_enabled_async("quote_small_parcel", Some("acme"), false).await?;
    let names: Vec<String> = catalog.view_for("acme").await?.view().names().map(str::to_owned).collect();
    seen.push(format!("acme sees {names:?} once its row is disabled"));
    Ok(seen)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let dir = std::env::temp_dir().join(format!("keel-catalogue-rows-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = demo(&dir.join("tools.db")).await;
    let _ = std::fs::remove_dir_all(&dir);
    for line in result? {
        println!("{line}");
    }
    Ok(())
}
