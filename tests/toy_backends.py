"""Backends for tests whose numbers are known (no model): the score cache's and others'."""

from __future__ import annotations

from collections.abc import Sequence

from contamscope.backends.base import (
    Backend,
    Capabilities,
    GenerateRequest,
    Generation,
    ScoreRequest,
    ScoreResult,
    TokenStats,
)


class Arithmetic(Backend):
    """Scores ``-(len(prefix) + 2 * len(continuation))``: two requests whose texts join to the
    same string but split it elsewhere get different numbers. Counts the requests it ran."""

    spec = "arithmetic"
    capabilities = Capabilities(
        prompt_logprobs=True, generate=True, token_stats=True, vocab_stats=True
    )

    def __init__(self, fingerprint: str = "arithmetic-v1", ids: bool = True) -> None:
        self._fingerprint = fingerprint
        self.ran: list[int] = []
        if not ids:  # a server answering echo: log-probs without token ids
            self.capabilities = Capabilities(
                prompt_logprobs=True, generate=True, token_logprobs=True
            )

    def fingerprint(self) -> str:
        return self._fingerprint

    def score(self, requests: Sequence[ScoreRequest], progress=None) -> list[ScoreResult]:  # type: ignore[no-untyped-def]
        self.ran.append(len(requests))
        return [
            ScoreResult(-float(len(r.prefix) + 2 * len(r.continuation)), len(r.continuation))
            for r in requests
        ]

    def token_stats(self, requests: Sequence[ScoreRequest], progress=None) -> list[TokenStats]:  # type: ignore[no-untyped-def]
        self.ran.append(len(requests))
        out = []
        for r in requests:
            n = len(r.continuation)
            ids = tuple(range(n)) if self.capabilities.token_stats else (-1,) * n
            mean = (-5.0,) * n if self.capabilities.vocab_stats else None
            std = (1.0,) * n if self.capabilities.vocab_stats else None
            out.append(TokenStats(ids, (-1.0,) * n, ids, 0, mean, std))
        return out

    def generate(self, requests: Sequence[GenerateRequest], progress=None) -> list[Generation]:  # type: ignore[no-untyped-def]
        self.ran.append(len(requests))
        return [Generation(r.prompt[::-1], 1, "stop") for r in requests]
