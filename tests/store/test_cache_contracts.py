"""Documented contracts of the score cache (store/cache.py): what goes into a key, what is
stored, and the computed / reused counts, each checked with a backend whose numbers are
known here (mutation QA)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from toy_backends import Arithmetic

from contamscope.backends.base import (
    Backend,
    GenerateRequest,
    Generation,
    ScoreRequest,
    ScoreResult,
    TokenStats,
)
from contamscope.store import CachedScorer, ScoreCache


def _fresh(backend: Backend) -> list[float]:
    """What ``backend`` computes without any cache (the reference numbers)."""
    return [r.logprob for r in CachedScorer(backend, None).score(REQUESTS)]


REQUESTS = [
    ScoreRequest("ab", "c"),
    ScoreRequest("a", "bc"),  # the same text as the first, split elsewhere
    ScoreRequest("q", "x"),
    ScoreRequest("rr", "x"),  # another prefix, the same continuation
    ScoreRequest("q", "yy"),  # the same prefix, another continuation
]


def test_a_score_key_holds_the_prefix_and_the_continuation_each_apart(tmp_path: Path) -> None:
    """score_key: "Key: sha256 over (cache schema, backend fingerprint, prefix text,
    continuation text)": two requests that differ in the prefix, in the continuation, or only
    in where the text is split between them are other keys, so each is computed once and
    read back as its own number (mutation QA)."""
    backend = Arithmetic()
    expected = _fresh(backend)
    assert expected == [-4.0, -5.0, -3.0, -4.0, -5.0]  # -(len(prefix) + 2 len(continuation))
    first = CachedScorer(backend, ScoreCache(tmp_path / "s.sqlite"))
    assert [r.logprob for r in first.score(REQUESTS)] == expected
    assert (first.computed, first.reused) == (5, 0)
    again = CachedScorer(backend, ScoreCache(tmp_path / "s.sqlite"))
    assert [r.logprob for r in again.score(REQUESTS)] == expected
    assert (again.computed, again.reused) == (0, 5)


def test_a_score_key_holds_the_model_set_up(tmp_path: Path) -> None:
    """score_key: the fingerprint is part of the key ("a number is reused only where it would
    be recomputed the same"): another set-up's scores of the same texts are never served
    (mutation QA)."""
    cache = tmp_path / "s.sqlite"
    CachedScorer(Arithmetic("model-a"), ScoreCache(cache)).score(REQUESTS)
    other = Arithmetic("model-b")
    scorer = CachedScorer(other, ScoreCache(cache))
    scorer.score(REQUESTS)
    assert other.ran == [len(REQUESTS)]
    assert (scorer.computed, scorer.reused) == (len(REQUESTS), 0)


def test_every_stored_score_is_found_in_a_call_of_more_than_500(tmp_path: Path) -> None:
    """CachedScorer: ``reused`` counts "requests ... read from the cache"; a second call of
    the same 1,203 requests (more than one 500-key look-up) reads all of them and runs none
    (mutation QA)."""
    reqs = [ScoreRequest(f"question {i}", f" option {i}") for i in range(1203)]
    backend = Arithmetic()
    CachedScorer(backend, ScoreCache(tmp_path / "s.sqlite")).score(reqs)
    again = CachedScorer(backend, ScoreCache(tmp_path / "s.sqlite"))
    got = again.score(reqs)
    assert backend.ran == [1203]
    assert (again.computed, again.reused) == (0, 1203)
    assert [r.logprob for r in got] == [
        -float(len(r.prefix) + 2 * len(r.continuation)) for r in reqs
    ]


def test_statistics_with_the_vocabulary_are_a_kind_of_their_own(tmp_path: Path) -> None:
    """Module docstring / stats_kind: "Per-token statistics that carry the vocabulary mean/std
    (Min-K%++) are a kind of their own (token_stats+vocab), so older blobs without them are
    never served where they are needed" (mutation QA)."""
    backend = Arithmetic()
    req = [ScoreRequest("q", "abc")]
    plain = CachedScorer(backend, ScoreCache(tmp_path / "s.sqlite"))
    assert plain.token_stats(req)[0].mean_logprob is None
    scorer = CachedScorer(backend, ScoreCache(tmp_path / "s.sqlite"))
    got = scorer.token_stats(req, vocab_stats=True)[0]
    assert got.mean_logprob == (-5.0,) * 3 and got.std_logprob == (1.0,) * 3
    assert (scorer.computed, scorer.reused) == (1, 0)


def test_statistics_without_the_vocabulary_are_not_stored_for_a_call_that_needs_it(
    tmp_path: Path,
) -> None:
    """stats_keep: "Which results may be stored: no NaN ..., and with vocab_stats only those
    that carry the vocabulary mean/std": a result without them is computed again next time
    (mutation QA)."""

    class Partial(Arithmetic):
        def token_stats(self, requests, progress=None):  # type: ignore[no-untyped-def]
            self.ran.append(len(requests))
            return [TokenStats((1,), (-1.0,), (1,), 0) for _ in requests]

    backend = Partial()
    req = [ScoreRequest("q", "a")]
    for _ in range(2):
        CachedScorer(backend, ScoreCache(tmp_path / "s.sqlite")).token_stats(req, vocab_stats=True)
    assert backend.ran == [1, 1]


def test_log_probs_without_token_ids_are_never_served_where_ids_are_given(
    tmp_path: Path,
) -> None:
    """stats_kind: "Log-probs without token ids (ids=False: a server answering echo) have
    theirs too, so their -1 ids are never served to BenBench, which needs the ids, when the
    same model is later scored through a server that gives them" (mutation QA)."""
    req = [ScoreRequest("q", "abc")]
    echo = Arithmetic("served-model", ids=False)
    assert (
        CachedScorer(echo, ScoreCache(tmp_path / "s.sqlite")).token_stats(req)[0].tokens
        == (-1,) * 3
    )
    with_ids = Arithmetic("served-model", ids=True)
    scorer = CachedScorer(with_ids, ScoreCache(tmp_path / "s.sqlite"))
    assert scorer.token_stats(req)[0].tokens == (0, 1, 2)
    assert with_ids.ran == [1]


def test_generations_read_back_count_as_reused_not_computed(tmp_path: Path) -> None:
    """CachedScorer: "computed / reused count requests of every kind that were run / read
    from the cache": a second call of two generations, one of them cached, runs one and
    reads one (mutation QA)."""
    backend = Arithmetic()
    first = CachedScorer(backend, ScoreCache(tmp_path / "s.sqlite"))
    first.generate([GenerateRequest("abc")])
    assert (first.computed, first.reused) == (1, 0)
    again = CachedScorer(backend, ScoreCache(tmp_path / "s.sqlite"))
    got = again.generate([GenerateRequest("abc"), GenerateRequest("xyz")])
    assert [g.text for g in got] == ["cba", "zyx"]
    assert (again.computed, again.reused) == (1, 1)
    assert backend.ran == [1, 1]


def test_a_score_past_the_context_is_neither_stored_nor_counted(tmp_path: Path) -> None:
    """put_many: "never store NaN (too long for the model)"; CachedScorer: "a request past
    the model's context window is neither" computed nor reused (mutation QA)."""

    class Short(Arithmetic):
        def score(self, requests, progress=None):  # type: ignore[no-untyped-def]
            self.ran.append(len(requests))
            return [ScoreResult(math.nan, 0, 0, too_long=True) for _ in requests]

    backend = Short()
    for _ in range(2):
        scorer = CachedScorer(backend, ScoreCache(tmp_path / "s.sqlite"))
        assert math.isnan(scorer.score([ScoreRequest("q", "a")])[0].logprob)
        assert (scorer.computed, scorer.reused) == (0, 0)
    assert backend.ran == [1, 1]
    assert ScoreCache(tmp_path / "s.sqlite").info().scores == 0


def test_a_generation_that_ended_at_the_context_is_neither_computed_nor_reused(
    tmp_path: Path,
) -> None:
    """CachedScorer: "a request past the model's context window is neither" computed nor
    reused. A generation that ended at the context is stored (it costs nothing to give again),
    and a second run counted it reused where the first had not counted it computed: CAP said
    "0 of 60 requests from the cache" and then "64 of 64" (review QA)."""

    class AtContext(Arithmetic):
        def generate(self, requests: Sequence[GenerateRequest], progress=None) -> list[Generation]:  # type: ignore[no-untyped-def]
            self.ran.append(len(requests))
            return [
                Generation("", 0, "context") if "long" in r.prompt else Generation("ok", 1, "stop")
                for r in requests
            ]

    prompts = [GenerateRequest("short", 4), GenerateRequest("long " * 3, 4)]
    cache = ScoreCache(tmp_path / "s.sqlite")
    first = CachedScorer(AtContext(), cache)
    want = first.generate(prompts)
    assert (first.computed, first.reused) == (1, 0)
    backend = AtContext()
    second = CachedScorer(backend, cache)
    assert second.generate(prompts) == want and backend.ran == []
    assert (second.computed, second.reused) == (0, 1)
