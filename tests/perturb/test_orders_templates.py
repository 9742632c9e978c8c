import math

import pytest

from contamscope.data.items import MCQItem
from contamscope.errors import ConfigError
from contamscope.perturb import TEMPLATES, PromptTemplate, apply_order, get_template, option_orders


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_exhaustive_orders_are_all_distinct_permutations_identity_first(n: int) -> None:
    s = option_orders(n)
    assert s.exhaustive
    assert len(s.orders) == math.factorial(n) == len(set(s.orders))
    assert s.orders[0] == tuple(range(n))
    assert all(sorted(o) == list(range(n)) for o in s.orders)


def test_monte_carlo_orders_are_seeded_distinct_and_exclude_identity_after_first() -> None:
    a = option_orders(8, max_exhaustive=6, mc_orders=50, seed=1, key="q7")
    b = option_orders(8, max_exhaustive=6, mc_orders=50, seed=1, key="q7")
    c = option_orders(8, max_exhaustive=6, mc_orders=50, seed=2, key="q7")
    d = option_orders(8, max_exhaustive=6, mc_orders=50, seed=1, key="q8")
    assert not a.exhaustive and len(a.orders) == 51
    assert a.orders == b.orders
    assert a.orders != c.orders and a.orders != d.orders
    assert a.orders[0] == tuple(range(8)) and tuple(range(8)) not in a.orders[1:]
    assert len(set(a.orders)) == 51


def test_monte_carlo_sample_is_capped_at_all_other_orders() -> None:
    s = option_orders(4, max_exhaustive=3, mc_orders=1000)
    assert len(s.orders) == 24 and len(set(s.orders)) == 24


def test_templates_render_prefix_and_relabelled_continuation() -> None:
    item = MCQItem(id="x", question="Which is red?", options=("sky", "blood", "grass"))
    t = TEMPLATES["paper"]
    assert t.prefix(item) == "Which is red?:\n"
    assert t.continuation(item, (0, 1, 2)) == "A:sky\nB:blood\nC:grass\n"
    assert t.continuation(item, (2, 0, 1)) == "A:grass\nB:sky\nC:blood\n"
    m = get_template("mmlu")
    assert (
        m.prefix(item) + m.continuation(item, (1, 0, 2))
        == "Which is red?\nA. blood\nB. sky\nC. grass\n"
    )
    assert apply_order(("a", "b", "c"), (2, 1, 0)) == ("c", "b", "a")


def test_template_errors_name_the_option() -> None:
    with pytest.raises(ConfigError, match="--template 'nope'"):
        get_template("nope")
    with pytest.raises(ConfigError, match="question"):
        PromptTemplate("bad", question="no placeholder")
