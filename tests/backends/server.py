"""A real OpenAI-compatible HTTP server over a local transformers model, for tests.

Run as a process: ``python tests/backends/server.py --model PATH [--name NAME] [faults]``; it
prints ``READY <port>`` once it listens on 127.0.0.1. It implements what contamscope uses of the
vLLM server: ``GET /v1/models``, ``POST /v1/completions`` (``echo`` + ``logprobs`` with
``text_offset``/``top_logprobs``, vLLM's ``prompt_logprobs``, greedy generation with ``stop``),
``POST /v1/chat/completions``, ``POST /detokenize``, and ``GET /stats`` (request counts and the
most requests seen in flight at once, in all and per path).

Faults: ``--faults 429,500,drop,slow,badjson --fault-every N`` answers every N-th POST with the
next fault in that cycle (``drop`` closes the connection without an answer, ``slow`` sleeps
``--slow-seconds`` first, ``badjson`` sends a 200 whose JSON body is cut short); ``--die-after N`` kills the process on the N+1-th POST; modes
``--api-key KEY`` (401 without it), ``--chat-only`` (no /v1/completions), ``--generated-logprobs-only`` (llama.cpp: ignores echo and
gives log-probs of generated tokens only), ``--no-prompt-logprobs`` (rejects that parameter,
like api.openai.com). ``--corrupt MODE --corrupt-when TEXT``: completions
replies to prompts containing TEXT carry a NaN, -inf, null or positive "log-prob", are an error
body sent with status 200, or hold the tokens of another text, one token fewer or more, or lack
the prompt's first half (``other_text``, ``fewer``, ``more``, ``cut``): a faulty server after the
canary, whose prompts do not contain TEXT. ``--echo-key``: a 401 quotes the key it was sent.
``--lp-offset X``: X added to every prompt log-prob (another model served under the same name).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


class Model:
    """The served model: full-sequence forward passes in float32, one at a time."""

    def __init__(self, path: str) -> None:
        self.tok = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        self.lock = threading.Lock()
        self.max_len = int(getattr(self.model.config, "max_position_embeddings", 2048))

    def encode(self, text: str) -> tuple[list[int], list[str], list[int]]:
        """Token ids, their strings (which concatenate to ``text``) and character offsets."""
        enc = self.tok(text, add_special_tokens=True, return_offsets_mapping=True)
        ids = list(enc["input_ids"])
        starts = [s for s, _ in enc["offset_mapping"]]
        ends = starts[1:] + [len(text)]
        return ids, [text[s:e] for s, e in zip(starts, ends)], starts

    def prompt_logprobs(self, ids: list[int]) -> tuple[list[float], list[int], list[float]]:
        """log p of each token after the first, the argmax token and its log p."""
        with self.lock, torch.inference_mode():
            logits = self.model(torch.tensor([ids])).logits[0].float()
        lsm = torch.log_softmax(logits[:-1], -1)
        own = lsm.gather(-1, torch.tensor(ids[1:])[:, None]).squeeze(-1)
        best_lp, best = lsm.max(-1)
        return own.tolist(), best.tolist(), best_lp.tolist()

    def generate(self, ids: list[int], max_new: int, stop: list[str]) -> tuple[list[int], str, str]:
        with self.lock, torch.inference_mode():
            out = self.model.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=max_new,
                do_sample=False,
                pad_token_id=self.tok.eos_token_id,
                eos_token_id=self.tok.eos_token_id,
            )
        new = out[0, len(ids) :].tolist()
        eos = self.tok.eos_token_id
        reason = "length"
        if eos in new:
            new, reason = new[: new.index(eos)], "stop"
        text = self.tok.decode(new, skip_special_tokens=True)
        hits = [text.find(s) for s in stop if s and s in text]
        if hits:
            text, reason = text[: min(hits)], "stop"
        return new, text, reason


class State:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lock = threading.Lock()
        self.posts = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.path_in_flight: dict[str, int] = {}
        self.max_path_in_flight: dict[str, int] = {}
        self.faults_sent: dict[str, int] = {}
        cycle = [f for f in (args.faults or "").split(",") if f]
        self.fault_cycle = itertools.cycle(cycle) if cycle else None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"object": "error", "message": message, "code": status})

    def do_GET(self) -> None:
        st = self.server.state
        if self.path == "/v1/models":
            self._send(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": st.args.name,
                            "object": "model",
                            "created": int(time.time()),
                            "owned_by": "contamscope-test",
                            "root": st.args.model,
                            "max_model_len": self.server.model.max_len,
                        }
                    ],
                },
            )
        elif self.path == "/stats":
            with st.lock:
                self._send(
                    200,
                    {
                        "posts": st.posts,
                        "max_in_flight": st.max_in_flight,
                        "max_in_flight_by_path": st.max_path_in_flight,
                        "faults": st.faults_sent,
                    },
                )
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        st = self.server.state
        length = int(self.headers.get("Content-Length", "0"))
        req = json.loads(self.rfile.read(length) or b"{}")
        with st.lock:
            st.posts += 1
            n = st.posts
            st.in_flight += 1
            st.max_in_flight = max(st.max_in_flight, st.in_flight)
            here = st.path_in_flight[self.path] = st.path_in_flight.get(self.path, 0) + 1
            st.max_path_in_flight[self.path] = max(st.max_path_in_flight.get(self.path, 0), here)
            fault = None
            if st.fault_cycle is not None and n % st.args.fault_every == 0:
                fault = next(st.fault_cycle)
                st.faults_sent[fault] = st.faults_sent.get(fault, 0) + 1
        try:
            if st.args.api_key and self.headers.get("Authorization") != f"Bearer {st.args.api_key}":
                sent = f": {self.headers.get('Authorization')}" if st.args.echo_key else ""
                return self._error(401, f"invalid API key{sent}")
            if st.args.die_after is not None and n > st.args.die_after:
                os._exit(17)
            if st.args.delay:
                time.sleep(st.args.delay)
            if fault == "429":
                return self._send(429, {"message": "rate limited"}, {"Retry-After": "0"})
            if fault == "500":
                return self._error(500, "injected internal error")
            if fault == "badjson":  # a body cut short on the way
                data = b'{"choices": [{"te'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return None
            if fault == "drop":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return None
            if fault == "slow":
                time.sleep(st.args.slow_seconds)
            self._route(req)
        finally:
            with st.lock:
                st.in_flight -= 1
                st.path_in_flight[self.path] -= 1

    def _route(self, req: dict[str, Any]) -> None:
        args = self.server.state.args
        if req.get("model") != args.name and self.path != "/detokenize":
            return self._error(404, f"The model `{req.get('model')}` does not exist.")
        if self.path == "/v1/completions" and not args.chat_only:
            return self._completions(req)
        if self.path == "/v1/chat/completions":
            return self._chat(req)
        if self.path == "/detokenize":
            text = self.server.model.tok.decode(req.get("tokens", []))
            return self._send(200, {"prompt": text})
        return self._error(404, f"no route {self.path}")

    def _completions(self, req: dict[str, Any]) -> None:
        args = self.server.state.args
        m = self.server.model
        prompt = req.get("prompt", "")
        if not isinstance(prompt, str):
            return self._error(400, "this test server takes one prompt string")
        if "prompt_logprobs" in req and args.no_prompt_logprobs:
            return self._error(400, "Unrecognized request argument supplied: prompt_logprobs")
        corrupt = args.corrupt if args.corrupt_when and args.corrupt_when in prompt else None
        if corrupt == "error200":
            return self._send(200, {"error": {"message": "internal failure", "code": 500}})
        ids, texts, starts = m.encode(prompt)
        max_tokens = int(req.get("max_tokens", 16))
        if len(ids) + max_tokens > m.max_len:
            return self._error(
                400,
                f"This model's maximum context length is {m.max_len} tokens. However, you "
                f"requested {len(ids) + max_tokens} tokens.",
            )
        if args.ignore_limits:  # a server that ignores max_tokens and stop
            new, text, _ = m.generate(ids, args.ignore_limits, [])
            reason = "length"
        else:
            new, text, reason = m.generate(ids, max_tokens, list(req.get("stop") or []))
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": reason}
        echo = bool(req.get("echo")) and not args.generated_logprobs_only
        top = req.get("logprobs")
        want_prompt = req.get("prompt_logprobs") is not None or (echo and top is not None)
        if want_prompt:
            own, best, best_lp = m.prompt_logprobs(ids)
            if args.lp_offset:  # another model behind the same name
                own = [x + args.lp_offset for x in own]
            if corrupt == "nan":
                own[-1] = float("nan")
            elif corrupt == "ninf":  # (json writes -Infinity, which Python reads back)
                own[-1] = float("-inf")
            elif corrupt == "null":
                own[-1] = None  # type: ignore[call-overload]
            elif corrupt == "positive":
                own = [abs(x) + 0.5 for x in own]
            elif corrupt == "other_text":  # the tokens of another text than the one sent
                texts = texts[:-2] + ["horse" + texts[-2]] + texts[-1:]
            elif corrupt in ("fewer", "more", "cut"):  # a token lost, doubled; the start cut
                k = len(ids) // 2
                cut = slice(k, k + 1) if corrupt == "fewer" else slice(1, k)
                if corrupt == "more":
                    ids.insert(k, ids[k]), texts.insert(k, texts[k]), starts.insert(k, starts[k])
                    own.insert(k - 1, own[k - 1]), best.insert(k - 1, best[k - 1])
                    best_lp.insert(k - 1, best_lp[k - 1])
                else:
                    del ids[cut], texts[cut], starts[cut]
                    shifted = slice(cut.start - 1, cut.stop - 1)
                    del own[shifted], best[shifted], best_lp[shifted]
        if req.get("prompt_logprobs") is not None:
            k = int(req["prompt_logprobs"])
            entries: list[Any] = [None]
            for i in range(1, len(ids)):
                e = {
                    str(ids[i]): {
                        "logprob": own[i - 1],
                        "rank": 1 if best[i - 1] == ids[i] else 2,
                        "decoded_token": texts[i],
                    }
                }
                if k >= 1 and best[i - 1] != ids[i]:
                    e[str(best[i - 1])] = {
                        "logprob": best_lp[i - 1],
                        "rank": 1,
                        "decoded_token": m.tok.decode([best[i - 1]]),
                    }
                entries.append(e)
            choice["prompt_logprobs"] = entries
            choice["prompt_token_ids"] = ids
        if top is not None:
            gen_texts = [m.tok.decode([t]) for t in new]
            if echo:
                choice["text"] = prompt + text
                toks = texts + gen_texts
                lps: list[float | None] = [None] + own
                offs = list(starts)
                tops: list[Any] = [None] + [{m.tok.decode([b]): lp} for b, lp in zip(best, best_lp)]
            else:
                toks, lps, offs, tops = list(gen_texts), [], [], []
            pos = len(prompt)
            with torch.inference_mode():  # generated tokens' log-probs
                full = ids + new
                if new:
                    own2, best2, best_lp2 = m.prompt_logprobs(full)
                    lps += own2[len(ids) - 1 :]
                    tops += [
                        {m.tok.decode([b]): lp}
                        for b, lp in zip(best2[len(ids) - 1 :], best_lp2[len(ids) - 1 :])
                    ]
            for g in gen_texts:
                offs.append(pos)
                pos += len(g)
            choice["logprobs"] = {
                "tokens": toks,
                "token_logprobs": lps,
                "text_offset": offs,
                "top_logprobs": tops if int(top) > 0 else None,
            }
        self._send(
            200,
            {
                "id": "cmpl-test",
                "object": "text_completion",
                "model": args.answer_as or args.name,
                "choices": [choice],
                "usage": {"prompt_tokens": len(ids), "completion_tokens": len(new)},
            },
        )

    def _chat(self, req: dict[str, Any]) -> None:
        m = self.server.model
        msgs = req.get("messages") or []
        text = m.tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        ids = list(m.tok(text, add_special_tokens=False)["input_ids"])
        max_tokens = int(req.get("max_tokens") or 16)
        if len(ids) + max_tokens > m.max_len:  # as vLLM's chat endpoint answers
            return self._error(
                400,
                f"This model's maximum context length is {m.max_len} tokens. However, you "
                f"requested {len(ids) + max_tokens} tokens.",
            )
        new, out, reason = m.generate(ids, max_tokens, list(req.get("stop") or []))
        self._send(
            200,
            {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "model": self.server.state.args.answer_as or self.server.state.args.name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": out},
                        "finish_reason": reason,
                    }
                ],
                "usage": {"prompt_tokens": len(ids), "completion_tokens": len(new)},
            },
        )


class Server(ThreadingHTTPServer):
    daemon_threads = True
    state: State
    model: Model


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="transformers model folder")
    p.add_argument("--name", default="tiny", help="served model name")
    p.add_argument("--answer-as", default=None, help="the model name replies carry (--name)")
    p.add_argument("--port", type=int, default=0)
    p.add_argument(
        "--faults", default="", help="comma-separated cycle of 429,500,drop,slow,badjson"
    )
    p.add_argument("--fault-every", type=int, default=3)
    p.add_argument("--slow-seconds", type=float, default=3.0)
    p.add_argument("--delay", type=float, default=0.0, help="seconds added to every POST")
    p.add_argument("--die-after", type=int, default=None, help="exit on the POST after N")
    p.add_argument("--api-key", default=None, help="require this bearer token on POSTs")
    p.add_argument(
        "--corrupt",
        choices=[
            "nan",
            "ninf",
            "null",
            "positive",
            "error200",
            "other_text",
            "fewer",
            "more",
            "cut",
        ],
        default=None,
    )
    p.add_argument("--echo-key", action="store_true", help="a 401 quotes the key it was sent")
    p.add_argument("--lp-offset", type=float, default=0.0, help="added to every prompt log-prob")
    p.add_argument("--corrupt-when", default="", help="corrupt replies to prompts with this")
    p.add_argument("--chat-only", action="store_true")
    p.add_argument(
        "--ignore-limits",
        type=int,
        default=0,
        help="/completions: N tokens, max_tokens and stop ignored",
    )
    p.add_argument("--generated-logprobs-only", action="store_true")
    p.add_argument("--no-prompt-logprobs", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    server = Server(("127.0.0.1", args.port), Handler)
    server.state = State(args)
    server.model = Model(args.model)
    print(f"READY {server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()
