"""A run folder from elsewhere is data, not markup: a number in summary.json replaced by text
(``<script>...``) was written raw into the HTML report (security QA; the page allows inline
script). Every such field the fuzzer found is set to markup here and must come out escaped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contamscope.report import build_report

MARK = "<i class=PWN>x</i>"


def _set(summary: dict[str, Any], path: str) -> None:
    *head, last = path.split("/")
    node: Any = summary
    for key in head:
        node = node[key]
    assert last in node or not node, (path, list(node))
    node[last] = MARK


def _injected(folder: Path, paths: list[str]) -> str:
    summary = json.loads((folder / "summary.json").read_text())
    for p in paths:
        _set(summary, p)
    (folder / "summary.json").write_text(json.dumps(summary))
    html = build_report(folder).read_text()
    assert "&lt;i class=PWN&gt;" in html  # the text is shown, as text
    return html


def test_permutation_fields_are_escaped(make_run) -> None:  # type: ignore[no-untyped-def]
    run = make_run("p")
    summary = json.loads((run / "summary.json").read_text())
    deltas = list(summary["statistics"]["alg2"])
    paths = ["counts/items_selected", "counts/rows_skipped", "statistics/alg1/count",
             "statistics/rank/count"]  # fmt: skip
    paths += [f"statistics/alg2/{deltas[0]}/count", f"statistics/alg2/{deltas[0]}/anchored_count"]
    assert MARK not in _injected(run, paths)
    # the items set aside for a natural order: their count and each reason's (review QA)
    from contamscope.report.permutation import _set_aside

    natural = {"ids": ["q1"], "reasons": {"numbers in increasing order": MARK}, "n_items": MARK}
    said = _set_aside(summary["statistics"], natural)
    assert MARK not in said and "&lt;i class=PWN&gt;" in said


def test_benbench_fields_are_escaped(make_benbench_run) -> None:  # type: ignore[no-untyped-def]
    run = make_benbench_run("b")
    summary = json.loads((run / "summary.json").read_text())
    split = next(iter(summary["statistics"]["splits"]))
    inst = f"statistics/splits/{split}/instances/exact_all"
    paths = ["config/n"] + [
        f"{inst}/{k}" for k in ("count", "of", "reference_count", "reference_of")
    ]
    assert MARK not in _injected(run, paths)


def test_cap_fields_are_escaped(make_cap_run) -> None:  # type: ignore[no-untyped-def]
    run = make_cap_run("c")
    summary = json.loads((run / "summary.json").read_text())
    paths = [
        f"counts/{s}/items" for s in summary["counts"] if isinstance(summary["counts"][s], dict)
    ]
    for reader, st in summary["statistics"].items():
        if isinstance(st, dict) and isinstance(st.get("splits"), dict):
            paths += [f"statistics/{reader}/splits/{s}/n" for s in st["splits"]]
    assert len(paths) >= 3
    assert MARK not in _injected(run, paths)
