"""A few real-model checks on the bundled SmolLM2-135M over MMLU items from ../shared/benchdata."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.real_model


def _items(benchdata: Path, n: int = 3):  # type: ignore[no-untyped-def]
    from contamscope.data import load_benchmark

    loaded = load_benchmark(str(benchdata / "mmlu" / "test" / "anatomy_test.csv"))
    return loaded, loaded.items[:n]


def test_logged_logprob_equals_an_independent_computation(
    benchdata: Path, smollm2_backend, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    import torch

    from contamscope.pipeline import PermutationConfig, run_permutation
    from contamscope.store import CachedScorer, RunDir

    loaded, items = _items(benchdata, 2)
    run_permutation(
        loaded,
        items,
        CachedScorer(smollm2_backend, None),
        RunDir(tmp_path / "r"),
        PermutationConfig(),
    )
    rec = json.loads((tmp_path / "r" / "items.jsonl").read_text().splitlines()[1])
    # Independent: tokenize prefix and continuation separately (the boundary is a newline, a
    # pre-tokenizer split for this tokenizer), one full forward pass, float64 log-softmax.
    tok, model = smollm2_backend.tokenizer, smollm2_backend.model
    for k in (0, 7, 23):
        pre = [tok.convert_tokens_to_ids("<|endoftext|>")] + tok(
            rec["prefix"], add_special_tokens=False
        )["input_ids"]
        cont = tok(rec["continuations"][k], add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([pre + cont])).logits.double(), -1)[0]
        want = sum(logp[len(pre) - 1 + j, t].item() for j, t in enumerate(cont))
        assert rec["logprobs"][k] == pytest.approx(want, abs=1e-3)
        assert rec["n_tokens"][k] == len(cont)


def test_engine_matches_naive_on_real_4_and_5_option_and_chinese_items(
    benchdata: Path, smollm2_backend
) -> None:  # type: ignore[no-untyped-def]
    from contamscope.backends import ScoreRequest
    from contamscope.data import load_benchmark
    from contamscope.perturb import TEMPLATES, option_orders

    t = TEMPLATES["paper"]
    mmlu = load_benchmark(str(benchdata / "mmlu" / "test" / "virology_test.csv")).items[:1]
    cmb = load_benchmark(str(benchdata / "cmb_example_1000.json")).items[:1]
    reqs = []
    for item in mmlu + cmb:
        orders = option_orders(item.n_options).orders
        reqs += [
            ScoreRequest(t.prefix(item), t.continuation(item, o))
            for o in orders[:: max(1, len(orders) // 6)]
        ]
    got = smollm2_backend.score(reqs)
    for r, g in zip(reqs, got):
        assert g.logprob == pytest.approx(smollm2_backend.naive_logprob(r), abs=1e-3)


def test_the_converted_model_folder_is_readable_by_others(smollm2_backend) -> None:  # type: ignore[no-untyped-def]
    """The converted copy (made in this session's model folder by the fixture) has the
    permissions of the files in it, not mkdtemp's 0700: a team sharing CONTAMSCOPE_MODEL_DIR
    can read it."""
    import os
    import stat

    from contamscope.backends.bundled import converted_gguf, smollm2_gguf_path

    folder = converted_gguf(smollm2_gguf_path())
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~umask


def test_the_bundled_tokenizer_is_read_from_the_gguf_without_converting_the_model(
    smollm2_backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """``load_tokenizer('smollm2')`` on a model cache with no converted copy converted the whole
    model (40 s, 538 MB) to count tokens; it reads the GGUF's tokenizer, which tokenises as the
    loaded model's does (English, Chinese, a special token, the BOS), and its repr is one line."""
    from contamscope.backends import bundled
    from contamscope.backends.tokenizer import load_tokenizer, tokenizer_of

    monkeypatch.setattr(bundled, "model_cache_dir", lambda: tmp_path / "models")
    got = load_tokenizer("smollm2")
    assert not (tmp_path / "models").exists()
    want = tokenizer_of(smollm2_backend)
    assert want is not None and (got.bos_id, got.max_length) == (want.bos_id, want.max_length)
    for text in ["Question: 2+2?\nA. 4\nAnswer:", "下列哪项正确？\nA. 甲", "<|endoftext|>hi é 🎉"]:
        ids = [getattr(t.encode(text), "ids", None) for t in (got.tokenizer, want.tokenizer)]
        assert ids[0] == ids[1] and ids[0]
    assert "\n" not in repr(got) and len(repr(got)) < 200 and "vocab=49152" in repr(got)
