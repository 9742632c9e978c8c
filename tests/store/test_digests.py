"""File digests behind local model identities: new bytes under an old size and mtime are seen."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from contamscope.backends.hf import path_identities
from contamscope.store.digests import file_digest


def test_new_bytes_with_the_old_size_and_mtime_change_the_digest_and_identity(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    f = folder / "model.safetensors"
    f.write_bytes(b"a" * 1000)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    before, ident = file_digest(f), path_identities(folder)
    assert before == hashlib.sha256(b"a" * 1000).hexdigest()
    st = f.stat()
    f.write_bytes(b"b" * 1000)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # touch -r, cp -p, rsync -a
    assert file_digest(f) == hashlib.sha256(b"b" * 1000).hexdigest() != before
    assert path_identities(folder) != ident


def test_an_unchanged_file_is_not_read_again(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "w.bin"
    f.write_bytes(b"x" * 10)
    first = file_digest(f)
    assert (Path(os.environ["CONTAMSCOPE_CACHE_DIR"]) / "file-digests.json").is_file()
    import contamscope.store.digests as d

    d._MEMO.clear()  # a new process: the memo file answers, the file is not opened
    monkeypatch.setattr("builtins.open", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    assert file_digest(f) == first
