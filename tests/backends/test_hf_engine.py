"""The shared-prefix engine against the naive full-sequence computation (tiny random model)."""

from __future__ import annotations

import math

import pytest

from contamscope.backends import ScoreRequest, load_backend, parse_model_options
from contamscope.errors import ConfigError, ModelError

REQUESTS = [
    ScoreRequest("All of the following are examples of connective tissue EXCEPT:\n", c)
    for c in (
        "A:ligaments\nB:muscle\nC:blood\nD:cartilage\n",
        "A:cartilage\nB:blood\nC:muscle\nD:ligaments\n",
        "A:muscle\nB:ligaments\nC:cartilage\nD:blood\n",
    )
] + [
    ScoreRequest(
        "下列有关鳃弓的描述，错误的是:\n",
        "A:由间充质增生形成\nB:人胚第4周出现\nC:相邻鳃弓之间为鳃沟\nD:共5对鳃弓\nE:位于头部两侧\n",
    ),
    ScoreRequest("Ends in a space ", "A: x\nB: y\n"),  # the space merges into the next token
    ScoreRequest("Short?", "A:1\nB:22\nC:333\n"),
]


def test_engine_matches_naive_full_forward(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    got = tiny_backend.score(REQUESTS)
    for req, res in zip(REQUESTS, got):
        assert res.logprob == pytest.approx(tiny_backend.naive_logprob(req), abs=1e-3)
        assert res.n_tokens > 0
    assert got[4].boundary_chars == 1  # the straddling token is reported
    assert got[0].boundary_chars == 0


def test_small_batch_budget_and_fallback_head_give_same_numbers(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    ref = [r.logprob for r in tiny_backend.score(REQUESTS)]
    old_budget, old_split = tiny_backend.max_batch_tokens, tiny_backend._split_head
    try:
        tiny_backend.max_batch_tokens = 16  # forces one continuation per batch
        assert [r.logprob for r in tiny_backend.score(REQUESTS)] == pytest.approx(ref, abs=1e-4)
        tiny_backend._split_head = False  # the plain model-logits path
        assert [r.logprob for r in tiny_backend.score(REQUESTS)] == pytest.approx(ref, abs=1e-4)
    finally:
        tiny_backend.max_batch_tokens, tiny_backend._split_head = old_budget, old_split


def test_results_keep_request_order_and_progress_counts(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    seen: list[int] = []
    rev = list(reversed(REQUESTS))
    a = [r.logprob for r in tiny_backend.score(REQUESTS)]
    b = [r.logprob for r in tiny_backend.score(rev, progress=seen.append)]
    assert b == pytest.approx(list(reversed(a)), abs=1e-5)
    assert sum(seen) == len(REQUESTS)


def test_too_long_for_context_gives_nan(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    long = ScoreRequest("word " * 600, "A:x\n")
    res = tiny_backend.score([long, REQUESTS[0]])
    assert math.isnan(res[0].logprob) and not math.isnan(res[1].logprob)


def test_fingerprint_changes_with_bos_and_is_stable(tiny_backend, tiny_model_path) -> None:  # type: ignore[no-untyped-def]
    from contamscope.backends.hf import HFBackend

    other = HFBackend.from_pretrained(
        str(tiny_model_path),
        spec="x",
        identity="tiny",
        device="cpu",
        dtype="float32",
        options={"bos": "none"},
    )
    assert other.fingerprint() != tiny_backend.fingerprint()
    assert tiny_backend.fingerprint() == tiny_backend.fingerprint()
    with pytest.raises(ConfigError, match="-M bos=NOT_A_TOKEN"):
        HFBackend.from_pretrained(
            str(tiny_model_path),
            spec="x",
            identity="tiny",
            device="cpu",
            dtype="float32",
            options={"bos": "NOT_A_TOKEN"},
        )


def test_spec_and_option_errors_are_one_line() -> None:
    with pytest.raises(ModelError, match="unknown model spec 'gpt5'"):
        load_backend("gpt5")
    with pytest.raises(ModelError, match="no such file or folder"):
        load_backend("hf:./does/not/exist")
    with pytest.raises(ModelError, match="could not load model"):
        load_backend("hf:someone/model-that-is-not-here")
    with pytest.raises(ConfigError, match="-M 'oops'"):
        parse_model_options(["oops"])
    with pytest.raises(ConfigError, match="--device"):
        load_backend("hf:someone/x", device="tpu")


def test_tree_split_runs_each_branch_once_and_keeps_paths() -> None:
    from contamscope.backends.hf import _build_trees

    # three continuations: two share the first two tokens, the third shares only the first
    conts = [(0, [1, 2, 3]), (1, [1, 2, 4]), (2, [1, 5, 6]), (3, [1, 2, 3]), (4, [])]
    whole, n = _build_trees((9,), conts, max_nodes=100)
    assert n == 6 and len(whole) == 2 and len(whole[0].tokens) == 6  # one tree + the empty one
    split, n2 = _build_trees((9,), conts, max_nodes=3)
    assert n2 == 6
    # cut at the branch points: each subtree carries its trunk, nothing else is repeated
    assert sum(len(t.tokens) for t in split) == 9  # [1,2,3] [1,2,4] [1,5,6]
    members = sorted(m for t in split for m in t.members)
    assert members == [0, 1, 2, 3, 4]
    for t in split:
        for m, path in zip(t.members, t.paths):
            assert [t.tokens[k] for k in path] == dict(conts)[m]


def test_engine_with_tiny_subtrees_matches_naive(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    ref = [tiny_backend.naive_logprob(r) for r in REQUESTS]
    old = tiny_backend.max_tree_nodes
    try:
        tiny_backend.max_tree_nodes = 4
        got = [r.logprob for r in tiny_backend.score(REQUESTS + [ScoreRequest("Q:", "")])]
    finally:
        tiny_backend.max_tree_nodes = old
    assert got[:-1] == pytest.approx(ref, abs=1e-3) and got[-1] == 0.0
