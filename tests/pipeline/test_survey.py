"""What a permutation run would read, counted without a model (`contamscope inspect`)."""

from __future__ import annotations

import math

import pytest

from contamscope.data import LoadResult, MCQItem
from contamscope.pipeline import PermutationConfig
from contamscope.pipeline.survey import survey_permutation

ITEMS = [
    MCQItem("a", "Pick a planet", ("Mars", "Venus", "Jupiter", "Earth"), subject="astro"),
    MCQItem("b", "How many legs has a spider?", ("4", "6", "8", "10"), subject="bio"),
    MCQItem("c", "Which are mammals?", ("Whale", "Bat", "Dog", "All of the above"), subject="bio"),
    MCQItem("d", "Pick a colour", ("red", "green", "blue", "yellow", "white"), subject="art"),
    MCQItem("e", "Pick a number", ("7", "3", "9", "1", "5", "2", "8"), subject="art"),
    MCQItem("f", "pick a planet", ("Mars", "Venus", "Jupiter", "Earth"), subject="astro"),
]


def _loaded(items: list[MCQItem]) -> LoadResult[MCQItem]:
    return LoadResult(items, [], "toy", "jsonl", "0" * 64, ["toy.jsonl"])


def test_counts_what_a_run_scores_sets_aside_and_tests() -> None:
    found = survey_permutation(_loaded(ITEMS), ITEMS, PermutationConfig(mc_orders=99))
    c = found["counts"]
    assert c["items_selected"] == 6 and c["subjects"] == 3
    assert c["options_histogram"] == {4: 4, 5: 1, 7: 1}
    assert c["items_excluded"] == 1
    assert found["excluded"]["by_id"] == {
        "c": "option D refers to other options: 'All of the above'"
    }
    assert found["excluded"]["texts"] == {"'all of the above'": 1}
    # the spider's legs are in increasing order: scored, but not read by the verdict
    assert found["natural_order"]["by_id"] == {"b": "numbers in increasing order"}
    assert c["items_scored"] == 5 and c["items_natural_order"] == 1 and c["items_tested"] == 4
    assert found["repeats"] == {"f": "a"} and c["repeats"] == 1
    assert found["by_subject"] == {
        "art": {"items": 2, "excluded": 0, "natural_order": 0, "tested": 2},
        "astro": {"items": 2, "excluded": 0, "natural_order": 0, "tested": 2},
        "bio": {"items": 2, "excluded": 1, "natural_order": 1, "tested": 0},
    }
    orders = found["orders"]
    assert orders["per_item"] == {"4": 24, "5": 120, "7": 100}  # 7 > max_exhaustive: 1 + 99
    assert orders["total"] == 3 * 24 + 120 + 100 and orders["sampled_items"] == 1
    assert found["tokens"] is None  # no tokenizer given
    # as many Monte Carlo orders as an item has others: all of them, no sample (the run
    # scores them as an exhaustive item; inspect said "a Monte Carlo sample": diff-review QA)
    every = survey_permutation(
        _loaded(ITEMS), ITEMS, PermutationConfig(max_exhaustive=4, mc_orders=5039)
    )
    assert every["orders"]["per_item"] == {"4": 24, "5": 120, "7": 5040}
    assert every["orders"]["sampled_items"] == 0


def test_include_non_exchangeable_scores_every_item() -> None:
    found = survey_permutation(
        _loaded(ITEMS), ITEMS, PermutationConfig(include_non_exchangeable=True, max_exhaustive=7)
    )
    assert found["counts"]["items_excluded"] == 0 and found["counts"]["items_scored"] == 6
    assert found["orders"]["per_item"]["7"] == math.factorial(7)


def test_conventions_are_read_over_every_loaded_item_not_the_selection() -> None:
    numbered = [
        MCQItem(f"n{i}", f"How many {i}?", tuple(str(i + k) for k in (1, 2, 3, 4)))
        for i in range(30)
    ]
    found = survey_permutation(_loaded(numbered), numbered[:2])
    rows = {r["convention"]: r for r in found["conventions"]["conventions"]}
    assert rows["sorted numbers"]["items"] == 30 and rows["sorted numbers"]["published"] == 30
    assert rows["sorted numbers"]["chance"] == pytest.approx(2 / 24)
    assert rows["sorted numbers"]["set_aside"] is True
    assert found["conventions"]["ordered_by_convention"] is True
    assert found["counts"]["items_natural_order"] == 2


def test_counts_tokens_with_a_tokenizer(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    from contamscope.backends.tokenizer import load_tokenizer

    tok = load_tokenizer(tiny_backend.spec, {"bos": "<|endoftext|>"})
    assert tok.bos_id == tiny_backend.bos_id and tok.max_length == tiny_backend.max_length
    found = survey_permutation(
        _loaded(ITEMS), ITEMS, PermutationConfig(mc_orders=99), tokenizer=tok
    )
    tokens = found["tokens"]
    assert tokens["prefix_tree"] > 0 and tokens["reference"] > 2 * tokens["prefix_tree"]
    assert tokens["ratio"] == pytest.approx(tokens["reference"] / tokens["prefix_tree"])
    assert tokens["items_too_long"] == 0 and tokens["context"] == 512


def test_an_item_longer_than_the_context_is_counted_out_as_a_run_leaves_it_out(
    tiny_backend,  # type: ignore[no-untyped-def]
) -> None:
    """inspect counted such an item as scored and tested; the run then excluded it."""
    from contamscope.backends.tokenizer import load_tokenizer

    tok = load_tokenizer(tiny_backend.spec, {"bos": "<|endoftext|>"})
    long = MCQItem("z", "word " * 600 + "?", ("yes", "no", "maybe"), subject="bio")
    items = [*ITEMS, long]
    found = survey_permutation(
        _loaded(items), items, PermutationConfig(mc_orders=99), tokenizer=tok
    )
    c, short = (
        found["counts"],
        survey_permutation(_loaded(ITEMS), ITEMS, PermutationConfig(mc_orders=99)),
    )
    assert c["items_too_long"] == 1 == found["tokens"]["items_too_long"]
    assert c["items_excluded"] == short["counts"]["items_excluded"] + 1
    assert (c["items_scored"], c["items_tested"]) == (
        short["counts"]["items_scored"],
        short["counts"]["items_tested"],
    )
    assert found["excluded"]["by_id"]["z"] == "longer than the model's context window"
    assert found["excluded"]["texts"] == short["excluded"]["texts"]  # what options refer to
    assert found["by_subject"]["bio"]["excluded"] == short["by_subject"]["bio"]["excluded"] + 1
    assert found["orders"]["total"] == short["orders"]["total"]


def test_measure_scales_the_sample_time_by_the_runs_tokens(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    from contamscope.backends.tokenizer import load_tokenizer, tokenizer_of
    from contamscope.pipeline.survey import measure_permutation

    config = PermutationConfig(mc_orders=99)
    counted = load_tokenizer(tiny_backend.spec, {"bos": "<|endoftext|>"})
    found = survey_permutation(_loaded(ITEMS), ITEMS, config, tokenizer=counted)
    timed = measure_permutation(
        found, tiny_backend, ITEMS, config, n_items=2, tokenizer=tokenizer_of(tiny_backend)
    )
    assert timed["items"] == 2 and timed["basis"] == "prefix-tree tokens"
    assert timed["run_cost"] == found["tokens"]["prefix_tree"] > timed["sample_cost"] > 0
    assert timed["scoring_seconds"] == pytest.approx(
        timed["seconds"] * timed["run_cost"] / timed["sample_cost"]
    )
    # a model on this CPU: a run computes the detectors inline, so their time counts
    assert timed["detectors_inline"] is True and timed["detector_seconds"] > 0
    assert timed["estimate_seconds"] == pytest.approx(
        timed["scoring_seconds"] + timed["detector_seconds"]
    )
    # a sample of every scored item costs what the run costs: the backend's tokenizer and the
    # one read alone count alike, and the estimate is the time measured
    whole = measure_permutation(
        found, tiny_backend, ITEMS, config, n_items=99, tokenizer=tokenizer_of(tiny_backend)
    )
    assert whole["items"] == 5 and whole["orders"] == found["orders"]["total"]
    assert whole["sample_cost"] == whole["run_cost"]
    assert whole["scoring_seconds"] == pytest.approx(whole["seconds"])
    # without token counts the orders are the basis
    bare = survey_permutation(_loaded(ITEMS), ITEMS, config)
    by_orders = measure_permutation(bare, tiny_backend, ITEMS, config, n_items=1)
    assert by_orders["basis"] == "orders" and by_orders["run_cost"] == bare["orders"]["total"]
