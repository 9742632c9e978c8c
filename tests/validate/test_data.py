"""Item draw, leaked/clean split and training text (pure)."""

from __future__ import annotations

import pytest

from contamscope.data.items import MCQItem
from contamscope.errors import ConfigError
from contamscope.perturb import TEMPLATES
from contamscope.validate import split_items, training_order, training_text


def _items(n: int) -> list[MCQItem]:
    return [
        MCQItem(id=f"q{i}", question=f"Question {i}?", options=("w", "x", "y", "z"), answer=0)
        for i in range(n)
    ]


def test_split_is_seeded_disjoint_and_half() -> None:
    items = _items(30)
    a = split_items(items, 11, seed=3)
    b = split_items(items, 11, seed=3)
    c = split_items(items, 11, seed=4)
    assert a == b
    assert a.leaked_ids != c.leaked_ids
    assert len(a.items) == 11 and len(a.leaked) == 6 and len(a.clean) == 5
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
    with pytest.raises(ConfigError, match="only 3 usable items"):
        split_items(items, 4)
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
    assert text == "Question 0?:\nA:w\nB:x\nC:y\nD:z\n"
    with pytest.raises(ConfigError):
        training_order(item, "c", 0)  # type: ignore[arg-type]
