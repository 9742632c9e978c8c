"""Where contamscope keeps its caches (scores, converted models).

``CONTAMSCOPE_CACHE_DIR`` overrides the default user cache directory;
``CONTAMSCOPE_MODEL_DIR`` the converted-model folder.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root", "default_score_db", "model_cache_dir"]


def cache_root() -> Path:
    env = os.environ.get("CONTAMSCOPE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("contamscope"))


def default_score_db() -> Path:
    """The SQLite score cache used when no ``--cache-dir`` is given."""
    return cache_root() / "scores.sqlite"


def model_cache_dir() -> Path:
    """Converted model copies (e.g. the bundled GGUF as safetensors).

    ``CONTAMSCOPE_MODEL_DIR`` overrides it (tests share one converted copy per session).
    """
    env = os.environ.get("CONTAMSCOPE_MODEL_DIR")
    return Path(env).expanduser() if env else cache_root() / "models"
