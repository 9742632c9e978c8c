"""Triton kernels of the CUDA path (used when Triton is importable; never on the CPU).

:func:`lse_gather` replaces ``logits.gather(targets) - logsumexp(logits)`` over float32
vocabulary logits. PyTorch's ``logsumexp`` makes several passes over its input (maximum,
subtraction, exponent, sum) with full-size temporaries; this kernel reads each row once, keeping
a running maximum and a rescaled running sum in float32 (the "online" log-sum-exp), and reads the
target's logit from the same row. The numbers are the same to float32 rounding
(:func:`check_lse_gather` compares it against PyTorch before it is used).
"""

from __future__ import annotations

from typing import Any

try:  # Triton ships with CUDA builds of PyTorch only
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - CPU installs
    triton = None

__all__ = ["lse_gather", "check_lse_gather", "available"]

_BLOCK = 2048


def available() -> bool:
    """Whether the Triton kernels can be used (Triton imported)."""
    return triton is not None


if triton is not None:

    @triton.jit  # type: ignore[misc]
    def _lse_gather_kernel(logits, stride, targets, out, vocab, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        row = tl.program_id(0)
        base = logits + row.to(tl.int64) * stride
        m = tl.full((), float("-inf"), tl.float32)
        s = tl.full((), 0.0, tl.float32)
        for start in range(0, vocab, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            x = tl.load(base + offs, mask=offs < vocab, other=float("-inf")).to(tl.float32)
            new_m = tl.maximum(m, tl.max(x, 0))
            s = s * tl.exp(m - new_m) + tl.sum(tl.exp(x - new_m), 0)
            m = new_m
        target = tl.load(targets + row)
        picked = tl.load(base + target).to(tl.float32)
        tl.store(out + row, picked - (m + tl.log(s)))


def lse_gather(logits: Any, targets: Any) -> Any:
    """log-softmax of ``logits`` [rows, vocab] (float32, CUDA) at ``targets`` [rows], float32."""
    import torch

    if logits.stride(1) != 1:
        logits = logits.contiguous()
    out = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
    if logits.shape[0]:
        _lse_gather_kernel[(logits.shape[0],)](
            logits, logits.stride(0), targets, out, logits.shape[1], BLOCK=_BLOCK, num_warps=8
        )
    return out


def check_lse_gather(device: Any, vocab: int) -> bool:
    """Run :func:`lse_gather` on random logits of this vocabulary size and compare it with
    PyTorch's float32 computation (1e-4): the engine uses it only when this holds."""
    import torch

    if not available():
        return False
    gen = torch.Generator(device=device).manual_seed(0)
    logits = torch.randn((67, vocab), generator=gen, device=device) * 8
    targets = torch.randint(0, vocab, (67,), generator=gen, device=device)
    want = logits.gather(-1, targets[:, None]).squeeze(-1) - torch.logsumexp(logits, -1)
    try:
        got = lse_gather(logits, targets)
    except Exception:  # a Triton/driver problem: fall back to PyTorch
        return False
    return bool(torch.allclose(got, want, atol=1e-4, rtol=0))
