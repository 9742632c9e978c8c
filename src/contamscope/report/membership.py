"""Report sections for membership runs (``contamscope.membership.summary/1``, ``contamscope
membership``): is the model more familiar with the benchmark's items than with unseen reference
items written like them?

Up front: the dataset test (AUC of the declared statistic, benchmark against references, with
its CI and one-sided Mann-Whitney p) and the per-item flags with their stated error rate. Then
the evidence: the statistic's distribution on both sets, the benchmark items' conformal
p-values (uniform under H0), every statistic's AUC (the declared one is the test; the others
are exploration); whether the references are written like the benchmark; a table of all items.

Leaderboard cell: AUC - 0.5 (0: no more familiar than unseen text; above 0: more familiar).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..detectors.verdict import VERDICT_ALPHA as VERDICT_LEVEL
from ..detectors.verdict import p_text
from ..wording import plural
from .html import Column, Section, Table, esc, provenance
from .methods import Estimate, ReportOptions
from .plots import BASE, HIGHLIGHT, OKABE_ITO, figure, to_svg
from .rundata import RunData

__all__ = [
    "TITLE",
    "UNRANKED",
    "MEASURED",
    "sections",
    "estimate",
    "why_unranked",
    "verdict_line",
    "reference_check_section",
]

TITLE = "Membership test (against unseen references)"
UNRANKED = "no dataset test: no benchmark or no reference item was analysed"
"""Why a run gets no leaderboard cell (said when it is left out)."""
MEASURED = ("template", "k")
"""Settings in its configuration that change what is measured (the same texts, the same Min-K%
fraction): runs that differ in one are other measurements (``compare`` refuses them; the
leaderboard says so under a column)."""
LABELS = {
    "min_k_pp": "Min-K%++",
    "min_k": "Min-K%",
    "loss": "mean log-prob (−loss)",
    "zlib": "log-prob / zlib length",
    "gap": "option-order gap",
    "combined": "combined (Min-K%++ and gap)",
}
"""Statistic -> label (every one: higher = more familiar)."""
LEGEND = (
    "AUC − 0.5 of the run's declared statistic, benchmark items against unseen "
    "reference items written like them (0 = no more familiar than text the model cannot have "
    "seen; above 0: more familiar). 95% expanded stratified bootstrap CI; p: one-sided "
    "Mann-Whitney U, H0: benchmark and reference statistics come from one distribution. "
    "The interval is computed apart from the test (two-sided, widened for small sets), so it "
    "can reach 0 beside a p at or below 0.05, or exclude 0 beside a larger p: the verdict is "
    "the test's."
)


def _dataset(summary: dict[str, Any]) -> dict[str, Any]:
    return ((summary.get("statistics") or {}).get("dataset_test")) or {}


def estimate(run: RunData) -> Estimate | None:
    """Leaderboard cell: the dataset test's AUC minus 0.5, with its CI and p-value."""
    d = _dataset(run.summary)
    auc = d.get("auc")
    if auc is None or not d.get("n_benchmark"):
        return None
    ci = d.get("auc_ci")
    stat = (run.summary.get("statistics") or {}).get("statistic", "?")
    return Estimate(
        statistic=f"membership AUC − 0.5, {LABELS.get(stat, stat)}",
        value=float(auc) - 0.5,
        ci=(ci[0] - 0.5, ci[1] - 0.5) if ci else None,
        p_value=d.get("p_value"),
        n_items=int(d["n_benchmark"]),
        raw={"rate": float(auc), "chance": 0.5},
        percent=False,
        legend=LEGEND,
        warning=_unlike_text(run.summary),
    )


def _unlike_text(summary: dict[str, Any]) -> str:
    """What the reference check found unlike (empty when the references are alike)."""
    if not _unlike(summary):
        return ""
    check = summary["reference_check"]
    level = check.get("level", 0.0)
    rows = [r for r in check.get("rows") or [] if r.get("p_value", 1.0) <= level]
    named = ", ".join(str(r.get("feature")) for r in rows) or "the reference check"
    verb = "differs" if len(rows) <= 1 else "differ"
    return (
        f"its references are not written like the benchmark items ({named} {verb}), so its "
        "AUC can read a difference of kind as familiarity"
    )


def why_unranked(run: RunData) -> str:
    return UNRANKED


def _unlike(summary: dict[str, Any]) -> bool:
    check = summary.get("reference_check") or {}
    return bool(check) and not check.get("alike", True)


def verdict_line(summary: dict[str, Any]) -> tuple[str, str] | None:
    """The run's verdict as (kind, sentence): ``signal`` (the dataset test rejects H0 at 5%
    with AUC above 0.5) or ``clean``; None without a dataset test. The report's and the
    terminal's one line."""
    d = _dataset(summary)
    if d.get("auc") is None or d.get("p_value") is None:
        return None
    ci = d.get("auc_ci")
    auc = f"AUC {d['auc']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
    caveat = (
        "; but the references are not written like the benchmark items (see the reference "
        "check), which can make a clean benchmark look more familiar"
        if _unlike(summary)
        else ""
    )
    signal = d["p_value"] <= VERDICT_LEVEL and d["auc"] > 0.5
    if ci and signal == (ci[0] <= 0.5):  # (a verdict the interval alone would not give)
        caveat += (
            "; the interval is computed apart from the test (a two-sided bootstrap one, widened "
            f"for small sets) and {'reaches' if signal else 'excludes'} 0.5: the verdict is "
            "the test's"
        )
    if signal:
        return "signal", (
            "LEAK SIGNAL: the model is more familiar with the benchmark items than with unseen "
            f"references at 5% ({auc}, one-sided p {p_text(d['p_value'])}; the verdict's level, "
            f"whatever --alpha flags items at){caveat}"
        )
    return "clean", (
        f"no evidence that the benchmark items are more familiar than the unseen references "
        f"at 5% ({auc}, one-sided p {p_text(d['p_value'])}; absence of evidence is not proof of "
        f"absence){caveat}"
    )


def _value(rec: dict[str, Any], stat: str) -> float | None:
    """The item's declared statistic (a combined run: its combined score, benchmark only)."""
    stats = rec.get("statistics") or {}
    v = rec.get("combined_score") if stat == "combined" else stats.get(stat)
    return None if v is None or not math.isfinite(float(v)) else float(v)


def _by_statistic(st: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every statistic's AUC as the run's summary holds them, with a combined run's own test
    first (the summary keeps it as the dataset test, not among the single statistics)."""
    by_statistic = dict(st.get("by_statistic") or {})
    test = st.get("dataset_test") or {}
    if (
        st.get("statistic") == "combined"
        and "combined" not in by_statistic
        and test.get("auc") is not None
    ):
        by_statistic = {  # the run's own test: the combined score over the pooled items
            "combined": {
                "declared": True,
                "auc": test.get("auc"),
                "auc_ci": test.get("auc_ci"),
                "p_value": test.get("p_value"),
                "benchmark_n": test.get("n_benchmark"),
                "reference_n": test.get("n_reference"),
            },
            **by_statistic,
        }
    return by_statistic


# --------------------------------------------------------------------------- sections


def sections(run: RunData, options: ReportOptions) -> list[Section]:
    records = list(run.iter_records())
    return [
        _verdict_section(run),
        _evidence_section(run, records),
        *reference_check_section(run.summary.get("reference_check")),
        _table_section(run, records, options),
        _provenance_section(run),
    ]


def _verdict_section(run: RunData) -> Section:
    s = run.summary
    st = s.get("statistics") or {}
    line = verdict_line(s)
    if line is None:
        return Section("verdict", "Verdict and statistics", "<p class='note'>No dataset test.</p>")
    kind, sentence = line
    # references unlike the benchmark items: the stated error rate does not hold, whichever
    # way the test went (a green "no evidence" box read as a clean bill; HTML QA)
    cls = "caution" if _unlike(s) else kind
    stat = st.get("statistic", "?")
    q = "q" if st.get("fdr") else "p"
    head = (
        f'<div class="verdict {cls}">{esc(sentence)}</div>'
        f"<p class='note'>{st.get('flagged', 0)} of {plural(st.get('n_items', 0), 'benchmark item')}"
        f" flagged at {q} ≤ {st.get('alpha', 0.05):g}: {esc(st.get('error_rate', ''))}.</p>"
        "<p class='note'><b>How to read it.</b> Each item's text (question and options in the "
        "published order) is scored by the model and summarised by a familiarity statistic "
        f"(here {esc(LABELS.get(stat, stat))}; higher = more familiar). The reference items are "
        "texts the model cannot have seen, written like the benchmark's. <b>H0</b> per item: "
        "its statistic is exchangeable with the references' (conformal p-value: the share of "
        "references at least as familiar); for the dataset: both sets' statistics come from "
        "one distribution (AUC 0.5), against the one-sided alternative that benchmark items are "
        f"more familiar (Mann-Whitney U). Leak signal: p ≤ {VERDICT_LEVEL} with AUC above 0.5. "
        "The error rates hold only if the references are drawn like the benchmark items.</p>"
    )
    rows = []
    for name, d in _by_statistic(st).items():
        ci = d.get("auc_ci")
        rows.append(
            f"<tr><td>{esc(LABELS.get(name, name))}{' (declared)' if d.get('declared') else ''}"
            f"</td><td>{_num(d.get('benchmark_median'))}</td>"
            f"<td>{_num(d.get('reference_median'))}</td>"
            f"<td>{_num(d.get('auc'), 3, fixed=True)}</td>"
            f"<td>{'–' if not ci else f'[{ci[0]:.3f}, {ci[1]:.3f}]'}</td>"
            f"<td>{'–' if d.get('p_value') is None else p_text(d['p_value'])}</td>"
            f"<td>{d.get('benchmark_n', 0)} / {d.get('reference_n', 0)}</td></tr>"
        )
    table = (
        "<p class='note'>Every statistic the run holds. Only the declared one is the run's "
        "test; the others are shown for exploration and their p-values are not corrected for "
        "being several.</p>"
        '<table class="stats"><tr><th>statistic</th><th>median, benchmark</th>'
        "<th>median, references</th><th>AUC</th><th>95% CI</th><th>p (one-sided)</th>"
        f"<th>items benchmark / references</th></tr>{''.join(rows)}</table>"
        if rows
        else ""
    )
    return Section("verdict", "Verdict and statistics", head + table)


def _num(x: Any, digits: int = 4, fixed: bool = False) -> str:
    """``digits`` significant digits, or with ``fixed`` decimals (an AUC beside its CI)."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{float(x):.{digits}{'f' if fixed else 'g'}}"


def _evidence_section(run: RunData, records: list[dict[str, Any]]) -> Section:
    st = run.summary.get("statistics") or {}
    stat = st.get("statistic", "?")
    figs: list[str] = []
    if stat == "combined":
        figs += _scatter(records)
    else:
        figs += _distributions(records, stat)
    ps = [float(r["p_value"]) for r in records if r.get("p_value") is not None]
    if ps:
        with figure(6.4, 3.4) as (fig, ax):
            bins = np.linspace(0.0, 1.0, 21)
            ax.hist(ps, bins=bins, color=BASE, label="benchmark items")
            ax.axhline(len(ps) / 20, color="#000", ls="--", lw=1.2, label="expected under H0")
            ax.axvline(st.get("alpha", 0.05), color=HIGHLIGHT, lw=1.5, label="alpha")
            ax.set(xlabel="conformal p-value", ylabel="items")
            ax.set_title("Benchmark items' p-values (flat under H0, piled at 0 if seen)")
            ax.legend(fontsize=8)
            figs.append(to_svg(fig, "histogram of the benchmark items' conformal p-values"))
    aucs = [  # the combined run's own test among them (its plot had no diamond; HTML QA)
        (LABELS.get(name, name), d["auc"], d.get("auc_ci"), bool(d.get("declared")))
        for name, d in _by_statistic(st).items()
        if d.get("auc") is not None
    ]
    if aucs:
        with figure(6.4, 1.7 + 0.45 * len(aucs)) as (fig, ax):
            for i, (_, auc, ci, declared) in enumerate(aucs):
                if ci:
                    ax.plot([ci[0], ci[1]], [i, i], color=BASE, lw=3)
                ax.plot([auc], [i], "D" if declared else "o", color=HIGHLIGHT if declared else BASE,
                        ms=9 if declared else 6, mec="#000")  # fmt: skip
            ax.axvline(0.5, color="#000", ls="--", lw=1.2, label="H0: 0.5")
            ax.set_yticks(range(len(aucs)), labels=[a[0] for a in aucs], fontsize=8)
            ax.set_ylim(-0.7, len(aucs) - 0.3)
            ax.set_xlabel("AUC, benchmark against references (> 0.5: more familiar)", fontsize=9)
            ax.set_title("Each statistic's AUC, 95% CI (diamond: the declared test)", fontsize=10)
            ax.legend(fontsize=8)
            figs.append(to_svg(fig, "AUC of each statistic, benchmark against references"))
    body = (
        "<p class='note'>Under H0 the benchmark's and the references' distributions overlap, "
        "the p-values are flat and every AUC interval covers 0.5.</p>"
    )
    return Section("evidence", "Evidence", body, figs)


def _distributions(records: list[dict[str, Any]], stat: str) -> list[str]:
    vals = {
        role: [x for r in records if r.get("role") == role and (x := _value(r, stat)) is not None]
        for role in ("benchmark", "reference")
    }
    if not vals["benchmark"] or not vals["reference"]:
        return []
    both = vals["benchmark"] + vals["reference"]
    lo, hi = min(both), max(both)
    bins = np.linspace(lo, hi if hi > lo else lo + 1.0, 26)
    with figure(6.4, 3.6) as (fig, ax):
        for k, (role, xs) in enumerate(vals.items()):
            ax.hist(xs, bins=bins, density=True, histtype="step", lw=2,
                    color=OKABE_ITO[k], ls="-" if k == 0 else "--",
                    label=f"{role} ({len(xs)})")  # fmt: skip
            ax.axvline(float(np.median(xs)), color=OKABE_ITO[k], lw=1, ls=":")
        ax.set(xlabel=f"{LABELS.get(stat, stat)} (higher = more familiar)", ylabel="density")
        ax.set_title("Benchmark against unseen references (dotted: medians)")
        ax.legend(fontsize=8)
        return [to_svg(fig, "distribution of the statistic, benchmark and references")]


def _scatter(records: list[dict[str, Any]]) -> list[str]:
    """A combined run: its two parts per item, benchmark and references."""
    pts = {
        role: [
            (r["statistics"]["min_k_pp"], r["statistics"]["gap"])
            for r in records
            if r.get("role") == role
            and not r.get("excluded")
            and (r.get("statistics") or {}).get("min_k_pp") is not None
            and r["statistics"].get("gap") is not None
        ]
        for role in ("benchmark", "reference")
    }
    if not any(pts.values()):
        return []
    with figure(5.4, 4.4) as (fig, ax):
        for k, (role, p) in enumerate(pts.items()):
            if p:
                ax.scatter([x[0] for x in p], [x[1] for x in p], s=18, alpha=0.7,
                           color=OKABE_ITO[k], marker="os"[k], label=f"{role} ({len(p)})")  # fmt: skip
        ax.set(xlabel="Min-K%++", ylabel="option-order gap (nats)")
        ax.set_title("Both parts of the combined statistic (up and right: more familiar)")
        ax.legend(fontsize=8)
        return [to_svg(fig, "Min-K%++ against the option-order gap, per item")]


def _table_section(run: RunData, records: list[dict[str, Any]], options: ReportOptions) -> Section:
    st = run.summary.get("statistics") or {}
    stat = st.get("statistic", "?")
    cols = [
        Column("id", "item"),
        Column("role", "role"),
        Column("subject", "subject"),
        Column("n_tokens", "tokens", "int"),
        Column(
            "value",
            LABELS.get(stat, stat),
            "num",
            help="the declared statistic"
            + (
                " (benchmark items: each one's score among the references; a reference has "
                "its score only in the pool of all items, which the AUC ranks)"
                if stat == "combined"
                else ""
            ),
        ),
        Column("p", "p", "num", help="conformal p-value (benchmark items)"),
        *([Column("q", "q", "num", help="Benjamini-Hochberg q-value")] if st.get("fdr") else []),
        Column("flag", "flagged", "bool"),
        Column("excluded", "excluded"),
    ]
    rows: list[list[Any]] = []
    for r in records:
        row = [r.get("id"), r.get("role"), r.get("subject"), r.get("n_tokens"), _value(r, stat),
               r.get("p_value")]  # fmt: skip
        if st.get("fdr"):
            row.append(r.get("q_value"))
        row += [r.get("flag"), r.get("excluded")]
        rows.append(row)
    table = Table("items", cols, rows, page_size=options.page_size)
    return Section(
        "items",
        "All items",
        f"<p class='note'>{plural(len(rows), 'item')} (benchmark and references); click a header "
        "to sort, type to search any column. Every statistic is in items.jsonl.</p>",
        after=table.html(),
    )


def _provenance_section(run: RunData) -> Section:
    s = run.summary
    skipped = [x for v in (s.get("skipped_rows") or {}).values() for x in v]
    refs = esc((s.get("reference") or {}).get("source"))
    return provenance(
        run,
        ("model", "benchmark", "reference", "config", "counts"),
        "model, data, settings, counts",
        [("skipped input rows", skipped)],
        also=f"; references <code>{refs}</code>",
    )


def reference_check_section(check: dict[str, Any] | None) -> list[Section]:
    """The check that a run's reference items are written like its benchmark items (a
    membership run's references, a permutation run's ``--reference-run``); none without one."""
    if not check or not check.get("rows"):
        return []
    from ..detectors.verdict import pct_text

    def share(d: dict[str, Any]) -> str:
        return f"{pct_text(d['rate'])} ({d['count']:,} of {d['of']:,})"

    table = Table(
        "reference-check",
        [
            Column("feature", "feature"),
            Column("benchmark", "benchmark"),
            Column("references", "references"),
            Column("Fisher p", "Fisher p"),
        ],
        [
            [r["feature"], share(r["benchmark"]), share(r["reference"]), p_text(r["p_value"])]
            for r in check["rows"]
        ],
        page_size=50,
    )
    level = f"{check['level']:.3g}"
    verdict = (
        "no feature differs at p &le; " + level + " (Bonferroni); with few references that is "
        "weak evidence of likeness"
        if check.get("alike")
        else "<strong>the references differ</strong> (p &le; " + level + "): the stated "
        "error rate assumes references drawn like the benchmark items"
    )
    return [
        Section(
            "reference-check",
            "Are the references written like the benchmark?",
            "<p class='note'>H0 per row: benchmark and reference items have the feature at the "
            f"same rate (two-sided Fisher exact test). Result: {verdict}.</p>",
            after=table.html(),
        )
    ]
