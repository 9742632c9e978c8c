"""Pipelines: one per method, from loaded items to a run folder (records and summary).

Each ``run_*`` takes the items, a :class:`~contamscope.store.CachedScorer`, a run folder (a
:class:`~contamscope.store.RunDir` or a path) and the method's config, and returns an
:class:`Outcome` (``summary``, ``run_dir``, ``records()``, ``verdict``, ``to_dict()``). A run
resumes from the records its folder holds. docs/python.md shows each method
(README.md, "Quickstart: Python", the permutation test).
"""

from .benbench import (
    BenBenchConfig,
    BenBenchOutcome,
    SplitInput,
    reanalyse_benbench,
    run_benbench,
)
from .benbench_refs import ReferenceSet, inline_reference, pair_reference
from .cap import CapConfig, CapOutcome, check_splits, reanalyse_cap, run_cap
from .compare import compare_runs
from .membership import (
    MembershipConfig,
    MembershipOutcome,
    reanalyse_membership,
    run_membership,
    unseen_references,
)
from .outcome import Outcome
from .permutation import (
    PermutationConfig,
    PermutationOutcome,
    RunOutcome,
    reanalyse_permutation,
    run_benchmark,
    run_permutation,
    select_items,
)
from .survey import survey_permutation

__all__ = [
    "Outcome",
    "PermutationConfig",
    "PermutationOutcome",
    "RunOutcome",
    "run_permutation",
    "reanalyse_permutation",
    "run_benchmark",
    "compare_runs",
    "select_items",
    "survey_permutation",
    "BenBenchConfig",
    "BenBenchOutcome",
    "SplitInput",
    "ReferenceSet",
    "inline_reference",
    "pair_reference",
    "run_benbench",
    "reanalyse_benbench",
    "CapConfig",
    "CapOutcome",
    "check_splits",
    "run_cap",
    "reanalyse_cap",
    "MembershipConfig",
    "MembershipOutcome",
    "run_membership",
    "reanalyse_membership",
    "unseen_references",
]
