"""Scale-out: permutation-scan throughput in process and on 1..N Ray workers, and the driver's cost.

Scoring: for each configuration the requests of a permutation run (every order of every
item, one call per 32-item batch, as the pipeline sends them) are scored from an empty cache;
the script reports items/s, continuation tokens/s, the speedup over one Ray worker, worker
utilisation (time inside the model / (workers x wall time)) and the driver+Ray overhead per item
(wall time the workers were not scoring, per item). End to end: the whole pipeline (scoring,
detectors, records) from an empty cache. Driver cost: the pipeline re-run with every score in
the cache, i.e. the driver's own work per item (orders, cache look-ups, detectors, records).

    python benchmarks/scaleout.py                        # tiny random model, 48 MMLU items
    python benchmarks/scaleout.py --model smollm2 --items 16
    python benchmarks/scaleout.py --model vllm:Qwen/Qwen2-0.5B --gpus-per-worker 1 --workers 1,2

On GPU nodes the workers load the model with ``--device cuda`` (vLLM or the hf engine); the
workers each reserve ``--gpus-per-worker`` GPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from contamscope.backends.base import ScoreRequest
from contamscope.data import load_benchmark
from contamscope.executors import ExecutorConfig, LocalExecutor, make_executor
from contamscope.pipeline import PermutationConfig, run_permutation, select_items
from contamscope.store import RunDir, ScoreCache


def tiny_model(folder: Path, *, embed_std: float | None = None, max_positions: int = 512) -> str:
    """A 2-layer random-weight Llama with the SmolLM2 tokenizer (as in tests/conftest.py);
    ``embed_std``: its embeddings drawn N(0, embed_std^2) (the tests' 1.0 makes log-probs vary
    a lot between texts)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from contamscope.backends.bundled import smollm2_gguf_path

    gguf = smollm2_gguf_path()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(cfg)
    if embed_std is not None:
        with torch.no_grad():
            model.model.embed_tokens.weight.normal_(0, embed_std)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return f"hf:{folder}"


def scan(scorer: Any, loaded: Any, items: list[Any], out: Path) -> dict[str, Any]:
    """The whole permutation pipeline (scoring + detectors + records) from an empty cache."""
    t0 = time.perf_counter()
    run_permutation(loaded, items, scorer, RunDir(out), PermutationConfig(), overwrite=True)
    wall = time.perf_counter() - t0
    return {"e2e_items_per_s": len(items) / wall, "e2e_wall_s": wall}


def score_only(scorer: Any, batches: list[list[ScoreRequest]], n_items: int) -> dict[str, Any]:
    """Scoring alone: the same requests the pipeline sends, one call per 32-item batch."""
    t0 = time.perf_counter()
    tokens = 0
    for batch in batches:
        tokens += sum(r.n_tokens for r in scorer.score(batch))
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "items_per_s": n_items / wall, "tokens_per_s": tokens / wall}


def batches_from(run: Path, batch_items: int = 32) -> tuple[list[list[ScoreRequest]], int]:
    recs = [json.loads(x) for x in (run / "items.jsonl").read_text(encoding="utf-8").splitlines()]
    recs = [r for r in recs if r.get("continuations")]
    out = []
    for s in range(0, len(recs), batch_items):
        out.append(
            [
                ScoreRequest(r["prefix"], c)
                for r in recs[s : s + batch_items]
                for c in r["continuations"]
            ]
        )
    return out, len(recs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="tiny", help="tiny (random 2-layer model) or a model spec")
    ap.add_argument("--benchmark", default="mmlu")
    ap.add_argument("--items", type=int, default=48)
    ap.add_argument("--workers", default="1,2", help="Ray worker counts to measure")
    ap.add_argument("--gpus-per-worker", type=float, default=0.0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--ray-address", default=None)
    ap.add_argument("--repeats", type=int, default=1, help="median over this many runs each")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="scaleout-"))
    spec = tiny_model(tmp / "tiny") if args.model == "tiny" else args.model
    loaded = load_benchmark(args.benchmark)
    items = select_items(loaded.items, sample=args.items, seed=0)
    load_kw: dict[str, Any] = {"device": args.device, "dtype": args.dtype}
    rows: list[dict[str, Any]] = []

    import torch

    local = LocalExecutor()
    t0 = time.perf_counter()
    local.scorer(spec, **load_kw)
    local_load = time.perf_counter() - t0
    e2e = scan(
        local.scorer(spec, cache=ScoreCache(tmp / "c-e2e.sqlite"), **load_kw),
        loaded,
        items,
        tmp / "e2e",
    )
    warm = local.scorer(spec, cache=ScoreCache(tmp / "c-e2e.sqlite"), **load_kw)
    t0 = time.perf_counter()
    run_permutation(loaded, items, warm, RunDir(tmp / "cached"), PermutationConfig())
    driver_ms = 1000 * (time.perf_counter() - t0) / len(items)
    batches, n_items = batches_from(tmp / "e2e")

    def measure(label: str, scorer_for: Any, extra: Any) -> dict[str, Any]:
        runs = []
        for r in range(args.repeats):
            res = score_only(
                scorer_for(ScoreCache(tmp / f"c-{label}-{r}.sqlite")), batches, n_items
            )
            runs.append({**res, **extra()})
        runs.sort(key=lambda x: x["wall_s"])
        row = {"config": label, **runs[len(runs) // 2]}
        rows.append(row)
        print(json.dumps(row), flush=True)
        return row

    row = measure("local", lambda c: local.scorer(spec, cache=c, **load_kw), dict)
    row.update(load_s=local_load, torch_threads=torch.get_num_threads(), **e2e)
    local.close()

    import ray

    counts = [int(x) for x in args.workers.split(",")]
    if args.ray_address is None:
        ray.init(num_cpus=max(counts), include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=args.ray_address, log_to_driver=False)
    one = None
    for n in counts:
        cfg = ExecutorConfig(kind="ray", workers=n, gpus_per_worker=args.gpus_per_worker)
        with make_executor(cfg) as ex:
            t0 = time.perf_counter()
            ex.scorer(spec, **load_kw)
            load = time.perf_counter() - t0
            pool = ex.pools[0]  # type: ignore[attr-defined]
            state = {"busy0": 0.0}

            def before(c: ScoreCache, ex: Any = ex, pool: Any = pool, state: Any = state) -> Any:
                state["busy0"] = sum(pool.busy_seconds())
                return ex.scorer(spec, cache=c, **load_kw)

            def after(pool: Any = pool, state: Any = state) -> dict[str, Any]:
                return {"busy_s": sum(pool.busy_seconds()) - state["busy0"]}

            row = measure(f"ray x{n}", before, after)
            row.update(load_s=load, torch_threads=pool.info.get("torch_threads"), workers=n)
            row["utilisation"] = row["busy_s"] / (n * row["wall_s"])
            row["overhead_ms_per_item"] = 1000 * (row["wall_s"] - row["busy_s"] / n) / n_items
            one = one or row
            row["speedup_vs_1_worker"] = row["items_per_s"] / one["items_per_s"]
            row.update(
                scan(
                    ex.scorer(spec, cache=ScoreCache(tmp / f"c-e2e-{n}.sqlite"), **load_kw),
                    loaded,
                    items,
                    tmp / f"e2e-{n}",
                )
            )
            print(json.dumps(row), flush=True)
    ray.shutdown()

    print()
    print(
        f"model {args.model}, {n_items} items scored x 24 orders, {args.device}/{args.dtype}; "
        f"driver pipeline with every score cached (orders, detectors, records): {driver_ms:.0f} ms/item; "
        f"load average (1/5/15 min) at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print(
        "| config | torch threads | model load s | scoring items/s | tokens/s | speedup vs 1 worker "
        "| worker utilisation | driver+Ray overhead ms/item | end-to-end items/s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        sp, ut, ov = (
            r.get(k) for k in ("speedup_vs_1_worker", "utilisation", "overhead_ms_per_item")
        )
        print(
            f"| {r['config']} | {r.get('torch_threads')} | {r['load_s']:.1f} | "
            f"{r['items_per_s']:.2f} | {r['tokens_per_s']:.0f} | "
            f"{'' if sp is None else f'{sp:.2f}x'} | {'' if ut is None else f'{ut:.0%}'} | "
            f"{'' if ov is None else f'{ov:.1f}'} | {r['e2e_items_per_s']:.2f} |"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "model": args.model,
                    "items": n_items,
                    "driver_cached_ms_per_item": driver_ms,
                    "median_of": args.repeats,
                    "rows": rows,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
