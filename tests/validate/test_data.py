"""Item draw, leaked/clean split and training text (pure)."""

from __future__ import annotations

import pytest

from contamscope.data.items import MCQItem, QAItem
from contamscope.errors import ConfigError
from contamscope.perturb import TEMPLATES
from contamscope.validate import option_set_key, split_items, training_order, training_text


def _items(n: int) -> list[MCQItem]:
    return [
        MCQItem(id=f"q{i}", question=f"Question {i}?", options=(f"w{i}", "x", "y", "z"), answer=0)
        for i in range(n)
    ]


def test_split_is_seeded_disjoint_and_half() -> None:
    items = _items(30)
    a = split_items(items, 11, seed=3)
    b = split_items(items, 11, seed=3)
    c = split_items(items, 11, seed=4)
    assert a == b
    assert a.leaked_ids != c.leaked_ids
    assert len(a.items) == 11 and sorted((len(a.leaked), len(a.clean))) == [5, 6]
    assert a.leaked_ids.isdisjoint(it.id for it in a.clean)
    ids = [it.id for it in a.items]
    assert ids == sorted(ids, key=lambda s: int(s[1:]))  # benchmark order kept


def test_split_skips_non_exchangeable_and_refuses_too_many() -> None:
    items = _items(3) + [
        MCQItem(id="aota", question="?", options=("a", "b", "c", "All of the above"), answer=3)
    ]
    s = split_items(items, 3)
    assert "aota" not in {it.id for it in s.items}
    assert "aota" in {it.id for it in split_items(items, 4, include_non_exchangeable=True).items}
    with pytest.raises(
        ConfigError,
        match=r"only 3 usable items in the benchmark \(1 non-exchangeable item left out\)",
    ):
        split_items(items, 4)
    # nothing left out, nothing said about it (BenBench's and CAP's items have no options)
    with pytest.raises(ConfigError, match=r"only 3 usable items in the benchmark$"):
        split_items(_items(3), 4)
    with pytest.raises(ConfigError, match="at least 2"):
        split_items(items, 1)


def test_training_orders_and_text() -> None:
    item = _items(1)[0]
    assert training_order(item, "a", 0) == (0, 1, 2, 3)
    order_b = training_order(item, "b", 0)
    assert order_b != (0, 1, 2, 3) and sorted(order_b) == [0, 1, 2, 3]
    assert training_order(item, "b", 0) == order_b  # seeded by seed and item id
    tpl = TEMPLATES["paper"]
    text = training_text(item, tpl, (0, 1, 2, 3))
    # exactly the prefix + continuation the permutation pipeline scores
    assert text == tpl.prefix(item) + tpl.continuation(item, (0, 1, 2, 3))
    assert text == "Question 0?:\nA:w0\nB:x\nC:y\nD:z\n"
    with pytest.raises(ConfigError):
        training_order(item, "c", 0)  # type: ignore[arg-type]


def test_items_sharing_an_option_set_are_one_unit() -> None:
    # moral_scenarios-style: one option block shared by many questions, in any order and case
    block = ("Wrong, Wrong", "Wrong, Not wrong", "Not wrong, Wrong", "Not wrong, Not wrong")
    shared = [
        MCQItem(
            id=f"m{i}",
            question=f"Scenario {i}",
            options=block[i % 4 :] + block[: i % 4] if i % 2 else tuple(o.upper() for o in block),
            answer=0,
        )
        for i in range(8)
    ]
    items = _items(24) + shared
    for seed in range(30):
        s = split_items(items, 32, seed=seed)
        leaked_m = {it.id for it in s.leaked if it.id.startswith("m")}
        clean_m = {it.id for it in s.clean if it.id.startswith("m")}
        assert not (leaked_m and clean_m), seed
        assert len(s.leaked) + len(s.clean) == 32
        # never a leaked and a clean item with the same option set
        keys = {option_set_key(it) for it in s.leaked}
        assert not keys & {option_set_key(it) for it in s.clean}
    # the block is leaked in about half of the draws, as a single item is: groups were ordered
    # by their first member in a shuffled list, so the larger a group the likelier it came
    # first (MMLU's moral_scenarios block was leaked in 289 of 300 draws; helper audit)
    leaked = sum(
        any(it.id.startswith("m") for it in split_items(items, 32, seed=seed).leaked)
        for seed in range(400)
    )
    assert 160 <= leaked <= 240, leaked  # binomial(400, 1/2): +-4 standard deviations
    single = sum("q0" in split_items(items, 32, seed=seed).leaked_ids for seed in range(400))
    assert 160 <= single <= 240, single
    # singletons only: exactly half, as before the grouping
    s = split_items(_items(30), 10, seed=5)
    assert (len(s.leaked), len(s.clean)) == (5, 5)
    with pytest.raises(ConfigError, match="none is left clean"):
        split_items(shared, 4, seed=0)


def test_qa_items_split_each_on_their_own() -> None:
    qa = [QAItem(id=f"g{i}", question=f"What is {i} + 1?", answer=str(i + 1)) for i in range(20)]
    s = split_items(qa, 9, seed=2)
    assert sorted((len(s.leaked), len(s.clean))) == [4, 5]
    assert s.leaked_ids.isdisjoint(it.id for it in s.clean)
