//! Tool search (`keel-tools-search`) over 10,000 generated tools: latency per query, and the index's build time.
//!
//! The tools are generated from a fixed seed, so every run indexes the same set: names like
//! `billing.invoice.refund` (20 domains, 30 resources, 20 actions, in three spellings: dotted, snake_case,
//! camelCase), descriptions of 2 to 4 sentences drawn from word pools, and input schemas of 2 to 8 documented
//! parameters, some with enums, some nested objects and arrays of objects, some behind `$ref`s into `$defs`. Each
//! tool goes through `Document::from_schema`, as a registry would.
//!
//! Each round times every query of [`QUERIES`] `ITERS` times, one `Instant` pair per call, and prints its
//! p50/p90/p99, then the same over all queries together, then each pattern of [`PATTERNS`] with `search_regex`
//! (`ITERS / 20` calls). Build times are per round too: `from_schema` for the 10,000 tools, and
//! `SearchIndex::build` over the documents (their copy not timed).
//!
//! ```sh
//! cargo bench -p keel-bench --bench search                 # 3 rounds of 2,000 calls per query
//! cargo bench -p keel-bench --bench search -- 5 5000       # rounds, calls per query per round
//! ```
//!
//! Without `--bench` (which `cargo bench` passes), as under `cargo test --benches`, it runs one round of 20 calls
//! per query, to check that it works.
//!
//! Instructions per query, with callgrind (the binary is the one `cargo bench` runs; `--no-run` prints its
//! path): `callgrind N` runs each query N times inside `run_queries`, `callgrind N Q` only query number Q.
//!
//! ```sh
//! cargo bench -p keel-bench --bench search --no-run        # prints "Executable benches/search.rs (PATH)"
//! valgrind --tool=callgrind --toggle-collect='*run_queries*' --callgrind-out-file=search.out PATH callgrind 100
//! ```
//!
//! The instruction total (`summary:` in `search.out`) divided by 100 × the number of queries is the mean per
//! query.

use std::hint::black_box;
use std::time::{Duration, Instant};

use keel_tools_search::{Document, SearchIndex};
use serde_json::{Map, Value, json};

const TOOLS: usize = 10_000;
const SEED: u64 = 0x005E_ED0F_7001_5EA7;
const LIMIT: usize = 5;

/// What a model asks a tool search for: a few words, a sentence, an exact name, a word every tool has, nothing.
const QUERIES: &[&str] = &[
    "refund invoice",
    "how do I refund a customer's invoice?",
    "billing.invoice.refund",
    "rotate api key",
    "list open incidents by severity",
    "time zone of a shipping address",
    "send an email notification to the customer",
    "delete",
    "restart kubernetes deployment pods",
    "cancel subscription at end of billing period",
    "export analytics report as csv for last month",
    "xylophone quartz",
];

/// Patterns for `search_regex`, timed `ITERS / 20` times each per round.
const PATTERNS: &[&str] = &[r"^billing\.", r"(?i)refund", r"invoice.*(csv|pdf)", r"\btime[_ ]zone\b"];

const DOMAINS: &[&str] = &[
    "billing",
    "crm",
    "incident",
    "deploy",
    "storage",
    "auth",
    "analytics",
    "messaging",
    "calendar",
    "inventory",
    "shipping",
    "hr",
    "support",
    "search",
    "geo",
    "kubernetes",
    "dns",
    "payments",
    "catalog",
    "audit",
];
const RESOURCES: &[&str] = &[
    "invoice",
    "customer",
    "subscription",
    "refund",
    "ticket",
    "user",
    "account",
    "api_key",
    "pod",
    "deployment",
    "bucket",
    "object",
    "event",
    "report",
    "dashboard",
    "message",
    "channel",
    "email",
    "order",
    "shipment",
    "product",
    "employee",
    "record",
    "alert",
    "metric",
    "zone",
    "file",
    "webhook",
    "note",
    "incident",
];
/// Each action and the verb phrase a description starts with.
const ACTIONS: &[(&str, &str)] = &[
    ("create", "Creates"),
    ("get", "Fetches"),
    ("list", "Lists"),
    ("update", "Updates"),
    ("delete", "Deletes"),
    ("search", "Searches for"),
    ("refund", "Refunds"),
    ("cancel", "Cancels"),
    ("send", "Sends"),
    ("archive", "Archives"),
    ("restore", "Restores"),
    ("export", "Exports"),
    ("import", "Imports"),
    ("approve", "Approves"),
    ("assign", "Assigns"),
    ("close", "Closes"),
    ("rotate", "Rotates"),
    ("restart", "Restarts"),
    ("sync", "Synchronises"),
    ("validate", "Validates"),
];
const ADJECTIVES: &[&str] = &[
    "active",
    "pending",
    "archived",
    "recent",
    "failed",
    "scheduled",
    "primary",
    "external",
    "internal",
    "billing",
    "default",
    "shared",
    "expired",
    "open",
    "closed",
    "critical",
    "draft",
    "monthly",
    "regional",
    "verified",
];
const NOUNS: &[&str] = &[
    "status",
    "owner",
    "history",
    "timeline",
    "permissions",
    "metadata",
    "quota",
    "region",
    "currency",
    "amount",
    "period",
    "notification",
    "audit log",
    "retention policy",
    "webhook",
    "team",
    "workspace",
    "project",
    "label",
    "priority",
    "severity",
    "deadline",
    "address",
    "time zone",
    "payment method",
    "api key",
    "cluster",
    "namespace",
    "replica",
    "csv file",
];
const SENTENCES: &[&str] = &[
    "Returns the {adj} {noun} and its {noun}.",
    "Use it when the user asks about the {noun} of a {res}.",
    "Fails if the {res} is {adj} or the caller lacks {noun}.",
    "The {noun} is kept for the {adj} {noun}.",
    "Only {adj} {res}s are considered; filter by {noun} to narrow the result.",
    "Sends a {noun} to the {res} owner when done.",
    "Idempotent: repeating the call with the same {noun} has no further effect.",
    "Results are paginated and sorted by {noun}.",
];

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

fn camel(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split('_').enumerate() {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            if i == 0 {
                out.push(first);
            } else {
                out.extend(first.to_uppercase());
            }
            out.extend(chars);
        }
    }
    out
}

fn sentence(rng: &mut Rng, res: &str) -> String {
    let mut s = String::new();
    let template = rng.pick(SENTENCES);
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        s.push_str(&rest[..start]);
        let end = start + rest[start..].find('}').expect("closed");
        match &rest[start + 1..end] {
            "adj" => s.push_str(rng.pick(ADJECTIVES)),
            "noun" => s.push_str(rng.pick(NOUNS)),
            _ => s.push_str(&res.replace('_', " ")),
        }
        rest = &rest[end + 1..];
    }
    s.push_str(rest);
    s
}

/// One parameter's schema, and whether it needs a shared `$defs` entry.
fn param(rng: &mut Rng, res: &str) -> (String, Value) {
    match rng.below(14) {
        0 => ("id".into(), json!({"type": "string", "description": format!("The {}'s id.", res.replace('_', " "))})),
        1 => (format!("{res}_id"), json!({"type": "string", "description": format!("Which {res} to act on.")})),
        2 => (
            "limit".into(),
            json!({"type": "integer", "minimum": 1, "maximum": 100, "description": "At most this many results."}),
        ),
        3 => (
            "cursor".into(),
            json!({"type": "string", "description": "Where the previous page ended; absent for the first page."}),
        ),
        4 => (
            "status".into(),
            json!({"enum": ["open", "pending", "closed", "archived"], "description": "Only items in this status."}),
        ),
        5 => (
            "severity".into(),
            json!({"type": "string", "enum": ["low", "medium", "high", "critical"], "title": "Severity"}),
        ),
        6 => {
            ("amount_cents".into(), json!({"type": "integer", "description": "The amount, in cents of the currency."}))
        }
        7 => ("reason".into(), json!({"type": "string", "description": sentence(rng, res)})),
        8 => {
            ("tags".into(), json!({"type": "array", "items": {"type": "string", "description": "A label to attach."}}))
        }
        9 => (
            "created_after".into(),
            json!({"anyOf": [{"type": "string", "format": "date-time", "description": "ISO 8601 timestamp."}, {"type": "null"}]}),
        ),
        10 => ("address".into(), json!({"$ref": "#/$defs/Address"})),
        11 => (
            "filter".into(),
            json!({
                "type": "object",
                "description": "Conditions the results must meet.",
                "properties": {
                    "field": {"type": "string", "description": format!("A field of the {res}.")},
                    "op": {"enum": ["eq", "ne", "lt", "gt", "contains"]},
                    "value": {"description": "The value to compare with."}
                }
            }),
        ),
        12 => (
            "notify".into(),
            json!({"type": "boolean", "description": format!("Send a {} when done.", rng.pick(NOUNS))}),
        ),
        _ => (
            "items".into(),
            json!({
                "type": "array",
                "description": format!("The {res} lines."),
                "items": {"type": "object", "properties": {
                    "sku": {"type": "string", "description": "Stock keeping unit."},
                    "quantity": {"type": "integer", "minimum": 1}
                }}
            }),
        ),
    }
}

/// One tool: its name, description and input schema.
fn tool(rng: &mut Rng, domain: &str, res: &str, action: &str, verb: &str) -> (String, String, Value) {
    let dotted = (domain, res, action) == ("billing", "invoice", "refund");
    let name = match rng.below(10) {
        _ if dotted => format!("{domain}.{res}.{action}"),
        0..=5 => format!("{domain}.{res}.{action}"),
        6..=7 => format!("{domain}_{action}_{res}"),
        _ => format!("{domain}.{}", camel(&format!("{action}_{res}"))),
    };
    let mut description = format!("{verb} a {} in {domain}.", res.replace('_', " "));
    for _ in 0..1 + rng.below(3) {
        description.push(' ');
        description.push_str(&sentence(rng, res));
    }
    let mut props = Map::new();
    let mut uses_address = false;
    for _ in 0..2 + rng.below(7) {
        let (name, schema) = param(rng, res);
        uses_address |= name == "address";
        props.insert(name, schema);
    }
    let mut schema = json!({"type": "object", "properties": props, "additionalProperties": false});
    if uses_address {
        schema["$defs"] = json!({"Address": {
            "type": "object",
            "description": "A postal address.",
            "properties": {
                "street": {"type": "string"},
                "city": {"type": "string", "description": "City or town."},
                "postal_code": {"type": "string"},
                "country": {"type": "string", "description": "ISO 3166-1 alpha-2 country code."},
                "time_zone": {"type": "string", "description": "IANA time zone, e.g. Europe/Paris."}
            }
        }});
    }
    (name, description, schema)
}

/// The tools' parts, `(domain, resource, action)`, shuffled from a fixed seed; billing, invoice, refund first
/// (always spelt `billing.invoice.refund`, the exact name among the queries).
fn combos(rng: &mut Rng) -> Vec<(usize, usize, usize)> {
    let mut all: Vec<(usize, usize, usize)> = (0..DOMAINS.len())
        .flat_map(|d| (0..RESOURCES.len()).flat_map(move |r| (0..ACTIONS.len()).map(move |a| (d, r, a))))
        .collect();
    for i in (1..all.len()).rev() {
        all.swap(i, rng.below(i + 1));
    }
    let first =
        all.iter().position(|&(d, r, a)| (DOMAINS[d], RESOURCES[r], ACTIONS[a].0) == ("billing", "invoice", "refund"));
    all.swap(0, first.expect("in the pools"));
    all.truncate(TOOLS);
    all
}

/// The generated tools: names, descriptions and input schemas.
fn generate() -> Vec<(String, String, Value)> {
    let mut rng = Rng(SEED);
    let combos = combos(&mut rng);
    combos.iter().map(|&(d, r, a)| tool(&mut rng, DOMAINS[d], RESOURCES[r], ACTIONS[a].0, ACTIONS[a].1)).collect()
}

/// The tools' documents, as a registry would make them, and how long that took.
fn documents(tools: &[(String, String, Value)]) -> (Vec<Document>, Duration) {
    let start = Instant::now();
    let docs = tools.iter().map(|(n, d, s)| Document::from_schema(n.as_str(), d.as_str(), s)).collect();
    (docs, start.elapsed())
}

/// `(p50, p90, p99)` of sorted nanoseconds, in microseconds.
fn percentiles(sorted: &[u64]) -> (f64, f64, f64) {
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize] as f64 / 1_000.0;
    (at(0.50), at(0.90), at(0.99))
}

#[inline(never)]
fn run_queries(index: &SearchIndex, queries: &[&str], n: usize) -> usize {
    let mut total = 0;
    for _ in 0..n {
        for q in queries {
            total += index.search(black_box(q), LIMIT).len();
        }
    }
    total
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let tools = generate();
    let (docs, _) = documents(&tools);
    let mut names: Vec<&str> = docs.iter().map(|d| d.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), TOOLS, "distinct names");

    if args.first().map(String::as_str) == Some("callgrind") {
        let n = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100);
        let queries = match args.get(2).and_then(|a| a.parse::<usize>().ok()) {
            Some(q) => &QUERIES[q..=q],
            None => QUERIES,
        };
        let index = SearchIndex::build(docs);
        println!("{} results", run_queries(&index, queries, n));
        return;
    }

    // `cargo bench` passes `--bench`; without it (`cargo test --benches`), one short round checks that it runs.
    let measuring = std::env::args().any(|a| a == "--bench");
    let rounds: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(if measuring { 3 } else { 1 });
    let iters: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(if measuring { 2_000 } else { 20 });
    let params: usize = docs.iter().map(|d| d.params().len()).sum();
    println!(
        "tool search: {TOOLS} tools ({params} parameters), limit {LIMIT}, {rounds} rounds of {iters} calls per query"
    );

    let index = SearchIndex::build(docs.clone());
    println!("{index:?}");
    println!("\nfirst hits:");
    for q in QUERIES {
        let hits = index.search(q, LIMIT);
        let top: Vec<&str> = hits.iter().take(3).map(|h| h.name()).collect();
        println!("  {q:<46} {} hits: {}", hits.len(), top.join(", "));
    }
    // Warm-up.
    run_queries(&index, QUERIES, 200);

    for round in 1..=rounds {
        let (_, from_schema) = documents(&tools);
        let copy = docs.clone();
        let start = Instant::now();
        let built = SearchIndex::build(copy);
        let build = start.elapsed();
        drop(built);
        println!(
            "\nround {round}: Document::from_schema x{TOOLS} {:.1} ms, SearchIndex::build {:.1} ms",
            from_schema.as_secs_f64() * 1e3,
            build.as_secs_f64() * 1e3
        );
        println!("  {:<46} {:>9} {:>9} {:>9}", "query", "p50 µs", "p90 µs", "p99 µs");
        let mut all = Vec::with_capacity(QUERIES.len() * iters);
        for q in QUERIES {
            let mut times = Vec::with_capacity(iters);
            for _ in 0..iters {
                let start = Instant::now();
                let hits = index.search(black_box(q), LIMIT);
                times.push(start.elapsed().as_nanos() as u64);
                black_box(hits);
            }
            times.sort_unstable();
            let (p50, p90, p99) = percentiles(&times);
            println!("  {q:<46} {p50:>9.1} {p90:>9.1} {p99:>9.1}");
            all.extend(times);
        }
        all.sort_unstable();
        let (p50, p90, p99) = percentiles(&all);
        println!("  {:<46} {p50:>9.1} {p90:>9.1} {p99:>9.1}", "all queries");

        // Regex search runs the pattern over every document's texts: far fewer calls.
        let calls = (iters / 20).max(5);
        for pattern in PATTERNS {
            let mut times = Vec::with_capacity(calls);
            for _ in 0..calls {
                let start = Instant::now();
                let hits = index.search_regex(black_box(pattern), LIMIT).expect("valid pattern");
                times.push(start.elapsed().as_nanos() as u64);
                black_box(hits);
            }
            times.sort_unstable();
            let (p50, p90, p99) = percentiles(&times);
            println!("  {:<46} {p50:>9.1} {p90:>9.1} {p99:>9.1}", format!("regex {pattern}"));
        }
    }
}
