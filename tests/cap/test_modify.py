"""CAP modifications: seeded, pure, answer re-mapped, answer-changing edits reported."""

from __future__ import annotations

from contamscope.data.items import MCQItem, QAItem
from contamscope.perturb.modify import (
    draw_year_shift,
    paraphrase_prompt,
    reorder_options,
    shift_item_years,
    shift_years,
    split_context,
)


def test_reorder_options_remaps_answer_and_is_seeded() -> None:
    for i in range(30):
        it = MCQItem(f"q{i}", "Q?", ("a", "b", "c", "d"), answer=i % 4)
        mod, order = reorder_options(it, seed=3)
        assert sorted(order) == [0, 1, 2, 3] and order != (0, 1, 2, 3)
        assert mod.options == tuple(it.options[k] for k in order)
        assert mod.options[mod.answer] == it.options[it.answer]
        assert reorder_options(it, seed=3)[1] == order
        assert mod.meta["cap_order"] == list(order)
    two = MCQItem("x", "Q?", ("yes", "no"), answer=None)
    mod, order = reorder_options(two)
    assert order == (1, 0) and mod.answer is None


def test_shift_years_keeps_other_numbers() -> None:
    text = "In 2019 revenue was 2,019.5; 2018-2019 growth; 12019 units; ratio 0.2019; FY2020"
    out, n = shift_years(text, 34)
    assert out == "In 2053 revenue was 2,019.5; 2052-2053 growth; 12019 units; ratio 0.2019; FY2054"
    assert n == 4
    assert shift_years("1799 and 2100 stay", 5) == ("1799 and 2100 stay", 0)


def test_shift_item_years_reports_answer_changes() -> None:
    q = QAItem("a", "Sales were 5 in 2018 and 8 in 2019. Change?", "3")
    mod, what = shift_item_years(q, -39)
    assert mod.question == "Sales were 5 in 1979 and 8 in 1980. Change?"
    assert mod.answer == "3" and not what.changes_answer and what.n_input == 2
    y = QAItem("b", "Which year had higher sales, 2018 or 2019?", "2019")
    mod, what = shift_item_years(y, 10)
    assert what.changes_answer and mod.answer == "2029"
    assert what.to_dict()["changes_answer"] is True


def test_year_shift_draw_is_seeded_and_bounded() -> None:
    draws = {draw_year_shift(s) for s in range(50)}
    assert all(20 <= abs(d) <= 40 for d in draws)
    assert draw_year_shift(7) == draw_year_shift(7)
    assert any(d < 0 for d in draws) and any(d > 0 for d in draws)


def test_paraphrase_request_covers_only_the_passage() -> None:
    head, passage = split_context("Please summarize.\nContext:Revenue rose.\nCosts fell.")
    assert head == "Please summarize.\nContext:" and passage.startswith("Revenue")
    prompt = paraphrase_prompt(passage)
    assert "Revenue rose.\nCosts fell." in prompt and "Please summarize" not in prompt
    assert split_context("no marker") == ("", "no marker")
