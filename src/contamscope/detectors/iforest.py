"""scikit-learn's IsolationForest scores of one item's values, without its per-tree overhead.

Algorithm 2 fits an ``IsolationForest(n_estimators=100, contamination="auto")`` to each item's
``N`` log-probs (24 for MMLU, 120 for CMB). Each of the 100 trees is built from a couple of
dozen values in microseconds, but the estimator around it costs about a millisecond a tree
(cloning, parameter validation, random-state set-up), about 0.1 s an item, which made
Algorithm 2 the slowest part of a permutation run on a GPU (docs/performance.md,
"The pipeline beyond the engine").

:func:`isolation_scores` builds the same trees with scikit-learn's own tree code (the Cython
criterion, random splitter, tree and depth-first builder that ``ExtraTreeRegressor`` uses),
seeded as ``IsolationForest`` seeds them, and scores them as its ``decision_function`` does.
The numbers are the same, not close: this holds for ``N <= 256`` (every tree sees all values)
and ``contamination="auto"`` only. Those classes are scikit-learn internals whose signatures
may change, so :func:`available` checks the result against ``IsolationForest`` itself on probe
inputs once per process; where anything differs or fails, callers use ``IsolationForest``.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["available", "isolation_scores", "sklearn_scores"]

_INT32_MAX = int(np.iinfo(np.int32).max)
MAX_VALUES = 256
"""IsolationForest's default ``max_samples`` ("auto": min(256, N)); above it every tree sees a
random subsample and this module does not apply."""


class _SeedSource:
    """What a tree's splitter draws its own seed from: ``RandomState(seed)`` (one draw, cached
    because every item of a run uses the same 100 seeds)."""

    __slots__ = ("seed",)

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def randint(self, low: int, high: int) -> int:
        return _first_draw(self.seed, low, high)


@functools.cache
def _first_draw(seed: int, low: int, high: int) -> int:
    return int(np.random.RandomState(seed).randint(low, high))


@functools.lru_cache(maxsize=64)
def _tree_seeds(random_state: int, n_estimators: int) -> tuple[int, ...]:
    """Each tree's ``random_state`` as ``IsolationForest.fit`` sets it: the bagging seeds drawn
    from ``RandomState(random_state)``, then one draw from each (``_set_random_states``)."""
    seeds = np.random.RandomState(random_state).randint(_INT32_MAX, size=n_estimators)
    return tuple(int(np.random.RandomState(s).randint(_INT32_MAX)) for s in seeds)


@functools.lru_cache(maxsize=64)
def _targets(random_state: int, n: int) -> NDArray[np.float64]:
    """The random regression targets ``IsolationForest.fit`` gives its trees."""
    y = np.random.RandomState(random_state).uniform(size=n)
    return np.ascontiguousarray(y.reshape(-1, 1), dtype=np.float64)


def _average_path_length(n_samples: Any) -> NDArray[np.float64]:
    """IsolationForest's c(n), the same arithmetic as scikit-learn's."""
    n = np.asarray(n_samples, dtype=np.float64).reshape(1, -1)
    out = np.zeros(n.shape)
    one, two = n <= 1, n == 2
    rest = ~np.logical_or(one, two)
    out[one] = 0.0
    out[two] = 1.0
    out[rest] = 2.0 * (np.log(n[rest] - 1.0) + np.euler_gamma) - 2.0 * (n[rest] - 1.0) / n[rest]
    return out.reshape(-1)


def isolation_scores(
    values: Any, n_estimators: int = 100, random_state: int = 42
) -> NDArray[np.float64]:
    """``IsolationForest(n_estimators, contamination="auto", random_state).fit(x)
    .decision_function(x)`` for the 1-D ``values`` (at most :data:`MAX_VALUES`), computed
    directly. Check :func:`available` first."""
    from sklearn.tree._criterion import MSE
    from sklearn.tree._splitter import RandomSplitter
    from sklearn.tree._tree import DepthFirstTreeBuilder, Tree

    x = np.ascontiguousarray(np.asarray(values, dtype=np.float32).reshape(-1, 1))
    n = x.shape[0]
    if not 1 <= n <= MAX_VALUES:
        raise ValueError(f"isolation_scores takes 1 to {MAX_VALUES} values, got {n}")
    y = _targets(random_state, n)
    max_depth = int(np.ceil(np.log2(max(n, 2))))
    n_classes = np.array([1], dtype=np.intp)
    depths = np.zeros(n, order="F")
    for seed in _tree_seeds(random_state, n_estimators):
        # ExtraTreeRegressor's defaults: one feature, min_samples_split 2, min_samples_leaf 1,
        # no weights, no monotonic constraints, no impurity threshold
        splitter = RandomSplitter(MSE(1, n), 1, 1, 0.0, _SeedSource(seed), None)
        tree = Tree(1, n_classes, 1)
        DepthFirstTreeBuilder(splitter, 2, 1, 0.0, max_depth, 0.0).build(tree, x, y, None, None)
        leaves = tree.apply(x)
        depths += (
            tree.compute_node_depths()[leaves]
            + _average_path_length(tree.n_node_samples)[leaves]
            - 1.0
        )
    denominator = n_estimators * _average_path_length([n])
    scores = 2 ** (
        -np.divide(depths, denominator, out=np.ones_like(depths), where=denominator != 0)
    )
    return -scores - (-0.5)  # score_samples minus the "auto" offset


def sklearn_scores(
    values: Any,
    n_estimators: int = 100,
    random_state: int = 42,
    contamination: float | str = "auto",
) -> NDArray[np.float64]:
    """The same scores from ``sklearn.ensemble.IsolationForest`` itself."""
    from sklearn.ensemble import IsolationForest  # (1.4 s to import: only when used)

    x = np.asarray(values, dtype=np.float64).reshape(-1, 1)
    forest = IsolationForest(
        n_estimators=n_estimators, contamination=contamination, random_state=random_state
    )
    return np.asarray(forest.fit(x).decision_function(x), dtype=np.float64)


_PROBES = (
    [
        -512.25,
        -507.5,
        -515.0,
        -509.75,
        -520.5,
        -498.0,
        -511.0,
        -513.25,
        -506.5,
        -517.75,
        -510.0,
        -508.25,
        -519.0,
        -514.5,
        -505.75,
        -516.25,
        -512.0,
        -509.0,
        -521.25,
        -507.0,
        -511.5,
        -515.5,
        -518.0,
        -504.25,
    ],
    [-3.0, -3.0, -2.5, -3.0, -7.0, -2.5],  # ties
    [-1.0, -1.0],  # one constant node
    [-float(v) for v in np.linspace(20.0, 140.0, 120) ** 1.01],  # 120 values (CMB)
)


@functools.cache
def available() -> bool:
    """Whether :func:`isolation_scores` runs here and gives exactly ``IsolationForest``'s
    scores on the probe inputs (checked once per process, about 0.5 s)."""
    try:
        return all(np.array_equal(isolation_scores(p), sklearn_scores(p)) for p in _PROBES)
    except Exception:  # noqa: BLE001 (another scikit-learn's internals: use the estimator)
        return False
