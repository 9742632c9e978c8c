"""A model's tokenizer alone, as its backend would tokenise: for counting what a run costs
before any weights are loaded (``contamscope inspect --model``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ModelError
from .registry import check_model_spec, missing_extra, normalize_model_spec

__all__ = ["ModelTokenizer", "load_tokenizer", "tokenizer_of"]


@dataclass(frozen=True)
class ModelTokenizer:
    """What scoring needs of a model's tokenizer."""

    spec: str
    """The model spec it belongs to (normalised)."""
    tokenizer: Any
    """A ``tokenizers.Tokenizer`` where the fast one gives what transformers gives, else the
    transformers tokenizer."""
    bos_id: int | None
    """The token prepended to every text (``-M bos``), None for none."""
    max_length: int | None
    """The model's context in tokens (``max_position_embeddings``), None when unknown."""

    def __repr__(self) -> str:
        """One line: the tokenizer's own repr lists its whole added vocabulary (5,000
        characters for SmolLM2's; QA)."""
        size = getattr(self.tokenizer, "get_vocab_size", None) or getattr(
            self.tokenizer, "__len__", None
        )
        vocab = f", vocab={size()}" if callable(size) else ""
        return (
            f"ModelTokenizer(spec={self.spec!r}, {type(self.tokenizer).__name__}{vocab}, "
            f"bos_id={self.bos_id}, max_length={self.max_length})"
        )


def _context(
    folder: Path | str, revision: str | None, read: Mapping[str, str] | None = None
) -> int | None:
    """The model's context from its config (``max_position_embeddings``, also of a nested
    ``text_config``), None when there is none or it cannot be read (``read``: ``gguf_file``)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(folder), revision=revision, **(read or {}))
    except Exception:  # noqa: BLE001 (no config: the counts say the context is unknown)
        return None
    for part in (config, getattr(config, "text_config", None)):
        value = getattr(part, "max_position_embeddings", None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def load_tokenizer(spec: str, options: Mapping[str, str] | None = None) -> ModelTokenizer:
    """The tokenizer of the model ``spec`` names, with its BOS as the backend resolves it
    (``options``: the ``-M`` options; only ``bos`` and ``revision`` matter here). A GGUF
    model's tokenizer (SmolLM2's, a ``.gguf`` file's) comes from its converted folder where
    there is one, else from the GGUF file's metadata, without converting the weights; Gemma
    3's from its folder (joined and converted on first use, as a run would); a served model
    (``openai:``) has no tokenizer here.

    >>> load_tokenizer("openai:http://localhost:8000/v1#m")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ConfigError: openai:...: a served model's tokenizer is not available here ...
    """
    opts = dict(options or {})
    spec = normalize_model_spec(spec)
    check_model_spec(spec)
    kind, _, rest = spec.partition(":")
    default_bos = "auto"
    if kind == "openai":
        raise ConfigError(
            f"{spec}: a served model's tokenizer is not available here; give the same model as "
            "hf:PATH_OR_HUB_ID (only its tokenizer is read), or leave --model out"
        )
    try:  # (after the check above: a served model's spec needs neither; packaging QA)
        from transformers import AutoTokenizer

        from .hf import fast_tokenizer, quiet_transformers, resolve_bos
    except ImportError as exc:
        raise missing_extra(exc, "hf", f"reading {spec}'s tokenizer") from None
    read: dict[str, str] = {}  # (a GGUF file not converted yet: its name, read for metadata)
    if kind == "smollm2":
        from .bundled import SMOLLM2, gguf_tokenizer_source, smollm2_gguf_path

        folder: Path | str
        folder, read = gguf_tokenizer_source(smollm2_gguf_path())
        default_bos = str(SMOLLM2["bos"])
    elif kind == "gemma3":
        from .bundled import gemma3_folder

        folder = gemma3_folder()
    else:  # hf: or vllm: a folder, a .gguf file or a hub id
        path = Path(rest).expanduser()
        if path.suffix.lower() == ".gguf" and path.is_file():
            from .bundled import check_gguf_header, gguf_tokenizer_source

            check_gguf_header(path)
            folder, read = gguf_tokenizer_source(path)
        else:
            folder = path if path.exists() else rest
    try:
        with quiet_transformers():
            tok = AutoTokenizer.from_pretrained(str(folder), revision=opts.get("revision"), **read)
    except Exception as exc:  # noqa: BLE001 (third-party loading code: one line, no traceback)
        if read:  # the GGUF file itself, read for its tokenizer: said as its conversion says it
            from .bundled import unreadable_gguf

            raise unreadable_gguf(Path(folder) / read["gguf_file"], exc) from None
        text = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ModelError(f"could not load the tokenizer of {spec}: {text}") from None
    return ModelTokenizer(
        spec=spec,
        tokenizer=fast_tokenizer(tok) or tok,
        bos_id=resolve_bos(tok, opts.get("bos", default_bos)),
        max_length=_context(folder, opts.get("revision"), read),
    )


def tokenizer_of(backend: Any) -> ModelTokenizer | None:
    """The :class:`ModelTokenizer` a loaded transformers backend scores with, None for a
    backend without one here (a served model)."""
    planner = getattr(backend, "planner", None)
    if planner is None:
        return None
    plan = planner()
    return ModelTokenizer(backend.spec, plan.tokenizer, plan.bos_id, plan.max_length)
