"""CUDA path of the engine (skipped where no GPU is present, as in CI)."""

from __future__ import annotations

import itertools

import pytest
from half_precision import bf16_tol

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine"),
]


def _on_cuda(path, dtype: str, **options: str):  # type: ignore[no-untyped-def]
    from contamscope.backends.hf import HFBackend

    return HFBackend.from_pretrained(
        str(path),
        spec="tiny",
        identity="tiny",
        device="cuda",
        dtype=dtype,
        options={"bos": "<|endoftext|>", **options},
    )


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_engine_on_cuda_matches_naive(tiny_model_path, dtype: str) -> None:  # type: ignore[no-untyped-def]
    from contamscope.backends import ScoreRequest

    backend = _on_cuda(tiny_model_path, dtype)
    reqs = [
        ScoreRequest("Which one?:\n", c) for c in ("A:x\nB:yy\n", "A:yy\nB:x\n", "A:zzz\nB:x\n")
    ]
    # a second item with 24 orders and a long prefix, planned in several chunks
    long = ScoreRequest("Question: " + "which of these is right? " * 20 + ":\n", "")
    reqs += [
        ScoreRequest(long.prefix, "".join(f"{L}:{w}\n" for L, w in zip("ABCD", o)))
        for o in itertools.permutations(["ant", "bee", "cat", "dog"])
    ]
    backend.plan_chunk_tokens = 64  # several planning units, planned in the planning process
    backend.plan_workers = 1
    got = backend.score(reqs)
    for r, g in zip(reqs, got):
        want = backend.naive_logprob(r)
        assert g.logprob == pytest.approx(want, abs=bf16_tol(want) if dtype != "float32" else 1e-3)
    from contamscope.backends import cuda_kernels

    # the one-pass log-softmax kernel and the fused element-wise kernels (-M fuse=auto) are
    # used wherever Triton is there
    assert (backend._lse_kernel is not None) == cuda_kernels.available()
    assert bool(backend.fused) == cuda_kernels.available()
    eager = _on_cuda(tiny_model_path, dtype, fuse="off")
    assert eager.fused == []
    eager.plan_chunk_tokens, eager.plan_workers = 64, 1
    for g, e in zip(got, eager.score(reqs)):  # (bfloat16: rounded at other steps)
        same = bf16_tol(e.logprob) if dtype != "float32" else 1e-4
        assert g.logprob == pytest.approx(e.logprob, abs=same)


def _check_vocab_moments(backend, tol: float) -> None:  # type: ignore[no-untyped-def]
    """token_stats' vocabulary mean/std against float64 from the backend's own final hidden
    states (so a half-precision model is checked on the head computation, not on its body)."""
    from contamscope.backends import ScoreRequest

    reqs = [
        ScoreRequest("", "Which one of these is the largest planet?"),
        ScoreRequest("Q:", " x y"),
    ]
    for req, st in zip(reqs, backend.token_stats(reqs)):
        e = backend.encode(req)
        ids = torch.tensor([list(e.prefix) + e.cont], device=backend.device)
        with torch.inference_mode():
            hidden = backend._decoder(ids).last_hidden_state[0].double()
            logp = torch.log_softmax(hidden @ backend._head_w.double().T, -1)
        p = len(e.prefix)
        rows = logp[p - 1 : p - 1 + len(e.cont)]
        mean = (rows.exp() * rows).sum(-1)
        std = (rows.exp() * (rows - mean[:, None]) ** 2).sum(-1).sqrt()
        assert list(st.mean_logprob) == pytest.approx(mean.tolist(), abs=tol)
        assert list(st.std_logprob) == pytest.approx(std.tolist(), abs=tol)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_vocab_moments_on_cuda(tiny_model_path, dtype: str) -> None:  # type: ignore[no-untyped-def]
    backend = _on_cuda(tiny_model_path, dtype)
    # bfloat16: the head multiplies the same bf16 operands with float32 sums (only the
    # summation order differs from the float64 reference)
    _check_vocab_moments(backend, 1e-4 if dtype == "float32" else 1e-3)


def test_lse_gather_kernel_matches_float64() -> None:
    from contamscope.backends import cuda_kernels

    if not cuda_kernels.available():
        pytest.skip("Triton is not installed: the engine uses PyTorch's logsumexp")
    gen = torch.Generator(device="cuda").manual_seed(1)
    for rows, vocab in [(1, 7), (300, 49152), (1000, 151_936)]:
        logits = torch.randn((rows, vocab), generator=gen, device="cuda") * 12
        logits[:, 0] += 30  # one dominant entry, as in real next-token distributions
        targets = torch.randint(0, vocab, (rows,), generator=gen, device="cuda")
        want = torch.log_softmax(logits.double(), -1).gather(-1, targets[:, None]).squeeze(-1)
        got = cuda_kernels.lse_gather(logits, targets)
        assert got.dtype == torch.float32
        assert torch.allclose(got.double(), want, atol=1e-4, rtol=0)
        # a strided view (a chunk of a wider buffer) is read correctly too
        wide = torch.zeros((rows, vocab + 5), device="cuda")
        wide[:, :vocab] = logits
        assert torch.allclose(
            cuda_kernels.lse_gather(wide[:, :vocab], targets).double(), want, atol=1e-4
        )


def test_overlapped_calls_on_cuda_give_each_call_its_numbers(tiny_model_path) -> None:  # type: ignore[no-untyped-def]
    """On CUDA, calls are overlapped by default (each started before the last one's read):
    every call's numbers are those of a call of its own, in float32, planned in chunks."""
    from contamscope.backends import ScoreRequest

    backend = _on_cuda(tiny_model_path, "float32")
    assert backend.overlap_calls
    backend.plan_chunk_tokens = 64  # several units a call
    orders = list(itertools.permutations(["ant", "bee", "cat", "dog"]))
    calls = [
        [
            ScoreRequest(
                f"Question {q}: " + "which is right? " * q + ":\n",
                "".join(f"{L}:{w}\n" for L, w in zip("ABCD", o)),
            )
            for o in orders
        ]
        for q in range(1, 6)
    ]
    alone = [backend.score(reqs) for reqs in calls]
    streamed = list(backend.score_stream(iter(calls)))
    assert len(streamed) == len(calls)
    for got, want in zip(streamed, alone):
        assert [g.logprob for g in got] == pytest.approx([w.logprob for w in want], abs=1e-4)


def test_shared_prefix_generation_on_cuda(tiny_model_path) -> None:  # type: ignore[no-untyped-def]
    """Greedy generation over shared prompt prefixes (``hf_decode``) on the GPU, in float32:
    the same generations as transformers' ``model.generate`` on the GPU and as the CPU's
    shared path, in fewer token positions, also under a budget that splits every batch."""
    from contamscope.backends import GenerateRequest
    from contamscope.backends.hf import HFBackend

    passage = (
        "Natalia sold clips to 48 of her friends in April, and then she sold half as many "
        "clips in May. How many clips did Natalia sell altogether in April and May? "
    )
    prompts = [passage[:60], passage[:95], passage, passage + "Answer: 72", "Hi", "下列有关鳃弓"]
    reqs = [GenerateRequest(p, max_new_tokens=6) for p in prompts]
    backend = _on_cuda(tiny_model_path, "float32")
    assert backend.engine == "prefix-tree"
    before = backend.tokens_run
    shared = backend.generate(reqs)
    shared_positions = backend.tokens_run - before
    backend.engine = "full-sequence"
    before = backend.tokens_run
    assert backend.generate(reqs) == shared
    assert shared_positions < backend.tokens_run - before
    backend.engine = "prefix-tree"
    backend.max_batch_tokens = 48
    assert backend.generate(reqs[::-1])[::-1] == shared
    cpu = HFBackend.from_pretrained(
        str(tiny_model_path),
        spec="tiny",
        identity="tiny",
        device="cpu",
        dtype="float32",
        options={"bos": "<|endoftext|>"},
    )
    assert cpu.generate(reqs) == shared
