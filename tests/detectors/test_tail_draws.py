"""Expanded bootstrap intervals at few items draw enough resamples for their ends: at 5 items
the tail is 0.00095, which 2,000 resamples put 2 beyond (a CAP run's lower end moved by 0.02-0.04
between seeds)."""

from __future__ import annotations

import numpy as np

from contamscope.detectors.cap import compare_splits, split_score
from contamscope.detectors.compare_cap import lean_difference
from contamscope.detectors.membership import mann_whitney
from contamscope.detectors.stats import TAIL_DRAWS, expanded_tail, tail_draws
from contamscope.report.cap import mean_ci


def _splits(n: int) -> list[list[float]]:
    rng = np.random.default_rng(5)
    rm, rc, oc = (rng.random(n).round(2) for _ in range(3))
    om = (rng.random(n) * 0.5).round(2)
    return [list(map(float, x)) for x in (rm, rc, om, oc)]


def test_tail_draws_keeps_the_default_where_it_holds_enough_and_caps_memory() -> None:
    assert tail_draws(2000, expanded_tail(30)) == 2000  # 37 beyond each end already
    at5 = tail_draws(2000, expanded_tail(5))
    assert at5 * expanded_tail(5) >= TAIL_DRAWS > 2000 * expanded_tail(5)
    assert tail_draws(2000, expanded_tail(5), items=100_000) == 2000  # never below the asked
    assert tail_draws(2000, expanded_tail(5), items=1005) * 1005 <= 20_000_000


def test_cap_interval_at_five_items_is_stable_across_seeds() -> None:
    rm, rc, om, oc = _splits(5)
    lows, drawn = [], set()
    for seed in range(12):
        c = compare_splits("dev", "test", (rm, rc), (om, oc), split_score(rm, rc),
                           split_score(om, oc), seed=seed)  # fmt: skip
        lows.append(c.ci_low)
        drawn.add((c.n_boot, c.n_drawn))
    assert drawn == {(tail_draws(2000, expanded_tail(5), 10),) * 2}
    assert np.std(lows) < 0.02  # 0.04 with 2,000 resamples


def test_cap_family_note_counts_the_resamples_drawn() -> None:
    # linear scale, a resample with C = 0 has an undefined PCR: the note counts those dropped
    # of the resamples drawn, not of the 2,000 asked
    m, c = [1.0, 1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0]
    r = compare_splits("dev", "test", (m, c), (c, m), split_score(m, c, alpha=0, scale="linear"),
                       split_score(c, m, alpha=0, scale="linear"), alpha=0, scale="linear")  # fmt: skip
    assert r.n_drawn is not None and r.n_drawn > 2000 and r.n_boot < r.n_drawn
    assert f"{r.n_drawn - r.n_boot} of {r.n_drawn} resamples" in r.reasoning


def test_paired_cap_compare_and_report_intervals_draw_more_at_few_items() -> None:
    rm, rc, om, oc = _splits(5)
    r = lean_difference((rm, rc, om, oc), (om, oc, rm, rc))
    assert f"{tail_draws(2000, expanded_tail(5), 10)} paired bootstrap" in r["excess"]["ci_method"]
    lows = [mean_ci([0.1, 0.5, 0.25, 0.9, 0.3], seed=s)[0] for s in range(12)]  # type: ignore[index]
    assert np.std(lows) < 0.01


def test_membership_auc_interval_at_five_items_draws_more() -> None:
    x, y = [3.0, 1.5, 2.2, 0.4, 2.9], list(np.linspace(0.0, 2.5, 20))
    tests = [mann_whitney(x, y, seed=s) for s in range(8)]
    assert {t.n_boot for t in tests} == {tail_draws(2000, expanded_tail(5), 25)}
    assert np.std([t.auc_ci[0] for t in tests]) < 0.02  # type: ignore[index]
