"""Greedy decoding that runs each shared stretch of prompt tokens once (transformers backend).

The prompts a method generates from share long prefixes: BenBench's lenient n-gram criteria
continue one text from five starting points (every prompt a prefix of the longest), and CAP
asks about each question as published and as modified (the question once, the options twice).
``model.generate`` runs every prompt whole; here the prompts are sorted, each joins a *held*
prompt it shares enough of its tokens with (:func:`share_prefixes`), the held prompts run once (their KV
caches kept, as the scoring engine keeps a question's), and each prompt runs only its own
tokens past what it shares, over a copy of the held cache, then decodes token by token.

Greedy means the argmax of the next-token distribution at every step, as ``model.generate``
with ``do_sample=False`` and no logits processors; positions and masks are given explicitly
(a prompt's tokens keep their positions, padding is masked), so each prompt is decoded as if
it ran alone, up to floating-point rounding (tests compare it with ``model.generate``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .hf import right_padded
from .tree_plan import filled_cache

if TYPE_CHECKING:
    from .hf import HFBackend, _Held

__all__ = ["MIN_SHARED", "SLACK", "share_prefixes", "greedy_tokens"]

MIN_SHARED = 4
"""Fewest leading tokens a prompt must share with a held prompt to reuse its cache (a shorter
shared stretch, BOS and a word, is not worth a copy of the cache)."""

HELD_BUDGETS = 4
"""On the CPU the held prompts' caches of a group take up to this many token budgets (their
keys and values only, for all layers; a budget is counted in tokens run, whose activations take
more). On a GPU one: there the budget is sized from free memory already."""


def held_budgets(backend: HFBackend) -> int:
    """How many token budgets a group's held caches take (:data:`HELD_BUDGETS`)."""
    return HELD_BUDGETS if backend.device.type == "cpu" else 1


ROW_PAD = 3.0
"""How much longer than the shortest a row's own tokens (plus those generated) may be in one
batch: padding costs a little in the batch's first pass, another batch costs a pass per token
generated."""

SLACK = 4
"""A longer prompt is held in place of the held one when they differ in at most this many of
the held one's last tokens (those few are run again by the prompts that had them cached)."""


def share_prefixes(
    prompts: Sequence[Sequence[int]], min_shared: int = MIN_SHARED
) -> tuple[list[int], list[tuple[int, int]]]:
    """The held prompts (indices into ``prompts``) and, for each prompt, (position in the
    held list, how many of its leading tokens that held prompt's cache gives it). At least its
    last token is left to run (its final state gives the first generated token).

    Prompts are taken in sorted order. One is held in place of the current held prompt when
    it is longer and the two differ in at most the held one's last :data:`SLACK` tokens (so a
    chain of prefixes is held by its longest, also where a prefix cut inside a word ends in
    other tokens); else it joins the held prompt when they share ``min_shared`` tokens and at
    least half of its own (a prompt with many tokens of its own is held itself: run with the
    held prompts, it leaves its row one token to run, and rows of few tokens batch well);
    else it starts a new group.

    >>> share_prefixes([[1, 2, 3, 4, 5, 6], [1, 2, 3, 4], [9, 9], [1, 2, 3, 7]], min_shared=3)
    ([0, 2], [(0, 5), (0, 3), (1, 1), (0, 3)])
    """
    held: list[int] = []
    plan: list[tuple[int, int]] = [(0, 0)] * len(prompts)
    current: Sequence[int] = ()
    group: list[int] = []
    for i in sorted(range(len(prompts)), key=lambda k: tuple(prompts[k])):
        p = prompts[i]
        shared = len(os.path.commonprefix([list(current), list(p)]))
        if held and len(p) > len(current) and shared >= len(current) - SLACK:
            for m in group:  # what the group shared with the old held prompt, p holds
                plan[m] = (plan[m][0], min(plan[m][1], shared))
            held[-1], current, shared = i, p, len(p)
        elif not held or shared < max(min_shared, len(p) // 2):
            held.append(i)
            group, current, shared = [], p, len(p)
        group.append(i)
        plan[i] = (len(held) - 1, min(shared, len(p) - 1))
    return held, plan


def _visible(
    key_pos: torch.Tensor,
    key_real: torch.Tensor,
    query_pos: torch.Tensor,
    windows: dict[str, int | None] | None,
) -> Any:
    """[rows, 1, queries, keys] boolean mask: a query sees the real keys at or before its
    position (and, in a sliding-window kind of layer, fewer than ``window`` behind it); a dict
    of masks by kind where the model has two kinds, as :func:`~.tree_plan.tree_mask`."""
    behind = query_pos[:, :, None] - key_pos[:, None, :]
    full = (key_real[:, None, :] & (behind >= 0))[:, None]
    if not windows:
        return full
    masks = {
        kind: full if window is None else full & (behind < window)[:, None]
        for kind, window in windows.items()
    }
    return masks if len(masks) > 1 else next(iter(masks.values()))


def _next_token(backend: HFBackend, states: torch.Tensor) -> torch.Tensor:
    """Argmax of the next-token distribution from final states [rows, hidden] (split head) or
    logits [rows, vocab]."""
    if backend._split_head:
        return backend._head_logits(states).argmax(-1)
    return states.argmax(-1)


def _decode(
    backend: HFBackend,
    held: _Held,
    rows: list[tuple[int, int, Sequence[int]]],
    max_new: int,
    eos: int | None,
) -> list[list[int]]:
    """Greedy tokens of ``rows`` (held slot, cached length, own tokens), up to ``max_new``
    each; stops early once every row has generated ``eos``."""
    dev = backend.device
    n = len(rows)
    width = max(len(s) for _, _, s in rows)
    pw = max(c for _, c, _ in rows)
    cached = torch.tensor([c for _, c, _ in rows])
    own = torch.tensor([len(s) for _, _, s in rows])
    kv = filled_cache(
        held.keys,
        held.values,
        backend._upload(np.array([s for s, _, _ in rows])),
        pw,
        width + max_new,
    )
    # every key column's position and whether it holds a real token: the held prefix, the
    # row's own tokens (right-padded), then the generated ones
    cols = torch.arange(pw + width + max_new)
    key_pos = torch.where(
        cols < pw,
        cols,
        torch.where(
            cols < pw + width,
            cached[:, None] + cols - pw,
            cached[:, None] + own[:, None] + cols - pw - width,
        ),
    )
    key_real = (
        (cols < cached[:, None])
        | ((cols >= pw) & (cols < pw + own[:, None]))
        | (cols >= pw + width)
    )
    key_pos, key_real = backend._upload(key_pos), backend._upload(key_real)
    ids, _ = right_padded([s for _, _, s in rows])
    # (a padding query takes its row's last position: it sees the row's real keys, and no
    # position past the prompt's own is asked of the model)
    pos = backend._upload(cached[:, None] + torch.minimum(torch.arange(width), own[:, None] - 1))
    mask = _visible(key_pos[:, : pw + width], key_real[:, : pw + width], pos, backend._windows)
    states, _ = backend._forward(
        backend._upload(ids), attention_mask=backend._model_mask(mask), position_ids=pos, cache=kv
    )
    backend.tokens_run += n * width
    backend.tokens_useful += int(own.sum())
    last = backend._upload(own - 1)
    token = _next_token(backend, states[torch.arange(n, device=dev), last])
    out = [token]
    for layer in kv.layers:  # (a layer writes a pass's keys at its ``pw``: past the written)
        layer.pw = pw + width
    pos = backend._upload(cached + own)[:, None]
    done = torch.zeros(n, dtype=torch.bool, device=dev)
    for step in range(1, max_new):
        if eos is not None:
            done |= token == eos
            if bool(done.all()):
                break
        end = pw + width + step
        mask = _visible(key_pos[:, :end], key_real[:, :end], pos + step - 1, backend._windows)
        states, _ = backend._forward(
            token[:, None],
            attention_mask=backend._model_mask(mask),
            position_ids=pos + step - 1,
            cache=kv,
        )
        for layer in kv.layers:
            layer.pw = end
        backend.tokens_run += n
        backend.tokens_useful += n
        token = _next_token(backend, states[:, -1])
        out.append(token)
    return torch.stack(out, dim=1).tolist()


def greedy_tokens(
    backend: HFBackend,
    prompts: Sequence[Sequence[int]],
    max_new: int,
    eos: int | None,
    progress: Callable[[int], None] | None = None,
) -> list[list[int]]:
    """Up to ``max_new`` greedy tokens after each prompt (each non-empty), sharing prompt
    prefixes (:func:`share_prefixes`); a row's tokens run past its ``eos`` until its batch
    stops (the caller cuts there). Held prompts run in groups under generation's token budget
    (``max_batch_tokens``), and the rows of a group in batches whose copies of the cache fit it
    too."""
    held, plan = share_prefixes(prompts)
    members: list[list[int]] = [[] for _ in held]
    for i, (h, _) in enumerate(plan):
        members[h].append(i)
    out: list[list[int]] = [[] for _ in prompts]
    budget = backend.max_batch_tokens  # (generation's: a decoding step reads every weight)
    # groups of held prompts whose caches (padded to the longest) hold a few budgets' worth of
    # tokens (held_budgets), so that many rows decode together: on the CPU a decoding step reads
    # every weight whatever the rows, and on a GPU it is launched whatever the rows
    sizes = [(h, len(prompts[k])) for h, k in enumerate(held)]
    groups = backend._chunks(sizes, held_budgets(backend) * budget, 1.0)
    # a row's copy of its cached tokens counted as a quarter of a token run each, as the
    # scoring engine counts a subtree's prefix (keys and values, not activations); on the CPU
    # its generated tokens too, as they run one a pass (32 prompts, 256 tokens each: 67 s as
    # tokens run, 42 s as keys; on a GPU, where the budget is sized from free memory, they
    # stay counted in full)
    new, kept = (0, max_new) if backend.device.type == "cpu" else (max_new, 0)
    with torch.inference_mode():
        for group in groups:
            state = backend._hold_prefixes([tuple(prompts[held[h]]) for h in group])
            rows = [(slot, i) for slot, h in enumerate(group) for i in members[h]]
            sizes = [(r, len(prompts[i]) - plan[i][1] + new) for r, (_, i) in enumerate(rows)]
            extra = {r: (plan[i][1] + kept) // 4 for r, (_, i) in enumerate(rows)}
            for batch in backend._chunks(sizes, budget, ROW_PAD, extra):
                picked = [rows[r] for r in batch]
                own = [(slot, plan[i][1], prompts[i][plan[i][1] :]) for slot, i in picked]
                for (_, i), toks in zip(picked, _decode(backend, state, own, max_new, eos)):
                    out[i] = toks
                if progress is not None:
                    progress(len(batch))
    return out
