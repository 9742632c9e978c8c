"""Per-token statistics and greedy generation of the transformers backend (tiny model)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from contamscope.backends import GenerateRequest, ScoreRequest
from contamscope.store import CachedScorer, ScoreCache

TEXTS = [
    ScoreRequest("Natalia sold clips to 48 of her friends in April. Answer:", " 48/2 = 24 #### 72"),
    ScoreRequest("", "A text scored from the start, with no prefix at all."),
    ScoreRequest("下列有关鳃弓的描述，错误的是", "由间充质增生形成"),
    ScoreRequest("Ends in a space ", "x y z"),
]


def _full_forward(backend, req: ScoreRequest) -> tuple[list[float], list[int]]:  # type: ignore[no-untyped-def]
    e = backend.encode(req)
    ids = torch.tensor([list(e.prefix) + e.cont])
    with torch.inference_mode():
        logp = torch.log_softmax(backend.model(ids).logits.double(), -1)[0]
    p = len(e.prefix)
    rows = logp[p - 1 : p - 1 + len(e.cont)]
    return [float(rows[j, t]) for j, t in enumerate(e.cont)], rows.argmax(-1).tolist()


def test_token_stats_match_one_full_forward_pass(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    got = tiny_backend.token_stats(TEXTS)
    for req, st in zip(TEXTS, got):
        lps, best = _full_forward(tiny_backend, req)
        assert list(st.logprobs) == pytest.approx(lps, abs=1e-3)
        assert list(st.greedy) == best
        assert sum(st.logprobs) == pytest.approx(tiny_backend.naive_logprob(req), abs=1e-3)
    assert got[3].boundary_chars == 1


def test_token_stats_independent_of_batching(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    ref = tiny_backend.token_stats(TEXTS)
    old = tiny_backend.max_batch_tokens
    try:
        tiny_backend.max_batch_tokens = 8  # one text per batch
        alone = tiny_backend.token_stats(list(reversed(TEXTS)))[::-1]
    finally:
        tiny_backend.max_batch_tokens = old
    for a, b in zip(ref, alone):
        assert a.tokens == b.tokens and a.greedy == b.greedy
        assert list(a.logprobs) == pytest.approx(list(b.logprobs), abs=1e-4)


def test_token_stats_too_long_gives_nan(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    st = tiny_backend.token_stats([ScoreRequest("word " * 600, "x y"), TEXTS[0]])
    assert all(math.isnan(x) for x in st[0].logprobs) and set(st[0].greedy) == {-1}
    assert not any(math.isnan(x) for x in st[1].logprobs)


def _greedy_by_hand(backend, prompt: str, n: int) -> str:  # type: ignore[no-untyped-def]
    ids = [backend.bos_id] + backend.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    new: list[int] = []
    with torch.inference_mode():
        for _ in range(n):
            logits = backend.model(torch.tensor([ids + new])).logits[0, -1]
            new.append(int(logits.argmax()))
    return str(backend.tokenizer.decode(new, skip_special_tokens=True))


def test_batched_greedy_generation_equals_one_token_at_a_time(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    prompts = [r.prefix for r in TEXTS if r.prefix]
    reqs = [GenerateRequest(p, max_new_tokens=6) for p in prompts]
    batched = tiny_backend.generate(reqs)  # left-padded together
    for req, g in zip(reqs, batched):
        assert g.text == _greedy_by_hand(tiny_backend, req.prompt, 6)
        assert g.n_tokens == 6 and g.finish_reason == "length"


def test_generation_stop_strings_and_duplicates(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    base = tiny_backend.generate([GenerateRequest("Count: 1, 2,", max_new_tokens=8)])[0]
    assert base.text
    stop = base.text[2:4]
    cut = tiny_backend.generate(
        [GenerateRequest("Count: 1, 2,", max_new_tokens=8, stop=(stop,))] * 3
    )
    assert cut[0] == cut[1] == cut[2]
    assert cut[0].text == base.text[: base.text.find(stop)]
    assert cut[0].finish_reason == "stop"


def test_cache_keeps_token_stats_and_generations(tiny_backend, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cache = ScoreCache(tmp_path / "c.sqlite")
    first = CachedScorer(tiny_backend, cache)
    st = first.token_stats(TEXTS)
    gen = first.generate([GenerateRequest("Hello", max_new_tokens=4)])
    assert first.computed == len(TEXTS) + 1 and first.reused == 0
    again = CachedScorer(tiny_backend, ScoreCache(tmp_path / "c.sqlite"))
    assert again.token_stats(TEXTS) == st
    assert again.generate([GenerateRequest("Hello", max_new_tokens=4)]) == gen
    assert again.computed == 0 and again.reused == len(TEXTS) + 1
    # another max_new_tokens is another request
    again.generate([GenerateRequest("Hello", max_new_tokens=5)])
    assert again.computed == 1
    assert cache.info().entries == len(TEXTS) + 2
