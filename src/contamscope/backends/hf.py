"""Local transformers backend with a prefix-tree scoring engine.

Scoring the n! option orders of a question is mostly repeated work; the engine runs every needed
token position once:

1. Prefixes (questions) run once, in length-bucketed batches; their KV caches are kept.
2. The continuations of a prefix (its option orders) form a token trie: orders that share
   leading options share tokens. The trie is cut at branch points into subtrees of at most
   ``max_tree_nodes`` tokens (only the short trunk above a cut is run twice).
3. Subtrees run in length-bucketed batches under ``score_batch_tokens``, attending to their
   prefix's cached keys/values and, through a tree attention mask, to their own ancestors, at
   positions ``len(prefix) + depth``.
4. The vocabulary log-softmax is computed only where a token is scored, in float32, from the
   final hidden states; per-order sums stay on the device and reach the host once per batch.

Every number equals the naive full-sequence computation (tests check 1e-3 in float32).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from ..errors import ConfigError, ModelError, note
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
from .tree_plan import (
    Batch,
    Encoded,
    Planner,
    Unit,
    bucket,
    chain_mask,
    filled_cache,
    layer_windows,
    plan_in_process,
    planning_pool,
    tree_mask,
)

__all__ = ["HFBackend", "resolve_device", "resolve_dtype", "quiet_transformers"]

ENGINE_VERSION = "4"
"""Part of the fingerprint, so scores of another engine's numbers are not reused. Version 4
corrected sliding-window and eager-attention models (version 3 ignored the window in the tree
and added eager attention's mask as 1s and 0s); a model with only full attention through SDPA
gets the numbers of version 3 and keeps its key, so those cached scores stay valid."""
_HEAD_ROWS = 256
"""Rows of whole-vocabulary logits computed at once off the CPU (at least; CUDA takes about
256 MB of them) and by the logits fallback; the CPU's head works in blocks (below)."""
_BLOCKED_ROWS = 512
_VOCAB_BLOCK = 4096
"""Rows and vocabulary columns of one block of logits in :meth:`HFBackend._blocked_logprobs`
(the best of 256-1,024 rows x 2,048-16,384 columns for SmolLM2's head on one host; 8 MiB)."""
_CPU_SCORE_TOKENS = 1024
"""Default width of a CPU scoring pass. Narrower passes keep a layer's activations closer to
the cache: 24 MMLU items with SmolLM2 scored 4-8% faster at 1024 tokens than at 4096 (three
in-process A/Bs, 2026-11-26; 512-2048 are alike). Generation keeps the wider budget: a decoding
step reads all the weights for few tokens, and 48 greedy generations took 33% longer at 1024."""
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


T = TypeVar("T")


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Hide transformers' own progress bars and warnings while a model or tokenizer loads
    (contamscope reports its own progress), then restore them as they were: the host
    program's transformers logging stayed silenced for the rest of the process (library QA).
    The commands silence it for the whole run (``TRANSFORMERS_VERBOSITY``). Without
    transformers, a one-line ConfigError naming the extra (torch alone was a traceback; QA)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        from .registry import missing_extra

        raise missing_extra(exc, "hf") from None

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _quietly(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` run under :func:`quiet_transformers`."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> T:
        with quiet_transformers():
            return fn(*args, **kwargs)

    return run


def resolve_bos(tok: Any, bos: str) -> int | None:
    """The id of the token prepended to every text: ``none``, a token of ``tok`` (``-M
    bos=TOKEN``), or ``auto`` (the tokenizer's BOS, else its EOS, else none)."""
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


def fast_tokenizer(tok: Any) -> Any:
    """The ``tokenizers.Tokenizer`` behind a fast tokenizer when calling it directly gives
    what the transformers wrapper gives (no truncation or padding set), else None."""
    rust = getattr(tok, "_tokenizer", None)
    if rust is None or not hasattr(rust, "encode_batch"):
        return None
    return rust if rust.truncation is None and rust.padding is None else None


_HEAP_KEPT: bool | None = None


def keep_freed_memory() -> bool:
    """On Linux with glibc, keep freed memory in the process for reuse (once per process;
    ``CONTAMSCOPE_KEEP_HEAP=0`` leaves malloc as it is). Returns whether it is in effect.

    A CPU forward pass allocates and frees hundreds of blocks of 1-32 MiB. With glibc's
    default, adaptive thresholds many of them were mapped and unmapped, or trimmed from the
    heap, and faulted in (and zeroed by the kernel) page by page on their next use: scoring 30
    MMLU items with SmolLM2 took 1.0-4.8 million page faults and 1.8-7.5 s of system time
    against 56 s of compute. Fixed thresholds (blocks of up to 32 MiB from the heap, whose top
    is given back only beyond 1 GiB of free space) make that 0.29 million and 0.6 s; the peak
    memory is the same (the process keeps what it peaked at until it ends)."""
    global _HEAP_KEPT
    if _HEAP_KEPT is None:
        _HEAP_KEPT = False
        if sys.platform.startswith("linux") and os.environ.get("CONTAMSCOPE_KEEP_HEAP") != "0":
            import ctypes

            try:
                libc = ctypes.CDLL("libc.so.6")
                # M_TRIM_THRESHOLD (-1) and M_MMAP_THRESHOLD (-3; glibc's ceiling is 32 MiB)
                _HEAP_KEPT = bool(libc.mallopt(-1, 1 << 30)) and bool(libc.mallopt(-3, 32 << 20))
            except (OSError, AttributeError):  # musl or another libc: no mallopt
                pass
    return _HEAP_KEPT


def right_padded(rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention mask) of token lists on the CPU, right-padded with 0 to the longest."""
    width = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return ids, mask


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
class _Held:
    """KV caches of a group of prefixes, padded to the longest: per layer [slots, heads, width,
    dim], and each prefix's last final state [slots, hidden]."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    last: torch.Tensor


def _vocab_moments(logp: torch.Tensor, scratch: torch.Tensor | None = None) -> torch.Tensor:
    """[rows, 2]: mean and std of log p over the vocabulary under p itself, per row of float32
    log-probs [rows, vocab] (overwritten: it is used as scratch space, so one extra buffer of
    its size, ``scratch`` where given, and the products for the mean are the memory added).
    The variance is computed around the mean, not as E[(log p)^2] - mean^2, which cancels
    catastrophically in float32 for flat distributions; the products are summed by ``sum``,
    not einsum, whose float32 dot product on the CPU was 25x less accurate (a mean off by
    6e-3 for Gemma 3's vocabulary of 262k).
    """
    p = torch.exp(logp, out=scratch) if scratch is not None else torch.exp(logp)
    mean = (p * logp).sum(-1)
    logp.sub_(mean[:, None]).square_()
    var = p.mul_(logp).sum(-1)
    return torch.stack([mean, var.clamp_min(0).sqrt()], dim=-1)


def _key_cost(model: Any) -> float:
    """The work of attending to one key, as a share of running one token through ``model``:
    4 x heads x head size FLOPs a layer (query-key products and the weighted values) against
    2 x parameters (1/3,900 for SmolLM2-135M); 0 when the config does not say."""
    try:
        cfg = model.config.get_text_config()
        heads = int(cfg.num_attention_heads)
        head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads)
        per_key = 4 * int(cfg.num_hidden_layers) * heads * head_dim
    except (AttributeError, TypeError, ValueError, ZeroDivisionError):
        return 0.0
    params = sum(p.numel() for p in model.parameters())
    return per_key / (2 * params) if params else 0.0


def path_identities(path: Path) -> tuple[str, str]:
    """Content identity of a local model folder or ``.gguf`` file, and the one contamscope
    gave it before it identified models by their content alone (still read: its cached scores
    are reused, :meth:`~contamscope.backends.base.Backend.legacy_fingerprints`).

    The identity is the name of the folder or file and every file's name, size and bytes
    (:func:`~contamscope.store.digests.file_digest`: read in full once per change of the file,
    so new weights under an old size and modification time are a new model). Where the model
    lies is no part of it: scores computed with a copy on another machine (``cache export``)
    are reused. The earlier identity hashed the resolved path too."""
    from ..store.digests import file_digest

    kind = "gguf" if path.is_file() else "local"
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file())
    listing = "".join(f"{f.name}:{f.stat().st_size}:{file_digest(f)}" for f in files).encode()
    content = hashlib.sha256(listing).hexdigest()[:16]
    legacy = hashlib.sha256(str(path.resolve()).encode() + listing).hexdigest()[:16]
    return f"{kind}:{path.resolve().name}:{content}", f"{kind}:{path.name}:{legacy}"


def local_identities(spec: str) -> tuple[str, str] | None:
    """The identities (:func:`path_identities`: the first part of the fingerprint, now and
    before) that ``spec`` loads, without loading it, for a local ``hf:`` folder or ``.gguf``
    file; None for any other spec (a hub id, the bundled model, a server), whose identity is
    fixed by its name and version.

    >>> local_identities("hf:HuggingFaceTB/SmolLM2-135M") is None
    True
    """
    if not spec.startswith("hf:"):
        return None
    rest = spec[3:]
    path = Path(rest).expanduser()
    if (rest.endswith(".gguf") and path.is_file()) or path.is_dir():
        return path_identities(path)
    return None


OPTIONS = frozenset(
    {
        "bos",
        "max_batch_tokens",
        "max_tree_nodes",
        "revision",
        "trust_remote_code",
        "attn",
        "plan_workers",
        "fuse",
    }
)
"""The ``-M key=value`` options of ``hf:`` models (docs/backends.md)."""


def hub_unreachable(name: str) -> str | None:
    """Why the Hugging Face hub certainly cannot serve hub model ``name`` here (its host name
    does not resolve: no network), or None (it may: online, a proxy set, the model in the hub's
    local cache, or HF_HUB_OFFLINE, which transformers answers at once). Offline, transformers
    retried each file five times, 22 lines of retries over 75 s before the error (Gemma QA)."""
    import socket
    from urllib.parse import urlparse

    proxies = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
    if os.environ.get("HF_HUB_OFFLINE") == "1" or any(os.environ.get(p) for p in proxies):
        return None
    with contextlib.suppress(Exception):  # (no hub library, an odd name: let transformers say)
        from huggingface_hub import try_to_load_from_cache

        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return None
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    host = urlparse(endpoint).hostname
    if not host:
        return None
    try:
        socket.getaddrinfo(host, 443)
    except socket.gaierror:
        return f"the hub's host {host} cannot be resolved (no network?)"
    except OSError:
        pass  # (another failure: transformers tries, and says)
    return None


class HFBackend(Backend):
    """Scores text with a local transformers causal LM."""

    capabilities = Capabilities(
        prompt_logprobs=True, generate=True, token_stats=True, vocab_stats=True
    )

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        spec: str,
        identity: str,
        bos: str = "auto",
        max_batch_tokens: int | None = None,
        fuse: str = "auto",
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.spec = spec
        self.identity = identity
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.bos_id = self._resolve_bos(bos)
        self.capabilities = replace(type(self).capabilities, from_start=self.bos_id is not None)
        self.max_batch_tokens = max_batch_tokens or self._default_budget()
        cuda = self.device.type == "cuda"
        self.score_batch_tokens = max_batch_tokens or (
            self.max_batch_tokens if cuda else _CPU_SCORE_TOKENS
        )
        """Tokens per scoring pass (prefixes, order subtrees): the budget, except on the CPU by
        default (``_CPU_SCORE_TOKENS``); full-text statistics and generation use the budget."""
        if self.device.type == "cpu":
            keep_freed_memory()
        self.max_tree_nodes = 1024 if cuda else 256
        """Order trees are split into subtrees of at most this many tokens (attention blocks;
        a GPU runs a whole MMLU question's 24 orders as one row)."""
        self.key_cost = 0.0 if cuda else _key_cost(model)
        """CPU: each question's subtrees are 1, 2 or 4 x ``max_tree_nodes``, whichever costs
        least by this share of a token's work per attended key (:attr:`.Planner.key_cost`);
        0 (a GPU, or ``-M max_tree_nodes`` given): always ``max_tree_nodes``."""
        self.plan_chunk_tokens = 2 * self.max_batch_tokens if cuda else 0
        """Requests are planned (tokenised, tries, batch arrays) in chunks of about this many
        tokens; 0 plans a whole call at once."""
        self.plan_workers = 0
        """1: plan chunks in a planning process while the device runs the previous ones (a GPU
        option, ``-M plan_workers=1``: on an H200 it measured within the noise of planning in
        line, which the device's queue already overlaps, docs/performance.md); 0: in line."""
        self._pool: Any = None
        self.overlap_calls = cuda
        """In :meth:`score_stream`, start each call before the previous one's results are read
        back (a GPU: the device works while the host prepares; on a CPU the host is the
        device, so there each call waits for the previous one's hand-off)."""
        self.pad_tolerance = 0.5 if cuda else 0.1
        """Rows of a scoring batch may be padded by this fraction of its shortest (+16 tokens).
        A CPU computes padding at full cost; a GPU runs wide batches nearly as fast as narrow
        ones and pays per forward pass (kernel launches), so there the budget alone decides."""
        self.max_length = int(getattr(model.config, "max_position_embeddings", 0) or 0) or None
        self._decoder: Any = model.get_decoder() if hasattr(model, "get_decoder") else None
        head = model.get_output_embeddings()
        self._head_w = head.weight.detach().float() if head is not None else None
        self._head_b = getattr(head, "bias", None)
        self._head_half: torch.Tensor | None = None
        if head is not None and self.device.type == "cuda" and self.dtype != torch.float32:
            self._head_half = head.weight.detach()
        self._softcap = getattr(model.config, "final_logit_softcapping", None)
        self._buffers = threading.local()
        """CPU: blocks of logits reused for every chunk of rows, one set per thread
        (:meth:`_kept`; threads that share a backend score at once)."""
        self._split_head = self._decoder is not None and self._head_w is not None
        self._cache_kw = _cache_keyword(self._trunk().forward)
        self._lse_kernel: Any = None
        """One-pass log-softmax-at-target kernel (CUDA with Triton, checked once; else None)."""
        if self._split_head and self._triton():
            from . import cuda_kernels

            assert self._head_w is not None
            if cuda_kernels.check_lse_gather(self.device, self._head_w.shape[0]):
                self._lse_kernel = cuda_kernels.lse_gather
        if self._split_head and not self._split_head_matches():
            self._split_head = False
        self._fingerprint: str | None = None
        self.tokens_run = 0
        """Token positions run through the model so far (padding included)."""
        self.tokens_useful = 0
        """Real (non-padding) positions run so far, trunk tokens repeated across subtrees included."""
        self.tokens_min = 0
        """The minimum that must be run: each prefix once plus the nodes of its token trie."""
        self._windows = layer_windows(model.config)
        """Attention window per kind of layer (:func:`~.tree_plan.layer_windows`)."""
        self._eager = getattr(model.config, "_attn_implementation", None) == "eager"
        """Eager attention adds its mask to the scores: it takes an additive float mask."""
        self._float_mask = self._eager or cuda
        """Pass masks as additive float masks: eager attention needs them, and on CUDA SDPA
        would convert a boolean mask into one in every layer (1.5% of an H200's kernel time)."""
        self.fused: list[str] = []
        """What runs as compiled fused kernels (:mod:`.fusion`; empty: the eager model)."""
        self._fusion: Any = None
        self.engine = "prefix-tree"
        """How :meth:`score` runs: ``prefix-tree`` (the engine above), or ``full-sequence``
        (every text run whole, batched) for a model whose layers tree attention cannot run
        (recurrent state, chunked attention) or whose results it does not reproduce."""
        self._check_vocabulary()
        why = self._tree_engine_fails()
        if why:
            self.engine = "full-sequence"
            note(
                f"{spec}: the prefix-tree engine cannot run this model ({why}); "
                "each text is scored in one full forward pass (same numbers, slower)",
            )
        self._fuse(fuse)

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_spec(cls, rest: str, *, device: str, dtype: str, options: dict[str, str]) -> HFBackend:
        """``hf:PATH_OR_ID``: a local folder, a ``.gguf`` file, or a hub id (online)."""
        path = Path(rest).expanduser()
        if rest.endswith(".gguf"):
            if not path.is_file():
                raise ModelError(f"hf:{rest}: no such GGUF file")
            from .bundled import converted_gguf

            folder: Path | str
            folder, (identity, legacy) = converted_gguf(path), path_identities(path)
        elif path.exists():
            if not path.is_dir():
                raise ModelError(f"hf:{rest}: expected a model folder or a .gguf file")
            folder, (identity, legacy) = path, path_identities(path)
        elif rest.startswith((".", "/", "~")):
            raise ModelError(f"hf:{rest}: no such file or folder")
        else:
            folder, identity, legacy = rest, f"hub:{rest}", ""
            unreachable = hub_unreachable(rest)
            if unreachable:
                raise ModelError(
                    f"could not load model {rest!r}: not a local folder, and {unreachable} "
                    "(give a local folder, or download it where the hub can be reached)"
                )
        backend = cls.from_pretrained(
            str(folder),
            spec=f"hf:{rest}",
            identity=identity,
            device=device,
            dtype=dtype,
            options=options,
        )
        if legacy:
            backend.legacy_identities = (legacy,)
        return backend

    @classmethod
    @_quietly
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

        opts = dict(options or {})
        known = OPTIONS
        unknown = sorted(set(opts) - known)
        if unknown:
            raise ConfigError(
                f"-M {unknown[0]}: unknown model option; known: {', '.join(sorted(known))}"
            )
        max_bt = int_option(opts, "max_batch_tokens", 64)
        max_tree = int_option(opts, "max_tree_nodes", 8)
        for key, allowed in (("attn", ("sdpa", "eager")), ("trust_remote_code", ("true", "false"))):
            if key in opts and opts[key].lower() not in allowed:
                raise ConfigError(f"-M {key}={opts[key]}: expected {' or '.join(allowed)}")
        if opts.get("plan_workers", "0") not in ("0", "1"):
            raise ConfigError("-M plan_workers: expected 0 or 1")
        if opts.get("fuse", "auto").lower() not in ("auto", "on", "off"):
            raise ConfigError(f"-M fuse={opts['fuse']}: expected auto, on or off")
        if "revision" in opts and not identity.startswith("hub:"):
            raise ConfigError(
                f"-M revision={opts['revision']}: a revision picks a version of a hub model "
                f"(hf:ORG/NAME); {spec} is read from local files"
            )
        dev = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, dev)
        kwargs: dict[str, Any] = {
            "revision": opts.get("revision"),
            "trust_remote_code": opts.get("trust_remote_code", "false").lower() == "true",
        }
        if opts.get("attn"):
            kwargs["attn_implementation"] = opts["attn"].lower()
        try:
            tok = AutoTokenizer.from_pretrained(name, revision=kwargs["revision"])
            model: Any = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype, **kwargs)
        except OSError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if Path(name).is_dir():  # a local folder that lacks something (weights, tokenizer)
                raise ModelError(
                    f"could not load model {name!r}: the folder is not a complete transformers "
                    f"model ({first[:160]})"
                ) from None
            offline = os.environ.get("HF_HUB_OFFLINE") == "1"
            raise ModelError(
                f"could not load model {name!r}: not a local folder, and the hub "
                f"{'is disabled (HF_HUB_OFFLINE=1)' if offline else 'could not be reached or has no such model'}"
                f" ({first[:160]})"
            ) from None
        except Exception as exc:  # noqa: BLE001 (any error of third-party loading code)
            # transformers' own complaints about a folder it cannot use (an empty config, an
            # unknown architecture, a tokenizer it cannot build), and what the weights' readers
            # raise (safetensors' SafetensorError for a truncated file, RuntimeError for
            # weights of another shape than the config): one line, not a traceback (a sweep
            # ended there and never ran its other models)
            # the whole message on one line: its first line alone may stop mid-sentence
            # ("Couldn't instantiate the backend tokenizer from one of: ")
            text = " ".join(str(exc).split()) or type(exc).__name__
            if len(text) > 300:
                text = text[:299] + "…"
            hint = ""
            if _converted_copy_folder(name):  # a copy contamscope made: it can make it again
                hint = (
                    "; the model's converted copy is damaged: `contamscope cache clear "
                    "--converted` deletes it, and the next run converts the model again"
                )
            elif "tokenizer" in text.lower() and Path(name).is_dir():
                hint = "; is the tokenizer (tokenizer.json) in the folder?"
            raise ModelError(
                f"could not load model {name!r}: {type(exc).__name__}: {text}{hint}"
            ) from None
        revision = getattr(model.config, "_commit_hash", None)
        if revision and identity.startswith("hub:"):
            identity += f"@{revision}"
        model.to(dev)
        backend = cls(
            model,
            tok,
            spec=spec,
            identity=identity,
            bos=opts.get("bos", default_bos),
            max_batch_tokens=max_bt,
            fuse=opts.get("fuse", "auto").lower(),
        )
        if max_tree is not None:
            backend.max_tree_nodes, backend.key_cost = max_tree, 0.0
        if opts.get("plan_workers"):
            backend.plan_workers = int(opts["plan_workers"])
        return backend

    def _fuse(self, fuse: str) -> None:
        """Compile the element-wise parts of the model into fused kernels (:mod:`.fusion`):
        ``on``; ``auto`` = on CUDA where Triton is there (on this project's CPU it measured no
        gain, docs/performance.md); ``off``. Where fusing fails or changes the numbers beyond
        rounding, the model stays eager, with a note."""
        if fuse == "off":
            return
        if self.engine != "prefix-tree":
            if fuse == "on":  # (what was asked for, not done: said, as any fusion not kept)
                note(
                    f"{self.spec}: fused kernels not used, the model is scored as full "
                    "sequences (-M fuse applies to the prefix-tree engine)",
                )
            return
        if fuse == "auto" and not self._triton():
            return
        from .fusion import FusionError
        from .fusion import fuse as fuse_model

        # a fixed batch of two rows (the second shorter: a padded row, as in scoring)
        vocab = int(self.model.config.vocab_size)
        ids = (torch.arange(2 * 24, device=self.device).reshape(2, 24) * 7919) % vocab
        mask = torch.ones_like(ids)
        mask[1, 17:] = 0

        def probe() -> torch.Tensor:
            with torch.inference_mode():
                states, _ = self._forward(ids, attention_mask=mask)
            return states[mask.bool()]

        # float32: rounding; half precision: rounding moves the states by well under a tenth
        # of their scale, a wrong formula by about all of it
        half = self.dtype in (torch.float16, torch.bfloat16)
        tolerance = 0.1 if half else 1e-4
        try:
            self._fusion = fuse_model(self.model, probe, tolerance)
        except FusionError as exc:
            note(
                f"{self.spec}: fused kernels not used, {exc}; the eager model runs "
                "(same numbers, slower; -M fuse=off skips the attempt)",
            )
            return
        self.fused = self._fusion.kinds

    def _triton(self) -> bool:
        """Whether this backend's CUDA path may use Triton kernels (a CUDA device, Triton
        importable, and not turned off with CONTAMSCOPE_NO_TRITON=1)."""
        from . import cuda_kernels

        return (
            self.device.type == "cuda"
            and cuda_kernels.available()
            and os.environ.get("CONTAMSCOPE_NO_TRITON") != "1"
        )

    @contextlib.contextmanager
    def eager(self) -> Iterator[None]:
        """The model's own unfused code inside this block (a reference computation)."""
        fusion, self._fusion = self._fusion, None
        try:
            if fusion is None:
                yield
            else:
                with fusion.suspended():
                    yield
        finally:
            self._fusion = fusion

    def _resolve_bos(self, bos: str) -> int | None:
        return resolve_bos(self.tokenizer, bos)

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
        return int(min(max(free * 0.4 / per_token, 1024), 131072))

    def _split_head_matches(self) -> bool:
        """Check once that decoder + output head reproduces the model's own logits."""
        ids = torch.tensor([[self.bos_id or 0, 1, 2, 3]], device=self.device)
        with torch.inference_mode():
            ref = torch.log_softmax(self.model(ids).logits.float(), -1)[0, :-1]
            hidden = self._decoder(ids).last_hidden_state[0, :-1]
            mine = self._token_logprobs(hidden, ids[0, 1:])
        want = ref.gather(-1, ids[0, 1:, None]).squeeze(-1)
        return bool(torch.allclose(mine, want, atol=2e-2 if self.dtype != torch.float32 else 1e-4))

    def _check_vocabulary(self) -> None:
        """A ModelError where the tokenizer gives ids the model has no embedding for, on a
        short text: its folder holds another model family's tokenizer files (a Gemma tokenizer
        beside a 49,152-token model was an IndexError's traceback, after a note that blamed the
        prefix-tree engine; model QA)."""
        embeddings = self.model.get_input_embeddings()
        rows = getattr(embeddings, "num_embeddings", None)
        if not isinstance(rows, int):
            return
        text = "The quick brown fox jumps over the lazy dog. 1, 2, 3; 北京是中国的首都。"
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        if self.bos_id is not None:
            ids.append(self.bos_id)
        if ids and max(ids) >= rows:
            raise ModelError(
                f"{self.spec}: its tokenizer gives token ids up to {max(ids):,} and the model "
                f"embeds {rows:,}: the tokenizer is not this model's (another model's "
                "tokenizer files in its folder?)"
            )

    def _tree_engine_fails(self) -> str | None:
        """Why the prefix-tree engine cannot score this model (None when it can): a layer kind
        that tree attention cannot run, or, checked once on a small branching tree of two
        prefixes, an error or a log-prob off the model's own full forward pass (recurrent or
        convolutional layers that read the tree's rows as one sequence). ModelError where the
        model's own full forward pass gives a NaN or infinite log-prob for those short texts."""
        checks = [
            ScoreRequest("The quick brown fox", " jumps over the dog"),
            ScoreRequest("The quick brown fox", " jumps under a tree"),
            ScoreRequest("The quick brown fox", " sleeps"),
            ScoreRequest("1, 2, 3,", " 4, 5"),
        ]
        want = [self.naive_logprob(r) for r in checks]
        bad = next((w for w in want if not math.isfinite(w)), None)
        if bad is not None:  # (every item was left out, exit 0, with the advice "try --dtype
            dtype = str(self.dtype).replace("torch.", "")  # float32" to a float32 run; QA)
            raise ModelError(
                f"{self.spec}: the model's own forward pass gives a non-finite log-prob "
                f"({bad}) for a short plain text in {dtype}: "
                + (
                    "its weights are broken (NaN or infinite values?)"
                    if self.dtype == torch.float32
                    else "a numerical overflow? try --dtype float32"
                )
            )
        if self._windows is None:
            return "layers other than full or sliding-window attention"
        counts = self.tokens_run, self.tokens_useful, self.tokens_min
        try:
            got = [r.logprob for r in self._score_tree(checks)]
        except Exception as exc:  # noqa: BLE001 (any failure of the model's own code)
            return f"{type(exc).__name__} in a tree-attention pass"
        finally:
            self.tokens_run, self.tokens_useful, self.tokens_min = counts
        tol = 1e-3 if self.dtype == torch.float32 else 0.25
        worst = max(abs(g - w) for g, w in zip(got, want))
        if not worst <= tol:  # NaN too
            return f"log-probs differ from a full forward pass by {worst:.3g}"
        return None

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
                f"engine={self._engine_key()}",
            ]
            self._fingerprint = "|".join(parts)
        return self._fingerprint

    def _engine_key(self) -> str:
        """:data:`ENGINE_VERSION`, or 3 where version 4 computes the same numbers."""
        same = (
            self.engine == "prefix-tree"
            and self._windows == {"full_attention": None}
            and not self._eager
        )
        return "3" if same else ENGINE_VERSION

    @property
    def computes_on_local_cpu(self) -> bool:
        return self.device.type == "cpu"

    def __repr__(self) -> str:
        """One line; with the BOS token, which ``-M bos`` sets and the fingerprint holds (two
        backends of one model with and without it printed alike; QA)."""
        dtype = str(self.dtype).replace("torch.", "")
        bos = self.tokenizer.convert_ids_to_tokens(self.bos_id) if self.bos_id is not None else None
        return (
            f"HFBackend(spec={self.spec!r}, device={str(self.device)!r}, dtype={dtype!r}, "
            f"bos={bos!r})"
        )

    def describe(self) -> dict[str, object]:
        """Both batch budgets: on the CPU by default scoring passes are narrower than
        generation's (``_CPU_SCORE_TOKENS``), and a run records the one its scores were made
        under. Not part of the fingerprint (the budgets change speed, not numbers)."""
        return super().describe() | {
            "device": str(self.device),
            "dtype": str(self.dtype).replace("torch.", ""),
            "bos_token_id": self.bos_id,
            "max_batch_tokens": self.score_batch_tokens,
            "max_batch_tokens_generate": self.max_batch_tokens,
            "engine": self.engine,
            "fused": self.fused,
            "parameters": sum(p.numel() for p in self.model.parameters()),
        }

    # --- tokenisation -----------------------------------------------------------------------
    def encode(self, req: ScoreRequest) -> Encoded:
        """Tokenise prefix+continuation as one text; split at the prefix's character offset.

        A token that straddles the boundary belongs to the continuation (its prefix characters
        are reported in ``boundary_chars``), so every order of an item scores the same span
        rule and no token is searched for by value.
        """
        return self.encode_many([req])[0]

    def encode_many(self, requests: Sequence[ScoreRequest]) -> list[Encoded]:
        """:meth:`encode` for many requests, tokenised in one batch call (the fast tokenizer
        runs them in parallel)."""
        return self.planner().encode(requests)

    def planner(self) -> Planner:
        """The host side of :meth:`score` with the current settings."""
        return Planner(
            tokenizer=self._fast_tokenizer() or self.tokenizer,
            bos_id=self.bos_id,
            max_length=self.max_length,
            max_tree_nodes=self.max_tree_nodes,
            max_batch_tokens=self.score_batch_tokens,
            pad_tolerance=self.pad_tolerance,
            chunk_tokens=self.plan_chunk_tokens,
            key_cost=self.key_cost,
        )

    def _fast_tokenizer(self) -> Any:
        return fast_tokenizer(self.tokenizer)

    # --- scoring ------------------------------------------------------------------------------
    def _token_logprobs(
        self,
        hidden: torch.Tensor,
        targets: torch.Tensor,
        argmax: torch.Tensor | None = None,
        moments: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """log p(target) for rows of final hidden states, in float32, chunked over rows.

        When ``argmax`` (a long tensor, one entry per row) is given, the most likely token of
        each row is written into it; when ``moments`` (float32 [rows, 2]) is given, each row's
        mean and std of log p over the vocabulary (:func:`_vocab_moments`, same logits chunk).
        On the CPU in blocks of the vocabulary (:meth:`_blocked_logprobs`)."""
        assert self._head_w is not None
        if hidden.device.type == "cpu":
            return self._blocked_logprobs(hidden, targets, argmax, moments)
        out = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
        step = _HEAD_ROWS
        if hidden.device.type == "cuda":  # about 256 MB of float32 logits at a time
            step = max(_HEAD_ROWS, (1 << 26) // self._head_w.shape[0])
        for s in range(0, hidden.shape[0], step):
            logits = self._head_logits(hidden[s : s + step])
            if self._softcap:
                logits.div_(self._softcap).tanh_().mul_(self._softcap)
            if self._lse_kernel is not None and argmax is None and moments is None:
                out[s : s + step] = self._lse_kernel(logits, targets[s : s + step])
                continue
            target = logits.gather(-1, targets[s : s + step, None]).squeeze(-1)
            if argmax is not None:
                argmax[s : s + step] = logits.argmax(-1)
            top = logits.amax(-1)
            if moments is not None:  # exp(logits - top), then p, in one more block
                scratch = self._kept("probs", (logits.shape[0], logits.shape[1]))
                lse = top + torch.sub(logits, top[:, None], out=scratch).exp_().sum(-1).log_()
                moments[s : s + step] = _vocab_moments(logits.sub_(lse[:, None]), scratch)
            else:  # in place: no second vocabulary-sized block
                lse = top + logits.sub_(top[:, None]).exp_().sum(-1).log_()
            out[s : s + step] = target - lse
        return out

    def _blocked_logprobs(
        self,
        hidden: torch.Tensor,
        targets: torch.Tensor,
        argmax: torch.Tensor | None = None,
        moments: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """:meth:`_token_logprobs` on the CPU, the vocabulary taken in blocks of
        :data:`_VOCAB_BLOCK` columns.

        A [512, 4,096] block of logits stays in cache between the product that writes it and
        the passes that read it; a [256, 49,152] one (50 MiB) goes out to memory and back, and
        the product writing it ran at 263 GFLOP/s against 348 in blocks (SmolLM2's head, one
        host). Per block, its maximum (and where, for ``argmax``), its sum of exponentials and,
        for ``moments``, the mean and variance of its logits under its own softmax are kept;
        at the end they are combined: the log-sum-exp of the blocks' log-sum-exps, and the
        blocks' means and variances weighted by their share of the probability (the parallel
        form of the variance, which does not cancel as E[x^2] - E[x]^2 would). The target's
        logit is read from its block, so ``target - lse`` is never above zero."""
        assert self._head_w is not None
        w, rows, vb = self._head_w, _BLOCKED_ROWS, _VOCAB_BLOCK
        vocab = w.shape[0]
        nblocks = -(-vocab // vb)
        hidden = hidden.float()
        out = torch.empty(hidden.shape[0], dtype=torch.float32)
        for s in range(0, hidden.shape[0], rows):
            h, tg = hidden[s : s + rows], targets[s : s + rows]
            n = h.shape[0]
            block_of, offset = tg // vb, (tg % vb)[:, None]
            tops, sums, means, varis = torch.empty((4, n, nblocks), dtype=torch.float32)
            where = torch.empty((n, nblocks), dtype=torch.long) if argmax is not None else None
            target = torch.empty(n, dtype=torch.float32)
            buf = self._kept("block", (n, vb))
            if moments is not None:
                scratch = (self._kept("probs", (n, vb)), self._kept("products", (n, vb)))
            for j, v in enumerate(range(0, vocab, vb)):
                cols = min(vb, vocab - v)  # (the last block may be narrower: kept contiguous)
                logits = buf.view(-1)[: n * cols].view(n, cols)
                torch.mm(h, w[v : v + vb].t(), out=logits)
                if self._head_b is not None:
                    logits.add_(self._head_b[v : v + vb].float())
                if self._softcap:
                    logits.div_(self._softcap).tanh_().mul_(self._softcap)
                picked = logits.gather(1, offset.clamp(max=logits.shape[1] - 1)).squeeze(1)
                target = torch.where(block_of == j, picked, target)
                if where is not None:
                    top, at = logits.max(-1)
                    where[:, j] = at + v
                else:
                    top = logits.amax(-1)
                tops[:, j] = top
                if moments is None:  # in place: no second block
                    sums[:, j] = logits.sub_(top[:, None]).exp_().sum(-1)
                    continue
                # mean and variance of (logit - top) under the block's softmax: values near 0,
                # products summed by .sum() (einsum's float32 dot was 25x less accurate)
                d = logits.sub_(top[:, None])
                p, tmp = (b.view(-1)[: n * cols].view(n, cols) for b in scratch)
                total = torch.exp(d, out=p).sum(-1)
                sums[:, j] = total
                mean = torch.mul(p, d, out=tmp).sum(-1).div_(total)
                means[:, j] = mean
                varis[:, j] = p.mul_(d.sub_(mean[:, None]).square_()).sum(-1).div_(total)
            peak = tops.amax(-1)
            if where is not None and argmax is not None:
                argmax[s : s + n] = where.gather(1, tops.argmax(-1, keepdim=True)).squeeze(1)
            tops.sub_(peak[:, None])  # each block's top - the row's
            share = tops.exp().mul_(sums)  # each block's probability x z
            z = share.sum(-1)
            lse = peak + z.log()
            out[s : s + n] = target - lse
            if moments is not None:  # log p = (logit - top) + (top - peak) - log z
                share.div_(z[:, None])
                means.add_(tops)
                mean = (share * means).sum(-1)
                var = (share * (varis + (means - mean[:, None]).square_())).sum(-1)
                moments[s : s + n, 0] = mean - z.log()
                moments[s : s + n, 1] = var.clamp_min_(0).sqrt_()
        return out

    def _head_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 vocabulary logits of final hidden states.

        On CUDA with a bfloat16/float16 model the product runs on the half-precision operands
        with float32 output (``torch.mm(out_dtype=float32)``): the products of half values are
        exact in float32 and the sums accumulate in float32, so this equals the float32 product
        of the same values at the half-precision matmul rate."""
        assert self._head_w is not None
        bias = None if self._head_b is None else self._head_b.float()
        if self._head_half is not None:
            try:
                logits = torch.mm(hidden, self._head_half.t(), out_dtype=torch.float32)
                return logits if bias is None else logits + bias
            except (RuntimeError, TypeError):  # no mm(out_dtype) in this torch build
                self._head_half = None
        return torch.nn.functional.linear(hidden.float(), self._head_w, bias)

    def _kept(self, name: str, shape: tuple[int, int]) -> torch.Tensor:
        """A float32 block of ``shape`` [rows, columns]: on the CPU from this thread's buffer
        ``name``, kept for the backend's life (made again when more rows or other columns are
        asked for); on another device a fresh one (its caching allocator reuses memory itself).
        Fresh blocks of logits on the CPU were each mapped, faulted in page by page, zeroed by
        the kernel and unmapped (a third of the head's time, docs/performance.md)."""
        rows, cols = shape
        if self.device.type != "cpu":
            return torch.empty(shape, dtype=torch.float32, device=self.device)
        kept: dict[str, torch.Tensor] = self._buffers.__dict__
        buf = kept.get(name)
        inference = torch.is_inference_mode_enabled()  # (a buffer made in it is read-only outside)
        if (
            buf is None
            or buf.shape[0] < rows
            or buf.shape[1] != cols
            or buf.is_inference() != inference
        ):
            buf = kept[name] = torch.empty((max(rows, _HEAD_ROWS), cols), dtype=torch.float32)
        return buf[:rows]

    def _node_logprobs(
        self,
        states: torch.Tensor,
        targets: torch.Tensor,
        argmax: torch.Tensor | None = None,
        moments: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """log p(target) from final hidden states (split head) or from logits (fallback);
        ``argmax`` and ``moments`` as in :meth:`_token_logprobs`."""
        if self._split_head:
            return self._token_logprobs(states, targets, argmax, moments)
        if argmax is not None:
            argmax[:] = states.argmax(-1)
        logp = torch.log_softmax(states.float(), -1)
        out = logp.gather(-1, targets[:, None]).squeeze(-1)
        if moments is not None:
            for s in range(0, logp.shape[0], _HEAD_ROWS):
                moments[s : s + _HEAD_ROWS] = _vocab_moments(logp[s : s + _HEAD_ROWS])
        return out

    def _trunk(self) -> Any:
        """The module run for scoring: the decoder without its head (split head), or the model."""
        return self._decoder if self._split_head else self.model

    def _forward(self, ids: torch.Tensor, cache: Any = None, **kw: Any) -> tuple[torch.Tensor, Any]:
        """Final hidden states (or logits, on the fallback path) and the KV cache."""
        if cache is not None:
            kw[self._cache_kw] = cache
        if self._fusion is not None:
            from .fusion import running

            with running():
                out = self._trunk()(ids, **kw)
        else:
            out = self._trunk()(ids, **kw)
        cache_out = out.get("cache")  # (transformers 5.24; reading the old name warns there)
        if cache_out is None:
            cache_out = out.get("past_key_values")
        return out.last_hidden_state if self._split_head else out.logits, cache_out

    def _run_prefixes(self, prefixes: list[tuple[int, ...]]) -> tuple[list[Any], torch.Tensor]:
        """Run prefixes once (right-padded batch): the per-layer (keys, values) of the batch, each
        [rows, heads, width, dim], and each prefix's last final state [rows, hidden]."""
        dev = self.device
        ids, _ = right_padded(prefixes)
        lengths = np.array([len(p) for p in prefixes])
        width = ids.shape[1]
        kw: dict[str, Any] = {}
        if lengths.min() < width:  # (equal lengths: no mask, the causal kernel)
            # built on the device from the lengths: given a 2-D mask, transformers asks the
            # device whether it is all ones, a synchronisation that idles a GPU between passes
            mask = chain_mask(self._upload(lengths), width, self._windows)
            kw["attention_mask"] = self._model_mask(mask)
        # a cache of full layers: a sliding-window layer's own cache would keep only the last
        # window of keys (the mask of this pass applies the window)
        from transformers import DynamicCache

        states, cache = self._forward(self._upload(ids), DynamicCache(), use_cache=True, **kw)
        self.tokens_run += ids.numel()
        self.tokens_useful += int(lengths.sum())
        last = self._upload(lengths - 1)
        layers = [(layer.keys, layer.values) for layer in cache.layers]
        return layers, states[torch.arange(len(prefixes), device=dev), last]

    def _hold_prefixes(self, prefixes: list[tuple[int, ...]]) -> _Held:
        """Run a group of prefixes in length-bucketed batches and gather their KV caches into
        one padded tensor per layer (slot = position in ``prefixes``)."""
        n, width = len(prefixes), max(len(p) for p in prefixes)
        keys: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        lasts: list[torch.Tensor] = []
        slots: list[int] = []
        sizes = [(i, len(p)) for i, p in enumerate(prefixes)]
        for batch in self._chunks(sizes, self.score_batch_tokens, self.pad_tolerance):
            layers, last = self._run_prefixes([prefixes[i] for i in batch])
            if not keys:
                for k, v in layers:
                    keys.append(k.new_zeros((n, k.shape[1], width, k.shape[3])))
                    values.append(v.new_zeros((n, v.shape[1], width, v.shape[3])))
            rows = self._upload(np.asarray(batch))
            for i, (k, v) in enumerate(layers):
                keys[i][rows, :, : k.shape[2]] = k
                values[i][rows, :, : v.shape[2]] = v
            lasts.append(last)
            slots.extend(batch)
        order = torch.empty(n, dtype=torch.long, device=self.device)
        order[self._upload(np.asarray(slots))] = torch.arange(n, device=self.device)
        return _Held(keys, values, torch.cat(lasts)[order])

    def _run_batch(self, batch: Batch, held: _Held) -> torch.Tensor:
        """One forward pass of subtree rows over their cached prefixes: the log-prob sum of
        every member (on the device, in ``batch.members`` order)."""
        n, width, pw = len(batch.slots), batch.width, batch.prefix_width
        slots = self._upload(batch.slots)
        kv = filled_cache(held.keys, held.values, slots, pw, width)
        pos = self._upload(batch.pos)
        mask = tree_mask(
            batch,
            self._upload(batch.spans),
            self._upload(batch.lengths),
            self._upload(batch.prefix_lengths),
            pos,
            self._windows,
        )
        states, _ = self._forward(
            self._upload(batch.ids),
            attention_mask=self._model_mask(mask),
            position_ids=pos,
            cache=kv,
        )
        flat = torch.cat([states.reshape(n * width, -1), held.last.index_select(0, slots)])
        tgt = self._upload(batch.targets)
        node_lp = self._node_logprobs(flat[self._upload(batch.src)], tgt).double()
        node_lp = torch.cat([node_lp, node_lp.new_zeros(1)])
        self.tokens_run += n * width
        self.tokens_useful += batch.nodes
        return node_lp[self._upload(batch.index)].sum(-1)

    def _model_mask(self, mask: Any) -> Any:
        """A boolean mask (or dict of them) in the form this model's attention takes it."""
        return _additive(mask, self.dtype) if self._float_mask else mask

    def _upload(self, array: np.ndarray | torch.Tensor) -> torch.Tensor:
        """A host array on the model's device; on CUDA through pinned memory without waiting
        for the device, so the host prepares the next batch while this one runs (a plain
        ``tensor.to(device)`` or ``torch.tensor(..., device=...)`` from pageable memory waits
        for all the work queued before it)."""
        t = torch.from_numpy(array) if isinstance(array, np.ndarray) else array
        if self.device.type != "cuda":
            return t
        return t.pin_memory().to(self.device, non_blocking=True)

    def _chunks(
        self,
        sizes: list[tuple[int, int]],
        budget: int | None = None,
        max_pad: float = 0.1,
        extra: dict[int, int] | None = None,
    ) -> list[list[int]]:
        """:func:`~.tree_plan.bucket` under this backend's budget by default."""
        return bucket(sizes, budget or self.max_batch_tokens, max_pad, extra)

    def score(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[ScoreResult]:
        if self.engine == "full-sequence":
            from .hf_text import score_full

            return score_full(self, requests, progress)
        return self._score_tree(requests, progress)

    def _score_tree(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[ScoreResult]:
        return _TreeCall(self, requests, progress).finish()

    def score_stream(
        self, calls: Iterable[Sequence[ScoreRequest]], progress: ProgressFn | None = None
    ) -> Iterator[list[ScoreResult]]:
        """With :attr:`overlap_calls`, each call's first unit is queued on the device before
        the previous call's results are read back and yielded, and the rest of it before the
        next list is taken from ``calls``: the host's work between calls (the caller's own,
        then planning the next call's first chunk) overlaps the device's.

        A call that fails to start still yields the previous call's results first."""
        if self.engine != "prefix-tree" or not self.overlap_calls:
            yield from super().score_stream(calls, progress)
            return
        pending = iter(calls)
        previous: _TreeCall | None = None
        while True:
            current: _TreeCall | None = None
            error: BaseException | None = None
            try:  # the caller's work for the next list, then its first unit
                requests = next(pending, None)
                if requests is not None:
                    current = _TreeCall(self, requests, progress)
                    current.queue(first_only=True)
            except BaseException as exc:  # noqa: BLE001 (re-raised once the last call is out)
                error = exc
            if previous is not None:
                yield previous.finish()
            if error is not None:
                raise error
            if current is None:
                return
            current.queue()
            previous = current

    def _units(self, requests: Sequence[ScoreRequest]) -> Iterator[Unit]:
        """The planned units of one call, lazily (in line, or from the planning process)."""
        planner = self.planner()
        if (
            self.plan_workers
            and planner.chunk_tokens
            and hasattr(planner.tokenizer, "encode_batch")
        ):
            if self._pool is None:
                self._pool = planning_pool(planner.tokenizer)
            return plan_in_process(self._pool, planner, requests)
        return (
            u
            for chunk in planner.chunks(requests)
            for u in planner.plan([requests[i] for i in chunk], chunk)
        )

    def _start_read(
        self, sums: torch.Tensor, members: list[int]
    ) -> tuple[torch.Tensor, list[int], Any]:
        """Start copying ``sums`` to the host (asynchronously on CUDA)."""
        if self.device.type != "cuda":
            return sums, members, None
        host = torch.empty(sums.shape, dtype=sums.dtype, pin_memory=True)
        host.copy_(sums, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return host, members, event

    @staticmethod
    def _finish_read(
        read: tuple[torch.Tensor, list[int], Any],
        values: list[float],
        progress: ProgressFn | None,
    ) -> None:
        host, members, event = read
        if event is not None:
            event.synchronize()
        for m, v in zip(members, host.tolist()):
            values[m] = v
        if progress is not None:
            progress(len(members))

    def token_stats(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[TokenStats]:
        from .hf_text import token_stats

        return token_stats(self, requests, progress)

    def generate(
        self, requests: Sequence[GenerateRequest], progress: ProgressFn | None = None
    ) -> list[Generation]:
        from .hf_text import generate

        return generate(self, requests, progress)

    def decode(self, tokens: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(tokens)))

    def naive_encode(self, req: ScoreRequest) -> tuple[list[int], list[int]]:
        """(prefix ids with BOS, scored ids) of ``req`` by the span rule of :meth:`encode`,
        computed apart from the engine's code: the whole text through the transformers
        tokenizer's offsets, the scored tokens those ending past the prefix. A reference
        that used :meth:`encode` could not see a bug of the engine's split (a benchmark
        review). A tokenizer without offsets (a slow one) falls back to :meth:`encode`."""
        cut = len(req.prefix)
        try:
            enc = self.tokenizer(
                req.prefix + req.continuation,
                add_special_tokens=False,
                return_offsets_mapping=True,
            )
        except (NotImplementedError, TypeError, ValueError):
            e = self.encode(req)
            return list(e.prefix), list(e.cont)
        ids, ends = list(enc["input_ids"]), [end for _, end in enc["offset_mapping"]]
        split = next((k for k, end in enumerate(ends) if end > cut), len(ids))
        bos = [self.bos_id] if self.bos_id is not None else []
        return bos + ids[:split], ids[split:]

    def naive_logprob(self, req: ScoreRequest) -> float:
        """Reference computation: one full forward pass of the model's own (unfused) code,
        float64 log-softmax, tokenised by :meth:`naive_encode` (for tests)."""
        prefix, cont = self.naive_encode(req)
        ids = torch.tensor([prefix + cont], device=self.device)
        with torch.inference_mode(), self.eager():
            logp = torch.log_softmax(self.model(ids).logits.double(), -1)[0]
        p = len(prefix)
        return float(sum(logp[p - 1 + j, t].item() for j, t in enumerate(cont)))


class _TreeCall:
    """One call of the prefix-tree engine in two steps: :meth:`queue` puts its units' work on
    the device, each unit's sums read back once the next unit is queued (the device runs
    ahead of the host); :meth:`finish` queues what is left, waits for the last read and
    returns the results. Between the steps the host is free (:meth:`HFBackend.score_stream`)."""

    def __init__(
        self, backend: HFBackend, requests: Sequence[ScoreRequest], progress: ProgressFn | None
    ) -> None:
        n = len(requests)
        self.backend = backend
        self.progress = progress
        self.values = [math.nan] * n
        self.computed = [False] * n  # the others are too long for the model
        self.lengths = [0] * n
        self.boundaries = [0] * n
        self.units = backend._units(requests)
        self.waiting: tuple[torch.Tensor, list[int], Any] | None = None

    def queue(self, first_only: bool = False) -> None:
        """Queue the units left (``first_only``: up to the first that runs the model)."""
        for unit in self.units:
            if self._queue(unit) and first_only:
                return

    def _queue(self, unit: Unit) -> bool:
        backend = self.backend
        for i, k, b in unit.meta:
            self.lengths[i], self.boundaries[i] = k, b
        backend.tokens_min += unit.minimum
        if self.progress is not None and unit.skipped:
            self.progress(unit.skipped)
        for m in unit.zeros:
            self.values[m], self.computed[m] = 0.0, True
        if not unit.batches:
            return False
        with torch.inference_mode():
            held = backend._hold_prefixes(unit.prefixes)
            sums = [backend._run_batch(b, held) for b in unit.batches]
            del held
            members = [m for b in unit.batches for m in b.members]
            queued = backend._start_read(torch.cat(sums), members)
        for m in members:
            self.computed[m] = True
        if self.waiting is not None:
            backend._finish_read(self.waiting, self.values, self.progress)
        self.waiting = queued
        return True

    def finish(self) -> list[ScoreResult]:
        self.queue()
        if self.waiting is not None:
            self.backend._finish_read(self.waiting, self.values, self.progress)
            self.waiting = None
        return [
            ScoreResult(v, k, b, too_long=not c)
            for v, k, b, c in zip(self.values, self.lengths, self.boundaries, self.computed)
        ]


def _additive(mask: Any, dtype: torch.dtype) -> Any:
    """A boolean mask (or a dict of them) as the additive float mask that eager attention adds
    to its scores (0 where attended, the dtype's minimum elsewhere); SDPA takes booleans, eager
    attention would add them as 1 and 0 and mask nothing."""
    if isinstance(mask, dict):
        return {kind: _additive(m, dtype) for kind, m in mask.items()}
    # (filled on the device: a scalar made with torch.tensor(..., device=...) is copied from
    # the host, which waits for all the work queued before it)
    out = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return out.masked_fill_(~mask, torch.finfo(dtype).min)


def _cache_keyword(forward: Any) -> str:
    """The name a model's forward takes its KV cache by: ``cache`` from transformers 5.24,
    ``past_key_values`` before (5.24 still takes it, with a FutureWarning on every run)."""
    import inspect

    try:
        params = inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def _converted_copy_folder(name: str) -> bool:
    """Whether ``name`` is a folder under the model cache (a GGUF's converted copy)."""
    from ..paths import model_cache_dir

    try:
        return Path(name).resolve().is_relative_to(model_cache_dir().resolve())
    except (OSError, ValueError):
        return False
