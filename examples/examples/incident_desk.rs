//! The main demo: what the model sees, how the executor answers the desk's four calls, and the bureau's batches.
//!
//! ```text
//! cargo run -p examples --example incident_desk
//! ```

use examples::{cards, desk};
use keel_tools_core::Registry;

#[tokio::main]
async fn main() {
    // Handler failures are logged here, never sent to the model. Set RUST_LOG=keel_tools_core=info to see every call.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "keel_tools_core=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();

    println!("== What the model sees: ollama_schemas() of the incident desk\n");
    let executor = desk::executor();
    let schemas = executor.view().ollama_schemas();
    println!("{}", serde_json::to_string_pretty(schemas).expect("schemas serialize"));

    println!("\n== The desk: four calls through one executor\n");
    let results = desk::run_seed_calls().await;
    let rows: Vec<[String; 5]> = results
        .iter()
        .map(|r| {
            [
                r.call_id.clone(),
                r.tool_name.clone(),
                r.tool_version.as_deref().unwrap_or("null").to_owned(),
                r.is_ok().to_string(),
                r.error().map_or_else(|| "—".to_owned(), |e| e.code.to_string()),
            ]
        })
        .collect();
    print_table(["call_id", "name", "version", "ok", "code"], &rows);
    println!("\nThe valid call's result:\n{}", serde_json::to_string_pretty(&results[0]).expect("serializes"));
    if let Some(e) = &results[2].error() {
        println!("\nThe invalid call's error (what the model reads to repair its call):\n  {}", e.message);
    }

    println!("\n== The bureau: batches, decisions and the event log");
    for s in cards::scenarios().await {
        println!("\n$ scenario {}\nmode: replay\norigin: synthetic_script (a fixed script, not a model)", s.name);
        for e in s.run.log().events() {
            println!("{}", e.display_line());
        }
    }

    let total = Registry::from_inventory().map(|r| r.len()).unwrap_or(0);
    println!("\n({total} tools are compiled into this binary; each view above exposes only its own.)");
}

fn print_table<const N: usize>(header: [&str; N], rows: &[[String; N]]) {
    let mut widths = header.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        println!("{}", padded.join(" | ").trim_end());
    };
    line(header.to_vec());
    println!("{}", widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("-|-"));
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}
