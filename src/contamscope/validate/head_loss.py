"""The training's causal-LM loss, a block of rows of vocabulary logits at a time.

``model(ids).logits`` followed by ``cross_entropy`` holds several [tokens, vocabulary] float32
blocks at once: the logits, a shifted copy, their log-softmax and, in the backward pass, the
gradients of each (about 200 MiB apiece for 1,024 tokens of SmolLM2's 49,152-token vocabulary).
On the CPU every such block was mapped, faulted in page by page and zeroed by the kernel, and
padding positions were run through the head too.

:func:`head_loss` takes the decoder's final hidden states of the scored positions only and,
for ``ROWS`` rows at a time, computes their logits into one block, the loss, and at once the
loss's gradients for the hidden states and the head's weight (``softmax - onehot`` in place of
the logits); the backward pass only scales them. The result is the same summed cross-entropy
(float32 logits, the loss summed in float64); its gradient is the same up to float32 rounding.
"""

from __future__ import annotations

from typing import Any

import torch

ROWS = 128
"""Rows of logits per block (SmolLM2: 24 MiB, under glibc's mapping threshold)."""


class _HeadLoss(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor
    ) -> torch.Tensor:
        n, vocab = hidden.shape[0], weight.shape[0]
        grad_hidden = torch.empty_like(hidden)
        grad_weight = torch.zeros_like(weight)
        total = torch.zeros((), dtype=torch.float64, device=hidden.device)
        block = torch.empty((min(ROWS, n), vocab), dtype=hidden.dtype, device=hidden.device)
        for s in range(0, n, ROWS):
            h, t = hidden[s : s + ROWS], targets[s : s + ROWS, None]
            logits = torch.mm(h, weight.t(), out=block[: h.shape[0]])
            top = logits.amax(-1, keepdim=True)
            target = logits.gather(-1, t)
            sums = logits.sub_(top).exp_().sum(-1, keepdim=True)
            total += (top + sums.log() - target).sum(dtype=torch.float64)
            probs = logits.div_(sums)  # d loss / d logits = softmax - onehot(target)
            probs.scatter_add_(-1, t, torch.full_like(target, -1.0))
            torch.mm(probs, weight, out=grad_hidden[s : s + ROWS])
            grad_weight.addmm_(probs.t(), h)
        ctx.save_for_backward(grad_hidden, grad_weight)
        return total.to(hidden.dtype)

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: Any, grad: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, None]:
        if getattr(ctx, "spent", False):
            raise RuntimeError("head_loss: its graph can be run backward once only")
        ctx.spent = True
        grad_hidden, grad_weight = ctx.saved_tensors
        # scaled in place, since a second weight-sized block (Gemma 3: 671 MB) would be mapped
        # and faulted in for every micro-batch; hence the one backward pass
        return grad_hidden.mul_(grad), grad_weight.mul_(grad), None


def head_loss(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Summed cross-entropy of ``targets`` [n] under logits ``hidden @ weight.T`` ([n, H] and
    [vocabulary, H]), differentiable in both, without holding more than ``ROWS`` rows of
    logits."""
    if hidden.shape[0] == 0:
        return (hidden.sum() + weight.sum()) * 0
    out: torch.Tensor = _HeadLoss.apply(hidden, weight, targets)
    return out


def plain_loss(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Summed next-token cross-entropy from the model's own logits (padding ignored)."""
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    targets = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-100, reduction="sum"
    )


def split_loss(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """:func:`plain_loss` through the decoder and :func:`head_loss` at non-padding positions."""
    hidden = model.get_decoder()(input_ids=ids, attention_mask=mask).last_hidden_state[:, :-1]
    keep = mask[:, 1:] == 1
    weight = model.get_output_embeddings().weight
    return head_loss(hidden[keep].float(), weight, ids[:, 1:][keep])


def split_head_fits(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> bool:
    """Whether :func:`split_loss` gives the model's own loss on this input: its logits must be
    its decoder's last hidden states times the output weight, with nothing more (no bias, no
    soft-capping or scaling of the logits; models that add one fail here and train on
    :func:`plain_loss`)."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if (
        not hasattr(model, "get_decoder")
        or not isinstance(head, torch.nn.Linear)
        or head.bias is not None
        or head.weight.dtype != torch.float32
    ):
        return False
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            want = plain_loss(model, ids, mask)
            got = split_loss(model, ids, mask)
    except (AttributeError, TypeError, RuntimeError):
        return False
    finally:
        model.train(was_training)
    return bool(torch.isclose(got, want, rtol=1e-4, atol=1e-4))
