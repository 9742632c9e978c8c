"""Items sharing one option list in one order count as one draw of the published order."""

from __future__ import annotations

import itertools
import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_runner import run_cli

from contamscope.detectors.permutation import Algorithm1, Algorithm2, score_item
from contamscope.detectors.shared import SharedOrders, count_sf, shared_orders
from contamscope.detectors.stats import (
    SHARED_INTERVALS,
    clustered_interval,
    exact_interval,
    summarize,
)
from contamscope.detectors.verdict import shared_text, verdict_p_value
from contamscope.pipeline.compare import compare_runs
from contamscope.pipeline.permutation_summary import subject_p_floor


class _NoForest(Algorithm2):
    """A stand-in outlier score (the forest does not enter these tests): the maximum scores
    -0.3, the rest 0, so every item is Algorithm-2 flagged at -0.2."""

    def outlier_scores(self, logprobs: Any) -> Any:
        lp = np.asarray(logprobs, dtype=np.float64)
        return np.where(lp == lp.max(), -0.3, 0.0)


FOREST = _NoForest()
ORDERS4 = [list(p) for p in itertools.permutations(range(4))]


def _score(lp: Any, n_options: int = 4, **kw: Any) -> Any:
    return score_item(
        lp, n_options=n_options, exhaustive=len(lp) == math.factorial(n_options), alg2=FOREST, **kw
    )


def test_five_items_alike_are_one_draw_not_five() -> None:
    """The robustness QA's case: five items with one option list, which a clean model ranks
    alike, their shared published order happening to be its favourite. Counted as five
    independent draws every test says p < 1e-4; as one draw, each p is exactly 1/24."""
    rng = np.random.default_rng(1)
    base = rng.normal(size=24)
    base[0] = base.max() + 0.5
    rows = base + rng.normal(scale=0.05, size=(5, 24))
    scores = [_score(r) for r in rows]
    before = summarize(scores).to_dict()
    after = summarize(scores, shared=[SharedOrders(tuple(range(5)), rows)]).to_dict()
    for test in ("alg1", "rank", "gap"):
        assert before[test]["p_value"] < 1e-4
        assert after[test]["p_value"] == pytest.approx(1 / 24, abs=1e-12)
    assert before["alg2"]["-0.2"]["anchored_p_value"] < 1e-4
    assert after["alg2"]["-0.2"]["anchored_p_value"] == pytest.approx(1 / 24, abs=1e-12)
    # the counts and rates are the items' own: only the p-values change
    for test in ("alg1", "rank"):
        assert (after[test]["count"], after[test]["rate"]) == (5, 1.0)
    assert after["gap"]["mean"] == before["gap"]["mean"]
    assert after["shared_orders"] | {"null_hypothesis": ""} == {
        "null_hypothesis": "",
        "n_groups": 1,
        "n_items": 5,
        "largest": 5,
        "n_left_out": 0,
        "intervals": SHARED_INTERVALS,
    }
    assert "shared_orders" not in before
    assert shared_text(after).startswith("5 items share one option list in one order")


def _joint_p(
    rows: dict[int, np.ndarray], groups: list[list[int]], stat: Any, observed: float
) -> float:
    """P(stat >= observed) by enumerating every joint relabelling: one column per group
    (the same for its members), one per item sharing nothing."""
    singles = [i for i in rows if not any(i in g for g in groups)]
    units = [[i] for i in singles] + groups
    n = len(next(iter(rows.values())))
    hits = total = 0
    for cols in itertools.product(range(n), repeat=len(units)):
        value = sum(stat(rows[i], c) for unit, c in zip(units, cols, strict=True) for i in unit)
        hits += value >= observed - 1e-9
        total += 1
    return hits / total


@pytest.mark.parametrize("ties", ["not_leaked", "leaked"])
def test_the_grouped_tests_equal_enumeration_of_every_joint_relabelling(ties: str) -> None:
    """3-option items (6 orders): a group of 2, a group of 3 and 2 items sharing nothing, with
    values rounded so that some maxima tie. Each test's p-value equals the share of the 6^4
    joint relabellings whose statistic reaches the observed one."""
    rng = np.random.default_rng(7)
    rows = {i: np.round(rng.normal(size=6), 0) for i in range(7)}
    rows[0][0] = rows[1][0] = 3.0  # the first group's published order on top
    groups = [[0, 1], [2, 3, 4]]
    alg1 = Algorithm1(ties=ties)  # type: ignore[arg-type]
    scores = [_score(rows[i], 3, alg1=alg1) for i in range(7)]
    shared = [SharedOrders(tuple(g), np.array([rows[i] for i in g])) for g in groups]
    got = summarize(scores, alpha=0.2, shared=shared).to_dict()

    def fires1(lp: np.ndarray, c: int) -> float:  # Algorithm 1 with column c as the original
        top = lp == lp.max()
        return float(top[c] and (top.sum() == 1 or ties == "leaked"))

    def rank_hit(lp: np.ndarray, c: int) -> float:
        return float(np.count_nonzero(lp >= lp[c]) / lp.size <= 0.2 + 1e-9)

    def gap(lp: np.ndarray, c: int) -> float:
        return float(lp[c] - (lp.sum() - lp[c]) / (lp.size - 1))

    def anchored(lp: np.ndarray, c: int) -> float:
        return float(lp[c] == lp.max())  # every item is flagged by the stand-in forest

    for test, stat in (("alg1", fires1), ("rank", rank_hit), ("gap", gap)):
        observed = sum(stat(rows[i], 0) for i in rows)
        want = _joint_p(rows, groups, stat, observed)
        assert got[test]["p_value"] == pytest.approx(want, abs=1e-12), test
    observed = sum(anchored(rows[i], 0) for i in rows)
    want = _joint_p(rows, groups, anchored, observed)
    assert got["alg2"]["-0.2"]["anchored_p_value"] == pytest.approx(want, abs=1e-12)


def test_count_sf_is_the_convolution_of_singles_and_groups() -> None:
    single = np.array([0.25, 0.5, 1.0])  # one item always fires
    group = np.array([0.5, 0.0, 0.5])  # a group of two: none or both
    # X = 1 + B(0.25) + B(0.5) + G; P(X >= 3) = P(B1 + B2 + G >= 2)
    want = 0.5 * (0.25 * 0.5) + 0.5 * 1.0
    assert count_sf(3, single, [group]) == pytest.approx(want)
    assert count_sf(1, single, [group]) == 1.0
    assert count_sf(6, single, [group]) == 0.0


def _clean_runs(runs: int) -> Any:
    """Simulated clean runs of 6 lists of 10 items on one answer scale each: each item's
    order log-probs mostly the model's taste for its list's arrangement (rho 0.9); yields
    (the item scores, the lists)."""
    rng = np.random.default_rng(11)
    for _ in range(runs):
        scores, shared = [], []
        for g in range(6):
            rows = math.sqrt(0.9) * rng.normal(size=24) + math.sqrt(0.1) * rng.normal(size=(10, 24))
            shared.append(SharedOrders(tuple(range(10 * g, 10 * g + 10)), rows))
            scores += [_score(r) for r in rows]
        yield scores, shared


def test_groups_that_share_options_calibrate_the_verdict() -> None:
    """Simulated clean runs: 6 groups of 10 items on one answer scale each, each item's ranking
    mostly the model's taste for the arrangement of its group's options (rho 0.9). Counted as
    independent items the verdict says "leakage signal" in far more than 5% of runs; counted
    as one draw per group it stays within 5% (3 standard errors)."""
    runs = 150
    hits = np.zeros(2)
    for scores, shared in _clean_runs(runs):
        before = verdict_p_value(summarize(scores).to_dict())
        after = verdict_p_value(summarize(scores, shared=shared).to_dict())
        hits += [before is not None and before <= 0.05, after is not None and after <= 0.05]
    rates = hits / runs
    assert rates[0] > 0.15
    assert rates[1] <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)


def test_intervals_count_a_shared_list_once() -> None:
    """The same simulated clean runs: each interval should hold its H0 value (Algorithm 1's
    excess 0, the rank-test rate its expected rate, the mean gap 0) in about 95% of them.
    Counted as independent items the rates' Clopper-Pearson intervals miss in 17% of runs
    and the gap's t interval in half; with each list one cluster they miss at most 5% (3
    standard errors)."""
    runs = 150
    miss = np.zeros((2, 3))
    for scores, shared in _clean_runs(runs):
        for j, s in enumerate([summarize(scores), summarize(scores, shared=shared)]):
            assert s.alg1 is not None and s.rank is not None and s.gap is not None
            for col, (ci, h0) in enumerate(
                [(s.alg1.excess_ci, 0.0), (s.rank.rate_ci, s.rank.expected), (s.gap.ci, 0.0)]
            ):
                miss[j, col] += ci is None or not ci[0] <= h0 <= ci[1]
    rates = miss / runs
    assert rates[0, 0] > 0.1 and rates[0, 1] > 0.1 and rates[0, 2] > 0.3
    assert np.all(rates[1] <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs))


def test_clustered_interval_cases() -> None:
    """With every item its own unit it is Clopper-Pearson; one unit is one draw, [0, 1]; with
    nothing flagged each unit counts as one item; a group never narrows the interval."""
    singles = [[i] for i in range(12)]
    flags = [True] * 3 + [False] * 9
    assert clustered_interval(flags, singles) == exact_interval(3, 12)
    assert clustered_interval(flags, [list(range(12))]) == (0.0, 1.0)
    grouped = [[0, 1, 2, 3, 4, 5], *[[i] for i in range(6, 12)]]
    assert clustered_interval([False] * 12, grouped) == (0.0, exact_interval(0, 7)[1])
    lo, hi = clustered_interval(flags, grouped)
    clo, chi = exact_interval(3, 12)
    assert lo < clo and hi > chi


def _rec(i: str, lp: Any, orders: Any = None) -> dict[str, Any]:
    return {"id": i, "orders": orders or ORDERS4[: len(lp)], "logprobs": list(lp)}


def test_which_items_share_an_option_list() -> None:
    lp = np.arange(24.0)
    records = [
        _rec("a", lp),
        _rec("b", lp + 1),
        _rec("c", lp + 2),  # the same options in another order: its own draw
        _rec("d", lp + 3),  # no options known
        {"id": "e", "orders": ORDERS4, "logprobs": None},  # excluded item
        _rec("f", lp * 2, [ORDERS4[0], *ORDERS4[:0:-1]]),  # its orders listed otherwise
    ]
    options = {
        "a": ["Yes", "No", "Maybe", "Never"],
        "b": [" yes", "NO ", "maybe", "never"],
        "c": ["No", "Yes", "Maybe", "Never"],
        "e": ["Yes", "No", "Maybe", "Never"],
        "f": ["yes", "no", "maybe", "never"],
    }
    (group,) = shared_orders(records, options)
    assert group.members == (0, 1, 5) and group.left_out == ()
    # f's orders are listed in another sequence: its row is aligned to a's orders
    f_orders = records[5]["orders"]
    assert group.logprobs[2].tolist() == [2 * lp[f_orders.index(o)] for o in ORDERS4]
    assert group.logprobs[:2].tolist() == [lp.tolist(), (lp + 1).tolist()]


def test_an_item_scored_under_other_sampled_orders_is_left_out() -> None:
    """Monte Carlo orders are drawn per item: an item of a group scored under other orders
    cannot be relabelled with the rest, and is left out of the tests (said so)."""
    six = [list(p) for p in itertools.permutations(range(6))]
    rng = np.random.default_rng(2)
    mine = [six[0], *six[1:30]]
    theirs = [six[0], *six[200:229]]
    records = [_rec("a", rng.normal(size=30), mine), _rec("b", rng.normal(size=30), mine)]
    records.append(_rec("c", rng.normal(size=30), theirs))
    records.append(_rec("d", rng.normal(size=30), theirs))
    opts = {k: list("uvwxyz") for k in "abcd"}
    (group,) = shared_orders(records, opts)
    assert (group.members, group.left_out) == ((0, 1), (2, 3))
    scores = [_score(r["logprobs"], 6) for r in records]
    out = summarize(scores, shared=[group]).to_dict()
    assert out["n_items"] == 2 and out["shared_orders"]["n_left_out"] == 2
    assert "leave out the 2 scored under other sampled orders" in shared_text(out)
    # by subject: a subject's tests read the items not left out, and it says so
    from types import SimpleNamespace

    from contamscope.pipeline.permutation_summary import subject_summary

    recs = [r | score_item(r["logprobs"], n_options=6, exhaustive=False, alg2=FOREST).to_dict()
            for r in records]  # fmt: skip
    recs = [r | {"subject": "s1"} for r in recs] + [
        {**recs[0], "id": "z", "subject": "s2"},
    ]
    items = {k: SimpleNamespace(options=v) for k, v in opts.items()} | {
        "z": SimpleNamespace(options=list("zyxwvu"))
    }
    block = subject_summary(recs, set(), 0.05, items)
    assert block is not None
    row = next(r for r in block["subjects"] if r["subject"] == "s1")
    assert (row["n_items"], row["n_tested"]) == (4, 2)
    # the largest set of items scored under one set of orders is the one relabelled (the
    # first item's alone left out both others: QA)
    (group,) = shared_orders(records[1:], opts)
    assert (group.members, group.left_out) == ((1, 2), (0,))


def test_the_smallest_reachable_p_counts_a_group_once() -> None:
    rows = np.tile(-np.arange(24.0), (3, 1))
    scores = [_score(r) for r in rows]
    assert subject_p_floor(scores, 3) == pytest.approx(3 / 24**3)
    group = SharedOrders((0, 1), rows[:2])
    assert subject_p_floor(scores, 3, [group]) == pytest.approx(3 / 24**2)


def test_a_run_counts_items_with_one_option_list_once(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """End to end on a random-weight model: five questions answered from one option list and
    three items of their own. summary.json counts the five as one draw (its tests' p-values
    cannot go below 1/24 per draw: 1/24^4 with four draws) and the terminal says so."""
    rows = [
        {"question": f"Which colour is thing {i}?", "choices": ["red", "green", "blue", "grey"]}
        for i in range(5)
    ] + [
        {"question": "2+2?", "choices": ["4", "5", "7", "9"]},
        {"question": "Capital of France?", "choices": ["Rome", "Paris", "Oslo", "Bern"]},
        {"question": "Largest planet?", "choices": ["Mars", "Venus", "Jupiter", "Earth"]},
    ]
    bench = tmp_path / "bench.jsonl"
    bench.write_text("".join(json.dumps(r | {"answer": 0}) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "run"
    res = run_cli(
        "permutation", "--model", f"hf:{tiny_model_path}", "--benchmark", str(bench),
        "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    stats = json.loads((out / "summary.json").read_text())["statistics"]
    assert stats["shared_orders"]["n_items"] == 5 and stats["n_items"] == 8
    for test in ("alg1", "rank", "gap"):
        assert stats[test]["p_value"] >= 1 / 24**4 - 1e-15
    assert "5 items share one option list in one order" in " ".join(res.stdout.split())
    rep = run_cli("report", str(out), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "5 items share one option list in one order: the tests count them as one draw" in html
    # comparing two models on these items swaps them for the five at once: B, a copy whose
    # records favour the published order of the five, differs from A by one draw, not five
    other = tmp_path / "run-b"
    shutil.copytree(out, other)
    lines = (other / "items.jsonl").read_text(encoding="utf-8").splitlines()
    edited = []
    for line in lines:
        rec = json.loads(line)
        if rec.get("logprobs") and rec["prefix"].startswith("Which colour"):
            rec["logprobs"][0] = max(rec["logprobs"]) + 1.0
            rec.update(alg1=True, gap=rec["gap"] + 3.0)
        edited.append(json.dumps(rec))
    (other / "items.jsonl").write_text("\n".join(edited) + "\n", encoding="utf-8")
    result = compare_runs(out, other)
    stats = result["statistics"]
    assert stats["shared_orders"]["n_items"] == 5
    assert stats["gap"]["b_greater"] == pytest.approx(0.5)
    assert stats["alg1"]["method"] == "sign flip of groups (exact)"
    res = run_cli("compare", str(out), str(other), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (
        "5 paired items share one option list in one order, one draw of its published order: "
        "the tests swap the two models for all of them at once"
    ) in " ".join(res.stdout.split())
    assert "sign flip of lists: 5 B only" in res.stdout


def test_option_lists_differing_only_in_width_or_zero_width_are_one_list() -> None:
    recs = [{"id": i, "orders": ORDERS4[:2], "logprobs": [-1.0, -2.0]} for i in "abc"]
    groups = shared_orders(
        recs,
        {"a": ["1", "2", "3", "4"], "b": ["１", "2\u200b", "3", "4"], "c": ["2", "1", "3", "4"]},
    )
    assert [g.members for g in groups] == [(0, 1)]
