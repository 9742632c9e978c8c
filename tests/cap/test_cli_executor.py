"""`contamscope cap` with --executor ray (same records as local) and the capability probe: a
backend that cannot generate is refused before any work; a generate-only one is accepted."""

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


def test_cli_ray_executor_gives_local_records(
    fineval_dir: Path, tiny_model_path: Path, tmp_path: Path
) -> None:
    pytest.importorskip("ray", reason="Ray not installed (pip install 'contamscope[ray]')")
    outs = {}
    for name, extra in (("local", []), ("ray", ["--executor", "ray", "--workers", "1"])):
        outs[name] = tmp_path / name
        env = dict(os.environ, COLUMNS="200", CONTAMSCOPE_CACHE_DIR=str(tmp_path / f"c-{name}"))
        r = subprocess.run(
            [
                *(sys.executable, "-m", "contamscope", "cap", "--model", f"hf:{tiny_model_path}"),
                *("--benchmark", str(fineval_dir), "--splits", "dev,val", "--out", str(outs[name])),
                *("--device", "cpu", "--dtype", "float32", "--n-boot", "100", "--no-plot", *extra),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr
    got, want = _records(outs["ray"]), _records(outs["local"])
    assert len(want) == 6 and all("loglik" in w and "prediction" in w for w in want)
    assert [g["id"] for g in got] == [w["id"] for w in want]
    for g, w in zip(got, want):
        assert _same(g, w), (g, w)


def _invoke(tmp_path: Path, fineval_dir: Path) -> Any:
    from contamscope.cli.main import app

    args = ["cap", "--benchmark", str(fineval_dir), "--splits", "dev,val"]
    args += ["--out", str(tmp_path / "run"), "--n-boot", "100", "--no-plot"]
    return CliRunner().invoke(app, args)


def test_backend_capabilities_checked_before_work(
    fineval_dir: Path, tmp_path: Path, tiny_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("contamscope.backends.load_backend", lambda *a, **k: tiny_backend)
    monkeypatch.setattr(tiny_backend, "capabilities", Capabilities(prompt_logprobs=True))
    r = _invoke(tmp_path, fineval_dir)
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in r.output
    assert "CAP needs generation" in lines[0]
    assert lines[0].endswith("methods this backend can run: permutation")
    assert not (tmp_path / "run").exists()
    # generate-only (black-box): accepted, without the optional log-likelihood reader
    generate_only = Capabilities(prompt_logprobs=False, generate=True)
    monkeypatch.setattr(tiny_backend, "capabilities", generate_only)
    r = _invoke(tmp_path, fineval_dir)
    assert r.exit_code == 0, r.output
    assert "no log-likelihood reader" in r.output and "verdict:" in r.output
    recs = _records(tmp_path / "run")
    assert len(recs) == 6 and not any("loglik" in x for x in recs)
