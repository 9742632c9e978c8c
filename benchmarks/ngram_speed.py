"""Speed of BenBench exact-match n-gram accuracy: the published way vs contamscope, one process.

The published way (GAIR-NLP/benbench ``calculate_n_gram_accuracy``): tokenise question + " " +
answer, and at each of k starting points turn the token prefix back into a string, re-tokenise
it, and call ``model.generate(max_new_tokens=n)`` greedily, one call per starting point.

contamscope: one teacher-forced forward pass per text (``token_stats``, batched); an n-gram is
predicted exactly iff the argmax at each of its n positions is the true next token.

Both see the same model input (the backend's BOS token, then the text tokens); the script prints
both throughputs, the speedup and whether the exact-match decisions agree.

    python benchmarks/ngram_speed.py                  # 20 GSM8K test items, n = k = 5
    python benchmarks/ngram_speed.py --items 50 --model hf:./my-model --device cuda
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from contamscope.backends import ScoreRequest, load_backend
from contamscope.data.qa import load_qa
from contamscope.detectors.benbench import first_mismatch, starting_points

BENCHDATA = Path(__file__).resolve().parents[1].parent / "shared" / "benchdata"


def published_way(backend, texts: list[str], n: int, k: int) -> list[list[bool]]:  # type: ignore[no-untyped-def]
    tok, model = backend.tokenizer, backend.model
    bos = [backend.bos_id] if backend.bos_id is not None else []
    out = []
    for text in texts:
        tokens = tok.tokenize(text)
        decisions = []
        for s in starting_points(len(tokens), n=n, k=k):
            prompt = tok.convert_tokens_to_string(tokens[:s])
            ids = bos + tok(prompt, add_special_tokens=False)["input_ids"]
            with torch.inference_mode():
                gens = model.generate(
                    input_ids=torch.tensor([ids], device=backend.device),
                    attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=backend.device),
                    max_new_tokens=n,
                    do_sample=False,
                    pad_token_id=tok.eos_token_id,
                )
            predicted = gens[0, -n:].tolist()
            original = tok.convert_tokens_to_ids(tokens[s : s + n])
            decisions.append(predicted == original)
        out.append(decisions)
    return out


def contamscope_way(backend, texts: list[str], n: int, k: int) -> list[list[bool]]:  # type: ignore[no-untyped-def]
    stats = backend.token_stats([ScoreRequest("", t) for t in texts])
    return [
        [
            first_mismatch(st.tokens, st.greedy, s, n) is None
            for s in starting_points(len(st.tokens), n=n, k=k)
        ]
        for st in stats
    ]


def gsm8k_arguments(doc: str | None, items: int) -> argparse.Namespace | None:
    """The command line of a benchmark over GSM8K texts at n and k (also
    ``generation_speed.py``'s); None, said on stderr, where the data file is missing."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--items", type=int, default=items)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--data", default=str(BENCHDATA / "gsm8k" / "test.jsonl"))
    args = ap.parse_args()
    if not Path(args.data).is_file():
        print(f"{args.data}: not found (needs ../shared/benchdata)", file=sys.stderr)
        return None
    return args


def main() -> int:
    args = gsm8k_arguments(__doc__, items=20)
    if args is None:
        return 2
    items = load_qa(args.data).items[: args.items]
    texts = [f"{it.question} {it.answer}" for it in items]
    backend = load_backend(args.model, device=args.device, dtype=args.dtype)
    print(
        f"model {backend.spec} on {backend.device}, {len(texts)} GSM8K items, n={args.n} k={args.k}"
    )
    contamscope_way(backend, texts[:1], args.n, args.k)  # warm-up, both ways
    published_way(backend, texts[:1], args.n, args.k)

    t0 = time.perf_counter()
    ref = published_way(backend, texts, args.n, args.k)
    t_ref = time.perf_counter() - t0
    t0 = time.perf_counter()
    fast = contamscope_way(backend, texts, args.n, args.k)
    t_fast = time.perf_counter() - t0

    points = sum(len(d) for d in ref)
    agree = sum(a == b for r, f in zip(ref, fast) for a, b in zip(r, f))
    same_points = all(len(r) == len(f) for r, f in zip(ref, fast))
    hits_ref = sum(sum(d) for d in ref)
    hits_fast = sum(sum(d) for d in fast)
    print(
        f"published (generate per starting point): {t_ref:7.2f} s  {points / t_ref:8.1f} n-grams/s"
    )
    print(
        f"contamscope (one teacher-forced pass):   {t_fast:7.2f} s  {points / t_fast:8.1f} n-grams/s"
    )
    print(f"speedup {t_ref / t_fast:.1f}x")
    print(
        f"exact-match decisions agree: {agree}/{points} "
        f"({'identical' if agree == points and same_points else 'DIFFERENT'}); "
        f"n-grams predicted: published {hits_ref}, contamscope {hits_fast}"
    )
    return 0 if agree == points and same_points else 1


if __name__ == "__main__":
    sys.exit(main())
