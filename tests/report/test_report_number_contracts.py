"""How the report pages write intervals and when a BenBench Delta is a signal: intervals as
[low, high] in the units and signs of the difference they bound (docs/output.md: "+20.8 pp
[+3.1, +38.5]"), on values written here and worked out by hand."""

from __future__ import annotations

from typing import Any

from contamscope.report.benbench import _signal
from contamscope.report.cap import _ci_cell
from contamscope.report.compare import HEADER, rows
from contamscope.report.html import fmt_ci


def test_fmt_ci_writes_the_lower_bound_first_in_percent() -> None:
    """docs/output.md: each cell "the method's leakage estimate with its 95% CI" written
    "+20.8 pp [+3.1, +38.5]": the lower bound first, then the upper (mutation QA)."""
    assert fmt_ci([-0.0123, 0.0456], signed=True) == "[-1.2%, +4.6%]"
    assert fmt_ci([0.031, 0.385], signed=True) == "[+3.1%, +38.5%]"
    assert fmt_ci([0.25, 0.5]) == "[25.0%, 50.0%]"
    assert fmt_ci(None) == "–"


def test_a_lower_is_familiar_delta_whose_interval_straddles_0_is_no_signal() -> None:
    """report.benbench._signal: "The one-sided randomization p-value (leak direction: accuracy
    up, perplexity/NLL down) is at most 0.05 and the CI, where there is one, excludes 0 in that
    direction" (mutation QA)."""
    straddles = {"n": 30, "ci": [-0.5, 0.2], "p_value": 0.01}
    assert not _signal(straddles, "nll")
    assert not _signal(straddles, "ppl")
    assert _signal(dict(straddles, ci=[-0.5, -0.1]), "nll")
    assert not _signal(dict(straddles, ci=[-0.5, -0.1], p_value=0.2), "nll")
    # the other direction: a lower-is-familiar Delta above 0 is no leak either
    assert not _signal(dict(straddles, ci=[0.1, 0.5]), "nll")


def test_the_cap_pages_pcr_difference_interval_is_signed_as_the_difference() -> None:
    """report.cap._ci_cell: "A comparison's interval, or why it has none where its difference
    is defined"; the difference PCR_ref - PCR_other is written signed, and so are the bounds of
    its interval, as docs/statistics.md writes them ("+0.235 [+0.158, +0.311]") (mutation QA)."""
    assert _ci_cell(-0.1, 0.2, 0.05) == "[-0.100, +0.200]"
    assert _ci_cell(0.158, 0.311, 0.235) == "[+0.158, +0.311]"
    assert _ci_cell(None, None, 0.05) == "none (every resample alike)"
    assert _ci_cell(None, None, None) == "–"


def _test(a: float, b: float, ci: list[float]) -> dict[str, Any]:
    return {
        "a": a,
        "b": b,
        "a_count": 3,
        "b_count": 5,
        "difference": b - a,
        "ci": ci,
        "two_sided": 0.5,
        "method": "McNemar (exact)",
        "b_only": 2,
        "a_only": 0,
    }


def test_a_comparisons_rows_give_both_ends_of_each_interval() -> None:
    """report.compare.rows: "The three paired tests as table rows: statistic, A, B, B - A, its
    CI, p, test"; docs/output.md: "B - A with its 95% interval"; _signed: "A difference B - A:
    of two rates in percentage points ..., else to three decimals, signed" (mutation QA)."""
    stats = {
        "alg1": _test(0.3, 0.5, [-0.1, 0.45]),
        "share": _test(0.4, 0.6, [-0.1, 0.2]),
        "gap": _test(1.0, 1.5, [0.25, 0.75]),
    }
    got = rows(stats)
    ci_col = HEADER.index("95% CI")
    assert [r[ci_col] for r in got] == [
        "[-10.0 pp, +45.0 pp]",
        "[-0.100, +0.200]",
        "[+0.250, +0.750]",
    ]
