"""The paired tests of `contamscope compare`: exact where they say so, valid under H0, and
pointing at the model that prefers the published orders."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from contamscope.detectors.compare import (
    PairedItem,
    beaten_share,
    compare_aucs,
    compare_gaps,
    compare_pairs,
    mcnemar,
    newcombe_interval,
    paired_auc_difference,
    paired_p_floor,
    sign_flip_test,
    signed_sum_test,
)


def test_beaten_share_counts_ties_half_and_averages_one_half_over_positions() -> None:
    assert beaten_share([-1.0, -2.0, -3.0]) == 1.0
    assert beaten_share([-3.0, -2.0, -1.0]) == 0.0
    assert beaten_share([-2.0, -2.0, -1.0, -3.0]) == pytest.approx((1 + 0.5) / 3)
    # H0: the original is any of the values with equal probability; the mean share is 1/2
    values = [-4.0, -1.0, -1.0, -2.5, -7.0]
    shares = [beaten_share([values[i], *values[:i], *values[i + 1 :]]) for i in range(5)]
    assert np.mean(shares) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        beaten_share([-1.0])


def test_mcnemar_is_the_exact_binomial_test_of_the_discordant_items() -> None:
    res = mcnemar(7, 2)
    assert res["b_greater"] == pytest.approx(sps.binomtest(7, 9, 0.5, alternative="greater").pvalue)
    assert res["a_greater"] == pytest.approx(sps.binomtest(7, 9, 0.5, alternative="less").pvalue)
    assert res["two_sided"] == pytest.approx(sps.binomtest(7, 9, 0.5).pvalue)
    assert mcnemar(2, 7)["a_greater"] == res["b_greater"]
    assert mcnemar(0, 0)["two_sided"] == 1.0


@pytest.mark.parametrize("diffs", [[0.3, -1.2, 2.0, 0.7], [1.0, 1.0, -1.0, 0.0, 2.5, -0.4]])
def test_sign_flip_enumerates_every_assignment(diffs: list[float]) -> None:
    d = [x for x in diffs if x != 0.0]
    obs = sum(d)
    sums = [
        sum(s * x for s, x in zip(signs, d)) for signs in itertools.product((1, -1), repeat=len(d))
    ]
    res = sign_flip_test(diffs)
    assert res["method"] == "sign flip (exact)" and res["n_resamples"] == 2 ** len(d)
    assert res["b_greater"] == pytest.approx(np.mean([s >= obs - 1e-12 for s in sums]))
    assert res["a_greater"] == pytest.approx(np.mean([s <= obs + 1e-12 for s in sums]))
    assert res["two_sided"] == pytest.approx(min(1.0, 2 * min(res["b_greater"], res["a_greater"])))


def test_sign_flip_monte_carlo_agrees_with_the_normal_limit_and_is_seeded() -> None:
    rng = np.random.default_rng(3)
    d = rng.normal(0.15, 1.0, size=400)
    res = sign_flip_test(d)
    assert res["method"] == "sign flip (Monte Carlo)"
    z = d.sum() / math.sqrt(np.sum(d**2))  # the sign-flip sum's standard deviation is sqrt(sum d^2)
    assert res["b_greater"] == pytest.approx(sps.norm.sf(z), abs=0.01)
    assert sign_flip_test(d) == res


def test_sign_flip_false_positive_rate_under_h0() -> None:
    """Symmetric differences (no model preferred): p <= 0.05 in at most about 5% of data sets."""
    rng = np.random.default_rng(0)
    ps = [sign_flip_test(rng.standard_t(3, size=30))["two_sided"] for _ in range(300)]
    rate = np.mean(np.array(ps) <= 0.05)
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 300)


def test_newcombe_interval_covers_the_true_difference() -> None:
    """Paired flags with P(B only) = 0.15, P(A only) = 0.05, P(both) = 0.1: the 95% interval
    holds the true difference 0.10 in about 95% of 1,000 samples of 80 items."""
    rng = np.random.default_rng(1)
    probs = [0.1, 0.15, 0.05, 0.7]  # both, B only, A only, neither
    hits = 0
    for _ in range(1000):
        both, b_only, a_only, neither = rng.multinomial(80, probs)
        lo, hi = newcombe_interval(int(both), int(b_only), int(a_only), int(neither))
        hits += lo <= 0.10 <= hi
    assert 0.92 <= hits / 1000 <= 0.985
    lo, hi = newcombe_interval(0, 0, 0, 50)
    assert lo < 0.0 < hi and lo >= -1.0


def _pairs(rng: np.random.Generator, n: int, shift: float) -> list[PairedItem]:
    out = []
    for i in range(n):
        a = rng.normal(size=24)
        b = a + rng.normal(scale=0.3, size=24)
        b[0] += shift  # B likes the original order more by `shift` nats
        out.append(
            PairedItem(
                id=f"q{i}",
                subject="s1" if i % 2 else "s2",
                alg1_a=bool(a[0] > a[1:].max()),
                alg1_b=bool(b[0] > b[1:].max()),
                share_a=beaten_share(a),
                share_b=beaten_share(b),
                gap_a=float(a[0] - a[1:].mean()),
                gap_b=float(b[0] - b[1:].mean()),
            )
        )
    return out


def test_compare_pairs_points_at_the_model_that_prefers_the_published_order() -> None:
    rng = np.random.default_rng(2)
    more = compare_pairs(_pairs(rng, 60, shift=1.5))
    assert more["direction"] == "B" and more["p_value"] < 1e-3
    assert more["alg1"]["b_only"] > more["alg1"]["a_only"]
    assert (
        more["gap"]["difference"] == pytest.approx(more["gap"]["b"] - more["gap"]["a"])
        and more["gap"]["ci"][0] > 0
    )
    swapped = [
        PairedItem(p.id, p.subject, p.alg1_b, p.alg1_a, p.share_b, p.share_a, p.gap_b, p.gap_a)
        for p in _pairs(np.random.default_rng(2), 60, shift=1.5)
    ]
    assert compare_pairs(swapped)["direction"] == "A"
    same = compare_pairs(
        [
            PairedItem(p.id, p.subject, p.alg1_a, p.alg1_a, p.share_a, p.share_a, p.gap_a, p.gap_a)
            for p in _pairs(rng, 20, shift=0.0)
        ]
    )
    assert same["direction"] == "none" and same["p_value"] == 1.0
    assert compare_pairs([])["p_value"] is None


def _gaps(rng: np.random.Generator, n: int, extra: float) -> dict[str, tuple[Any, Any]]:
    """Two models' NLL and n-gram gaps on ``n`` items: a component each item shares under both
    models (how much its paraphrases differ) plus each model's own noise; B's gaps ``extra``
    larger."""
    shared = rng.normal(0.2, 0.5, n)
    nll = (shared + rng.normal(0, 0.3, n), shared + extra + rng.normal(0, 0.3, n))
    hits = rng.binomial(5, 0.3, (2, n)) / 5 - rng.binomial(5, 0.3, (2, n)) / 5
    ngram = (hits[0], hits[1] + (extra > 0) * rng.binomial(5, 0.4, n) / 5)
    return {"nll": nll, "ngram_exact": ngram}


def test_compare_gaps_holds_its_level_and_finds_the_more_familiar_model() -> None:
    rng = np.random.default_rng(3)
    runs = 300
    null = [compare_gaps(_gaps(rng, 30, 0.0)) for _ in range(runs)]
    fpr = np.mean([r["p_value"] <= 0.05 for r in null])
    per_test = {
        k: np.mean([r[k]["two_sided"] <= 0.05 for r in null]) for k in ("nll", "ngram_exact")
    }
    bound = 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs)  # 0.075
    assert fpr <= bound and max(per_test.values()) <= bound, (fpr, per_test)
    assert sum(r["direction"] != "none" for r in null) == sum(r["p_value"] <= 0.05 for r in null)

    leaked = [compare_gaps(_gaps(rng, 30, 0.4)) for _ in range(50)]
    assert np.mean([r["direction"] == "B" for r in leaked]) >= 0.9
    swapped = compare_gaps({k: (b, a) for k, (a, b) in _gaps(rng, 30, 0.4).items()})
    assert swapped["direction"] == "A" and swapped["nll"]["difference"] < 0


def test_compare_gaps_leaves_out_a_metric_without_items() -> None:
    r = compare_gaps({"nll": ([0.1, 0.2], [0.3, 0.1]), "ngram_edit": ([], [])})
    assert r["ngram_edit"] is None and r["tested"] == ["nll"]
    assert r["p_value"] == r["nll"]["two_sided"]  # one test: no Bonferroni factor
    none = compare_gaps({"nll": ([], [])})
    assert none["p_value"] is None and none["direction"] == "none"
    with pytest.raises(ValueError, match="nll: A's and B's gaps must be paired"):
        compare_gaps({"nll": ([0.1], [0.2, 0.3])})


def test_paired_auc_difference_is_delong_on_the_runs_own_aucs() -> None:
    from contamscope.detectors.membership import mann_whitney

    rng = np.random.default_rng(5)
    shared_b, shared_r = rng.normal(0.4, 1, 60), rng.normal(0, 1, 50)
    xa, ya = shared_b + rng.normal(0, 0.7, 60), shared_r + rng.normal(0, 0.7, 50)
    xb, yb = shared_b + rng.normal(0, 0.7, 60), shared_r + rng.normal(0, 0.7, 50)
    r = paired_auc_difference(xa, ya, xb, yb)
    assert r["a"] == pytest.approx(mann_whitney(xa, ya, n_boot=100).auc)
    assert r["b"] == pytest.approx(mann_whitney(xb, yb, n_boot=100).auc)
    # DeLong's standard error against a paired bootstrap's (items resampled alike for both)
    boots = []
    for _ in range(1500):
        i, j = rng.integers(0, 60, 60), rng.integers(0, 50, 50)
        boots.append(paired_auc_difference(xa[i], ya[j], xb[i], yb[j])["difference"])
    se = (r["ci"][1] - r["ci"][0]) / (2 * 1.959964)
    assert se == pytest.approx(float(np.std(boots)), rel=0.15)
    # an AUC reads ranks only: another scale of B's statistic changes nothing
    same = paired_auc_difference(xa, ya, np.exp(xb), np.exp(yb))
    assert same["two_sided"] == pytest.approx(r["two_sided"])
    assert paired_auc_difference(xa, ya, xa, ya)["two_sided"] == 1.0


def test_compare_aucs_holds_its_level_and_finds_the_better_separating_model() -> None:
    rng = np.random.default_rng(8)

    def draw(extra: float) -> dict[str, tuple[Any, Any, Any, Any]]:
        sb, sr = rng.normal(0.5, 1, 30), rng.normal(0, 1, 60)
        xb = sb + rng.normal(0, 1, 30) + extra
        return {
            "loss": (
                sb + rng.normal(0, 1, 30),
                sr + rng.normal(0, 1, 60),
                3 * xb,
                3 * (sr + rng.normal(0, 1, 60)),
            )
        }

    runs = 500
    null = [compare_aucs(draw(0.0)) for _ in range(runs)]
    rate = np.mean([r["p_value"] <= 0.05 for r in null])
    assert rate <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs), rate
    found = [compare_aucs(draw(1.5)) for _ in range(50)]
    assert np.mean([r["direction"] == "B" for r in found]) >= 0.8


def test_the_p_floor_is_reached_by_the_most_extreme_pairs_and_said_when_above_alpha() -> None:
    """With 6 pairs no combined p below 3 x 2/2^6 = 0.094 exists: a verdict of "no difference"
    there said nothing about why, as if the comparison could have found one."""
    from contamscope.detectors.compare import paired_p_floor
    from contamscope.pipeline.compare import compare_verdict

    def extreme(n: int) -> list[PairedItem]:  # B ahead on every item and every statistic
        return [
            PairedItem(f"q{i}", None, False, True, 0.2, 0.9, -1.0 - i, 2.0 + i) for i in range(n)
        ]

    for n in (1, 3, 6, 7, 9):
        res = compare_pairs(extreme(n))
        assert res["p_floor"] == pytest.approx(paired_p_floor(n, 3))
        assert res["p_value"] == pytest.approx(res["p_floor"])  # the floor is attained
    six = compare_verdict(compare_pairs(extreme(6)), "a", "b")
    assert six["label"] == "no difference"
    assert "on 6 paired items no p-value below 0.0938 was possible" in six["text"]
    seven = compare_verdict(compare_pairs(extreme(7)), "a", "b")
    assert seven["label"] == "B more drawn to the published orders"
    calm = compare_verdict(compare_pairs(_pairs(np.random.default_rng(3), 40, 0.0)), "a", "b")
    assert "was possible" not in calm["text"] and "absence of evidence" in calm["text"]
    gaps = compare_gaps({"nll": ([0.0] * 4, [1.0] * 4)})
    assert gaps["p_floor"] == pytest.approx(2 / 2**4) and gaps["p_value"] == gaps["p_floor"]


def test_few_items_or_no_delong_variance_get_the_exact_swap_test_not_p_zero() -> None:
    """Two models on 3 + 3 items, one separating them perfectly each way: DeLong's variance is
    0 and it said p = 0 ("<1e-300"); every swap of the models' values on any items is as likely
    under H0, and 2 of the 64 are as extreme."""
    r = paired_auc_difference([1, 2, 3], [4, 5, 6], [4, 5, 6], [1, 2, 3])
    assert (r["a"], r["b"], r["difference"]) == (0.0, 1.0, 1.0)
    assert r["two_sided"] == pytest.approx(2 / 64) and r["b_greater"] == pytest.approx(1 / 64)
    assert r["method"] == "paired swap test of the AUC difference (exact)" and r["ci"] is None
    # by brute force on a less extreme case: the share of swaps at least as far as observed
    import itertools

    from contamscope.detectors.membership import mann_whitney

    xa, ya, xb, yb = [0.3, 0.9, 0.1], [0.5, 0.2, 0.4], [0.8, 0.7, 0.6], [0.1, 0.95, 0.3]
    auc = lambda x, y: mann_whitney(np.array(x), np.array(y), n_boot=10).auc  # noqa: E731
    d0 = auc(xb, yb) - auc(xa, ya)
    va, vb = xa + ya, xb + yb
    ge = 0
    for swap in itertools.product([0, 1], repeat=6):
        a = [vb[i] if s else va[i] for i, s in enumerate(swap)]
        b = [va[i] if s else vb[i] for i, s in enumerate(swap)]
        ge += auc(b[:3], b[3:]) - auc(a[:3], a[3:]) >= d0 - 1e-12
    got = paired_auc_difference(xa, ya, xb, yb)
    assert got["b_greater"] == pytest.approx(ge / 64)
    # the comparison says which p-values its size allows
    c = compare_aucs({"min_k_pp": ([1, 2, 3], [4, 5, 6], [4, 5, 6], [1, 2, 3])})
    assert c["p_floor"] == pytest.approx(2 / 64) and c["p_value"] == pytest.approx(2 / 64)
    # many items with every item placed alike: a Monte Carlo swap test, never p = 0
    far = paired_auc_difference(
        np.arange(20.0) + 100, np.arange(20.0), np.arange(20.0) - 100, np.arange(20.0)
    )
    assert far["method"].endswith("(Monte Carlo)") and far["two_sided"] > 0


def test_the_share_difference_interval_stays_within_minus_one_and_one() -> None:
    """A t interval on 3 items reached [-1.394, +1.539] for a difference of shares."""
    from contamscope.detectors.compare import PairedItem, compare_pairs

    pairs = [
        PairedItem(f"i{k}", None, False, False, sa, sb, 0.0, 0.0)
        for k, (sa, sb) in enumerate([(0.0, 1.0), (1.0, 0.0), (0.3, 0.5)])
    ]
    ci = compare_pairs(pairs)["share"]["ci"]
    assert ci is not None and -1.0 <= ci[0] < ci[1] <= 1.0 and ci[0] == -1.0


def test_few_benchmark_items_among_many_references_get_the_swap_test_not_delong() -> None:
    """DeLong's test ran whenever benchmark + reference items passed 16, however few benchmark
    items: its variance then rests on 2-8 placements, and at 3 + 100 items two exchangeable
    models were called different with p <= 0.05 in 16% of pairs, at 2 + 40 in 19%
    (statistics audit)."""
    rng = np.random.default_rng(11)
    runs, hits = 200, 0
    for k in range(runs):
        sb, sr = rng.normal(size=2), rng.normal(size=40)
        xa, xb = sb + rng.normal(size=2), sb + rng.normal(size=2)
        ya, yb = sr + rng.normal(size=40), sr + rng.normal(size=40)
        r = paired_auc_difference(xa, ya, xb, yb)
        if k == 0:
            assert r["method"] == "paired swap test of the AUC difference (Monte Carlo)"
            assert r["ci"] is not None  # DeLong's interval is still given, as a description
        hits += r["two_sided"] <= 0.05
    assert hits / runs <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs), hits / runs
    # both sets at least DELONG_MIN: DeLong's test, as before
    from contamscope.detectors.compare import DELONG_MIN

    n = DELONG_MIN
    big = paired_auc_difference(rng.normal(size=n), rng.normal(size=n), rng.normal(size=n),
                                rng.normal(size=n))  # fmt: skip
    assert big["method"].startswith("DeLong") and big["z"] is not None


def test_items_sharing_one_option_list_are_swapped_together() -> None:
    """Five items with one option list, which B ranks alike and A does not favour: counted as
    five independent pairs the three tests read 1/32 one-sided each; the five are one draw of
    their published order, so swapping the models for all of them at once gives 1/2. Three
    items of their own are pairs as before."""
    from dataclasses import replace

    group = [
        PairedItem(f"g{i}", None, False, True, 0.3, 0.9, -0.5, 2.0 + i, group="red|green|blue")
        for i in range(5)
    ]
    own = [PairedItem(f"o{i}", None, False, False, 0.5, 0.5, 0.0, 0.0) for i in range(3)]
    plain = compare_pairs([replace(p, group=None) for p in group] + own)
    assert plain["alg1"]["b_greater"] == pytest.approx(1 / 32)
    assert plain["gap"]["b_greater"] == pytest.approx(1 / 32)
    assert "shared_orders" not in plain and plain["p_floor"] == paired_p_floor(8, 3)
    grouped = compare_pairs(group + own)
    for key in ("alg1", "share", "gap"):
        assert grouped[key]["b_greater"] == pytest.approx(0.5), key
    assert grouped["alg1"]["method"] == "sign flip of groups (exact)"
    # the counts and differences are the items' own
    assert (grouped["alg1"]["b_only"], grouped["gap"]["difference"]) == (
        5,
        plain["gap"]["difference"],
    )
    assert grouped["shared_orders"]["n_items"] == 5 and grouped["p_floor"] == paired_p_floor(4, 3)
    # the intervals count a list once too: counted as 8 pairs the Algorithm-1 interval
    # excluded 0 beside p = 1 (QA); one cluster per list, it is wide (4 clusters)
    assert plain["alg1"]["ci"][0] > 0
    for key in ("alg1", "share", "gap"):
        ci = grouped[key]["ci"]
        assert ci[0] < 0 < ci[1] and grouped[key]["ci_method"].startswith("cluster-robust"), key


def test_the_groups_mcnemar_test_equals_enumerating_every_swap() -> None:
    """signed_sum_test against all 2^k swaps of k groups' net counts (B only minus A only),
    and against the exact McNemar test when every group is one item."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        nets = rng.integers(-3, 4, size=int(rng.integers(1, 9))).tolist()
        observed = sum(nets)
        sums = [
            sum(s * x for s, x in zip(signs, nets, strict=True))
            for signs in itertools.product((1, -1), repeat=len(nets))
        ]
        got = signed_sum_test(nets)
        assert got["b_greater"] == pytest.approx(np.mean([x >= observed for x in sums]))
        assert got["a_greater"] == pytest.approx(np.mean([x <= observed for x in sums]))
    for b_only, a_only in ((5, 0), (7, 3), (2, 9), (0, 0)):
        want = mcnemar(b_only, a_only)
        got = signed_sum_test([1] * b_only + [-1] * a_only)
        assert (got["b_greater"], got["a_greater"]) == pytest.approx(
            (want["b_greater"], want["a_greater"])
        )


def test_groups_sharing_one_option_list_keep_the_comparison_at_its_level() -> None:
    """Simulated clean pairs of runs: 6 groups of 10 items on one option list each; each model
    has its own taste for the arrangements of a group's options (rho 0.9 of an item's values),
    the same for both models in law, so H0 holds. Counted as 60 independent pairs the verdict
    says the models differ in far more than 5% of runs; swapping each group at once, within
    5% (3 standard errors)."""
    from dataclasses import replace

    rng = np.random.default_rng(5)
    runs = 150
    hits = np.zeros(2)
    for _ in range(runs):
        pairs = []
        for g in range(6):
            fa, fb = rng.normal(size=24), rng.normal(size=24)
            for i in range(10):
                a = math.sqrt(0.9) * fa + math.sqrt(0.1) * rng.normal(size=24)
                b = math.sqrt(0.9) * fb + math.sqrt(0.1) * rng.normal(size=24)
                pairs.append(
                    PairedItem(
                        f"g{g}-{i}",
                        None,
                        bool(a[0] > a[1:].max()),
                        bool(b[0] > b[1:].max()),
                        beaten_share(a),
                        beaten_share(b),
                        float(a[0] - a[1:].mean()),
                        float(b[0] - b[1:].mean()),
                        group=f"list{g}",
                    )
                )
        plain = compare_pairs([replace(p, group=None) for p in pairs])["p_value"]
        grouped = compare_pairs(pairs)["p_value"]
        hits += [plain <= 0.05, grouped <= 0.05]
    rates = hits / runs
    assert rates[0] > 0.15
    assert rates[1] <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)
