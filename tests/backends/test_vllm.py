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
