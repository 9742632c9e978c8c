"""A resumed run of a served model scores one finished item again before it scores the rest.

A server is known by its URL, name and /models entry, not by its weights: a run resumed after
the server began serving another checkpoint under the same name finished with two models'
numbers in one folder, exit 0 (chaos QA). Each scoring method hands :func:`refuse_changed_server`
the requests of the first finished item it scored and the log-probs its records hold for them;
they are scored again, past the cache, and must agree within the canary's tolerance per token
(:data:`~contamscope.backends.probe.TOLERANCE`; servers are not bit-reproducible across batch
shapes). CAP only generates text, which a server need not reproduce exactly, and is not checked.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..backends.base import Backend, ScoreRequest
from ..errors import StoreError
from ..store import RunDir

RESUME_CHECK_REQUESTS = 8
"""Requests of one finished item a resumed run of a served model scores again (a permutation
item's first 8 orders)."""


def refuse_changed_server(
    backend: Backend,
    run_dir: RunDir,
    item_id: str,
    requests: Sequence[ScoreRequest],
    recorded: Sequence[float],
    n_tokens: Sequence[int],
    *,
    per_token: bool = False,
) -> None:
    """Raise :class:`~contamscope.errors.StoreError` when ``backend`` (a served model only; any
    other returns at once) now scores ``requests`` more than the tolerance per token from the
    summed log-probs ``recorded`` of ``n_tokens`` tokens each. ``per_token``: score them as the
    method did, through :meth:`~Backend.token_stats` (summing its log-probs), not
    :meth:`~Backend.score`. Nothing is cached or written."""
    if not backend.spec.startswith("openai:") or not requests:
        return
    from ..backends.probe import TOLERANCE

    requests = list(requests)[:RESUME_CHECK_REQUESTS]
    if per_token:
        got = [sum(st.logprobs) for st in backend.token_stats(requests)]
    else:
        got = [g.logprob for g in backend.score(requests)]
    apart = [abs(g - lp) / max(1, int(n)) for g, lp, n in zip(got, recorded, n_tokens)]
    worst = max(apart, default=0.0)
    if not worst <= TOLERANCE:  # (NaN too)
        raise StoreError(
            f"{run_dir.path}: the server now scores item {item_id!r} otherwise than this run "
            f"recorded ({worst:.3f} nats per token apart; {TOLERANCE} allowed): it serves another "
            "model or settings since the run began, so the finished items are not this "
            f"model's; start the folder again (--overwrite) after `contamscope cache clear "
            f"--model {backend.spec}`"
        )
