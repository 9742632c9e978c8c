"""ROC and precision-recall curves when items carry ground-truth leak labels (validation runs).

Labels come from the item records (``leak_label``: true/false), from the ``split.json`` that
``contamscope validate`` writes next to its per-epoch run folders, or from a file given to
``contamscope report --labels`` (a split.json, or one leaked item id per line; every other item
is clean).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import ConfigError, note
from ..wording import json_error
from .html import Section, esc
from .plots import HIGHLIGHT, OKABE_ITO, figure, legend_below, to_svg

__all__ = ["LabelMap", "find_split_labels", "read_labels", "validation_section"]


class LabelMap(dict[str, bool]):
    """Ground truth by item id: the listed ids are leaked, every other id is clean."""

    def __init__(self, leaked: set[str]) -> None:
        super().__init__((i, True) for i in leaked)

    def get(self, key: str, default: bool | None = False) -> bool:  # type: ignore[override]
        return key in self


def _split_ids(obj: object) -> set[str] | None:
    if isinstance(obj, dict) and isinstance(obj.get("leaked"), list):
        return {str(x["id"] if isinstance(x, dict) else x) for x in obj["leaked"]}
    return None


def find_split_labels(run_dir: Path) -> LabelMap | None:
    """Labels of a ``contamscope validate`` epoch folder (``epoch-N``: its parent's split.json),
    else None: a split.json beside any other run folder is not taken as its labels."""
    run_dir = Path(run_dir).resolve()
    if not re.fullmatch(r"epoch-\d+", run_dir.name):
        return None
    split = run_dir.parent / "split.json"
    if not split.exists():
        return None
    try:
        ids = _split_ids(json.loads(split.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        why = (
            str(exc.strerror or exc)
            if isinstance(exc, OSError)
            else "not UTF-8 text"
            if isinstance(exc, UnicodeDecodeError)
            else "not valid JSON"
            if isinstance(exc, (json.JSONDecodeError, RecursionError))
            else "its 'leaked' list is not of item ids"
        )
        ids = None  # (the validation section was left out without a word; error-path QA)
    else:
        why = "no 'leaked' list in it"
    if ids is None:
        note(
            f"{split}: cannot read the known leaks from it ({why}); the report has no "
            "validation section (--labels FILE gives them)"
        )
        return None
    return LabelMap(ids)


def read_labels(path: Path) -> LabelMap:
    """Leaked item ids from a split.json (``{"leaked": [...]}``) or a text file of ids (one per
    line; blank lines and ``#`` comments ignored)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--labels {path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--labels {path}: not UTF-8 text (byte offset {exc.start})") from None
    if text.lstrip().startswith("{"):
        try:
            ids = _split_ids(json.loads(text))
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"--labels {path}:{exc.lineno}: not valid JSON ({json_error(exc, line=False)})"
            ) from None
        if ids is None:
            raise ConfigError(f"--labels {path}: expected a JSON object with a 'leaked' list")
        return LabelMap(ids)
    ids = {ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")}
    if not ids:
        raise ConfigError(f"--labels {path}: no item ids in the file")
    return LabelMap(ids)


def validation_section(
    labels: Sequence[bool], scores: Mapping[str, Sequence[float]], *, what: str
) -> Section:
    """ROC and PR curves (with AUC and average precision) of each score against ``labels``.

    ``scores``: name -> one score per item, higher = more suspicious. ``what`` names the items.
    """
    from sklearn.metrics import (
        average_precision_score,
        precision_recall_curve,
        roc_auc_score,
        roc_curve,
    )

    n_pos = sum(labels)
    n = len(labels)
    if n_pos == 0 or n_pos == n:
        return Section(
            "validation",
            "Validation against known leaks",
            f'<p class="note">All {n} labelled {esc(what)} are '
            f"{'leaked' if n_pos else 'clean'}: ROC and precision-recall need both kinds.</p>",
        )
    rows = []
    with figure(5.0, 4.2) as (fig_roc, ax_roc), figure(5.0, 4.2) as (fig_pr, ax_pr):
        for (name, s), colour in zip(scores.items(), OKABE_ITO):
            fpr, tpr, _ = roc_curve(labels, s)
            prec, rec, _ = precision_recall_curve(labels, s)
            auc = float(roc_auc_score(labels, s))
            ap = float(average_precision_score(labels, s))
            rows.append((name, auc, ap))
            ax_roc.plot(fpr, tpr, color=colour, lw=2, label=f"{name} (AUC {auc:.3f})")
            ax_pr.step(rec, prec, where="post", color=colour, lw=2, label=f"{name} (AP {ap:.3f})")
        ax_roc.plot([0, 1], [0, 1], ls="--", color="#777", lw=1, label="chance (AUC 0.5)")
        ax_roc.set(xlabel="false-positive rate (clean items flagged)", ylabel="true-positive rate")
        ax_roc.set_title("ROC")
        legend_below(ax_roc)
        base = n_pos / n
        ax_pr.axhline(base, ls="--", color=HIGHLIGHT, lw=1, label=f"chance ({base:.2f})")
        ax_pr.set(xlabel="recall (leaked items found)", ylabel="precision", ylim=(0, 1.02))
        ax_pr.set_title("Precision-recall")
        legend_below(ax_pr)
        figs = [to_svg(fig_roc, "ROC curves"), to_svg(fig_pr, "precision-recall curves")]
    table = "".join(
        f"<tr><td>{esc(name)}</td><td>{auc:.3f}</td><td>{ap:.3f}</td></tr>"
        for name, auc, ap in rows
    )
    body = (
        f'<p class="note">{n_pos} of {n} {esc(what)} are labelled leaked. Each score ranks the '
        "items from most to least suspicious; AUC is the probability that a random leaked item "
        "ranks above a random clean one (0.5 = chance).</p>"
        '<table class="stats"><tr><th>score</th><th>ROC AUC</th><th>average precision</th></tr>'
        f"{table}</table>"
    )
    return Section("validation", "Validation against known leaks", body, figs)
