"""`contamscope compare` on two CAP qa runs (continuous readings: ROUGE-L and Jaccard): the same
model twice does not differ; another seed's year shift gives other modified inputs, which do
not pair."""

from __future__ import annotations

import json
from pathlib import Path

from cli_runner import run_cli


def _cap(qa_file: Path, model: Path, out: Path, seed: int) -> None:
    res = run_cli(
        "cap", "--model", f"hf:{model}", "--device", "cpu", "--n-boot", "200",
        "--benchmark", str(qa_file), "--fields", "input=question,output=answer,split=part",
        "--splits", "train,test", "--seed", str(seed), "--out", str(out), cwd=out.parent,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr


def test_compare_qa_runs(qa_file: Path, tiny_model_path: Path, tmp_path: Path) -> None:
    a, b, other = tmp_path / "a", tmp_path / "b", tmp_path / "other"
    _cap(qa_file, tiny_model_path, a, 0)
    _cap(qa_file, tiny_model_path, b, 0)
    res = run_cli("compare", str(a), str(b), "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    assert result["task"] == "qa" and result["same_model"]
    # the year-bearing answer is left out (the edit would change it): 2 train + 2 test
    assert result["counts"]["by_split"] == {"train": 2, "test": 2}
    stats = result["statistics"]
    assert stats["metrics"] == ["generate/test"]  # no log-likelihood reader for qa
    t = stats["generate/test"]
    assert t["difference"] == 0.0 and t["method"] == "swap test (no differences)"
    assert result["verdict"]["label"] == "no difference" and stats["p_value"] == 1.0
    # ROUGE-L and Jaccard, as the run recorded them
    recs = [json.loads(x) for x in (a / "items.jsonl").read_text().splitlines()]
    test = [r for r in recs if r["split"] == "test"]
    assert t["a"]["other"]["m"] == sum(r["m"] for r in test) / 2
    assert t["a"]["other"]["c"] == sum(r["c"] for r in test) / 2

    _cap(qa_file, tiny_model_path, other, 1)  # another seed: another year shift
    res = run_cli("compare", str(a), str(other), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "analysed from other modified inputs (another --seed or --year-shift" in (
        " ".join(res.stderr.split())
    )
