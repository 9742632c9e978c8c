"""The backend interface: batched scoring of continuations given prefixes.

Backends compute numbers and decide nothing. Lists in, lists out, same order. What a backend
can do is declared in :class:`Capabilities` and checked before a run starts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import CapabilityError

__all__ = ["ScoreRequest", "ScoreResult", "Capabilities", "Backend", "ProgressFn"]

ProgressFn = Callable[[int], None]
"""Called with the number of requests just finished (for progress bars)."""


@dataclass(frozen=True)
class ScoreRequest:
    """Score ``continuation`` conditioned on ``prefix``: log p(continuation | prefix)."""

    prefix: str
    continuation: str


@dataclass(frozen=True)
class ScoreResult:
    """Result of one :class:`ScoreRequest`."""

    logprob: float
    """Sum of the natural-log probabilities of the scored tokens."""
    n_tokens: int
    """Number of tokens scored."""
    boundary_chars: int = 0
    """Characters at the end of the prefix that share a token with the continuation and were
    therefore scored too (0 when the prefix/continuation boundary is a token boundary)."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend can compute."""

    prompt_logprobs: bool
    """Log-probabilities of given text (needed by the permutation test, BenBench)."""
    generate: bool = False
    """Free-text generation (needed by CAP)."""


class Backend(ABC):
    """A model that can score text. Subclasses set ``spec`` and ``capabilities``."""

    spec: str
    capabilities: Capabilities

    @abstractmethod
    def fingerprint(self) -> str:
        """Identity of every setting that changes the numbers (weights, dtype, tokenizer, BOS)."""

    @abstractmethod
    def score(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[ScoreResult]:
        """Score every request; results in the order of ``requests``."""

    def describe(self) -> dict[str, object]:
        """Provenance for run records."""
        return {"spec": self.spec, "fingerprint": self.fingerprint()}

    def require(
        self, *, prompt_logprobs: bool = False, generate: bool = False, method: str
    ) -> None:
        """Refuse, with a one-line reason, a method this backend cannot serve."""
        if prompt_logprobs and not self.capabilities.prompt_logprobs:
            raise CapabilityError(
                f"{method} needs prompt log-probabilities, which backend {self.spec!r} cannot return"
            )
        if generate and not self.capabilities.generate:
            raise CapabilityError(f"{method} needs generation, which {self.spec!r} cannot do")
