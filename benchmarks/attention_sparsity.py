"""How much of the tree attention an attention kernel that skips masked blocks could leave out.

The engine's subtree passes attend with a dense mask: each row's queries (its subtree's nodes)
against its prefix keys and its own nodes, most of them masked (a node sees its ancestors
only). A block-sparse kernel (FlexAttention, or FlashAttention with block masks) computes only
the (query block x key block) tiles holding an unmasked pair. This script plans MMLU items as
the engine would on a GPU (no model: the tokenizer and the planner alone), counts the padded
positions the passes run, builds every pass's mask and prints, per tile size, the share of
tiles with any unmasked pair: the attention work such a kernel would still do, against the
dense kernel's 100%. On the H100 the masked attention was 22% of the kernel time of a fused
call (docs/performance.md, round 4), so this bounds that step's gain before anyone builds it.

    python benchmarks/attention_sparsity.py --items 400 --tiles 64,128
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from permutation_speed import requests_for  # noqa: E402

from contamscope.backends.tokenizer import load_tokenizer  # noqa: E402
from contamscope.backends.tree_plan import Planner, tree_mask  # noqa: E402
from contamscope.data import load_benchmark  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=400, help="MMLU items, sampled across subjects")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="smollm2", help="whose tokenizer plans (a model spec)")
    ap.add_argument("--max-batch-tokens", type=int, default=131072, help="the GPU budget")
    ap.add_argument("--tree-nodes", type=int, default=1024, help="the GPU subtree size")
    ap.add_argument("--pad", type=float, default=0.5, help="the GPU padding tolerance")
    ap.add_argument("--tiles", default="64,128", help="tile sizes (query = key block)")
    args = ap.parse_args()

    loaded = load_benchmark("mmlu")
    items = random.Random(args.seed).sample(list(loaded.items), args.items)
    tok = load_tokenizer(args.model)
    planner = Planner(
        tokenizer=tok.tokenizer,
        bos_id=tok.bos_id,
        max_length=tok.max_length,
        max_tree_nodes=args.tree_nodes,
        max_batch_tokens=args.max_batch_tokens,
        pad_tolerance=args.pad,
        chunk_tokens=2 * args.max_batch_tokens,
    )
    reqs = requests_for(items)
    tiles = [int(x) for x in args.tiles.split(",")]
    live = dict.fromkeys(tiles, 0)
    total = dict.fromkeys(tiles, 0)
    pairs = allowed = passes = positions = nodes = 0
    for chunk in planner.chunks(reqs):
        for unit in planner.plan([reqs[i] for i in chunk], chunk):
            for b in unit.batches:
                passes += 1
                positions += b.ids.size  # rows x width: what the matrix products run
                nodes += b.nodes  # the subtrees' real tokens
                mask = tree_mask(
                    b,
                    torch.from_numpy(b.spans),
                    torch.from_numpy(b.lengths),
                    torch.from_numpy(b.prefix_lengths),
                )[:, 0]  # [rows, width, prefix width + width]
                pairs += mask.numel()
                allowed += int(mask.sum())
                for t in tiles:
                    q, k = -(-mask.shape[1] // t), -(-mask.shape[2] // t)
                    padded = torch.zeros((mask.shape[0], q * t, k * t), dtype=torch.bool)
                    padded[:, : mask.shape[1], : mask.shape[2]] = mask
                    any_in = padded.view(mask.shape[0], q, t, k, t).any(dim=(2, 4))
                    live[t] += int(any_in.sum())
                    total[t] += any_in.numel()
    print(
        f"{args.items} MMLU items, {len(reqs):,} orders, {passes} subtree passes "
        f"(budget {args.max_batch_tokens:,}, subtrees {args.tree_nodes}, padding {args.pad:g})"
    )
    print(
        f"subtree positions run: {positions:,} for {nodes:,} tokens "
        f"({positions / nodes - 1:.1%} padding)"
    )
    print(f"unmasked (query, key) pairs: {allowed / pairs:.1%} of the dense mask's {pairs:,}")
    for t in tiles:
        print(
            f"tiles of {t} x {t}: {live[t] / total[t]:.1%} hold an unmasked pair "
            f"({live[t]:,} of {total[t]:,}); a block-sparse kernel does that share of the work"
        )


if __name__ == "__main__":
    main()
