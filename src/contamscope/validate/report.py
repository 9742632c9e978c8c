"""Tables and plots of a validation summary (read only the summary dict)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["METRICS", "markdown_table", "rows", "plot_summary"]

METRICS = ("accuracy", "precision", "recall", "f1", "auc", "fpr")
"""Columns of the table, in order."""


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def rows(summary: dict[str, Any]) -> list[tuple[int, str, dict[str, Any]]]:
    """(epochs, detector, metrics) for every result, epochs ascending, detectors as stored."""
    return [
        (res["epochs"], name, m)
        for res in summary["results"]
        for name, m in res["detectors"].items()
    ]


def markdown_table(summary: dict[str, Any], detectors: list[str] | None = None) -> str:
    """The per-epoch, per-detector table as Markdown (FPR = false-positive rate on the clean half,
    with its 95% Wilson interval)."""
    head = "| epochs | detector | accuracy | precision | recall | F1 | AUC | FPR (clean half) [95% CI] |"
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for epochs, name, m in rows(summary):
        if detectors is not None and name not in detectors:
            continue
        ci = m.get("fpr_ci")
        fpr = _fmt(m["fpr"]) + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
        lines.append(
            f"| {epochs} | {name} | {_fmt(m['accuracy'])} | {_fmt(m['precision'])} | "
            f"{_fmt(m['recall'])} | {_fmt(m['f1'])} | {_fmt(m['auc'])} | {fpr} |"
        )
    return "\n".join(lines)


def plot_summary(summary: dict[str, Any], path: Path) -> Path | None:
    """Metric vs epochs per detector (one panel per metric) as a PNG; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    names = list(summary["results"][0]["detectors"]) if summary["results"] else []
    epochs = [r["epochs"] for r in summary["results"]]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7), sharex=True)
    for ax, metric in zip(axes.flat, METRICS):
        for name in names:
            ys = [r["detectors"][name][metric] for r in summary["results"]]
            ax.plot(
                epochs,
                [float("nan") if y is None else y for y in ys],
                marker="o",
                label=name,
            )
        ax.set_title("false-positive rate (clean half)" if metric == "fpr" else metric)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xticks(epochs)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("training epochs on the leaked half")
    axes.flat[0].legend(fontsize=7)
    split = summary["split"]
    fig.suptitle(
        f"{summary['model']['spec']} on {summary['benchmark']['source']}: "
        f"{split['n_leaked']} leaked / {split['n_clean']} clean items, "
        f"scenario {summary['config']['scenario']}",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
