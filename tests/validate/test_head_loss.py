"""The training's blocked head loss: the model's own cross-entropy and gradients, without
the [tokens, vocabulary] blocks, and used only where it is the model's own loss."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from contamscope.backends.hf import HFBackend
from contamscope.validate import TrainConfig, train_epochs
from contamscope.validate import head_loss as hl
from contamscope.validate.train import _padded


@pytest.mark.parametrize("rows", [1, 127, 128, 300])
def test_head_loss_and_gradients_equal_cross_entropy(rows: int) -> None:
    """Over one block, a block's edge and several blocks (``ROWS`` is 128): the loss and both
    gradients equal float64 log-softmax cross-entropy."""
    gen = torch.Generator().manual_seed(rows)
    hidden = torch.randn(rows, 24, generator=gen)
    weight = torch.randn(1000, 24, generator=gen)
    targets = torch.randint(0, 1000, (rows,), generator=gen)
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    (hl.head_loss(h, w, targets) * 0.5).backward()
    h64, w64 = hidden.double().requires_grad_(), weight.double().requires_grad_()
    want = torch.nn.functional.cross_entropy(h64 @ w64.t(), targets, reduction="sum")
    (want * 0.5).backward()
    got = hl.head_loss(hidden, weight, targets)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), want.detach(), rtol=1e-6, atol=1e-4)
    assert h.grad is not None and w.grad is not None and h64.grad is not None
    torch.testing.assert_close(h.grad.double(), h64.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(w.grad.double(), w64.grad, rtol=1e-5, atol=1e-5)


def test_a_second_backward_pass_is_refused() -> None:
    """The gradients are scaled in place in the backward pass, so a second one would scale
    them twice: it raises instead."""
    w = torch.randn(50, 8, requires_grad=True)
    loss = hl.head_loss(torch.randn(3, 8), w, torch.tensor([1, 2, 3]))
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward once"):
        loss.backward()


def test_no_rows_gives_a_zero_loss_with_gradients() -> None:
    w = torch.randn(50, 8, requires_grad=True)
    loss = hl.head_loss(torch.zeros(0, 8), w, torch.zeros(0, dtype=torch.long))
    loss.backward()
    assert float(loss.detach()) == 0.0 and w.grad is not None and not w.grad.any()


def test_split_loss_is_the_models_own_loss_with_padding(tiny_backend: HFBackend) -> None:
    """Rows of different lengths (padding ignored), tied embeddings: the loss and every
    parameter's gradient equal the plain path's."""
    a, b = copy.deepcopy(tiny_backend.model), copy.deepcopy(tiny_backend.model)
    ids, mask = _padded([[1, 5, 9, 200, 7, 3], [1, 40, 41], [1, 2, 3, 4]], "cpu")
    assert hl.split_head_fits(a, ids, mask)
    plain, split = hl.plain_loss(a, ids, mask), hl.split_loss(b, ids, mask)
    torch.testing.assert_close(split, plain, rtol=1e-5, atol=1e-5)
    plain.backward()
    split.backward()
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert p.grad is not None and q.grad is not None, name
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6, msg=name)


def _tiny(kind: str, **extra: Any) -> Any:
    import transformers as t

    torch.manual_seed(0)
    common = dict(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        **extra,
    )
    if kind == "gemma2":
        model = t.Gemma2ForCausalLM(t.Gemma2Config(**common))
    else:
        model = t.LlamaForCausalLM(t.LlamaConfig(**common))
    with torch.no_grad():  # logits of a few units, where a cap or a bias changes the loss
        model.get_output_embeddings().weight.normal_(0, 1.0)
    return model


def test_a_model_whose_logits_are_more_than_the_product_trains_on_its_own_loss() -> None:
    """Gemma 2 soft-caps its logits, a head with a bias adds one: the check refuses the split
    loss for both, so they train on the model's own logits."""
    ids, mask = _padded([[1, 5, 9, 200, 7, 3]], "cpu")
    capped = _tiny("gemma2", final_logit_softcapping=0.5)  # small: the cap changes the loss
    assert not hl.split_head_fits(capped, ids, mask)
    plain = _tiny("llama")
    assert hl.split_head_fits(plain, ids, mask)
    plain.lm_head = torch.nn.Linear(32, 300, bias=True)
    assert not hl.split_head_fits(plain, ids, mask)
    # a bias of zeros gives the same numbers now, but split_loss would never train it
    with torch.no_grad():
        plain.lm_head.bias.zero_()
    assert not hl.split_head_fits(plain, ids, mask)


def test_training_on_the_split_loss_matches_the_plain_loss(
    tiny_backend: HFBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three epochs both ways on texts of different lengths (micro-batches with padding): the
    weights and logged losses agree up to float32 rounding."""
    seqs = [[1, *range(10 + 7 * k, 30 + 11 * k), 2] for k in range(5)]
    cfg = TrainConfig(lr=3e-3, batch_items=3, max_batch_tokens=64)
    split = copy.deepcopy(tiny_backend.model)
    logs_split = train_epochs(split, seqs, 3, cfg)
    calls: list[bool] = []
    real = hl.split_head_fits

    def refused(*a: Any) -> bool:
        calls.append(real(*a))
        return False

    monkeypatch.setattr(hl, "split_head_fits", refused)
    plain = copy.deepcopy(tiny_backend.model)
    logs_plain = train_epochs(plain, seqs, 3, cfg)
    assert calls == [True]
    for x, y in zip(logs_split, logs_plain):
        assert x.mean_loss == pytest.approx(y.mean_loss, rel=1e-5)
    assert logs_split[-1].mean_loss < logs_split[0].mean_loss
    for (name, p), q in zip(split.named_parameters(), plain.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)
