"""The backend interface: batched scoring, per-token statistics and greedy generation.

Backends compute numbers and decide nothing. Lists in, lists out, same order. What a backend
can do is declared in :class:`Capabilities` and checked before a run starts (``require``); a
method the backend cannot serve raises :class:`CapabilityError`, never returns something wrong.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from ..errors import CapabilityError, ConfigError

__all__ = [
    "ScoreRequest",
    "ScoreResult",
    "TokenStats",
    "GenerateRequest",
    "Generation",
    "Capabilities",
    "Backend",
    "ProgressFn",
]

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
    too_long: bool = False
    """The text is longer than the model's context: not computed (``logprob`` NaN). A NaN
    without it is a computed one (a numerical overflow), said as such."""


@dataclass(frozen=True)
class TokenStats:
    """Teacher-forced per-token statistics of a continuation (one forward pass).

    ``greedy[i] == tokens[i]`` exactly when greedy decoding from ``prefix + tokens[:i]`` would
    produce ``tokens[i]`` next, so exact-match n-gram prediction needs no generation.
    """

    tokens: tuple[int, ...]
    """Token ids of the continuation, as tokenised inside ``prefix + continuation``; -1 each
    from a backend that gives log-probs without ids (``Capabilities.token_logprobs`` only)."""
    logprobs: tuple[float, ...]
    """Natural-log probability of each token given everything before it (float32 or better)."""
    greedy: tuple[int, ...]
    """The model's most likely token at each position (its greedy prediction); -1 where
    unknown (the first token of a text, a backend without ids)."""
    boundary_chars: int = 0
    """As in :class:`ScoreResult`: prefix characters sharing the first scored token."""
    mean_logprob: tuple[float, ...] | None = None
    """Per position, the mean of log p over the vocabulary under the model's own next-token
    distribution, E_{z~p}[log p(z)] (minus its entropy); None when the backend cannot give it."""
    std_logprob: tuple[float, ...] | None = None
    """Per position, sqrt(E_{z~p}[(log p(z) - mean)^2]); with ``mean_logprob`` what Min-K%++
    (Zhang et al. 2024) normalises each token's log-prob by. None when not available."""
    over_context: bool = False
    """The text was tokenised and found longer than the model's context: its tokens are real,
    its log-probs NaN, not computed (:attr:`is_too_long`)."""

    @classmethod
    def too_long(cls, vocab_stats: bool = False) -> TokenStats:
        """A text longer than the model's context, whose tokens were not all computed: one NaN
        in their place (with NaN vocabulary statistics when the backend gives them)."""
        nan = (math.nan,) if vocab_stats else None
        return cls((-1,), (math.nan,), (-1,), 0, nan, nan)

    @property
    def is_too_long(self) -> bool:
        """Whether the text was too long to compute: :meth:`too_long`'s mark (one id -1 with a
        NaN log-prob, not a one-token text of a backend without ids, whose log-prob is a
        number) or :attr:`over_context`."""
        return self.over_context or (tuple(self.tokens) == (-1,) and math.isnan(self.logprobs[0]))

    def non_finite(self, nan_only: bool = False) -> str | None:
        """Why a computed text's statistics cannot be used: its first log-prob that is not a
        finite number (``nan_only``: that is NaN), said as an exclusion reason; None when
        there is none."""
        bad = next(
            (x for x in self.logprobs if math.isnan(x) or not (nan_only or math.isfinite(x))),
            None,
        )
        if bad is None:
            return None
        return f"a non-finite token log-prob ({bad}; a numerical overflow? try --dtype float32)"


@dataclass(frozen=True)
class GenerateRequest:
    """Greedy (temperature 0) generation from ``prompt``."""

    prompt: str
    max_new_tokens: int = 256
    stop: tuple[str, ...] = ()
    """Generation stops before the first of these strings (which is not returned)."""
    chat: bool = False
    """Wrap ``prompt`` as one user turn in the model's chat template (instruct models)."""


@dataclass(frozen=True)
class Generation:
    """Result of one :class:`GenerateRequest`."""

    text: str
    n_tokens: int
    """Tokens generated up to where the generation ended: through the token that completed its
    stop string (as a server that stops there counts them), without the end-of-sequence token."""
    finish_reason: str
    """``stop`` (a stop string or end-of-sequence token), ``length`` (max_new_tokens), or
    ``context``: the prompt and max_new_tokens do not fit the model's context window, so nothing
    was generated (empty text)."""

    def __post_init__(self) -> None:
        # cut by the token budget inside a character (one of a byte-level tokenizer's byte
        # tokens): the decoder shows the incomplete bytes as U+FFFD, which is not text the model
        # wrote; it is dropped (here, so cached generations read back the same way)
        if self.finish_reason == "length" and self.text.endswith("\ufffd"):
            object.__setattr__(self, "text", self.text.rstrip("\ufffd"))


@dataclass(frozen=True)
class Capabilities:
    """What a backend can compute."""

    prompt_logprobs: bool
    """Log-probabilities of given text (needed by the permutation test, BenBench)."""
    generate: bool = False
    """Free-text generation (needed by CAP, BenBench's lenient n-gram modes, paraphrasing)."""
    token_stats: bool = False
    """Per-token log-probs and greedy predictions of given text (BenBench's n-gram accuracy)."""
    token_logprobs: bool = False
    """Per-token log-probs of given text without their token ids or greedy predictions (a
    server answering ``echo``): :meth:`Backend.token_stats` then gives -1 for every id. Enough
    for the membership test's loss, zlib and Min-K% statistics; ``token_stats`` implies it."""
    vocab_stats: bool = False
    """``token_stats`` also carries each position's mean and std of log p over the vocabulary
    (``TokenStats.mean_logprob`` / ``std_logprob``; the Min-K%++ membership statistic)."""
    from_start: bool = True
    """Scores a text from its first token (an empty prefix, as BenBench and the membership test
    do): needs a BOS token to condition the first token on."""

    @property
    def per_token(self) -> bool:
        """Per-token log-probs of given text, with or without token ids."""
        return self.token_stats or self.token_logprobs


class Backend(ABC):
    """A model that can score text. Subclasses set ``spec`` and ``capabilities``."""

    spec: str
    capabilities: Capabilities
    identity: str = ""
    """The model's part of the fingerprint (its first), where the backend has one."""
    legacy_identities: tuple[str, ...] = ()
    """Identities earlier contamscope versions gave this same model (a local model's path)."""

    @abstractmethod
    def fingerprint(self) -> str:
        """Identity of every setting that changes the numbers (weights, dtype, tokenizer, BOS)."""

    def legacy_fingerprints(self) -> tuple[str, ...]:
        """The fingerprints this set-up had under earlier contamscope versions, for the same
        numbers: the cache reuses (and files again under :meth:`fingerprint`) what it stored
        under them, and a run folder made under one resumes."""
        fingerprint = self.fingerprint()
        if not self.identity or not fingerprint.startswith(self.identity):
            return ()
        rest = fingerprint[len(self.identity) :]
        return tuple(old + rest for old in self.legacy_identities if old != self.identity)

    @abstractmethod
    def score(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[ScoreResult]:
        """Score every request; results in the order of ``requests``."""

    def score_stream(
        self, calls: Iterable[Sequence[ScoreRequest]], progress: ProgressFn | None = None
    ) -> Iterator[list[ScoreResult]]:
        """:meth:`score` of each list of ``calls`` in turn, yielding each one's results.

        The next list is taken from ``calls`` only after the previous one's results have been
        yielded and handled by the caller, except where a backend overlaps its calls (the
        transformers engine on a GPU starts the next call before it hands back the last
        one's results, so the device is not idle while the host prepares)."""
        for requests in calls:
            yield self.score(requests, progress) if requests else []

    def token_stats(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[TokenStats]:
        """Per-token statistics of each continuation given its prefix (prefix may be empty)."""
        raise CapabilityError(f"backend {self.spec!r} cannot return per-token statistics")

    def generate(
        self, requests: Sequence[GenerateRequest], progress: ProgressFn | None = None
    ) -> list[Generation]:
        """Greedy generation for each request; results in the order of ``requests``."""
        raise CapabilityError(f"backend {self.spec!r} cannot generate text")

    def decode(self, tokens: Sequence[int]) -> str:
        """Text of token ids returned by :meth:`token_stats`."""
        raise CapabilityError(f"backend {self.spec!r} cannot decode token ids")

    def decode_many(self, sequences: Sequence[Sequence[int]]) -> list[str]:
        """:meth:`decode` of each sequence, in order (a served model's are sent at once)."""
        return [self.decode(t) for t in sequences]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(spec={self.spec!r})"

    def describe(self) -> dict[str, object]:
        """Provenance for run records; ``legacy_fingerprints`` where the set-up had others under
        earlier versions (``compare`` then knows a run made under one is of the same model)."""
        out: dict[str, object] = {"spec": self.spec, "fingerprint": self.fingerprint()}
        legacy = self.legacy_fingerprints()
        if legacy:
            out["legacy_fingerprints"] = list(legacy)
        return out

    @property
    def computes_on_local_cpu(self) -> bool:
        """Whether the model's arithmetic runs on this machine's CPU cores, which are then not
        free for other work (a served model or a GPU leaves them free)."""
        return False

    @property
    def parallel_scorers(self) -> int:
        """Model copies that score this backend's calls at once (Ray workers; 1 otherwise):
        the detectors beside them keep up with that many."""
        return 1

    def require(
        self,
        *,
        prompt_logprobs: bool = False,
        generate: bool = False,
        token_stats: bool = False,
        token_logprobs: bool = False,
        vocab_stats: bool = False,
        from_start: bool = False,
        decode: bool = False,
        method: str,
    ) -> None:
        """Refuse, with a one-line reason, a method this backend cannot serve: what it needs
        that the backend's ``capabilities`` lack, or claim without implementing the method that
        gives it (a custom backend's, which failed in the middle of the run; integrator QA)."""
        if prompt_logprobs and not self.capabilities.prompt_logprobs:
            raise CapabilityError(
                f"{method} needs prompt log-probabilities, which backend {self.spec!r} cannot return"
            )
        if generate and not self.capabilities.generate:
            raise CapabilityError(f"{method} needs generation, which {self.spec!r} cannot do")
        if vocab_stats and not self.capabilities.vocab_stats:  # before token_stats: it says more
            raise CapabilityError(
                f"{method} needs each position's mean and std of log-probs over the vocabulary, "
                f"which backend {self.spec!r} cannot return (it needs the full next-token "
                "distribution: use an hf: model, or a statistic without it, e.g. --statistic "
                "min_k)"
            )
        if token_stats and not self.capabilities.token_stats:
            raise CapabilityError(
                f"{method} needs per-token log-probs and greedy predictions, which backend "
                f"{self.spec!r} cannot return"
            )
        if token_logprobs and not self.capabilities.per_token:
            raise CapabilityError(
                f"{method} needs per-token log-probs, which backend {self.spec!r} cannot return"
            )
        # after what it can compute: a generation-only model was told to set a BOS (QA)
        if from_start and not self.capabilities.from_start:
            raise CapabilityError(
                f"{method} scores each text from its first token, which needs a BOS token to "
                f"condition on, and backend {self.spec!r} has none: set -M bos=TEXT "
                "(e.g. -M bos='<|endoftext|>' for SmolLM2)"
            )
        for needed, name, what in (
            (generate, "generate", "generation"),
            (token_stats or token_logprobs or vocab_stats, "token_stats", "per-token log-probs"),
            (decode, "decode", "the text of token ids"),
        ):
            if needed and not self.implements(name):
                raise CapabilityError(
                    f"{method} needs {what}, and backend {self.spec!r} ({type(self).__name__}) "
                    f"does not implement {name}()"
                    + ("" if name == "decode" else f" though its capabilities say it gives {what}")
                )

    def implements(self, name: str) -> bool:
        """Whether this backend's class overrides :class:`Backend`'s ``name`` (``generate``,
        ``token_stats``; ``decode``, or ``decode_many`` in its place), which refuses."""
        cls = type(self)
        if name == "decode" and cls.decode_many is not Backend.decode_many:
            return True
        return getattr(cls, name) is not getattr(Backend, name)

    def implemented(self, caps: Capabilities) -> Capabilities:
        """``caps`` less what this backend claims without implementing the method for it."""
        if not self.implements("generate"):
            caps = replace(caps, generate=False)
        if not self.implements("token_stats"):
            caps = replace(caps, token_stats=False, token_logprobs=False, vocab_stats=False)
        return caps


def int_option(opts: dict[str, str], key: str, least: int) -> int | None:
    """``-M key=N`` as an integer of at least ``least``; None when not given. (Here, not with
    the transformers backend: vLLM's options are checked with it, without torch imported.)"""
    if not opts.get(key):
        return None
    try:
        value = int(opts[key])
    except ValueError:
        raise ConfigError(f"-M {key}={opts[key]}: expected an integer") from None
    if value < least:
        raise ConfigError(f"-M {key}={value}: must be at least {least}")
    return value
