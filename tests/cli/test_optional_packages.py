"""A package an optional extra brings that is not installed is one line naming the extra, never
a traceback (packaging QA: a core-only install met three)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BLOCKER = """
import sys
BLOCKED = set(sys.argv[1].split(","))
class Block:
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
sys.argv = ["contamscope"] + sys.argv[2:]
from contamscope.cli.main import main
main()
"""


@pytest.mark.parametrize(
    ("missing", "args", "said"),
    [
        (
            "httpx",
            ["permutation", "--model", "openai:http://127.0.0.1:9/v1#m", "--out", "r"],
            "error: this backend needs optional packages (httpx is missing): pip install "
            "'contamscope[openai]'",
        ),
        (
            "transformers,torch",
            ["inspect", "--model", "openai:http://127.0.0.1:9/v1#m"],
            "a served model's tokenizer is not available here",
        ),
        (
            "transformers,torch",
            ["inspect", "--model", "smollm2"],
            "error: reading smollm2's tokenizer needs optional packages (transformers is "
            "missing): pip install 'contamscope[hf]'",
        ),
        (
            "transformers",  # (torch there: the backend's module loads, transformers not)
            ["permutation", "--model", "smollm2", "--out", "r"],
            "error: this backend needs optional packages (transformers is missing): pip "
            "install 'contamscope[hf]'",
        ),
        (
            "torch",
            ["permutation", "--model", "vllm:foo", "--out", "r"],
            "error: --model vllm:foo: the vllm package is not installed",
        ),
    ],
)
def test_a_missing_optional_package_is_one_line(
    tmp_path: Path, missing: str, args: list[str], said: str
) -> None:
    (tmp_path / "b.csv").write_text("Q1?,a,b,c,d,A\nQ2?,e,f,g,h,B\n", encoding="utf-8")
    (tmp_path / "block.py").write_text(BLOCKER, encoding="utf-8")
    res = subprocess.run(
        [sys.executable, "block.py", missing, *args, "--benchmark", "b.csv"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, CONTAMSCOPE_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="200"),
        timeout=300,
    )
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and said in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
