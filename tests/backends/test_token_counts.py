"""Token counts without a model (``inspect --model``) against what the engine runs."""

from __future__ import annotations

from contamscope.backends.base import ScoreRequest
from contamscope.backends.tree_plan import token_counts, trie_size
from contamscope.data import MCQItem
from contamscope.perturb import TEMPLATES, option_orders


def _requests(items: list[MCQItem]) -> list[ScoreRequest]:
    t = TEMPLATES["paper"]
    return [
        ScoreRequest(t.prefix(it), t.continuation(it, o))
        for it in items
        for o in option_orders(it.n_options).orders
    ]


ITEMS = [
    MCQItem(
        "q1",
        "Which planet is the largest in the solar system",
        ("Mars", "Venus", "Jupiter", "Earth"),
    ),
    MCQItem("q2", "哪个城市是中国的首都", ("上海", "北京", "广州", "深圳", "成都")),
    # no space or newline between the question and the first option line: the boundary
    # token may straddle it
    MCQItem("q3", "2+2=", ("3", "4", "5")),
]


def test_trie_size_counts_each_shared_leading_token_once() -> None:
    assert trie_size([]) == 0
    assert trie_size([[1, 2, 3]]) == 3
    assert trie_size([[1, 2, 3], [1, 2, 3]]) == 3  # a repeated continuation runs once
    assert trie_size([[1, 2], [1, 2, 3]]) == 3  # one continuation extends another
    assert trie_size([[5, 1], [4, 1], [5, 2]]) == 5


def test_minimum_equals_the_tokens_the_engine_counts(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    requests = _requests(ITEMS)
    tiny_backend.tokens_min = 0
    tiny_backend.score(requests)
    counts = token_counts(
        tiny_backend.planner().tokenizer, tiny_backend.bos_id, requests, tiny_backend.max_length
    )
    assert counts.minimum == tiny_backend.tokens_min
    encoded = tiny_backend.encode_many(requests)
    assert counts.reference == sum(len(e.prefix) + len(e.cont) for e in encoded)
    assert counts.too_long == 0
    # 4 options: 24 orders share each question; the trie is far smaller than 24 full texts
    assert counts.reference > 3 * counts.minimum


def test_requests_longer_than_the_context_are_counted_apart(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    requests = _requests(ITEMS[:1])
    tok = tiny_backend.planner().tokenizer
    whole = token_counts(tok, tiny_backend.bos_id, requests)
    cut = token_counts(tok, tiny_backend.bos_id, requests, max_length=5)
    assert cut.too_long == len(requests) and cut.reference == cut.minimum == 0
    assert whole.too_long == 0 and whole.minimum > 0
