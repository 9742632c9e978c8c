"""Local transformers backend with a shared-prefix scoring engine.

For each distinct prefix (a question), the prefix is run once and its KV cache is reused for all
continuations (option orders) of that prefix, batched under a token budget. Log-softmax is taken
only at scored positions, in float32, from the final hidden states; target log-probs are gathered
on the device and copied to the host once per batch.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import ConfigError, ModelError
from .base import Backend, Capabilities, ProgressFn, ScoreRequest, ScoreResult

__all__ = ["HFBackend", "resolve_device", "resolve_dtype", "quiet_transformers"]

ENGINE_VERSION = "1"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def quiet_transformers() -> None:
    """Hide transformers' own progress bars and warnings: contamscope reports its own progress."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"--device {device}: CUDA is not available on this machine")
    try:
        return torch.device(device)
    except RuntimeError:
        raise ConfigError(f"--device {device!r}: expected auto, cpu, cuda or cuda:N") from None


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    if dtype not in _DTYPES:
        raise ConfigError(f"--dtype {dtype!r}: expected auto, {', '.join(_DTYPES)}")
    return _DTYPES[dtype]


@dataclass
class _Encoded:
    prefix: tuple[int, ...]
    cont: list[int]
    boundary_chars: int


def _local_identity(path: Path) -> str:
    """Content identity of a local model folder or file (sizes, mtimes, config hash)."""
    h = hashlib.sha256(str(path.resolve()).encode())
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file())
    for f in files:
        st = f.stat()
        h.update(f"{f.name}:{st.st_size}:{int(st.st_mtime)}".encode())
        if f.name.endswith(".json") and st.st_size < 1_000_000:
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


class HFBackend(Backend):
    """Scores text with a local transformers causal LM."""

    capabilities = Capabilities(prompt_logprobs=True, generate=False)

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        spec: str,
        identity: str,
        bos: str = "auto",
        max_batch_tokens: int | None = None,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.spec = spec
        self.identity = identity
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.bos_id = self._resolve_bos(bos)
        self.max_batch_tokens = max_batch_tokens or self._default_budget()
        self.max_length = int(getattr(model.config, "max_position_embeddings", 0) or 0) or None
        self._decoder: Any = model.get_decoder() if hasattr(model, "get_decoder") else None
        head = model.get_output_embeddings()
        self._head_w = head.weight.detach().float() if head is not None else None
        self._head_b = getattr(head, "bias", None)
        self._softcap = getattr(model.config, "final_logit_softcapping", None)
        self._split_head = self._decoder is not None and self._head_w is not None
        if self._split_head and not self._split_head_matches():
            self._split_head = False
        self._fingerprint: str | None = None

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_spec(cls, rest: str, *, device: str, dtype: str, options: dict[str, str]) -> HFBackend:
        """``hf:PATH_OR_ID``: a local folder, a ``.gguf`` file, or a hub id (online)."""
        path = Path(rest).expanduser()
        if rest.endswith(".gguf"):
            if not path.is_file():
                raise ModelError(f"hf:{rest}: no such GGUF file")
            from .bundled import converted_gguf

            folder = converted_gguf(path)
            identity = f"gguf:{path.name}:{_local_identity(path)}"
            return cls.from_pretrained(
                str(folder),
                spec=f"hf:{rest}",
                identity=identity,
                device=device,
                dtype=dtype,
                options=options,
            )
        if path.exists():
            if not path.is_dir():
                raise ModelError(f"hf:{rest}: expected a model folder or a .gguf file")
            identity = f"local:{path.name}:{_local_identity(path)}"
            return cls.from_pretrained(
                str(path),
                spec=f"hf:{rest}",
                identity=identity,
                device=device,
                dtype=dtype,
                options=options,
            )
        if rest.startswith((".", "/", "~")):
            raise ModelError(f"hf:{rest}: no such file or folder")
        return cls.from_pretrained(
            rest,
            spec=f"hf:{rest}",
            identity=f"hub:{rest}",
            device=device,
            dtype=dtype,
            options=options,
        )

    @classmethod
    def from_pretrained(
        cls,
        name: str,
        *,
        spec: str,
        identity: str,
        device: str = "auto",
        dtype: str = "auto",
        options: dict[str, str] | None = None,
        default_bos: str = "auto",
    ) -> HFBackend:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        quiet_transformers()
        opts = dict(options or {})
        known = {"bos", "max_batch_tokens", "revision", "trust_remote_code", "attn"}
        unknown = sorted(set(opts) - known)
        if unknown:
            raise ConfigError(
                f"-M {unknown[0]}: unknown model option; known: {', '.join(sorted(known))}"
            )
        dev = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, dev)
        kwargs: dict[str, Any] = {
            "revision": opts.get("revision"),
            "trust_remote_code": opts.get("trust_remote_code", "false").lower() == "true",
        }
        if opts.get("attn"):
            kwargs["attn_implementation"] = opts["attn"]
        try:
            tok = AutoTokenizer.from_pretrained(name, revision=kwargs["revision"])
            model: Any = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype, **kwargs)
        except OSError as exc:
            offline = os.environ.get("HF_HUB_OFFLINE") == "1"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(
                f"could not load model {name!r}: not a local folder, and the hub "
                f"{'is disabled (HF_HUB_OFFLINE=1)' if offline else 'could not be reached or has no such model'}"
                f" ({first[:160]})"
            ) from None
        revision = getattr(model.config, "_commit_hash", None)
        if revision and identity.startswith("hub:"):
            identity += f"@{revision}"
        model.to(dev)
        max_bt = int(opts["max_batch_tokens"]) if opts.get("max_batch_tokens") else None
        return cls(
            model,
            tok,
            spec=spec,
            identity=identity,
            bos=opts.get("bos", default_bos),
            max_batch_tokens=max_bt,
        )

    def _resolve_bos(self, bos: str) -> int | None:
        tok = self.tokenizer
        if bos == "none":
            return None
        if bos != "auto":
            tid = tok.convert_tokens_to_ids(bos)
            if tid is None or (tid == tok.unk_token_id and bos != tok.unk_token):
                raise ConfigError(f"-M bos={bos}: not a token of this tokenizer")
            return int(tid)
        for cand in (tok.bos_token_id, tok.eos_token_id):
            if cand is not None:
                return int(cand)
        return None

    def _default_budget(self) -> int:
        if self.device.type != "cuda":
            return 4096
        free, _ = torch.cuda.mem_get_info(self.device)
        cfg = self.model.config
        layers = getattr(cfg, "num_hidden_layers", 24)
        hidden = getattr(cfg, "hidden_size", 2048)
        inter = getattr(cfg, "intermediate_size", 4 * hidden)
        kv = getattr(cfg, "num_key_value_heads", getattr(cfg, "num_attention_heads", 16))
        head_dim = getattr(cfg, "head_dim", None) or hidden // getattr(
            cfg, "num_attention_heads", 16
        )
        per_token = (2 * layers * kv * head_dim + 12 * hidden + 3 * inter) * 4
        return int(min(max(free * 0.4 / per_token, 1024), 65536))

    def _split_head_matches(self) -> bool:
        """Check once that decoder + output head reproduces the model's own logits."""
        ids = torch.tensor([[self.bos_id or 0, 1, 2, 3]], device=self.device)
        with torch.inference_mode():
            ref = torch.log_softmax(self.model(ids).logits.float(), -1)[0, :-1]
            hidden = self._decoder(ids).last_hidden_state[0, :-1]
            mine = self._token_logprobs(hidden, ids[0, 1:])
        want = ref.gather(-1, ids[0, 1:, None]).squeeze(-1)
        return bool(torch.allclose(mine, want, atol=2e-2 if self.dtype != torch.float32 else 1e-4))

    # --- identity -------------------------------------------------------------------------
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            tok = self.tokenizer
            tok_state = (
                tok.backend_tokenizer.to_str()
                if hasattr(tok, "backend_tokenizer")
                else repr(tok.get_vocab())
            )
            tok_hash = hashlib.sha256(tok_state.encode()).hexdigest()[:16]
            parts = [
                self.identity,
                str(self.dtype).replace("torch.", ""),
                f"tok={tok_hash}",
                f"bos={self.bos_id}",
                f"engine={ENGINE_VERSION}",
            ]
            self._fingerprint = "|".join(parts)
        return self._fingerprint

    def describe(self) -> dict[str, object]:
        return {
            "spec": self.spec,
            "fingerprint": self.fingerprint(),
            "device": str(self.device),
            "dtype": str(self.dtype).replace("torch.", ""),
            "bos_token_id": self.bos_id,
            "max_batch_tokens": self.max_batch_tokens,
            "parameters": sum(p.numel() for p in self.model.parameters()),
        }

    # --- tokenisation -----------------------------------------------------------------------
    def encode(self, req: ScoreRequest) -> _Encoded:
        """Tokenise prefix+continuation as one text; split at the prefix's character offset.

        A token that straddles the boundary belongs to the continuation (its prefix characters
        are reported in ``boundary_chars``), so every order of an item scores the same span
        rule and no token is searched for by value.
        """
        text = req.prefix + req.continuation
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids: list[int] = list(enc["input_ids"])
        offsets = enc["offset_mapping"]
        cut = len(req.prefix)
        split = len(ids)
        for i, (_start, end) in enumerate(offsets):
            if end > cut:
                split = i
                break
        boundary = max(0, cut - offsets[split][0]) if split < len(ids) else 0
        prefix = ([self.bos_id] if self.bos_id is not None else []) + ids[:split]
        if not prefix:
            raise ConfigError("empty prefix and no BOS token: set -M bos=TOKEN")
        return _Encoded(tuple(prefix), ids[split:], boundary)

    # --- scoring ------------------------------------------------------------------------------
    def _token_logprobs(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """log p(target) for rows of final hidden states, in float32, chunked over rows."""
        out = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
        assert self._head_w is not None
        step = max(1, (1 << 26) // self._head_w.shape[0])  # ~256 MB of float32 logits at most
        for s in range(0, hidden.shape[0], step):
            logits = torch.nn.functional.linear(
                hidden[s : s + step].float(),
                self._head_w,
                None if self._head_b is None else self._head_b.float(),
            )
            if self._softcap:
                logits = torch.tanh(logits / self._softcap) * self._softcap
            lse = torch.logsumexp(logits, dim=-1)
            out[s : s + step] = logits.gather(-1, targets[s : s + step, None]).squeeze(-1) - lse
        return out

    def _expand_cache(self, cache: Any, k: int) -> Any:
        from transformers import DynamicCache

        new = DynamicCache(config=self.model.config)
        for i, layer in enumerate(cache.layers):
            new.update(layer.keys.expand(k, -1, -1, -1), layer.values.expand(k, -1, -1, -1), i)
        return new

    def _score_group(self, prefix: tuple[int, ...], conts: list[list[int]]) -> list[float]:
        dev = self.device
        pre = torch.tensor([prefix], device=dev)
        results = [0.0] * len(conts)
        order = sorted(range(len(conts)), key=lambda i: -len(conts[i]))
        with torch.inference_mode():
            if self._split_head:
                out = self._decoder(pre, use_cache=True)
                last = out.last_hidden_state[:, -1]
            else:
                out = self.model(pre, use_cache=True)
                last = torch.log_softmax(out.logits[:, -1].float(), -1)
            cache = out.past_key_values
            start = 0
            while start < len(order):
                width = max(1, len(conts[order[start]]))
                k = max(
                    1,
                    min(
                        len(order) - start, self.max_batch_tokens // (width + len(prefix) // 4 + 1)
                    ),
                )
                idx = order[start : start + k]
                start += k
                ids = torch.zeros((k, width), dtype=torch.long)
                mask = torch.zeros((k, width), dtype=torch.bool)
                for row, i in enumerate(idx):
                    ids[row, : len(conts[i])] = torch.tensor(conts[i], dtype=torch.long)
                    mask[row, : len(conts[i])] = True
                ids, mask = ids.to(dev), mask.to(dev)
                attn = torch.cat(
                    [torch.ones((k, len(prefix)), dtype=torch.long, device=dev), mask.long()], dim=1
                )
                kv = self._expand_cache(cache, k)
                rows = torch.arange(k, device=dev)[:, None].expand(k, width)[mask]
                targets = ids[mask]
                if self._split_head:
                    h = self._decoder(
                        ids, attention_mask=attn, past_key_values=kv
                    ).last_hidden_state
                    pred = torch.cat([last.expand(k, -1)[:, None], h[:, :-1]], dim=1)[mask]
                    lp = self._token_logprobs(pred, targets)
                else:
                    logits = self.model(ids, attention_mask=attn, past_key_values=kv).logits
                    allp = torch.cat(
                        [
                            last.expand(k, -1)[:, None],
                            torch.log_softmax(logits[:, :-1].float(), -1),
                        ],
                        dim=1,
                    )
                    lp = allp[mask].gather(-1, targets[:, None]).squeeze(-1)
                sums = torch.zeros(k, dtype=torch.float64, device=dev).index_add_(
                    0, rows, lp.double()
                )
                for row, value in zip(idx, sums.tolist()):
                    results[row] = value
        return results

    def score(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[ScoreResult]:
        encoded = [self.encode(r) for r in requests]
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, e in enumerate(encoded):
            groups.setdefault(e.prefix, []).append(i)
        out: list[ScoreResult | None] = [None] * len(requests)
        for prefix, members in groups.items():
            too_long = self.max_length is not None and any(
                len(prefix) + len(encoded[i].cont) > self.max_length for i in members
            )
            if too_long:
                values = [math.nan] * len(members)
            else:
                values = self._score_group(prefix, [encoded[i].cont for i in members])
            for i, v in zip(members, values):
                out[i] = ScoreResult(v, len(encoded[i].cont), encoded[i].boundary_chars)
            if progress is not None:
                progress(len(members))
        return [r for r in out if r is not None]

    def naive_logprob(self, req: ScoreRequest) -> float:
        """Reference computation: one full forward pass, float64 log-softmax (for tests)."""
        e = self.encode(req)
        ids = torch.tensor([list(e.prefix) + e.cont], device=self.device)
        with torch.inference_mode():
            logp = torch.log_softmax(self.model(ids).logits.double(), -1)[0]
        p = len(e.prefix)
        return float(sum(logp[p - 1 + j, t].item() for j, t in enumerate(e.cont)))
