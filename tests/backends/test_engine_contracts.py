"""Contracts of the scoring engine that the numeric-equivalence tests leave open: the context
boundary (a text of exactly the context's length is scored, one token more is not), the batch
budget's rule, the efficiency counts, the fingerprint's parts, the BOS option and the
load-time vocabulary check (mutation QA)."""

from __future__ import annotations

import copy
import math
import types
from typing import Any

import pytest
import torch

from contamscope.backends import GenerateRequest, ScoreRequest
from contamscope.backends.hf import HFBackend, resolve_bos
from contamscope.backends.tree_plan import bucket, token_counts
from contamscope.errors import ConfigError, ModelError


def _length(backend: Any, req: ScoreRequest) -> int:
    e = backend.encode(req)
    return len(e.prefix) + len(e.cont)


def _request_of(backend: Any, tokens: int) -> ScoreRequest:
    """A request of exactly ``tokens`` tokens as the backend scores it (BOS included)."""
    k = tokens
    for _ in range(8):
        req = ScoreRequest("Q:" + " word" * k, " A:x\n")
        n = _length(backend, req)
        if n == tokens:
            return req
        k += tokens - n
    raise AssertionError(f"no request of {tokens} tokens")


def test_a_llama_is_scored_by_the_prefix_tree_engine_itself(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """HFBackend.engine: ``full-sequence`` is for "a model whose layers tree attention cannot
    run ... or whose results it does not reproduce"; a Llama's it runs. A bug in the tree
    (positions, parents, the mask) failed the load-time check, sent every text through the
    full-sequence fallback, whose numbers equal the naive reference, and the equivalence test
    passed; this one holds the engine and its numbers together."""
    assert tiny_backend.engine == "prefix-tree"
    requests = [
        ScoreRequest("Which one?\n", "A:1\nB:2\nC:3\n"),
        ScoreRequest("Which one?\n", "A:1\nB:3\nC:2\n"),
        ScoreRequest("Which one?\n", "A:2\nB:1\nC:3\n"),
        ScoreRequest("Short?", "A:x\n"),
    ]
    for req, res in zip(requests, tiny_backend._score_tree(requests)):
        assert res.logprob == pytest.approx(tiny_backend.naive_logprob(req), abs=1e-3)


def test_a_text_of_exactly_the_context_is_scored_and_one_token_more_is_not(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """docs/backends.md: "a text of exactly the context's length is ... scored locally"; a
    text longer than the context "scores NaN marked too_long". The earlier test's text was
    hundreds of tokens over the context, and its text that fits a hundred under it: a limit
    moved by one token, or the probe's margin turned the other way, passed both."""
    context = tiny_backend.max_length
    exact, over = _request_of(tiny_backend, context), _request_of(tiny_backend, context + 1)
    got = tiny_backend.score([exact, over])
    assert not got[0].too_long
    assert got[0].logprob == pytest.approx(tiny_backend.naive_logprob(exact), abs=1e-3)
    assert got[1].too_long and math.isnan(got[1].logprob)
    stats = tiny_backend.token_stats([exact, over])
    assert not stats[0].is_too_long and all(math.isfinite(x) for x in stats[0].logprobs)
    assert stats[1].is_too_long
    counts = token_counts(
        tiny_backend.planner().tokenizer, tiny_backend.bos_id, [exact, over], context
    )
    assert counts.too_long == 1
    assert counts.reference == context


def test_a_generation_that_just_fits_the_context_runs(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """Generation.finish_reason ``context``: "the prompt and max_new_tokens do not fit the
    model's context window"; a prompt and max_new_tokens of exactly the context do fit."""
    context = tiny_backend.max_length
    prompt = "Q:" + " word" * 490
    n = len(tiny_backend.naive_encode(ScoreRequest(prompt, ""))[0])  # BOS + the prompt
    fits = GenerateRequest(prompt, max_new_tokens=context - n)
    over = GenerateRequest(prompt, max_new_tokens=context - n + 1)
    got = tiny_backend.generate([fits, over])
    assert got[0].finish_reason in ("stop", "length")
    assert got[1].finish_reason == "context" and got[1].text == ""


def test_bucket_keeps_rows_times_width_within_the_budget() -> None:
    """bucket: "rows x (longest + largest extra) <= budget, and no row padded by more than
    max_pad of the batch's shortest (plus 16 tokens)"; ``extra`` counts in the budget."""
    assert bucket([(0, 8), (1, 8)], budget=16) == [[0, 1]]  # exactly the budget: one batch
    assert bucket([(0, 8), (1, 9)], budget=16) == [[0], [1]]
    # 26 <= 10 x (1 + 0) + 16: padded by the 16 tokens allowed
    assert bucket([(0, 10), (1, 26)], budget=1000, max_pad=0.0) == [[0, 1]]
    assert bucket([(0, 10), (1, 27)], budget=1000, max_pad=0.0) == [[0], [1]]
    # 2 x (10 + the largest extra, 15) > 40: the second row's extra splits them
    assert bucket([(0, 10), (1, 10)], budget=40, extra={0: 0, 1: 15}) == [[0], [1]]
    assert bucket([(0, 10), (1, 10)], budget=50, extra={0: 0, 1: 15}) == [[0, 1]]


def test_useful_tokens_leave_padding_out(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """tokens_useful: "Real (non-padding) positions run so far"; tokens_min: "each prefix once
    plus the nodes of its token trie". Subtrees that each fit one row, of different widths
    in one batch, run exactly the minimum as real positions (the padding is in tokens_run)."""
    requests = [
        ScoreRequest("Which one?\n", "A:1\nB:2\n"),
        ScoreRequest("Which one?\n", "A:2\nB:1\n"),
        ScoreRequest("Another question entirely, longer?\n", "A:x\n"),
    ]
    saved = tiny_backend.tokens_run, tiny_backend.tokens_useful, tiny_backend.tokens_min
    try:
        tiny_backend.tokens_run = tiny_backend.tokens_useful = tiny_backend.tokens_min = 0
        tiny_backend.score(requests)
        assert tiny_backend.tokens_useful == tiny_backend.tokens_min
        assert tiny_backend.tokens_run > tiny_backend.tokens_useful  # padded rows
    finally:
        tiny_backend.tokens_run, tiny_backend.tokens_useful, tiny_backend.tokens_min = saved


def test_fingerprint_holds_dtype_and_tokenizer(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """docs/output.md: the fingerprint is "weights identity, dtype, tokenizer hash, BOS,
    engine version": the same weights in another dtype, or under another tokenizer, are
    another set-up whose cached scores must not be reused."""
    half = HFBackend(
        copy.deepcopy(tiny_backend.model).to(torch.bfloat16),
        tiny_backend.tokenizer,
        spec=tiny_backend.spec,
        identity=tiny_backend.identity,
        bos="<|endoftext|>",
    )
    assert half.engine == tiny_backend.engine  # (the same engine part)
    assert half.fingerprint() != tiny_backend.fingerprint()
    tok = copy.deepcopy(tiny_backend.tokenizer)
    tok.add_tokens(["<qa-extra-token>"])
    other = HFBackend(
        tiny_backend.model,
        tok,
        spec=tiny_backend.spec,
        identity=tiny_backend.identity,
        bos="<|endoftext|>",
    )
    assert other.fingerprint() != tiny_backend.fingerprint()


def _tok(**kw: Any) -> Any:
    vocab = {"<s>": 1, "</s>": 2, "<unk>": 3}
    base = {"bos_token_id": 1, "eos_token_id": 2, "unk_token_id": 3, "unk_token": "<unk>"}
    return types.SimpleNamespace(convert_tokens_to_ids=lambda t: vocab.get(t, 3), **(base | kw))


def test_bos_auto_is_the_bos_else_the_eos_and_a_token_must_be_known() -> None:
    """resolve_bos: "auto (the tokenizer's BOS, else its EOS, else none)"; ``-M bos=TOKEN``
    must be "a token of tok": one a tokenizer maps to its unknown token is not."""
    assert resolve_bos(_tok(), "auto") == 1
    assert resolve_bos(_tok(bos_token_id=None), "auto") == 2
    assert resolve_bos(_tok(bos_token_id=None, eos_token_id=None), "auto") is None
    assert resolve_bos(_tok(), "</s>") == 2
    assert resolve_bos(_tok(), "<unk>") == 3  # the unknown token itself, named
    with pytest.raises(ConfigError, match="-M bos=<nope>"):
        resolve_bos(_tok(), "<nope>")


def test_a_token_id_one_past_the_embeddings_is_refused(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """_check_vocabulary: a ModelError "where the tokenizer gives ids the model has no
    embedding for": ids run 0 .. rows - 1, so an id equal to the embedding count is one."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = tiny_backend.tokenizer
    text = "The quick brown fox jumps over the lazy dog. 1, 2, 3; 北京是中国的首都。"
    rows = max(tok(text, add_special_tokens=False)["input_ids"])  # the largest id: no row
    config = LlamaConfig(
        vocab_size=rows,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    with pytest.raises(ModelError, match="the tokenizer is not this model's"):
        HFBackend(LlamaForCausalLM(config), tok, spec="hf:qa", identity="qa", bos="none")
