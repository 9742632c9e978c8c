"""Capability checks before a run: declared capabilities, and a canary for live servers.

:func:`check_backend` is called once before any work. For an ``openai:`` server it first scores
canary texts and refuses prompt log-probs, with the reason, when the server

- has no ``/completions`` endpoint (a chat-only API) or rejects the request,
- does not return a log-prob for every prompt token (llama.cpp returns log-probs of generated
  tokens only), or returns tokens that do not spell the prompt,
- returns values that are not log-probabilities (positive, NaN), that change when the same text
  is sent twice, or that change for earlier tokens when later text changes (not causal),
- (``-M canary=full``, the default) does not clearly prefer a natural sentence to its own words
  shuffled, in two of three canaries (see ``MARGIN``): the name or server points at something that is not a language model
  (a random-weight test model fails this check; use ``-M canary=structural`` for it).

A refusal is one line naming what is missing and which methods the backend can still run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import CapabilityError, ConfigError, ContamscopeError, ModelError
from .base import Backend, Capabilities

if TYPE_CHECKING:
    from .openai_compat import OpenAIBackend

__all__ = [
    "check_backend",
    "probe_server",
    "ProbeReport",
    "METHOD_NEEDS",
    "available_methods",
    "without_chat_template",
]

METHOD_NEEDS: Mapping[str, Capabilities] = {
    "permutation": Capabilities(prompt_logprobs=True, from_start=False),
    "BenBench": Capabilities(prompt_logprobs=True, token_stats=True),
    "CAP": Capabilities(prompt_logprobs=False, generate=True, from_start=False),
    "membership (loss, min_k, zlib, gap)": Capabilities(prompt_logprobs=True, token_logprobs=True),
    "membership (min_k_pp, combined)": Capabilities(
        prompt_logprobs=True, token_stats=True, vocab_stats=True
    ),
}
"""What each method needs from a backend (CAP works black-box, from generated text only;
BenBench and membership score texts from their first token, after a BOS token)."""

CANARIES = (
    (
        "The capital of France is Paris, and the capital of Germany is Berlin.",
        "Germany the Paris, capital is and France of Berlin. the The capital is of",
    ),
    (
        "One, two, three, four, five, six, seven, eight, nine, ten.",
        "four, nine, One, seven, ten. two, six, three, eight, five,",
    ),
    (
        "Water freezes at zero degrees Celsius and boils at one hundred degrees.",
        "degrees. at boils hundred Water and zero Celsius one freezes degrees at",
    ),
)
MARGIN = 0.7
"""A language model's mean log-prob per token on a natural sentence must be above ``MARGIN`` times
that of its shuffled words (closer to zero by 30 %) in two of three canaries. Measured: SmolLM2-135M
-2.0 vs -6.7, -1.6 vs -3.7, -3.0 vs -8.9 nats (ratios 0.30-0.43); the random-weight test model
ratios 0.96-1.0."""
TOLERANCE = 0.05
"""Largest difference (nats per token) accepted between repeated or shared-prefix requests:
servers batch requests and bf16 kernels are not bit-reproducible across batch shapes."""


@dataclass
class ProbeReport:
    """What the canary found on a live server."""

    prompt_logprobs: bool
    """The server returns usable prompt log-probs."""
    reason: str | None = None
    """Why prompt log-probs were refused (None when accepted)."""
    mode: str = ""
    """How prompt log-probs are read: prompt_logprobs (vLLM) or echo."""
    numbers: dict[str, Any] = field(default_factory=dict)
    """Canary numbers: natural vs shuffled log-probs, repeat and prefix differences."""


def available_methods(caps: Capabilities, backend: Backend | None = None) -> list[str]:
    """Methods whose needs ``caps`` meets (BenBench without generation: its strict criteria
    only, said as such). With ``backend``, what it claims without implementing counts as
    missing (:meth:`~Backend.implemented`), as does BenBench's ``decode()``, and a chat-only
    server's CAP is said with ``--chat`` (each was listed as runnable in the message that
    refused it; review QA).

    >>> available_methods(Capabilities(prompt_logprobs=True, token_stats=True))
    ['permutation', 'BenBench (--no-lenient)', 'membership (loss, min_k, zlib, gap)']
    """
    decodes = True
    if backend is not None:
        caps = backend.implemented(caps)
        decodes = backend.implements("decode")
    names = {
        "BenBench": "BenBench" if caps.generate else "BenBench (--no-lenient)",
        "CAP": "CAP (--chat)" if getattr(backend, "chat_only", False) else "CAP",
    }
    return [
        names.get(name, name)
        for name, need in METHOD_NEEDS.items()
        if (caps.prompt_logprobs or not need.prompt_logprobs)
        and (caps.generate or not need.generate)
        and (caps.token_stats or not need.token_stats)
        and (caps.per_token or not need.token_logprobs)
        and (caps.vocab_stats or not need.vocab_stats)
        and (caps.from_start or not need.from_start)
        and (decodes or name != "BenBench")
    ]


def _refuse(backend: OpenAIBackend, report: ProbeReport, reason: str) -> ProbeReport:
    report.prompt_logprobs = False
    report.reason = reason
    backend.refusal = reason
    backend.capabilities = Capabilities(
        prompt_logprobs=False, generate=True, token_stats=False, from_start=bool(backend.bos)
    )
    return report


def probe_server(backend: OpenAIBackend) -> ProbeReport:
    """Run the canary against a live ``openai:`` server and update its capabilities. A server
    that refuses the API key, or cannot be reached, is a one-line ModelError: that says
    nothing of what it can compute, so no method is offered in its place."""
    from .http_client import AUTH_STATUS, HttpStatusError, ServerUnavailable
    from .openai_compat import url_hint

    backend.probed = True
    report = ProbeReport(prompt_logprobs=True)
    backend.probe_report = report
    bos = backend.bos
    natural, shuffled = CANARIES[0]
    try:
        first = backend.prompt_tokens(bos + natural)
    except ServerUnavailable as exc:
        raise ModelError(
            f"{backend.spec}: the server did not answer the check request ({exc}); once it "
            "answers again, re-run the command"
        ) from None
    except HttpStatusError as exc:
        if exc.status in AUTH_STATUS:
            raise ModelError(
                f"{backend.spec}: the server refused the request ({exc}): "
                f"{backend.client.key_advice()}"
            ) from None
        if exc.status in (404, 405, 501):
            if backend.lists_no_models:  # neither /models nor /completions: another URL
                raise ModelError(
                    f"{backend.spec}: the server has neither {backend.base_url}/models nor "
                    f"{backend.base_url}/completions: is BASE_URL the API's root?"
                    f"{url_hint(backend.base_url, backend.model)}"
                ) from None
            backend.chat_only = True
            return _refuse(
                backend,
                report,
                f"the server has no usable /completions endpoint ({exc.message[:120]}): "
                "a chat-only API cannot score given text",
            )
        forced = (
            "; -M logprobs=prompt_logprobs asks for vLLM's prompt_logprobs, which this server "
            "does not take: leave it out and the log-probs are read through echo"
            if backend.mode == "prompt_logprobs" and backend.mode_given
            else ""
        )
        return _refuse(backend, report, f"the server rejects scoring requests ({exc}){forced}")
    except ContamscopeError as exc:
        said = str(exc).removeprefix(f"{backend.spec}: ")  # (the refusal names the backend)
        if "no prompt log-probs" not in said:  # (it said it twice, once in brackets; QA)
            said = f"the server returned no prompt log-probs ({said})"
        return _refuse(backend, report, said)
    try:
        return _check_canaries(backend, report, first)
    except ServerUnavailable as exc:
        raise ModelError(
            f"{backend.spec}: the server did not answer a check request ({exc}); once it "
            "answers again, re-run the command"
        ) from None
    except HttpStatusError as exc:
        advice = f": {backend.client.key_advice()}" if exc.status in AUTH_STATUS else ""
        raise ModelError(
            f"{backend.spec}: the server refused a check request ({exc}){advice}"
        ) from None


def _bos_pieces(texts: Sequence[str], bos: str, natural: str) -> list[str] | None:
    """The tokens a server cut ``bos`` into, from its tokens of ``bos + natural`` (None: one
    token, maybe after the server's own BOS, or the tokens do not show). vLLM's prompt_logprobs
    give no text for the first token, so ``bos`` is found from what follows it.

    >>> _bos_pieces(["</", "s", ">", "Hi", " there"], "</s>", "Hi there")
    ['</', 's', '>']
    >>> _bos_pieces(["", "Hi", " there"], "<s>", "Hi there"), _bos_pieces(["<s>", "<s>", "Hi"], "<s>", "Hi")
    (None, None)
    """
    rest = list(texts[1:])
    spelled = "".join(rest)
    if not spelled.endswith(natural):
        return None
    extra = spelled[: len(spelled) - len(natural)]  # bos after its first token, or all of it
    n = covered = 0
    while covered < len(extra):
        covered += len(rest[n])
        n += 1
    if not extra or (extra == bos and n == 1):
        return None
    if extra == bos:  # after the server's own BOS token
        return rest[:n]
    return [texts[0] or "…", *rest[:n]] if bos.endswith(extra) else None


def _check_canaries(backend: OpenAIBackend, report: ProbeReport, first: Any) -> ProbeReport:
    """The canary's checks after its first request (which showed the server answers)."""
    bos = backend.bos
    natural = CANARIES[0][0]
    report.mode = backend.mode
    text = bos + natural
    spelled = "".join(first.texts[1:])
    later = first.logprobs[1:]
    if len(first.texts) < 2 or any(x is None for x in later):
        return _refuse(
            backend,
            report,
            "the server does not return a log-prob for every prompt token (it gave "
            f"{sum(x is not None for x in first.logprobs)} for a prompt of {len(natural)} "
            "characters); servers such as llama.cpp return log-probs of generated tokens only",
        )
    if not text.endswith(spelled) or len(spelled) < 0.8 * len(natural):  # (said as missing
        # log-probs, which it had; QA)
        return _refuse(
            backend,
            report,
            "the server's prompt tokens are not those of the text sent (they spell "
            f"{spelled[-40:]!r}, the text ends {text[-40:]!r}): it echoes another text",
        )
    pieces = _bos_pieces(first.texts, bos, natural) if bos else None
    if pieces is not None:
        raise ConfigError(
            f"-M bos={bos}: the server reads it as {len(pieces)} tokens "
            f"({', '.join(repr(p) for p in pieces)}), text rather than the model's BOS token, "
            "which would change every score: give the model's own BOS token (e.g. "
            "<|endoftext|> for SmolLM2, <|begin_of_text|> for Llama 3), or -M bos=none"
        )
    values = [float(x) for x in later if x is not None]
    if any(math.isnan(v) or v > 1e-4 for v in values):
        return _refuse(backend, report, "the server's prompt log-probs are not log-probabilities")
    again = backend.prompt_tokens(bos + natural)
    repeat = max(
        (abs(a - b) for a, b in zip(values, again.logprobs[1:]) if b is not None), default=0.0
    )
    report.numbers["repeat_max_diff"] = repeat
    if len(again.logprobs) != len(first.logprobs) or repeat > TOLERANCE:
        return _refuse(
            backend,
            report,
            f"the same text scored twice differs by {repeat:.3f} nats/token (sampling or "
            "non-deterministic prompt log-probs)",
        )
    cut = natural.index(", and")
    other = backend.prompt_tokens(bos + natural[:cut] + ", but nobody asked.")
    shared = 0
    while (
        shared < min(len(first.texts), len(other.texts)) - 1
        and first.texts[shared] == other.texts[shared]
    ):
        shared += 1
    causal = max(
        (
            abs(a - b)
            for a, b in zip(first.logprobs[1:shared], other.logprobs[1:shared])
            if a is not None and b is not None
        ),
        default=0.0,
    )
    report.numbers["shared_prefix_max_diff"] = causal
    if causal > TOLERANCE:
        return _refuse(
            backend,
            report,
            f"log-probs of a prefix change by {causal:.3f} nats/token when later text changes "
            "(not a causal language model's prompt log-probs)",
        )
    if backend.canary == "full":
        pairs = [
            (_mean_logprob(backend, bos + n), _mean_logprob(backend, bos + f)) for n, f in CANARIES
        ]
        report.numbers["natural_vs_shuffled"] = pairs
        if sum(a > MARGIN * b for a, b in pairs) < 2:
            return _refuse(
                backend,
                report,
                "the model does not prefer natural sentences to their shuffled words (mean "
                f"log-prob per token {', '.join(f'{a:.2f} vs {b:.2f}' for a, b in pairs)}): "
                "check the model name after '#' (-M canary=structural for a random-weight model)",
            )
    return report


def _mean_logprob(backend: OpenAIBackend, text: str) -> float:
    values = [x for x in backend.prompt_tokens(text).logprobs[1:] if x is not None]
    return sum(values) / max(len(values), 1)


def check_backend(
    backend: Backend,
    *,
    method: str,
    prompt_logprobs: bool = False,
    generate: bool = False,
    token_stats: bool = False,
    token_logprobs: bool = False,
    vocab_stats: bool = False,
    from_start: bool = False,
    decode: bool = False,
) -> ProbeReport | None:
    """Refuse, before any work, a backend that cannot serve ``method`` (one-line CapabilityError).

    Live servers (``openai:``) are probed with the canary first when log-probs are needed (once
    per backend object: the pipelines call this too, so a Python caller gets the same check).
    """
    report: ProbeReport | None = None
    if backend.spec.startswith("openai:") and (prompt_logprobs or token_stats or token_logprobs):
        from .openai_compat import OpenAIBackend

        if isinstance(backend, OpenAIBackend):
            report = backend.probe_report if backend.probed else probe_server(backend)
    try:
        backend.require(
            prompt_logprobs=prompt_logprobs,
            generate=generate,
            token_stats=token_stats,
            token_logprobs=token_logprobs,
            vocab_stats=vocab_stats,
            from_start=from_start,
            decode=decode,
            method=method,
        )
    except CapabilityError as exc:
        why = f": {report.reason}" if report is not None and report.reason else ""
        if not why and token_stats and getattr(backend, "mode", None) == "echo":
            why = (
                ": the server gives prompt log-probs through echo only, without the greedy "
                "predictions (vLLM's prompt_logprobs has them)"
            )
        left = available_methods(backend.capabilities, backend)
        still = ", ".join(left) if left else "none"
        raise CapabilityError(f"{exc}{why}; methods this backend can run: {still}") from None
    return report


def without_chat_template(backend: Backend) -> bool:
    """Whether ``backend`` is a local model whose tokenizer has no chat template (a base model,
    as the bundled Gemma 3): a request's ``chat`` then gives its prompt as plain text. False for
    a served model (its server applies its own template)."""
    tok = getattr(backend, "tokenizer", None)
    return tok is not None and not getattr(tok, "chat_template", None)
