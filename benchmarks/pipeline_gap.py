"""Where a permutation run spends time beyond the scoring engine.

One process, one loaded model, the same sampled MMLU items, timed four ways:

1. **engine, one call**: ``backend.score`` on every order of every item at once, the engine's
   best case;
2. **engine, the pipeline's calls**: ``backend.score`` once per batch of ``--batch-items``
   items (the pipeline's default: 256 where the model computes off this CPU, else 32), back to
   back. This adds each call's start (planning its first chunk before the model has work) and
   end (waiting for its last read);
3. **the pipeline**: ``run_permutation`` into a fresh run folder with no score cache, the
   detectors in their worker processes and the records written. This adds the pipeline's
   own work and whatever of it does not overlap the scoring;
4. **engine, one call** again, to show how far the machine's speed drifted over the run.

It prints items/s for each and splits the pipeline's time into those parts. On a GPU, part 2's
share is the device idle between calls; on a CPU the host is the device, so nothing can
overlap and the parts add up.

    python benchmarks/pipeline_gap.py --items 64                      # bundled SmolLM2, CPU
    python benchmarks/pipeline_gap.py --device cuda --dtype bfloat16 --random-init llama-1b \\
        --tokenizer DIR --benchdata DIR --items 2048
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_profile import timed_calls  # noqa: E402
from permutation_speed import BENCHDATA, add_model_args, engine_backend  # noqa: E402

from contamscope.data import load_benchmark  # noqa: E402
from contamscope.pipeline import PermutationConfig, run_permutation, select_items  # noqa: E402
from contamscope.pipeline.permutation import _plan_batch  # noqa: E402
from contamscope.store import CachedScorer  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_args(ap)
    ap.add_argument("--items", type=int, default=64, help="MMLU items, sampled across subjects")
    ap.add_argument("--benchdata", type=Path, default=BENCHDATA)
    ap.add_argument("--batch-items", type=int, help="items per call (default: the pipeline's)")
    ap.add_argument("--detector-workers", type=int, help="default: the pipeline's")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not (args.benchdata / "mmlu").is_dir():
        raise SystemExit(f"--benchdata {args.benchdata}: no mmlu/ folder there")
    backend = engine_backend(args, args.dtype, "auto")
    loaded = load_benchmark(str(args.benchdata / "mmlu" / "test"))
    items = select_items(loaded.items, sample=args.items, seed=args.seed)
    offloaded = not backend.computes_on_local_cpu
    batch = args.batch_items or (256 if offloaded else 32)
    config = PermutationConfig(
        template="paper", batch_items=batch, detector_workers=args.detector_workers
    )
    calls = [
        _plan_batch(items[s : s + batch], config).requests for s in range(0, len(items), batch)
    ]
    every = [r for reqs in calls for r in reqs]
    print(
        f"{backend.spec} on {backend.device} ({backend.dtype}); {len(items)} items, "
        f"{len(every):,} orders, calls of {batch} items ({len(calls)} calls)",
        flush=True,
    )
    # warm-up: both call patterns once, untimed (fused kernels compile the shapes they meet)
    backend.score(every)
    for reqs in calls:
        backend.score(reqs)
    one = timed_calls(lambda: backend.score(every), backend, 1)
    per_call = timed_calls(lambda: [backend.score(reqs) for reqs in calls], backend, 1)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        outcome = run_permutation(
            loaded, items, CachedScorer(backend, None), Path(tmp) / "run", config
        )
        whole = time.perf_counter() - t0
    scoring = outcome.summary["timings"]["scoring_seconds"]
    again = timed_calls(lambda: backend.score(every), backend, 1)
    n = len(items)
    rows = [
        ("engine, one call", one),
        (f"engine, {len(calls)} calls of {batch} items", per_call),
        ("pipeline, its scoring loop (summary's scoring_seconds)", scoring),
        ("pipeline, whole run_permutation call", whole),
        ("engine, one call, again", again),
    ]
    for name, t in rows:
        print(f"{name:58s} {t:8.2f} s  {n / t:8.1f} items/s")
    base = statistics.mean([one, again])
    print(
        f"of the pipeline's scoring loop ({scoring:.2f} s): engine at its best "
        f"{100 * base / scoring:.0f}%, calls' starts and ends {100 * (per_call - base) / scoring:.0f}%, "
        f"the pipeline's own work {100 * (scoring - per_call) / scoring:.0f}%; "
        f"drift between the two one-call timings {100 * (again - one) / one:+.0f}%"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
