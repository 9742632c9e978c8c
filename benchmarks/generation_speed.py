"""Speed of greedy generation on prompts that share prefixes, as BenBench's lenient criteria ask.

BenBench's lenient n-gram criteria generate n tokens from k starting points of each text: the k
prompts of a text are prefixes of one another. contamscope's transformers backend runs the
longest once and each shorter prompt's last token over its cache (``hf_decode``); the other
path, kept for models the prefix-tree engine cannot run, is transformers' ``model.generate`` on
left-padded, length-bucketed batches. Both run here on the same requests, one process, in
turn; the script prints the time and the token positions run by each, the speedup, and
whether every generation is identical.

    python benchmarks/generation_speed.py                 # 12 GSM8K test items, n = k = 5
    python benchmarks/generation_speed.py --items 40 --model hf:./my-model --device cuda
"""

from __future__ import annotations

import sys
import time

from ngram_speed import gsm8k_arguments  # (this folder: the script's own)

from contamscope.backends import GenerateRequest, load_backend
from contamscope.data.qa import load_qa
from contamscope.detectors.benbench import starting_points


def run(backend, requests: list[GenerateRequest], engine: str) -> tuple[float, int, list]:  # type: ignore[no-untyped-def,type-arg]
    old, backend.engine = backend.engine, engine
    try:
        before = backend.tokens_run
        t0 = time.perf_counter()
        out = backend.generate(requests)
        return time.perf_counter() - t0, backend.tokens_run - before, out
    finally:
        backend.engine = old


def main() -> int:
    args = gsm8k_arguments(__doc__, items=12)
    if args is None:
        return 2
    backend = load_backend(args.model, device=args.device, dtype=args.dtype)
    if backend.engine != "prefix-tree":
        print(f"{backend.spec}: the prefix-tree engine cannot run this model", file=sys.stderr)
        return 2
    tok = backend.tokenizer
    requests = []
    for it in load_qa(args.data).items[: args.items]:
        ids = tok(f"{it.question} {it.answer}", add_special_tokens=False)["input_ids"]
        for s in starting_points(len(ids), n=args.n, k=args.k):
            requests.append(GenerateRequest(tok.decode(ids[:s]), max_new_tokens=args.n))
    print(
        f"model {backend.spec} on {backend.device}, {args.items} GSM8K items, "
        f"{len(requests)} prompts (k={args.k} starting points each), {args.n} tokens generated"
    )
    run(backend, requests[:2], "prefix-tree")  # warm-up, both ways
    run(backend, requests[:2], "full-sequence")
    t_ref, n_ref, ref = run(backend, requests, "full-sequence")
    t_new, n_new, new = run(backend, requests, "prefix-tree")
    same = sum(a == b for a, b in zip(ref, new))
    print(f"model.generate (each prompt whole):  {t_ref:7.2f} s  {n_ref:7d} token positions run")
    print(f"shared prompt prefixes (hf_decode):  {t_new:7.2f} s  {n_new:7d} token positions run")
    print(f"speedup {t_ref / t_new:.2f}x, {n_ref / n_new:.2f}x fewer positions")
    print(
        f"generations identical: {same}/{len(requests)}"
        + ("" if same == len(requests) else " (DIFFERENT: greedy near-ties in float rounding?)")
    )
    return 0 if same == len(requests) else 1


if __name__ == "__main__":
    sys.exit(main())
