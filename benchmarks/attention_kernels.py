"""The engine's tree attention, kernel by kernel, on a GPU: dense masked SDPA against
FlexAttention's block-sparse kernel, on the masks of real subtree passes.

Plans MMLU items as the engine does on a GPU (the tokenizer and the planner, no model), takes
the widest subtree passes of that plan, and times one attention layer of the random 1B Llama
shape (32 query heads, 8 key/value heads of 64) on each pass's real mask, several ways:

* ``sdpa``: what the engine runs now (transformers' SDPA path with a mask: keys and values
  repeated to every query head, an additive bfloat16 mask, cuDNN's or the efficient kernel);
* ``flex-dense``: FlexAttention with a block mask built from the boolean mask, whose partly
  masked blocks read that mask (what a model loaded with transformers' ``flex_attention``
  implementation does with the engine's masks);
* ``flex-tree``: FlexAttention whose mask function computes the tree rule from the pass's
  node spans (:func:`contamscope.backends.tree_plan.tree_mask`'s rule) instead of reading a
  dense mask, with the default and other block sizes.

Each variant's output is checked against ``sdpa`` (max abs difference), and the block mask's
build time is reported apart from the kernel's. Time per layer over the chosen passes, after
compiling each shape (static shapes).

    python benchmarks/attention_kernels.py --tokenizer DIR --benchdata DIR --passes 3
"""

from __future__ import annotations

import argparse
import functools
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from permutation_speed import BENCHDATA, requests_for  # noqa: E402

from contamscope.backends.tree_plan import Planner, tree_mask  # noqa: E402
from contamscope.data import load_benchmark  # noqa: E402

HEADS, KV_HEADS, DIM = 32, 8, 64


def tree_mod(spans: torch.Tensor, lengths: torch.Tensor, prefix_lengths: torch.Tensor, pw: int):  # type: ignore[no-untyped-def]
    """The tree rule as a FlexAttention mask function: a real query sees its row's prefix keys;
    every query sees the nodes ``j <= q < spans[j]`` (its ancestors and itself)."""

    def mod(b: Any, h: Any, q: Any, k: Any) -> Any:
        j = k - pw
        jc = torch.clamp(j, min=0)
        pre = (k < prefix_lengths[b]) & (q < lengths[b])
        tree = (j >= 0) & (jc <= q) & (q < spans[b, jc])
        return pre | tree

    return mod


def dense_mod(mask: torch.Tensor):  # type: ignore[no-untyped-def]
    """A mask function that reads the boolean mask."""

    def mod(b: Any, h: Any, q: Any, k: Any) -> Any:
        return mask[b, 0, q, k]

    return mod


def sdpa_masked(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, additive: torch.Tensor
) -> torch.Tensor:
    """transformers' SDPA path with a mask: keys and values repeated to every query head."""
    rep = q.shape[1] // k.shape[1]
    kk, vv = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    return torch.nn.functional.scaled_dot_product_attention(q, kk, vv, attn_mask=additive)


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn: Any, repeats: int) -> tuple[float, Any]:
    """Seconds per call of ``fn`` (after one untimed call) and its last output."""
    out = fn()
    _sync()
    t0 = time.perf_counter()
    for _ in range(repeats):
        out = fn()
    _sync()
    return (time.perf_counter() - t0) / repeats, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, help="a saved tokenizer folder (SmolLM2's)")
    ap.add_argument("--benchdata", type=Path, default=BENCHDATA)
    ap.add_argument("--items", type=int, default=400)
    ap.add_argument("--passes", type=int, default=3, help="the widest passes of the plan")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--blocks", default="128:128,128:64,64:64", help="flex-tree BLOCK_M:BLOCK_N")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda", help="cpu: a smoke run of the script itself")
    args = ap.parse_args()
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    from transformers import AutoTokenizer

    dev = torch.device(args.device)
    from contamscope.backends.hf import fast_tokenizer

    tok = AutoTokenizer.from_pretrained(args.tokenizer)
    bos = tok.convert_tokens_to_ids("<|endoftext|>")
    mmlu = load_benchmark(str(args.benchdata / "mmlu" / "test")).items
    items = random.Random(args.seed).sample(mmlu, args.items)
    reqs = requests_for(items)
    planner = Planner(
        tokenizer=fast_tokenizer(tok) or tok,
        bos_id=bos,
        max_length=8192,
        max_tree_nodes=1024,
        max_batch_tokens=131072,
        pad_tolerance=0.5,
        chunk_tokens=2 * 131072,
    )
    batches = [
        b
        for chunk in planner.chunks(reqs)
        for unit in planner.plan([reqs[i] for i in chunk], chunk)
        for b in unit.batches
    ]
    batches.sort(key=lambda b: -b.width)
    chosen = batches[: args.passes]
    print(
        f"{args.items} MMLU items: {len(batches)} subtree passes; timing the {len(chosen)} widest "
        f"(rows x width / prefix width: "
        + ", ".join(f"{len(b.slots)}x{b.width}/{b.prefix_width}" for b in chosen)
        + f"); {HEADS} heads, {KV_HEADS} key/value heads of {DIM}, one layer"
    )
    compiled = torch.compile(flex_attention)
    totals: dict[str, float] = {}
    builds: dict[str, float] = {}
    live: dict[str, list[float]] = {}
    worst: dict[str, float] = {}
    gen = torch.Generator(device=dev).manual_seed(0)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    for b in chosen:
        rows, width, pw = len(b.slots), b.width, b.prefix_width
        spans = torch.from_numpy(b.spans).to(dev)
        lengths = torch.from_numpy(b.lengths).to(dev)
        prefix_lengths = torch.from_numpy(b.prefix_lengths).to(dev)
        mask = tree_mask(b, spans, lengths, prefix_lengths)
        q = torch.randn((rows, HEADS, width, DIM), device=dev, dtype=dtype, generator=gen)
        k = torch.randn((rows, KV_HEADS, pw + width, DIM), device=dev, dtype=dtype, generator=gen)
        v = torch.randn_like(k)
        additive = torch.zeros(mask.shape, dtype=dtype, device=dev)
        additive.masked_fill_(~mask, torch.finfo(dtype).min)
        t, ref = timed(functools.partial(sdpa_masked, q, k, v, additive), args.repeats)
        totals["sdpa"] = totals.get("sdpa", 0.0) + t
        variants: dict[str, tuple[Any, dict[str, int] | None]] = {}
        variants["flex-dense"] = (dense_mod(mask), None)
        mod = tree_mod(spans, lengths, prefix_lengths, pw)
        for spec in args.blocks.split(","):
            m, n = (int(x) for x in spec.split(":"))
            variants[f"flex-tree {m}x{n}"] = (mod, {"BLOCK_M": m, "BLOCK_N": n})
        for name, (fn, opts) in variants.items():
            block_size = ((opts or {}).get("BLOCK_M", 128), (opts or {}).get("BLOCK_N", 128))
            t0 = time.perf_counter()
            bm = create_block_mask(
                fn, rows, None, width, pw + width, device=dev, BLOCK_SIZE=block_size
            )
            _sync()
            builds[name] = builds.get(name, 0.0) + time.perf_counter() - t0
            live.setdefault(name, []).append(100 - bm.sparsity())
            try:
                call = functools.partial(
                    compiled, q, k, v, block_mask=bm, enable_gqa=True, kernel_options=opts
                )
                t, out = timed(call, args.repeats)
            except Exception as exc:  # noqa: BLE001 (a block size this kernel rejects)
                print(f"  {name}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
                totals[name] = float("nan")
                continue
            totals[name] = totals.get(name, 0.0) + t
            worst[name] = max(worst.get(name, 0.0), float((out.float() - ref.float()).abs().max()))
        print(f"  pass {rows}x{width}/{pw} done", flush=True)
    base = totals["sdpa"]
    print(
        "variant | ms per layer over these passes | vs sdpa | blocks computed (% per pass) | "
        "block-mask build (ms, once a pass) | max |diff| from sdpa"
    )
    for name, t in totals.items():
        shares = "/".join(f"{x:.0f}" for x in live.get(name, [])) or "100"
        off = worst.get(name, 0.0)
        flag = " (wrong output: not a valid timing)" if off > 0.05 else ""
        print(
            f"{name} | {1e3 * t:.2f} | {t / base:.2f}x | {shares} | "
            f"{1e3 * builds.get(name, 0.0):.1f} | {off:.2e}{flag}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
