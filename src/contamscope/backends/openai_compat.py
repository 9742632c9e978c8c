"""``openai:BASE_URL#MODEL``: a model behind an OpenAI-compatible HTTP server (vLLM, SGLang, TGI).

Scoring reads prompt log-probabilities from ``/completions``: either vLLM's ``prompt_logprobs``
(token ids and the top-1 token of every prompt position) or the classic ``echo`` + ``logprobs``
(token strings). One request per distinct text, ``max_connections`` in flight, retries on
429/5xx/timeouts/dropped connections (see :mod:`.http_client`).

Boundary rule: the continuation's tokens are the shortest run of trailing prompt tokens whose
text covers the continuation, so a token straddling the prefix/continuation boundary belongs to
the continuation (its prefix characters are ``boundary_chars``), the rule of the local backend.
It is computed from the token strings the server returns, so it needs no tokenizer here.
The server tokenises the text itself: ``-M bos=TEXT`` prepends a BOS token's text (e.g.
``<|endoftext|>``) so the numbers equal the local backend, which always conditions on BOS.

Options (``-M key=value``): ``max_connections`` (8), ``timeout`` (120 s), ``retries`` (5),
``backoff`` (0.5 s), ``api_key_env`` (default: ``CONTAMSCOPE_API_KEY`` then ``OPENAI_API_KEY``),
``bos`` (none), ``logprobs=auto|prompt_logprobs|echo`` (auto), ``canary=full|structural``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ..errors import (
    CapabilityError,
    ConfigError,
    ContamscopeError,
    ModelError,
    note,
)
from .base import (
    Backend,
    Capabilities,
    GenerateRequest,
    Generation,
    ProgressFn,
    ScoreRequest,
    ScoreResult,
    TokenStats,
)
from .http_client import AUTH_STATUS, ApiClient, ApiSettings, HttpStatusError
from .registry import refuse_secrets_in

__all__ = ["OpenAIBackend", "PromptTokens", "split_continuation"]

API_VERSION = "1"
"""Bumped when the way numbers are read from the server changes (part of the fingerprint)."""
_TOO_LONG = re.compile(r"context length|max_model_len|maximum .*length|too long", re.I)


def _past_context(exc: HttpStatusError) -> bool:
    """Whether the server refused a request as longer than the model's context (its prompt, or
    for a generation its prompt and ``max_tokens``): a text the local backend marks too long,
    not a failure (a CAP run through a server stopped at its first long prompt; QA)."""
    return exc.status == 400 and bool(_TOO_LONG.search(exc.message))


OPTIONS = (
    "max_connections",
    "timeout",
    "retries",
    "backoff",
    "api_key_env",
    "bos",
    "logprobs",
    "canary",
)
"""The ``-M key=value`` options of ``openai:`` models (the first five: :class:`ApiSettings`)."""
_MODES = ("auto", "prompt_logprobs", "echo")


@dataclass(frozen=True)
class PromptTokens:
    """The server's view of one prompt: its tokens and their log-probs (first one has none)."""

    texts: tuple[str, ...]
    """Token strings as the server decodes them (they should concatenate to the prompt)."""
    logprobs: tuple[float | None, ...]
    """log p(token | earlier tokens); None where the server gives none (the first token)."""
    ids: tuple[int, ...] | None = None
    """Token ids (vLLM ``prompt_logprobs`` mode only)."""
    greedy: tuple[int, ...] | None = None
    """Most likely token id at each position, -1 where unknown (``prompt_logprobs`` mode only)."""


FIRST_TOKEN_CHARS = 64
"""The most characters of the text sent that a reply's first token may stand for unspelled
(vLLM's ``prompt_logprobs`` give the first token no text: the text's first word) where no
``-M bos`` is given; with one, its length (the canary checked that it is one token)."""


def misspelling(texts: Sequence[str], sent: str, first: int = FIRST_TOKEN_CHARS) -> str | None:
    """Why the tokens of a reply are not the text ``sent`` (None: they are). The continuation
    is found by counting characters back from the end, so every token after the first must
    spell the text sent, to its end; the first may be unspelled (up to ``first`` characters,
    or its own text's length where it has one). A reply of another text, or
    of fewer or more tokens, or of a prompt cut at its start (a server's context limit), was
    summed as the continuation's score (QA); tokens in another form (``bytes:\\xe4``) are
    not read either.

    >>> misspelling(["", "The", " sky"], "<s>The sky") is None
    True
    >>> misspelling(["<s>", "The", " sea"], "<s>The sky")
    "they end 'The sea', the text sent ends '<s>The sky'"
    >>> misspelling(["", " sky"], "<s>" + "x" * 80 + " sky")
    'they spell its last 4 of 87 characters (the start cut?)'
    """
    rest = "".join(texts[1:])
    if not sent.endswith(rest):
        return f"they end {rest[-40:]!r}, the text sent ends {sent[-40:]!r}"
    if len(sent) - len(rest) > max(first, len(texts[0]) if texts else 0):
        return f"they spell its last {len(rest)} of {len(sent)} characters (the start cut?)"
    return None


def split_continuation(texts: Sequence[str], continuation: str) -> tuple[int, int]:
    """Index of the first continuation token and the prefix characters it covers.

    The continuation is the shortest run of trailing tokens whose text is at least as long as
    ``continuation``.

    >>> split_continuation(["<s>", "The", " sky", " is", " blue"], " is blue")
    (3, 0)
    >>> split_continuation(["The", " sk", "y is"], "s")
    (2, 3)
    """
    covered = 0
    k = len(texts)
    while k > 0 and covered < len(continuation):
        k -= 1
        covered += len(texts[k])
    return k, max(0, covered - len(continuation))


class OpenAIBackend(Backend):
    """Scores and generates through an OpenAI-compatible server."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        settings: ApiSettings | None = None,
        bos: str = "",
        logprobs: str = "auto",
        canary: str = "full",
    ) -> None:
        if logprobs not in _MODES:
            raise ConfigError(f"-M logprobs={logprobs}: expected one of {', '.join(_MODES)}")
        if canary not in ("full", "structural"):
            raise ConfigError(f"-M canary={canary}: expected full or structural")
        refuse_secrets_in(base_url)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.spec = f"openai:{self.base_url}#{model}"
        self.client = ApiClient(self.base_url, settings or ApiSettings())
        self.bos = bos
        self.mode = logprobs
        self.mode_given = logprobs != "auto"
        """``-M logprobs`` named the mode (else it is found by trying prompt_logprobs)."""
        self.lists_no_models = False
        """``BASE_URL/models`` answered 404: a server without the listing, or a wrong URL."""
        self.canary = canary
        self.chat_only = False
        self.capabilities = Capabilities(
            prompt_logprobs=True,
            generate=True,
            token_stats=logprobs == "prompt_logprobs",
            token_logprobs=True,
            from_start=bool(bos),
        )
        self.refusal: str | None = None
        """Why prompt log-probs were refused by the live probe (None: not refused)."""
        self.probed = False
        self.probe_report: Any = None
        """The canary's :class:`~.probe.ProbeReport` once probed."""
        self._info: dict[str, Any] | None = None
        self.answered_as: dict[str, int] = {}
        """The ``model`` names the server's replies carried, with their counts."""
        self._answers_lock = threading.Lock()
        self._said_overlong = False  # (said once: more tokens than max_tokens asked)

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_spec(
        cls, rest: str, *, device: str, dtype: str, options: dict[str, str]
    ) -> OpenAIBackend:
        """``openai:BASE_URL#MODEL``, e.g. ``openai:http://localhost:8000/v1#Qwen/Qwen2.5-0.5B``."""
        url, sep, model = rest.partition("#")
        refuse_secrets_in(url)  # (also a URL that is none: said without repeating it)
        if not sep or not model.strip():
            raise ModelError(
                f"openai:{rest}: name the served model after '#', "
                "e.g. openai:http://localhost:8000/v1#Qwen/Qwen2.5-0.5B"
            )
        if not re.match(r"^https?://[^/\s]+", url):
            raise ModelError(f"openai:{rest}: BASE_URL must start with http:// or https://")
        if urlsplit(url).path.rstrip("/").endswith(_ENDPOINTS):
            raise ModelError(
                f"openai:{rest}: BASE_URL is the API's root, not an endpoint"
                f"{url_hint(url.rstrip('/'), model.strip())}"
            )
        if device != "auto" or dtype != "auto":
            raise ConfigError(
                "--device/--dtype do not apply to openai: models (the server decides)"
            )
        opts = dict(options)
        settings = ApiSettings.from_options(opts)
        unknown = sorted(set(opts) - {"bos", "logprobs", "canary"})
        if unknown:
            raise ConfigError(
                f"-M {unknown[0]}: unknown option for openai: models; known: " + ", ".join(OPTIONS)
            )
        bos = opts.get("bos", "")
        backend = cls(
            url,
            model.strip(),
            settings=settings,
            bos="" if bos == "none" else bos,
            logprobs=opts.get("logprobs", "auto"),
            canary=opts.get("canary", "full"),
        )
        backend.server_info()  # fail now, before any work, on a wrong URL or model name
        return backend

    # --- identity -------------------------------------------------------------------------
    def _missing_v1(self) -> None:
        """Raise ModelError naming the right URL when the base URL lacks the API's ``/v1``
        (``BASE/models`` is missing but ``BASE/v1/models`` answers); else return."""
        if self.base_url.endswith("/v1"):
            return
        try:
            self.client.request("GET", f"{self.base_url}/v1/models")
        except ContamscopeError:
            return
        raise ModelError(
            f"{self.base_url}/models: not found, but {self.base_url}/v1/models answers: the API "
            f"is under /v1; use openai:{self.base_url}/v1#{self.model}"
        )

    def server_info(self) -> dict[str, Any]:
        """The server's ``/models`` entry for this model ({} when the server lists none).

        Raises ModelError when the server lists models but not this one."""
        if self._info is None:
            try:
                body = self.client.request("GET", "models", first_contact=True)
            except HttpStatusError as exc:
                if exc.status in (404, 405, 501):
                    self._missing_v1()
                    self.lists_no_models = exc.status == 404
                    self._info = {}
                    return self._info
                advice = f": {self.client.key_advice()}" if exc.status in AUTH_STATUS else ""
                raise ModelError(f"{self.base_url}/models: {exc}{advice}") from None
            except ModelError as exc:
                msg = str(exc)  # a reply it could not use names its URL already
                if not msg.startswith(self.base_url):
                    msg = f"cannot reach {self.base_url}/models: {msg}"
                raise ModelError(msg) from None
            data = body.get("data", [])
            if not isinstance(data, list):
                raise ModelError(
                    f"{self.base_url}/models: 'data' is a {type(data).__name__}, not a list of "
                    "models: not an OpenAI-compatible server?"
                )
            served = [m for m in data if isinstance(m, dict)]
            entry = next((m for m in served if m.get("id") == self.model), None)
            if entry is None and served:
                names = ", ".join(str(m.get("id")) for m in served[:5])
                raise ModelError(
                    f"{self.base_url} does not serve model {self.model!r} (it serves: {names}); "
                    "write the served name after '#'"
                )
            self._info = {
                k: entry[k]
                for k in ("id", "root", "parent", "owned_by", "max_model_len")
                if entry and entry.get(k) is not None
            }
        return self._info

    def fingerprint(self) -> str:
        info = json.dumps(self.server_info(), sort_keys=True)
        parts = [
            "openai",
            self.base_url,
            self.model,
            f"info={hashlib.sha256(info.encode()).hexdigest()[:16]}",
            f"bos={self.bos!r}",
            f"api={API_VERSION}",
        ]
        return "|".join(parts)

    def describe(self) -> dict[str, object]:
        return {
            "spec": self.spec,
            "fingerprint": self.fingerprint(),
            "server_model": self.server_info(),
            "logprobs_mode": self.mode,
            "bos": self.bos,
            "max_connections": self.client.settings.max_connections,
            "requests_sent": self.client.sent,
            "requests_retried": self.client.retried,
            "answered_as": dict(self.answered_as),
            "canary": None if self.probe_report is None else self.probe_report.numbers,
        }

    # --- prompt log-probs -------------------------------------------------------------------
    def _body(self, text: str, mode: str, top: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": text,
            "max_tokens": 1,
            "temperature": 0,
        }
        if mode == "prompt_logprobs":
            body["prompt_logprobs"] = top
        else:
            body.update(echo=True, logprobs=max(top, 0))
        return body

    def _resolve_mode(self, text: str) -> None:
        """``auto``: use vLLM's prompt_logprobs when the server accepts it, else echo."""
        if self.mode != "auto":
            return
        try:
            got = self._prompt_tokens(text, "prompt_logprobs", 1)
        except HttpStatusError as exc:
            if exc.status not in (400, 404, 422):
                raise
            got = None
        self.mode = "prompt_logprobs" if got is not None else "echo"
        self.capabilities = Capabilities(
            prompt_logprobs=self.capabilities.prompt_logprobs,
            generate=True,
            token_stats=self.mode == "prompt_logprobs" and self.capabilities.prompt_logprobs,
            token_logprobs=self.capabilities.prompt_logprobs,
            from_start=bool(self.bos),
        )

    def _note_answer(self, body: dict[str, Any]) -> None:
        """Count the reply's ``model`` name; the first time it names another model than the
        one asked for (not a dated snapshot of it), say so (a :class:`ContamscopeWarning`): a
        router's fallback would otherwise be scored, cached and reported as this model."""
        name = body.get("model")
        if not isinstance(name, str) or not name:
            return
        with self._answers_lock:
            first = name not in self.answered_as
            self.answered_as[name] = self.answered_as.get(name, 0) + 1
        if first and not same_served_model(self.model, name):
            note(
                f"{self.spec}: the server answered as model {name!r}, not {self.model!r} (a "
                "router's fallback, or a deployment's other name?): its answers are recorded, "
                f"and cached, as those of {self.model!r}; summary.json's model.answered_as "
                "counts this command's replies by name",
            )

    def _prompt_tokens(self, text: str, mode: str, top: int) -> PromptTokens | None:
        """One request; None when the server ignores the requested mode."""
        body = self.client.request("POST", "completions", self._body(text, mode, top))
        self._note_answer(body)
        choice = _first_choice(body)
        if mode == "prompt_logprobs":
            return _parse_prompt_logprobs(choice, body)
        return _parse_echo(choice, text)

    def prompt_tokens(self, text: str, top: int = 0) -> PromptTokens:
        """Tokens and log-probs of ``text`` as the server sees it (the probe uses this)."""
        self._resolve_mode(text)
        got = self._prompt_tokens(text, self.mode, top)
        if got is None:
            raise CapabilityError(
                f"{self.spec}: the server returned no prompt log-probs ({self.mode} mode)"
            )
        return got

    def _prepare(self, req: ScoreRequest) -> str:
        text = self.bos + req.prefix + req.continuation
        if not self.bos and not req.prefix:
            raise ConfigError("empty prefix and no BOS: set -M bos=TEXT (e.g. <|endoftext|>)")
        return text

    def _run_prompts(
        self, requests: Sequence[ScoreRequest], top: int, progress: ProgressFn | None, what: str
    ) -> list[tuple[ScoreRequest, PromptTokens | None]]:
        unique = list(dict.fromkeys(requests))
        if unique:
            self._resolve_mode(self._prepare(unique[0]))

        def one(req: ScoreRequest) -> PromptTokens | None:
            sent = self._prepare(req)
            try:
                got = self.prompt_tokens(sent, top)
            except HttpStatusError as exc:
                if _past_context(exc):
                    return None  # longer than the model's context: NaN, like the local backend
                raise
            # the canary checks its own replies only: a NaN read as "longer than the context"
            # and was kept on resume, a positive value moved ranks and flags, and -inf (which
            # JSON does not hold; vLLM writes -9999) excluded the item for good (QA)
            bad = next(
                (x for x in got.logprobs if x is not None and not -math.inf < x <= 1e-4), None
            )
            kept = "a fault of the server; nothing of this batch is kept, finished ones are"
            if bad is not None:
                raise ModelError(
                    f"the server's reply holds {bad!r} where a log-probability (finite, <= 0) belongs: "
                    f"{kept}"
                )
            # (with a BOS, only it may go unspelled: a cut of up to 64 characters passed; QA)
            wrong = misspelling(got.texts, sent, len(self.bos) or FIRST_TOKEN_CHARS)
            if wrong is not None:
                raise ModelError(
                    f"the server's tokens are not those of the text sent ({wrong}): {kept}"
                )
            return got

        def label(i: int) -> str:
            r = unique[i]
            return f"{what} request {i + 1} of {len(unique)} (prefix {r.prefix[-40:]!r}, continuation {r.continuation[:40]!r})"

        got = self.client.map(one, unique, label)
        by_req = dict(zip(unique, got))
        if progress is not None:
            progress(len(requests))
        return [(r, by_req[r]) for r in requests]

    def score(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[ScoreResult]:
        out: list[ScoreResult] = []
        for req, pt in self._run_prompts(requests, 0, progress, "scoring"):
            if pt is None:
                out.append(ScoreResult(math.nan, 0, 0, too_long=True))
                continue
            start, boundary = split_continuation(pt.texts, req.continuation)
            lps = pt.logprobs[start:]
            spelled = len("".join(pt.texts))
            if start == 0 and spelled < len(req.continuation):  # (said as "cannot score
                # text" of a server that passed the canary; review QA)
                raise ModelError(
                    f"{self.spec}: the server's tokens spell {spelled} characters, fewer than "
                    f"the continuation's {len(req.continuation)} (the prompt's start cut?): "
                    "a fault of the server; nothing of this batch is kept, finished ones are"
                )
            if any(x is None for x in lps):
                raise CapabilityError(
                    f"{self.spec}: the server returned no log-prob for a prompt token "
                    f"(continuation {req.continuation[:40]!r}); it cannot score text"
                )
            out.append(ScoreResult(float(sum(x for x in lps if x is not None)), len(lps), boundary))
        return out

    def token_stats(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[TokenStats]:
        if requests and self.mode == "auto":
            self._resolve_mode(self._prepare(requests[0]))
        if not self.capabilities.per_token:
            raise CapabilityError(f"backend {self.spec!r} cannot return per-token log-probs")
        # echo gives each token's text and log-prob but no ids: -1 for them (token_logprobs)
        ids = self.capabilities.token_stats
        out: list[TokenStats] = []
        for req, pt in self._run_prompts(requests, 1 if ids else 0, progress, "token-stats"):
            if pt is None or (ids and (pt.ids is None or pt.greedy is None)):
                out.append(TokenStats.too_long())
                continue
            start, boundary = split_continuation(pt.texts, req.continuation)
            if any(x is None for x in pt.logprobs[start:]):  # (it was NaN: the version was
                # left out as "a numerical overflow", the run exiting 0; QA)
                raise CapabilityError(
                    f"{self.spec}: the server returned no log-prob for a prompt token "
                    f"(continuation {req.continuation[:40]!r}); it cannot score text"
                )
            lps = tuple(float(x) for x in pt.logprobs[start:] if x is not None)
            unknown = (-1,) * len(lps)
            tokens = pt.ids[start:] if ids and pt.ids is not None else unknown
            greedy = pt.greedy[start:] if ids and pt.greedy is not None else unknown
            out.append(TokenStats(tokens, lps, greedy, boundary))
        return out

    def _detokenize(self, tokens: Sequence[int]) -> str:
        """One ``/detokenize`` request (vLLM's tokenizer API); a status that says the server
        has none is a CapabilityError, other failures are the client's."""
        root = self.base_url[:-3] if self.base_url.endswith("/v1") else self.base_url
        try:
            body = self.client.request(
                "POST", f"{root}/detokenize", {"model": self.model, "tokens": list(tokens)}
            )
        except HttpStatusError as exc:
            if exc.status in AUTH_STATUS:
                raise
            raise CapabilityError(f"{self.spec}: the server cannot detokenize ({exc})") from None
        return str(body.get("prompt", ""))

    def decode(self, tokens: Sequence[int]) -> str:
        """Text of token ids, through the server's ``/detokenize``."""
        try:
            return self._detokenize(tokens)
        except CapabilityError:
            raise
        except ModelError as exc:  # the server gone: said as any request's failure (QA)
            raise self.client.failed("a /detokenize request", exc) from None

    def decode_many(self, sequences: Sequence[Sequence[int]]) -> list[str]:
        """The ``/detokenize`` requests of ``sequences``, ``max_connections`` at a time
        (BenBench sent them one after another: 80 for 4 items; chaos QA)."""
        jobs = list(sequences)

        def label(i: int) -> str:
            return f"detokenize request {i + 1} of {len(jobs)} ({len(jobs[i])} tokens)"

        return [str(t) for t in self.client.map(self._detokenize, jobs, label)]

    # --- generation ---------------------------------------------------------------------------
    def _generate_one(self, req: GenerateRequest) -> Generation:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": req.max_new_tokens,
            "temperature": 0,
        }
        if req.stop:
            params["stop"] = list(req.stop)
        if req.chat:  # never for a prompt laid out as given: its answers (and their cache
            # entries) would be another prompt's (a chat-only server: the error below, QA)
            params["messages"] = [{"role": "user", "content": req.prompt}]
            try:
                body = self.client.request("POST", "chat/completions", params)
            except HttpStatusError as exc:
                if _past_context(exc):
                    return Generation("", 0, "context")
                raise
            choice = _first_choice(body, required=True)
            message = _reply_field(choice, "message")
            if not isinstance(message, dict):
                message = {"content": str(message)}
            content = _reply_field(message, "content", "message.content")
            if content is None and isinstance(message.get("refusal"), str):
                content = message["refusal"]  # the model declined: that is its answer
            # null content is an empty answer: a reasoning model out of tokens (finish_reason
            # "length") says nothing, and that is what CAP reads (review)
            text = "" if content is None else str(content)
        else:
            params["prompt"] = self.bos + req.prompt
            try:
                body = self.client.request("POST", "completions", params)
            except HttpStatusError as exc:
                if _past_context(exc):
                    return Generation("", 0, "context")
                if exc.status in (404, 405, 501):  # a chat-only API: prompts go another way
                    raise CapabilityError(
                        f"{self.spec}: the server has no /completions endpoint ({exc}): a "
                        "chat-only API generates through /chat/completions, in the model's chat "
                        "template: CAP does with --chat (other methods need /completions)"
                    ) from None
                raise
            choice = _first_choice(body, required=True)
            value = _reply_field(choice, "text")
            text = "" if value is None else str(value)
        hits = [text.find(s) for s in req.stop if s and s in text]
        if hits:  # servers strip the stop string; some return it
            text = text[: min(hits)]
        self._note_answer(body)
        usage = body.get("usage")
        n = int(usage.get("completion_tokens") or 0) if isinstance(usage, dict) else 0
        # cut here at a stop string: it stopped, whatever the server says (a server that ignores
        # `stop` said "length", and its answers counted as truncated; the local backend says
        # "stop" so: QA)
        reason = "length" if choice.get("finish_reason") == "length" and not hits else "stop"
        with self._answers_lock:
            say = n > req.max_new_tokens and not self._said_overlong
            self._said_overlong = self._said_overlong or say
        if say:
            note(
                f"{self.spec}: the server returned {n} tokens for a request of at most "
                f"{req.max_new_tokens} (max_tokens ignored?): its answers may run longer than "
                "a local model's, which lowers overlap scores such as ROUGE-L"
            )
        return Generation(text, n, reason)

    def generate(
        self, requests: Sequence[GenerateRequest], progress: ProgressFn | None = None
    ) -> list[Generation]:
        unique = list(dict.fromkeys(requests))

        def label(i: int) -> str:
            return f"generation request {i + 1} of {len(unique)} (prompt {unique[i].prompt[:40]!r})"

        got = self.client.map(self._generate_one, unique, label, progress)
        by_req = dict(zip(unique, got))
        if progress is not None and len(requests) > len(unique):
            progress(len(requests) - len(unique))
        return [by_req[r] for r in requests]


_ENDPOINTS = ("/chat/completions", "/completions", "/models")
"""The API's endpoints under its root (a BASE_URL that ends in one is not the root)."""


_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|\d{4})")
"""A dated snapshot's suffix: ``-2024-07-18``, ``-20240229``, ``-0613``."""


def same_served_model(asked: str, answered: str) -> bool:
    """Whether a reply's ``model`` name is the model asked for: the same name, or a dated
    snapshot of it (hosted APIs answer an alias with the snapshot that served it).

    >>> same_served_model("gpt-4o-mini", "gpt-4o-mini-2024-07-18")
    True
    >>> same_served_model("gpt-4o", "gpt-4o-mini")
    False
    """
    if answered == asked:
        return True
    return answered.startswith(asked) and bool(_SNAPSHOT.fullmatch(answered[len(asked) :]))


def url_hint(base_url: str, model: str) -> str:
    """A corrected ``openai:`` spec for a BASE_URL that is probably not the API's root.

    >>> url_hint("http://h:8000/v1/completions", "m"), url_hint("http://h:8000", "m")
    (' (without /completions: openai:http://h:8000/v1#m)', ' (e.g. openai:http://h:8000/v1#m)')
    """
    path = urlsplit(base_url).path.rstrip("/")
    for tail in _ENDPOINTS:
        if path.endswith(tail):
            return f" (without {tail}: openai:{base_url[: -len(tail)]}#{model})"
    if "v1" not in path.split("/"):  # e.g. the server's root: its API is most often under /v1
        root = base_url[: len(base_url) - len(path)] if path else base_url
        return f" (e.g. openai:{root}/v1#{model})"
    return " (e.g. openai:http://HOST:PORT/v1#MODEL)"


def _first_choice(body: dict[str, Any], *, required: bool = False) -> dict[str, Any]:
    """The reply's first choice ({} when it has none); a malformed list is a ModelError, and so
    is a reply without a choice when ``required`` (a generation: read as an empty answer, it
    let a run end "no evidence" on a server that answered nothing)."""
    error = body.get("error")
    if error and not body.get("choices"):  # an error sent with status 200: its own words
        said = error.get("message", error) if isinstance(error, dict) else error
        raise ModelError(f"the server answered with an error: {str(said)[:200]}")
    if required and not body.get("choices"):
        raise ModelError(
            f"the server's reply has no choices ({str(body)[:80]}): not in the OpenAI API's format"
        )
    choices = body.get("choices") or [{}]
    if not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise ModelError(
            f"the server's reply has 'choices' of {type(choices).__name__} "
            f"{str(choices)[:60]!r}, not a list of objects: not in the OpenAI API's format"
        )
    return choices[0]


def _reply_field(part: dict[str, Any], key: str, name: str | None = None) -> Any:
    """``part[key]``; a reply without the key is a ModelError (read as an empty answer, a
    third of a run's answers were scored as the model saying nothing). A null value is the
    caller's to read (an empty answer)."""
    if key not in part:
        raise ModelError(
            f"the server's reply has no {name or key} (a choice without the generated text): "
            "not in the OpenAI API's format"
        )
    return part[key]


_F = TypeVar("_F", bound=Callable[..., Any])


def _reply_format(what: str) -> Callable[[_F], _F]:
    """A reply that is JSON but not in the shape OpenAI's API gives is a one-line ModelError
    naming ``what`` was read, not a Python traceback from deep in the parser."""

    def wrap(fn: _F) -> _F:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:
                detail = f"{type(exc).__name__}: {str(exc)[:120]}"
                raise ModelError(
                    f"the server's {what} is not in the OpenAI API's format ({detail})"
                ) from None

        return inner  # type: ignore[return-value]

    return wrap


@_reply_format("prompt log-probs (echo)")
def _parse_echo(choice: dict[str, Any], text: str) -> PromptTokens | None:
    lp = choice.get("logprobs")
    if not isinstance(lp, dict) or not lp.get("tokens"):
        return None
    tokens = [str(t) for t in lp["tokens"]]
    values = list(lp.get("token_logprobs") or [])
    offsets = list(lp.get("text_offset") or [])
    n = len(tokens)
    if len(offsets) == n:  # drop the generated token(s): they start at or after the prompt end
        n = sum(1 for o in offsets if o < len(text))
    else:
        covered, n = 0, 0
        while n < len(tokens) and covered < len(text):
            covered += len(tokens[n])
            n += 1
    vals = [None if v is None else float(v) for v in values[:n]]
    vals += [None] * (n - len(vals))
    return PromptTokens(tuple(tokens[:n]), tuple(vals))


@_reply_format("prompt_logprobs")
def _parse_prompt_logprobs(choice: dict[str, Any], body: dict[str, Any]) -> PromptTokens | None:
    entries = choice.get("prompt_logprobs")
    if not isinstance(entries, list) or not entries:
        return None
    ids_given = choice.get("prompt_token_ids") or body.get("prompt_token_ids")
    texts: list[str] = []
    values: list[float | None] = []
    ids: list[int] = []
    greedy: list[int] = []
    for i, entry in enumerate(entries):
        if not entry:  # the first token has nothing to condition on
            tid = int(ids_given[i]) if ids_given and i < len(ids_given) else -1
            texts.append("")
            values.append(None)
            ids.append(tid)
            greedy.append(-1)
            continue
        items = [(int(k), v) for k, v in entry.items()]
        # the prompt token's id: given by the server, or vLLM's first entry
        tid = int(ids_given[i]) if ids_given and i < len(ids_given) else items[0][0]
        own = dict(items)[tid]
        best = min(items, key=lambda kv: kv[1].get("rank") or 10**9)
        texts.append(str(own.get("decoded_token") or ""))
        values.append(float(own["logprob"]))
        ids.append(tid)
        greedy.append(best[0] if best[1].get("rank") == 1 else -1)
    return PromptTokens(tuple(texts), tuple(values), tuple(ids), tuple(greedy))
