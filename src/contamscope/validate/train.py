"""Continued training of a model copy on the leaked items (plain torch, deterministic).

Causal-LM loss on every token of each training text (BOS + text + EOS, the way the scoring
backend sees it), AdamW at a constant learning rate, a seeded shuffle per epoch, gradient
accumulation over micro-batches bounded by a padded-token budget. With a constant rate the
checkpoint after ``k`` epochs is exactly what a ``k``-epoch run would produce, so one run gives
every epoch count.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..paths import replace_text

__all__ = ["TrainConfig", "EpochLog", "train_epochs", "tokenize_texts", "save_checkpoint"]

CHECKPOINT_DONE = "contamscope-train.json"
"""Written last into a checkpoint folder; its presence means the folder is complete."""


@dataclass(frozen=True)
class TrainConfig:
    """Settings of the continued training (all of them change the injected model)."""

    lr: float = 1e-4
    """AdamW learning rate, constant (no warm-up, no decay)."""
    batch_items: int = 8
    """Texts per optimizer step (the effective batch; split into micro-batches as memory needs)."""
    max_batch_tokens: int = 1024
    """Padded tokens per micro-batch (forward + backward); bounds activation memory."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient clipping (global L2 norm); 0 disables it."""
    seed: int = 0
    """Seed of the torch generator and of the per-epoch shuffles."""

    def __post_init__(self) -> None:
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ConfigError("--lr must be a positive number")
        if self.batch_items < 1:
            raise ConfigError("--train-batch-items must be at least 1")
        if self.max_batch_tokens < 16:
            raise ConfigError("--train-batch-tokens must be at least 16")
        if self.weight_decay < 0 or self.max_grad_norm < 0:
            raise ConfigError("weight decay and gradient clipping must not be negative")

    def settings(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class EpochLog:
    """What one training epoch did."""

    epoch: int
    """1-based epoch number."""
    mean_loss: float
    """Mean token-level cross-entropy over the epoch (nats per token, before each step)."""
    steps: int
    """Optimizer steps taken in the epoch."""
    tokens: int
    """Target tokens trained on in the epoch."""
    seconds: float
    """Wall time of the epoch."""


def tokenize_texts(tokenizer: Any, texts: Sequence[str], bos_id: int | None) -> list[list[int]]:
    """Token ids of each text as the scoring backend sees it: BOS, the text, then EOS."""
    eos = tokenizer.eos_token_id
    out = []
    for text in texts:
        ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        out.append(
            ([bos_id] if bos_id is not None else []) + ids + ([eos] if eos is not None else [])
        )
    return out


def _micro_batches(seqs: list[list[int]], budget: int) -> list[list[list[int]]]:
    """Group sequences (in the given order) so that count x longest <= budget (>= 1 each)."""
    batches: list[list[list[int]]] = []
    cur: list[list[int]] = []
    longest = 0
    for s in seqs:
        new_longest = max(longest, len(s))
        if cur and new_longest * (len(cur) + 1) > budget:
            batches.append(cur)
            cur, new_longest = [], len(s)
        cur.append(s)
        longest = new_longest
    if cur:
        batches.append(cur)
    return batches


def _padded(batch: list[list[int]], device: Any) -> tuple[Any, Any]:
    """(ids, attention mask) of token lists on ``device``, right-padded with 0 to the longest."""
    from ..backends.hf import right_padded

    ids, mask = right_padded(batch)
    return ids.to(device), mask.to(device)


def train_epochs(
    model: Any,
    sequences: Sequence[Sequence[int]],
    n_epochs: int,
    config: TrainConfig,
    *,
    after_epoch: Callable[[int, EpochLog], None] | None = None,
    on_step: Callable[[int], None] | None = None,
) -> list[EpochLog]:
    """Train ``model`` in place for ``n_epochs`` on ``sequences`` (token id lists).

    ``after_epoch(epoch, log)`` runs after each epoch (to save a checkpoint); ``on_step(n)``
    after each optimizer step with the number of texts in it.
    """
    import torch

    from .head_loss import plain_loss, split_head_fits, split_loss

    if not sequences:
        raise ConfigError("nothing to train on")
    device = next(model.parameters()).device
    # the head's loss a block of rows at a time where that is the model's own loss (checked
    # on the start of the first text, in eval mode, before the seed is set)
    first = _padded([list(sequences[0])[:64]], device)
    loss_of = split_loss if split_head_fits(model, *first) else plain_loss
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]

    def adamw(fused: bool | None) -> torch.optim.AdamW:
        return torch.optim.AdamW(
            params, config.lr, (0.9, 0.999), 1e-8, config.weight_decay, fused=fused
        )

    try:  # one kernel per parameter: no foreach temporaries the size of the model
        opt = adamw(True)
    except (RuntimeError, TypeError):  # a device or torch without the fused kernel
        opt = adamw(None)
    logs: list[EpochLog] = []
    seqs = [list(s) for s in sequences]
    for epoch in range(1, n_epochs + 1):
        t0 = time.perf_counter()
        order = list(range(len(seqs)))
        rng.shuffle(order)
        loss_sum, n_tok, steps = 0.0, 0, 0
        for s in range(0, len(order), config.batch_items):
            step_seqs = [seqs[i] for i in order[s : s + config.batch_items]]
            step_tokens = sum(len(x) - 1 for x in step_seqs)
            opt.zero_grad(set_to_none=True)
            for mb in _micro_batches(step_seqs, config.max_batch_tokens):
                loss = loss_of(model, *_padded(mb, device))
                (loss / step_tokens).backward()
                loss_sum += float(loss.detach())
            if config.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            opt.step()
            steps += 1
            n_tok += step_tokens
            if on_step is not None:
                on_step(len(step_seqs))
        log = EpochLog(epoch, loss_sum / max(1, n_tok), steps, n_tok, time.perf_counter() - t0)
        logs.append(log)
        if after_epoch is not None:
            model.eval()
            after_epoch(epoch, log)
            model.train()
    model.eval()
    return logs


def save_checkpoint(model: Any, tokenizer: Any, folder: Path, info: dict[str, Any]) -> None:
    """Save ``model`` and ``tokenizer`` as a transformers folder; the done-marker is written last."""
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    replace_text(folder / CHECKPOINT_DONE, json.dumps(info, indent=2) + "\n")


def checkpoint_complete(folder: Path) -> bool:
    return (folder / CHECKPOINT_DONE).is_file() and (folder / "config.json").is_file()
