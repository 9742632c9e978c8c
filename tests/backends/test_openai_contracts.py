"""Documented contracts of the openai: backend (backends/openai_compat.py) and its HTTP client
(backends/http_client.py): how a server's reply becomes a continuation's log-prob, token count
and boundary, and how requests are retried and counted. Replies are served by an in-process
transport (no server process), each shaped as the docstrings describe (mutation QA)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from contamscope.backends import http_client
from contamscope.backends.base import ScoreRequest
from contamscope.backends.http_client import ApiClient, ApiSettings, ServerUnavailable
from contamscope.backends.openai_compat import OpenAIBackend
from contamscope.errors import ModelError

Handler = Callable[[httpx.Request], httpx.Response]


def _wired(client: ApiClient, handler: Handler) -> list[dict[str, Any]]:
    """Route ``client``'s requests to ``handler``; returns the list of JSON bodies sent."""
    sent: list[dict[str, Any]] = []

    def record(request: httpx.Request) -> httpx.Response:
        if request.content:
            sent.append(json.loads(request.content))
        return handler(request)

    client._client = httpx.Client(transport=httpx.MockTransport(record))
    return sent


def _backend(reply: Callable[[dict[str, Any]], Any], **kw: Any) -> tuple[OpenAIBackend, list]:
    """An echo/prompt_logprobs backend whose /completions replies are ``reply(body)`` (a dict,
    or an httpx.Response)."""
    backend = OpenAIBackend("http://test/v1", "m", **kw)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        got = reply(json.loads(request.content))
        return got if isinstance(got, httpx.Response) else httpx.Response(200, json=got)

    return backend, _wired(backend.client, handler)


def _echo(tokens: list[str], lps: list[float | None], offsets: bool = True) -> dict[str, Any]:
    """An echo reply: the prompt's tokens, then one generated token ('!')."""
    tokens = [*tokens, "!"]
    lps = [*lps, -0.5]
    logprobs: dict[str, Any] = {"tokens": tokens, "token_logprobs": lps}
    if offsets:
        starts, at = [], 0
        for t in tokens:
            starts.append(at)
            at += len(t)
        logprobs["text_offset"] = starts
    return {"model": "m", "choices": [{"text": "".join(tokens), "logprobs": logprobs}]}


TOKENS = ["The", " sky", " is", " blue"]
LPS: list[float | None] = [None, -1.0, -2.0, -4.0]


@pytest.mark.parametrize("offsets", [True, False], ids=["text_offset", "no_offsets"])
def test_an_echo_reply_scores_the_continuations_tokens_only(offsets: bool) -> None:
    """Module docstring: the continuation's tokens are "the shortest run of trailing prompt
    tokens whose text covers the continuation", summed; the generated token after the prompt
    is dropped (by its text_offset, at or after the prompt's end, else by counting the
    prompt's characters): " is blue" is 2 tokens, -2 + -4 = -6, boundary 0 (mutation QA)."""
    backend, _ = _backend(lambda body: _echo(TOKENS, LPS, offsets), logprobs="echo")
    (r,) = backend.score([ScoreRequest("The sky", " is blue")])
    assert (r.logprob, r.n_tokens, r.boundary_chars) == (-6.0, 2, 0)


def test_a_token_straddling_the_boundary_belongs_to_the_continuation() -> None:
    """Module docstring: "a token straddling the prefix/continuation boundary belongs to the
    continuation (its prefix characters are boundary_chars)": continuation "ky is blue" takes
    " sky" (its prefix characters " s": 2) and the two tokens after it (mutation QA)."""
    backend, _ = _backend(lambda body: _echo(TOKENS, LPS), logprobs="echo")
    (r,) = backend.score([ScoreRequest("The s", "ky is blue")])
    assert (r.logprob, r.n_tokens, r.boundary_chars) == (-7.0, 3, 2)


def test_the_bos_text_is_sent_before_the_prompt() -> None:
    """Module docstring: "-M bos=TEXT prepends a BOS token's text (e.g. <|endoftext|>)" to
    what the server tokenises (mutation QA)."""
    backend, sent = _backend(
        lambda body: _echo(["<s>", *TOKENS], [None, -0.1, *LPS[1:]]), logprobs="echo", bos="<s>"
    )
    (r,) = backend.score([ScoreRequest("The sky", " is blue")])
    assert sent[-1]["prompt"] == "<s>The sky is blue"
    assert r.logprob == -6.0


def test_a_first_token_that_spells_more_than_the_bos_is_read() -> None:
    """misspelling: "the first [token] may be unspelled (up to first characters, or its own
    text's length where it has one)": a server that merges the BOS with the next word
    ("<s>The") spells the whole text sent and is read (mutation QA)."""
    backend, _ = _backend(
        lambda body: _echo(["<s>The", " sky", " is", " blue"], [None, -1.0, -2.0, -4.0]),
        logprobs="echo",
        bos="<s>",
    )
    (r,) = backend.score([ScoreRequest("The sky", " is blue")])
    assert r.logprob == -6.0


def test_with_a_bos_only_the_bos_may_go_unspelled() -> None:
    """misspelling / _run_prompts: with -M bos, the first token may stand for the BOS's
    characters only: a reply that spells the text sent but for its first 13 characters (the
    start cut) is a ModelError, not a score (mutation QA)."""
    prefix = "Lorem ipsum " + "dolor sit"
    backend, _ = _backend(
        lambda body: {
            "choices": [
                {"prompt_logprobs": [None, {"9": {"logprob": -1.0, "decoded_token": " is"}}]}
            ],
            "prompt_token_ids": [1, 9],
        },
        logprobs="prompt_logprobs",
        bos="<s>",
    )
    with pytest.raises(ModelError, match="not those of the text sent"):
        backend.score([ScoreRequest(prefix, " is")])


def _pl_reply(entries: list[Any], ids: list[int]) -> dict[str, Any]:
    return {"model": "m", "choices": [{"prompt_logprobs": entries}], "prompt_token_ids": ids}


def test_prompt_logprobs_read_the_prompt_tokens_own_entry_by_its_id() -> None:
    """PromptTokens.ids / _parse_prompt_logprobs: "the prompt token's id: given by the
    server", its log-prob read from its own entry, not the first of the top tokens
    (mutation QA)."""
    entries = [
        None,
        {"7": {"logprob": -1.5, "rank": 2, "decoded_token": " sky"}},
        {
            "1": {"logprob": -0.1, "rank": 1, "decoded_token": " was"},
            "5": {"logprob": -2.5, "rank": 3, "decoded_token": " is"},
        },
    ]
    backend, _ = _backend(lambda body: _pl_reply(entries, [3, 7, 5]), logprobs="prompt_logprobs")
    (r,) = backend.score([ScoreRequest("The sky", " is")])
    assert (r.logprob, r.n_tokens) == (-2.5, 1)
    (st,) = backend.token_stats([ScoreRequest("The sky", " is")])
    assert st.tokens == (5,) and st.logprobs == (-2.5,)
    assert st.greedy == (1,)  # the rank-1 token, not the prompt's


def test_a_greedy_token_the_reply_does_not_name_is_unknown() -> None:
    """PromptTokens.greedy: "Most likely token id at each position, -1 where unknown": an
    entry with no rank-1 token says nothing of the greedy token (exact-match n-grams must not
    count it as predicted) (mutation QA)."""
    entries = [None, {"5": {"logprob": -2.5, "rank": 3, "decoded_token": " sky"}}]
    backend, _ = _backend(lambda body: _pl_reply(entries, [3, 5]), logprobs="prompt_logprobs")
    (st,) = backend.token_stats([ScoreRequest("The", " sky")])
    assert st.tokens == (5,) and st.greedy == (-1,)


def test_a_prompt_longer_than_the_context_scores_nan() -> None:
    """_run_prompts: a 400 whose message says the context length is exceeded is "longer than
    the model's context: NaN, like the local backend" (mutation QA)."""
    backend, _ = _backend(
        lambda body: httpx.Response(
            400, json={"error": {"message": "This model's maximum context length is 2048"}}
        ),
        logprobs="echo",
    )
    (r,) = backend.score([ScoreRequest("The sky", " is blue")])
    assert math.isnan(r.logprob) and r.too_long


def test_auto_mode_falls_back_to_echo_when_prompt_logprobs_are_refused_with_400() -> None:
    """OpenAIBackend._resolve_mode: "auto: use vLLM's prompt_logprobs when the server accepts
    it, else echo" (a server that refuses the field with 400, as OpenAI's own API does)
    (mutation QA)."""

    def reply(body: dict[str, Any]) -> Any:
        if "prompt_logprobs" in body:
            return httpx.Response(400, json={"error": {"message": "unknown field"}})
        return _echo(TOKENS, LPS)

    backend, _ = _backend(reply)
    (r,) = backend.score([ScoreRequest("The sky", " is blue")])
    assert backend.mode == "echo" and r.logprob == -6.0


def test_the_summary_counts_requests_sent_and_retried_apart() -> None:
    """docs/output.md: a served model's summary has ``requests_sent`` and
    ``requests_retried``; ApiClient.sent: "HTTP requests sent so far, retries included",
    .retried: "Requests retried so far": one 503 then a reply is 2 sent, 1 retried (the
    /models request is one more sent) (mutation QA)."""
    calls = {"n": 0}

    def reply(body: dict[str, Any]) -> Any:
        calls["n"] += 1
        return httpx.Response(503) if calls["n"] == 1 else _echo(TOKENS, LPS)

    backend, _ = _backend(reply, logprobs="echo", settings=ApiSettings(backoff=0.0))
    backend.score([ScoreRequest("The sky", " is blue")])
    described = backend.describe()
    assert (described["requests_sent"], described["requests_retried"]) == (3, 1)


def _client(handler: Handler, **settings: Any) -> tuple[ApiClient, list[dict[str, Any]]]:
    client = ApiClient("http://test/v1", ApiSettings(**settings))
    return client, _wired(client, handler)


@pytest.fixture()
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays the client asked for (nothing is slept)."""
    out: list[float] = []
    monkeypatch.setattr(http_client.time, "sleep", out.append)
    return out


def test_a_request_is_tried_retries_plus_one_times(slept: list[float]) -> None:
    """http_client: "a request still failing after retries retries" ends the call: with
    ``retries=2``, 3 attempts, 2 of them retries, and a sleep between attempts only
    (mutation QA)."""
    client, _ = _client(lambda r: httpx.Response(503), retries=2, backoff=0.01)
    with pytest.raises(ServerUnavailable, match="failed after 3 attempts"):
        client.request("POST", "completions", {})
    assert (client.sent, client.retried, len(slept)) == (3, 2, 2)


def test_429_is_retried(slept: list[float]) -> None:
    """http_client: "A request that fails with 429, a 5xx status ... is retried"
    (mutation QA)."""
    replies = iter([httpx.Response(429), httpx.Response(200, json={"ok": 1})])
    client, _ = _client(lambda r: next(replies), backoff=0.01)
    assert client.request("POST", "completions", {}) == {"ok": 1}
    assert (client.sent, client.retried) == (2, 1)


def test_retry_after_is_honoured_up_to_the_cap(slept: list[float]) -> None:
    """http_client: "a server's Retry-After is honoured up to the cap" (30 s): Retry-After 7
    waits 7 s where the backoff alone is far shorter, Retry-After 100 waits 30 s
    (mutation QA)."""
    for after, expected in (("7", 7.0), ("100", 30.0)):
        slept.clear()
        replies = iter(
            [httpx.Response(503, headers={"Retry-After": after}), httpx.Response(200, json={})]
        )
        client, _ = _client(lambda r, it=replies: next(it), backoff=0.01)
        client.request("POST", "completions", {})
        assert slept == [expected]
    # a wait past the cap, still refused: the error says how long the server asked (it said
    # only "HTTP 429: quota", and a user re-ran at once; QA)
    client, _ = _client(
        lambda r: httpx.Response(429, headers={"Retry-After": "3600"}), retries=1, backoff=0.01
    )
    with pytest.raises(ServerUnavailable, match="failed after 2 attempts: HTTP 429") as err:
        client.request("POST", "completions", {})
    assert "(the server asked to wait 3600 s; waits here are at most 30 s" in str(err.value)


def test_a_refused_connection_is_retried_once_a_server_has_answered(slept: list[float]) -> None:
    """ApiClient.request: "first_contact: a connection refused is not retried"; later a
    connection error is retried like any of the moment (mutation QA)."""
    state = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        state["n"] += 1
        if state["n"] == 1:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json={"ok": 1})

    client, _ = _client(handler, backoff=0.01)
    assert client.request("POST", "completions", {}) == {"ok": 1}
    assert (client.sent, client.retried) == (2, 1)
    state["n"] = 0
    with pytest.raises(ServerUnavailable, match="not retried"):
        client.request("GET", "models", first_contact=True)


def test_a_positive_log_prob_in_a_reply_is_a_server_fault() -> None:
    """_run_prompts: a value "where a log-probability (finite, <= 0) belongs" that is not one
    is a ModelError, not a score; CachedScorer._checked: "a value above 1e-4 is not rounding":
    +0.5 is refused (mutation QA)."""
    backend, _ = _backend(lambda body: _echo(TOKENS, [None, -1.0, 0.5, -4.0]), logprobs="echo")
    with pytest.raises(ModelError, match=r"holds 0\.5 where a log-probability"):
        backend.score([ScoreRequest("The sky", " is blue")])
