"""vllm: backend. Without vLLM or a GPU (CI) only the refusal is tested; the GPU test compares
vLLM's numbers with the local backend on the same model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contamscope.backends import GenerateRequest, ScoreRequest, load_backend
from contamscope.backends.vllm import vllm_available
from contamscope.errors import ConfigError, ModelError

REQUESTS = [
    ScoreRequest("Question: what is 2+2?\nAnswer:", " 4"),
    ScoreRequest("The sk", "y is"),
    ScoreRequest("A. one\nB. two\nAnswer:", " B. two\nA. one"),
]


def test_spec_errors_need_no_vllm() -> None:
    with pytest.raises(ModelError, match="unknown model spec 'vllm:'"):
        load_backend("vllm:")
    with pytest.raises(ConfigError, match="-M bogus: unknown option for vllm"):
        load_backend("vllm:some/model", options={"bogus": "1"})
    with pytest.raises(ConfigError, match="--device cpu: vllm: models run on CUDA"):
        load_backend("vllm:some/model", device="cpu")
    for key, value, needle in [
        ("tensor_parallel_size", "two", "expected an integer"),
        ("tensor_parallel_size", "0", "must be at least 1"),
        ("max_model_len", "4k", "expected an integer"),
        ("gpu_memory_utilization", "90", "expected a fraction"),
        ("gpu_memory_utilization", "x", "expected a fraction"),
        ("enforce_eager", "yes", "expected true or false"),
    ]:
        with pytest.raises(ConfigError, match=f"-M {key}=.*{needle}"):
            load_backend("vllm:some/model", options={key: value})


@pytest.mark.skipif(vllm_available() is None, reason="vLLM is installed and a GPU is present")
def test_missing_vllm_or_gpu_is_one_clear_line() -> None:
    with pytest.raises(ConfigError) as err:
        load_backend("vllm:some/model")
    msg = str(err.value)
    assert "\n" not in msg
    assert "contamscope[vllm]" in msg or "CUDA GPU" in msg


@pytest.mark.gpu
@pytest.mark.skipif(vllm_available() is not None, reason=f"vllm: {vllm_available()}")
def test_vllm_scores_equal_local_backend(tiny_model_path: Path, tiny_backend: Any) -> None:
    b = load_backend(
        f"vllm:{tiny_model_path}",
        dtype="float32",
        options={"bos": "<|endoftext|>", "gpu_memory_utilization": "0.3", "enforce_eager": "true"},
    )
    got, want = b.score(REQUESTS), tiny_backend.score(REQUESTS)
    for g, w in zip(got, want):
        assert (g.n_tokens, g.boundary_chars) == (w.n_tokens, w.boundary_chars)
        assert g.logprob == pytest.approx(w.logprob, abs=1e-2)
    stats = b.token_stats(REQUESTS)
    assert [s.tokens for s in stats] == [s.tokens for s in tiny_backend.token_stats(REQUESTS)]
    gen = b.generate([GenerateRequest("Hello", 5)])
    assert gen[0].n_tokens <= 5


class _Logprob:
    def __init__(self, logprob: float, rank: int) -> None:
        self.logprob, self.rank = logprob, rank


class _StandInEngine:
    """What VLLMBackend uses of ``vllm.LLM``, computing vLLM's prompt log-probs (the prompt
    token and the top ``k``, with ranks) with the tiny transformers model: it checks the
    backend's own host code (tokenisation, offsets, too-long requests) on machines without
    vLLM or a GPU. The GPU test above runs the real engine."""

    def __init__(self, model: Any, tokenizer: Any, max_model_len: int) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.llm_engine = type(
            "Engine", (), {"model_config": type("C", (), {"max_model_len": max_model_len})()}
        )()
        self.prompt_lengths: list[int] = []

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def generate(self, prompts: list[dict[str, Any]], params: Any, use_tqdm: bool) -> list[Any]:
        import torch

        top = params.kw["prompt_logprobs"]
        outs = []
        for p in prompts:
            ids = p["prompt_token_ids"]
            self.prompt_lengths.append(len(ids))
            with torch.no_grad():
                logits = self.model(torch.tensor([ids])).logits[0].double()
            lp = torch.log_softmax(logits, -1)
            entries: list[Any] = [None]
            for j in range(1, len(ids)):
                row = lp[j - 1]
                ranks = torch.argsort(row, descending=True)
                best = {int(t): _Logprob(float(row[t]), r + 1) for r, t in enumerate(ranks[:top])}
                tok = ids[j]
                rank = int((row > row[tok]).sum()) + 1
                best.setdefault(tok, _Logprob(float(row[tok]), rank))
                entries.append(best)
            outs.append(type("Out", (), {"prompt_logprobs": entries})())
        return outs


def test_vllm_host_code_with_a_stand_in_engine(
    tiny_model_path: Path, tiny_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backend's tokenisation and read-out (it called a method only the local backend
    has, so every vllm: run failed at its first score call) and its too-long requests."""
    import math
    import sys
    import types

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from contamscope.backends.vllm import VLLMBackend

    fake = types.ModuleType("vllm")
    fake.SamplingParams = lambda **kw: types.SimpleNamespace(kw=kw)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", fake)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_path)).eval()
    engine = _StandInEngine(model, AutoTokenizer.from_pretrained(str(tiny_model_path)), 512)
    b = VLLMBackend(engine, spec="vllm:tiny", identity="tiny", dtype="float32", bos="<|endoftext|>")
    requests = [
        *REQUESTS,
        ScoreRequest("word " * 600, "A:x\n"),  # over 512 tokens: NaN, not sent
        ScoreRequest("word " * 400_000, "A:x\n"),  # set aside before tokenising it all
        ScoreRequest("Empty?", ""),
    ]
    got, want = b.score(requests), tiny_backend.score(requests)
    for g, w in zip(got[:3], want[:3]):
        assert (g.n_tokens, g.boundary_chars) == (w.n_tokens, w.boundary_chars)
        assert g.logprob == pytest.approx(w.logprob, abs=1e-3)
    assert math.isnan(got[3].logprob) and math.isnan(got[4].logprob)
    assert (
        [g.too_long for g in got]
        == [w.too_long for w in want]
        == [False] * 3 + [True] * 2 + [False]
    )
    assert got[5].logprob == want[5].logprob == 0.0
    assert max(engine.prompt_lengths) <= 512
    stats, local = b.token_stats(requests[:4]), tiny_backend.token_stats(requests[:4])
    for s, t in zip(stats[:3], local[:3]):
        assert s.tokens == t.tokens and s.greedy == t.greedy
        assert s.logprobs == pytest.approx(t.logprobs, abs=1e-3)
    assert math.isnan(stats[3].logprobs[0])
