"""Fallback report for contamscope runs that have no dedicated section module yet.

Shows the run's statistics (summary.json ``statistics``, flattened to one row per number) and a
searchable table of each item's scalar fields, so a new method's runs are readable before its
own figures exist. Leaderboard: no estimate (a method says itself which number is its leakage).
"""

from __future__ import annotations

import json
from typing import Any

from ..wording import shell
from .html import Column, Section, Table, clip, esc
from .methods import Estimate, ReportOptions
from .rundata import RunData

__all__ = ["TITLE", "UNRANKED", "sections", "estimate", "flatten", "why_unranked"]

TITLE = "Contamination run"
UNRANKED = "a method with no leaderboard statistic yet (its report has its numbers)"
"""Why a run of this module gets no leaderboard cell (said when it is left out)."""
_MAX_COLUMNS = 24
_TEXT_CHARS = 160


def estimate(run: RunData) -> Estimate | None:
    return None


def flatten(obj: Any, prefix: str = "", depth: int = 4) -> dict[str, Any]:
    """Scalars of a nested dict as ``{"a.b.c": value}``; a pair of numbers stays a CI pair;
    longer lists become their length."""
    out: dict[str, Any] = {}
    if isinstance(obj, dict) and depth > 0:
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k), depth - 1))
    elif isinstance(obj, list):
        if len(obj) == 2 and all(isinstance(x, (int, float)) for x in obj):
            out[prefix] = f"[{obj[0]:.4g}, {obj[1]:.4g}]"
        else:
            out[prefix] = f"({len(obj)} entries)"
    elif isinstance(obj, (dict, tuple)):
        out[prefix] = json.dumps(obj)[:_TEXT_CHARS]
    else:
        out[prefix] = obj
    return out


def _kind(values: list[Any]) -> str:
    vals = [v for v in values if v is not None]
    if vals and all(isinstance(v, bool) for v in vals):
        return "bool"
    if vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return "num"
    return "text"


def _cell(v: Any) -> Any:
    return clip(v, _TEXT_CHARS) if isinstance(v, str) else v


def _numbers(run: RunData) -> dict[str, Any]:
    """The run's numbers: summary.json's ``statistics``; a validate run's ``results`` (one per
    epoch, named by it: its report showed "0 of 0 rows"; journey)."""
    results = run.summary.get("results")
    if not run.summary.get("statistics") and isinstance(results, list):
        return {
            f"epochs {r.get('epochs', i)}" if isinstance(r, dict) else str(i): r
            for i, r in enumerate(results)
        }
    return run.summary.get("statistics") or {}


def why_unranked(run: RunData) -> str:
    """Why the run has no leaderboard cell."""
    if run.method == "validate":
        return (
            "it measures the detectors' accuracy on a model contaminated on purpose, not "
            "leakage (its report has the numbers; each epoch's run, epoch-N/, its own)"
        )
    return UNRANKED


def _validate_sections(run: RunData) -> list[Section]:
    """A validate folder: its tables by epoch, as the command prints them, and its epochs' run
    folders (each a run of its own, with items; the folder holds none: its report was a dump
    of 356 flattened numbers that said its items.jsonl was missing; HTML QA)."""
    from ..validate.report import tables

    out = []
    for i, (title, head, cells) in enumerate(tables(run.summary)):
        table = Table(
            f"validation-{i}",
            [Column(f"c{j}", h) for j, h in enumerate(head)],
            cells,
            page_size=100,
        )
        out.append(Section(f"validation-{i}", title, "", after=table.html()))
    epochs = sorted(
        (p for p in run.path.glob("epoch-*") if (p / "summary.json").exists()),
        key=lambda p: int(p.name.split("-")[1]) if p.name.split("-")[1].isdigit() else 0,
    )
    items = "".join(
        f"<li><code>{esc(p.name)}/</code>: "
        + (
            f"<a href='{esc(p.name)}/report.html'>its report</a>"
            if (p / "report.html").exists()
            else f"<code>contamscope report {esc(shell(p))}</code>"
        )
        + "</li>"
        for p in epochs
    )
    pngs = [
        p.name for p in (run.path / "validation.png", run.path / "validation-roc.png") if p.exists()
    ]
    body = (
        "<p class='note'>A validation run contaminates a copy of the model on purpose and measures "
        "the detectors on its known leaks (docs/validation.md). Its item records are in each "
        "epoch's run folder"
        + (f":</p><ul>{items}</ul>" if items else ".</p>")
        + (f"<p class='note'>Plots beside this page: {esc(', '.join(pngs))}.</p>" if pngs else "")
    )
    out.append(Section("epochs", "Runs by epoch", body))
    return out


def sections(run: RunData, options: ReportOptions) -> list[Section]:
    if run.method == "validate" and isinstance(run.summary.get("results"), list):
        prov = {k: run.summary.get(k) for k in ("model", "benchmark", "config", "split", "timings")}
        return [
            *_validate_sections(run),
            Section(
                "provenance",
                "Provenance",
                f"<details><summary>summary.json</summary><pre>"
                f"{esc(json.dumps(prov, indent=2, ensure_ascii=False, default=str))}</pre></details>",
            ),
        ]
    stats = flatten(_numbers(run), depth=8)
    stat_rows = [
        [k, v if not isinstance(v, float) else float(f"{v:.6g}")] for k, v in stats.items()
    ]
    stat_table = Table(
        "statistics",
        [Column("statistic", "statistic"), Column("value", "value")],
        [[k, "–" if v is None else str(v)] for k, v in stat_rows],
        page_size=100,
    )
    records = [flatten(r, depth=3) for r in run.iter_records()]
    keys: list[str] = []
    for r in records[:200]:
        for k in r:
            if k not in keys and len(keys) < _MAX_COLUMNS:
                keys.append(k)
    cols = [Column(k, k, _kind([r.get(k) for r in records[:500]])) for k in keys]  # type: ignore[arg-type]
    rows = [[_cell(r.get(k)) for k in keys] for r in records]
    items = Table("items", cols, rows, page_size=options.page_size)
    note = (
        f"<p class='note'>This {esc(run.method or 'unknown')} run (schema "
        f"<code>{esc(run.schema)}</code>) has no dedicated report section yet: its statistics and "
        "per-item fields are shown as stored; summary.json documents their meaning.</p>"
    )
    prov = {k: run.summary.get(k) for k in ("model", "benchmark", "config", "timings", "versions")}
    return [
        Section("statistics", "Statistics", note, after=stat_table.html()),
        Section(
            "items",
            "All items",
            f"<p class='note'>{len(rows)} records; the first {len(keys)} scalar fields.</p>",
            after=items.html(),
        ),
        Section(
            "provenance",
            "Provenance",
            f"<details><summary>summary.json</summary><pre>"
            f"{esc(json.dumps(prov, indent=2, ensure_ascii=False, default=str))}</pre></details>",
        ),
    ]
