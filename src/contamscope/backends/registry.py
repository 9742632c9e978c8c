"""Find a backend by model spec string.

Specs: ``smollm2`` (the bundled default), ``gemma3`` (bundled Gemma 3 270M, a base model, after
``make gemma``), ``hf:PATH_OR_HUB_ID`` (a local folder, a ``.gguf``
file, or a hub id when online), ``openai:BASE_URL#MODEL`` (an OpenAI-compatible server) and
``vllm:PATH_OR_HUB_ID`` (vLLM's offline engine). Backends import their optional dependencies
lazily and name the extra to install when they are missing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError, ModelError
from .base import Backend

__all__ = [
    "load_backend",
    "BACKENDS",
    "DTYPE_NAMES",
    "check_model_spec",
    "normalize_model_spec",
    "parse_model_options",
]

# prefix -> (module, factory attribute, extra to install)
BACKENDS: dict[str, tuple[str, str, str]] = {
    "hf": ("contamscope.backends.hf", "HFBackend.from_spec", "hf"),
    "smollm2": ("contamscope.backends.bundled", "load_smollm2", "hf"),
    "gemma3": ("contamscope.backends.bundled", "load_gemma3", "hf"),
    "openai": ("contamscope.backends.openai_compat", "OpenAIBackend.from_spec", "openai"),
    "vllm": ("contamscope.backends.vllm", "VLLMBackend.from_spec", "vllm"),
}


def missing_extra(exc: ImportError, extra: str, what: str = "this backend") -> ConfigError:
    """The one-line error for ``what`` that needs an optional package ``exc`` did not find:
    it names the package and the extra that installs it."""
    return ConfigError(
        f"{what} needs optional packages ({exc.name} is missing): "
        f"pip install 'contamscope[{extra}]'"
    )


def _resolve(module: str, attr: str, extra: str) -> Callable[..., Backend]:
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise missing_extra(exc, extra) from None
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]


def parse_model_options(pairs: list[str] | None) -> dict[str, str]:
    """Parse ``-M key=value`` options into a dict (ConfigError names a malformed one)."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"-M {pair!r}: expected key=value")
        if key.strip() in out and out[key.strip()] != value.strip():  # the last one won (QA)
            raise ConfigError(
                f"-M {key.strip()} is given twice ({out[key.strip()]!r} and {value.strip()!r}): "
                "give it once"
            )
        out[key.strip()] = value.strip()
    return out


DTYPE_NAMES = ("auto", "float32", "bfloat16", "float16")
"""What ``--dtype`` takes (the backend resolves ``auto``)."""


def normalize_model_spec(spec: str) -> str:
    """A bare path to a local model folder or ``.gguf`` file is read as ``hf:PATH``; any other
    spec is returned as it is (a run folder stores the normalised spec, so ``--model ./m`` and
    ``--model hf:./m`` resume each other's runs).

    >>> normalize_model_spec("smollm2")
    'smollm2'
    """
    kind, sep, _ = spec.partition(":")
    if (sep and kind in BACKENDS) or spec in BACKENDS or not spec.strip():
        return spec  # (an empty spec is no path: Path("") is the current folder)
    path = Path(spec).expanduser()
    if path.is_dir() or (path.suffix.lower() == ".gguf" and path.is_file()):
        return f"hf:{spec}"
    return spec


def check_model_spec(spec: str, dtype: str = "auto", *, paths: bool = True) -> None:
    """Fail now, with the error loading would give, on a spec that names no backend or (with
    ``paths``) a local path that does not exist, and on an unknown ``dtype``: the commands call
    it before reading the benchmark, whose messages (repeats, skipped rows) came first and hid
    the mistake. ``paths=False`` where the model loads on other machines (Ray workers)."""
    kind, sep, rest = spec.partition(":")
    if not sep:
        kind, rest = spec, ""
    if kind not in BACKENDS or (kind in ("hf", "openai", "vllm") and not rest):
        if paths and _path_like(spec):  # a bare path that normalize_model_spec did not take
            _check_local_model(spec, Path(spec).expanduser())
        hub = f" (a hub id takes hf:, as in hf:{spec})" if _hub_id_like(spec) else ""
        raise ModelError(
            f"unknown model spec {spec!r}{hub}; use smollm2 (the bundled default), gemma3, a "
            "model folder, hf:PATH_OR_HUB_ID, openai:BASE_URL#MODEL or vllm:PATH_OR_HUB_ID"
        )
    if kind in ("smollm2", "gemma3") and sep:  # (said after the benchmark was read; QA)
        raise ModelError(f"the model spec {kind!r} takes no argument")
    if kind == "openai":  # (a sweep names its models in its progress and board: QA)
        refuse_secrets_in(rest.partition("#")[0])
    if kind in ("hf", "vllm") and "://" in rest:  # (the URL is not repeated: it may hold a
        shown = f"{kind}:{rest.partition('://')[0][-12:]}://..."  # token, written everywhere)
        if kind == "hf":  # (transformers reads no URL: it was tried as a hub id; QA)
            raise ModelError(
                f"{shown}: hf: takes a local path or a hub id (owner/name), not a URL; download "
                "the model and give its folder"
            )
        secret = _holds_secret(rest)
        if secret is None:
            raise ModelError(f"{shown}: not a URL vLLM can read")
        if secret:
            raise ModelError(
                f"{shown}: the URL holds a user name, password or query string, which would be "
                "written into run folders, reports and the score cache; give the model's path "
                "without them"
            )
    if paths and kind in ("hf", "vllm"):
        path = Path(rest).expanduser()
        if _path_like(rest) or path.exists():  # a local folder wins over a hub id, as in
            _check_local_model(spec, path)  # transformers
    if dtype not in DTYPE_NAMES:
        raise ConfigError(f"--dtype {dtype!r}: expected {', '.join(DTYPE_NAMES)}")


def _holds_secret(url: str) -> bool | None:
    """Whether a URL after ``vllm:`` holds credentials, a query string or ``;`` parameters (a
    ``vllm:s3://bucket/model`` is a path vLLM reads: kept; diff-review QA); None where it is
    no readable URL."""
    try:
        parts = urlsplit(url)
        named = parts.username is not None or parts.password is not None
    except ValueError:
        return None
    return named or bool(parts.query) or ";" in parts.path


def _path_like(text: str) -> bool:
    return text.startswith((".", "/", "~")) or text.lower().endswith(".gguf")


def _hub_id_like(text: str) -> bool:
    owner, sep, name = text.partition("/")
    return bool(sep and owner and name) and "/" not in name and ":" not in text


def _check_local_model(spec: str, path: Path) -> None:
    """A local folder loads only with its ``config.json``; one without was tried anyway, and
    transformers' tokenizer message ('Couldn't instantiate the backend tokenizer ...') came
    after the benchmark had been read."""
    if not path.exists():
        raise ModelError(f"{spec}: no such file or folder")
    if not path.is_dir() and path.suffix.lower() != ".gguf":
        raise ModelError(f"{spec}: expected a model folder or a .gguf file")
    configs = ("config.json", "adapter_config.json")  # a PEFT adapter loads with its base
    if path.is_dir() and not any((path / name).is_file() for name in configs):
        ggufs = sorted(p.name for p in path.glob("*.gguf"))
        hint = f"; it holds {ggufs[0]}: pass that file" if ggufs else ""
        raise ModelError(f"{spec}: not a model folder (no config.json){hint}")


def load_backend(
    spec: str,
    *,
    device: str = "auto",
    dtype: str = "auto",
    options: Mapping[str, str] | None = None,
) -> Backend:
    """Load the backend named by ``spec``.

    >>> load_backend("nonsense")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    contamscope.errors.ModelError: unknown model spec 'nonsense'; use smollm2 (the bundled default), ...
    """
    if not isinstance(spec, str):  # (None was an AttributeError; library QA)
        raise ConfigError(f"model spec: expected text such as 'smollm2', not {type(spec).__name__}")
    if options is not None and not isinstance(options, Mapping):
        raise ConfigError(
            f"options: expected a mapping of -M key to value, not {type(options).__name__}"
        )
    spec = normalize_model_spec(spec)
    check_model_spec(spec)
    for key, value in (options or {}).items():  # ("bos": 1 was a TypeError deep in the load)
        if not isinstance(key, str) or not isinstance(value, str):
            raise ConfigError(
                f"-M {key}={value!r}: backend options are text (key=value strings), "
                f"not {type(value).__name__ if isinstance(key, str) else type(key).__name__}"
            )
    kind, sep, rest = spec.partition(":")
    if not sep:
        kind, rest = spec, ""
    if kind in ("hf", "vllm") and len(rest) > 1 and rest.endswith("/") and Path(rest).is_dir():
        rest = rest.rstrip("/") or "/"  # one folder, one spec: a run typed hf:m/ resumes as hf:m
    module, attr, extra = BACKENDS[kind]
    factory = _resolve(module, attr, extra)
    return factory(rest, device=device, dtype=dtype, options=dict(options or {}))


def refuse_secrets_in(url: str) -> None:
    """A BASE_URL with a user and password (``http://user:key@host/v1``) or a query string
    (``?api_key=...``) is refused without repeating it: the spec is written into settings.json,
    summary.json, reports, leaderboards and the score cache (security QA). A user and password
    also made the client send them as Basic auth in place of ``$CONTAMSCOPE_API_KEY``, and a
    query string had the endpoints appended after it. (Here, not with the openai backend: the
    check runs before any model loads, without httpx installed; packaging QA.)"""
    try:
        parts = urlsplit(url)
        secret = parts.username is not None or parts.password is not None
    except ValueError as exc:  # (an unreadable port or IPv6 address; not repeated)
        raise ModelError(f"openai: BASE_URL is not a URL ({exc})") from None
    if secret or parts.query:
        what = "a user name or password (user:key@)" if secret else "a query string (?...)"
        shown = f"{parts.scheme}://{parts.hostname or ''}{parts.path}"
        raise ModelError(
            f"openai:{shown}: BASE_URL holds {what}, which would be written into run folders, "
            "reports and the score cache; give the key in $CONTAMSCOPE_API_KEY and BASE_URL "
            "without it"
        )
