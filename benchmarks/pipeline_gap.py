"""Where a permutation run spends time beyond the scoring engine.

One process, one loaded model, the same sampled MMLU items, timed four ways:

1. **engine, one call**: ``backend.score`` on every order of every item at once, the engine's
   best case;
2. **engine, the pipeline's calls**: ``backend.score`` once per batch of ``--batch-items``
   items (the pipeline's default: 256 where the model computes off this CPU, else 32), back to
   back. This adds each call's start (planning its first chunk before the model has work) and
   end (waiting for its last read); and the same calls through ``backend.score_stream`` with
   the calls overlapped (each started before the last one's read: ``overlap_calls``, the GPU
   default), where ``--overlap`` includes ``on``;
3. **the pipeline**: ``run_permutation`` into a fresh run folder with no score cache and an
   empty user cache (a first run: the benchmark's convention table is computed), the
   detectors in their worker processes and the records written, once for each
   ``--detector-workers`` setting (``Ncold``: N workers started on demand by the first jobs,
   as before the pool started them at once), and each ``--overlap`` setting (``off``: each
   batch's call starts once the last one's results are handed over). This adds the pipeline's
   own work and whatever of it does not overlap the scoring;
4. **engine, one call** again, to show how far the machine's speed drifted over the run.

It prints items/s for each and splits the pipeline's time into those parts, and first what the
detectors cost alone: which Algorithm 2 path this machine's scikit-learn allows
(``iforest.available``) and the detectors' ms an item, inline, on the engine's scores. On a GPU, part 2's
share is the device idle between calls; on a CPU the host is the device, so nothing can
overlap and the parts add up.

    python benchmarks/pipeline_gap.py --items 64                      # bundled SmolLM2, CPU
    python benchmarks/pipeline_gap.py --device cuda --dtype bfloat16 --random-init llama-1b \\
        --tokenizer DIR --benchdata DIR --items 2048
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_profile import timed_calls  # noqa: E402
from permutation_speed import BENCHDATA, add_model_args, engine_backend  # noqa: E402

from contamscope.backends.base import ScoreRequest, ScoreResult  # noqa: E402
from contamscope.data import load_benchmark  # noqa: E402
from contamscope.data.items import MCQItem  # noqa: E402
from contamscope.detectors import Algorithm1, Algorithm2, iforest  # noqa: E402
from contamscope.pipeline import (  # noqa: E402
    PermutationConfig,
    permutation,  # noqa: E402
    run_permutation,
    select_items,
)
from contamscope.pipeline.permutation import _plan_batch, _records_of  # noqa: E402
from contamscope.store import CachedScorer  # noqa: E402
from contamscope.workers import SpawnPool  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_args(ap)
    ap.add_argument("--items", type=int, default=64, help="MMLU items, sampled across subjects")
    ap.add_argument("--benchdata", type=Path, default=BENCHDATA)
    ap.add_argument("--batch-items", type=int, help="items per call (default: the pipeline's)")
    ap.add_argument(
        "--detector-workers",
        default="default",
        help="comma list of worker counts, one pipeline run each ('default': the pipeline's)",
    )
    ap.add_argument(
        "--pipeline-batches",
        default="",
        help="comma list of items per call for the pipeline runs (default: --batch-items); "
        "each size's calls are run once untimed first",
    )
    ap.add_argument(
        "--overlap",
        default="default",
        help="comma list of on/off/default: the engine's calls overlapped or not (one "
        "pipeline run each; default: the backend's own setting)",
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not (args.benchdata / "mmlu").is_dir():
        raise SystemExit(f"--benchdata {args.benchdata}: no mmlu/ folder there")
    backend = engine_backend(args, args.dtype, "auto")
    loaded = load_benchmark(str(args.benchdata / "mmlu" / "test"))
    items = select_items(loaded.items, sample=args.items, seed=args.seed)
    offloaded = not backend.computes_on_local_cpu
    batch = args.batch_items or (256 if offloaded else 32)
    settings = [parse_workers(w) for w in args.detector_workers.split(",")]
    own = backend.overlap_calls
    overlaps = [parse_overlap(o, own) for o in args.overlap.split(",")]
    sizes = [int(b) for b in args.pipeline_batches.split(",")] if args.pipeline_batches else [batch]
    config = PermutationConfig(template="paper", batch_items=batch)
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
    detectors_alone(calls[0], backend.score(calls[0]), items[:batch], config)
    one = timed_calls(lambda: backend.score(every), backend, 1)
    per_call = timed_calls(lambda: [backend.score(reqs) for reqs in calls], backend, 1)
    n = len(items)
    rows = [("engine, one call", one), (f"engine, {len(calls)} calls of {batch} items", per_call)]
    if True in overlaps:
        backend.overlap_calls = True
        streamed = timed_calls(lambda: list(backend.score_stream(calls)), backend, 1)
        backend.overlap_calls = own
        rows.append((f"engine, {len(calls)} calls of {batch} items, overlapped", streamed))
    loops = []
    runs = [(b, w, o) for b in sizes for w in settings for o in overlaps]
    for size, (workers, cold), overlap in runs:
        if size != batch:  # its calls' shapes compiled now, untimed, as the warm-up did
            for s in range(0, len(items), size):
                backend.score(_plan_batch(items[s : s + size], config).requests)
        backend.overlap_calls = overlap
        with tempfile.TemporaryDirectory() as tmp, cold_pool(cold):
            # an empty user cache: a first run on this benchmark, its convention table computed
            os.environ["CONTAMSCOPE_CACHE_DIR"] = str(Path(tmp) / "cache")
            run_config = dataclasses.replace(config, detector_workers=workers, batch_items=size)
            t0 = time.perf_counter()
            with main_thread_parts() as parts:
                outcome = run_permutation(
                    loaded, items, CachedScorer(backend, None), Path(tmp) / "run", run_config
                )
            whole = time.perf_counter() - t0
        timings = outcome.summary["timings"]
        scoring = timings["scoring_seconds"]
        w = timings["detector_workers"]
        label = f"pipeline ({w} detector worker{'' if w == 1 else 's'}{', cold' if cold else ''}"
        label += f", {size}-item calls" if len(sizes) > 1 else ""
        label += (
            f", calls {'overlapped' if overlap else 'one at a time'})" if len(overlaps) > 1 else ")"
        )
        rows += [(f"{label}, scoring loop", scoring), (f"{label}, whole call", whole)]
        loops.append((label, scoring, size, overlap))
        print(
            f"{label}, main thread: " + ", ".join(f"{name} {t:.2f} s" for name, t in parts.items()),
            flush=True,
        )
    backend.overlap_calls = own
    again = timed_calls(lambda: backend.score(every), backend, 1)
    rows.append(("engine, one call, again", again))
    for name, t in rows:
        print(f"{name:76s} {t:8.2f} s  {n / t:8.1f} items/s")
    base = statistics.mean([one, again])
    engine_calls = dict(rows)
    for label, scoring, size, overlap in loops:
        calls_alone = engine_calls.get(
            f"engine, {len(calls)} calls of {batch} items{', overlapped' if overlap else ''}",
            per_call,
        )
        split = (
            f", calls' starts and ends {100 * (calls_alone - base) / scoring:.0f}%, the "
            f"pipeline's own work {100 * (scoring - calls_alone) / scoring:.0f}%"
            if size == batch  # the engine's calls were timed at this size only
            else ""
        )
        print(
            f"{label}: of its scoring loop ({scoring:.2f} s), engine at its best "
            f"{100 * base / scoring:.0f}%{split}"
        )
    print(f"drift between the two one-call timings {100 * (again - one) / one:+.0f}%")
    return 0


def parse_overlap(text: str, own: bool) -> bool:
    """``on``, ``off`` or ``default`` (the backend's own ``overlap_calls``)."""
    if text not in ("on", "off", "default"):
        raise SystemExit(f"--overlap {text}: expected on, off or default")
    return own if text == "default" else text == "on"


def parse_workers(text: str) -> tuple[int | None, bool]:
    """``default``, ``N``, or ``Ncold``: N detector processes started on demand by the first
    jobs, as before the pool started its workers at once (and without their warm-up)."""
    cold = text.endswith("cold")
    count = text.removesuffix("cold")
    return (None if count == "default" else int(count)), cold


@contextlib.contextmanager
def cold_pool(cold: bool) -> Iterator[None]:
    """While it is open, with ``cold``: the pipeline's detector pool starts its workers on
    demand, each loading the detectors in its first job."""
    if not cold:
        yield
        return
    original = permutation._detector_pool

    @contextlib.contextmanager
    def on_demand(workers: int) -> Iterator[SpawnPool | None]:
        if workers <= 0:
            yield None
            return
        with SpawnPool(workers) as pool:
            yield pool

    permutation._detector_pool = on_demand  # type: ignore[assignment]
    try:
        yield
    finally:
        permutation._detector_pool = original  # type: ignore[assignment]


@contextlib.contextmanager
def main_thread_parts() -> Iterator[dict[str, float]]:
    """Seconds the pipeline's own thread spends planning batches, in the scorer (which plans
    the next batch as it asks for it: planning's seconds are part of it), handing the
    detectors their jobs (running them, without workers) and writing a batch's records (which
    waits for its detectors), timed by wrapping them."""
    parts = {
        "planning": 0.0,
        "in the scorer (planning included)": 0.0,
        "detectors submitted (inline: run)": 0.0,
        "records (waiting for detectors)": 0.0,
    }
    originals = (
        permutation._plan_batch,
        CachedScorer.score_stream,
        permutation._Finished.write,
        permutation._submit,
    )

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                parts[name] += time.perf_counter() - t0

        return wrapper

    def timed_stream(fn: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
        def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
            stream = fn(*args, **kwargs)
            while True:
                t0 = time.perf_counter()
                try:
                    out = next(stream)
                except StopIteration:
                    return
                finally:
                    parts["in the scorer (planning included)"] += time.perf_counter() - t0
                yield out

        return wrapper

    permutation._plan_batch = timed("planning", originals[0])  # type: ignore[assignment]
    CachedScorer.score_stream = timed_stream(originals[1])  # type: ignore[method-assign]
    permutation._Finished.write = timed(  # type: ignore[method-assign]
        "records (waiting for detectors)", originals[2]
    )
    permutation._submit = timed("detectors submitted (inline: run)", originals[3])  # type: ignore[assignment]
    try:
        yield parts
    finally:
        permutation._plan_batch = originals[0]  # type: ignore[assignment]
        CachedScorer.score_stream = originals[1]  # type: ignore[method-assign]
        permutation._Finished.write = originals[2]  # type: ignore[method-assign]
        permutation._submit = originals[3]  # type: ignore[assignment]


def detectors_alone(
    requests: list[ScoreRequest],
    results: list[ScoreResult],
    items: list[MCQItem],
    config: PermutationConfig,
) -> None:
    """The detectors' cost on their own: Algorithm 2's path here and ms an item, inline."""
    import sklearn

    t0 = time.perf_counter()
    direct = iforest.available()
    probe = time.perf_counter() - t0
    planned = _plan_batch(items, config)
    assert [(r.prefix, r.continuation) for r in planned.requests] == [
        (r.prefix, r.continuation) for r in requests
    ]
    jobs = [
        (
            p.item,
            Algorithm1(),
            Algorithm2(),
            p.prefix,
            p.orders,
            p.continuations,
            results[p.start : p.start + len(p.continuations)],
        )
        for p in planned.items
    ]
    t0 = time.perf_counter()
    _records_of(jobs)
    per_item = (time.perf_counter() - t0) / max(1, len(jobs))
    print(
        f"detectors: scikit-learn {sklearn.__version__}, Algorithm 2 "
        f"{'direct trees' if direct else 'IsolationForest (the direct path is off here)'} "
        f"(checked in {probe:.2f} s); {1000 * per_item:.2f} ms an item inline "
        f"({len(jobs)} items), os.cpu_count() {os.cpu_count()}",
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
