"""The source distribution holds what a user of it needs: the docs the messages point to, the
tests and benchmarks the README runs, the Makefile; the wheel holds the package alone."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tracked_copy(dest: Path) -> Path:
    """The checkout's tracked files (and MANIFEST.in) in DEST: a build writes its egg-info into
    the tree it builds, and the checkout is not touched."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout (git ls-files) to know the tracked files")
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in filter(None, names):
        src = ROOT / raw.decode()
        if src.is_file():
            (dest / raw.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / raw.decode())
    return dest


def _build(kind: str, tree: Path, out: Path) -> Path:
    code = f"import sys; from setuptools import build_meta as b; print(b.build_{kind}(sys.argv[1]))"
    res = subprocess.run(
        [sys.executable, "-c", code, str(out)], cwd=tree, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return out / res.stdout.strip().splitlines()[-1]


def test_the_sdist_holds_every_doc_a_message_names_and_the_wheel_only_the_package(
    tmp_path: Path,
) -> None:
    """The sdist had no docs/ (44 messages point to docs/*.md), tests, benchmarks or Makefile."""
    tree = _tracked_copy(tmp_path / "tree")
    sdist = _build("sdist", tree, tmp_path)
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    named = set()
    for py in (ROOT / "src" / "contamscope").rglob("*.py"):
        named |= set(re.findall(r"docs/[a-z_]+\.md", py.read_text(encoding="utf-8")))
    assert len(named) >= 8, named  # (the pattern still finds them)
    assert named <= names, sorted(named - names)
    assert {"Makefile", "README.md", "LICENSE", "tests/conftest.py"} <= names
    assert any(n.startswith("benchmarks/") and n.endswith(".py") for n in names)
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    wheel = _build("wheel", tree, tmp_path)  # built from the tree, as pip does
    tops = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()}
    assert len(tops) == 2 and "contamscope" in tops, tops
    assert all(t == "contamscope" or t.endswith(".dist-info") for t in tops), tops
