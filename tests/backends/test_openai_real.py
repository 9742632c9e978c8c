"""openai: over the real SmolLM2 model served by the loopback server: the full canary accepts
it, and scores equal the local backend on the same weights."""

from __future__ import annotations

from typing import Any

import pytest

from contamscope.backends import ScoreRequest, load_backend
from contamscope.backends.probe import check_backend

REQUESTS = [
    ScoreRequest("The capital of France is", " Paris."),
    ScoreRequest("Question: Which planet is largest?\nA. Mars\nB. Jupiter\nAnswer:", " B"),
    ScoreRequest("The sk", "y is blue"),
]


@pytest.mark.real_model
def test_smollm2_server_passes_full_canary_and_matches_local(
    serve: Any, smollm2_backend: Any
) -> None:
    folder = smollm2_backend.model.name_or_path
    server = serve("--name", "smollm2", model=folder)
    b = load_backend(f"openai:{server.url}#smollm2", options={"bos": "<|endoftext|>"})
    report = check_backend(b, prompt_logprobs=True, method="the permutation test")
    assert report is not None and report.prompt_logprobs
    for nat, shuf in report.numbers["natural_vs_shuffled"]:
        assert nat > shuf
    got, want = b.score(REQUESTS), smollm2_backend.score(REQUESTS)
    for g, w in zip(got, want):
        assert (g.n_tokens, g.boundary_chars) == (w.n_tokens, w.boundary_chars)
        assert g.logprob == pytest.approx(w.logprob, abs=1e-3)
