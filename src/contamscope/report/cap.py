"""Report sections for CAP runs (``contamscope.cap.summary/1``, ``contamscope cap``).

Up front: the verdict, PCR_reference - PCR_other with its bootstrap CI and p-value (H0: both
splits equally exposed), and per split M, M on the modified inputs, C and PCR with 95% CIs.
Then the evidence: original vs modified performance and consistency per split, PCR per split,
the difference with its CI, PCR heatmaps (readers x splits, and the scale/alpha ablation, drawn
from :func:`contamscope.report.cap_heatmap.pcr_matrix`), per-item outcomes; the items answered
well but inconsistently (the pattern training on an item leaves); a per-item table.

The per-split CIs are computed here from the stored per-item values (Clopper-Pearson for 0/1 values, an
expanded seeded percentile bootstrap otherwise); the comparison CI is the run's own (summary.json).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..detectors.cap import refresh_choices
from ..detectors.stats import exact_interval, expanded_tail, tail_draws
from ..wording import plural
from .cap_heatmap import pcr_matrix
from .html import Column, Section, Table, clip, esc, fmt_p, in_lang, provenance
from .methods import Estimate, ReportOptions
from .plots import BASE, HIGHLIGHT, OKABE_ITO, figure, legend_outside, text_colour, to_svg
from .rundata import RunData

__all__ = [
    "TITLE",
    "UNRANKED",
    "MEASURED",
    "sections",
    "estimate",
    "why_unranked",
    "leaderboard_figures",
    "split_values",
    "mean_ci",
]

TITLE = "CAP (consistency amplification)"
UNRANKED = "no PCR comparison between two splits"
"""Why a run gets no leaderboard cell (said when it is left out)."""
MEASURED = ("task", "chat", "max_new_tokens", "template")
"""Settings in its configuration that change what is measured (the same prompts, answers of
the same length): runs that differ in one are other measurements (``compare`` refuses them;
the leaderboard says so under a column)."""
READERS = ("generate", "loglik")
_TEXT = 600
_CELL = 160
_N_BOOT = 2000
LEGEND = (
    "CAP: PCR_ref − PCR_other (reference split minus the compared split, e.g. train − test; "
    "PCR = tanh((M+α)/(C+α)) by default, unitless). Below 0: the compared split looks trained "
    "on (contamination); above 0: fine-tuned on the reference split. 95% bootstrap CI; p-value "
    "two-sided, H0: both splits equally exposed. A run of three or more splits shows the "
    "comparison its verdict rests on, with its p-value Holm-adjusted over the run's comparisons."
)


def _comparisons(run: RunData, reader: str = "generate") -> list[dict[str, Any]]:
    comps = ((run.summary.get("statistics") or {}).get(reader) or {}).get("comparisons") or []
    return [c for c in comps if isinstance(c, dict)]


def _comparison(run: RunData, reader: str = "generate") -> dict[str, Any] | None:
    """The comparison the run's verdict rests on: the first that names a contaminated split,
    else the first that says fine-tuned, else the decided one of smallest p-value (adjusted
    over the family where the run has several), else the first. The board and the card took
    the first comparison of three splits (train − dev, p = 1) for a run its own verdict called
    contaminated by test (Holm p = 0.002), and left the run off the board when that first one
    was inconclusive (QA)."""
    comps = _comparisons(run, reader)
    if not comps:
        return None
    for start in ("contaminated", "fine-tuned"):
        named = [c for c in comps if str(c.get("verdict") or "").startswith(start)]
        if named:
            return named[0]
    decided = [c for c in comps if c.get("verdict") != "inconclusive" and _p(c) is not None]
    return min(decided, key=lambda c: _p(c) or 0.0) if decided else comps[0]


def _p(c: dict[str, Any]) -> float | None:
    """A comparison's p-value as its verdict read it: Holm-adjusted in a family of two or
    more comparisons, else its own."""
    p = c.get("p_adjusted")
    p = c.get("p_value") if p is None else p
    return float(p) if isinstance(p, int | float) and not isinstance(p, bool) else None


def why_unranked(run: RunData) -> str:
    """Why the run has no leaderboard cell."""
    c = _comparison(run)
    if c is not None and c.get("verdict") == "inconclusive":
        return f"inconclusive: {c.get('reasoning')}"
    return UNRANKED


def _holm(c: dict[str, Any], key: str = "p_adjusted") -> str:
    adj = c.get(key)
    return "" if adj is None else f" (Holm {fmt_p(adj)})"


def estimate(run: RunData) -> Estimate | None:
    """Leaderboard cell: PCR_reference - PCR_other of the generated answers, with its CI."""
    c = _comparison(run)
    if c is None:
        return None
    splits = ((run.summary.get("statistics") or {}).get("generate") or {}).get("splits") or {}
    n = sum(int((splits.get(s) or {}).get("n") or 0) for s in (c["reference"], c["other"]))
    ok = c.get("ci_low") is not None and c.get("ci_high") is not None
    if c.get("verdict") == "inconclusive":
        return None  # no number to rank: the comparison's reasoning says why
    scale = (run.summary.get("analysis") or {}).get("scale", "tanh")
    others = [x.get("other") for x in _comparisons(run)]
    statistic = f"CAP PCR_{c['reference']} − PCR_{c['other']} ({scale})"
    said = ""
    if len(others) > 1:  # one column for every run of these splits, whichever split decides
        # (each run's own comparison as its statistic put runs of one benchmark, and
        # replicates of one model, in columns of their own; QA); the cell names it below
        statistic = (
            f"CAP PCR_{c['reference']} − PCR_x, x the split its verdict rests on of "
            f"{', '.join(map(str, others))} ({scale})"
        )
        said = (
            f"the cell is PCR_{c['reference']} − PCR_{c['other']} ({c.get('verdict')}), "
            f"its p Holm-adjusted over the run's {len(others)} comparisons"
        )
    return Estimate(
        statistic=statistic,
        warning=said,
        value=c.get("pcr_diff"),
        ci=(c["ci_low"], c["ci_high"]) if ok else None,
        p_value=_p(c),  # (the raw p of one of a family could count as a rejection; QA)
        n_items=n,
        raw={"pcr_" + s: (splits.get(s) or {}).get("pcr") for s in (c["reference"], c["other"])},
        percent=False,
        leak_sign=-1,
        legend=LEGEND,
    )


# --------------------------------------------------------------------------- per-item values


def _item_m(rec: dict[str, Any], task: str, metric: str, key: str) -> float | None:
    if task == "mcq" and metric == "strict":
        key = "strict_" + key
    v = rec.get(key)
    return None if v is None else float(v)


def _item_c(rec: dict[str, Any], task: str, threshold: float | None) -> float | None:
    if task == "summary":
        sim = rec.get("similarity")
        return None if sim is None else float(sim > (threshold if threshold is not None else 0.95))
    c = rec.get("c")
    return None if c is None else float(c)


def _loglik(rec: dict[str, Any]) -> tuple[float, float, float] | None:
    ll = rec.get("loglik")
    if not ll or rec.get("answer") is None:
        return None
    lo, lm = ll["original"], ll["modified"]
    c0, c1 = lo.index(max(lo)), lm.index(max(lm))
    m = float(c0 == rec["answer"])
    mm = float(c1 == rec.get("modified_answer"))
    c = float(rec["options"][c0].strip() == rec["modified_options"][c1].strip())
    return m, mm, c


def split_values(
    records: Sequence[dict[str, Any]], summary: dict[str, Any], reader: str = "generate"
) -> dict[str, list[tuple[float, float | None, float]]]:
    """Per split, the (M, M_modified, C) of each analysed item, selected as the pipeline's
    summary selects them (not excluded, with a reference and a consistency value)."""
    a = summary.get("analysis") or {}
    task = str(summary.get("task") or (summary.get("config") or {}).get("task") or "mcq")
    out: dict[str, list[tuple[float, float | None, float]]] = {}
    for r in records:
        if r.get("excluded"):
            continue
        m = _item_m(r, task, str(a.get("mcq_metric") or "mapped"), "m")
        c = _item_c(r, task, a.get("similarity_threshold"))
        if m is None or c is None:
            continue
        if reader == "loglik":
            row = _loglik(r)
            if row is None:
                continue
            out.setdefault(r["split"], []).append(row)
        else:
            mm = _item_m(r, task, str(a.get("mcq_metric") or "mapped"), "m_modified")
            out.setdefault(r["split"], []).append((m, mm, c))
    return out


def mean_ci(
    values: Sequence[float], seed: int = 0, binary: bool | None = None
) -> tuple[float, float] | None:
    """95% CI of a mean: Clopper-Pearson for 0/1 outcomes, else a seeded expanded percentile
    bootstrap (:func:`_percentiles`). ``binary=None`` decides from the values; pass False for
    fractions that happen to be 0 or 1 (a per-item mean over several n-grams is not one
    Bernoulli outcome). Wilson and the plain percentile interval were used here, which
    docs/statistics.md and docs/cap.md measured covering under 95% at few items (statistics
    QA: Wilson [0.076, 0.476] for 3 of 14, Clopper-Pearson [0.047, 0.508])."""
    if not values:
        return None
    if binary if binary is not None else all(v in (0.0, 1.0) for v in values):
        return exact_interval(int(sum(values)), len(values))
    x = np.asarray(values, float)
    idx = _resamples(seed, len(x))
    low, high = np.percentile(x[idx].mean(axis=1), _percentiles(len(x)))
    return float(low), float(high)


def _percentiles(n: int) -> list[float]:
    """The percentiles of the expanded bootstrap interval at ``n`` items (Hesterberg 2015:
    :func:`~contamscope.detectors.stats.expanded_tail`), the plain 2.5 and 97.5 at one item
    (whose resamples are all alike)."""
    tail = expanded_tail(n) if n >= 2 else 0.025
    return [100 * tail, 100 * (1 - tail)]


def _resamples(seed: int, n: int) -> np.ndarray:
    """Item indices of the bootstrap resamples of ``n`` items: :data:`_N_BOOT`, or more at few
    items, so that 25 lie beyond each end of the interval (:func:`tail_draws`)."""
    draws = tail_draws(_N_BOOT, expanded_tail(n)) if n >= 2 else _N_BOOT
    return np.random.default_rng(seed).integers(0, n, size=(draws, n))


def _pcr_ci(
    rows: Sequence[tuple[float, float | None, float]], alpha: float, scale: str, seed: int = 0
) -> tuple[float, float] | None:
    if not rows:
        return None
    m = np.asarray([r[0] for r in rows], float)
    c = np.asarray([r[2] for r in rows], float)
    idx = _resamples(seed, len(m))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = (m[idx].mean(axis=1) + alpha) / (c[idx].mean(axis=1) + alpha)
        if scale == "tanh":
            vals = np.tanh(ratio)
        elif scale == "sigmoid":
            vals = 1.0 / (1.0 + np.exp(-ratio))
        else:
            vals = ratio
    vals = vals[np.isfinite(vals)]
    if not len(vals):
        return None
    low, high = (float(v) for v in np.percentile(vals, _percentiles(len(m))))
    # every resample alike (M = C = 0 on every item: tanh(1) = 0.762 each time) gave a
    # zero-width [0.762, 0.762] that read as a precise measurement of nothing (QA)
    return (low, high) if high > low else None


def _pcr_cell(rows: Sequence[tuple[float, float | None, float]], alpha: float, scale: str) -> str:
    """A split's PCR interval, or why it has none though the split has items."""
    ci = _pcr_ci(rows, alpha, scale)
    return _ci(ci) if ci or not rows else "(no CI: every resample alike)"


def _f(x: float | None, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def _ci(pair: Sequence[float] | None, signed: bool = False) -> str:
    return f"[{_f(pair[0], signed)}, {_f(pair[1], signed)}]" if pair else "–"


def _ci_cell(low: float | None, high: float | None, diff: float | None) -> str:
    """A comparison's interval, or why it has none where its difference is defined (every
    resample gave that difference: no zero-width interval), as the terminal says."""
    if low is not None and high is not None:
        return _ci((low, high), True)
    return "none (every resample alike)" if diff is not None else "–"


# --------------------------------------------------------------------------- sections


def sections(run: RunData, options: ReportOptions) -> list[Section]:
    summary = run.summary
    records = [refresh_choices(r) for r in run.iter_records()]
    stats = summary.get("statistics") or {}
    readers = [r for r in READERS if r in stats]
    values = {r: split_values(records, summary, r) for r in readers}
    return [
        _verdict_section(run, readers, values),
        _evidence_section(run, readers, values, records),
        _cases_section(records, summary, options),
        _table_section(records, summary, options),
        _provenance_section(run),
    ]


def _verdict_section(
    run: RunData, readers: list[str], values: dict[str, dict[str, list[Any]]]
) -> Section:
    s = run.summary
    v = s.get("verdict") or {}
    label = str(v.get("label") or "no evidence")
    cls = "signal" if "contaminated" in label else ("clean" if label == "no evidence" else "none")
    a = s.get("analysis") or {}
    alpha, scale = a.get("alpha", 0.01), a.get("scale", "tanh")
    head = (
        f'<div class="verdict {cls}">CAP verdict: {esc(label)}</div>'
        f"<p class='note'>{esc(v.get('reasoning') or '')}</p>"
        f"<p class='note'><b>How to read it.</b> M is the model's performance on each split's "
        f"original inputs ({esc(s.get('metric') or '?')}); C the consistency of its answers when "
        f"the input is modified without changing the answer ({esc(s.get('consistency') or '?')} "
        f"modification); PCR = {esc(scale)}((M + {alpha:g}) / (C + {alpha:g})). Training on a "
        "split raises M more than C, so its PCR rises. <b>H0</b>: "
        f"{esc(a.get('null_hypothesis') or 'both splits are equally exposed')}; under H0 the "
        "difference is 0. CI below 0: the compared split looks trained on (contamination); CI "
        "above 0: the model was fine-tuned on the reference split. The verdict uses the "
        "generated answers; the log-likelihood reader (answer letter with the highest "
        "log-prob) is shown beside it. Beyond the paper, the (M − C) rows compare M with C on a "
        "linear scale (same resamples, same permutation test): tanh saturates once M is a few "
        "times C, so both splits' PCR can sit near 1 while M − C still tells them apart.</p>"
    )
    rows = []
    for reader in readers:
        for c in s["statistics"][reader].get("comparisons") or []:
            rows.append(
                "<tr>"
                f"<td>PCR_{esc(c['reference'])} − PCR_{esc(c['other'])} ({esc(reader)})</td>"
                f"<td>{_f(c.get('pcr_diff'), True)}</td>"
                f"<td>{_ci_cell(c.get('ci_low'), c.get('ci_high'), c.get('pcr_diff'))}</td>"
                f"<td>0</td><td>{fmt_p(c.get('p_value'))}{_holm(c)}</td>"
                f"<td>{_f(c.get('decline_diff'), True)}</td>"
                f"<td>{_f(c.get('relative_decline_diff'), True)}</td>"
                f"<td>{esc(c.get('verdict'))}</td></tr>"
            )
            if c.get("excess_diff") is not None:
                rows.append(
                    "<tr>"
                    f"<td>(M − C)_{esc(c['reference'])} − (M − C)_{esc(c['other'])} "
                    f"({esc(reader)}; beyond the paper)</td>"
                    f"<td>{_f(c['excess_diff'], True)}</td>"
                    f"<td>{_ci_cell(c.get('excess_ci_low'), c.get('excess_ci_high'), c['excess_diff'])}</td>"
                    f"<td>0</td><td>{fmt_p(c.get('excess_p_value'))}"
                    f"{_holm(c, 'excess_p_adjusted')}</td>"
                    f"<td></td><td></td><td>{esc(c.get('excess_verdict'))}</td></tr>"
                )
    comp = (
        '<table class="stats"><tr><th>statistic</th><th>observed</th><th>95% CI (bootstrap)</th>'
        "<th>expected under H0</th><th>p-value (two-sided)</th><th>baseline Δ diff</th>"
        f"<th>baseline δ diff</th><th>verdict</th></tr>{''.join(rows)}</table>"
        "<p class='note'>Baselines (paper, section 4.1): Δ = M_original − M_modified per split "
        "and δ = Δ / M_original; shown as reference minus other, without a test. With three "
        "or more splits the reference is compared with each other split, and the verdicts use "
        "Holm-adjusted p-values (family-wise error at most 5%).</p>"
        if rows
        else "<p class='note'>No comparison: a single split, or no analysed items.</p>"
    )
    split_rows = []
    counts = s.get("counts") or {}
    for reader in readers:
        rstats = s["statistics"][reader].get("splits") or {}
        for split in s.get("splits") or list(rstats):
            st = rstats.get(split) or {}
            vals = values[reader].get(split, [])
            cnt = counts.get(split) or {}
            excl = sum((cnt.get("excluded") or {}).values())
            mm = [x[1] for x in vals if x[1] is not None]
            split_rows.append(
                f"<tr><td>{esc(split)}</td><td>{esc(reader)}</td>"
                f"<td>{esc(st.get('n', 0))} / {esc(cnt.get('items', '?'))}</td>"
                f"<td>{_f(st.get('m'))} {_ci(mean_ci([x[0] for x in vals]))}</td>"
                f"<td>{_f(st.get('m_modified'))} {_ci(mean_ci(mm))}</td>"
                f"<td>{_f(st.get('c'))} {_ci(mean_ci([x[2] for x in vals]))}</td>"
                f"<td>{_f(st.get('pcr'))} {_pcr_cell(vals, alpha, scale)}</td>"
                f"<td>{_f(st.get('decline'), True)}</td>"
                f"<td>{_f(st.get('relative_decline'), True)}</td>"
                f"<td>{excl}</td><td>{_unmapped(cnt) if reader == 'generate' else '–'}</td></tr>"
            )
    per_split = (
        '<table class="stats"><tr><th>split</th><th>reader</th><th>analysed / items</th>'
        "<th>M [95% CI]</th><th>M modified [95% CI]</th><th>C [95% CI]</th>"
        "<th>PCR [95% CI]</th><th>Δ</th><th>δ</th><th>excluded</th><th>unmapped answers</th>"
        f"</tr>{''.join(split_rows)}</table><p class='note'>Per-split CIs: Clopper-Pearson for "
        f"0/1 values, else the expanded percentile bootstrap ({_N_BOOT} resamples, more at "
        "under 14 items so that 25 lie beyond each end; seed 0), "
        "computed by the report from the stored per-item values. The first split is the "
        "reference.</p>"
    )
    notes = _overlap_note(s) + _layout_note(s)
    return Section("verdict", "Verdict and statistics", head + comp + per_split + notes)


def _layout_note(summary: dict[str, Any]) -> str:
    """The supplied modified inputs framed unlike their originals (``layout_warnings``)."""
    warnings = summary.get("layout_warnings") or []
    if not warnings:
        return ""
    return (
        "<p class='note'><b>Modified inputs laid out unlike the originals.</b> "
        + " ".join(f"{esc(w)}." for w in warnings)
        + " A layout change in both splits' files moves both splits' M modified and C; their "
        "difference is still compared, but the per-split figures are not the modification's "
        "alone.</p>"
    )


def _overlap_note(summary: dict[str, Any]) -> str:
    """Items whose text is in more than one split, and repeats within a split, if any."""
    bench = summary.get("benchmark") or {}
    sel = bench.get("selection") or {}
    overlap = None if sel.get("drop_shared") else bench.get("overlap_selected")
    among = "among the items analysed"
    if overlap is None:  # what --drop-shared left out, or a run from before these counts
        overlap, among = sel.get("overlap") or {}, "in the split files"
    parts = []
    for split, o in overlap.items():
        with_ = ", ".join(
            f"{n} in {esc(other)}" for other, n in (o.get("shared_with") or {}).items()
        )
        if with_:
            parts.append(
                f"{esc(split)}: {plural(o.get('shared', 0), 'item')} also in another split ({with_})"
            )
        if o.get("duplicates"):
            parts.append(
                f"{esc(split)}: {plural(o['duplicates'], 'item')} "
                f"{'repeats' if o['duplicates'] == 1 else 'repeat'} an earlier item's text"
            )
    if not parts:
        return ""
    what = (
        "left out of every split (--drop-shared)"
        if sel.get("drop_shared")
        else "kept: an item in two splits is on both sides of the comparison, which pulls the "
        "difference towards 0; --drop-shared leaves them out"
    )
    return (
        f"<p class='note'><b>Overlap between splits</b> {among} (same text, whitespace, "
        "case, character width and zero-width characters aside): "
        f"{'; '.join(parts)}. Shared items are {what}.</p>"
    )


def _unmapped(cnt: dict[str, Any]) -> str:
    rate = cnt.get("unmapped_rate")
    return "–" if rate is None else f"{100 * rate:.1f}%"


def _heatmap(rows: list[str], cols: list[str], values: list[list[float]], title: str) -> str:
    with figure(max(5.0, 2.4 + 1.2 * len(cols)), 1.6 + 0.4 * len(rows)) as (fig, ax):
        arr = np.ma.masked_invalid(np.asarray(values, float))
        im = ax.imshow(arr, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(cols)), labels=cols)
        ax.set_yticks(range(len(rows)), labels=rows, fontsize=8)
        for i, row in enumerate(values):
            for j, v in enumerate(row):
                txt = "–" if math.isnan(v) else f"{v:.3f}"
                colour = "#000" if math.isnan(v) else text_colour(im, v)
                ax.text(j, i, txt, ha="center", va="center", color=colour, fontsize=8)
        ax.set_title(title, fontsize=10)
        fig.colorbar(im, ax=ax)
        return to_svg(fig, title)


def _evidence_section(
    run: RunData,
    readers: list[str],
    values: dict[str, dict[str, list[tuple[float, float | None, float]]]],
    records: list[dict[str, Any]],
) -> Section:
    s = run.summary
    splits = list(s.get("splits") or [])
    a = s.get("analysis") or {}
    alpha, scale = a.get("alpha", 0.01), a.get("scale", "tanh")
    figs: list[str] = []
    gen = values.get("generate") or {}
    if any(gen.get(sp) for sp in splits):
        with figure(6.4, 3.6) as (fig, ax):
            series = [("M original", 0), ("M modified", 1), ("C consistency", 2)]
            w = 0.8 / len(series)
            for k, (name, pos) in enumerate(series):
                xs, ys, lo, hi = [], [], [], []
                for i, sp in enumerate(splits):
                    vals = [float(v) for x in gen.get(sp, []) if (v := x[pos]) is not None]
                    if not vals:
                        continue
                    mu = float(np.mean(vals))
                    ci = mean_ci(vals) or (mu, mu)
                    xs.append(i - 0.4 + w * (k + 0.5))
                    ys.append(mu)
                    lo.append(max(0.0, mu - ci[0]))
                    hi.append(max(0.0, ci[1] - mu))
                ax.bar(xs, ys, width=w * 0.95, color=OKABE_ITO[k], label=name,
                       hatch=["", "//", ".."][k], yerr=[lo, hi], capsize=3, ecolor="#333")  # fmt: skip
            ax.set_xticks(range(len(splits)), labels=splits)
            ax.set(ylabel="mean over analysed items", xlabel="split")
            ax.set_ylim(0, 1.05)
            ax.set_title("Original vs modified inputs (generated answers, 95% CI)")
            ax.legend(fontsize=8)
            figs.append(to_svg(fig, "performance on original and modified inputs per split"))
    if readers:
        with figure(6.4, 3.6) as (fig, ax):
            w = 0.8 / len(readers)
            for k, reader in enumerate(readers):
                rs = s["statistics"][reader].get("splits") or {}
                xs, ys, lo, hi = [], [], [], []
                for i, sp in enumerate(splits):
                    p = (rs.get(sp) or {}).get("pcr")
                    if p is None:
                        continue
                    ci = _pcr_ci(values[reader].get(sp, []), alpha, scale) or (p, p)
                    xs.append(i - 0.4 + w * (k + 0.5))
                    ys.append(p)
                    lo.append(max(0.0, p - ci[0]))
                    hi.append(max(0.0, ci[1] - p))
                ax.bar(xs, ys, width=w * 0.95, color=[BASE, OKABE_ITO[1]][k % 2], label=reader,
                       hatch=["", "//"][k % 2], yerr=[lo, hi], capsize=3, ecolor="#333")  # fmt: skip
            ax.set_xticks(range(len(splits)), labels=splits)
            ax.set(ylabel=f"PCR ({scale}, α={alpha:g})", xlabel="split")
            ax.set_title("PCR per split (95% bootstrap CI)")
            ax.legend(fontsize=8, title="reader", title_fontsize=8)
            figs.append(to_svg(fig, "PCR per split"))
    comps = [(r, c) for r in readers for c in (s["statistics"][r].get("comparisons") or [])]
    comps = [(r, c) for r, c in comps if c.get("pcr_diff") is not None]
    if comps:
        with figure(6.4, 1.6 + 0.5 * len(comps)) as (fig, ax):
            for i, (_reader, c) in enumerate(comps):
                d = c["pcr_diff"]
                if c.get("ci_low") is not None:
                    ax.plot([c["ci_low"], c["ci_high"]], [i, i], color=BASE, lw=3)
                ax.plot([d], [i], "D", color=HIGHLIGHT, ms=9, mec="#000")
            ax.axvline(0, color="#000", ls="--", lw=1.2, label="H0: 0 (equal exposure)")
            ax.set_yticks(
                range(len(comps)),
                labels=[f"{c['reference']} − {c['other']} ({r})" for r, c in comps],
            )
            ax.set_ylim(-0.7, len(comps) - 0.3)
            ax.set_xlabel("PCR_ref − PCR_other (< 0: other split contaminated; > 0: fine-tuned)")
            ax.set_title("PCR difference with its 95% CI")
            ax.legend(fontsize=8)
            figs.append(to_svg(fig, "PCR difference with its confidence interval"))
    heat_rows: list[str] = []
    heat_vals: list[list[float]] = []
    cols: list[str] = splits
    for reader in readers:
        _, cols, matrix = pcr_matrix([_for_heatmap(s)], reader)
        heat_rows.append(reader)
        heat_vals.append(matrix[0])
    if heat_rows and cols:
        figs.append(_heatmap(heat_rows, cols, heat_vals, f"PCR ({scale}) per reader and split"))
    abl = (s["statistics"].get("generate") or {}).get("ablation") or {}
    if abl and splits:
        names = list(abl)
        grid = [[_nan((abl[k] or {}).get(sp)) for sp in splits] for k in names]
        figs.append(_heatmap(names, splits, grid, "PCR ablation: scale / α (generated answers)"))
    outcome = _outcome_figure(gen, splits)
    if outcome:
        figs.append(outcome)
    body = (
        "<p class='note'>A trained-on split shows M above C (right answers that change when the "
        "input is modified without changing the answer), hence a higher PCR. The heatmaps show "
        "the same PCRs per reader and, for the generated answers, under every scale and α of "
        "the paper's ablation (a conclusion that flips with α is fragile). A cell shown as "
        "– is undefined: an empty split, or α = 0 with zero consistency (C = 0 divides by 0).</p>"
    )
    return Section("evidence", "Evidence", body, figs)


def _nan(x: Any) -> float:
    return math.nan if x is None else float(x)


def _for_heatmap(s: dict[str, Any]) -> dict[str, Any]:
    """pcr_matrix needs ``model.spec`` and ``benchmark.source``; a run always has both, but
    tolerate hand-written summaries."""
    out = dict(s)
    out.setdefault("model", {})
    out["benchmark"] = s.get("benchmark") if isinstance(s.get("benchmark"), dict) else {}
    out["benchmark"] = {"source": "?", **out["benchmark"]}
    out["model"] = s["model"] if isinstance(s.get("model"), dict) else {"spec": str(s.get("model"))}
    return out


def _outcome_figure(
    gen: dict[str, list[tuple[float, float | None, float]]], splits: list[str]
) -> str | None:
    rows = [x for sp in splits for x in gen.get(sp, [])]
    if not rows:
        return None
    binary = all(x[0] in (0.0, 1.0) and x[2] in (0.0, 1.0) for x in rows)
    with figure(6.4, 3.6) as (fig, ax):
        if binary:
            cats = [
                ("right, consistent", 1.0, 1.0),
                ("right, inconsistent", 1.0, 0.0),
                ("wrong, consistent", 0.0, 1.0),
                ("wrong, inconsistent", 0.0, 0.0),
            ]
            bottom = np.zeros(len(splits))
            for k, (name, m, c) in enumerate(cats):
                frac = np.array(
                    [
                        sum(1 for x in gen.get(sp, []) if x[0] == m and x[2] == c)
                        / max(1, len(gen.get(sp, [])))
                        for sp in splits
                    ]
                )
                ax.bar(range(len(splits)), frac, bottom=bottom, color=OKABE_ITO[k], label=name,
                       hatch=["", "//", "..", "xx"][k])  # fmt: skip
                bottom += frac
            ax.set_xticks(range(len(splits)), labels=splits)
            ax.set(ylabel="fraction of analysed items", xlabel="split")
            ax.set_title("Per-item outcome (generated answers)")
        else:
            for k, sp in enumerate(splits):
                xs = [x[2] for x in gen.get(sp, [])]
                ys = [x[0] for x in gen.get(sp, [])]
                ax.scatter(xs, ys, s=18, color=OKABE_ITO[k % len(OKABE_ITO)],
                           marker="os^Dv"[k % 5], alpha=0.7, label=sp)  # fmt: skip
            ax.plot([0, 1], [0, 1], color="#000", ls="--", lw=1, label="M = C")
            ax.set(xlabel="item consistency C", ylabel="item performance M")
            ax.set_title("Per-item performance vs consistency")
        legend_outside(ax)
        return to_svg(fig, "per-item outcomes")


def _clip(x: Any, n: int = _TEXT) -> str:
    """A cell's text (line breaks kept: the details blocks show it preformatted)."""
    t = "" if x is None else str(x)
    return t[:n] + ("…" if len(t) > n else "")


def _ref(rec: dict[str, Any]) -> str:
    if rec.get("options") is not None and rec.get("answer") is not None:
        a = int(rec["answer"])
        return f"{chr(65 + a)}: {rec['options'][a]}"
    return str(rec.get("reference") or "")


def _choice(rec: dict[str, Any], key: str, opts: str) -> str | None:
    ch = rec.get(key)
    if ch is None or rec.get(opts) is None:
        return None
    return f"{chr(65 + int(ch))}: {rec[opts][int(ch)]}"


def _cases_section(
    records: list[dict[str, Any]], summary: dict[str, Any], options: ReportOptions
) -> Section:
    a = summary.get("analysis") or {}
    task = str(summary.get("task") or "mcq")
    scored = []
    for i, r in enumerate(records):
        if r.get("excluded"):
            continue
        m = _item_m(r, task, str(a.get("mcq_metric") or "mapped"), "m")
        c = _item_c(r, task, a.get("similarity_threshold"))
        if m is not None and c is not None and m > c:
            scored.append((m - c, -i, r, m, c))
    scored.sort(key=lambda t: (t[0], t[1]), reverse=True)
    top = scored[: max(0, options.top_cases)]
    # read from the generated answers; the log-likelihood reader's M and C can differ (the
    # section said "no right-but-inconsistent answers" under a table whose loglik row had some)
    reader = (
        " Read from the generated answers; the log-likelihood reader's M and C are in the "
        "table above."
        if any(_loglik(r) is not None for r in records)
        else ""
    )
    if not top:
        return Section(
            "cases",
            "Right but inconsistent items",
            "<p class='note'>No analysed item scored higher on performance than on consistency "
            f"(no right-but-inconsistent answers).{reader}</p>",
        )
    blocks = []
    for _, _, r, m, c in top:
        rows = [
            ("input", r.get("input")),
            ("modified input", r.get("modified_input")),
            ("reference", _ref(r)),
            ("prediction", r.get("prediction")),
            ("→ mapped to", _choice(r, "choice", "options")),
            ("prediction on modified input", r.get("modified_prediction")),
            ("→ mapped to", _choice(r, "modified_choice", "modified_options")),
        ]
        body = "".join(
            f"<tr><th>{esc(k)}</th><td>{in_lang(_clip(v), 'pre')}</td></tr>"
            for k, v in rows
            if v is not None
        )
        blocks.append(
            f"<details open><summary><b>{esc(r['id'])}</b> (split {esc(r.get('split'))}): "
            f"M = {m:.3f}, C = {c:.3f}</summary><table>{body}</table></details>"
        )
    body = (
        f"<p class='note'>The {len(top)} analysed items (of {len(scored)} with M &gt; C) where "
        "performance exceeds consistency the most: right on the original input, but the answer "
        "changes when the input is modified in a way that keeps it right. Memorised items "
        f"behave like this; so do items the model guesses right by chance.{reader}</p>"
    )
    return Section("cases", "Right but inconsistent items", body + "".join(blocks))


def _shared_lines(texts: list[str]) -> str:
    """The whole lines that every one of several texts starts with (a prompt's instruction),
    so that a table cell can show what differs; "" when there is none.

    >>> _shared_lines(["Answer.\\nQ: 1+1", "Answer.\\nQ: 2+2"])
    'Answer.\\n'
    """
    if len(texts) < 2:
        return ""
    common = os.path.commonprefix(texts)
    return common[: common.rfind("\n") + 1]


def _table_section(
    records: list[dict[str, Any]], summary: dict[str, Any], options: ReportOptions
) -> Section:
    mcq = str(summary.get("task") or "") == "mcq"
    shared = _shared_lines([str(r.get("input") or "") for r in records])
    cols = [
        Column("id", "item"),
        Column("split", "split"),
        Column("m", "M", "num", help="performance on the original input"),
        Column("m_modified", "M modified", "num", help="performance on the modified input"),
        Column("c", "C", "num", help="consistency of the two predictions"),
    ]
    if mcq:
        cols += [
            Column("answer", "answer", help="reference option"),
            Column("choice", "chosen", help="option the generated answer maps to (– unmapped)"),
            Column("modified_choice", "chosen (modified)", help="same, on the modified input"),
        ]
    else:
        cols += [
            Column("reference", "reference"),
            Column("similarity", "similarity", "num", help="summary: embedding cosine"),
        ]
    cols += [
        Column("prediction", "prediction"),
        Column("modified_prediction", "prediction (modified)"),
        Column("excluded", "excluded because"),
        Column("modification", "modification", help="what gamma did"),
        Column(
            "question",
            "input, after the instruction all share" if shared else "input",
            help=clip(shared, 300),
            clip=_CELL,
        ),
    ]
    rows = []
    for r in records:
        mod = r.get("modification") or {}
        row: list[Any] = [r.get("id"), r.get("split"), r.get("m"), r.get("m_modified"), r.get("c")]
        if mcq:
            row += [_ref(r) or None, _choice(r, "choice", "options"),
                    _choice(r, "modified_choice", "modified_options")]  # fmt: skip
        else:
            row += [_clip(r.get("reference"), _CELL), r.get("similarity")]
        row += [
            _clip(r.get("prediction"), _CELL),
            _clip(r.get("modified_prediction"), _CELL),
            r.get("excluded"),
            ", ".join(f"{k}={v}" for k, v in mod.items() if k != "order") or None,
            " ".join(str(r.get("input") or "")[len(shared) :].split()),  # whole: searched
        ]
        rows.append(row)
    table = Table("items", cols, rows, page_size=options.page_size)
    return Section(
        "items",
        "All items",
        f"<p class='note'>{len(rows)} records (one per item and split); click a header to sort, "
        "type to search any column (the whole input; predictions and references as far as "
        f"shown, their first {_CELL} characters). The full prompts and predictions are in "
        "items.jsonl.</p>",
        after=table.html(),
    )


def _provenance_section(run: RunData) -> Section:
    s = run.summary
    return provenance(
        run,
        ("model", "benchmark", "config", "analysis", "counts"),
        "model, data, settings, counts",
        [
            ("skipped input rows", s.get("skipped_rows") or []),
            ("layout warnings", s.get("layout_warnings") or []),
        ],
    )


def leaderboard_figures(runs: Sequence[RunData], labels: Sequence[tuple[str, str]]) -> list[str]:
    """A PCR heatmap over CAP runs (rows: model | benchmark, columns: splits), as in the
    paper's Figure 1(a). ``labels`` are each run's (model, benchmark) as the board names them."""
    summaries = [_for_heatmap(r.summary) for r in runs]
    short = [f"{model} | {bench}" for model, bench in labels]
    scales = [(s.get("analysis") or {}).get("scale", "tanh") for s in summaries]
    out = []
    for scale in dict.fromkeys(scales):  # PCRs on other scales are other numbers: a map each
        mine = [i for i, x in enumerate(scales) if x == scale]
        _, cols, vals = pcr_matrix([summaries[i] for i in mine], "generate")
        out.append(
            _heatmap([short[i] for i in mine], cols, vals, f"CAP: PCR ({scale}) per run and split")
        )
    return out
