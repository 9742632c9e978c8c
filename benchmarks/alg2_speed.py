"""Algorithm 2's IsolationForest, the estimator against the same trees built directly.

Side by side in one process (detectors/iforest.py):

1. per item: ``IsolationForest(n_estimators=100, contamination="auto", random_state=42)``
   fitted and scored as the paper's code does, against :func:`iforest.isolation_scores`, on
   log-prob vectors of MMLU's shape (24 orders) and CMB's (120); ms an item for each, the
   speed-up, and how many items' scores are identical (all must be);
2. the permutation pipeline's own work: ``run_permutation`` on sampled MMLU items with a
   backend that returns scores instantly (so only the pipeline is timed: orders, detectors,
   records), detectors inline, with the estimator and with the direct path.

    python benchmarks/alg2_speed.py --items 200 --pipeline-items 128
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from permutation_speed import BENCHDATA  # noqa: E402

from contamscope.backends.base import Backend, Capabilities, ScoreRequest, ScoreResult  # noqa: E402
from contamscope.data import load_benchmark  # noqa: E402
from contamscope.detectors import iforest  # noqa: E402
from contamscope.pipeline import PermutationConfig, run_permutation, select_items  # noqa: E402
from contamscope.store import CachedScorer  # noqa: E402


class InstantBackend(Backend):
    """Log-probs from a hash of each text, at no cost: times the pipeline around the model."""

    spec = "instant"
    capabilities = Capabilities(prompt_logprobs=True)

    def fingerprint(self) -> str:
        return "instant-v1"

    def score(self, requests: Sequence[ScoreRequest], progress=None) -> list[ScoreResult]:  # type: ignore[no-untyped-def]
        out = [
            ScoreResult(-(zlib.crc32((r.prefix + r.continuation).encode()) % 10_000) / 100.0, 40)
            for r in requests
        ]
        if progress is not None:
            progress(len(requests))
        return out


def per_item(n_values: int, items: int, rng: np.random.Generator) -> None:
    vectors = [rng.normal(-500.0, 6.0, size=n_values) for _ in range(items)]
    t0 = time.perf_counter()
    slow = [iforest.sklearn_scores(v) for v in vectors]
    t_slow = time.perf_counter() - t0
    t0 = time.perf_counter()
    fast = [iforest.isolation_scores(v) for v in vectors]
    t_fast = time.perf_counter() - t0
    same = sum(np.array_equal(a, b) for a, b in zip(slow, fast))
    print(
        f"{n_values:4d} values, {items} items: IsolationForest {1e3 * t_slow / items:7.1f} ms an "
        f"item, direct {1e3 * t_fast / items:6.2f} ms: {t_slow / t_fast:5.1f}x; identical scores "
        f"in {same} of {items} items",
        flush=True,
    )


def _never() -> bool:
    return False


def pipeline(benchdata: Path, n: int) -> None:
    loaded = load_benchmark(str(benchdata / "mmlu" / "test"))
    items = select_items(loaded.items, sample=n, seed=0)
    config = PermutationConfig(template="paper", detector_workers=0)
    times = {}
    saved = iforest.available
    # untimed: a first run builds the benchmark's label-convention table and stores it in the
    # user cache, which every later run reads; timed inside the first variant, it was charged
    # to IsolationForest alone (32x cold against 12x warm on one host; benchmark QA)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run_permutation(loaded, items[:2], CachedScorer(InstantBackend(), None), Path(tmp), config)
        warm = time.perf_counter() - t0
    for name, check in (("IsolationForest", _never), ("direct", saved)):
        iforest.available = check  # type: ignore[assignment]
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            run_permutation(loaded, items, CachedScorer(InstantBackend(), None), Path(tmp), config)
            times[name] = time.perf_counter() - t0
    iforest.available = saved  # type: ignore[assignment]
    slow, fast = times["IsolationForest"], times["direct"]
    print(
        f"pipeline with instant scores, {n} MMLU items, detectors inline: IsolationForest "
        f"{slow:.2f} s ({1e3 * slow / n:.1f} ms an item), direct {fast:.2f} s "
        f"({1e3 * fast / n:.1f} ms an item): {slow / fast:.1f}x (both after an untimed "
        f"2-item run, {warm:.2f} s, that built or read the label-convention table)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=200, help="items per vector size")
    ap.add_argument("--pipeline-items", type=int, default=128, help="0: skip the pipeline")
    ap.add_argument("--benchdata", type=Path, default=BENCHDATA)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not iforest.available():
        raise SystemExit("the direct path does not reproduce this scikit-learn's scores here")
    rng = np.random.default_rng(args.seed)
    for n_values in (24, 120):
        per_item(n_values, args.items, rng)
    if args.pipeline_items:
        if not (args.benchdata / "mmlu").is_dir():
            raise SystemExit(f"--benchdata {args.benchdata}: no mmlu/ folder there")
        pipeline(args.benchdata, args.pipeline_items)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
