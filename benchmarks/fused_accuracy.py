"""How close half-precision scores are to float32 scores of the same weights, with and without
the engine's fused kernels (``-M fuse``).

Scores the same MMLU items (all 24 orders each) three ways: float32 with the eager model (the
yardstick), the half-precision dtype eager, and the half-precision dtype fused; prints each
half-precision way's distance from the yardstick (max, mean and mean relative |difference| of
the per-order log-probs) and how often the two agree on which order of an item is the most
likely (what Algorithm 1 reads). The half-precision weights are the float32 ones rounded.

    python benchmarks/fused_accuracy.py --device cuda --dtype bfloat16 \\
        --random-init llama-1b --tokenizer DIR --items 60
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from permutation_speed import BENCHDATA, add_model_args, engine_backend, requests_for  # noqa: E402

from contamscope.data import load_benchmark  # noqa: E402


def scores(backend: Any, reqs: list[Any]) -> np.ndarray:
    return np.array([r.logprob for r in backend.score(reqs)])


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_args(ap, dtype="bfloat16")
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--benchdata", type=Path, default=BENCHDATA)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    def load(dtype: str, fuse: str) -> Any:
        return engine_backend(args, dtype, fuse)

    mmlu = load_benchmark(str(args.benchdata / "mmlu" / "test")).items
    items = random.Random(args.seed).sample(mmlu, args.items)
    reqs = requests_for(items)
    truth_backend = load("float32", "off")
    truth = scores(truth_backend, reqs)
    device = truth_backend.device
    del truth_backend
    if device.type == "cuda":
        torch.cuda.empty_cache()
    n = len(reqs) // len(items)
    best_truth = truth.reshape(len(items), n).argmax(1)
    print(
        f"{len(items)} MMLU items x {n} orders on {device}; yardstick: float32, eager; "
        f"mean |log-prob| {np.abs(truth).mean():.2f} nats"
    )
    for fuse in ("off", "on"):
        backend = load(args.dtype, fuse)
        got = scores(backend, reqs)
        diff = np.abs(got - truth)
        same_best = (got.reshape(len(items), n).argmax(1) == best_truth).mean()
        print(
            f"{args.dtype:9s} fuse={fuse:3s} (fused: {', '.join(backend.fused) or 'none'}): "
            f"max |diff| {diff.max():.3f}, mean {diff.mean():.4f}, "
            f"mean relative {np.mean(diff / np.abs(truth)):.2e}; "
            f"same most likely order {100 * same_best:.0f}% of items"
        )
        del backend
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
