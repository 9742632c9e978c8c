"""Pipelines: one per method, from loaded items to run records."""

from .permutation import PermutationConfig, RunOutcome, run_permutation, select_items

__all__ = ["PermutationConfig", "RunOutcome", "run_permutation", "select_items"]
