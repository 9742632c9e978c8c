"""Speed of permutation scoring: the published reference method vs contamscope's engine.

Scores the same items twice in one process and prints items/s for both, the speedup, the max
absolute difference of the log-probs, and the engine's efficiency: useful FLOPs per second over
this machine's dense matmul FLOP/s (measured here, same dtype), where useful FLOPs =
2 x parameters x (each question once + the nodes of the token prefix tree of its orders).

The reference way (the paper's published script): batch size 1, the full sequence for every
order, a float64 log-softmax over the whole vocabulary, and per-token host copies.

    python benchmarks/permutation_speed.py                       # MMLU mix, long passages, CMB
    python benchmarks/permutation_speed.py --items 60 --long-items 10 --cmb-items 6
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import torch

from contamscope.backends import ScoreRequest, load_backend
from contamscope.backends.hf import HFBackend
from contamscope.data import MCQItem, load_benchmark
from contamscope.perturb import TEMPLATES, option_orders

BENCHDATA = Path(__file__).resolve().parents[1].parent / "shared" / "benchdata"
LONG_SUBJECTS = [
    "high_school_world_history",
    "high_school_european_history",
    "high_school_us_history",
]


def matmul_peak(dtype: torch.dtype, device: torch.device, seconds: float = 3.0) -> float:
    """Best dense matmul FLOP/s over a few square sizes."""
    best = 0.0
    for n in (1024, 2048, 3072):
        a = torch.randn(n, n, dtype=dtype, device=device)
        b = torch.randn(n, n, dtype=dtype, device=device)
        torch.matmul(a, b)
        reps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds / 3:
            torch.matmul(a, b)
            reps += 1
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = max(best, 2 * n**3 * reps / (time.perf_counter() - t0))
    return best


def reference_logprob(backend: HFBackend, prefix: str, cont: str) -> float:
    """The published script's computation: full sequence, float64 softmax, per-token copies."""
    e = backend.encode(ScoreRequest(prefix, cont))
    ids = torch.tensor([list(e.prefix) + e.cont], device=backend.device)
    with torch.no_grad():
        logits = backend.model(ids).logits
        logp = torch.log_softmax(logits.double(), dim=2)
        per_token = [logp[:, k - 1, ids[0, k]] for k in range(1, ids.shape[1])]
        per_token = [x.detach().cpu().numpy()[0] for x in per_token]
    return float(sum(per_token[len(e.prefix) - 1 :]))


def requests_for(items: list[MCQItem]) -> list[ScoreRequest]:
    t = TEMPLATES["paper"]
    return [
        ScoreRequest(t.prefix(it), t.continuation(it, o))
        for it in items
        for o in option_orders(it.n_options).orders
    ]


def compare(
    name: str, backend: HFBackend, items: list[MCQItem], peak: float, params: int
) -> dict[str, float]:
    reqs = requests_for(items)
    t0 = time.perf_counter()
    ref = [reference_logprob(backend, r.prefix, r.continuation) for r in reqs]
    t_ref = time.perf_counter() - t0
    ref_tokens = sum(len(backend.encode(r).prefix) + len(backend.encode(r).cont) for r in reqs)
    backend.tokens_run = backend.tokens_useful = backend.tokens_min = 0
    t0 = time.perf_counter()
    got = backend.score(reqs)
    if backend.device.type == "cuda":
        torch.cuda.synchronize()
    t_eng = time.perf_counter() - t0
    diff = max(abs(a - g.logprob) for a, g in zip(ref, got))
    useful = backend.tokens_min
    eff = 2 * params * useful / t_eng / peak
    row = {
        "items": len(items),
        "orders": len(reqs),
        "ref_items_s": len(items) / t_ref,
        "eng_items_s": len(items) / t_eng,
        "speedup": t_ref / t_eng,
        "token_ratio": ref_tokens / useful,
        "overhead": backend.tokens_run / useful - 1,
        "max_abs_diff": diff,
        "efficiency": eff,
    }
    print(
        f"{name:28} items={len(items):3d} ref {row['ref_items_s']:7.3f} items/s | engine "
        f"{row['eng_items_s']:7.3f} items/s | speedup {row['speedup']:5.2f}x "
        f"(prefix-tree token bound {row['token_ratio']:.2f}x; positions run beyond it {100 * row['overhead']:.0f}%) | "
        f"max|diff| {diff:.2e} | efficiency {100 * eff:.0f}% of matmul peak",
        flush=True,
    )
    return row


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--items", type=int, default=60, help="MMLU items across subjects")
    ap.add_argument("--long-items", type=int, default=10, help="long-passage history items")
    ap.add_argument("--cmb-items", type=int, default=6, help="5-option CMB items (120 orders)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not BENCHDATA.is_dir():
        print("needs ../shared/benchdata (MMLU, CMB files)", file=sys.stderr)
        return 2
    backend = load_backend(args.model, device=args.device, dtype=args.dtype)
    assert isinstance(backend, HFBackend)
    params = sum(p.numel() for p in backend.model.parameters())
    peak = matmul_peak(backend.dtype, backend.device)
    print(
        f"model {args.model}: {params / 1e6:.1f}M parameters, {backend.dtype}, {backend.device}, "
        f"threads {torch.get_num_threads()}, batch budget {backend.max_batch_tokens} tokens"
    )
    print(f"measured dense matmul peak: {peak / 1e9:.1f} GFLOP/s")
    rng = random.Random(args.seed)
    mmlu = load_benchmark(str(BENCHDATA / "mmlu" / "test")).items
    mix = rng.sample(mmlu, args.items)
    longp = rng.sample([it for it in mmlu if it.subject in LONG_SUBJECTS], args.long_items)
    cmb = rng.sample(load_benchmark(str(BENCHDATA / "cmb_example_1000.json")).items, args.cmb_items)
    cmb = [it for it in cmb if it.n_options == 5]
    backend.score(requests_for(mix[:1]))  # warm-up
    if args.items:
        compare("MMLU mix (4 options)", backend, mix, peak, params)
    if args.long_items:
        compare("MMLU long passages", backend, longp, peak, params)
    if cmb:
        compare("CMB (5 options, 120 orders)", backend, cmb, peak, params)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
