"""Known-answer tests of the validation metrics (pure)."""

from __future__ import annotations

import math

import pytest

from contamscope.validate import auc, binary_metrics, detectors_for, evaluate_records


def test_confusion_counts_and_rates() -> None:
    flags = [True, True, True, False, False, False, True, False]
    labels = [True, True, False, False, False, True, True, False]
    m = binary_metrics(flags, labels)
    assert (m.tp, m.fp, m.tn, m.fn) == (3, 1, 3, 1)
    assert m.accuracy == pytest.approx(6 / 8)
    assert m.precision == pytest.approx(3 / 4)
    assert m.recall == pytest.approx(3 / 4)
    assert m.f1 == pytest.approx(0.75)
    assert m.fpr == pytest.approx(1 / 4)
    lo, hi = m.fpr_ci  # type: ignore[misc]
    assert lo < 0.25 < hi
    # Clopper-Pearson: P(X >= 1 | n=4, lo) = 0.025 and P(X <= 1 | n=4, hi) = 0.025 (Wilson's
    # interval, used before, is [0.046, 0.699])
    from scipy import stats

    assert stats.binom.sf(0, 4, lo) == pytest.approx(0.025)
    assert stats.binom.cdf(1, 4, hi) == pytest.approx(0.025)
    assert m.auc is None


def test_undefined_ratios_are_none_not_zero() -> None:
    m = binary_metrics([False, False], [True, False])
    assert m.precision is None and m.f1 is None
    assert m.recall == 0.0 and m.fpr == 0.0
    m = binary_metrics([True, True], [True, True])
    assert m.fpr is None and m.fpr_ci is None and m.precision == 1.0
    with pytest.raises(ValueError):
        binary_metrics([True], [True, False])


def test_f1_zero_when_every_flag_is_wrong() -> None:
    m = binary_metrics([True, False], [False, True])
    assert m.precision == 0.0 and m.recall == 0.0 and m.f1 == 0.0


def test_auc_known_answers() -> None:
    assert auc([3, 2, 1, 0], [True, True, False, False]) == 1.0
    assert auc([0, 1, 2, 3], [True, True, False, False]) == 0.0
    # one inversion out of 2x2 pairs
    assert auc([3, 1, 2, 0], [True, True, False, False]) == pytest.approx(0.75)
    # ties count one half
    assert auc([1, 1, 1, 1], [True, False, True, False]) == pytest.approx(0.5)
    assert auc([1, 2], [True, True]) is None


def test_auc_matches_sklearn() -> None:
    sklearn = pytest.importorskip("sklearn.metrics")
    scores = [0.3, 0.1, 0.3, 0.8, 0.5, 0.5, 0.2, 0.9, 0.1]
    labels = [True, False, False, True, True, False, False, True, True]
    assert auc(scores, labels) == pytest.approx(sklearn.roc_auc_score(labels, scores))


def _rec(item_id: str, lp: list[float], **kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "id": item_id,
        "logprobs": lp,
        "alg1": lp[0] > max(lp[1:]),
        "p_value": 1.0,
        "alg2": {"-0.2": False},
        "alg2_anchored": {"-0.2": False},
        "alg2_score": 0.1,
        "alg2_argmax": 0,
    }
    base.update(kw)
    return base


def test_evaluate_records_reads_each_detector() -> None:
    dets = detectors_for([-0.2], 0.05)
    assert [d.name for d in dets] == ["alg1", "alg2@-0.2", "alg2-anchored@-0.2", "rank@0.05"]
    records = [
        _rec("a", [-1.0, -5.0], p_value=0.01, alg2={"-0.2": True}, alg2_score=-0.3),
        _rec("b", [-4.0, -2.0], p_value=0.5, alg2={"-0.2": True}, alg2_score=-0.25, alg2_argmax=1),
        _rec("c", [-3.0, -2.0], p_value=0.6),
        _rec("d", [-1.0, -1.5], p_value=0.04),
        {"id": "e", "excluded": "options not exchangeable: all of the above"},
    ]
    out = evaluate_records(records, {"a", "b", "e"}, dets)
    alg1 = out["alg1"]  # flags a, d; leaked a, b
    assert (alg1.tp, alg1.fp, alg1.tn, alg1.fn, alg1.n) == (1, 1, 1, 1, 4)
    # margins: a 4.0 (L), b -2.0 (L), c -1.0, d 0.5 -> pairs (L > C): a>c, a>d, b<c, b<d = 2/4
    assert alg1.auc == pytest.approx(0.5)
    alg2 = out["alg2@-0.2"]  # flags a, b
    assert (alg2.tp, alg2.fp, alg2.recall, alg2.fpr) == (2, 0, 1.0, 0.0)
    anchored = out["alg2-anchored@-0.2"]  # score -inf for b (max is not the original)
    assert anchored.tp == 0
    assert not math.isnan(anchored.auc or 0.0)
    rank = out["rank@0.05"]  # p <= 0.05: a, d
    assert (rank.tp, rank.fp) == (1, 1)


def test_every_detector_line_of_the_plot_has_its_own_look(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """14 detectors on matplotlib's 10-colour cycle, one marker: alg1 and membership-min_k_pp
    (and three more pairs) were drawn alike (QA)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from contamscope.validate.report import plot_summary

    names = [f"alg2@-0.{i}" for i in range(10)] + [f"membership-{s}" for s in "abcd"]
    metrics = dict.fromkeys(("precision", "recall", "f1", "accuracy", "fpr", "auc"), 0.5)
    results = [{"epochs": e, "detectors": dict.fromkeys(names, metrics)} for e in (0, 1)]
    summary = {
        "results": results,
        "split": {"n_leaked": 4, "n_clean": 4},
        "config": {"scenario": "a"},
        "model": {"spec": "tiny"},
        "benchmark": {"source": "b"},
    }
    kept: list = []
    monkeypatch.setattr(plt, "close", kept.append)  # keep the figure to look at
    assert plot_summary(summary, tmp_path / "v.png") is not None
    looks = [(ln.get_color(), ln.get_marker(), ln.get_linestyle()) for ln in kept[0].axes[0].lines]
    assert len(looks) == 14 and len(set(looks)) == 14
