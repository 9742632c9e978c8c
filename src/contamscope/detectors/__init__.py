"""contamscope.detectors: pure functions over stored scores (no model, no torch).

Permutation method (Ni et al., AAAI 2025): the paper's :class:`Algorithm1` and :class:`Algorithm2`
side by side with calibrated statistics (:func:`rank_p_value`, :func:`gap`); :func:`score_item`
runs them all on one item and :func:`summarize` tests a whole dataset.
"""

from contamscope.detectors.permutation import (
    Alg1Result,
    Alg2Result,
    Algorithm1,
    Algorithm2,
    PermutationItemScore,
    default_deltas,
    delta_key,
    gap,
    gap_values,
    item_score_from_dict,
    rank_p_value,
    rethreshold,
    score_item,
)
from contamscope.detectors.stats import (
    UNANCHORED_NULL_NOTE,
    Alg1Summary,
    Alg2DeltaSummary,
    GapTest,
    PermutationSummary,
    RankSummary,
    exact_interval,
    poisson_binomial_sf,
    summarize,
    wilson_interval,
)

__all__ = [
    "UNANCHORED_NULL_NOTE",
    "Alg1Result",
    "Alg1Summary",
    "Alg2DeltaSummary",
    "Alg2Result",
    "Algorithm1",
    "Algorithm2",
    "GapTest",
    "PermutationItemScore",
    "PermutationSummary",
    "RankSummary",
    "default_deltas",
    "delta_key",
    "gap",
    "gap_values",
    "item_score_from_dict",
    "poisson_binomial_sf",
    "rank_p_value",
    "rethreshold",
    "score_item",
    "summarize",
    "exact_interval",
    "wilson_interval",
]
