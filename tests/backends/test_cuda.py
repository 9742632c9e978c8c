"""CUDA path of the engine (skipped where no GPU is present, as in CI)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine"),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_engine_on_cuda_matches_naive(tiny_model_path, dtype: str) -> None:  # type: ignore[no-untyped-def]
    from contamscope.backends import ScoreRequest
    from contamscope.backends.hf import HFBackend

    backend = HFBackend.from_pretrained(
        str(tiny_model_path),
        spec="tiny",
        identity="tiny",
        device="cuda",
        dtype=dtype,
        options={"bos": "<|endoftext|>"},
    )
    reqs = [
        ScoreRequest("Which one?:\n", c) for c in ("A:x\nB:yy\n", "A:yy\nB:x\n", "A:zzz\nB:x\n")
    ]
    got = backend.score(reqs)
    tol = 1e-3 if dtype == "float32" else 0.5  # bfloat16 hidden states vs float64 reference
    for r, g in zip(reqs, got):
        assert g.logprob == pytest.approx(backend.naive_logprob(r), abs=tol)
