"""Content digests of model files, computed once per change of the file.

A model's identity in the score cache (and in a run folder's settings) must change whenever
its weights do. File size and modification time alone do not ensure it: ``touch -r``,
``cp -p``, ``rsync -a`` and ``tar`` keep a modification time while the bytes change, and a
re-written file of the same size then reused the old model's cached scores. The digest is the
SHA-256 of the bytes; it is remembered per (path, size, mtime, ctime, inode) in
``file-digests.json`` next to the score cache, so a file is read in full only after it changes
(the inode change time ``ctime`` cannot be set back by a user).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from ..paths import cache_root, remove_quietly

__all__ = ["file_digest"]

_CHUNK = 1 << 22
_LOCK = threading.Lock()
_MEMO: dict[str, tuple[str, str]] = {}
"""In-process copy: resolved path -> (stat key, digest)."""


def _stat_key(st: os.stat_result) -> str:
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}:{st.st_dev}"


def _memo_path() -> Path:
    return cache_root() / "file-digests.json"


def _load_memo() -> dict[str, list[str]]:
    try:
        data = json.loads(_memo_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_memo(path: str, key: str, digest: str) -> None:
    """Add one entry to the memo file (best effort: a memo that cannot be written only costs
    hashing the file again next time)."""
    memo = _load_memo()
    memo[path] = [key, digest]
    target = _memo_path()
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(memo, indent=0, sort_keys=True), encoding="utf-8")
        os.replace(tmp, target)
    except OSError:
        remove_quietly(tmp)


def file_digest(path: Path) -> str:
    """SHA-256 (hex) of the file's bytes; read in full only when the file changed since the
    last call (on any process sharing the cache folder)."""
    resolved = str(path.resolve())
    st = path.stat()
    key = _stat_key(st)
    with _LOCK:
        hit = _MEMO.get(resolved)
        if hit is not None and hit[0] == key:
            return hit[1]
        stored = _load_memo().get(resolved)
        if isinstance(stored, list) and len(stored) == 2 and stored[0] == key:
            _MEMO[resolved] = (key, str(stored[1]))
            return str(stored[1])
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
        digest = h.hexdigest()
        if _stat_key(path.stat()) == key:  # not changed while it was read
            _MEMO[resolved] = (key, digest)
            _save_memo(resolved, key, digest)
        return digest
