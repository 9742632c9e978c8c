"""The engine on other architectures than Llama: sliding-window attention (Gemma 2/3, Mistral,
Qwen2, Phi-3), eager attention, and layers tree attention cannot run (Mamba, LFM2).

Each tiny random model has a window of a few tokens, far shorter than the items, so a mask that
forgot the window, or a cache that kept only its last keys, would be caught (before the fix the
first gave Gemma 3 log-probs 4.6 nats off with no error, the second a shape error)."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contamscope.backends import GenerateRequest, ScoreRequest
from contamscope.errors import ContamscopeWarning

QUESTION = (
    "Question: which of these is the largest planet of the solar system, by mass and by radius?\n"
)
OPTIONS = ["A. Jupiter\n", "B. Saturn\n", "C. Earth and its moon\n", "D. Mars\n"]
REQUESTS = [ScoreRequest(QUESTION, "".join(p)) for p in itertools.permutations(OPTIONS)][:8] + [
    ScoreRequest("Hi ", "there"),  # a prefix shorter than the window
    ScoreRequest("下列有关鳃弓的描述，错误的是:\n", "A:由间充质增生形成\nB:人胚第4周出现\n"),
]
WINDOW = 6


def _common(vocab: int) -> dict[str, Any]:
    return dict(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )


def _gemma3(t: Any, v: int) -> Any:
    kinds = ["sliding_attention", "full_attention"] * 2
    cfg = t.Gemma3TextConfig(sliding_window=WINDOW, head_dim=16, layer_types=kinds, **_common(v))
    return t.Gemma3ForCausalLM(cfg)


def _gemma2(t: Any, v: int) -> Any:
    return t.Gemma2ForCausalLM(t.Gemma2Config(sliding_window=WINDOW, head_dim=16, **_common(v)))


def _mistral(t: Any, v: int) -> Any:
    return t.MistralForCausalLM(t.MistralConfig(sliding_window=WINDOW, **_common(v)))


def _qwen2(t: Any, v: int) -> Any:
    cfg = t.Qwen2Config(
        use_sliding_window=True, sliding_window=WINDOW, max_window_layers=2, **_common(v)
    )
    return t.Qwen2ForCausalLM(cfg)


def _phi3(t: Any, v: int) -> Any:
    return t.Phi3ForCausalLM(t.Phi3Config(sliding_window=WINDOW, **_common(v)))


def _llama(t: Any, v: int) -> Any:
    return t.LlamaForCausalLM(t.LlamaConfig(**_common(v)))


def _gpt_neox(t: Any, v: int) -> Any:  # Pythia: the models whose training data is public
    cfg = t.GPTNeoXConfig(
        vocab_size=v, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=512,
    )  # fmt: skip
    return t.GPTNeoXForCausalLM(cfg)


def _gpt2(t: Any, v: int) -> Any:  # learned absolute positions
    return t.GPT2LMHeadModel(t.GPT2Config(vocab_size=v, n_embd=64, n_layer=2, n_head=4))


def _bloom(t: Any, v: int) -> Any:  # ALiBi: position biases from the 2-D attention mask
    return t.BloomForCausalLM(t.BloomConfig(vocab_size=v, hidden_size=64, n_layer=2, n_head=4))


def _mamba(t: Any, v: int) -> Any:
    return t.MambaForCausalLM(t.MambaConfig(vocab_size=v, hidden_size=64, num_hidden_layers=2))


def _lfm2(t: Any, v: int) -> Any:
    common = _common(v)
    common.pop("max_position_embeddings")
    return t.Lfm2ForCausalLM(t.Lfm2Config(full_attn_idxs=[1, 3], **common))


def _build(
    tmp_path_factory: pytest.TempPathFactory, tokenizer: Any, make: Callable[[Any, int], Any]
) -> Path:
    import torch
    import transformers

    torch.manual_seed(0)
    model = make(transformers, len(tokenizer))
    with torch.no_grad():  # make log-probs vary a lot between texts
        model.get_input_embeddings().weight.normal_(0, 1.0)
    path = tmp_path_factory.mktemp("arch") / make.__name__.strip("_")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _load(path: Path, attn: str | None = None, fuse: str | None = None) -> Any:
    from contamscope.backends.hf import HFBackend

    options = {"bos": "<|endoftext|>"} | ({"attn": attn} if attn else {})
    options |= {"fuse": fuse} if fuse else {}
    return HFBackend.from_pretrained(
        str(path), spec=f"hf:{path}", identity=path.name, device="cpu", dtype="float32",
        options=options,
    )  # fmt: skip


def _worst(backend: Any, requests: list[ScoreRequest]) -> float:
    got = backend.score(requests)
    return max(abs(r.logprob - backend.naive_logprob(q)) for r, q in zip(got, requests))


@pytest.mark.parametrize(
    ("make", "attn", "windows"),
    [
        (_gemma3, "sdpa", {"full_attention": None, "sliding_attention": WINDOW}),
        (_gemma3, "eager", {"full_attention": None, "sliding_attention": WINDOW}),
        (_gemma2, "eager", {"full_attention": None, "sliding_attention": WINDOW}),
        (_mistral, "sdpa", {"sliding_attention": WINDOW}),
        (_qwen2, "sdpa", {"full_attention": None, "sliding_attention": WINDOW}),
        (_phi3, "eager", {"sliding_attention": WINDOW}),
        (_llama, "eager", {"full_attention": None}),
        (_gpt_neox, "eager", {"full_attention": None}),
        (_gpt2, "eager", {"full_attention": None}),
    ],
    ids=lambda x: x.__name__.strip("_") if callable(x) else None,
)
def test_tree_engine_matches_the_full_forward_pass(
    tmp_path_factory: pytest.TempPathFactory,
    smollm2_tokenizer: Any,
    make: Callable[[Any, int], Any],
    attn: str,
    windows: dict[str, int | None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sliding-window layers see the last ``WINDOW`` positions in the tree too (prefix keys and
    ancestor nodes alike), and eager attention gets an additive mask (it added the boolean
    mask as 1s and 0s and masked nothing: Llama 0.01, Gemma 2 1.56 nats off). Generation,
    which shares prompt prefixes the same way, too."""
    import torch

    from contamscope.backends import hf_decode
    from contamscope.backends.hf_text import _prompt_ids

    backend = _load(_build(tmp_path_factory, smollm2_tokenizer, make), attn)
    assert backend.engine == "prefix-tree" and backend._windows == windows
    assert backend.fingerprint().endswith("|engine=4")  # not the scores version 3 got wrong
    assert len(backend.encode(REQUESTS[0]).prefix) > 3 * WINDOW
    assert _worst(backend, REQUESTS) < 1e-3
    old = backend.max_tree_nodes
    try:  # subtrees cut below the window: trunks repeated, depths past the window
        backend.max_tree_nodes = 4
        assert _worst(backend, REQUESTS[:3]) < 1e-3
    finally:
        backend.max_tree_nodes = old
    # greedy generation over shared prompt prefixes (the window of a few tokens, the prompts'
    # own tokens past what they share, padding) gives what transformers' generate gives
    prompts = [QUESTION + "A. Jupiter\nAnswer:", QUESTION + "B. Saturn\nAnswer:", QUESTION[:50]]
    reqs = [GenerateRequest(p, max_new_tokens=5) for p in [*prompts, "Hi"]]
    seen: list[Any] = []
    real = hf_decode._next_token

    def record(backend: Any, states: Any) -> Any:
        logits = backend._head_logits(states) if backend._split_head else states
        cap = backend._softcap  # (Gemma 2's, which the argmax needs not)
        seen.extend(torch.tanh(logits / cap) * cap if cap and backend._split_head else logits)
        return real(backend, states)

    monkeypatch.setattr(hf_decode, "_next_token", record)
    ids = [_prompt_ids(backend, r) for r in reqs]
    new = hf_decode.greedy_tokens(backend, ids, 5, None)
    # each next-token distribution is one of a full forward pass (rows in the engine's order;
    # the argmax alone can miss a window off by a few keys)
    with torch.inference_mode():
        want = [
            backend.model(torch.tensor([p + g[:k]])).logits[0, -1]
            for p, g in zip(ids, new)
            for k in range(5)
        ]
    assert len(seen) == len(want)
    assert max(min(float((s - w).abs().max()) for w in want) for s in seen) < 1e-3
    shared = backend.generate(reqs)
    backend.engine = "full-sequence"  # (its path: model.generate, left-padded)
    assert shared == backend.generate(reqs)


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (_mamba, "layers other than full or sliding-window attention"),
        (_lfm2, "layers other than full or sliding-window attention"),
        (_bloom, "ValueError in a tree-attention pass"),
    ],
    ids=["mamba", "lfm2", "bloom"],
)
def test_models_tree_attention_cannot_run_score_whole_texts(
    tmp_path_factory: pytest.TempPathFactory,
    smollm2_tokenizer: Any,
    make: Callable[[Any, int], Any],
    why: str,
) -> None:
    """Recurrent (Mamba) and convolution (LFM2) layers carry state along a sequence, so a
    tree's rows cannot be read as branches, and Bloom's ALiBi biases come from a 2-D mask
    (its tree pass raises): the backend says so once and runs each text whole, with the
    same numbers, NaN for a text too long and 0 for an empty one."""
    path = _build(tmp_path_factory, smollm2_tokenizer, make)
    with pytest.warns(ContamscopeWarning) as said:  # (the CLI prints it as a note: line)
        backend = _load(path, "eager")
    assert backend.engine == "full-sequence"
    assert backend.describe()["engine"] == "full-sequence"
    assert len(said) == 1
    assert f"the prefix-tree engine cannot run this model ({why})" in str(said[0].message)
    # -M fuse=on applies to the tree engine: asked for here, it is said to be left unused
    with pytest.warns(ContamscopeWarning, match="fused kernels not used, the model is scored as"):
        assert _load(path, "eager", fuse="on").fused == []
    assert _worst(backend, REQUESTS) < 1e-3
    seen: list[int] = []
    backend.max_length = 64  # (Mamba has no context limit of its own)
    requests = [
        ScoreRequest("Q:", ""),
        ScoreRequest("word " * 1000, "A:x\n"),  # set aside before tokenising it all
        ScoreRequest("word " * 70, "A:x\n"),  # tokenised, found too long
        REQUESTS[0],
    ]
    got = backend.score(requests, progress=seen.append)
    assert got[0].logprob == 0.0 and got[0].n_tokens == 0
    assert math.isnan(got[1].logprob) and got[1].n_tokens == 0 and got[1].too_long
    assert math.isnan(got[2].logprob) and not math.isnan(got[3].logprob)
    assert [g.too_long for g in got] == [False, True, True, False]
    assert [g.n_tokens for g in got[2:]] == [len(backend.encode(r).cont) for r in requests[2:]]
    assert sum(seen) == 4


def test_a_model_the_check_finds_off_is_scored_whole(
    tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load-time check compares the tree engine with a full forward pass: a tree pass that
    gives other numbers (here: the window of the mask set far too short) or fails means the
    texts are scored whole."""
    monkeypatch.setattr(
        "contamscope.backends.hf.layer_windows", lambda config: {"full_attention": 1}
    )
    with pytest.warns(ContamscopeWarning, match="log-probs differ from a full forward pass by"):
        backend = _load(tiny_model_path)
    assert backend.engine == "full-sequence"
    assert backend.tokens_run == backend.tokens_min == 0  # the check's passes are not counted
    assert _worst(backend, REQUESTS[:3]) < 1e-3
    monkeypatch.setattr(
        "contamscope.backends.hf.layer_windows", lambda config: {"full_attention": None}
    )
    assert _load(tiny_model_path).engine == "prefix-tree"


def test_full_attention_sdpa_models_keep_their_cached_scores(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """Version 4 changed no number of a full-attention model run through SDPA: its scores keep
    the key of version 3 (a cache of SmolLM2 or Llama scores stays valid)."""
    assert tiny_backend.engine == "prefix-tree"
    assert tiny_backend.fingerprint().endswith("|engine=3")


@functools.cache
def _cpu_compile_fails() -> str | None:
    """Why torch.compile cannot build a trivial CPU kernel here (it needs a C++ compiler and
    Python's headers), or None."""
    import torch
    import torch._dynamo

    old = torch._dynamo.config.suppress_errors
    torch._dynamo.config.suppress_errors = False  # (fusing sets it: a failure must show here)
    try:
        torch.compile(lambda x: torch.sin(x) + 1)(torch.ones(3))
    except Exception as exc:  # noqa: BLE001 (whatever the compiler's toolchain raises)
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
    finally:
        torch._dynamo.config.suppress_errors = old
    return None


@pytest.mark.parametrize(
    ("make", "kinds"),
    [
        (_llama, ["LlamaMLP", "LlamaRMSNorm", "modeling_llama.apply_rotary_pos_emb"]),
        (_gemma3, ["Gemma3MLP", "Gemma3RMSNorm", "modeling_gemma3.apply_rotary_pos_emb"]),
        (_qwen2, ["Qwen2MLP", "Qwen2RMSNorm", "modeling_qwen2.apply_rotary_pos_emb"]),
        (_phi3, ["Phi3MLP", "Phi3RMSNorm", "modeling_phi3.apply_rotary_pos_emb"]),  # gate_up_proj
    ],
    ids=lambda x: x.__name__.strip("_") if callable(x) else None,
)
def test_fused_kernels_give_the_eager_numbers(
    tmp_path_factory: pytest.TempPathFactory,
    smollm2_tokenizer: Any,
    make: Callable[[Any, int], Any],
    kinds: list[str],
) -> None:
    """``-M fuse=on`` compiles each family's own norm, gated MLP and rotary code into fused
    kernels (torch.compile; here through C++ on the CPU, on a GPU through Triton, where it is
    the default): the log-probs of the eager model to float32 rounding, and another model of the
    family loaded without it keeps running the eager code."""
    why = _cpu_compile_fails()
    if why:
        pytest.skip(f"torch.compile cannot build CPU kernels on this machine ({why})")
    from torch._dynamo.utils import counters

    path = _build(tmp_path_factory, smollm2_tokenizer, make)
    eager = _load(path, fuse="off")
    want = [r.logprob for r in eager.score(REQUESTS)]
    assert eager.fused == [] and _load(path).fused == []  # auto: not on a CPU
    fused = _load(path, fuse="on")
    assert fused.fused == kinds == fused.describe()["fused"]
    got = [r.logprob for r in fused.score(REQUESTS)]
    assert max(abs(g - w) for g, w in zip(got, want)) < 1e-4
    assert fused.fingerprint() == eager.fingerprint()  # same numbers: the cache is shared
    captured = counters["stats"]["calls_captured"]
    again = [r.logprob for r in eager.score(REQUESTS)]  # (scored in the same batches)
    assert again == want
    assert counters["stats"]["calls_captured"] == captured  # it compiled nothing
    # the reference computation runs the model's own code, fused model or not (to the bit:
    # fused and eager float32 differ by about 1e-6), and the fused forwards are back after it
    assert fused.naive_logprob(REQUESTS[0]) == eager.naive_logprob(REQUESTS[0])
    with fused.eager():
        assert not any("forward" in m.__dict__ for m in fused.model.modules())
    assert sum("forward" in m.__dict__ for m in fused.model.modules()) > 0


def test_fusion_that_changes_the_numbers_is_undone(
    tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fused model's final states are checked against the eager ones on a probe batch when
    it loads: a compiled function that computes something else, or fails to compile, leaves the
    model eager (every module's own forward back) with a one-line note, and scoring goes on."""
    import torch

    from contamscope.backends import fusion

    def off_by_two(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*a: Any, **k: Any) -> Any:
            out = fn(*a, **k)
            return out * 2 if isinstance(out, torch.Tensor) else out  # (rotary: a pair)

        return run

    def broken(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*a: Any, **k: Any) -> Any:
            raise RuntimeError("no kernel for this")

        return run

    # a module whose forward something else replaced (accelerate's hooks, a patch) is left be
    from contamscope.backends.fusion import fusible

    probe = _load(tiny_model_path, fuse="off")
    norm = probe.model.model.norm
    norm.forward = norm.forward
    assert norm not in fusible(probe.model)[0] and len(fusible(probe.model)[0]) == 6
    for compiled, why in (
        (off_by_two, "fused states differ from the eager ones by"),
        (broken, "compiling failed (RuntimeError: no kernel for this)"),
    ):
        monkeypatch.setattr(fusion, "_compiled", compiled)
        with pytest.warns(ContamscopeWarning) as said:
            backend = _load(tiny_model_path, fuse="on")
        assert len(said) == 1 and f"fused kernels not used, {why}" in str(said[0].message)
        assert backend.fused == [] and backend._fusion is None
        assert not any("forward" in m.__dict__ for m in backend.model.modules())
        assert _worst(backend, REQUESTS[:3]) < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_sliding_window_tree_on_cuda(
    tmp_path_factory: pytest.TempPathFactory, smollm2_tokenizer: Any, dtype: str
) -> None:
    """The windowed masks built on the device, in the GPU's planning chunks (skipped without
    CUDA, as in CI)."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    from contamscope.backends.hf import HFBackend

    path = _build(tmp_path_factory, smollm2_tokenizer, _gemma3)
    backend = HFBackend.from_pretrained(
        str(path), spec="tiny-gemma3", identity="g", device="cuda", dtype=dtype,
        options={"bos": "<|endoftext|>"},
    )  # fmt: skip
    assert backend.engine == "prefix-tree"
    backend.plan_chunk_tokens = 64
    if dtype == "float32":
        assert _worst(backend, REQUESTS) < 1e-3
        return
    from half_precision import bf16_tol

    for got, req in zip(backend.score(REQUESTS), REQUESTS):  # against float64 from bfloat16
        want = backend.naive_logprob(req)
        assert abs(got.logprob - want) < bf16_tol(want)
