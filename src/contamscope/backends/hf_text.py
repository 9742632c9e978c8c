"""Per-token statistics and greedy generation for :class:`~.hf.HFBackend`.

``token_stats`` runs each full text once, teacher-forced, and reads at every continuation
position the log-probability of the true token and the model's argmax: that decides
exact-match n-gram prediction at every starting point without any generation. From the same
float32 logits it reads the mean and std of log p over the vocabulary (Min-K%++).
``generate`` runs batched greedy decoding (left-padded, length-bucketed under the token budget).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch

from .base import GenerateRequest, Generation, ProgressFn, ScoreRequest, ScoreResult, TokenStats
from .hf import right_padded

if TYPE_CHECKING:
    from .hf import HFBackend

__all__ = ["token_stats", "score_full", "generate"]


def score_full(
    backend: HFBackend, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
) -> list[ScoreResult]:
    """:meth:`HFBackend.score` with every text run whole (the engine's ``full-sequence`` mode):
    the sum of :func:`token_stats`' log-probs, NaN for a text too long for the model."""
    out = []
    for s in token_stats(backend, requests, progress, vocab=False):
        # TokenStats.too_long marks a text set aside unread with one -1 token (no real id)
        n = 0 if s.tokens == (-1,) else len(s.tokens)
        out.append(ScoreResult(math.fsum(s.logprobs), n, s.boundary_chars, s.is_too_long))
    return out


def token_stats(
    backend: HFBackend,
    requests: Sequence[ScoreRequest],
    progress: ProgressFn | None = None,
    vocab: bool = True,
) -> list[TokenStats]:
    """Teacher-forced log-probs and greedy predictions of each continuation (with ``vocab``
    False the log-probs alone: greedy -1, no vocabulary statistics)."""
    encoded = backend.encode_many(requests)
    out: list[TokenStats | None] = [None] * len(requests)
    runnable: list[tuple[int, int]] = []
    for i, e in enumerate(encoded):
        n = len(e.prefix) + len(e.cont)
        if e.too_long:  # as the served backends give it: one NaN in place of the tokens
            out[i] = TokenStats.too_long(vocab_stats=True)
        elif not e.cont or (backend.max_length is not None and n > backend.max_length):
            # nothing to score, or too long for the model: NaN log-probs, greedy -1
            nan = (math.nan,) * len(e.cont)
            cont, lost = tuple(e.cont), (-1,) * len(e.cont)
            out[i] = TokenStats(
                cont, nan, lost, e.boundary_chars, nan, nan, over_context=bool(e.cont)
            )
        else:
            runnable.append((i, n))
    if progress is not None and len(runnable) < len(requests):
        progress(len(requests) - len(runnable))
    dev = backend.device
    with torch.inference_mode():
        for batch in backend._chunks(runnable):
            seqs = [list(encoded[i].prefix) + encoded[i].cont for i in batch]
            ids, attn = right_padded(seqs)
            width = ids.shape[1]
            rows: list[int] = []
            targets: list[int] = []
            for r, i in enumerate(batch):
                p = len(encoded[i].prefix)
                rows.extend(r * width + p - 1 + j for j in range(len(encoded[i].cont)))
                targets.extend(encoded[i].cont)
            states, _ = backend._forward(ids.to(dev), attention_mask=attn.to(dev))
            flat = states.reshape(len(seqs) * width, -1)[torch.tensor(rows, device=dev)]
            tgt = torch.tensor(targets, device=dev)
            if vocab:
                best = torch.empty_like(tgt)
                moments = torch.empty((len(targets), 2), dtype=torch.float32, device=dev)
                lp = backend._node_logprobs(flat, tgt, best, moments).tolist()
                greedy = best.tolist()
                mean, std = moments.T.tolist()
            else:
                lp = backend._node_logprobs(flat, tgt).tolist()
                greedy, mean, std = [-1] * len(targets), None, None
            backend.tokens_run += ids.numel()
            backend.tokens_useful += int(attn.sum())
            offset = 0
            for i in batch:
                e = encoded[i]
                k = len(e.cont)
                out[i] = TokenStats(
                    tuple(e.cont),
                    tuple(lp[offset : offset + k]),
                    tuple(greedy[offset : offset + k]),
                    e.boundary_chars,
                    None if mean is None else tuple(mean[offset : offset + k]),
                    None if std is None else tuple(std[offset : offset + k]),
                )
                offset += k
            if progress is not None:
                progress(len(batch))
    return [s for s in out if s is not None]


def _prompt_ids(backend: HFBackend, req: GenerateRequest) -> list[int]:
    tok = backend.tokenizer
    if req.chat and getattr(tok, "chat_template", None):
        text = tok.apply_chat_template(
            [{"role": "user", "content": req.prompt}], tokenize=False, add_generation_prompt=True
        )
        return list(tok(text, add_special_tokens=False)["input_ids"])
    ids = list(tok(req.prompt, add_special_tokens=False)["input_ids"])
    return ([backend.bos_id] if backend.bos_id is not None else []) + ids


def _cut(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    """Text before the first stop string, and whether one was found."""
    hits = [text.find(s) for s in stops if s and s in text]
    return (text[: min(hits)], True) if hits else (text, False)


def _through_stop(tok: Any, toks: Sequence[int], stops: Sequence[str]) -> int:
    """How many of ``toks`` a generation stopped at its stop string holds: the fewest whose
    text contains a stop string (the rest were generated here past it, as transformers does not
    stop at strings; a server stops there and counts no further, and a run's ``n_tokens`` counted
    them: QA). Found by bisection, as a longer prefix holds every stop a shorter one does."""
    lo, hi = 1, len(toks)
    while lo < hi:
        mid = (lo + hi) // 2
        if _cut(tok.decode(toks[:mid], skip_special_tokens=True), stops)[1]:
            hi = mid
        else:
            lo = mid + 1
    return hi


def _greedy(
    backend: HFBackend,
    prompts: list[list[int]],
    max_new: int,
    pad: int,
    eos: int | None,
    progress: ProgressFn | None,
) -> Iterator[list[tuple[int, list[int]]]]:
    """(prompt index, up to ``max_new`` greedy tokens) in batches, each yielded as it is done:
    on the prefix-tree engine sharing prompt prefixes (:mod:`.hf_decode`); else, as for a
    model the engine cannot run, by ``model.generate`` on left-padded, length-bucketed
    batches. Tokens after an ``eos`` are the caller's to cut."""
    if backend.engine == "prefix-tree" and all(prompts):
        from .hf_decode import greedy_tokens

        tokens = greedy_tokens(backend, prompts, max_new, eos, progress)
        yield list(enumerate(tokens))
        return
    dev = backend.device
    gen_kw: dict[str, Any] = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    sizes = [(i, len(p) + max_new) for i, p in enumerate(prompts)]
    with torch.inference_mode():
        for batch in backend._chunks(sizes, max_pad=0.25):
            width = max(len(prompts[i]) for i in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            attn = torch.zeros((len(batch), width), dtype=torch.long)
            for r, i in enumerate(batch):
                p = prompts[i]
                ids[r, width - len(p) :] = torch.tensor(p)
                attn[r, width - len(p) :] = 1
            out = backend.model.generate(
                input_ids=ids.to(dev),
                attention_mask=attn.to(dev),
                max_new_tokens=max_new,
                pad_token_id=pad,
                eos_token_id=eos,
                **gen_kw,
            )
            backend.tokens_run += out.numel()
            rows = []
            for i, toks in zip(batch, out[:, width:].tolist()):
                if eos is None or eos not in toks:
                    while toks and toks[-1] == pad and pad != eos:
                        toks = toks[:-1]
                rows.append((i, toks))
            yield rows
            if progress is not None:
                progress(len(batch))


def generate(
    backend: HFBackend, requests: Sequence[GenerateRequest], progress: ProgressFn | None = None
) -> list[Generation]:
    """Batched greedy generation; identical requests are generated once."""
    tok = backend.tokenizer
    eos = tok.eos_token_id
    pad = tok.pad_token_id if tok.pad_token_id is not None else (eos if eos is not None else 0)
    unique: dict[GenerateRequest, int] = {}
    for req in requests:
        unique.setdefault(req, len(unique))
    reqs = list(unique)
    prompts = [_prompt_ids(backend, r) for r in reqs]
    results: list[Generation | None] = [None] * len(reqs)
    by_length: dict[int, list[int]] = {}
    for i, (req, p) in enumerate(zip(reqs, prompts)):
        if backend.max_length is not None and len(p) + req.max_new_tokens > backend.max_length:
            results[i] = Generation("", 0, "context")  # past the positions the model has
            continue
        by_length.setdefault(req.max_new_tokens, []).append(i)
    for max_new, idx in by_length.items():
        for got in _greedy(backend, [prompts[i] for i in idx], max_new, pad, eos, progress):
            for k, toks in got:
                i = idx[k]
                if eos is not None and eos in toks:
                    toks, ended = toks[: toks.index(eos)], True
                else:
                    ended = False
                text, stopped = _cut(tok.decode(toks, skip_special_tokens=True), reqs[i].stop)
                reason = "stop" if ended or stopped else "length"
                n = _through_stop(tok, toks, reqs[i].stop) if stopped else len(toks)
                results[i] = Generation(text, n, reason)
    done = [g for g in results if g is not None]
    return [done[unique[req]] for req in requests]
