"""`contamscope benbench` with --executor ray (same records as local) and the capability probe
(a backend without per-token statistics is refused before any work)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contamscope.backends.base import Capabilities

ROWS = [
    {
        "question": "Tom has 3 apples and buys 4 more apples at the shop.",
        "answer": "He has 3 + 4 = 7 apples in total now.\n#### 7",
        "rewritten_question": "At the shop Tom buys 4 apples; he already had 3.",
        "rewritten_answer": "In total 3 + 4 = 7 apples.\n#### 7",
    },
    {
        "question": "A box holds 12 pens and 5 are taken out of it by Ann.",
        "answer": "12 - 5 = 7 pens remain in the box.\n#### 7",
        "rewritten_question": "Ann takes five pens out of a box of twelve.",
        "rewritten_answer": "The box keeps 12 - 5 = 7 pens.\n#### 7",
    },
]


def _bench(tmp_path: Path) -> Path:
    path = tmp_path / "toy-test.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    return path


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "items.jsonl").read_text(encoding="utf-8").splitlines()]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, abs=1e-4)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def test_cli_ray_executor_gives_local_records(tmp_path: Path, tiny_model_path: Path) -> None:
    pytest.importorskip("ray", reason="Ray not installed (pip install 'contamscope[ray]')")
    bench = _bench(tmp_path)
    outs = {}
    for name, extra in (("local", []), ("ray", ["--executor", "ray", "--workers", "1"])):
        outs[name] = tmp_path / name
        env = dict(os.environ, COLUMNS="200", CONTAMSCOPE_CACHE_DIR=str(tmp_path / f"c-{name}"))
        r = subprocess.run(
            [
                *(sys.executable, "-m", "contamscope", "benbench"),
                *("--model", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>"),
                *("--device", "cpu", "--dtype", "float32", "--bootstrap", "100"),
                *("--benchmark", str(bench), "--out", str(outs[name]), *extra),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr
    got, want = _records(outs["ray"]), _records(outs["local"])
    assert len(want) == 2 and [g["id"] for g in got] == [w["id"] for w in want]
    assert any("rouge" in json.dumps(w) for w in want)  # lenient criteria: generation ran
    for g, w in zip(got, want):
        assert _same(g, w), (g, w)


def test_backend_without_token_stats_is_refused_before_work(
    tmp_path: Path, tiny_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contamscope.cli.main import app

    no_stats = Capabilities(prompt_logprobs=True, generate=True, token_stats=False)
    monkeypatch.setattr(tiny_backend, "capabilities", no_stats)
    monkeypatch.setattr("contamscope.backends.load_backend", lambda *a, **k: tiny_backend)
    out = tmp_path / "run"
    args = ["benbench", "--benchmark", str(_bench(tmp_path)), "--out", str(out)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in r.output
    assert "BenBench needs per-token log-probs and greedy predictions" in lines[0]
    assert lines[0].endswith("methods this backend can run: permutation, CAP")
    assert not out.exists()
