"""A model of the user's own (a Backend subclass, docs/python.md "Your own model"): its numbers
reach the cache and run folders as plain numbers, and what it lacks or gets wrong is one error
before any work, naming what is missing (integrator QA)."""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from toy_rows import QA_ROWS, write_jsonl

from contamscope.backends import (
    Backend,
    Capabilities,
    GenerateRequest,
    Generation,
    ScoreRequest,
    ScoreResult,
    TokenStats,
)
from contamscope.backends.probe import available_methods
from contamscope.data import load_benchmark, load_qa
from contamscope.errors import CapabilityError, ConfigError, ModelError
from contamscope.pipeline import (
    BenBenchConfig,
    MembershipConfig,
    PermutationConfig,
    run_benbench,
    run_membership,
    run_permutation,
)
from contamscope.pipeline.benbench import SplitInput
from contamscope.store import CachedScorer, RunDir, ScoreCache

ROWS = "What is 2+2?,3,4,5,6,B\nWhich planet is largest?,Mars,Venus,Jupiter,Earth,C\n"


def _lp(req: ScoreRequest) -> float:
    """A made-up, deterministic log-prob of a request."""
    return -0.1 * len(req.continuation) - 0.01 * (sum(map(ord, req.continuation)) % 7)


class Mine(Backend):
    """A scorer of the user's own whose numbers come as ``wrap`` makes them."""

    capabilities = Capabilities(prompt_logprobs=True, from_start=False)
    computes_on_local_cpu = True

    def __init__(self, wrap: Callable[[float, int], ScoreResult]) -> None:
        self.spec = "mine:toy"
        self.wrap = wrap
        self.calls = 0

    def fingerprint(self) -> str:
        return "mine-toy-v1"

    def score(self, requests: Sequence[ScoreRequest], progress: Any = None) -> list[ScoreResult]:
        self.calls += 1
        return [self.wrap(_lp(r), len(r.continuation)) for r in requests]


class StatsOf(Backend):
    """Per-token log-probs (no ids) as ``reply`` makes them for each request."""

    capabilities = Capabilities(prompt_logprobs=True, token_logprobs=True)

    def __init__(self, reply: Callable[[ScoreRequest], TokenStats], spec: str) -> None:
        self.reply = reply
        self.spec = spec

    def fingerprint(self) -> str:
        return self.spec

    def score(self, requests: Sequence[ScoreRequest], progress: Any = None) -> Any:
        raise AssertionError("not asked")

    def token_stats(self, requests: Sequence[ScoreRequest], progress: Any = None) -> Any:
        return [self.reply(r) for r in requests]


class Chat(Backend):
    """A black-box model: generation only, each reply ``reply``."""

    spec = "mychat:toy"
    capabilities = Capabilities(prompt_logprobs=False, generate=True, from_start=False)

    def __init__(self, reply: Generation | None = None) -> None:
        self.reply = reply or Generation("A", 1, "stop")

    def fingerprint(self) -> str:
        return "mychat"

    def score(self, requests: Sequence[ScoreRequest], progress: Any = None) -> Any:
        raise AssertionError("not asked")

    def generate(self, requests: Sequence[GenerateRequest], progress: Any = None) -> Any:
        return [self.reply for _ in requests]


def _bench(tmp_path: Path) -> Any:
    path = tmp_path / "toy_test.csv"
    path.write_text(ROWS, encoding="utf-8")
    return load_benchmark(str(path))


@pytest.mark.parametrize(
    "wrap",
    [
        lambda lp, n: ScoreResult(np.float32(lp), np.int64(n)),  # type: ignore[arg-type]
        lambda lp, n: ScoreResult(torch.tensor(lp), torch.tensor(n)),  # type: ignore[arg-type]
    ],
    ids=["numpy", "torch"],
)
def test_numpy_and_torch_numbers_are_stored_as_numbers(tmp_path: Path, wrap: Any) -> None:
    """A numpy float32 log-prob was stored in the score cache as bytes, and every later run
    failed ("must be real number, not bytes") until the model's scores were cleared; a torch
    scalar was "a score cache error". They are numbers now, in the cache and the records."""
    loaded = _bench(tmp_path)
    cache = ScoreCache(tmp_path / "c.sqlite")
    first = run_permutation(
        loaded, loaded.items, CachedScorer(Mine(wrap), cache), tmp_path / "a", PermutationConfig()
    )
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        kinds = set(db.execute("SELECT typeof(logprob), typeof(n_tokens) FROM scores"))
    assert kinds == {("real", "integer")}
    plain = Mine(lambda lp, n: ScoreResult(lp, n))
    again = run_permutation(
        loaded, loaded.items, CachedScorer(plain, cache), tmp_path / "b", PermutationConfig()
    )
    assert plain.calls == 0  # every score read back from the cache
    for a, b in zip(first.records(), again.records()):
        assert a["logprobs"] == pytest.approx(b["logprobs"], abs=1e-5)


def test_scores_an_earlier_version_stored_as_bytes_are_scored_again(tmp_path: Path) -> None:
    """A cache an earlier version filled with a custom backend's numpy scalars (stored as
    bytes) is read as missing those scores, not as a crash: they are computed and replaced."""
    loaded = _bench(tmp_path)
    cache = ScoreCache(tmp_path / "c.sqlite")
    plain = Mine(lambda lp, n: ScoreResult(lp, n))
    run_permutation(
        loaded, loaded.items, CachedScorer(plain, cache), tmp_path / "a", PermutationConfig()
    )
    with sqlite3.connect(tmp_path / "c.sqlite") as db:  # as the earlier version stored them
        db.execute("UPDATE scores SET logprob = ?", (np.float32(-1.5).tobytes(),))
    again = Mine(lambda lp, n: ScoreResult(lp, n))
    out = run_permutation(
        loaded, loaded.items, CachedScorer(again, cache), tmp_path / "b", PermutationConfig()
    )
    assert again.calls > 0 and out.summary["counts"]["items_analysed"] == 2
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        assert set(db.execute("SELECT typeof(logprob) FROM scores")) == {("real",)}


@pytest.mark.parametrize(
    ("result", "said"),
    [
        (
            TokenStats((5, 6, 7), (-1.0, -2.0), (5, 6, 7)),
            "returned a TokenStats with 3 tokens and 2 logprobs: one per token",
        ),
        (
            TokenStats((5, 6), (-1.0, -2.0), (5, 6), mean_logprob=(-1.0,)),
            "returned a TokenStats with 2 tokens and 1 mean_logprob: one per token",
        ),
        (
            TokenStats((5, 6.5), (-1.0, -2.0), (5, 6)),  # type: ignore[arg-type]
            "returned a TokenStats whose tokens is not a token id (an int, -1 where unknown)",
        ),
        (
            TokenStats((5, 6), (-1.0, "x"), (5, 6)),  # type: ignore[arg-type]
            "returned a TokenStats whose logprobs is not a number",
        ),
    ],
)
def test_malformed_token_stats_are_one_error(tmp_path: Path, result: TokenStats, said: str) -> None:
    """57 token ids with 54 log-probs were taken as they came (integrator QA)."""

    for cache in (None, ScoreCache(tmp_path / "c.sqlite")):
        scorer = CachedScorer(StatsOf(lambda r: result, "mine:stats"), cache)
        with pytest.raises(ModelError, match=re.escape(f"backend 'mine:stats' {said}")):
            scorer.token_stats([ScoreRequest("", "some text")])


@pytest.mark.parametrize(
    ("result", "said"),
    [
        (Generation(None, 3, "stop"), "a Generation whose text is None, not a str"),  # type: ignore[arg-type]
        (Generation("ok", 3, "done"), "whose finish_reason is not one of stop, length, context"),
        (Generation("ok", -5, "stop"), "whose n_tokens is not a non-negative int"),
    ],
)
def test_malformed_generations_are_one_error(result: Generation, said: str) -> None:
    """A None text was an AttributeError inside CAP's answer reading; an unknown
    finish_reason or a negative count was taken as it came (integrator QA)."""

    with pytest.raises(ModelError, match=re.escape(said)):
        CachedScorer(Chat(result), None).generate([GenerateRequest("Hi")])


def test_an_object_that_is_no_backend_is_refused_when_wrapped() -> None:
    """A duck-typed object, or a subclass without capabilities, failed later with an
    AttributeError deep in a run (integrator QA)."""

    class Duck:
        spec = "duck"

        def fingerprint(self) -> str:
            return "duck"

    class NoCaps(Backend):
        spec = "nocaps"

        def fingerprint(self) -> str:
            return "nocaps"

        def score(self, requests: Sequence[ScoreRequest], progress: Any = None) -> Any:
            return []

    for thing in (Duck(), NoCaps()):
        with pytest.raises(ConfigError, match="subclass of contamscope.backends.Backend that"):
            CachedScorer(thing, None)  # type: ignore[arg-type]


class Claims(Backend):
    """Capabilities that say per-token statistics and generation, neither implemented, nor
    decode: every need is refused before any work."""

    spec = "mine:claims"
    capabilities = Capabilities(prompt_logprobs=True, token_stats=True, generate=True)

    def fingerprint(self) -> str:
        return "mine-claims"

    def score(self, requests: Sequence[ScoreRequest], progress: Any = None) -> Any:
        raise AssertionError("no work before the checks")


class StatsNoDecode(Claims):
    spec = "mine:nodecode"

    def token_stats(self, requests: Sequence[ScoreRequest], progress: Any = None) -> Any:
        raise AssertionError("no work before the checks")

    def generate(self, requests: Sequence[GenerateRequest], progress: Any = None) -> Any:
        raise AssertionError("no work before the checks")


class NoGenerate(StatsNoDecode):
    spec = "mine:nogenerate"
    generate = Backend.generate  # claimed, not implemented

    def decode(self, tokens: Sequence[int]) -> str:
        raise AssertionError("no work before the checks")


def test_what_a_backend_lacks_is_said_before_any_work(tmp_path: Path) -> None:
    """A generation-only model was told to set a BOS token (-M bos) for BenBench and the
    membership test; capabilities claimed without the method, and BenBench's need of decode(),
    failed in the middle of the run (integrator QA)."""
    qa = load_qa(str(write_jsonl(tmp_path / "q.jsonl", QA_ROWS)))
    split = [SplitInput("test", qa, qa.items)]
    loaded = _bench(tmp_path)

    def benbench(backend: Backend, **cfg: Any) -> None:
        run_benbench(
            split, CachedScorer(backend, None), RunDir(tmp_path / "bb"), BenBenchConfig(**cfg)
        )

    def membership(backend: Backend) -> None:
        run_membership(
            loaded, loaded.items[:1], loaded, loaded.items[1:], CachedScorer(backend, None),
            tmp_path / "m", MembershipConfig(statistic="loss"),
        )  # fmt: skip

    for run in (benbench, membership):
        with pytest.raises(CapabilityError, match="needs prompt log-probabilities") as exc:
            run(Chat())
        assert "BOS" not in str(exc.value) and str(exc.value).endswith("can run: CAP")
    with pytest.raises(CapabilityError) as exc:
        benbench(Claims(), lenient=False)
    said = str(exc.value)
    assert (
        "BenBench needs per-token log-probs, and backend 'mine:claims' (Claims) does not " in said
    )
    assert "implement token_stats() though its capabilities say it gives per-token" in said
    # what it claims without implementing is not offered either (review QA)
    assert said.endswith("methods this backend can run: permutation"), said
    with pytest.raises(CapabilityError, match=re.escape("does not implement generate()")):
        benbench(NoGenerate(), lenient=True)
    with pytest.raises(CapabilityError) as exc:
        benbench(StatsNoDecode(), lenient=False)
    assert (
        "BenBench needs the text of token ids, and backend 'mine:nodecode' (StatsNoDecode) "
        in str(exc.value)
        and str(exc.value).count("implement decode()") == 1
    )
    assert str(exc.value).endswith("can run: permutation, CAP, membership (loss, min_k, zlib, gap)")
    assert not (tmp_path / "bb" / "items.jsonl").exists()
    # without generation, BenBench is offered with its strict criteria only
    caps = Capabilities(prompt_logprobs=True, token_stats=True)
    assert "BenBench (--no-lenient)" in available_methods(caps)


def test_reasons_are_said_where_no_item_could_be_analysed(tmp_path: Path) -> None:
    """NaN log-probs from a backend of one's own: the membership test said the references
    were "too long or empty", and the permutation verdict "no items analysed" without why."""
    loaded = _bench(tmp_path)
    nan = Mine(lambda lp, n: ScoreResult(math.nan, n))
    out = run_permutation(
        loaded, loaded.items, CachedScorer(nan, None), tmp_path / "p", PermutationConfig()
    )
    reason = out.verdict["reasoning"]
    assert reason.startswith("no items analysed: all 2 excluded (") and "NaN" in reason, reason

    nan_stats = StatsOf(lambda r: TokenStats((4, 5), (math.nan, -1.0), (-1, -1)), "mine:nan")
    with pytest.raises(ConfigError) as exc:
        run_membership(
            loaded, loaded.items[:1], loaded, loaded.items[1:], CachedScorer(nan_stats, None),
            tmp_path / "m", MembershipConfig(statistic="loss"),
        )  # fmt: skip
    said = str(exc.value)
    assert said.startswith("--reference: no reference item could be scored (all 1 excluded: ")
    assert "a non-finite token log-prob (nan" in said and "too long or empty" not in said


def test_a_text_refused_as_too_long_has_no_token_count(tmp_path: Path) -> None:
    """A served model's too-long text comes back as one unknown token (TokenStats.too_long):
    its membership record read n_tokens 1 where the local backend counts every token
    (equivalence QA); it is null, the item left out as too long."""
    path = tmp_path / "toy_test.csv"
    path.write_text(ROWS + "Pick the colour of the sky,blue,green,red,yellow,A\n", encoding="utf-8")
    loaded = load_benchmark(str(path))

    def reply(r: ScoreRequest) -> TokenStats:
        if "planet" in r.continuation:
            return TokenStats.too_long()
        return TokenStats((4, 5, 6), (-1.0, -2.0, -0.5), (-1, -1, -1))

    out = run_membership(
        loaded, loaded.items[1:], loaded, loaded.items[:1], CachedScorer(StatsOf(reply, "mine:served"), None),
        tmp_path / "m", MembershipConfig(statistic="loss"),
    )  # fmt: skip
    rec = {r["id"]: r for r in out.records()}["benchmark/toy_test-1"]
    assert rec["excluded"] == "longer than the model's context window"
    assert rec["n_tokens"] is None
