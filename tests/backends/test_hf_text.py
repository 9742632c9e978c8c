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
    # n_tokens: the tokens through the one that completed the stop string, as a server that
    # stops there counts them (the 8 generated past it were counted; QA)
    ids = [tiny_backend.bos_id] + tiny_backend.tokenizer("Count: 1, 2,", add_special_tokens=False)[
        "input_ids"
    ]
    new: list[int] = []
    with torch.inference_mode():
        while stop not in tiny_backend.tokenizer.decode(new, skip_special_tokens=True):
            new.append(int(tiny_backend.model(torch.tensor([ids + new])).logits[0, -1].argmax()))
    assert cut[0].n_tokens == len(new) < base.n_tokens == 8


PASSAGE = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
    "in May. How many clips did Natalia sell altogether in April and May? "
)
SHARING = [  # prompts that share prefixes as BenBench's and CAP's do, and some that do not
    PASSAGE[:60],
    PASSAGE[:95],
    PASSAGE,
    PASSAGE + "Answer A: 72",
    PASSAGE + "Answer B: 96",
    "Hi",
    "下列有关鳃弓的描述，错误的是",
    "下列有关鳃弓的描述，正确的是",
]


def _by_model_generate(backend, reqs):  # type: ignore[no-untyped-def]
    """The same requests through transformers' own ``model.generate`` (the path of models the
    prefix-tree engine cannot run)."""
    old = backend.engine
    backend.engine = "full-sequence"
    try:
        return backend.generate(reqs)
    finally:
        backend.engine = old


def test_generation_runs_shared_prompt_prefixes_once(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """Prompts that share leading tokens run them once: the same generations as
    ``model.generate`` and as one token at a time, in fewer token positions."""
    from contamscope.backends.hf_text import _prompt_ids

    reqs = [GenerateRequest(p, max_new_tokens=6) for p in SHARING]
    reqs += [GenerateRequest(p, max_new_tokens=3) for p in SHARING[::3]]
    before = tiny_backend.tokens_run
    shared = tiny_backend.generate(reqs)
    ran = tiny_backend.tokens_run - before
    assert shared == _by_model_generate(tiny_backend, reqs)
    whole = sum(len(_prompt_ids(tiny_backend, r)) + r.max_new_tokens for r in reqs)
    assert ran < whole
    for req, g in zip(reqs, shared):
        assert g.text == _greedy_by_hand(tiny_backend, req.prompt, req.max_new_tokens)
    old = tiny_backend.max_batch_tokens
    try:  # a budget that splits the held prompts and their rows into many batches
        tiny_backend.max_batch_tokens = 64
        assert tiny_backend.generate(list(reversed(reqs)))[::-1] == shared
    finally:
        tiny_backend.max_batch_tokens = old


def test_a_chain_of_prompt_prefixes_runs_the_longest_once(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """BenBench's lenient prompts: one text cut at several starting points. The longest runs
    once; each shorter one runs its last token only, over the longest's cache."""
    from contamscope.backends.hf_text import _prompt_ids

    tok = tiny_backend.tokenizer
    ids = tok(PASSAGE, add_special_tokens=False)["input_ids"]
    cuts = [tok.decode(ids[:k]) for k in (9, 17, 30)]
    reqs = [GenerateRequest(c, max_new_tokens=1) for c in cuts]
    assert [len(_prompt_ids(tiny_backend, r)) for r in reqs] == [10, 18, 31]  # the premise
    before = tiny_backend.tokens_run
    got = tiny_backend.generate(reqs)
    assert tiny_backend.tokens_run - before == 31 + 3
    assert got == _by_model_generate(tiny_backend, reqs)


def test_long_generations_decode_many_rows_a_pass_on_the_cpu(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """On the CPU a decoding pass reads every weight whatever its rows: the tokens a row will
    generate count as keys and values (a quarter of a token run), not as tokens run, so four
    40-token generations decode in one batch under a 128-token budget (three, then one,
    before), with the same results."""
    reqs = [GenerateRequest(p, max_new_tokens=40) for p in ["Hi", "Hello there", "Q: 2+2?", "A b"]]
    alone = [tiny_backend.generate([r])[0] for r in reqs]
    old = tiny_backend.max_batch_tokens
    batches: list[int] = []
    try:
        tiny_backend.max_batch_tokens = 128
        assert tiny_backend.generate(reqs, progress=batches.append) == alone
    finally:
        tiny_backend.max_batch_tokens = old
    assert batches == [4]


def test_shared_generation_stops_once_every_row_has_ended(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """A batch stops decoding when every row has generated the end token, not before."""
    from contamscope.backends.hf_decode import greedy_tokens
    from contamscope.backends.hf_text import _prompt_ids

    prompts = [_prompt_ids(tiny_backend, GenerateRequest(p)) for p in SHARING[1:3]]
    full = greedy_tokens(tiny_backend, prompts, 8, None)
    assert all(len(t) == 8 for t in full)
    end = full[0][2]  # an "end" token the first row generates third
    # both rows end by step 8: the batch stops at the later one; else it runs all 8
    stop = max(t.index(end) for t in full) + 1 if end in full[1][:7] else 8
    got = greedy_tokens(tiny_backend, prompts, 8, end)
    assert got == [t[:stop] for t in full]
    assert greedy_tokens(tiny_backend, prompts[:1], 8, end) == [full[0][: full[0].index(end) + 1]]


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


def _naive_vocab_moments(backend, req: ScoreRequest) -> tuple[list[float], list[float]]:  # type: ignore[no-untyped-def]
    """Mean and std of log p over the whole vocabulary, float64, one full forward pass."""
    e = backend.encode(req)
    ids = torch.tensor([list(e.prefix) + e.cont])
    with torch.inference_mode():
        logp = torch.log_softmax(backend.model(ids).logits.double(), -1)[0]
    p = len(e.prefix)
    rows = logp[p - 1 : p - 1 + len(e.cont)]
    mean = (rows.exp() * rows).sum(-1)
    var = (rows.exp() * (rows - mean[:, None]) ** 2).sum(-1)
    return mean.tolist(), var.sqrt().tolist()


@pytest.fixture(scope="module")
def spread_backend(tmp_path_factory, smollm2_tokenizer):  # type: ignore[no-untyped-def]
    """A tiny random model whose next-token distributions are spread out (std of log p about
    1-3 nats; the shared tiny model, built for varied log-probs, is almost one-hot)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from contamscope.backends.hf import HFBackend

    torch.manual_seed(1)
    config = LlamaConfig(
        vocab_size=len(smollm2_tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.model.embed_tokens.weight.normal_(0, 0.25)
    path = tmp_path_factory.mktemp("spread") / "spread-llama"
    model.save_pretrained(path)
    smollm2_tokenizer.save_pretrained(path)
    return HFBackend.from_pretrained(
        str(path),
        spec=f"hf:{path}",
        identity="spread",
        device="cpu",
        dtype="float32",
        options={"bos": "<|endoftext|>"},
    )


@pytest.mark.parametrize("which", ["tiny", "spread"])
@pytest.mark.parametrize("split_head", [True, False], ids=["split-head", "logits-fallback"])
def test_vocab_moments_match_naive_float64(which: str, split_head: bool, request) -> None:  # type: ignore[no-untyped-def]
    backend = request.getfixturevalue(f"{which}_backend")
    old = backend._split_head
    try:
        backend._split_head = split_head and old
        got = backend.token_stats(TEXTS)
    finally:
        backend._split_head = old
    spread = []
    for req, st in zip(TEXTS, got):
        mean, std = _naive_vocab_moments(backend, req)
        assert st.mean_logprob is not None and st.std_logprob is not None
        assert len(st.mean_logprob) == len(st.tokens) == len(st.std_logprob)
        assert list(st.mean_logprob) == pytest.approx(mean, abs=1e-4)
        assert list(st.std_logprob) == pytest.approx(std, abs=1e-4)
        spread += std
    if which == "spread":  # the check covers wide distributions, not only near one-hot ones
        assert min(spread) > 0.5


def test_vocab_moments_in_small_head_chunks(tiny_backend, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import contamscope.backends.hf as hf

    ref = tiny_backend.token_stats(TEXTS[:2])
    monkeypatch.setattr(hf, "_HEAD_ROWS", 3)  # many head chunks per batch
    small = tiny_backend.token_stats(TEXTS[:2])
    for a, b in zip(ref, small):
        assert list(a.std_logprob) == pytest.approx(list(b.std_logprob), abs=1e-5)
        assert list(a.mean_logprob) == pytest.approx(list(b.mean_logprob), abs=1e-5)


def test_cache_never_serves_blobs_without_vocab_stats(tiny_backend, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cache = ScoreCache(tmp_path / "c.sqlite")
    plain = CachedScorer(tiny_backend, cache).token_stats(TEXTS)  # old-style blobs
    assert all(st.mean_logprob is None for st in plain)
    need = CachedScorer(tiny_backend, cache)
    full = need.token_stats(TEXTS, vocab_stats=True)
    assert need.computed == len(TEXTS) and need.reused == 0  # old blobs not served
    assert all(st.mean_logprob is not None and st.std_logprob is not None for st in full)
    again = CachedScorer(tiny_backend, ScoreCache(tmp_path / "c.sqlite"))
    assert again.token_stats(TEXTS, vocab_stats=True) == full
    assert again.computed == 0 and again.reused == len(TEXTS)
    assert [st.logprobs for st in full] == [st.logprobs for st in plain]


def test_a_folder_typed_with_a_trailing_slash_is_one_spec(tiny_model_path) -> None:  # type: ignore[no-untyped-def]
    """`hf:/m/` and `hf:/m` were two specs: a run folder started with one refused to resume
    with the other (model: 'hf:/m/' -> 'hf:/m'; resume audit)."""
    from contamscope.backends import load_backend

    a = load_backend(f"hf:{tiny_model_path}/", device="cpu", dtype="float32")
    b = load_backend(f"hf:{tiny_model_path}", device="cpu", dtype="float32")
    assert a.spec == b.spec == f"hf:{tiny_model_path}"
    assert a.fingerprint() == b.fingerprint()


def test_a_generation_cut_inside_a_character_drops_its_incomplete_bytes(
    tiny_backend, monkeypatch, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """SmolLM2's tokenizer spells 年 as two byte tokens: a generation cut by max_new_tokens
    after the first showed U+FFFD ("2015年4\\ufffd" in a CAP run's predictions)."""
    from contamscope.backends import hf_text
    from contamscope.backends.base import Generation

    tok = tiny_backend.tokenizer
    year = tok.encode("年", add_special_tokens=False)
    assert len(year) == 2 and tok.decode(year[:1]) == "\ufffd"  # the premise
    digits = tok.encode("2015", add_special_tokens=False)
    cut = digits + year[:1]

    def fixed_output(backend, prompts, max_new, *args):  # type: ignore[no-untyped-def]
        yield [(i, (cut + year[1:] + digits)[:max_new]) for i in range(len(prompts))]

    monkeypatch.setattr(hf_text, "_greedy", fixed_output)
    short, whole = tiny_backend.generate(
        [
            GenerateRequest("Year:", max_new_tokens=len(cut)),
            GenerateRequest("Year:", max_new_tokens=len(cut) + 1),
        ]
    )
    assert (short.text, short.n_tokens, short.finish_reason) == ("2015", len(cut), "length")
    assert whole.text == "2015年"
    # a cached generation stored before is read back the same way; a stop is left alone
    cache = ScoreCache(tmp_path / "c.sqlite")
    cache.put_blobs("fp", "generate", [("k", {"text": "4\ufffd", "n_tokens": 1,
                                              "finish_reason": "length"})])  # fmt: skip
    assert Generation(**cache.get_blobs(["k"])["k"]).text == "4"
    assert Generation("4\ufffd", 1, "stop").text == "4\ufffd"
