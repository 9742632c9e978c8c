"""Supplied modified inputs laid out unlike their originals (FinEval's published mod files end
"\\n答案：", its originals "\\n 答案： "): said at load, in the summary and in the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_runner import run_cli

from contamscope.data.cap import load_cap
from contamscope.report import build_report

QS = [(f"{a}+{a}=____。", [str(a), str(2 * a), str(3 * a), str(4 * a)], "B") for a in range(1, 7)]


def test_layout_note_names_the_differing_frame(tmp_path: Path, fineval_writer: Any) -> None:
    data = load_cap(str(fineval_writer(tmp_path / "a", QS)), ["dev", "val"])
    note = data.splits["dev"].layout_note
    assert note is not None and note.startswith(f"{tmp_path / 'a/fineval/data/mod_dev.json'}: ")
    assert "ends ']\\n答案：' where every original ends ']\\n 答案： '" in note
    # the same layout in the mod files (only the options moved): nothing to say
    same = load_cap(str(fineval_writer(tmp_path / "b", QS, mod_layout=False)), ["dev", "val"])
    assert [s.layout_note for s in same.splits.values()] == [None, None]


def test_layout_note_needs_enough_pairs(tmp_path: Path, fineval_dir: Path) -> None:
    # 3 pairs a split: text shared by chance would read as a frame
    data = load_cap(str(fineval_dir), ["dev", "val"])
    assert [s.layout_note for s in data.splits.values()] == [None, None]


def test_cap_run_warns_and_reports_the_layout(
    tmp_path: Path, tiny_model_path: Path, fineval_writer: Any
) -> None:
    bench, out = fineval_writer(tmp_path, QS), tmp_path / "run"
    args = ["--model", f"hf:{tiny_model_path}", "--benchmark", str(bench), "--splits", "dev,val"]
    res = run_cli("cap", *args, "--out", str(out), "--n-boot", "200", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    warned = [ln for ln in res.stderr.splitlines() if ln.startswith("warning: ")]
    assert len(warned) == 2 and "mod_dev.json: every modified input ends" in warned[0]
    summary = json.loads((out / "summary.json").read_text())
    assert [w.split(": ")[0] for w in summary["layout_warnings"]] == [
        str(bench / "data" / "mod_dev.json"),
        str(bench / "data" / "mod_val.json"),
    ]
    html = build_report(out).read_text()
    assert "Modified inputs laid out unlike the originals." in html
    again = run_cli("reanalyse", str(out), "--pcr-alpha", "0.01", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    cap_run = "; a cap run with --template lays out both alike"  # (reanalyse has no --template)
    assert [ln for ln in again.stderr.splitlines() if ln.startswith("warning: ")] == [
        w.replace("; --template lays out both alike", cap_run) for w in warned
    ]
    # --template lays out original and modified alike: no warning, none in the summary
    res = run_cli("cap", *args, "--out", str(tmp_path / "t"), "--template", "mmlu", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "warning: " not in res.stderr
    assert json.loads((tmp_path / "t" / "summary.json").read_text())["layout_warnings"] == []


def test_validate_cap_warns_of_the_layout(
    tmp_path: Path, tiny_model_path: Path, fineval_writer: Any
) -> None:
    """`validate --method cap` reads the same mod files, so it says the same warning (here
    before it refuses an --out that is a file: nothing is trained)."""
    bench, out = fineval_writer(tmp_path, QS), tmp_path / "a-file"
    out.write_text("x")
    args = ["--method", "cap", "--benchmark", str(bench), "--splits", "dev,val", "--out", str(out)]
    res = run_cli("validate", "--model", f"hf:{tiny_model_path}", *args, cwd=tmp_path)
    assert res.returncode != 0
    warned = [ln for ln in res.stderr.splitlines() if ln.startswith("warning: ")]
    assert len(warned) == 2 and "mod_val.json: every modified input ends" in warned[1]
    assert warned[1].endswith("; validate scores the supplied prompts as they are")
