"""``vllm:PATH_OR_HUB_ID``: vLLM's offline engine on the local GPU(s) (extra ``[vllm]``).

Scoring sends token ids (tokenised here with the model's tokenizer, split at the prefix by the
local backend's rule, BOS prepended the same way) with ``prompt_logprobs`` and reads the
log-prob of every continuation token; ``prompt_logprobs=1`` also gives the top-1 token of each
position (per-token statistics). Generation is greedy (temperature 0).

The local transformers backend remains faster for the permutation test: vLLM recomputes the
prompt of every option order for prompt log-probs (it does not reuse prefix-cached blocks for
them), while the local engine runs each question once and shares option prefixes.

Options (``-M key=value``): ``tensor_parallel_size`` (1), ``gpu_memory_utilization`` (0.9),
``max_model_len``, ``enforce_eager=true``, ``bos=TOKEN|none``, ``revision``,
``trust_remote_code=true``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from ..errors import ConfigError, ModelError
from .base import (
    Backend,
    Capabilities,
    GenerateRequest,
    Generation,
    ProgressFn,
    ScoreRequest,
    ScoreResult,
    TokenStats,
    int_option,
)
from .tree_plan import Encoded, encode_requests

__all__ = ["VLLMBackend", "vllm_available"]

ENGINE_VERSION = "1"
OPTIONS = {
    "tensor_parallel_size",
    "gpu_memory_utilization",
    "max_model_len",
    "enforce_eager",
    "bos",
    "revision",
    "trust_remote_code",
}


def _check_options(opts: dict[str, str]) -> None:
    """The -M values have the type vLLM wants, each error naming its option."""
    int_option(opts, "tensor_parallel_size", 1)
    int_option(opts, "max_model_len", 16)
    if "gpu_memory_utilization" in opts:
        try:
            share = float(opts["gpu_memory_utilization"])
        except ValueError:
            share = -1.0
        if not 0 < share <= 1:
            raise ConfigError(
                f"-M gpu_memory_utilization={opts['gpu_memory_utilization']}: expected a "
                "fraction of the GPU's memory in (0, 1]"
            )
    for key in ("enforce_eager", "trust_remote_code"):
        if key in opts and opts[key].lower() not in ("true", "false"):
            raise ConfigError(f"-M {key}={opts[key]}: expected true or false")


def vllm_available() -> str | None:
    """None when vLLM can run here, else the reason it cannot (missing package or no GPU)."""
    try:
        import vllm  # noqa: F401
    except ImportError:
        return "the vllm package is not installed: pip install 'contamscope[vllm]' (Linux, CUDA)"
    try:
        import torch

        if not torch.cuda.is_available():
            return "vLLM needs a CUDA GPU and none is available"
    except ImportError:
        return "vLLM needs torch"
    return None


class VLLMBackend(Backend):
    """Scores and generates with a ``vllm.LLM`` engine."""

    capabilities = Capabilities(prompt_logprobs=True, generate=True, token_stats=True)

    def __init__(self, llm: Any, *, spec: str, identity: str, dtype: str, bos: str) -> None:
        from .hf import HFBackend

        self.llm = llm
        self.spec = spec
        self.identity = identity
        self.dtype = dtype
        self.tokenizer = llm.get_tokenizer()
        self.bos_id = HFBackend._resolve_bos(cast(Any, self), bos)
        self.capabilities = replace(type(self).capabilities, from_start=self.bos_id is not None)
        self._fingerprint: str | None = None

    @classmethod
    def from_spec(
        cls, rest: str, *, device: str, dtype: str, options: dict[str, str]
    ) -> VLLMBackend:
        opts = dict(options)
        unknown = sorted(set(opts) - OPTIONS)
        if unknown:
            raise ConfigError(
                f"-M {unknown[0]}: unknown option for vllm: models; known: {', '.join(sorted(OPTIONS))}"
            )
        if device not in ("auto", "cuda"):
            raise ConfigError(f"--device {device}: vllm: models run on CUDA (use auto or cuda)")
        _check_options(opts)  # before the (slow) engine start, which would fail far from here
        reason = vllm_available()
        if reason is not None:
            raise ConfigError(f"vllm:{rest}: {reason}")
        from vllm import LLM

        path = Path(rest).expanduser()
        if path.exists():
            from .hf import path_identities

            name, (identity, legacy) = str(path), path_identities(path)
        elif rest.startswith((".", "/", "~")):
            raise ModelError(f"vllm:{rest}: no such folder")
        else:
            name, identity, legacy = rest, f"hub:{rest}@{opts.get('revision') or 'main'}", ""
        kwargs: dict[str, Any] = {
            "tensor_parallel_size": int(opts.get("tensor_parallel_size", "1")),
            "gpu_memory_utilization": float(opts.get("gpu_memory_utilization", "0.9")),
            "dtype": "auto" if dtype == "auto" else dtype,
            "enforce_eager": opts.get("enforce_eager", "false").lower() == "true",
            "trust_remote_code": opts.get("trust_remote_code", "false").lower() == "true",
            "seed": 0,
        }
        if opts.get("max_model_len"):
            kwargs["max_model_len"] = int(opts["max_model_len"])
        if opts.get("revision"):
            kwargs["revision"] = opts["revision"]
        try:
            llm = LLM(model=name, **kwargs)
        except (OSError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ModelError(f"vllm:{rest}: could not start the engine ({first[:200]})") from None
        model_dtype = str(llm.llm_engine.model_config.dtype).replace("torch.", "")
        backend = cls(
            llm,
            spec=f"vllm:{rest}",
            identity=identity,
            dtype=model_dtype,
            bos=opts.get("bos", "auto"),
        )
        if legacy:
            backend.legacy_identities = (legacy,)
        return backend

    def fingerprint(self) -> str:
        if self._fingerprint is None:
            import vllm

            tok = self.tokenizer
            state = (
                tok.backend_tokenizer.to_str()
                if hasattr(tok, "backend_tokenizer")
                else repr(tok.get_vocab())
            )
            parts = [
                self.identity,
                self.dtype,
                f"tok={hashlib.sha256(state.encode()).hexdigest()[:16]}",
                f"bos={self.bos_id}",
                f"vllm={vllm.__version__}",
                f"engine={ENGINE_VERSION}",
            ]
            self._fingerprint = "|".join(parts)
        return self._fingerprint

    @property
    def _max_len(self) -> int | None:
        """The engine's context (``max_model_len``)."""
        return getattr(self.llm.llm_engine.model_config, "max_model_len", None)

    def _encode(self, requests: Sequence[ScoreRequest]) -> list[Encoded]:
        """Tokenised as the local backend tokenises (:func:`~.tree_plan.encode_requests`), so
        the two score the same tokens."""
        return encode_requests(self.tokenizer, self.bos_id, requests, self._max_len)

    def _runnable(self, e: Encoded) -> bool:
        limit = self._max_len
        return (
            not e.too_long
            and bool(e.cont)
            and (limit is None or len(e.prefix) + len(e.cont) <= limit)
        )

    def _prompt_logprobs(
        self, requests: Sequence[ScoreRequest], top: int, progress: ProgressFn | None
    ) -> list[tuple[Encoded, list[Any] | None]]:
        """Each request's encoding and vLLM's prompt log-probs (None: not run, as it is empty
        or longer than the engine's context)."""
        from vllm import SamplingParams

        encoded = self._encode(requests)
        run = [i for i, e in enumerate(encoded) if self._runnable(e)]
        prompts = [{"prompt_token_ids": list(encoded[i].prefix) + encoded[i].cont} for i in run]
        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=top)
        outs = self.llm.generate(prompts, params, use_tqdm=False) if prompts else []
        got: list[list[Any] | None] = [None] * len(encoded)
        for i, o in zip(run, outs):
            got[i] = list(o.prompt_logprobs or [])
        if progress is not None:
            progress(len(requests))
        return list(zip(encoded, got))

    def score(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[ScoreResult]:
        out = []
        for e, plp in self._prompt_logprobs(requests, 0, progress):
            if plp is None:  # empty: log p = 0; too long: NaN, as the local backend gives them
                long = e.too_long or bool(e.cont)
                value = math.nan if long else 0.0
                out.append(ScoreResult(value, len(e.cont), e.boundary_chars, too_long=long))
                continue
            p = len(e.prefix)
            vals = [plp[p + j][t].logprob for j, t in enumerate(e.cont)]
            out.append(ScoreResult(float(math.fsum(vals)), len(vals), e.boundary_chars))
        return out

    def token_stats(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[TokenStats]:
        out = []
        for e, plp in self._prompt_logprobs(requests, 1, progress):
            if e.too_long:
                out.append(TokenStats.too_long())
                continue
            if plp is None:
                nan = (math.nan,) * len(e.cont)
                cont, lost = tuple(e.cont), (-1,) * len(e.cont)
                out.append(TokenStats(cont, nan, lost, e.boundary_chars, over_context=bool(cont)))
                continue
            p = len(e.prefix)
            lps, greedy = [], []
            for j, t in enumerate(e.cont):
                entry = plp[p + j]
                lps.append(float(entry[t].logprob))
                greedy.append(next((k for k, v in entry.items() if v.rank == 1), -1))
            out.append(TokenStats(tuple(e.cont), tuple(lps), tuple(greedy), e.boundary_chars))
        return out

    def generate(
        self, requests: Sequence[GenerateRequest], progress: ProgressFn | None = None
    ) -> list[Generation]:
        from vllm import SamplingParams

        tok = self.tokenizer
        prompts = []
        for r in requests:
            if r.chat and getattr(tok, "chat_template", None):
                text = tok.apply_chat_template(
                    [{"role": "user", "content": r.prompt}],
                    tokenize=False,
                    add_generation_prompt=True,
                )
                ids = list(tok(text, add_special_tokens=False)["input_ids"])
            else:
                ids = list(tok(r.prompt, add_special_tokens=False)["input_ids"])
                ids = ([self.bos_id] if self.bos_id is not None else []) + ids
            prompts.append({"prompt_token_ids": ids})
        params = [
            SamplingParams(temperature=0.0, max_tokens=r.max_new_tokens, stop=list(r.stop) or None)
            for r in requests
        ]
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        if progress is not None:
            progress(len(requests))
        result = []
        for o in outs:
            c = o.outputs[0]
            reason = "length" if c.finish_reason == "length" else "stop"
            result.append(Generation(c.text, len(c.token_ids), reason))
        return result

    def decode(self, tokens: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(tokens)))
