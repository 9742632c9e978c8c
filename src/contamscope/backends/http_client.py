"""A small JSON-over-HTTP client for model servers: bounded concurrency, timeouts, retries.

Requests run on a thread pool of ``max_connections`` workers sharing one connection pool.
A request that fails with 429, a 5xx status, a timeout, a connection error or a success whose
body is not JSON (cut short on the way; not on the first contact, where it is a wrong URL) is
retried with exponential backoff (``backoff * 2**attempt`` seconds, jittered, capped at 30 s; a
server's ``Retry-After`` is honoured up to the cap). Any other 4xx, or a request still failing after
``retries`` retries, ends the whole call with one :class:`ModelError` line that names the
request (its index and label), the endpoint and the last error.
"""

from __future__ import annotations

import math
import os
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urljoin

import httpx

from ..errors import ConfigError, HeldNotes, ModelError

__all__ = ["ApiClient", "ApiSettings", "HttpStatusError", "API_KEY_ENVS"]

T = TypeVar("T")

API_KEY_ENVS = ("CONTAMSCOPE_API_KEY", "OPENAI_API_KEY")
"""Environment variables read, in order, for the API key (never a command-line flag)."""

_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_MAX_SLEEP = 30.0


@dataclass(frozen=True)
class ApiSettings:
    """Connection settings of an HTTP backend (``-M key=value`` options)."""

    max_connections: int = 8
    """Requests in flight at once (thread-pool size and HTTP connection-pool limit)."""
    timeout: float = 120.0
    """Seconds to wait for one response (connect, read and write each)."""
    retries: int = 5
    """Retries of one request after a 429, a 5xx, a timeout or a dropped connection."""
    backoff: float = 0.5
    """First retry delay in seconds; doubled after each failure (jittered, capped at 30 s)."""
    api_key_env: str | None = None
    """Environment variable holding the API key; default: the first of API_KEY_ENVS that is set."""

    def __post_init__(self) -> None:
        if self.max_connections < 1:
            raise ConfigError("-M max_connections: must be at least 1")
        if not 0 < self.timeout < math.inf:  # NaN too
            raise ConfigError("-M timeout: must be a positive number of seconds")
        if self.retries < 0:
            raise ConfigError("-M retries: must not be negative")
        if not 0 <= self.backoff < math.inf:
            raise ConfigError("-M backoff: must be a number of seconds, 0 or more")

    @classmethod
    def from_options(cls, opts: dict[str, str]) -> ApiSettings:
        """Read and remove the connection options from ``opts``."""

        def number(key: str, default: str, kind: type[int] | type[float]) -> Any:
            value = opts.pop(key, default)
            try:
                return kind(value)
            except ValueError:
                what = "a whole number" if kind is int else "a number"
                raise ConfigError(f"-M {key}={value}: expected {what}") from None

        return cls(
            max_connections=number("max_connections", "8", int),
            timeout=number("timeout", "120", float),
            retries=number("retries", "5", int),
            backoff=number("backoff", "0.5", float),
            api_key_env=opts.pop("api_key_env", None) or None,
        )

    def api_key(self) -> tuple[str, str] | None:
        """(the variable it was read from, the API key), or None when no key is set. A key
        an HTTP header cannot carry as it is (whitespace, control or non-ASCII characters: a
        key pasted with a newline or a typographic quote) is refused, without showing it."""
        if self.api_key_env:
            var = self.api_key_env
            key = os.environ.get(var)
            if key is None:
                raise ConfigError(f"-M api_key_env={var}: that variable is not set")
            if not key:
                raise ConfigError(f"-M api_key_env={var}: that variable is empty")
        else:
            found = next(((e, os.environ[e]) for e in API_KEY_ENVS if os.environ.get(e)), None)
            if found is None:
                return None
            var, key = found
        bad = next((c for c in key if not c.isascii() or not c.isprintable() or c.isspace()), None)
        if bad is not None:
            what = (
                "a space"
                if bad == " "
                else "a line break"
                if bad in "\r\n"
                else "whitespace or a control character"
                if bad.isascii()
                else f"a non-ASCII character (U+{ord(bad):04X})"
            )
            raise ConfigError(
                f"${var}: the API key holds {what}, which an HTTP header cannot carry: set the "
                "key again without it"
            )
        return var, key

    def key_advice(self, sent: bool) -> str:
        """What to do about a refused (``sent``) or missing API key."""
        found = self.api_key() if sent else None
        if found is None:
            return KEY_ADVICE
        if self.api_key_env:
            return f"the key in ${found[0]} (-M api_key_env) was refused: set the right key there"
        return (
            f"the key in ${found[0]} was refused: set the right key there, or name another "
            "variable with -M api_key_env=VAR"
        )


class HttpStatusError(ModelError):
    """A non-retryable HTTP error status (the server's message is in the text)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


AUTH_STATUS = frozenset({401, 403, 407})
"""HTTP statuses of a refused or missing API key."""
KEY_ADVICE = (
    "give its API key in $CONTAMSCOPE_API_KEY or $OPENAI_API_KEY, or name the variable that "
    "holds it with -M api_key_env=VAR"
)


class ServerUnavailable(ModelError):
    """Every attempt failed for a reason of the moment (connection refused or lost, timeouts,
    429/5xx): the server, not what it can do."""


def _server_message(resp: Any, key: str | None = None) -> str:
    """The server's own words about an error status, on one line; the API key sent is
    written as ``***`` where a server repeats it (some quote the refused key back: QA)."""
    try:
        body = resp.json()
        err = body.get("error", body) if isinstance(body, dict) else body
        msg = err.get("message", err) if isinstance(err, dict) else err
        text = str(msg)
    except ValueError:
        text = resp.text
    if key:  # (as a word of its own: a key "e" made "k***y" of every "key"; review QA)
        text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(key)}(?![A-Za-z0-9])", "***", text)
    return " ".join(text.split())[:300]


class ApiClient:
    """JSON POST/GET against one base URL with retries; ``map`` runs many requests concurrently."""

    def __init__(self, base_url: str, settings: ApiSettings) -> None:
        self.base_url = base_url.rstrip("/")
        self.settings = settings
        headers = {"User-Agent": "contamscope"}
        found = settings.api_key()
        if found is not None:
            headers["Authorization"] = f"Bearer {found[1]}"
        self.sends_key = found is not None
        self._key = found[1] if found is not None else None
        n = settings.max_connections
        self._client = httpx.Client(
            timeout=httpx.Timeout(settings.timeout),
            limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
            headers=headers,
        )
        self.retried = 0
        """Requests retried so far (429/5xx/timeouts/connection errors)."""
        self.sent = 0
        """HTTP requests sent so far, retries included."""
        self._lock = threading.Lock()
        self._rng = random.Random(0)

    def url(self, path: str) -> str:
        return path if path.startswith("http") else f"{self.base_url}/{path.lstrip('/')}"

    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        first_contact: bool = False,
    ) -> Any:
        """One request with retries; returns the decoded JSON body.

        ``first_contact``: a connection refused is not retried (nothing listens at that address
        yet: a wrong URL or a server not started; retrying spent about 16 s before saying so)."""
        last = ""
        for attempt in range(self.settings.retries + 1):
            if attempt:
                with self._lock:
                    self.retried += 1
            wait_s = None
            try:
                with self._lock:
                    self.sent += 1
                resp = self._client.request(method, self.url(path), json=body)
            except httpx.TimeoutException as exc:
                last = (
                    f"timed out after {self.settings.timeout:g} s ({type(exc).__name__}; "
                    "-M timeout=SECONDS sets the limit)"
                )
            except httpx.TransportError as exc:
                last = f"connection error ({type(exc).__name__}: {str(exc)[:120] or 'no detail'})"
                if "WRONG_VERSION_NUMBER" in str(exc) and self.base_url.startswith("https:"):
                    raise ModelError(  # TLS to a plain-HTTP server: no retry will help
                        f"{self.url(path)}: {last}: the server speaks plain HTTP; use http://"
                    ) from None
                if first_contact and isinstance(exc, httpx.ConnectError):
                    raise ServerUnavailable(
                        f"{last}: is the server running, and is the URL right? (not retried "
                        "before the server has answered once)"
                    ) from None
            else:
                if 300 <= resp.status_code < 400:  # not followed: a redirect's JSON was read
                    # as the reply, and the run refused as "no prompt log-probs" (review QA)
                    raise ModelError(self._redirected(path, resp))
                if resp.status_code < 400:
                    try:
                        reply = resp.json()
                    except ValueError:  # a body cut short (a proxy, a dropped stream) is
                        # of the moment: retried; a first contact's is a wrong URL (QA)
                        last = f"HTTP {resp.status_code} with a body that is not JSON"
                        if first_contact:
                            raise ModelError(f"{self.url(path)}: {last}") from None
                    else:
                        if not isinstance(reply, dict):
                            raise ModelError(
                                f"{self.url(path)}: the reply is a JSON {type(reply).__name__}, "
                                "not an object: not an OpenAI-compatible server?"
                            )
                        return reply
                else:
                    msg = _server_message(resp, self._key)
                    if resp.status_code not in _RETRY_STATUS:
                        raise HttpStatusError(resp.status_code, msg)
                    last = f"HTTP {resp.status_code}: {msg}"
                    try:
                        wait_s = float(resp.headers.get("retry-after", ""))
                    except ValueError:
                        wait_s = None
                    if wait_s is not None and wait_s > _MAX_SLEEP:  # (a re-run at once would
                        last += (  # meet the same refusal: said; QA)
                            f" (the server asked to wait {wait_s:.0f} s; waits here are at most "
                            f"{_MAX_SLEEP:.0f} s: re-run after that long)"
                        )
            if attempt < self.settings.retries:
                delay = self.settings.backoff * (2**attempt) * (0.5 + self._rng.random())
                time.sleep(min(_MAX_SLEEP, max(delay, wait_s or 0.0)))
        raise ServerUnavailable(f"failed after {self.settings.retries + 1} attempts: {last}")

    def map(
        self,
        fn: Callable[[T], Any],
        jobs: Sequence[T],
        label: Callable[[int], str],
        on_done: Callable[[int], None] | None = None,
    ) -> list[Any]:
        """Run ``fn(job)`` for every job, ``max_connections`` at a time, results in job order.

        The first failure cancels the jobs not yet started and raises one ModelError naming the
        failed job (``label(index)``). ``on_done(1)`` is called in this thread per finished job.
        """
        if not jobs:
            return []
        out: list[Any] = [None] * len(jobs)
        pool = ThreadPoolExecutor(self.settings.max_connections, thread_name_prefix="contamscope")
        held = HeldNotes()  # said here when the jobs end: they name the caller's line
        futures: dict[Future[Any], int] = {
            pool.submit(held.hold(fn, i), job): i for i, job in enumerate(jobs)
        }
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for fut in done:
                    i = futures[fut]
                    exc = fut.exception()
                    if exc is not None:
                        raise self.failed(label(i), exc) from None
                    out[i] = fut.result()
                    if on_done is not None:
                        on_done(1)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            held.say(failing=True)
            raise
        pool.shutdown(wait=True, cancel_futures=True)
        held.say()
        return out

    def _redirected(self, path: str, resp: Any) -> str:
        """The line for a redirect (never followed: a POST's body is not sent on), with the
        BASE_URL it points to where its address ends in the path asked for."""
        said = f"{self.url(path)}: HTTP {resp.status_code}, a redirect"
        where = resp.headers.get("location")
        if not where:
            return f"{said} that names no address: check BASE_URL"
        target = urljoin(self.url(path), where)
        tail = "/" + path.lstrip("/")
        if path.startswith("http") or not target.endswith(tail):
            return f"{said} to {target}: check BASE_URL"
        return f"{said} to {target}: give {target[: -len(tail)]} as BASE_URL"

    def failed(self, what: str, exc: BaseException) -> ModelError:
        """The one line for a request that failed: the server, the request (``what``), the
        error, and what to do (a refused key; a server that may answer again: re-run)."""
        detail = str(exc)
        if isinstance(exc, HttpStatusError) and exc.status in AUTH_STATUS:
            detail += f": {self.key_advice()}"
        elif isinstance(exc, ServerUnavailable):
            detail += "; once the server answers again, the same run resumes"
        return ModelError(f"{self.base_url}: {what} failed: {detail}")

    def key_advice(self) -> str:
        """What to do about the API key the server refused (or the one it lacks)."""
        return self.settings.key_advice(self.sends_key)

    def close(self) -> None:
        self._client.close()
