"""BenBench contracts without a model: the paraphrase test's relabelling statistic, when the
lenient n-gram criteria are read, and `compare` of two synthetic run folders (counts, flags)."""

from __future__ import annotations

import pytest

from contamscope.detectors.benbench import NgramResult, ngram_item, paraphrase_test


def test_paraphrase_test_p_counts_relabellings_of_original_minus_mean_paraphrase() -> None:
    """paraphrase_test: "The statistic is the sum over items of original - mean(paraphrases)
    ... the p-value is P(statistic >= observed) over the relabellings". Item 1 (1, [0]) gives
    +1 or -1; item 2 (0, [1.2, 3]) gives -2.1, -0.3 or 2.4; the observed sum -1.1 is reached
    or passed by -1.1, 0.7, 3.4 and 1.4: 4 of the 6 (mutation QA)."""
    out = paraphrase_test([1.0, 0.0], [[0.0], [1.2, 3.0]], lower_is_familiar=False)
    assert out["p_value"] == pytest.approx(4 / 6)


def _point(start: int, predicted: str | None, exact: bool) -> NgramResult:
    return NgramResult(
        start=start,
        original="the cat sat on the",
        predicted=predicted,
        exact=exact,
        mismatch_at=None if exact else 0,
        rouge_l=None if predicted is None else 1.0,
        edit_sim=None if predicted is None else 1.0,
        generated=False,
    )


def test_lenient_criteria_need_every_starting_points_prediction() -> None:
    """NgramItem.rouge: "None: no point, or lenient criteria off"; NgramResult.predicted is
    "None when not needed (lenient criteria off ...)": one starting point without a predicted
    text leaves the text's lenient criteria unread (mutation QA)."""
    item = ngram_item(20, [_point(2, "the cat sat on the", True), _point(10, None, True)])
    assert item.exact == 1.0 and item.all_exact is True
    assert (item.rouge, item.edit, item.all_rouge, item.all_edit) == (None, None, None, None)
    full = ngram_item(20, [_point(2, "the cat sat on the", True)] * 2)
    assert (full.rouge, full.all_rouge) == (1.0, True)
