"""Which subjects stand out (summary.json's by_subject): per-subject tests, Bonferroni within a
subject, Benjamini-Hochberg across subjects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from cli_runner import run_cli

from contamscope.detectors.membership import benjamini_hochberg
from contamscope.detectors.permutation import Algorithm2, score_item
from contamscope.pipeline.permutation_summary import subject_summary

FOREST = Algorithm2(n_estimators=5)  # the forest's size does not enter these tests


def _records(subject: str, n: int, leaked: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """``n`` 4-option items; the first ``leaked`` have their original order well on top."""
    out = []
    for i in range(n):
        lp = rng.normal(-30.0, 1.0, size=24)
        if i < leaked:
            lp[0] = lp.max() + 2.0
        rec = score_item(lp, n_options=4, exhaustive=True, alg2=FOREST).to_dict()
        out.append(rec | {"id": f"{subject}-{i}", "subject": subject})
    return out


def test_a_leaked_subject_is_flagged_and_the_clean_ones_are_not() -> None:
    rng = np.random.default_rng(3)
    records = [
        *_records("anatomy", 15, 0, rng),
        *_records("virology", 15, 9, rng),
        *_records("nutrition", 15, 0, rng),
        *_records("astronomy", 15, 0, rng),
    ]
    block = subject_summary(records, set(), alpha=0.05)
    assert block is not None and block["n_subjects"] == block["n_tested"] == 4
    top = block["subjects"][0]
    assert top["subject"] == "virology" and top["flagged"] and top["alg1_rate"] == 0.6
    assert [r["subject"] for r in block["subjects"] if r["flagged"]] == ["virology"]
    assert block["n_flagged"] == 1
    # the numbers are what they say: Bonferroni over a subject's tests, then BH over subjects
    for r in block["subjects"]:
        ps = [p for p in r["p_values"].values() if p is not None]
        assert r["p_value"] == min(1.0, len(ps) * min(ps))
    qs = benjamini_hochberg([r["p_value"] for r in block["subjects"]])
    assert [r["q_value"] for r in block["subjects"]] == qs.tolist()


def test_naturally_ordered_items_and_items_without_a_subject() -> None:
    rng = np.random.default_rng(4)
    records = [*_records("a", 6, 0, rng), *_records("b", 6, 6, rng), *_records("c", 4, 0, rng)]
    records += [r | {"id": f"x{i}", "subject": None} for i, r in enumerate(_records("", 2, 0, rng))]
    natural = {r["id"] for r in records if r["subject"] == "b"}  # all of b: nothing to test
    block = subject_summary(records, natural, alpha=0.05)
    assert block is not None and block["n_without_subject"] == 2
    b = next(r for r in block["subjects"] if r["subject"] == "b")
    assert (b["n_items"], b["n_tested"], b["p_value"], b["flagged"]) == (6, 0, None, False)
    assert block["subjects"][-1] is b and block["n_tested"] == 2  # left out of BH
    # one subject: nothing to compare
    assert subject_summary(_records("only", 3, 0, rng), set(), alpha=0.05) is None


def test_the_run_says_which_subjects_stand_out(tmp_path: Path, tiny_model_path: Path) -> None:
    folder = tmp_path / "bench"
    folder.mkdir()
    for subject, rows in {
        "algebra_test.csv": ["What is 2+2?,5,4,3,6,B", "What is 3+3?,7,6,8,5,B"],
        "biology_test.csv": [
            "Which is a mammal?,Shark,Whale,Trout,Eel,B",
            "Cells have?,DNA,Gold,Tin,Iron,A",
        ],
    }.items():
        (folder / subject).write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    base = ["--model", f"hf:{tiny_model_path}", "--benchmark", str(folder), "--out", str(out)]
    res = run_cli("permutation", *base, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    block = json.loads((out / "summary.json").read_text())["by_subject"]
    assert sorted(r["subject"] for r in block["subjects"]) == ["algebra", "biology"]
    assert all(r["n_items"] == 2 and r["q_value"] is not None for r in block["subjects"])
    assert "by subject (Benjamini-Hochberg, 5% false discoveries): " in res.stdout
    rep = run_cli("report", str(out), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="subjects"' in html and "<td>biology</td>" in html
