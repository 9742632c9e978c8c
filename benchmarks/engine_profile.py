"""Where the scoring engine's time goes: host preparation, device work, and the top kernels.

Scores the same MMLU items with :class:`~contamscope.backends.hf.HFBackend` several ways in one
process and prints, per variant (scoring-pass budget, subtree size):

* wall time per call (median of ``--repeats``), items/s and efficiency (useful FLOP/s over the
  dense matmul peak read just before and after the timed calls, as in ``permutation_speed.py``);
* a synchronised breakdown: tokenisation, trie building, prefix runs, subtree runs (each timed
  with the device synchronised around it, so the parts add up to device + host time);
* with ``--kernels``, the top device kernels by time (torch.profiler) for one call.

    python benchmarks/engine_profile.py --device cuda --dtype bfloat16 --random-init llama-1b \\
        --tokenizer DIR --items 200 --variants 65536:256,131072:256 --kernels
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from permutation_speed import (  # noqa: E402
    BENCHDATA,
    add_model_args,
    engine_backend,
    matmul_peak,
    requests_for,
    useful_flops,
)

from contamscope.backends import tree_plan  # noqa: E402
from contamscope.backends.hf import HFBackend  # noqa: E402
from contamscope.data import load_benchmark  # noqa: E402


def _sync(backend: HFBackend) -> None:
    if backend.device.type == "cuda":
        torch.cuda.synchronize()


@contextmanager
def breakdown(backend: HFBackend, totals: dict[str, float]) -> Iterator[None]:
    """Time the engine's phases with the device synchronised around each (patched in place)."""
    patched: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, label: str) -> None:
        orig = getattr(owner, name)

        def timed(*a: Any, **kw: Any) -> Any:
            _sync(backend)
            t0 = time.perf_counter()
            out = orig(*a, **kw)
            _sync(backend)
            totals[label] += time.perf_counter() - t0
            return out

        patched.append((owner, name, orig))
        setattr(owner, name, timed)

    wrap(tree_plan.Planner, "encode", "tokenise")
    wrap(tree_plan, "build_trees", "tries")
    wrap(tree_plan, "prepare_batch", "batch arrays")
    wrap(backend, "_hold_prefixes", "prefixes")
    wrap(backend, "_run_batch", "subtrees")
    workers, backend.plan_workers = backend.plan_workers, 0  # one process, in order
    try:
        yield
    finally:
        backend.plan_workers = workers
        for owner, name, orig in reversed(patched):
            setattr(owner, name, orig)


def timed_calls(fn: Callable[[], Any], backend: HFBackend, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        _sync(backend)
        t0 = time.perf_counter()
        fn()
        _sync(backend)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_args(ap)
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--subjects", default="", help="comma list: only these MMLU subjects")
    ap.add_argument("--benchdata", type=Path, default=BENCHDATA)
    ap.add_argument(
        "--variants",
        default="",
        help="BUDGET:TREE_NODES[:PAD[:PLAN_WORKERS[:PLAN_CHUNK_TOKENS]]],... (default: as "
        "loaded; planning chunks of 2 x BUDGET on a GPU)",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kernels", action="store_true", help="top kernels by device time")
    ap.add_argument(
        "--sync-sites",
        action="store_true",
        help="list the code where the host waits for the device, with counts (one call, CUDA)",
    )
    ap.add_argument("--trace", type=Path, help="write a gzipped Chrome trace of one call (CUDA)")
    ap.add_argument(
        "--fuse",
        choices=("auto", "on", "off"),
        default="auto",
        help="the engine's fused kernels (-M fuse; auto: on CUDA with Triton)",
    )
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    t0 = time.perf_counter()
    backend = engine_backend(args, args.dtype, args.fuse)
    params = sum(p.numel() for p in backend.model.parameters())
    peak = matmul_peak(backend.dtype, backend.device)
    print(
        f"{params / 1e6:.0f}M parameters, {backend.dtype}, {backend.device}, "
        f"matmul peak {peak / 1e12:.2f} TFLOP/s, threads {torch.get_num_threads()}; "
        f"loaded in {time.perf_counter() - t0:.1f}s; fused kernels: {', '.join(backend.fused) or 'none'}; "
        f"attention {backend.model.config._attn_implementation}, engine {backend.engine}"
    )
    mmlu = load_benchmark(str(args.benchdata / "mmlu" / "test")).items
    if args.subjects:
        keep = set(args.subjects.split(","))
        mmlu = [it for it in mmlu if it.subject in keep]
    items = random.Random(args.seed).sample(mmlu, min(args.items, len(mmlu)))
    reqs = requests_for(items)
    tokens, issue_flops, needed_flops = useful_flops(backend, reqs)  # (see permutation_speed)
    variants = [
        tuple(float(x) for x in v.split(":")) for v in args.variants.split(",") if v.strip()
    ] or [(backend.score_batch_tokens, backend.max_tree_nodes, backend.pad_tolerance)]

    def apply(variant: tuple[float, ...]) -> None:
        backend.score_batch_tokens, backend.max_tree_nodes = int(variant[0]), int(variant[1])
        if len(variant) > 2:
            backend.pad_tolerance = variant[2]
        if len(variant) > 3:
            backend.plan_workers = int(variant[3])
        if len(variant) > 4:
            backend.plan_chunk_tokens = int(variant[4])
        elif backend.plan_chunk_tokens:
            backend.plan_chunk_tokens = 2 * backend.score_batch_tokens

    for variant in variants:
        apply(variant)
        budget, nodes = backend.score_batch_tokens, backend.max_tree_nodes
        # warm-up: one whole untimed call (on the H200 a warm-up of 16 items left the first
        # variant of a run 10-20% slower than the same settings run second, whichever they were)
        t0 = time.perf_counter()
        backend.score(reqs)
        _sync(backend)
        print(f"  warm-up call {time.perf_counter() - t0:.1f}s (compiling, where fused)")
        backend.tokens_run = backend.tokens_useful = backend.tokens_min = 0
        before = matmul_peak(backend.dtype, backend.device)  # (the host's speed drifts)
        wall = timed_calls(lambda: backend.score(reqs), backend, args.repeats)
        peak = (before + matmul_peak(backend.dtype, backend.device)) / 2
        if backend.tokens_min != tokens * args.repeats:
            raise SystemExit(
                f"the engine counted {backend.tokens_min} tokens at least, not {tokens}"
            )
        over = backend.tokens_run / max(backend.tokens_min, 1) - 1
        eff, eff_needed = issue_flops / wall / peak, needed_flops / wall / peak
        totals: dict[str, float] = defaultdict(float)
        with breakdown(backend, totals):
            synced = timed_calls(lambda: backend.score(reqs), backend, 1)
        parts = ", ".join(f"{k} {v:.3f}s" for k, v in totals.items())
        rest = synced - sum(totals.values())
        print(
            f"budget {budget:6d} nodes {nodes:4d}{'x1-4' if getattr(backend, 'key_cost', 0) else ''} pad {backend.pad_tolerance:g} planning "
            f"processes {backend.plan_workers} chunks {backend.plan_chunk_tokens}: {wall:.3f}s/call, {len(items) / wall:.1f} items/s,"
            f" efficiency {100 * eff:.1f}% ({100 * eff_needed:.1f}% of the FLOPs needed; peak {peak / 1e9:.0f} GFLOP/s around it), beyond bound {100 * over:.0f}% | synchronised "
            f"{synced:.3f}s: {parts}, other {rest:.3f}s",
            flush=True,
        )
    if backend.device.type != "cuda":
        return 0
    apply(variants[0])  # the diagnostics below run the first variant
    if args.sync_sites:
        print_sync_sites(lambda: backend.score(reqs))
    if args.kernels or args.trace:
        profiled(lambda: backend.score(reqs), args.trace)
    return 0


def print_sync_sites(fn: Callable[[], Any]) -> None:
    """Run ``fn`` with PyTorch's synchronisation debug mode and print where the host waited
    for the device: the innermost frames of this project and transformers, with counts."""
    import traceback
    import warnings
    from collections import Counter

    sites: Counter[str] = Counter()

    def record(*_: Any, **__: Any) -> None:
        frames = [
            f
            for f in traceback.extract_stack()[:-1]
            if "contamscope" in f.filename or "transformers" in f.filename
        ]
        sites[
            " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames[-4:][::-1])
        ] += 1

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    print(f"host waited for the device {sum(sites.values())} times in one call:")
    for site, count in sites.most_common(15):
        print(f"  {count:6d}  {site}")


def profiled(fn: Callable[[], Any], trace: Path | None) -> None:
    """One call of ``fn`` under torch.profiler: the top kernels by device time, the top host
    operations (CUDA runtime calls included) by their own time, and how long the device was
    busy; with ``trace``, a gzipped Chrome trace there."""
    import gzip
    import shutil

    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    table = prof.key_averages()
    print(table.table(sort_by="cuda_time_total", row_limit=20, max_name_column_width=60))
    print(table.table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=60))
    busy = sum(e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA)
    print(
        f"device busy {busy / 1e6:.3f}s of a {wall:.3f}s profiled call ({100 * busy / 1e6 / wall:.0f}%)"
    )
    if trace:
        raw = trace.with_suffix("")
        prof.export_chrome_trace(str(raw))
        with raw.open("rb") as src, gzip.open(trace, "wb") as dst:
            shutil.copyfileobj(src, dst)
        raw.unlink()
        print(f"trace: {trace} ({trace.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    raise SystemExit(main())
