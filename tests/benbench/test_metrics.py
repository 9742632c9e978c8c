"""Known-answer tests for the pure BenBench metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from contamscope.detectors.benbench import (
    NgramResult,
    answer_perplexity,
    delta_stats,
    delta_train_test,
    edit_similarity,
    exact_ngram_hits,
    first_mismatch,
    ngram_item,
    rouge_l_f,
    starting_points,
)


def test_starting_points_match_the_papers_linspace() -> None:
    # np.linspace(2, 40 - 5, 5, endpoint=True, dtype=int) = [2, 10, 18, 26, 35]
    assert starting_points(40, n=5, k=5) == [2, 10, 18, 26, 35]
    for length in (7, 8, 13, 100, 517):
        want = np.linspace(2, length - 5, num=5, endpoint=True, dtype=int).tolist()
        assert starting_points(length, n=5, k=5) == want
    assert starting_points(8, n=5, k=5) == [2, 2, 2, 2, 3]  # repeats count, as in the code
    assert starting_points(30, n=5, k=5, max_len=20) == starting_points(20, n=5, k=5)


@pytest.mark.parametrize("length", [0, 3, 5, 6])
def test_too_short_texts_have_no_starting_point(length: int) -> None:
    assert starting_points(length, n=5, k=5) == []  # n_tokens - n - 1 <= 0


def test_exact_match_from_teacher_forcing() -> None:
    tokens = [1, 2, 3, 4, 5, 6, 7]
    greedy = [9, 2, 3, 0, 5, 6, 7]
    assert first_mismatch(tokens, greedy, 1, 2) is None
    assert first_mismatch(tokens, greedy, 1, 3) == 2
    assert exact_ngram_hits(tokens, greedy, [1, 4, 0], 3) == [False, True, False]


def test_rouge_l_hand_computed() -> None:
    assert rouge_l_f("the cat sat on", "the cat is on") == pytest.approx(0.75)
    # LCS("a b c d e", "a c e") = 3: P = 3/5, R = 3/3, F = 2*0.6*1/1.6 = 0.75
    assert rouge_l_f("a b c d e", "a c e") == pytest.approx(0.75)
    # tokenisation: lowercase, punctuation -> spaces
    assert rouge_l_f("Hello, World!", "hello world") == 1.0
    assert rouge_l_f("", "x") == 0.0
    assert rouge_l_f("= <<", "= >>") == 0.0  # no alphanumeric tokens at all


def test_edit_similarity_hand_computed() -> None:
    assert edit_similarity("kitten", "sitting") == pytest.approx(1 - 3 / 7)
    assert edit_similarity("abc", "abc") == 1.0
    assert edit_similarity("", "") == 1.0
    assert edit_similarity("abcd", "") == 0.0
    assert edit_similarity(" 12 + 3", " 12 + 4") == pytest.approx(1 - 1 / 7)


def _res(exact: bool, rouge: float, edit: float) -> NgramResult:
    return NgramResult(0, "x", "y", exact, None if exact else 0, rouge, edit, not exact)


def test_ngram_item_thresholds_strict_and_inclusive() -> None:
    res = [_res(True, 1.0, 1.0), _res(False, 0.75, 0.9), _res(False, 0.8, 0.95)]
    agg = ngram_item(20, res, rouge_threshold=0.75, edit_threshold=0.9)
    assert agg.exact == pytest.approx(1 / 3)
    assert agg.rouge == pytest.approx(2 / 3) and agg.edit == pytest.approx(2 / 3)
    assert not agg.all_exact and not agg.all_rouge and not agg.all_edit
    inc = ngram_item(20, res, rouge_threshold=0.75, edit_threshold=0.9, inclusive=True)
    assert inc.all_rouge and inc.all_edit and inc.rouge == 1.0
    assert ngram_item(20, [_res(True, 1, 1)] * 5).all_exact
    empty = ngram_item(3, [])
    assert empty.exact is None and not empty.all_exact
    no_text = NgramResult(0, "x", None, False, 0, None, None, False)
    assert ngram_item(20, [no_text]).rouge is None  # lenient criteria off


def test_answer_perplexity() -> None:
    nll, ppl = answer_perplexity([math.log(0.5)] * 4)
    assert nll == pytest.approx(math.log(2)) and ppl == pytest.approx(2.0)
    with pytest.raises(ValueError):
        answer_perplexity([])


def test_delta_stats_known_values() -> None:
    d = delta_stats([0.5, 0.7, 0.9], [0.4, 0.4, 0.4], n_boot=500)
    assert d["delta"] == pytest.approx(0.3)
    assert d["relative_pct"] == pytest.approx(75.0)
    lo, hi = d["ci"]
    assert 0.1 <= lo <= 0.3 <= hi <= 0.5
    same = delta_stats([0.2, 0.3], [0.2, 0.3], n_boot=200)
    assert same["delta"] == 0 and same["ci"] == [0.0, 0.0]
    zero_ref = delta_stats([0.2, 0.0], [0.0, 0.0], n_boot=200)
    assert zero_ref["relative_pct"] is None and zero_ref["relative_ci"] is None
    assert delta_stats([], [])["delta"] is None


def test_delta_train_test() -> None:
    train = ([0.6, 0.6, 0.7, 0.5], [0.2, 0.2, 0.3, 0.1])  # Delta_train = 0.4
    test = ([0.3, 0.3, 0.2], [0.2, 0.2, 0.1])  # Delta_test = 0.1
    out = delta_train_test(train, test, n_boot=500)
    assert out["value"] == pytest.approx(0.3)
    assert out["ci"][0] <= 0.3 <= out["ci"][1]
    assert out["n_train"] == 4 and out["n_test"] == 3
    assert delta_train_test(train, ([], []))["value"] is None
