"""Tolerance for comparing bfloat16 log-probs (the CUDA tests)."""

from __future__ import annotations


def bf16_tol(want: float) -> float:
    """How far a bfloat16 log-prob may be from another computation's: bfloat16 keeps 8
    significant bits, so a sum's rounding grows with its size (the tiny random models' texts
    score -500 to -1,100 nats). On SmolLM2, bfloat16 log-probs are 0.34% of their size from
    float32's on average (12 MMLU items; benchmarks/fused_accuracy.py)."""
    return max(0.5, 2e-3 * abs(want))
