"""Continued training on the tiny random model: it changes the weights, is deterministic,
accumulates gradients exactly, and raises the leaked items' log-probs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch

from contamscope.backends.base import ScoreRequest
from contamscope.backends.hf import HFBackend
from contamscope.data.items import MCQItem
from contamscope.errors import ConfigError
from contamscope.perturb import TEMPLATES
from contamscope.validate import TrainConfig, train_epochs, training_text
from contamscope.validate.train import (
    _micro_batches,
    checkpoint_complete,
    save_checkpoint,
    tokenize_texts,
)

TPL = TEMPLATES["paper"]
ITEMS = [
    MCQItem(id="l1", question="Which gas do plants absorb", options=("CO2", "O2", "N2", "He")),
    MCQItem(
        id="l2", question="What is the capital of France", options=("Rome", "Paris", "Oslo", "Bern")
    ),
    MCQItem(
        id="c1",
        question="Which metal is liquid at room temperature",
        options=("Iron", "Mercury", "Tin", "Lead"),
    ),
    MCQItem(
        id="c2", question="How many legs has a spider", options=("six", "eight", "ten", "four")
    ),
]
LEAKED, CLEAN = ITEMS[:2], ITEMS[2:]


def _seqs(backend: HFBackend) -> list[list[int]]:
    texts = [training_text(it, TPL, (0, 1, 2, 3)) for it in LEAKED]
    return tokenize_texts(backend.tokenizer, texts, backend.bos_id)


def _train(backend: HFBackend, **kw: Any) -> tuple[Any, list[Any]]:
    model = copy.deepcopy(backend.model)
    cfg = TrainConfig(**{"lr": 3e-3, "batch_items": 2, **kw})
    logs = train_epochs(model, _seqs(backend), 3, cfg)
    return model, logs


def _orig_logprobs(backend: HFBackend, model: Any) -> dict[str, float]:
    be = HFBackend(model, backend.tokenizer, spec="t", identity="t", bos="<|endoftext|>")
    reqs = [ScoreRequest(TPL.prefix(it), TPL.continuation(it, (0, 1, 2, 3))) for it in ITEMS]
    return {it.id: r.logprob for it, r in zip(ITEMS, be.score(reqs))}


def test_tokenize_matches_scoring_layout(tiny_backend: HFBackend) -> None:
    seq = _seqs(tiny_backend)[0]
    enc = tiny_backend.encode(
        ScoreRequest(TPL.prefix(LEAKED[0]), TPL.continuation(LEAKED[0], (0, 1, 2, 3)))
    )
    assert seq[: len(enc.prefix) + len(enc.cont)] == [*enc.prefix, *enc.cont]
    assert seq[-1] == tiny_backend.tokenizer.eos_token_id


def test_training_changes_weights_and_raises_leaked_logprobs(tiny_backend: HFBackend) -> None:
    before = _orig_logprobs(tiny_backend, tiny_backend.model)
    model, logs = _train(tiny_backend)
    assert [log.epoch for log in logs] == [1, 2, 3]
    assert logs[-1].mean_loss < logs[0].mean_loss
    assert all(log.steps == 1 and log.tokens > 0 for log in logs)
    changed = [
        not torch.equal(p, q) for p, q in zip(model.parameters(), tiny_backend.model.parameters())
    ]
    assert all(changed)
    after = _orig_logprobs(tiny_backend, model)
    rise = {k: after[k] - before[k] for k in before}
    assert min(rise["l1"], rise["l2"]) > max(rise["c1"], rise["c2"])
    assert min(rise["l1"], rise["l2"]) > 5.0


def test_training_is_deterministic_and_accumulation_exact(tiny_backend: HFBackend) -> None:
    a, _ = _train(tiny_backend)
    b, _ = _train(tiny_backend)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    # micro-batches of one text each (gradient accumulation) give the same update
    c, _ = _train(tiny_backend, max_batch_tokens=16)
    for p, q in zip(a.parameters(), c.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


def test_micro_batches_respect_the_budget() -> None:
    seqs = [[1] * n for n in (5, 3, 8, 2, 2)]
    batches = _micro_batches(seqs, 10)
    assert [len(b) for b in batches] == [2, 1, 2]
    assert all(len(b) * max(len(s) for s in b) <= 10 for b in batches)
    assert _micro_batches([[1] * 20], 10) == [[[1] * 20]]  # a long text still goes alone


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="--lr"):
        TrainConfig(lr=0)
    with pytest.raises(ConfigError, match="--train-batch-items"):
        TrainConfig(batch_items=0)


def test_checkpoint_is_a_loadable_model_folder(tiny_backend: HFBackend, tmp_path: Path) -> None:
    from contamscope.backends import load_backend

    model, _ = _train(tiny_backend)
    folder = tmp_path / "ckpt"
    save_checkpoint(model, tiny_backend.tokenizer, folder, {"epochs": 3})
    assert checkpoint_complete(folder)
    be = load_backend(
        f"hf:{folder}", device="cpu", dtype="float32", options={"bos": "<|endoftext|>"}
    )
    want = _orig_logprobs(tiny_backend, model)
    got = _orig_logprobs(tiny_backend, be.model)  # type: ignore[attr-defined]
    assert got == pytest.approx(want, abs=1e-4)
