"""The verdict's sentence about naturally ordered items says what their numbers support."""

from __future__ import annotations

from contamscope.detectors.verdict import verdict


def _natural(n: int, count: int) -> dict[str, object]:
    return {
        "n_items": n,
        "reasons": {"numbers in increasing order": n},
        "alg1_count": count,
        "alg1_rate": count / n,
        "alg1_chance": 1 / 24,
        "statistics_without": {},
    }


def test_no_flag_needs_no_explaining_and_one_item_is_one() -> None:
    """'Algorithm 1 flags 0.0% of them (0; chance 4.2%), which a clean model's preference for
    the natural order explains' and 'all 1 analysed items have' (QA)."""
    signal, one = verdict({"n_items": 1}, _natural(1, 0))
    assert signal is None
    assert one.startswith("nothing testable: the 1 analysed item has a natural option order")
    assert "Algorithm 1 does not flag it (chance 4.2%)" in one and "explain" not in one
    _, none = verdict({"n_items": 3}, _natural(3, 0))
    assert "all 3 analysed items have" in none and "flags none of them (chance 4.2%)" in none
    _, some = verdict({"n_items": 3}, _natural(3, 2))
    assert "flags 66.7% of them (2; chance 4.2%), which a clean model's preference" in some
    assert some.endswith("can explain")


def test_no_evidence_names_the_level_each_test_must_reach() -> None:
    """'no evidence ... (smallest p = 0.023)' read as below 5% (journey): the Bonferroni level
    is said with it."""
    stats = {
        "n_items": 20,
        "alg1": {"p_value": 0.4},
        "rank": {"p_value": 0.023},
        "gap": {"p_value": 0.2},
    }
    signal, sentence = verdict(stats)
    assert signal is False
    assert "(smallest p = 0.023, above the 0.0167 each of the 3 tests must reach)" in sentence
