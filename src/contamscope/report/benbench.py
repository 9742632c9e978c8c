"""Report sections for BenBench runs (``contamscope.benbench.summary/1``, ``contamscope benbench``).

Up front: the test split's Delta (original minus paraphrase) of n-gram accuracy and perplexity
with their 95% CIs (studentized bootstrap), Delta_train - Delta_test when both splits were run, and the
instance-level counts (items with every n-gram predicted). Then the evidence: original vs
paraphrase metrics per split, the Deltas with their CIs, per-item NLL original vs paraphrase,
the distribution of per-item n-gram accuracy; the instance-level hits with predicted vs true
n-grams; a per-item table.

Leak direction (Xu et al. 2024): the model predicts the original wording better than a
paraphrase of it, i.e. n-gram accuracy Delta > 0 and perplexity/NLL Delta < 0. This is evidence
only if the paraphrases are as natural as the originals; Delta_train - Delta_test cancels that.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..detectors.benbench import CI_MIN_ITEMS, LOWER_IS_FAMILIAR
from ..detectors.verdict import VERDICT_ALPHA as VERDICT_LEVEL
from ..detectors.verdict import p_text
from ..wording import number, plural, pp_text, reason_counts, value
from .cap import mean_ci
from .html import Column, Section, Table, clip, esc, in_lang, provenance
from .methods import Estimate, ReportOptions
from .plots import BASE, HIGHLIGHT, OKABE_ITO, figure, to_svg
from .rundata import RunData

__all__ = [
    "TITLE",
    "verdict_line",
    "UNRANKED",
    "MEASURED",
    "sections",
    "estimate",
    "why_unranked",
    "PRIMARY",
    "thresholds_text",
    "no_hits",
    "NO_HITS",
]

TITLE = "BenBench (n-gram accuracy, perplexity)"
UNRANKED = "no Delta: no item had a usable paraphrase (--reference or --paraphraser)"
"""Why a run gets no leaderboard cell (said when it is left out)."""
MEASURED = ("n", "k", "ppl_prefix", "ppl_continuation", "ngram_text", "lenient")
"""Settings in its configuration that change what is measured: runs that differ in one are
other measurements (``compare`` refuses them; the leaderboard says so under a column)."""
PRIMARY = "ngram_exact"
"""The leaderboard's and the verdict's metric: exact-match n-gram accuracy."""
LABELS: dict[str, tuple[str, bool]] = {
    "ppl": ("answer perplexity", False),
    "nll": ("answer NLL (nats/token)", False),
    "ngram_exact": ("n-gram accuracy, exact", True),
    "ngram_rouge": ("n-gram accuracy, ROUGE-L", True),
    "ngram_edit": ("n-gram accuracy, edit sim.", True),
}
"""Metric -> (label, shown in percent)."""
_NGRAMS = ("ngram_exact", "ngram_rouge", "ngram_edit")
_CELL = 160
LEGEND = (
    "Δ n-gram exact-match accuracy on the test split, original − paraphrase "
    "(percentage points; split named in the statistic). Above 0: the model predicts the "
    "original wording better than a paraphrase of it, a test-leak signal if the paraphrases are "
    "as natural as the originals. 95% CI: studentized paired bootstrap, none below 5 items; p: one-sided randomization test "
    "over which version of each item is the original."
)


def thresholds_text(config: dict[str, Any]) -> str:
    """The lenient criteria's thresholds as a run applied them (its ``config``).

    >>> thresholds_text({"rouge_threshold": 0.75, "edit_threshold": 0.9, "inclusive": False})
    'ROUGE-L F > 0.75, edit similarity > 0.9'
    """
    op = "≥" if config.get("inclusive") else ">"
    rouge, edit = config.get("rouge_threshold", 0.75), config.get("edit_threshold", 0.9)
    return f"ROUGE-L F {op} {rouge:g}, edit similarity {op} {edit:g}"


def _split_of_interest(stats: dict[str, Any]) -> str | None:
    splits = stats.get("splits") or {}
    if "test" in splits:
        return "test"
    return next(iter(splits), None)


def estimate(run: RunData) -> Estimate | None:
    """Leaderboard cell: Delta of exact n-gram accuracy (original - paraphrase) on the test
    split, with its studentized bootstrap CI."""
    stats = run.summary.get("statistics") or {}
    split = _split_of_interest(stats)
    if split is None:
        return None
    d = ((stats["splits"][split].get("delta") or {}).get(PRIMARY)) or {}
    if not d.get("n") or no_hits(d):
        return None
    ci = d.get("ci")
    n = int(run.summary.get("config", {}).get("n", 5))
    return Estimate(
        statistic=f"Δ {n}-gram accuracy ({split})",
        value=d.get("delta"),
        ci=(ci[0], ci[1]) if ci else None,
        p_value=d.get("p_value"),
        n_items=int(d["n"]),
        raw={"rate": d.get("original"), "chance": d.get("reference")},
        legend=LEGEND,
        warning=f"its interval: {d['ci_warning']}" if d.get("ci_warning") else "",
    )


def partly_paired(split: dict[str, Any]) -> bool:
    """Whether only some of a split's analysed items have a usable paraphrase: its "original"
    means then cover more items than the paraphrase and Δ, which cover the paired ones."""
    paired = split.get("n_paired") or 0
    return bool(paired) and paired < (split.get("n_items") or 0)


def no_hits(d: dict[str, Any]) -> bool:
    """No n-gram predicted right on the originals nor on the paraphrases: a Delta of 0 with
    an interval [0, 0] that reads as a precise "no leak" but measures nothing (as CAP's
    M = C = 0 is inconclusive)."""
    return not d.get("original") and not d.get("reference")


NO_HITS = (
    "no n-gram was predicted right on the originals nor on the paraphrases, so their "
    "difference measures nothing"
)
"""Why a run's n-gram accuracy Delta is inconclusive (:func:`no_hits`)."""


def why_unranked(run: RunData) -> str:
    """Why the run has no leaderboard cell."""
    stats = run.summary.get("statistics") or {}
    split = _split_of_interest(stats)
    d = ((stats["splits"][split].get("delta") or {}).get(PRIMARY)) or {} if split else {}
    if d.get("n") and no_hits(d):
        return f"inconclusive: {NO_HITS}"
    return UNRANKED


# --------------------------------------------------------------------------- helpers


def _fmt(x: float | None, pct: bool, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if pct:
        return pp_text(x) if signed else value(x, pct=True)
    return number(x, signed)


def _ci(pair: Sequence[float] | None, pct: bool) -> str:
    if not pair:
        return "none"
    if pct:
        return f"[{100 * pair[0]:+.1f}, {100 * pair[1]:+.1f}]"
    return f"[{number(pair[0], True)}, {number(pair[1], True)}]"


def metric_keys(summary: dict[str, Any]) -> list[str]:
    """The metrics a run shows, in table order: the lenient criteria's only where it ran them
    (the report, the terminal and their footnotes read the same list)."""
    lenient = (summary.get("config") or {}).get("lenient", True)
    return [k for k in LABELS if lenient or k not in ("ngram_rouge", "ngram_edit")]


def _signal(d: dict[str, Any] | None, key: str) -> bool:
    """The one-sided randomization p-value (leak direction: accuracy up, perplexity/NLL down)
    is at most 0.05 and the CI, where there is one, excludes 0 in that direction. Without an
    interval (fewer than 5 items, or one difference for every item) the exact p-value alone;
    runs from before the p-value existed: the CI alone."""
    d = d or {}
    ci, p = d.get("ci"), d.get("p_value", 0.0)
    if not ci:
        return bool(d.get("ci_note")) and p is not None and p <= VERDICT_LEVEL
    in_direction = ci[1] < 0 if key in LOWER_IS_FAMILIAR else ci[0] > 0
    return in_direction and p is not None and p <= VERDICT_LEVEL


def _ci_phrase(d: dict[str, Any]) -> str:
    """'95% CI [a, b]' of an accuracy Delta, or why there is none."""
    if d.get("ci"):
        return f"95% CI {_ci(d['ci'], True)}" + (
            " (few items differ: read the p-value)" if d.get("ci_warning") else ""
        )
    note = d.get("ci_note")
    return f"no CI ({note.split(' (')[0]})" if note else "no CI"


def ci_notes(deltas: Any) -> list[str]:
    """Why some of these Deltas have no interval, each reason once (the terminal's and the
    report's footnote)."""
    notes = (str((d or {}).get("ci_note") or "") for d in deltas if (d or {}).get("n", 1))
    return [n for n in dict.fromkeys(notes) if n]


def _no_ci_note(deltas: Any) -> str:
    return "".join(f" No CI where none is shown: {esc(n)}." for n in ci_notes(deltas))


def ci_warnings(deltas: dict[str, Any]) -> list[str]:
    """``metric: why`` for each Delta whose interval rests on few items that differ from their
    paraphrase (``ci_warning``: n-gram accuracies near 0); its CI is marked ``*``."""
    return [
        f"{LABELS[k][0]}: {d['ci_warning']}"
        for k, d in deltas.items()
        if k in LABELS and (d or {}).get("ci_warning")
    ]


def ci_mark(d: dict[str, Any] | None) -> str:
    """``*`` beside an interval that :func:`ci_warnings` explains."""
    return "*" if (d or {}).get("ci_warning") else ""


def _p(d: dict[str, Any]) -> str:
    return "–" if d.get("p_value") is None else p_text(d["p_value"])


# --------------------------------------------------------------------------- sections


def sections(run: RunData, options: ReportOptions) -> list[Section]:
    records = list(run.iter_records())
    return [
        _verdict_section(run),
        _evidence_section(run, records),
        _hits_section(run, records, options),
        _table_section(run, records, options),
        _provenance_section(run),
    ]


def verdict_line(summary: dict[str, Any]) -> tuple[str, str] | None:
    """The run's verdict as (kind, sentence), kind ``signal``, ``clean``, ``inconclusive`` (no
    n-gram predicted at all) or ``none`` (no usable paraphrase); None without a split. The report's and the terminal's one line."""
    stats = summary.get("statistics") or {}
    n = (summary.get("config") or {}).get("n", 5)
    split = _split_of_interest(stats)
    if split is None:
        return None
    d = ((stats["splits"][split].get("delta") or {}).get(PRIMARY)) or {}
    counts = (summary.get("counts") or {}).get(split) or {}
    if not d.get("n") and counts.get("items_selected") and not counts.get("items_analysed"):
        why = reason_counts(counts.get("excluded") or {})
        return "none", (
            f"no verdict: none of the {counts['items_selected']} items of the {split} split "
            f"could be analysed ({why or 'see the counts in summary.json'})"
        )
    failed = sum(
        v for v in (counts.get("paraphrase_failures") or {}).values() if isinstance(v, int)
    )
    if not d.get("n") and failed:  # (it said to give --reference, to a user who had; QA)
        return "none", (
            f"no verdict: no item of the {split} split has a usable paraphrase: "
            f"{plural(failed, 'paraphrase')} failed the checks (summary.json's "
            "paraphrase_failures; rows paired with the wrong items change the final answers)"
        )
    if not d.get("n"):
        return "none", (
            f"no verdict: no item of the {split} split has a usable paraphrase (give the "
            "paraphrases with --reference, or a BenBench rewritten file as the benchmark)"
        )
    sp = stats["splits"][split]
    if partly_paired(sp):  # Δ reads the paired items only: say so (the table has them all)
        split = f"{split} (the {sp['n_paired']} of its {sp['n_items']} items with a paraphrase)"
    if no_hits(d):  # a precise-looking "+0.0 pp [+0.0, +0.0], p 1" that measured nothing
        return "inconclusive", (
            f"inconclusive on {split}: the model predicted no {n}-gram exactly, on the "
            "originals nor on the paraphrases, so the accuracy Δ measures nothing (see the "
            "perplexity and NLL rows)"
        )
    if _signal(d, PRIMARY):
        return "signal", (
            f"LEAK SIGNAL on {split}: the model predicts the original {n}-grams better than "
            f"those of the paraphrases (Δ {_fmt(d['delta'], True, True)}, "
            f"{_ci_phrase(d)}, p {_p(d)})"
        )
    return "clean", (
        f"no evidence on {split}: Δ {n}-gram accuracy {_fmt(d.get('delta'), True, True)}, "
        f"{_ci_phrase(d)}, p {_p(d)} (absence of evidence is not proof of "
        "absence)"
    )


def _verdict_section(run: RunData) -> Section:
    s = run.summary
    stats = s.get("statistics") or {}
    cfg = s.get("config") or {}
    n, k = esc(cfg.get("n", 5)), esc(cfg.get("k", 5))  # (written into the page below)
    split = _split_of_interest(stats)
    keys = metric_keys(s)
    line = verdict_line(s)
    if split is None or line is None:
        return Section("verdict", "Verdict and statistics", "<p class='note'>No split.</p>")
    kind, sentence = line
    cls = "none" if kind == "inconclusive" else kind  # the page's verdict styles
    st = stats["splits"][split]
    inst = (st.get("instances") or {}).get("exact_all") or {}
    ppl_sig = _signal((st.get("delta") or {}).get("nll"), "nll")
    head = (
        f'<div class="verdict {cls}">{esc(sentence)}</div>'
        f"<p class='note'>{esc(inst.get('count', 0))} of {esc(inst.get('of', 0))} {esc(split)} items have "
        f"every one of their {k} {n}-grams predicted exactly (paraphrases: "
        f"{esc(inst.get('reference_count', 0))} of {esc(inst.get('reference_of', 0))}). The NLL Δ "
        f"{'also lies below 0' if ppl_sig else 'does not lie below 0'} at 95% "
        f"(p {_p((st.get('delta') or {}).get('nll') or {})}).</p>"
        "<p class='note'><b>How to read it.</b> Each item (question + answer) is scored as "
        "written and as paraphrased (same final answer). Perplexity/NLL: how surprised the model "
        f"is by the answer (lower = more familiar). {n}-gram accuracy: at {k} evenly spaced "
        f"points, does the model predict the next {n} tokens (exactly; leniently by "
        f"{esc(thresholds_text(cfg))})? Δ = original − paraphrase, paired by item. <b>H0</b>: the model has "
        "not seen the original wording, so each item's original is as familiar as its "
        "paraphrases (which version is the original is a uniform draw) and Δ = 0. A leak makes "
        "accuracy Δ &gt; 0 and perplexity Δ &lt; 0. p: one-sided randomization test over "
        "which version is the original (exact when there are at most 10<sup>6</sup> "
        "choices; its false-positive rate under H0 is at most p). Leak signal: the CI lies "
        f"on the leak side of 0 and p ≤ {VERDICT_LEVEL} (p alone where no CI is given: "
        f"below {CI_MIN_ITEMS} items a bootstrap interval cannot cover at its level). The "
        "paraphrases may be "
        "less natural than the originals, which biases Δ the same way; Δ_train − Δ_test "
        "(below, when both splits were run) cancels that.</p>"
    )
    tables = []
    for name, sp in (stats.get("splits") or {}).items():
        rows = []
        partial = partly_paired(sp)
        for key in keys:
            label, pct = LABELS[key]
            dd = (sp.get("delta") or {}).get(key) or {}
            rel = dd.get("relative_pct")
            rci = dd.get("relative_ci")
            paired = f"<td>{_fmt(dd.get('original'), pct)}</td>" if partial else ""
            rows.append(
                f"<tr><td>{esc(label)}</td><td>{_fmt(sp['original'].get(key), pct)}</td>"
                f"{paired}<td>{_fmt((sp.get('reference') or {}).get(key), pct)}</td>"
                f"<td>{_fmt(dd.get('delta'), pct, True) if dd.get('n') else '–'}</td>"
                f"<td>{_ci(dd.get('ci'), pct)}{ci_mark(dd)}</td><td>{_p(dd)}</td><td>0</td>"
                f"<td>{'–' if rel is None else pp_text(rel / 100, '%')}"
                f"{'' if not rci else f' [{rci[0]:+.1f}, {rci[1]:+.1f}]'}</td>"
                f"<td>{'yes' if _signal(dd, key) else 'no'}</td></tr>"
            )
        n_all, n_paired = sp.get("n_items", 0), sp.get("n_paired", 0)
        heads = (
            f"<th>original (all {n_all})</th><th>original ({n_paired})</th>"
            if partial
            else "<th>original</th>"
        )
        tables.append(
            f"<h3>{esc(name)} split: {plural(n_all, 'item')} analysed, "
            f"{n_paired} with a usable paraphrase</h3><p class='note'>original: mean over all "
            "analysed items"
            + (f"; original ({n_paired}): over the paired items" if partial else "")
            + "; paraphrase, Δ and its CI (studentized bootstrap over the paired items): "
            "over the items with a usable paraphrase."
            + _no_ci_note((sp.get("delta") or {}).get(k) for k in keys)
            + "".join(
                f" *{esc(w)}."
                for w in ci_warnings({k: (sp.get("delta") or {}).get(k) for k in keys})
            )
            + "</p>"
            f'<table class="stats"><tr><th>metric</th>{heads}<th>paraphrase</th>'
            "<th>Δ</th><th>95% CI</th><th>p (one-sided)</th><th>expected under H0</th>"
            "<th>relative [95% CI]</th>"
            f"<th>CI in leak direction</th></tr>{''.join(rows)}</table>"
        )
    dtt = stats.get("delta_train_test")
    if dtt and any(v.get("value") is not None for v in dtt.values()):
        rows = []
        for key in keys:
            v = dtt.get(key) or {}
            if v.get("value") is None:
                continue
            label, pct = LABELS[key]
            rows.append(
                f"<tr><td>{esc(label)}</td><td>{_fmt(v['value'], pct, True)}</td>"
                f"<td>{_ci(v.get('ci'), pct)}</td><td>{_p(v)}</td><td>0</td>"
                f"<td>{v.get('n_train')} / {v.get('n_test')}</td></tr>"
            )
        tables.append(
            "<h3>Δ_train − Δ_test</h3><p class='note'><b>H0</b>: the original-vs-paraphrase gap "
            "is the same on both splits (no preferential exposure to one split). Above 0 for "
            "accuracy (below 0 for perplexity): the training split looks more familiar, as "
            "training on it predicts; the opposite sign points at the test split. Train and test "
            "CI: Welch's t interval of the per-item Δ (none below 3 items a split); p: two-sided split-label "
            "permutation test of the per-item Δ (20,000 seeded relabellings).</p>"
            '<table class="stats"><tr><th>metric</th><th>Δ_train − Δ_test</th><th>95% CI</th>'
            f"<th>p (two-sided)</th><th>expected under H0</th><th>items train / test</th></tr>{''.join(rows)}</table>"
            + (f"<p class='note'>{note}</p>" if (note := _no_ci_note(dtt.values())) else "")
        )
    return Section("verdict", "Verdict and statistics", head + "".join(tables))


def _per_item(records: list[dict[str, Any]], split: str, key: str) -> list[tuple[float, float]]:
    out = []
    for r in records:
        m = r.get("metrics") or {}
        if r.get("split") != split or r.get("excluded") or not m.get("reference"):
            continue
        o, p = (m.get("original") or {}).get(key), m["reference"].get(key)
        if o is not None and p is not None:
            out.append((float(o), float(p)))
    return out


def _forest(rows: list[tuple[str, float, Sequence[float] | None]], xlabel: str, title: str) -> str:
    from matplotlib.ticker import MaxNLocator

    with figure(6.4, 1.7 + 0.45 * len(rows)) as (fig, ax):
        for i, (_, v, ci) in enumerate(rows):
            if ci:
                ax.plot([ci[0], ci[1]], [i, i], color=BASE, lw=3)
            ax.plot([v], [i], "D", color=HIGHLIGHT, ms=8, mec="#000")
        ax.axvline(0, color="#000", ls="--", lw=1.2, label="H0: 0")
        ax.set_yticks(range(len(rows)), labels=[r[0] for r in rows], fontsize=8)
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # long tick labels must not collide
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        return to_svg(fig, title)


def _evidence_section(run: RunData, records: list[dict[str, Any]]) -> Section:
    s = run.summary
    stats = s.get("statistics") or {}
    splits = list((stats.get("splits") or {}).keys())
    cfg = s.get("config") or {}
    n = cfg.get("n", 5)
    keys = [k for k in metric_keys(s) if k in _NGRAMS]
    figs: list[str] = []
    # original vs paraphrase n-gram accuracy per split (paired items), 95% CI of each mean
    if any(_per_item(records, sp, PRIMARY) for sp in splits):
        with figure(6.4, 3.6) as (fig, ax):
            groups = [(sp, key) for sp in splits for key in keys]
            peak = 0.0  # the highest bar or whisker (%)
            for j, (which, hatch) in enumerate((("original", ""), ("paraphrase", "//"))):
                xs, ys, lo, hi = [], [], [], []
                for g, (sp, key) in enumerate(groups):
                    vals = [p[j] for p in _per_item(records, sp, key)]
                    if not vals:
                        continue
                    mu = float(np.mean(vals))
                    ci = mean_ci(vals, binary=False) or (mu, mu)
                    xs.append(g + (j - 0.5) * 0.4)
                    ys.append(100 * mu)
                    lo.append(100 * max(0.0, mu - ci[0]))
                    hi.append(100 * max(0.0, ci[1] - mu))
                ax.bar(xs, ys, width=0.38, color=[BASE, OKABE_ITO[1]][j], hatch=hatch,
                       label=which, yerr=[lo, hi], capsize=3, ecolor="#333")  # fmt: skip
                peak = max([peak, *(y + h for y, h in zip(ys, hi, strict=True))])
            # from 0 (all-zero bars drew an axis from -0.04 to 0.04 %; HTML QA), to 100 % when
            # nothing was predicted, else a little above the highest whisker
            ax.set_ylim(0, 100 if peak <= 0 else min(100, 1.15 * peak))
            ax.set_xticks(
                range(len(groups)),
                labels=[f"{sp}\n{LABELS[k][0].split(', ')[1]}" for sp, k in groups],
                fontsize=8,
            )
            ax.set_ylabel(f"{n}-gram accuracy (%)")
            ax.set_title("Original vs paraphrase: n-gram accuracy (paired items, 95% CI)")
            ax.legend(fontsize=8)
            figs.append(to_svg(fig, "n-gram accuracy of originals and paraphrases per split"))
    acc_rows: list[tuple[str, float, Sequence[float] | None]] = []
    nll_rows: list[tuple[str, float, Sequence[float] | None]] = []
    for sp in splits:
        for key in keys + ["nll"]:
            d = ((stats["splits"][sp].get("delta") or {}).get(key)) or {}
            if not d.get("n") or d.get("delta") is None:
                continue
            scale = 100.0 if key != "nll" else 1.0
            dci = [scale * x for x in d["ci"]] if d.get("ci") else None
            row = (f"{sp}: {LABELS[key][0]}{ci_mark(d)}", scale * d["delta"], dci)
            (nll_rows if key == "nll" else acc_rows).append(row)
    dtt = stats.get("delta_train_test") or {}
    for key in keys + ["nll"]:
        v = dtt.get(key) or {}
        if v.get("value") is None:
            continue
        scale = 100.0 if key != "nll" else 1.0
        vci = [scale * x for x in v["ci"]] if v.get("ci") else None
        row = (f"Δ_train − Δ_test: {LABELS[key][0]}", scale * v["value"], vci)
        (nll_rows if key == "nll" else acc_rows).append(row)
    if acc_rows:
        figs.append(
            _forest(
                acc_rows,
                "Δ n-gram accuracy, original − paraphrase (pp)\n> 0: leak direction",
                "Δ n-gram accuracy with 95% CIs",
            )
        )
    if nll_rows:
        figs.append(
            _forest(
                nll_rows,
                "Δ NLL, original − paraphrase (nats/token)\n< 0: leak direction",
                "Δ answer NLL with 95% CIs",
            )
        )
    pts = {sp: _per_item(records, sp, "nll") for sp in splits}
    if any(pts.values()):
        with figure(5.2, 4.4) as (fig, ax):
            allv = [v for p in pts.values() for xy in p for v in xy]
            ax.plot(
                [min(allv), max(allv)],
                [min(allv), max(allv)],
                color="#000",
                ls="--",
                lw=1,
                label="original = paraphrase",
            )
            for k, (sp, p) in enumerate(pts.items()):
                if p:
                    ax.scatter([x[1] for x in p], [x[0] for x in p], s=20,
                               color=OKABE_ITO[k % len(OKABE_ITO)], marker="os^Dv"[k % 5],
                               alpha=0.75, label=sp)  # fmt: skip
            ax.set(xlabel="paraphrase NLL (nats/token)", ylabel="original NLL (nats/token)")
            ax.set_title("Per item: below the diagonal = original more familiar", fontsize=10)
            ax.legend(fontsize=8)
            figs.append(to_svg(fig, "per-item NLL of original vs paraphrase"))
    hist = {
        sp: [
            float(r["metrics"]["original"][PRIMARY])
            for r in records
            if r.get("split") == sp
            and not r.get("excluded")
            and (r.get("metrics") or {}).get("original")
            and r["metrics"]["original"].get(PRIMARY) is not None
        ]
        for sp in splits
    }
    if any(hist.values()):
        k = int(cfg.get("k", 5))
        with figure(6.4, 3.4) as (fig, ax):
            bins = np.linspace(-0.5 / k, 1 + 0.5 / k, k + 2)
            ax.hist([hist[sp] for sp in splits], bins=bins, label=splits,
                    color=[OKABE_ITO[i % len(OKABE_ITO)] for i in range(len(splits))])  # fmt: skip
            ax.set(xlabel=f"per-item exact {n}-gram accuracy of the original", ylabel="items")
            ax.yaxis.get_major_locator().set_params(integer=True)
            ax.set_title(f"Items by exact {n}-gram accuracy (1.0 = every n-gram predicted)")
            ax.legend(fontsize=8)
            figs.append(to_svg(fig, "distribution of per-item n-gram accuracy"))
    body = (
        "<p class='note'>Under H0 originals and paraphrases are equally familiar: the bars "
        "match, the Δ intervals cover 0 and the points scatter around the diagonal. Items at "
        "accuracy 1.0 had every sampled n-gram predicted exactly (the paper's instance-level "
        "signal).</p>"
    )
    return Section("evidence", "Evidence", body, figs)


def _hits_section(run: RunData, records: list[dict[str, Any]], options: ReportOptions) -> Section:
    cand = []
    for i, r in enumerate(records):
        m = (r.get("metrics") or {}).get("original")
        if r.get("excluded") or not m or m.get(PRIMARY) is None:
            continue
        cand.append((m[PRIMARY], -(m.get("nll") or 0.0), -i, r))
    cand.sort(key=lambda t: t[:3], reverse=True)
    top = [t[3] for t in cand[: max(0, options.top_cases)]]
    if not top:
        why = "None asked for (--top 0)." if cand else "No analysed item to show."
        return Section("hits", "Instance-level hits", f"<p class='note'>{why}</p>")
    blocks = []
    for r in top:
        vers = r.get("versions") or []
        parts = []
        for v in vers:
            ng = v.get("ngram") or {}
            if v.get("excluded") or not ng.get("results"):
                continue
            rows = "".join(
                f"<tr><td>{res.get('start')}</td><td>{in_lang(res.get('original'), 'pre')}"
                f"</td><td>{in_lang(res.get('predicted'), 'pre')}</td>"
                f"<td class='{'yes' if res.get('exact') else ''}'>"
                f"{'yes' if res.get('exact') else 'no'}</td>"
                f"<td>{_fmt(res.get('rouge_l'), False)}</td><td>{_fmt(res.get('edit_sim'), False)}"
                "</td></tr>"
                for res in ng["results"]
            )
            nll = (v.get("ppl") or {}).get("nll")
            parts.append(
                f"<p class='note'><b>{esc(v.get('name'))}</b>: exact {_fmt(ng.get('exact'), True)}"
                f", NLL {_fmt(nll, False)} nats/token</p>"
                "<table><tr><th>token</th><th>true n-gram</th><th>predicted</th><th>exact</th>"
                f"<th>ROUGE-L</th><th>edit sim.</th></tr>{rows}</table>"
            )
        q = clip((vers[0] if vers else {}).get("question"), _CELL)
        acc = r["metrics"]["original"][PRIMARY]
        blocks.append(
            f"<details open><summary><b>{esc(r['id'])}</b> (split {esc(r.get('split'))}): exact "
            f"{_fmt(acc, True)} — {in_lang(q)}</summary>{''.join(parts)}</details>"
        )
    body = (
        f"<p class='note'>The {plural(len(top), 'item')} (of {len(cand)}) with the highest exact n-gram "
        "accuracy on the original, then the lowest NLL: each sampled n-gram as written "
        "(true) and as the model predicted it, for the original and its paraphrases.</p>"
    )
    return Section("hits", "Instance-level hits", body + "".join(blocks))


def _table_section(run: RunData, records: list[dict[str, Any]], options: ReportOptions) -> Section:
    pct_keys = [k for k in metric_keys(run.summary) if k in _NGRAMS]
    cols = [
        Column("id", "item"),
        Column("split", "split"),
        Column("final_answer", "final answer"),
        Column("ppl", "ppl original", "num", help="answer perplexity, original"),
        Column("ppl_ref", "ppl paraphrase", "num", help="mean over the item's paraphrases"),
        Column("d_nll", "Δ NLL", "num", help="original − paraphrase (< 0: original easier)"),
    ]
    for k in pct_keys:
        short = LABELS[k][0].split(", ")[1]
        cols.append(Column(k, f"acc. {short}", "pct", help=f"{LABELS[k][0]}, original"))
        cols.append(Column(k + "_ref", f"acc. {short} (para.)", "pct", help="paraphrase mean"))
    cols += [
        Column("all_exact", "all exact", "bool", help="every sampled n-gram predicted exactly"),
        Column("n_refs", "paraphrases", "int", help="usable paraphrases"),
        Column("excluded", "excluded / paraphrase problems"),
        Column("question", "question", clip=_CELL),
    ]
    rows = []
    for r in records:
        m = r.get("metrics") or {}
        o, p, d = m.get("original") or {}, m.get("reference") or {}, m.get("delta") or {}
        q = " ".join(str((r.get("versions") or [{}])[0].get("question") or "").split())
        problems = [str(r["excluded"])] if r.get("excluded") else []
        problems += [
            f"{f.get('reference')}: {f.get('reason')}" for f in r.get("reference_failures") or []
        ]
        row: list[Any] = [r.get("id"), r.get("split"), r.get("final_answer"), o.get("ppl"),
                          p.get("ppl"), d.get("nll")]  # fmt: skip
        for k in pct_keys:
            row += [o.get(k), p.get(k)]
        row += [
            (r.get("flags") or {}).get("exact_all"),
            m.get("n_references"),
            "; ".join(problems) or None,
            q,  # whole: the search and the tooltip see it all (the cell shows the start)
        ]
        rows.append(row)
    table = Table("items", cols, rows, page_size=options.page_size)
    return Section(
        "items",
        "All items",
        f"<p class='note'>{plural(len(rows), 'item')}; click a header to sort, type to search any column. "
        "Every n-gram and prediction is in items.jsonl.</p>",
        after=table.html(),
    )


def _provenance_section(run: RunData) -> Section:
    s = run.summary
    fails = [
        f"{f.get('id')} ({f.get('reference')}): {f.get('reason')}"
        for f in s.get("paraphrase_failures") or []
    ]
    skipped = [x for v in (s.get("skipped_rows") or {}).values() for x in v]
    return provenance(
        run,
        ("model", "paraphraser", "benchmark", "config", "counts"),
        "model, data, settings, counts",
        [("paraphrases not used", fails), ("skipped input rows", skipped)],
    )
