"""Known-answer tests for CAP's M, C and PCR (paper's Tables 3, 4 and 7)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from contamscope.detectors.cap import (
    Comparison,
    adjust_for_family,
    compare_splits,
    holm,
    jaccard,
    map_choice,
    pcr,
    rouge_l,
    rouge_n,
    split_score,
    tokens,
    verdict,
)
from contamscope.detectors.stats import expanded_tail, tail_draws

# FinEval (Table 4): surface-level EM and consistency on dev and val.
TABLE4 = {
    "Baichuan-13B": ((0.4235, 0.4765), (0.4544, 0.4674)),
    "Disc-Fin-13B": ((0.4647, 0.4824), (0.4327, 0.4083)),
    "FinMA-NLP-7B": ((0.1176, 0.2765), (0.1095, 0.2407)),
    "FinMA-Full-7B": ((0.1824, 0.2706), (0.1706, 0.2502)),
    "LLaMA-8B": ((0.0, 0.6059), (0.0, 0.5308)),
}
# Table 3: PCR_dev - PCR_val per scale and alpha (0 where the paper prints 0 / blank).
TABLE3 = {
    "Baichuan-13B": {
        "tanh": (-0.0389, -0.0388, -0.038, -0.0316),
        "linear": (-0.0834, -0.0832, -0.0817, -0.069),
        "sigmoid": (-0.0169, -0.0169, -0.0166, -0.0139),
    },
    "Disc-Fin-13B": {
        "tanh": (-0.0398, -0.0397, -0.0389, -0.0325),
        "linear": (-0.0965, -0.0962, -0.0943, -0.0784),
        "sigmoid": (-0.0189, -0.0188, -0.0184, -0.0153),
    },
    "FinMA-NLP-7B": {
        "tanh": (-0.0245, -0.0246, -0.0255, -0.0264),
        "linear": (-0.0296, -0.0298, -0.0313, -0.037),
        "sigmoid": (-0.0071, -0.0071, -0.0074, -0.0085),
    },
    "FinMA-Full-7B": {
        "tanh": (-0.0051, -0.0051, -0.0054, -0.0062),
        "linear": (-0.0078, -0.0079, -0.0084, -0.0107),
        "sigmoid": (-0.0017, -0.0018, -0.0019, -0.0023),
    },
    "LLaMA-8B": {
        "tanh": (0.0, -0.0002, -0.0023, -0.0165),
        "linear": (0.0, -0.0002, -0.0023, -0.0169),
        "sigmoid": (0.0, -0.0001, -0.0006, -0.0042),
    },
}
ALPHAS = (0.0, 0.001, 0.01, 0.1)


@pytest.mark.parametrize("model", sorted(TABLE3))
@pytest.mark.parametrize("scale", ["tanh", "linear", "sigmoid"])
def test_table3_ablation(model: str, scale: str) -> None:
    (m_dev, c_dev), (m_val, c_val) = TABLE4[model]
    for alpha, expected in zip(ALPHAS, TABLE3[model][scale]):
        got = pcr(m_dev, c_dev, alpha=alpha, scale=scale) - pcr(  # type: ignore[arg-type]
            m_val,
            c_val,
            alpha=alpha,
            scale=scale,  # type: ignore[arg-type]
        )
        assert got == pytest.approx(expected, abs=1.5e-4), (alpha, got)


@pytest.mark.parametrize(
    ("m", "c", "expected"),
    [  # FinQA, Table 7 (tanh, alpha 0.01)
        (0.0021, 0.8326, 0.0144),
        (0.2304, 0.727, 0.3151),
        (0.0943, 0.5662, 0.1791),
        (0.1481, 0.6993, 0.2193),
        (0.0084, 0.2506, 0.0703),
    ],
)
def test_table7_pcr(m: float, c: float, expected: float) -> None:
    # inputs are printed to 4 decimals in the paper, hence the tolerance
    assert pcr(m, c) == pytest.approx(expected, abs=3e-4)


def test_pcr_edge_cases() -> None:
    assert math.isnan(pcr(0, 0, alpha=0))
    assert pcr(0.5, 0, alpha=0, scale="tanh") == 1.0
    assert pcr(0.5, 0.5, alpha=0, scale="linear") == 1.0
    assert pcr(0, 1, alpha=0, scale="sigmoid") == 0.5
    with pytest.raises(ValueError):
        pcr(0.1, 0.1, scale="cube")  # type: ignore[arg-type]


def test_rouge_and_jaccard_known_answers() -> None:
    # LCS "the cat on the mat" = 5 of 6 tokens each side -> F1 5/6
    assert rouge_l("the cat sat on the mat", "the cat lay on the mat") == pytest.approx(5 / 6)
    # bigrams: pred {the cat, cat sat, sat on}, ref {the cat, cat lay, lay on}: 1 of 3 -> 1/3
    assert rouge_n("the cat sat on", "the cat lay on", 2) == pytest.approx(1 / 3)
    assert rouge_n("a", "a", 2) == 0.0  # no bigrams
    assert rouge_l("", "x") == 0.0
    assert jaccard("a b c", "b c d") == pytest.approx(2 / 4)
    assert jaccard("", "") == 0.0  # no answer is no consistent answer
    assert jaccard("a", "") == 0.0
    assert tokens("净利润 Rose") == ["净", "利", "润", "rose"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("B", 1),
        (" b", 1),
        ("(C) because", 2),
        ("D. 1740万元", 3),
        ("答案：A", 0),
        ("The answer is C", 2),
        ("Answer: b", 1),
        ("1650万元", 2),
        ("选B", 1),
        ("", None),
        ("all of them", None),
        ("E", None),  # no option E
        ("1640万元 or 1650万元", None),  # two options named
        # labels listed are no choice: SmolLM2 echoed "[A, B, C, D", counted as A (journey)
        ("[A, B, C, D", None),
        ("A/B", None),
        ("C or D", None),
        ("A和B", None),
        ("A, I think", 0),  # "I" is no label of 4 options
        ("B, because 1640万元", 1),
        # answer phrasings generations use (the earlier rules left them unmapped)
        ("选择：D", 3),
        ("正确答案是C。", 2),
        ("答案应为B", 1),
        ("**B**", 1),
        ("Answer: **C. 1650万元**", 2),
        ("选项C", 2),
        ("利润减少了，故选B。", 1),
        ("Looking at the numbers, the answer is D.", 3),
        ("计算可得，所以答案是A", 0),
        ("答案是A，不对，答案是B", None),  # two answers named: no one choice
        ("the answer is a guess", None),  # a lower-case article, not a label
        ("首先看A项，再看C项", None),  # options discussed, none chosen
    ],
)
def test_map_choice(text: str, expected: int | None) -> None:
    assert map_choice(text, ["1730万元", "1640万元", "1650万元", "1740万元"]) == expected


def test_map_choice_prefers_longest_contained_option() -> None:
    assert map_choice("it is 100", ["10", "100", "7"]) == 1


def test_split_score_and_baselines() -> None:
    s = split_score([1, 1, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], alpha=0.01)
    assert (s.m, s.c, s.m_modified) == (0.5, 0.25, 0.25)
    assert s.decline == 0.25 and s.relative_decline == 0.5
    assert s.pcr == pytest.approx(math.tanh(0.51 / 0.26))
    z = split_score([0, 0], [1, 1], [0, 0])
    assert z.relative_decline is None


def test_compare_splits_directions() -> None:
    # reference split: high M, low C (fine-tuned on it); other: low M, high C
    hi = ([1.0] * 40 + [0.0] * 10, [0.0] * 30 + [1.0] * 20)
    lo = ([1.0] * 10 + [0.0] * 40, [1.0] * 45 + [0.0] * 5)
    a, b = split_score(*hi), split_score(*lo)
    comp = compare_splits("train", "test", hi, lo, a, b, n_boot=500)
    assert comp.pcr_diff > 0 and comp.ci_low > 0 and comp.verdict == "fine-tuned on train"
    assert comp.p_value <= 0.01
    back = compare_splits("train", "test", lo, hi, b, a, n_boot=500)
    assert back.verdict == "contaminated by test" and back.ci_high < 0
    same = compare_splits("train", "test", hi, hi, a, a, n_boot=500)
    assert same.verdict == "no evidence" and same.ci_low <= 0 <= same.ci_high
    # the bootstrap is seeded
    again = compare_splits("train", "test", hi, lo, a, b, n_boot=500)
    assert (again.ci_low, again.ci_high) == (comp.ci_low, comp.ci_high)


Split = tuple[list[float], list[float]]


def _simulated_splits(
    rng: np.random.Generator, sizes: tuple[int, int], m_ref: float
) -> tuple[Split, Split]:
    """Per-item 0/1 M and C: reference M ~ Bernoulli(m_ref), the other M ~ Bernoulli(0.6), both
    C ~ Bernoulli(0.5) (benchmarks/cap_null.py's shapes)."""

    def split(n: int, m: float) -> Split:
        return ((rng.random(n) < m) * 1.0).tolist(), ((rng.random(n) < 0.5) * 1.0).tolist()

    return split(sizes[0], m_ref), split(sizes[1], 0.6)


def _compare(ref: Split, other: Split, seed: int) -> Comparison:
    return compare_splits(
        "ref", "other", ref, other, split_score(*ref), split_score(*other), n_boot=500, seed=seed
    )


def test_compare_splits_ci_covers_at_its_level_with_a_small_split() -> None:
    """The plain percentile interval covered the true difference (0) in 86% of clean runs with
    5 reference and 50 other items; the expanded interval at the smaller split's size holds
    about 95%."""
    rng = np.random.default_rng(11)
    runs = 300
    covered = 0
    for run in range(runs):
        comp = _compare(*_simulated_splits(rng, (5, 50), 0.6), seed=run)
        covered += comp.ci_low <= 0 <= comp.ci_high
    assert covered / runs >= 0.92  # binomial sd at 0.95: 0.013


def test_permutation_test_can_name_a_small_split_and_keeps_its_level() -> None:
    """Relabelled differences are skewed when the splits differ in size; counting |difference|
    >= |observed| rejected in 0.1% of runs with 12 reference items trained on (M 0.9) against
    100 others. The equal-tailed p-value rejects in about 17%, and in about 5% of clean runs."""
    rng = np.random.default_rng(12)
    runs = 200
    trained = sum(
        _compare(*_simulated_splits(rng, (12, 100), 0.9), seed=run).p_value <= 0.05
        for run in range(runs)
    )
    clean = sum(
        _compare(*_simulated_splits(rng, (12, 100), 0.6), seed=run).p_value <= 0.05
        for run in range(runs)
    )
    assert trained / runs >= 0.08
    assert clean / runs <= 0.09  # sd at 0.05 and 200 runs: 0.015


def test_verdict_min_diff_and_undefined() -> None:
    assert verdict("train", "test", 0.01, 0.005, 0.02, min_diff=0.05)[0] == "no evidence"
    # an undefined difference (a split without analysed items) is no evidence of anything
    label, why = verdict("train", "test", math.nan, math.nan, math.nan)
    assert label == "inconclusive" and "undefined" in why


def test_a_split_with_no_right_and_no_consistent_answer_is_inconclusive() -> None:
    """Every answer unmapped: M = C = 0 on both splits, PCR = tanh(1) on each, difference 0
    with CI [0, 0]: it said 'no evidence' and ranked +0.000 on the leaderboard."""
    blank = ([0.0] * 10, [0.0] * 10)
    some = ([1.0] * 5 + [0.0] * 5, [1.0] * 8 + [0.0] * 2)
    z = split_score(*blank)
    comp = compare_splits("train", "test", blank, blank, z, z, n_boot=200)
    assert comp.pcr_diff == 0.0 and math.isnan(comp.ci_low) and math.isnan(comp.ci_high)
    assert comp.verdict == "inconclusive" and "M = C = 0 on train and test" in comp.reasoning
    one = compare_splits("train", "test", some, blank, split_score(*some), z, n_boot=200)
    assert one.verdict == "inconclusive" and "M = C = 0 on test (" in one.reasoning


def test_compare_splits_alpha_zero_undefined_ratio_warns_nothing() -> None:
    import warnings

    zero_c = ([1.0, 0.0, 1.0], [0.0, 0.0, 0.0])  # C = 0: (M + 0) / (0 + 0) is undefined
    some_c = ([1.0, 0.0, 1.0], [1.0, 1.0, 0.0])
    a = split_score(*zero_c, alpha=0)
    b = split_score(*some_c, alpha=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "divide by zero" would fail the test
        comp = compare_splits("train", "test", zero_c, some_c, a, b, alpha=0, n_boot=200)
    assert comp.pcr_diff == pytest.approx(1 - math.tanh(1.0))  # tanh(inf) = 1 for C = 0
    assert comp.ci_low <= 0 <= comp.ci_high and comp.verdict == "no evidence"


def test_compare_splits_says_how_many_resamples_were_undefined() -> None:
    # alpha 0: a resample without the one consistent item has M = C = 0, PCR 0/0 undefined;
    # about (2/3)^3 = 30% of them. The CI rests on the others, and the result says so.
    ref = ([0.0, 0.0, 1.0], [0.0, 0.0, 1.0])
    other = ([1.0, 0.0, 1.0], [1.0, 1.0, 0.0])
    a, b = split_score(*ref, alpha=0), split_score(*other, alpha=0)
    comp = compare_splits("train", "test", ref, other, a, b, alpha=0, n_boot=1000)
    # 3 items: the interval's ends lie far out, so more than the 1,000 asked are drawn
    drawn = tail_draws(1000, expanded_tail(3), 6)
    assert comp.n_drawn == drawn > 1000 and 0.55 < comp.n_boot / drawn < 0.85
    assert f"({drawn - comp.n_boot} of {drawn} resamples had an undefined PCR" in comp.reasoning
    full = compare_splits("train", "test", other, other, b, b, alpha=0, n_boot=1000)
    assert full.n_boot == drawn and "undefined" not in full.reasoning


def test_few_items_cannot_name_a_split_and_the_p_value_holds_its_level() -> None:
    """The bootstrap alone named a split for one item per split (CI a single point, p = 1/n_boot)
    and in 34% of clean pairs of 2-item splits; the split-label permutation test is exact."""
    import numpy as np

    one = compare_splits(
        "train",
        "test",
        ([1.0], [0.0]),
        ([0.0], [1.0]),
        split_score([1.0], [0.0]),
        split_score([0.0], [1.0]),
        n_boot=500,
    )
    assert math.isnan(one.ci_low) and math.isnan(one.ci_high) and one.p_value > 0.4
    assert one.verdict == "no evidence" and "permutation test does not reject" in one.reasoning
    # clean splits of 3 items (continuous M and C from one distribution): size <= 5%
    rng = np.random.default_rng(7)
    hits = named = 0
    reps = 300
    for _ in range(reps):
        a = (list(rng.beta(2, 2, 3)), list(rng.beta(3, 2, 3)))
        b = (list(rng.beta(2, 2, 3)), list(rng.beta(3, 2, 3)))
        comp = compare_splits(
            "train",
            "test",
            a,
            b,
            split_score(*a),
            split_score(*b),
            n_boot=200,
            seed=int(rng.integers(1 << 30)),
        )
        hits += comp.p_value <= 0.05
        named += comp.verdict != "no evidence"
    assert hits / reps <= 0.05 + 2 * (0.05 * 0.95 / reps) ** 0.5  # 2 standard errors
    assert named <= hits


def test_holm_known_values() -> None:
    # sorted 0.01, 0.03, 0.04: 3 x 0.01, max(0.03, 2 x 0.03), max(0.06, 1 x 0.04)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    out = holm([math.nan, 0.02, 0.2])  # an undefined p is not in the family
    assert math.isnan(out[0]) and out[1:] == pytest.approx([0.04, 0.2])
    assert holm([]) == []


def test_an_undefined_difference_reads_undefined_not_nan() -> None:
    """The verdict's reasoning printed 'PCR_dev - PCR_val = +nan, 95% CI [+nan, +nan]'
    (journey audit)."""
    import math

    from contamscope.detectors.cap import verdict

    label, why = verdict("dev", "val", math.nan, math.nan, math.nan)
    assert label == "inconclusive" and "nan" not in why
    assert why.startswith("PCR_dev - PCR_val: undefined") and "--pcr-alpha 0" in why


def test_excess_comparison_reads_a_split_whose_pcr_sits_at_the_ceiling() -> None:
    """Like the SmolLM2 copy trained 6 epochs on 24 MMLU test items (docs/statistics.md): dev M
    5/24, C 1/24; test M 21/24, C 2/24. Both PCRs sit at tanh's ceiling (0.9995, 1.0000), so
    the PCR verdict cannot tell the splits apart; M - C can."""
    dev = ([1.0] * 5 + [0.0] * 19, [1.0] * 1 + [0.0] * 23)
    test = ([1.0] * 21 + [0.0] * 3, [0.0] * 22 + [1.0] * 2)
    a, b = split_score(*dev), split_score(*test)
    comp = compare_splits("dev", "test", dev, test, a, b, n_boot=2000, seed=0)
    assert comp.verdict == "no evidence" and comp.ci_high >= 0
    assert comp.excess_diff == pytest.approx((5 - 1) / 24 - (21 - 2) / 24)
    assert comp.excess_ci_high is not None and comp.excess_ci_high < 0
    assert comp.excess_p_value is not None and comp.excess_p_value <= 0.01
    assert comp.excess_verdict == "contaminated by test"
    # the PCR numbers are those the permutation and bootstrap gave before the excess was added
    from contamscope.detectors.cap import permutation_p

    p = permutation_p(dev, test, comp.pcr_diff, alpha=0.01, scale="tanh", n_perm=2000, seed=0)
    assert comp.p_value == p
    d = comp.to_dict()
    assert d["excess_verdict"] == "contaminated by test" and d["excess_p_adjusted"] is None


def test_excess_comparison_level_blank_splits_and_family() -> None:
    from contamscope.detectors.cap import adjust_for_family

    rng = np.random.default_rng(2)
    named = 0
    for k in range(200):  # both splits alike: H0 holds
        ref = tuple(((rng.random(20) < p) * 1.0).tolist() for p in (0.6, 0.5))
        other = tuple(((rng.random(20) < p) * 1.0).tolist() for p in (0.6, 0.5))
        comp = compare_splits(
            "train", "test", ref, other, split_score(*ref), split_score(*other), n_boot=300, seed=k
        )
        named += comp.excess_verdict != "no evidence"
    assert named / 200 <= 0.08
    blank = ([0.0] * 10, [0.0] * 10)
    some = ([1.0] * 5 + [0.0] * 5, [1.0] * 8 + [0.0] * 2)
    one = compare_splits("train", "test", some, blank, split_score(*some), split_score(*blank))
    assert one.excess_verdict == "inconclusive"  # M = C = 0: no answer to judge
    # two comparisons of one reference: Holm over the excess p-values too
    dev = ([1.0] * 5 + [0.0] * 19, [1.0] * 1 + [0.0] * 23)
    test = ([1.0] * 21 + [0.0] * 3, [0.0] * 22 + [1.0] * 2)
    sc = {k: split_score(*v) for k, v in (("dev", dev), ("test", test))}
    comps = [
        compare_splits("dev", "test", dev, test, sc["dev"], sc["test"], n_boot=500),
        compare_splits("dev", "val", dev, dev, sc["dev"], sc["dev"], n_boot=500, seed=1),
    ]
    fam = adjust_for_family(comps, n_boot=500)
    raw = [c.excess_p_value for c in comps]
    assert [c.excess_p_adjusted for c in fam] == pytest.approx(holm(raw))
    assert fam[0].excess_verdict == "contaminated by test"
    assert fam[1].excess_verdict == "no evidence"
    # a comparison with a blank split stays inconclusive in a family (it read "no evidence"
    # with three splits, where two said "inconclusive"; QA)
    fam = adjust_for_family(
        [one, compare_splits("train", "dev", some, some, split_score(*some), split_score(*some))],
        n_boot=500,
    )
    assert fam[0].excess_verdict == "inconclusive" and fam[0].excess_p_adjusted is not None


def test_a_zero_width_interval_is_not_given_and_the_permutation_test_decides() -> None:
    """One item per split, or splits whose items all read alike: every resample gives the same
    difference. The interval "[+0.9901, +0.9901]" read as a precise measurement (interval QA);
    now there is none, and the verdict rests on the permutation test, which 1 item per split
    cannot pass and 10 clearly separated items per split can."""

    def cmp(ref: tuple[list[int], list[int]], oth: tuple[list[int], list[int]]) -> Any:
        return compare_splits("train", "test", ref, oth, split_score(*ref), split_score(*oth))

    one = cmp(([1], [0]), ([0], [1])).to_dict()
    assert one["pcr_diff"] > 0.9 and one["p_value"] > 0.5
    assert (one["ci_low"], one["ci_high"], one["excess_ci_low"]) == (None, None, None)
    assert one["verdict"] == one["excess_verdict"] == "no evidence"
    assert "no interval" in one["reasoning"] and "[+0.9901" not in one["reasoning"]
    ten = cmp(([1] * 10, [0] * 10), ([0] * 10, [1] * 10)).to_dict()
    assert ten["ci_low"] is None and ten["p_value"] < 0.01
    assert ten["verdict"] == ten["excess_verdict"] == "fine-tuned on train"
    # two splits of one model in a family of three: Holm's adjustment keeps the rule
    fam = adjust_for_family(
        [cmp(([1] * 10, [0] * 10), ([0] * 10, [1] * 10)), cmp(([1], [0]), ([0], [1]))],
        n_boot=2000,
    )
    assert [c.verdict for c in fam] == ["fine-tuned on train", "no evidence"]


def test_answer_mapping_reads_in_linear_time() -> None:
    """Three `\\s*` in a row after "答案" (and two after "选择", "the answer"): a model answer of
    "答案" and 1,500 spaces took 55 s to map, in a run, its report and reanalyse (security QA).
    The rules read as before (checked against the old expressions on generated answers)."""
    from contamscope.detectors.cap import map_choice

    for head in ("答案", "选择", "the answer", "答案是"):
        assert map_choice(head + " " * 200_000 + "x", ["a", "b", "c", "d"]) is None
    assert map_choice("答案 应为 ：(D)", ["1", "2", "3", "4"]) == 3
    assert map_choice("so the answer is  C", ["1", "2", "3", "4"]) == 2
