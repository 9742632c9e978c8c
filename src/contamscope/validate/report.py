"""Tables and plots of a validation summary (read only the summary dict).

Permutation and BenBench runs report item-level detectors (accuracy ... FPR per epoch); BenBench
adds the AUC of perplexity and the dataset-level gaps; CAP runs report PCR per split, the PCR
difference and the verdict per epoch and reader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..detectors.benbench import CI_MIN_ITEMS
from ..paths import save_figure

__all__ = ["METRICS", "markdown_table", "rows", "tables", "plot_summary", "plot_roc"]

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


Table = tuple[str, list[str], list[list[str]]]
"""(title, column headers, rows of cells)."""


def _ci(ci: list[float] | None) -> str:
    return f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""


def _detector_table(summary: dict[str, Any], detectors: list[str] | None) -> Table:
    head = ["epochs", "detector", "accuracy", "precision", "recall", "F1", "AUC"]
    head.append("FPR (clean half) [95% CI]")
    out = []
    for res in summary["results"]:
        for name, m in res["detectors"].items():
            if detectors is not None and name not in detectors:
                continue
            out.append(
                [str(res["epochs"]), name]
                + [_fmt(m[k]) for k in ("accuracy", "precision", "recall", "f1", "auc")]
                + [_fmt(m["fpr"]) + _ci(m.get("fpr_ci"))]
            )
        for name, sc in res.get("scores", {}).items():
            if detectors is None or name in detectors:
                out.append(
                    [str(res["epochs"]), f"{name} (score)", *["-"] * 4, _fmt(sc["auc"]), "-"]
                )
    title = "Detector accuracy vs training epochs (positive = leaked; FPR on the clean half)"
    return title, head, out


def _gap_table(summary: dict[str, Any]) -> Table:
    head = ["epochs", "statistic", "leaked mean", "clean mean", "gap (leaked - clean) [95% CI]"]
    labels = {"ppl": "answer perplexity", "nll": "answer NLL", "ngram_exact": "n-gram acc. exact"}
    out = [
        [str(res["epochs"]), labels.get(k, k), _fmt(g["leaked"]), _fmt(g["clean"])]
        + [
            _fmt(g["gap"])
            + (_ci(g["ci"]) or (f" [no CI: < {CI_MIN_ITEMS} a group]" if g.get("ci_note") else ""))
        ]
        for res in summary["results"]
        for k, g in res["gaps"].items()
    ]
    return "Dataset level: leaked vs clean means", head, out


def _cap_table(summary: dict[str, Any]) -> Table:
    a, b = summary["config"]["splits"]
    head = ["epochs", "reader", f"M {a}", f"C {a}", f"PCR {a}", f"M {b}", f"C {b}", f"PCR {b}"]
    head += [f"PCR {a} - PCR {b} [95% CI]", "p", "verdict", "names trained split"]
    head += [f"M-C {a} - M-C {b} [95% CI] (beyond the paper)", "p", "M-C verdict"]
    out = []
    for res in summary["results"]:
        for reader, r in res["readers"].items():
            sp = r["splits"]
            ex = r.get("excess") or {}  # absent in summaries written before it
            ex_ci = ex.get("ci") or [None, None]
            out.append(
                [str(res["epochs"]), reader]
                + [_fmt(sp[s][k]) for s in (a, b) for k in ("m", "c", "pcr")]
                + [_fmt(r["pcr_diff"]) + _ci(r["ci"] if r["ci"][0] is not None else None)]
                + [_fmt(r["p_value"]), r["verdict"], "yes" if r["names_trained_split"] else "no"]
                + [_fmt(ex.get("diff")) + _ci(ex_ci if ex_ci[0] is not None else None)]
                + [_fmt(ex.get("p_value")), str(ex.get("verdict") or "-")]
            )
    title = (
        f"CAP verdict vs training epochs (trained on {summary['split']['trained_split']}; "
        f"expected: {summary['expected_verdict']})"
    )
    return title, head, out


def tables(summary: dict[str, Any], detectors: list[str] | None = None) -> list[Table]:
    """The tables of a validation summary, by validated method."""
    method = summary.get("validated_method", "permutation")
    if method == "cap":
        return [_cap_table(summary)]
    out = [_detector_table(summary, detectors)]
    if method == "benbench":
        out.append(_gap_table(summary))
    return out


def markdown_table(summary: dict[str, Any], detectors: list[str] | None = None) -> str:
    """The summary's tables as Markdown (detector runs: FPR = false-positive rate on the clean
    half, with its 95% Clopper-Pearson interval; CAP: PCR per split and the verdict per epoch)."""
    parts = []
    for _title, head, body in tables(summary, detectors):
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _plot_cap(summary: dict[str, Any], path: Path, plt: Any) -> Path:
    epochs = [r["epochs"] for r in summary["results"]]
    readers = list(summary["results"][0]["readers"]) if summary["results"] else []
    fig, axes = plt.subplots(1, max(1, len(readers)), figsize=(6 * max(1, len(readers)), 4.2))
    axes = list(axes) if len(readers) > 1 else [axes]
    for ax, reader in zip(axes, readers):
        for s in summary["config"]["splits"]:
            ys = [r["readers"][reader]["splits"][s]["pcr"] for r in summary["results"]]
            ax.plot(epochs, [float("nan") if y is None else y for y in ys], marker="o", label=s)
        for e, r in zip(epochs, summary["results"]):
            v = r["readers"][reader]
            ax.annotate(
                "names it" if v["names_trained_split"] else v["verdict"],
                (e, 0.02),
                fontsize=7,
                ha="center",
                rotation=90,
                va="bottom",
            )
        ax.set_title(f"PCR per split ({reader})")
        ax.set_xticks(epochs)
        ax.set_xlabel(f"training epochs on {summary['split']['trained_split']}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(
        f"{summary['model']['spec']} on {summary['benchmark']['source']}: CAP, "
        f"{summary['split']['n_leaked']} items per split",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


_MARKERS = "o^sDvP*Xh<>p"


def _line_style(i: int, ls: str) -> dict[str, Any]:
    """The ``i``-th line's colour and marker, distinct for 20 lines with ``ls`` (matplotlib's
    10-colour cycle and one marker gave four pairs of the 14 detectors one look; QA)."""
    import matplotlib

    return {
        # tab20's dark hues first, then their light pairs: neighbours in the legend differ in
        # hue (i and i + 1 were one hue, dark and light; QA)
        "color": matplotlib.colormaps["tab20"]((2 * i) % 20 + (i // 10) % 2),
        "marker": _MARKERS[i % len(_MARKERS)],
        "ls": ls,
    }


def plot_summary(summary: dict[str, Any], path: Path) -> Path | None:
    """Metric vs epochs per detector (one panel per metric) as a PNG; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    if summary.get("validated_method") == "cap":
        return _plot_cap(summary, path, plt)
    names = list(summary["results"][0]["detectors"]) if summary["results"] else []
    epochs = [r["epochs"] for r in summary["results"]]
    scores = list(summary["results"][0].get("scores", {})) if summary["results"] else []
    fig, axes = plt.subplots(2, 3, figsize=(13, 7), sharex=True)
    for ax, metric in zip(axes.flat, METRICS):
        for i, name in enumerate(names):
            ys = [r["detectors"][name][metric] for r in summary["results"]]
            ax.plot(
                epochs,
                [float("nan") if y is None else y for y in ys],
                label=name,
                **_line_style(i, "--" if name.startswith("membership") else "-"),
            )
        if metric == "auc":
            for i, sname in enumerate(scores, start=len(names)):
                ys = [r["scores"][sname]["auc"] for r in summary["results"]]
                ax.plot(
                    epochs,
                    [float("nan") if y is None else y for y in ys],
                    label=f"{sname} (score)",
                    **_line_style(i, ":"),
                )
        ax.set_title("false-positive rate (clean half)" if metric == "fpr" else metric)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xticks(epochs)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("training epochs on the leaked half")
    axes.flat[4].legend(fontsize=7)
    split = summary["split"]
    what = (
        f"scenario {summary['config']['scenario']}"
        if "scenario" in summary["config"]
        else summary.get("validated_method", "")
    )
    fig.suptitle(
        f"{summary['model']['spec']} on {summary['benchmark']['source']}: "
        f"{split['n_leaked']} leaked / {split['n_clean']} clean items, {what}",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


ROC_DETECTORS = ("alg1", "alg2@-0.2", "rank@0.05", "gap-ref@0.05", "combined@0.05")
"""Detectors drawn in the ROC figure when present (plus every ``membership-*`` one)."""


def plot_roc(summary: dict[str, Any], path: Path) -> Path | None:
    """ROC curves of the item-level detectors, one panel per epoch count, with each detector's
    operating point (FPR, recall) at its own threshold marked; None without matplotlib or when
    the summary holds no ROC points (CAP, or a run without both classes)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    results = [r for r in summary.get("results", []) if r.get("roc")]
    if not results:
        return None
    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 4.4), squeeze=False)
    for ax, res in zip(axes[0], results):
        names = [n for n in res["roc"] if n in ROC_DETECTORS or n.startswith("membership-min_k_pp")]
        for name in names:
            pts = res["roc"][name]
            if not pts:
                continue
            m = res["detectors"][name]
            (line,) = ax.plot(
                [p[0] for p in pts], [p[1] for p in pts], lw=1.6, label=f"{name} ({m['auc']:.2f})"
            )
            ax.plot([m["fpr"]], [m["recall"]], "o", color=line.get_color(), ms=5)
        ax.plot([0, 1], [0, 1], ls="--", color="#777", lw=1)
        ax.axvline(0.05, ls=":", color="#999", lw=1)
        ax.set(xlim=(-0.01, 1.01), ylim=(-0.01, 1.01), xlabel="false-positive rate (clean half)")
        ax.set_title(f"{res['epochs']} epochs")
        ax.legend(fontsize=7, loc="lower right", title="detector (AUC)", title_fontsize=7)
    axes[0][0].set_ylabel("recall (leaked half)")
    fig.suptitle("ROC per epoch; dots: each detector's own threshold", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path
