//! Registry build and `ollama_schemas()` (first and cached call) with 200 compiled tools and 1,000/10,000
//! run-time tools.
//!
//! - The 1,000/10,000-tool registries are built with `Registry::builder().without_inventory().tools(defs)` from
//!   run-time `ToolDefinition::builder` definitions ([`keel_bench::dynamic`]); the definitions are made in the
//!   untimed setup. Built once compiling every schema (the default) and once with `defer_schema_checks()`, which
//!   leaves that to the executors of the views.
//! - The 200 compiled tools are this binary's `#[tool]`s ([`keel_bench::generated`]), collected by
//!   `Registry::from_inventory()` (which also holds the 4 fixture tools: 204 in all).
//! - "first call" times `ollama_schemas()` on a registry that has never rendered (schemas generated,
//!   canonicalised and rendered for every tool); "cached call" times it again on the same registry.
//! - "view per turn" times what a harness does each turn: choose a view by names (40 or 200 of the compiled tools),
//!   then get its Ollama tool list: `tool_list` (borrowed; each tool's rendering is cached on its shared
//!   definition), that list as the JSON text a request body carries (`to_json`, joining each tool's cached text),
//!   or, for comparison, `schemas()`, which copies every rendering into a list of the view's own.
//!
//! ```sh
//! cargo bench -p keel-bench --bench registry -- --warm-up-time 1 --measurement-time 3
//! ```

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use keel_bench::{dynamic, generated};
use keel_tools_core::{Provider, Registry};

const SIZES: [usize; 2] = [1_000, 10_000];

fn dynamic_registry(n: usize, input: &serde_json::Value, output: &serde_json::Value) -> Registry {
    Registry::builder().without_inventory().tools(dynamic::definitions(n, input, output)).build().expect("unique names")
}

fn inventory_registry() -> Registry {
    let registry = Registry::from_inventory().expect("unique names");
    assert!(registry.len() > generated::COUNT, "the generated tools are linked ({} tools)", registry.len());
    registry
}

fn build(c: &mut Criterion) {
    let (input, output) = dynamic::schemas();
    let mut g = c.benchmark_group("registry/build");
    g.sample_size(20);
    for n in SIZES {
        g.bench_with_input(BenchmarkId::new("builder().without_inventory().tools(run-time defs)", n), &n, |b, &n| {
            b.iter_batched(
                || dynamic::definitions(n, &input, &output),
                |defs| Registry::builder().without_inventory().tools(defs).build().expect("unique names"),
                BatchSize::PerIteration,
            )
        });
    }
    for n in SIZES {
        let id = BenchmarkId::new("builder().without_inventory().defer_schema_checks().tools(run-time defs)", n);
        g.bench_with_input(id, &n, |b, &n| {
            b.iter_batched(
                || dynamic::definitions(n, &input, &output),
                |defs| {
                    Registry::builder().without_inventory().defer_schema_checks().tools(defs).build().expect("unique")
                },
                BatchSize::PerIteration,
            )
        });
    }
    let compiled = inventory_registry().len();
    g.bench_with_input(BenchmarkId::new("from_inventory() (compiled #[tool]s)", compiled), &(), |b, _| {
        b.iter_batched(|| (), |()| Registry::from_inventory().expect("unique names"), BatchSize::SmallInput)
    });
    g.finish();
}

fn ollama_schemas(c: &mut Criterion) {
    let (input, output) = dynamic::schemas();
    let compiled = inventory_registry().len();

    let mut g = c.benchmark_group("registry/ollama_schemas first call");
    g.sample_size(10);
    g.bench_with_input(BenchmarkId::new("compiled", compiled), &(), |b, _| {
        b.iter_batched(
            inventory_registry,
            |r| {
                black_box(r.ollama_schemas().len());
                r
            },
            BatchSize::PerIteration,
        )
    });
    for n in SIZES {
        g.bench_with_input(BenchmarkId::new("run-time", n), &n, |b, &n| {
            b.iter_batched(
                || dynamic_registry(n, &input, &output),
                |r| {
                    black_box(r.ollama_schemas().len());
                    r
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();

    let mut g = c.benchmark_group("registry/ollama_schemas cached call");
    let registry = inventory_registry();
    assert_eq!(registry.ollama_schemas().len(), compiled);
    g.bench_with_input(BenchmarkId::new("compiled", compiled), &(), |b, _| {
        b.iter(|| black_box(&registry).ollama_schemas().len())
    });
    for n in SIZES {
        let registry = dynamic_registry(n, &input, &output);
        assert_eq!(registry.ollama_schemas().len(), n);
        g.bench_with_input(BenchmarkId::new("run-time", n), &n, |b, _| {
            b.iter(|| black_box(&registry).ollama_schemas().len())
        });
    }
    g.finish();

    // Per turn: a new view (by names) over a registry whose definitions have rendered before.
    let mut g = c.benchmark_group("registry/view per turn");
    let names: Vec<&str> = registry.names().filter(|n| n.starts_with("generated.")).collect();
    assert_eq!(names.len(), generated::COUNT);
    for k in [40, generated::COUNT] {
        let chosen = &names[..k];
        let view = || registry.view().names(chosen.iter().copied()).build().expect("known names");
        g.bench_with_input(BenchmarkId::new("view build only", k), &k, |b, _| b.iter(view));
        // What a request needs: the view and its list (borrowed, shared renderings), then the list as JSON text.
        g.bench_with_input(BenchmarkId::new("view + tool_list", k), &k, |b, _| {
            b.iter(|| {
                let view = view();
                black_box(view.tool_list(Provider::Ollama).len());
                view
            })
        });
        g.bench_with_input(BenchmarkId::new("view + tool_list().to_json()", k), &k, |b, _| {
            b.iter(|| {
                let view = view();
                black_box(view.tool_list(Provider::Ollama).to_json());
                view
            })
        });
        // The copying convenience, for comparison: a list of the view's own.
        g.bench_with_input(BenchmarkId::new("view + schemas() (copies)", k), &k, |b, _| {
            b.iter(|| {
                let view = view();
                black_box(view.schemas(Provider::Ollama).len());
                view
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = build, ollama_schemas
}
criterion_main!(benches);
