"""PCR heatmap (model x split) from CAP run summaries, like the paper's Figure 1(a).

Reads only ``summary.json`` dicts; needs matplotlib (the ``report`` extra), imported lazily with
the Agg backend so it works without a display.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..paths import save_figure
from .plots import text_colour

__all__ = ["pcr_matrix", "plot_pcr_heatmap"]


def pcr_matrix(
    summaries: Sequence[dict[str, Any]], reader: str = "generate"
) -> tuple[list[str], list[str], list[list[float]]]:
    """(row labels, split names, PCR values; NaN where a split is missing or undefined)."""
    rows: list[str] = []
    cols: list[str] = []
    for s in summaries:
        for split in s["splits"]:
            if split not in cols:
                cols.append(split)
    values: list[list[float]] = []
    for s in summaries:
        rows.append(f"{s['model'].get('spec', '?')} | {_bench_label(s['benchmark']['source'])}")
        stats = s["statistics"].get(reader, {}).get("splits", {})
        values.append(
            [v if (v := stats.get(c, {}).get("pcr")) is not None else math.nan for c in cols]
        )
    return rows, cols, values


def _bench_label(source: str) -> str:
    """A benchmark's name in a row label: its file or folder, with the folder above a generic
    one (``fineval/data``: CAP's published layout read as "data"; journey).

    >>> _bench_label("../shared/benchdata/cap/fineval/data"), _bench_label("x/fe")
    ('fineval/data', 'fe')
    """
    from .leaderboard import _GENERIC_NAMES

    path = Path(source)
    generic = path.name.split(".")[0].lower() in _GENERIC_NAMES and path.parent.name
    return f"{path.parent.name}/{path.name}" if generic else path.name


def plot_pcr_heatmap(
    summaries: Sequence[dict[str, Any]], path: str | os.PathLike[str], reader: str = "generate"
) -> Path:
    """Write a PNG heatmap of PCR per (model, benchmark) x split; raises ImportError without
    matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, cols, values = pcr_matrix(summaries, reader)
    # long row labels (a served model's URL) wrap, and the figure widens for them: they took
    # the axes' room, and the cells' numbers ran over them (QA)
    labels = [textwrap.fill(r, 36, break_long_words=True) for r in rows]
    width = max((len(x) for lab in labels for x in lab.splitlines()), default=0)
    lines = max((lab.count("\n") + 1 for lab in labels), default=1)
    fig, ax = plt.subplots(
        figsize=(2.4 + 1.3 * len(cols) + 0.075 * width, 1.4 + 0.5 * len(rows) * lines)
    )
    im = ax.imshow(values, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(cols)), labels=cols)
    ax.set_yticks(range(len(rows)), labels=labels)
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            colour = "#000" if math.isnan(v) else text_colour(im, v)
            ax.text(
                j, i, "-" if math.isnan(v) else f"{v:.3f}", ha="center", va="center", color=colour
            )
    scale = summaries[0].get("analysis", {}).get("scale", "tanh") if summaries else "tanh"
    ax.set_title(f"PCR ({scale}) per split")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    path = Path(path)
    save_figure(fig, path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
