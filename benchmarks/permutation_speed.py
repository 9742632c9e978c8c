"""Speed of permutation scoring: the published reference method vs contamscope's engine.

Scores the same items twice in one process and prints items/s for both, the speedup, the max
absolute difference of the log-probs, and the engine's efficiency: useful FLOPs per second over
this machine's dense matmul FLOP/s (measured here, same dtype), where useful FLOPs =
2 x parameters x (each question once + the nodes of the token prefix tree of its orders), the
issue's count; and over the FLOPs needed, which count the vocabulary head only at positions
that predict a scored token (:func:`useful_flops`).
The peak is read just before and just after each sample's engine timings and the efficiency
taken over their mean; the line also gives the efficiency over each reading alone.

The reference way (the paper's published script): batch size 1, the full sequence for every
order, a float64 log-softmax over the whole vocabulary, and per-token host copies.

    python benchmarks/permutation_speed.py                       # MMLU mix, long passages, CMB
    python benchmarks/permutation_speed.py --items 60 --long-items 10 --cmb-items 6

On a GPU, where no 0.5B-1B checkpoint may be at hand (an offline machine), ``--random-init SHAPE``
builds a model of a published architecture's shape with random weights and the tokenizer from
``--tokenizer DIR``: speed does not depend on the weights' values, and both methods score the same
model, so the log-prob difference is still a real check. Shapes: %s.

    python benchmarks/permutation_speed.py --device cuda --dtype bfloat16 \\
        --random-init llama-1b --tokenizer DIR --items 200 --long-items 30 --cmb-items 20
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
from contamscope.backends.tree_plan import trie_size
from contamscope.data import MCQItem, load_benchmark
from contamscope.perturb import TEMPLATES, option_orders

BENCHDATA = Path(__file__).resolve().parents[1].parent / "shared" / "benchdata"
LONG_SUBJECTS = [
    "high_school_world_history",
    "high_school_european_history",
    "high_school_us_history",
]


# Shapes of published models, with the SmolLM2 tokenizer's vocabulary (49,152) and tied embeddings.
SHAPES: dict[str, dict[str, int]] = {
    # SmolLM2-360M: 362M parameters
    "smollm2-360m": dict(
        hidden_size=960,
        intermediate_size=2560,
        num_hidden_layers=32,
        num_attention_heads=15,
        num_key_value_heads=5,
    ),
    # Qwen2.5-0.5B's layer stack (its own vocabulary is 151k): 0.40B with this vocabulary
    "qwen2.5-0.5b": dict(
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
    ),
    # Llama-3.2-1B's layer stack: 1.07B with this vocabulary
    "llama-1b": dict(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
    ),
}
__doc__ = __doc__ % ", ".join(SHAPES)  # noqa: A001


def random_init_backend(
    shape: str, tokenizer_dir: str, device: str, dtype: str, fuse: str = "auto"
) -> HFBackend:
    """A random-weight model of a published shape (for timing on machines without checkpoints)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from contamscope.backends.hf import resolve_device, resolve_dtype

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    dev = resolve_device(device)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok), max_position_embeddings=8192, tie_word_embeddings=True, **SHAPES[shape]
    )
    with dev:  # initialised where it runs (a 1B model's random init takes a while on a CPU)
        model = LlamaForCausalLM(config).to(dtype=resolve_dtype(dtype, dev))
    return HFBackend(
        model,
        tok,
        spec=f"random:{shape}",
        identity=f"random:{shape}",
        bos="<|endoftext|>",
        fuse=fuse,
    )


def add_model_args(ap: argparse.ArgumentParser, dtype: str = "auto") -> None:
    """The model options the engine benchmarks share."""
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--random-init", choices=sorted(SHAPES), help="random-weight model shape")
    ap.add_argument("--tokenizer", help="tokenizer folder for --random-init")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default=dtype)


def engine_backend(args: argparse.Namespace, dtype: str, fuse: str) -> HFBackend:
    """The model of :func:`add_model_args`' options, in ``dtype``, fused or not."""
    if args.random_init:
        if not args.tokenizer:
            raise SystemExit("--random-init needs --tokenizer DIR")
        return random_init_backend(args.random_init, args.tokenizer, args.device, dtype, fuse)
    loaded = load_backend(args.model, device=args.device, dtype=dtype, options={"fuse": fuse})
    assert isinstance(loaded, HFBackend)
    return loaded


def matmul_peak(dtype: torch.dtype, device: torch.device, seconds: float = 3.0) -> float:
    """Best dense matmul FLOP/s over a few square sizes."""
    best = 0.0
    sizes = (4096, 8192) if device.type == "cuda" else (1024, 2048, 3072)
    for n in sizes:
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
    """The published script's computation: full sequence, float64 softmax, per-token copies
    (the model's own eager code, not the engine's fused kernels)."""
    head, scored = backend.naive_encode(ScoreRequest(prefix, cont))  # (not the engine's split)
    ids = torch.tensor([head + scored], device=backend.device)
    with torch.no_grad(), backend.eager():
        logits = backend.model(ids).logits
        logp = torch.log_softmax(logits.double(), dim=2)
        per_token = [logp[:, k - 1, ids[0, k]] for k in range(1, ids.shape[1])]
        per_token = [x.detach().cpu().numpy()[0] for x in per_token]
    return float(sum(per_token[len(head) - 1 :]))


def requests_for(items: list[MCQItem]) -> list[ScoreRequest]:
    t = TEMPLATES["paper"]
    return [
        ScoreRequest(t.prefix(it), t.continuation(it, o))
        for it in items
        for o in option_orders(it.n_options).orders
    ]


def useful_flops(backend: HFBackend, reqs: list[ScoreRequest]) -> tuple[int, float, float]:
    """The fewest tokens the engine must run for ``reqs`` (each question once plus the nodes of
    its orders' token trie) and their FLOPs two ways: the issue's count, 2 x parameters a
    token; and the work needed, 2 x the parameters outside the embeddings a token plus the
    vocabulary head (2 x its weights) only at positions that predict a scored token (each
    question's last token and the trie's inner nodes). The issue's count includes the head at
    every question token, which no method needs and the engine does not run (7% more than
    needed on long passages, 2% on the MMLU mix; a benchmark review)."""
    model = backend.model
    params = sum(p.numel() for p in model.parameters())  # (tied weights once)
    embed = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    body = params - embed.numel() - (0 if head is embed else head.numel())
    groups: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for e in backend.encode_many(reqs):
        groups.setdefault(tuple(e.prefix), []).append(tuple(e.cont))
    tokens = rows = 0
    for prefix, conts in groups.items():
        tokens += len(prefix) + trie_size(conts)
        rows += len({c[:k] for c in conts for k in range(len(c))})  # () is the question's end
    return tokens, 2.0 * params * tokens, 2.0 * body * tokens + 2.0 * head.numel() * rows


def compare(
    name: str,
    backend: HFBackend,
    items: list[MCQItem],
    repeats: int = 1,
) -> dict[str, float]:
    reqs = requests_for(items)
    t0 = time.perf_counter()
    ref = [reference_logprob(backend, r.prefix, r.continuation) for r in reqs]
    t_ref = time.perf_counter() - t0
    ref_tokens = sum(len(backend.encode(r).prefix) + len(backend.encode(r).cont) for r in reqs)
    times = []
    # the peak is read just before and just after the engine's timings: a shared host's speed
    # drifts by 5-10% over minutes, so one reading at the start is not the engine's peak
    peaks = [matmul_peak(backend.dtype, backend.device)]
    usage = _kernel_usage()
    for _ in range(repeats):  # median of several runs (GPU runs are short)
        backend.tokens_run = backend.tokens_useful = backend.tokens_min = 0
        if backend.device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        got = backend.score(reqs)
        if backend.device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    t_eng = sorted(times)[len(times) // 2]
    system, faults = (b - a for a, b in zip(usage, _kernel_usage()))
    peaks.append(matmul_peak(backend.dtype, backend.device))
    peak = sum(peaks) / 2
    diff = max(abs(a - g.logprob) for a, g in zip(ref, got))
    useful = backend.tokens_min
    tokens, issue_flops, needed_flops = useful_flops(backend, reqs)
    if tokens != useful:
        raise SystemExit(f"{name}: the engine counted {useful} tokens at least, this {tokens}")
    eff = issue_flops / t_eng / peak
    eff_needed = needed_flops / t_eng / peak
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
        "efficiency_needed": eff_needed,
        "peak_before": peaks[0],
        "peak_after": peaks[1],
        "system_s": system / repeats,
        "page_faults": faults / repeats,
    }
    print(
        f"{name:28} items={len(items):3d} ref {row['ref_items_s']:7.3f} items/s | engine "
        f"{row['eng_items_s']:7.3f} items/s | speedup {row['speedup']:5.2f}x "
        f"(prefix-tree token bound {row['token_ratio']:.2f}x; positions run beyond it {100 * row['overhead']:.0f}%) | "
        f"max|diff| {diff:.2e} | efficiency {100 * eff:.0f}% of matmul peak "
        f"(peak {peaks[0] / 1e9:.0f} / {peaks[1] / 1e9:.0f} GFLOP/s just before / after: "
        f"{100 * eff * peak / max(peaks):.0f}-{100 * eff * peak / min(peaks):.0f}%); "
        f"{100 * eff_needed:.0f}% counting the vocabulary head only where a scored token is "
        "predicted | "
        f"engine's system time {row['system_s']:.1f} s, {row['page_faults'] / 1e6:.2f}M page faults",
        flush=True,
    )
    return row


def _kernel_usage() -> tuple[float, int]:
    """(system CPU seconds, minor page faults) of this process so far: time the kernel spent
    for it, e.g. faulting in memory that malloc gave back (docs/performance.md, "Page faults")."""
    try:
        import resource
    except ImportError:  # Windows
        return 0.0, 0
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_stime, r.ru_minflt


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_model_args(ap)
    ap.add_argument("--items", type=int, default=60, help="MMLU items across subjects")
    ap.add_argument("--long-items", type=int, default=10, help="long-passage history items")
    ap.add_argument("--cmb-items", type=int, default=6, help="5-option CMB items (120 orders)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--benchdata", type=Path, default=BENCHDATA, help="folder with mmlu/ and CMB")
    ap.add_argument("--repeats", type=int, default=0, help="engine timings (median); 0: 3 on GPU")
    ap.add_argument(
        "--tree-nodes",
        type=int,
        help="engine subtree size, fixed (default: the backend's; on a CPU 1-4x it by cost)",
    )
    ap.add_argument(
        "--max-batch-tokens", type=int, help="engine batch budget (default: the backend's)"
    )
    ap.add_argument(
        "--fuse",
        choices=("auto", "on", "off"),
        default="auto",
        help="the engine's fused kernels (-M fuse; auto: on CUDA with Triton)",
    )
    args = ap.parse_args()
    if not args.benchdata.is_dir():
        print(f"needs {args.benchdata} (MMLU, CMB files)", file=sys.stderr)
        return 2
    backend = engine_backend(args, args.dtype, args.fuse)
    if args.random_init:
        args.model = f"random-init {args.random_init}"
    if args.tree_nodes:
        backend.max_tree_nodes, backend.key_cost = args.tree_nodes, 0.0
    if args.max_batch_tokens:
        backend.max_batch_tokens = backend.score_batch_tokens = args.max_batch_tokens
        backend.plan_chunk_tokens = 2 * args.max_batch_tokens if backend.plan_chunk_tokens else 0
    repeats = args.repeats or (3 if backend.device.type == "cuda" else 1)
    params = sum(p.numel() for p in backend.model.parameters())
    peak = matmul_peak(backend.dtype, backend.device)
    print(
        f"model {args.model}: {params / 1e6:.1f}M parameters, {backend.dtype}, {backend.device}, "
        f"threads {torch.get_num_threads()}, scoring passes of at most {backend.score_batch_tokens} tokens, "
        f"subtrees of at most {backend.max_tree_nodes} tokens"
        + (" (or 2x, 4x where that costs less)" if getattr(backend, "key_cost", 0) else "")
        + f"; fused kernels: {', '.join(backend.fused) or 'none'}; "
        f"attention {backend.model.config._attn_implementation}, engine {backend.engine}"
    )
    print(
        f"measured dense matmul peak: {peak / 1e9:.1f} GFLOP/s (each sample's efficiency is "
        "over the mean of readings just before and after its engine timings)"
    )
    rng = random.Random(args.seed)
    mmlu = load_benchmark(str(args.benchdata / "mmlu" / "test")).items
    mix = rng.sample(mmlu, args.items)
    longp = rng.sample([it for it in mmlu if it.subject in LONG_SUBJECTS], args.long_items)
    cmb = rng.sample(
        load_benchmark(str(args.benchdata / "cmb_example_1000.json")).items, args.cmb_items
    )
    cmb = [it for it in cmb if it.n_options == 5]
    backend.score(requests_for(mix[:8]))  # warm-up
    if args.items:
        compare("MMLU mix (4 options)", backend, mix, repeats)
    if args.long_items:
        compare("MMLU long passages", backend, longp, repeats)
    if cmb:
        compare("CMB (5 options, 120 orders)", backend, cmb, repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
