"""openai: backend against a real loopback server over the tiny model: numbers equal the local
backend; concurrency limit, retries through injected faults, clear final errors, capability
probe refusals."""

from __future__ import annotations

import inspect
import math
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from contamscope.backends import GenerateRequest, Generation, ScoreRequest, load_backend
from contamscope.backends.http_client import ApiClient, ApiSettings
from contamscope.backends.openai_compat import OpenAIBackend, split_continuation
from contamscope.backends.probe import available_methods, check_backend
from contamscope.errors import CapabilityError, ConfigError, ContamscopeWarning, ModelError
from contamscope.store.cache import CachedScorer, ScoreCache

BOS = "<|endoftext|>"
REQUESTS = [
    ScoreRequest("Question: what is 2+2?\nAnswer:", " 4"),
    ScoreRequest("The sky", " is blue today."),
    ScoreRequest("The sk", "y is"),  # a token straddles the boundary
    ScoreRequest("Ein Café in Zürich:", " grüß Gott, naïve façade"),
    ScoreRequest("A. one\nB. two\nAnswer:", " B. two\nA. one"),
]


def backend(url: str, **opts: str) -> OpenAIBackend:
    options = {"bos": BOS, "canary": "structural", **opts}
    b = load_backend(f"openai:{url}#tiny", options=options)
    assert isinstance(b, OpenAIBackend)
    return b


def test_split_continuation_known_answers() -> None:
    assert split_continuation(["<s>", "The", " sky", " is", " blue"], " is blue") == (3, 0)
    assert split_continuation(["The", " sk", "y is"], "s") == (2, 3)
    assert split_continuation(["a", "b"], "") == (2, 0)


@pytest.mark.parametrize("mode", ["echo", "prompt_logprobs"])
def test_scores_equal_local_backend(tiny_server: Any, tiny_backend: Any, mode: str) -> None:
    b = backend(tiny_server.url, logprobs=mode)
    got = b.score(REQUESTS)
    want = tiny_backend.score(REQUESTS)
    for g, w in zip(got, want):
        assert g.n_tokens == w.n_tokens
        assert g.boundary_chars == w.boundary_chars
        assert g.logprob == pytest.approx(w.logprob, abs=1e-3)
    assert want[2].boundary_chars == 3


def test_auto_mode_uses_prompt_logprobs_and_token_stats_match(
    tiny_server: Any, tiny_backend: Any
) -> None:
    b = backend(tiny_server.url)
    got = b.token_stats(REQUESTS)
    assert b.mode == "prompt_logprobs" and b.capabilities.token_stats
    want = tiny_backend.token_stats(REQUESTS)
    for g, w in zip(got, want):
        assert g.tokens == w.tokens and g.greedy == w.greedy
        assert g.logprobs == pytest.approx(w.logprobs, abs=1e-3)
    assert b.decode(list(want[1].tokens)) == tiny_backend.decode(list(want[1].tokens))


def test_generation_completions_and_chat_equal_local(tiny_server: Any, tiny_backend: Any) -> None:
    reqs = [
        GenerateRequest("Hello there", 6),
        GenerateRequest("Say hi", 5, chat=True),
        GenerateRequest("Hello there", 6),  # duplicate: sent once
    ]
    b = backend(tiny_server.url)
    before = tiny_server.stats()["posts"]
    got = b.generate(reqs)
    assert tiny_server.stats()["posts"] - before == 2
    assert got == tiny_backend.generate(reqs)


def test_a_generation_past_the_context_is_marked_as_locally(
    tiny_server: Any, tiny_backend: Any
) -> None:
    """A prompt whose length and max_tokens the server refuses (HTTP 400 naming the context
    length) stopped a CAP run at its first such item; the local backend marks it "context",
    with nothing generated, and CAP leaves the item out (numerical-equivalence QA)."""
    long = "word " * 600
    reqs = [GenerateRequest(long, 8), GenerateRequest(long, 8, chat=True), GenerateRequest("Hi", 3)]
    got = backend(tiny_server.url).generate(reqs)
    assert [g.finish_reason for g in got[:2]] == ["context", "context"]
    assert got[0] == got[1] == Generation("", 0, "context")
    assert got == tiny_backend.generate(reqs)


def test_replies_under_another_model_name_are_said_once_and_counted(
    serve: Any, tiny_server: Any
) -> None:
    """A router answering with a fallback model: said once (scoring and generation alike),
    each name counted in the backend's description (summary.json's model.answered_as)."""
    before = tiny_server.stats()["posts"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ContamscopeWarning)  # the right model: no note
        b = backend(tiny_server.url)
        b.score(REQUESTS[:2])
        b.generate([GenerateRequest("Hello there", 3)])
    assert b.describe()["answered_as"] == {"tiny": tiny_server.stats()["posts"] - before}

    served = serve("--answer-as", "tiny-fallback")
    other = backend(served.url)
    with pytest.warns(ContamscopeWarning) as said:
        other.score(REQUESTS[:2])
        other.generate([GenerateRequest("Hello there", 3), GenerateRequest("Say hi", 3, chat=True)])
    notes = [str(w.message) for w in said if w.category is ContamscopeWarning]
    assert len(notes) == 1, [(w.category, str(w.message)) for w in said]
    assert "answered as model 'tiny-fallback', not 'tiny'" in notes[0]
    assert other.describe()["answered_as"] == {"tiny-fallback": served.stats()["posts"]}
    # said where it was asked for: replies that come in the client's pool threads, whose
    # stacks hold no caller's line, are said in the caller's (they named
    # concurrent/futures/thread.py; diff-review QA)
    pooled = backend(served.url)
    with pytest.warns(ContamscopeWarning) as said:
        pooled.generate([GenerateRequest("Hello there", 3), GenerateRequest("Say hi", 3)])
    asked = inspect.currentframe().f_lineno - 1  # type: ignore[union-attr]
    where = [(w.filename, w.lineno) for w in said if w.category is ContamscopeWarning]
    assert where == [(__file__, asked)]


def test_concurrency_is_bounded_and_used(serve: Any) -> None:
    s = serve("--delay", "0.3")
    b = backend(s.url, max_connections="4", logprobs="echo")
    reqs = [ScoreRequest(f"Item {i}:", f" answer {i}") for i in range(16)]
    t0 = time.perf_counter()
    b.score(reqs)
    wall = time.perf_counter() - t0
    assert s.stats()["max_in_flight"] == 4  # 4 requests at once: the bound, and it is used
    # faster than one at a time (4.8 s); 1.2 s unloaded, but a loaded 2-core machine is slow
    assert wall < 16 * 0.3


def test_retries_through_429_500_dropped_and_slow(serve: Any, tiny_backend: Any) -> None:
    # (badjson: a 200 whose body was cut short ended the run at once; chaos QA)
    s = serve("--faults", "429,500,drop,slow,badjson", "--fault-every", "2", "--slow-seconds", "3")
    b = backend(s.url, logprobs="echo", timeout="1", retries="6", backoff="0.01")
    reqs = REQUESTS * 2 + [ScoreRequest(f"Q{i}:", " yes") for i in range(6)]
    got = b.score(reqs)
    want = tiny_backend.score(reqs)
    assert [g.logprob for g in got] == pytest.approx([w.logprob for w in want], abs=1e-3)
    faults = s.stats()["faults"]
    assert set(faults) == {"429", "500", "drop", "slow", "badjson"}
    assert b.client.retried >= sum(faults.values())


def test_final_error_names_the_request(serve: Any) -> None:
    s = serve("--faults", "500", "--fault-every", "1")
    b = OpenAIBackend(s.url, "tiny", bos=BOS, logprobs="echo")
    b.client.settings = type(b.client.settings)(retries=2, backoff=0.01)
    with pytest.raises(ModelError) as err:
        b.score([ScoreRequest("Which planet?", " Jupiter")])
    msg = str(err.value)
    assert "scoring request 1 of 1" in msg and "Jupiter" in msg
    assert "failed after 3 attempts: HTTP 500: injected internal error" in msg
    assert "\n" not in msg


def test_too_long_prompt_scores_nan_like_local(tiny_server: Any) -> None:
    b = backend(tiny_server.url, logprobs="echo")
    got = b.score([ScoreRequest("word " * 600, " end")])
    assert math.isnan(got[0].logprob) and got[0].too_long


def test_spec_and_option_errors(tiny_server: Any) -> None:
    with pytest.raises(ModelError, match="name the served model after '#'"):
        load_backend(f"openai:{tiny_server.url}")
    with pytest.raises(ModelError, match="must start with http"):
        load_backend("openai:localhost:8000/v1#m")
    with pytest.raises(ModelError, match=r"does not serve model 'gpt-9' \(it serves: tiny\)"):
        load_backend(f"openai:{tiny_server.url}#gpt-9")
    with pytest.raises(ConfigError, match="-M max_batch_tokens: unknown option"):
        load_backend(f"openai:{tiny_server.url}#tiny", options={"max_batch_tokens": "9"})
    with pytest.raises(ConfigError, match="max_connections: must be at least 1"):
        load_backend(f"openai:{tiny_server.url}#tiny", options={"max_connections": "0"})
    # from Python, a value that is not text is said (it was a TypeError deep in the load)
    with pytest.raises(ConfigError, match=r"^-M max_connections=4: backend options are text"):
        load_backend(f"openai:{tiny_server.url}#tiny", options={"max_connections": 4})  # type: ignore[dict-item]
    # nothing listening: said at once (six attempts spent about 16 s before, QA sweep)
    with pytest.raises(ModelError, match=r"cannot reach http://127.0.0.1:9/v1/models: .*Conn"):
        load_backend("openai:http://127.0.0.1:9/v1#m", options={"retries": "5"})
    client = ApiClient("http://127.0.0.1:9/v1", ApiSettings(retries=5, backoff=0))
    with pytest.raises(ModelError, match="is the server running, and is the URL right"):
        client.request("GET", "models", first_contact=True)
    assert (client.sent, client.retried) == (1, 0)
    with pytest.raises(ModelError, match="failed after 6 attempts"):  # once it has answered
        client.request("GET", "models")
    assert (client.sent, client.retried) == (7, 5)
    # the URL without the API's /v1: named, not diagnosed as a chat-only server later
    root = tiny_server.url.removesuffix("/v1")
    with pytest.raises(ModelError, match=f"the API is under /v1; use openai:{root}/v1#tiny$"):
        load_backend(f"openai:{root}#tiny")


def test_a_base_url_holding_a_key_is_refused_without_repeating_it() -> None:
    """`openai:http://alice:sk-...@host/v1?api_key=sk-...#m` was written whole into
    settings.json, summaries, reports, leaderboards and the score cache, and its user and
    password replaced the environment's key as Basic auth (security QA)."""
    from contamscope.backends.openai_compat import OpenAIBackend

    for url in ("http://alice:sk-URL@127.0.0.1:9/v1", "http://127.0.0.1:9/v1?api_key=sk-URL",
                "https://sk-URL@example.org/v1"):  # fmt: skip
        spec, direct = (
            lambda u=url: load_backend(f"openai:{u}#m"),
            lambda u=url: OpenAIBackend(u, "m"),
        )
        for load in (spec, direct):
            with pytest.raises(ModelError, match=r"BASE_URL holds .*\$CONTAMSCOPE_API_KEY") as err:
                load()
            assert "sk-URL" not in str(err.value)
    for spec in ("openai:http://alice:sk-URL@127.0.0.1:9/v1",  # (another check's message)
                 "openai:http://user:sk-URL@[::1/v1#m", "openai:http://[::1/v1?key=sk-URL#m"):  # fmt: skip
        with pytest.raises(ModelError) as err:  # (a bad IPv6 address was a traceback)
            load_backend(spec)
        assert "sk-URL" not in str(err.value)


def test_api_key_from_environment(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    s = serve("--api-key", "sekret")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("CONTAMSCOPE_API_KEY", raising=False)
    with pytest.raises(ModelError, match="HTTP 401: invalid API key"):
        backend(s.url, logprobs="echo").score(REQUESTS[:1])
    monkeypatch.setenv("CONTAMSCOPE_API_KEY", "sekret")
    assert backend(s.url, logprobs="echo").score(REQUESTS[:1])[0].n_tokens == 2
    monkeypatch.setenv("MY_KEY", "sekret")
    monkeypatch.delenv("CONTAMSCOPE_API_KEY")
    b = backend(s.url, logprobs="echo", api_key_env="MY_KEY")
    assert b.score(REQUESTS[:1])[0].n_tokens == 2


def test_fingerprint_is_stable_across_restarts(serve: Any) -> None:
    s = serve()
    first = backend(s.url).fingerprint()
    port = s.port
    s.stop()
    again = serve(port=port)
    assert backend(again.url).fingerprint() == first
    assert backend(again.url, bos="none").fingerprint() != first


# --- capability probe ----------------------------------------------------------------------------


def test_probe_accepts_a_scoring_server(tiny_server: Any) -> None:
    b = backend(tiny_server.url)
    report = check_backend(b, prompt_logprobs=True, method="the permutation test")
    assert report is not None and report.prompt_logprobs and report.mode == "prompt_logprobs"
    assert report.numbers["repeat_max_diff"] < 1e-4
    assert report.numbers["shared_prefix_max_diff"] < 1e-4
    assert available_methods(b.capabilities) == [
        "permutation",
        "BenBench",
        "CAP",
        "membership (loss, min_k, zlib, gap)",
    ]
    # without a BOS token, what scores a text from its first token is not available
    assert available_methods(backend(tiny_server.url, bos="none").capabilities) == [
        "permutation",
        "CAP",
    ]


def test_probe_refuses_random_model_under_full_canary(tiny_server: Any) -> None:
    b = backend(tiny_server.url, canary="full")
    with pytest.raises(CapabilityError) as err:
        check_backend(b, prompt_logprobs=True, method="the permutation test")
    msg = str(err.value)
    assert "does not prefer natural sentences to their shuffled words" in msg
    assert "canary=structural" in msg and msg.endswith("methods this backend can run: CAP")


def test_a_python_run_gets_the_canary_too(tiny_server: Any, tmp_path: Any) -> None:
    """The canary ran only in the commands: from Python, a served model that is no language
    model got a clean bill of health (Algorithm-1 rate 0, gap 0)."""
    from contamscope.data import LoadResult, MCQItem
    from contamscope.pipeline import PermutationConfig, run_permutation
    from contamscope.store import CachedScorer

    item = MCQItem("q", "What is 2+2?", ("3", "4", "5", "6"), answer=1)
    loaded = LoadResult([item], [], "toy", "generic", "h")
    b = backend(tiny_server.url, canary="full")
    with pytest.raises(CapabilityError, match="does not prefer natural sentences"):
        run_permutation(loaded, [item], CachedScorer(b, None), tmp_path / "r", PermutationConfig())
    assert not (tmp_path / "r").exists()


def test_probe_refuses_chat_only_api_but_chat_generation_works(serve: Any) -> None:
    s = serve("--chat-only")
    b = backend(s.url)
    with pytest.raises(CapabilityError) as err:
        check_backend(b, prompt_logprobs=True, method="the permutation test")
    msg = str(err.value)
    assert "chat-only API cannot score given text" in msg
    assert msg.endswith("methods this backend can run: CAP (--chat)")  # (it generated without; QA)
    assert b.chat_only
    check_backend(b, generate=True, method="CAP")
    got = b.generate([GenerateRequest("Hi", 3, chat=True)])
    assert got[0].n_tokens == 3
    # a prompt laid out as given is not sent as chat (its answers, and their cache entries,
    # were a chat-templated prompt's: QA): one line that asks for --chat
    with pytest.raises(ModelError, match="CAP does with --chat"):
        b.generate([GenerateRequest("Hi", 3)])


def test_a_refused_key_or_a_dead_server_is_no_missing_capability(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 401, or a server that stops answering, said "cannot return prompt log-probs ...
    methods this backend can run: CAP", which then failed the same way: it is one line about
    the key or the server, and no method is offered in its place."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("CONTAMSCOPE_API_KEY", "wrong")
    keyed = serve("--api-key", "sekret")
    with pytest.raises(ModelError) as err:
        check_backend(backend(keyed.url), prompt_logprobs=True, method="the permutation test")
    msg = str(err.value)
    assert not isinstance(err.value, CapabilityError) and "\n" not in msg
    assert "refused the request (HTTP 401: invalid API key)" in msg and "api_key_env" in msg
    assert "can run" not in msg
    for faults in (["--die-after", "0"], ["--faults", "500", "--fault-every", "1"]):
        b = backend(serve(*faults).url, retries="1", backoff="0.01")
        with pytest.raises(ModelError) as err:
            check_backend(b, prompt_logprobs=True, method="the permutation test")
        msg = str(err.value)
        assert not isinstance(err.value, CapabilityError) and "can run" not in msg, faults
        assert "the server did not answer the check request (failed after 2 attempts" in msg
        assert msg.endswith("once it answers again, re-run the command"), msg


def test_probe_names_a_canary_echoed_as_another_text_as_such(serve: Any) -> None:
    """It was said as "does not return a log-prob for every prompt token" (chaos QA)."""
    b = backend(serve("--corrupt", "other_text", "--corrupt-when", "Berlin").url)
    with pytest.raises(CapabilityError) as err:
        check_backend(b, prompt_logprobs=True, method="the permutation test")
    assert "the server's prompt tokens are not those of the text sent" in str(err.value)
    assert "llama.cpp" not in str(err.value)


def test_probe_refuses_generated_token_logprobs_only(serve: Any) -> None:
    s = serve("--generated-logprobs-only", "--no-prompt-logprobs")
    b = backend(s.url)
    with pytest.raises(CapabilityError, match="llama.cpp return log-probs of generated tokens"):
        check_backend(b, prompt_logprobs=True, method="the permutation test")


def test_echo_only_server_scores_but_refuses_token_stats(serve: Any) -> None:
    s = serve("--no-prompt-logprobs")
    b = backend(s.url)
    check_backend(b, prompt_logprobs=True, method="the permutation test")
    assert b.mode == "echo"
    with pytest.raises(CapabilityError, match="needs per-token log-probs.*methods this backend"):
        check_backend(b, prompt_logprobs=True, token_stats=True, method="BenBench")
    with pytest.raises(CapabilityError, match="through echo only, without the greedy predictions"):
        check_backend(b, prompt_logprobs=True, token_stats=True, method="BenBench")


def test_a_server_without_prompt_log_probs_is_refused_saying_so_once(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that generates but sends no log-probs at all was refused with "the server
    returned no prompt log-probs (openai:...: the server returned no prompt log-probs (echo
    mode))" (HTTP QA)."""
    b = backend(serve().url, logprobs="echo")
    monkeypatch.setattr(b, "_prompt_tokens", lambda *a, **k: None)  # (a reply without them)
    with pytest.raises(CapabilityError) as err:
        check_backend(b, prompt_logprobs=True, method="the permutation test")
    msg = str(err.value)
    assert msg.count("no prompt log-probs") == 1 and "(echo mode)" in msg, msg
    assert msg.count(b.spec) == 1 and "methods this backend can run: CAP" in msg, msg


def test_echo_only_server_gives_token_logprobs_without_ids(
    serve: Any, tiny_backend: Any, tmp_path: Path
) -> None:
    """Echo gives each prompt token's log-prob but not its id: per-token log-probs equal the
    local backend's with -1 for every id, so the membership test runs (its statistics need the
    log-probs only) while BenBench (ids) and Min-K%++ (the vocabulary) are refused. The id-less
    results are cached apart: the same model later served with ids is never handed -1."""
    s = serve("--no-prompt-logprobs")
    b = backend(s.url)
    check_backend(
        b, prompt_logprobs=True, token_logprobs=True, from_start=True, method="the membership test"
    )
    assert b.mode == "echo" and b.capabilities.token_logprobs and not b.capabilities.token_stats
    assert available_methods(b.capabilities) == [
        "permutation",
        "CAP",
        "membership (loss, min_k, zlib, gap)",
    ]
    with pytest.raises(CapabilityError, match="vocabulary.*e.g. --statistic min_k"):
        check_backend(b, token_stats=True, vocab_stats=True, method="Min-K%++")
    want = tiny_backend.token_stats(REQUESTS)
    cache = ScoreCache(tmp_path / "cache.sqlite")
    got = CachedScorer(b, cache).token_stats(REQUESTS)
    for g, w in zip(got, want, strict=True):
        assert g.logprobs == pytest.approx(w.logprobs, abs=1e-3)
        assert g.tokens == g.greedy == (-1,) * len(w.tokens)
        assert g.boundary_chars == w.boundary_chars
    first = b.fingerprint()
    port = s.port
    s.stop()
    full = backend(serve(port=port).url)
    check_backend(full, prompt_logprobs=True, token_stats=True, method="BenBench")
    assert full.fingerprint() == first and full.capabilities.token_stats
    again = CachedScorer(full, cache).token_stats(REQUESTS)
    assert [g.tokens for g in again] == [w.tokens for w in want]
    assert [g.greedy for g in again] == [w.greedy for w in want]


_GARBAGE = {  # replies that are JSON but not shaped like OpenAI's API
    "choices_str": {"choices": "oops"},
    "choices_list_str": {"choices": ["oops"]},
    "pl_badkeys": {"choices": [{"text": "x", "prompt_logprobs": [None, {"abc": {"logprob": -1}}]}]},
    "pl_mismatch": {
        "choices": [
            {
                "text": "x",
                "prompt_logprobs": [None, {"5": {"logprob": -1.0, "rank": 1}}],
                "prompt_token_ids": [1, 7],
            }
        ]
    },
    "echo_strvals": {
        "choices": [
            {"text": "x", "logprobs": {"tokens": ["a", "b"], "token_logprobs": [None, "bad"]}}
        ]
    },
}


_GENERATIONS = {
    "notext": {"choices": [{"index": 0, "finish_reason": "stop"}]},
    "emptytext": {"choices": [{"text": "", "message": {"content": ""}}]},
    "refusal": {"choices": [{"message": {"content": None, "refusal": "I cannot help."}}]},
    "nullcontent": {  # a reasoning model out of tokens before its answer
        "choices": [
            {"text": None, "message": {"content": None, "reasoning_content": "Let me think"}}
        ]
    },
}
"""Generation replies: without the text, with an empty one, a chat model's refusal."""


@pytest.fixture()
def garbage_server() -> Any:
    """``url(mode)``: a local HTTP server whose /models is fine or a JSON list, and whose
    /completions answers with ``_GARBAGE[mode]``."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            mode = self.path.split("/")[1]
            self._send([{"id": "m"}] if mode == "models_list" else {"data": [{"id": "m"}]})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._send({**_GARBAGE, **_GENERATIONS}.get(self.path.split("/")[1], {"ok": True}))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield lambda mode: f"http://127.0.0.1:{server.server_address[1]}/{mode}/v1"
    server.shutdown()


def test_replies_not_in_the_api_format_are_one_line_errors(garbage_server: Any) -> None:
    """A /models list instead of an object, string choices, prompt_logprobs with non-numeric
    keys or without the prompt token, echo log-probs that are not numbers: each was a Python
    traceback (AttributeError, KeyError, ValueError); now one ModelError / CapabilityError."""
    from contamscope.errors import ContamscopeError

    with pytest.raises(ModelError, match="the reply is a JSON list, not an object"):
        load_backend(f"openai:{garbage_server('models_list')}#m", options={"retries": "0"})
    for mode in _GARBAGE:
        b = load_backend(f"openai:{garbage_server(mode)}#m", options={"retries": "0", "bos": "X"})
        with pytest.raises(ContamscopeError, match="not in the OpenAI API's format"):
            b.prompt_tokens("Hello there.")


def test_a_generation_reply_without_choices_is_an_error(garbage_server: Any) -> None:
    """A reply without choices was read as an empty answer: CAP finished "no evidence", rc 0."""
    b = load_backend(f"openai:{garbage_server('nochoices')}#m", options={"retries": "0"})
    for chat in (False, True):
        with pytest.raises(ModelError, match=r"reply has no choices \({'ok': True}\)"):
            b.generate([GenerateRequest("Hi", 3, chat=chat)])
    # nor a choice without its text: a third of a run's answers were read as "said nothing"
    b = load_backend(f"openai:{garbage_server('notext')}#m", options={"retries": "0"})
    for chat, field in ((False, "text"), (True, "message")):
        with pytest.raises(ModelError, match=f"reply has no {field} \\(a choice without"):
            b.generate([GenerateRequest("Hi", 3, chat=chat)])
    b = load_backend(f"openai:{garbage_server('emptytext')}#m", options={"retries": "0"})
    got = b.generate([GenerateRequest("Hi", 3, chat=c) for c in (False, True)])
    assert [g.text for g in got] == ["", ""]  # an empty answer is an answer
    b = load_backend(f"openai:{garbage_server('refusal')}#m", options={"retries": "0"})
    assert b.generate([GenerateRequest("Hi", 3, chat=True)])[0].text == "I cannot help."
    # a null text is an empty answer, not a reply out of format that stops the run (review)
    b = load_backend(f"openai:{garbage_server('nullcontent')}#m", options={"retries": "0"})
    got = b.generate([GenerateRequest("Hi", 3, chat=c) for c in (False, True)])
    assert [g.text for g in got] == ["", ""]


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"timeout": "abc"}, "-M timeout=abc: expected a number"),
        ({"max_connections": "2.5"}, "-M max_connections=2.5: expected a whole number"),
        ({"timeout": "nan"}, "-M timeout: must be a positive number of seconds"),
        ({"backoff": "inf"}, "-M backoff: must be a number of seconds, 0 or more"),
        ({"retries": "-1"}, "-M retries: must not be negative"),
    ],
)
def test_connection_options_name_the_bad_one(opts: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        ApiSettings.from_options(dict(opts))
    assert str(err.value) == message


def test_an_api_key_no_header_can_carry_is_one_line_without_the_key(
    tiny_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key with a non-ASCII character was a UnicodeEncodeError traceback; one with a trailing
    space was retried six times as "cannot reach" and printed whole. Both are refused before
    any request, naming the variable and never the key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for key, what in (
        ("sk-sécret", "a non-ASCII character (U+00E9)"),
        ("sk-secret-123 ", "a space"),
        ("sk-secret\n", "a line break"),
    ):
        monkeypatch.setenv("CONTAMSCOPE_API_KEY", key)
        with pytest.raises(ConfigError) as err:
            backend(tiny_server.url)
        msg = str(err.value)
        assert msg.startswith(f"$CONTAMSCOPE_API_KEY: the API key holds {what}"), msg
        assert "sk-" not in msg and "\n" not in msg
    monkeypatch.setenv("MY_KEY", "")
    with pytest.raises(ConfigError, match="-M api_key_env=MY_KEY: that variable is empty"):
        backend(tiny_server.url, api_key_env="MY_KEY")


def test_a_refused_key_names_where_it_came_from(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The advice for a 401 said to put the key in $CONTAMSCOPE_API_KEY or name a variable with
    -M api_key_env, when the key had come from the variable -M api_key_env named; and a 401 in
    a generation (CAP: no canary) gave no advice at all."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("CONTAMSCOPE_API_KEY", "sekret")
    monkeypatch.setenv("MY_KEY", "bad")
    keyed = serve("--api-key", "sekret")
    b = backend(keyed.url, api_key_env="MY_KEY")
    with pytest.raises(ModelError) as err:
        check_backend(b, prompt_logprobs=True, method="the permutation test")
    assert str(err.value).endswith(
        "the key in $MY_KEY (-M api_key_env) was refused: set the right key there"
    )
    with pytest.raises(ModelError) as err:
        b.generate([GenerateRequest("Hi", 2)])
    assert "HTTP 401" in str(err.value) and "the key in $MY_KEY" in str(err.value)
    monkeypatch.delenv("CONTAMSCOPE_API_KEY")
    with pytest.raises(ModelError) as err:
        backend(keyed.url).generate([GenerateRequest("Hi", 2)])
    assert str(err.value).endswith("name the variable that holds it with -M api_key_env=VAR")


def test_a_server_lost_during_the_canary_is_named_as_such(serve: Any) -> None:
    """Dying after the canary's first requests gave a bare "failed after 2 attempts" line."""
    for answered in ("2", "3"):  # the repeat, the shared-prefix request
        b = backend(serve("--die-after", answered).url, retries="1", backoff="0.01")
        with pytest.raises(ModelError) as err:
            check_backend(b, prompt_logprobs=True, method="the permutation test")
        msg = str(err.value)
        assert msg.startswith(f"{b.spec}: the server did not answer a check request (failed"), msg


def test_a_bos_the_server_splits_is_refused(tiny_server: Any) -> None:
    """-M bos='</s>' (not a special token of this tokenizer) was sent as three tokens of text
    before every prompt: each score changed by up to 2 nats, with no word."""
    for mode in ("echo", "prompt_logprobs"):
        with pytest.raises(ConfigError) as err:
            check_backend(
                backend(tiny_server.url, bos="</s>", logprobs=mode),
                prompt_logprobs=True,
                method="the permutation test",
            )
        first = "'</'" if mode == "echo" else "'…'"  # vLLM's mode has no first token's text
        assert str(err.value).startswith(
            f"-M bos=</s>: the server reads it as 3 tokens ({first}, 's', '>'), text rather"
        )
    check_backend(backend(tiny_server.url), prompt_logprobs=True, method="the permutation test")


def test_a_base_url_that_is_no_api_root_says_so(tiny_server: Any, serve: Any) -> None:
    """A path under the host that is not the API (or an endpoint's URL) read as a chat-only
    API, with a suggested fix that appended /v1 to a URL ending in /v1/completions."""
    root = tiny_server.url.removesuffix("/v1")
    with pytest.raises(ModelError) as err:
        load_backend(f"openai:{tiny_server.url}/completions#tiny", options={"bos": BOS})
    assert str(err.value).endswith(
        f"BASE_URL is the API's root, not an endpoint (without /completions: "
        f"openai:{tiny_server.url}#tiny)"
    )
    b = backend(f"{root}/api/v1")
    with pytest.raises(ModelError) as err:
        check_backend(b, prompt_logprobs=True, method="the permutation test")
    assert f"the server has neither {root}/api/v1/models nor {root}/api/v1/completions" in str(
        err.value
    )
    assert not isinstance(err.value, CapabilityError)
    # a forced vLLM mode on a server without it: leave the option out
    b = backend(serve("--no-prompt-logprobs").url, logprobs="prompt_logprobs")
    with pytest.raises(CapabilityError) as err:
        check_backend(b, prompt_logprobs=True, method="the permutation test")
    assert "-M logprobs=prompt_logprobs asks for vLLM's prompt_logprobs" in str(err.value)


@pytest.mark.parametrize(
    ("corrupt", "said"),
    [
        ("nan", "holds nan where a log-probability (finite, <= 0) belongs"),
        ("ninf", "holds -inf where a log-probability (finite, <= 0) belongs"),
        ("positive", "where a log-probability (finite, <= 0) belongs"),
        ("error200", "the server answered with an error: internal failure"),
        # the tokens of another text, one fewer or more, the start cut: each was summed as the
        # continuation's score, exit 0, and cached (chaos QA)
        ("other_text", "tokens are not those of the text sent (they end"),
        ("fewer", "tokens are not those of the text sent (they end"),
        ("more", "tokens are not those of the text sent (they end"),
        ("cut", "characters (the start cut?)"),
    ],
)
def test_a_reply_that_is_no_log_probability_is_a_server_fault_not_a_score(
    serve: Any, corrupt: str, said: str
) -> None:
    """Only the canary's replies were checked: a NaN after it read as 'longer than the
    context' and was kept on resume, a positive value moved ranks and flags, and an error body
    sent with status 200 said only 'no prompt log-probs' (QA)."""
    s = serve("--corrupt", corrupt, "--corrupt-when", "zebra")
    for mode in ("echo", "prompt_logprobs"):
        b = backend(s.url, logprobs=mode)
        check_backend(b, prompt_logprobs=True, method="the permutation test")  # canary: clean
        ok = b.score([ScoreRequest("The sky is", " blue")])
        assert ok[0].logprob < 0
        long = "The zebra is " + "a horse with stripes, they say; " * 6  # (its start cut)
        with pytest.raises(ModelError) as err:
            b.score([ScoreRequest(long, " striped")])
        msg = str(err.value)
        assert said in msg and "scoring request 1 of 1" in msg, msg


def test_a_missing_token_log_prob_is_an_error_in_token_stats_too(serve: Any) -> None:
    """A null log-prob became NaN in token stats: BenBench left the version out as "a
    numerical overflow? try --dtype float32" (refused for openai:) and exited 0 (chaos QA)."""
    s = serve("--corrupt", "null", "--corrupt-when", "zebra")
    b = backend(s.url, logprobs="echo")
    check_backend(b, prompt_logprobs=True, method="the permutation test")
    assert b.token_stats([ScoreRequest("The sky is", " blue")])[0].logprobs[0] < 0
    with pytest.raises(CapabilityError, match="returned no log-prob for a prompt token"):
        b.token_stats([ScoreRequest("The zebra is", " striped")])


def test_a_server_lost_in_a_detokenize_request_is_said_as_any_request(serve: Any) -> None:
    """BenBench's /detokenize failures were a bare "failed after 1 attempts" (chaos QA)."""
    b = backend(serve("--die-after", "0").url, retries="0")
    with pytest.raises(ModelError) as err:
        b.decode([1, 2, 3])
    msg = str(err.value)
    assert msg.startswith(f"{b.base_url}: a /detokenize request failed: failed after 1 "), msg
    assert msg.endswith("once the server answers again, the same run resumes"), msg


def test_a_key_the_server_quotes_back_is_not_repeated(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 401 whose message quoted the key sent printed it in full (chaos QA)."""
    s = serve("--api-key", "right", "--echo-key")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("CONTAMSCOPE_API_KEY", "sk-WRONG123")
    with pytest.raises(ModelError) as err:
        backend(s.url, logprobs="echo").generate([GenerateRequest("Hi", 2)])
    assert "invalid API key: Bearer ***" in str(err.value), err.value
    assert "sk-WRONG123" not in str(err.value)
    monkeypatch.setenv("CONTAMSCOPE_API_KEY", "e")  # a key inside words: only as a word
    with pytest.raises(ModelError) as err:
        backend(s.url, logprobs="echo").generate([GenerateRequest("Hi", 2)])
    assert "invalid API key: Bearer ***" in str(err.value), err.value


def test_a_prompt_cut_shorter_than_64_characters_is_caught_with_a_bos(serve: Any) -> None:
    """With -M bos only the BOS may go unspelled: a start cut of up to 64 characters passed,
    and one reaching the continuation was said as a missing capability (review QA)."""
    s = serve("--corrupt", "cut", "--corrupt-when", "zebra")
    for mode in ("echo", "prompt_logprobs"):
        b = backend(s.url, logprobs=mode)
        check_backend(b, prompt_logprobs=True, method="the permutation test")
        for prefix in ("Is a zebra striped?", "The zebra is a horse with stripes, they say;"):
            with pytest.raises(ModelError, match=r"\(the start cut\?\)"):
                b.score([ScoreRequest(prefix, " yes")])


def test_a_start_cut_into_the_continuation_is_said_without_a_bos_too(serve: Any) -> None:
    """Without -M bos a cut of the prompt's start under 64 characters that reached into the
    continuation was "the server returned no log-prob ...; it cannot score text", of a server
    that had passed the canary (review QA)."""
    s = serve("--corrupt", "cut", "--corrupt-when", "Zq")
    for mode in ("echo", "prompt_logprobs"):
        b = backend(s.url, logprobs=mode, bos="none")
        check_backend(b, prompt_logprobs=True, method="the permutation test")
        with pytest.raises(ModelError, match=r"fewer than the continuation's .*start cut\?"):
            b.score([ScoreRequest("Zq?", "\nA: red\nB: blue\nC: green\nD: pink\n")])


def test_a_redirect_is_said_with_its_address_not_read_as_the_reply() -> None:
    """A 301 whose body was JSON was read as the reply: the run was refused as "no prompt
    log-probs" (review QA)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Moved(BaseHTTPRequestHandler):
        location = ""

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            data = json.dumps({"detail": "moved"}).encode()
            self.send_response(301)
            if Moved.location:
                self.send_header("Location", Moved.location)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Moved)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    root = f"http://127.0.0.1:{server.server_address[1]}"
    said = {  # Location -> the advice (a relative one resolved; the BASE_URL it points to)
        "http://elsewhere:8000/v1/completions": "a redirect to http://elsewhere:8000/v1/"
        "completions: give http://elsewhere:8000/v1 as BASE_URL",
        "/v2/completions": f"a redirect to {root}/v2/completions: give {root}/v2 as BASE_URL",
        "/login": f"a redirect to {root}/login: check BASE_URL",
        "": "a redirect that names no address: check BASE_URL",
    }
    try:
        for location, advice in said.items():
            Moved.location = location
            client = ApiClient(f"{root}/v1", ApiSettings())
            with pytest.raises(ModelError) as err:
                client.request("POST", "completions", {"prompt": "x"})
            assert str(err.value) == f"{root}/v1/completions: HTTP 301, {advice}"
            assert client.sent == 1  # said at once, not retried
    finally:
        server.shutdown()


def test_notes_of_pool_jobs_come_in_the_jobs_order_and_leave_a_failure_standing() -> None:
    """Notes said in the client's pool threads are said in the caller's thread, in the jobs'
    order (they came in the order the jobs ended), once each; a job's failure stands, even
    where notes are errors (a note raised while the ModelError went out and replaced it;
    diff-review QA)."""
    from contamscope.errors import note

    client = ApiClient("http://127.0.0.1:9/v1", ApiSettings(max_connections=3))

    def job(i: int) -> int:
        time.sleep(0.05 * (2 - i))  # job 2 ends first
        note(f"note {i}")
        note("said once")
        if i == 1 and failing:
            raise RuntimeError("HTTP 500: server crashed")
        return i

    failing = False
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert client.map(job, [0, 1, 2], lambda i: f"request {i}") == [0, 1, 2]
    assert [str(w.message) for w in said] == ["note 0", "said once", "note 1", "note 2"]
    assert {w.filename for w in said} == {__file__}
    failing = True
    with warnings.catch_warnings():
        warnings.simplefilter("error", ContamscopeWarning)
        with pytest.raises(ModelError, match=r"request 1 failed: HTTP 500: server crashed"):
            client.map(job, [0, 1, 2], lambda i: f"request {i}")


def test_a_sweep_refuses_a_base_url_holding_a_key_before_it_names_it(tmp_path: Any) -> None:
    """A sweep named such a spec in its plan, progress and board ("left out: ... openai:http://
    user:s3cretpw@...", security QA): it is refused with the other spec checks, unrepeated."""
    from cli_runner import run_cli

    res = run_cli(
        "sweep", "--models", "openai:http://user:s3cretpw@127.0.0.1:9/v1#gpt,smollm2",
        "--benchmarks", "mmlu", "--limit", "2", "--dry-run", "-o", "sw", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2 and "BASE_URL holds a user name or password" in res.stderr
    assert "s3cretpw" not in res.stdout + res.stderr and not (tmp_path / "sw").exists()


def test_a_server_that_ignores_max_tokens_and_stop_is_said_and_its_cut_answers_stopped(
    serve: Any, tiny_backend: Any
) -> None:
    """A server that ignored max_tokens and the stop string: its answers, cut at the stop
    string here, were recorded as "length" (CAP counted them truncated: 3 of 3, where the local
    backend says "stop"), and the 300 tokens for a request of 8 went unsaid (QA)."""
    whole = tiny_backend.generate([GenerateRequest("Hello there", 24)])[0].text
    stop = whole[len(whole) // 2 : len(whole) // 2 + 3]
    assert stop and stop in whole
    served = serve("--ignore-limits", "24")
    b = backend(served.url)
    with pytest.warns(ContamscopeWarning) as said:
        got = b.generate(
            [GenerateRequest("Hello there", 4, stop=(stop,)), GenerateRequest("Hi", 4)]
        )
    notes = [str(w.message) for w in said if w.category is ContamscopeWarning]
    assert len(notes) == 1 and "returned 24 tokens for a request of at most 4" in notes[0]
    assert got[0].text == whole[: whole.index(stop)] and got[0].finish_reason == "stop"
    assert (got[1].n_tokens, got[1].finish_reason) == (24, "length")  # no stop string: as said
