"""Report sections for option-permutation runs (``contamscope.permutation.summary/1``).

Shows the verdict and its statistics (each with its 95% CI, what H0 predicts, i.e. the
false-positive rate, and the p-value), then the evidence: where the original order ranks among
the N orders against the uniform expectation, the distribution of log-prob gaps, dot-line plots
of all N log-probs for the most suspicious items (original order highlighted, as in Ni et al.'s
Figures 4-5), ROC/PR when leak labels are known, and a per-item table.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..detectors.verdict import (
    conventions_text,
    counted_items,
    few_items_text,
    verdict_p_value,
)
from ..errors import DataError
from ..wording import all_of, plural, pp_text
from .html import (
    Column,
    Section,
    Table,
    clip,
    esc,
    fmt_ci,
    fmt_p,
    fmt_p_text,
    fmt_pct,
    in_lang,
    provenance,
)
from .methods import Estimate, ReportOptions
from .plots import BASE, HIGHLIGHT, figure, legend_outside, to_svg
from .rundata import RunData
from .validation import validation_section

__all__ = ["TITLE", "UNRANKED", "MEASURED", "sections", "estimate", "why_unranked"]

TITLE = "Option-permutation test"
UNRANKED = "no item analysed, so no Algorithm-1 rate"
"""Why a run gets no leaderboard cell (said when it is left out)."""
MEASURED = ("template",)
"""Settings in its configuration that change what is measured: runs that differ in one are
other measurements (``compare`` refuses them; the leaderboard says so under a column)."""
_QUESTION_CHARS = 600  # a case study's caption shows this much (the table: all of it)
_CELL = 300  # a table cell shows one line; its tooltip and the search see the whole text


def _ranked_statistics(run: RunData) -> tuple[dict[str, Any], int]:
    """The statistics the verdict rests on, and how many naturally ordered items they leave
    out (0: all analysed items)."""
    natural = run.summary.get("natural_order") or {}
    if natural.get("n_items"):
        return natural.get("statistics_without") or {}, int(natural["n_items"])
    return run.summary.get("statistics") or {}, 0


def estimate(run: RunData) -> Estimate | None:
    """Leaderboard cell: Algorithm-1 rate minus its exact chance level, with the 95% CI, on the
    items the verdict rests on (naturally ordered items set aside, as the verdict does). Its
    p-value is the verdict's: the smallest of its tests' times their number (Bonferroni), so
    a cell rejects H0 at 5% exactly where the run's verdict finds a leakage signal."""
    stats, aside = _ranked_statistics(run)
    a1 = stats.get("alg1")
    if not a1 or not stats.get("n_items"):
        return None
    ci = a1.get("excess_ci")
    subjects = run.summary.get("by_subject") or {}
    return Estimate(
        statistic="Algorithm-1 excess over chance",
        value=a1.get("excess"),
        ci=(ci[0], ci[1]) if ci else None,
        p_value=verdict_p_value(stats),
        n_items=int(stats.get("n_items") or 0),
        raw={"rate": a1.get("rate"), "chance": a1.get("null_expected"), "set_aside": aside},
        settings={"ties": str((run.summary.get("config") or {}).get("ties", "not_leaked"))},
        legend="percentage points beyond chance, 95% CI in brackets; 0 = what a model that "
        "never saw the benchmark shows; p-value one-sided, H0: no leakage, the verdict's: the "
        "smallest of its three tests' (Algorithm-1 excess, rank-test count, mean-gap test) "
        "times three (Bonferroni), so a cell at p <= 0.05 is a run whose verdict found a "
        "leakage signal; the interval is Algorithm 1's own, so it can exclude 0 beside a p "
        "above 0.05 (Algorithm 1 alone would reject, the verdict over three tests does not). "
        "Counted on the items "
        "the verdict tests: items whose published option order is a natural one (sorted "
        "numbers, truth-table blocks, 2 x 2 blocks row by row, ...) are set aside, as a clean "
        "model prefers that order too.",
        flagged=tuple(str(r["subject"]) for r in subjects.get("subjects") or [] if r["flagged"]),
        n_parts=int(subjects["n_tested"]) if subjects else None,
        n_untestable=int(subjects.get("n_too_few_items") or 0) if subjects else 0,
        caveat=conventions_text(run.summary.get("natural_order")),
    )


def why_unranked(run: RunData) -> str:
    """Why ``estimate`` gave no cell for this run."""
    stats, aside = _ranked_statistics(run)
    if aside and not stats.get("n_items"):
        verb = "has" if aside == 1 else "have"
        return f"{all_of(aside, 'analysed item')} {verb} a natural option order, nothing testable"
    return UNRANKED


@dataclass
class _Case:
    """A suspicious item kept for a case-study plot."""

    id: str
    subject: str | None
    question: str
    logprobs: list[float]
    orders: list[list[int]]
    rank: int
    p_value: float
    gap: float
    options: str = ""
    """The option block in the original order (``A:... B:...``), clipped."""


def _letters(order: list[int]) -> str:
    return "".join(chr(ord("A") + i) if i < 26 else "?" for i in order)


def _alg2_flag(rec: dict[str, Any], d0: str | None) -> bool | None:
    """The item's Algorithm-2 flag at ``d0``, or at its own threshold when it has no ``d0`` (a
    5-option item of a run whose first threshold is the 4-option default)."""
    flags = rec.get("alg2") or {}
    if d0 in flags:
        return bool(flags[d0])
    return bool(next(iter(flags.values()))) if flags else None


def _question(rec: dict[str, Any], cue: str = "{question}:\n") -> str:
    r"""The item's question, whitespace collapsed: the record's ``question`` where it has one,
    else its scored prefix without the template's text around ``{question}`` (``cue``, the
    run's template's question format: "The K-means algorithm:" + ":\n" read
    "The K-means algorithm::"; HTML QA).

    >>> _question({"prefix": "The K-means algorithm::\n"})
    'The K-means algorithm:'
    >>> _question({"prefix": "Q: Why?\nA:"}, "Q: {question}\nA:")
    'Why?'
    """
    if isinstance(rec.get("question"), str):
        return " ".join(rec["question"].split())
    text = str(rec.get("prefix") or "")
    lead, _, trail = cue.partition("{question}")
    if "{question}" in cue and text.startswith(lead) and text.endswith(trail):
        text = text[len(lead) : len(text) - len(trail)]
    return " ".join(text.split())


def option_lines(text: str, rec: dict[str, Any], line: str) -> str:
    r"""The options of the original order's text joined by " · ", cut where each next label
    starts (by the run's template ``line``, e.g. ``{label}:{text}\n``): an option holding a line
    break was cut at it, and read as two options (HTML QA).

    >>> rec = {"n_options": 2}
    >>> option_lines("A:alpha\nbeta\nB:gamma\n", rec, "{label}:{text}\n")
    'A:alpha beta · B:gamma'
    """
    from ..data.items import option_labels

    lead = line.split("{text}")[0] if "{label}" in line.split("{text}")[0] else ""
    try:
        labels = option_labels(int(rec.get("n_options") or 0))
    except (TypeError, ValueError):
        labels = ()
    if not lead or not labels:
        return " · ".join(text.splitlines())
    parts, start = [], 0
    for label in labels[1:]:
        cut = text.find("\n" + lead.replace("{label}", label), start)
        if cut < 0:
            return " · ".join(text.splitlines())  # not laid out as the template says
        parts.append(text[start:cut])
        start = cut + 1
    parts.append(text[start:])
    return " · ".join(" ".join(p.split("\n")).strip() for p in parts)


def sections(run: RunData, options: ReportOptions) -> list[Section]:
    summary = run.summary
    stats = summary.get("statistics") or {}
    alpha = stats.get("alpha", 0.05)
    delta_keys = list((stats.get("alg2") or {}).keys())
    d0 = delta_keys[0] if delta_keys else None
    rows: list[list[Any]] = []
    ranks: dict[int, Counter[int]] = {}
    gaps: list[float] = []
    label_pairs: list[tuple[bool, float, float]] = []
    any_label = options.labels is not None
    # the k most suspicious items: min-heap on (-p, gap, -index), so heap[0] is the mildest kept
    heap: list[tuple[float, float, int, _Case]] = []
    k = max(0, options.top_cases)
    set_aside = (summary.get("natural_order") or {}).get("by_id") or {}
    template = (summary.get("config") or {}).get("template") or {}
    line = str(template.get("option") or "")
    cue = str(template.get("question") or "{question}:\n")  # the default template's
    for i, (at, rec) in enumerate(run.iter_numbered_records()):
        try:
            label = rec.get("leak_label")
            if options.labels is not None:
                label = options.labels.get(rec["id"], False)
            any_label = any_label or label is not None
            q = _question(rec, cue)  # whole: the table's search and tooltips see it all
            if rec.get("excluded") or rec.get("rank") is None:
                rows.append(
                    [rec["id"], rec.get("subject"), *[None] * 6, rec.get("excluded"), q, label]
                )
                continue
            n_orders = int(rec["n_orders"])
            p, gap = float(rec["p_value"]), float(rec["gap"])
            ranks.setdefault(n_orders, Counter())[int(rec["rank"])] += 1
            gaps.append(gap)
            if label is not None:
                label_pairs.append((bool(label), 1.0 - p, gap))
            rows.append(
                [
                    rec["id"],
                    rec.get("subject"),
                    [int(rec["rank"]), f"{rec['rank']}/{n_orders}"],  # sorted as a number
                    p,
                    gap,
                    rec["alg1"],
                    _alg2_flag(rec, d0),
                    rec.get("alg2_score"),
                    f"set aside by the verdict: {set_aside[rec['id']]}"
                    if rec["id"] in set_aside
                    else None,
                    q,
                    label,
                ]
            )
            key = (-p, gap, -i)
            if k and (len(heap) < k or key > heap[0][:3]):
                case = _Case(
                    rec["id"],
                    rec.get("subject"),
                    clip(q, _QUESTION_CHARS, tail=_QUESTION_CHARS // 3),  # a passage's end too
                    [float(x) for x in rec["logprobs"]],
                    rec["orders"],
                    int(rec["rank"]),
                    p,
                    gap,
                    clip(option_lines((rec.get("continuations") or [""])[0], rec, line), 600),
                )
                if len(heap) < k:
                    heapq.heappush(heap, (*key, case))
                else:
                    heapq.heapreplace(heap, (*key, case))
        except (KeyError, TypeError, ValueError) as exc:  # (summary.json was blamed; QA)
            raise DataError(
                f"{run.items_path}:{at}: a damaged record ({type(exc).__name__}: "
                f"{str(exc)[:80]}); re-run the command that wrote the folder: it scores a "
                "damaged record again"
            ) from None
    cases = [t[3] for t in sorted(heap, key=lambda t: t[:3], reverse=True)]
    if not any_label:
        rows = [r[:-1] for r in rows]
    out = [
        _verdict_section(run, stats),
        _evidence_section(ranks, gaps, stats),
        _cases_section(cases, len(gaps)),
    ]
    by_subject = run.summary.get("by_subject")
    if by_subject:
        out.insert(1, _subject_section(by_subject))
    if label_pairs:
        out.append(
            validation_section(
                [x[0] for x in label_pairs],
                {
                    "rank p-value (1 - p)": [x[1] for x in label_pairs],
                    "log-prob gap": [x[2] for x in label_pairs],
                },
                what="analysed items",
            )
        )
    from .membership import reference_check_section

    out += reference_check_section((summary.get("reference_run") or {}).get("check"))
    expected = (stats.get("rank") or {}).get("expected")
    out.append(_table_section(rows, options, alpha, d0, any_label, expected, len(delta_keys) > 1))
    out.append(_provenance_section(run))
    return out


def _verdict_section(run: RunData, stats: dict[str, Any]) -> Section:
    from ..detectors.verdict import shared_text, verdict

    signal, sentence = verdict(stats, run.summary.get("natural_order"))
    shared = shared_text(stats, run.summary.get("natural_order"))
    cls = "none" if signal is None else ("signal" if signal else "clean")
    counts = run.summary.get("counts") or {}
    excl = ", ".join(f"{v} {esc(k)}" for k, v in (counts.get("excluded") or {}).items()) or "none"
    head = (
        f'<div class="verdict {cls}">{esc(sentence)}</div>'
        f'<p class="note">{plural(counts.get("items_analysed", 0), "item")} analysed of '
        f"{esc(counts.get('items_selected', 0))} selected (excluded: {excl}; input rows skipped: "
        f"{esc(counts.get('rows_skipped', 0))}). <b>H0</b>: the model has not seen the items, so each "
        "item's original option order is exchangeable with its other orders. The column "
        "<i>expected under H0</i> is each statistic's false-positive rate: what a clean model "
        "shows. The verdict combines the three calibrated tests (Algorithm-1 excess, rank-test "
        "count, mean gap) with a Bonferroni correction at 5% overall."
        + (f" {esc(shared[0].upper() + shared[1:])}." if shared else "")
        + "</p>"
    )
    if not stats.get("n_items"):
        return Section("verdict", "Verdict", head)
    rows: list[tuple[str, str, str, str, str]] = []
    a1 = stats["alg1"]
    rows.append(
        (
            "Algorithm 1 (paper): original order has the highest log-prob",
            f"{fmt_pct(a1['rate'])} ({esc(a1['count'])})",
            fmt_ci(a1["rate_ci"]),
            fmt_pct(a1["null_expected"]),
            fmt_p(a1["p_value"]),
        )
    )
    rows.append(
        (
            "&nbsp;&nbsp;excess over chance",
            fmt_pct(a1["excess"], signed=True),
            fmt_ci(a1["excess_ci"], signed=True),
            "+0.0%",
            "",
        )
    )
    r = stats["rank"]
    rows.append(
        (
            f"Rank test: items with rank p-value ≤ {r['alpha']:g}",
            f"{fmt_pct(r['rate'])} ({esc(r['count'])})",
            fmt_ci(r["rate_ci"]),
            fmt_pct(r["expected"]),
            fmt_p(r["p_value"]),
        )
    )
    g = stats["gap"]
    if g.get("mean") is not None:
        null = g.get("null_range")
        rows.append(
            (
                "Mean log-prob gap, original − mean of the others (nats; "
                f"{esc(g.get('method') or 't-test')})",
                f"{g['mean']:+.3f}",
                "–‡" if null else fmt_ci(g["ci"], pct=False),  # (the note says why)
                f"0, 95% of H0: {fmt_ci(null, pct=False)}" if null else "0",
                fmt_p(g["p_value"]) if g.get("p_value") is not None else esc(g.get("reason")),
            )
        )
    for key, d in (stats.get("alg2") or {}).items():
        ref = d.get("reference")
        rows.append(
            (
                f"Algorithm 2 (paper), δ = {esc(key)}: the maximum is an outlier",
                f"{fmt_pct(d['rate'])} ({esc(d['count'])})",
                fmt_ci(d["rate_ci"]),
                f"{fmt_pct(ref['reference_rate'])} on clean items†" if ref else "unknown*",
                fmt_p(ref["p_value"]) if ref else "",
            )
        )
        rows.append(
            (
                "&nbsp;&nbsp;… and the maximum is the original order",
                f"{fmt_pct(d['anchored_rate'])} ({esc(d['anchored_count'])})",
                "",
                fmt_pct(d["anchored_null_expected"]),
                fmt_p(d["anchored_p_value"]),
            )
        )
    body = "".join(
        f"<tr><td>{a}</td><td>{b}</td><td>{c}</td><td>{d}</td><td>{e}</td></tr>"
        for a, b, c, d, e in rows
    )
    alg2 = stats.get("alg2") or {}
    measured = [(k, d["reference"]) for k, d in alg2.items() if d.get("reference")]
    note = (
        '<p class="note">* Algorithm 2 ignores which order is the original, so its '
        "false-positive rate cannot be computed from the same items; measure it on items known "
        "to be clean (<code>--reference-run</code>). The anchored row has an exact null rate.</p>"
        if len(measured) < len(alg2)
        else ""
    )
    if measured:
        ref_run = run.summary.get("reference_run") or {}
        rates = "; ".join(
            f"δ = {esc(k)}: {r['reference_count']} of {r['reference_n']} "
            f"({fmt_pct(r['reference_rate'])}, 95% CI {fmt_ci(r['reference_ci'])})"
            for k, r in measured
        )
        note += (
            f'<p class="note">† Algorithm 2\'s false-positive rate, measured on clean reference '
            f"items scored by the same model ({esc(ref_run.get('run'))}: "
            f"{esc(ref_run.get('benchmark'))}): {rates}. Its p-value: Fisher's exact test that "
            "the benchmark's rate is higher (H0: the benchmark items are, for this model, like "
            "the reference items).</p>"
        )
    if (stats.get("gap") or {}).get("null_range"):
        note += (
            '<p class="note">The mean gap\'s "95% of H0" is where 95% of mean gaps fall when '
            "the original order is just one of the orders, over the same assignments as its "
            "p-value: a mean above it has p at most 0.025. ‡ The mean gap's 95% CI is a t "
            "interval (cluster-robust where items share an option list): approximate (too "
            "narrow with heavy tails), and shown beside the exact "
            "p-value it could contradict it; summary.json keeps it (statistics.gap.ci; "
            "docs/statistics.md).</p>"
        )
    table = (
        '<table class="stats"><tr><th>statistic</th><th>observed</th><th>95% CI</th>'
        f"<th>expected under H0</th><th>p-value (one-sided)</th></tr>{body}</table>{note}"
    )
    natural = run.summary.get("natural_order") or {}
    if natural.get("n_items"):
        table += _set_aside(stats, natural)
    if (natural.get("conventions") or {}).get("conventions"):
        table += _conventions(natural["conventions"])
    return Section("verdict", "Verdict and statistics", head + table)


def _conventions(block: dict[str, Any]) -> str:
    """Whether the benchmark's published orders follow writers' conventions beyond chance
    (model-free, over all its loaded items with exchangeable options)."""
    body = "".join(
        f"<tr><td>{esc(r['convention'])}</td><td>{r['items']:,}</td><td>{r['published']:,} "
        f"({fmt_pct(r['rate'])})</td><td>{fmt_pct(r['chance'])}</td><td>{fmt_p(r['p_value'])}"
        f"</td><td>{'yes' if r['p_value'] <= block['level'] else 'no'}</td></tr>"
        for r in block["conventions"]
    )
    verdict = (
        "This benchmark orders its options by convention: a model that never saw it can favour "
        "the published orders through conventions no rule detects (the stages of a process, "
        "mild / moderate / severe), so a leakage signal here needs a test against fresh items written the same "
        "way (<code>contamscope membership --reference</code>)."
        if block.get("ordered_by_convention")
        else "No convention is followed beyond chance, as for a benchmark whose options were "
        "shuffled."
    )
    return (
        '<p class="note">Does the benchmark order its options by writers\' conventions? Over its '
        "loaded items with exchangeable options, no model involved. H0: "
        f"{esc(block['null_hypothesis'])}; each convention at p ≤ {block['level']:.3g}. "
        f"{verdict}</p>"
        '<table class="stats"><tr><th>convention</th><th>items with its structure</th>'
        "<th>published in it</th><th>if shuffled</th><th>p-value (one-sided)</th>"
        f"<th>beyond chance</th></tr>{body}</table>"
    )


def _set_aside(stats: dict[str, Any], natural: dict[str, Any]) -> str:
    """The items the verdict sets aside (natural option order), named, and the three tests'
    p-values on the others: the numbers the verdict line rests on."""
    ids = [str(x) for x in natural.get("ids") or []]
    shown = ", ".join(esc(x) for x in ids[:20]) + (
        f" and {len(ids) - 20} more" if len(ids) > 20 else ""
    )
    reasons = ", ".join(f"{esc(k)}: {esc(v)}" for k, v in (natural.get("reasons") or {}).items())
    out = (
        f'<p class="note">The table counts {esc(counted_items(stats))}, as the paper '
        f"does. The verdict sets aside {esc(natural['n_items'])} with a natural option order "
        f"({reasons}), for which H0 fails without any leak: {shown}.</p>"
    )
    rest = natural.get("statistics_without") or {}
    if not rest.get("n_items"):
        return out + '<p class="note">No other item is left to test.</p>'
    from ..detectors.verdict import verdict_tests

    tests, level = verdict_tests(rest)
    body = "".join(
        f"<tr><td>{k}</td><td>{fmt_p(v)}</td><td>{'yes' if v is not None and v <= level else 'no'}"
        "</td></tr>"
        for k, v in tests.items()
    )
    a1 = rest.get("alg1") or {}
    ci = a1.get("excess_ci")
    excess = (
        f" Algorithm 1 flags {fmt_pct(a1.get('rate'))} of them against "
        f"{fmt_pct(a1.get('null_expected'))} by chance: {pp_text(a1['excess'])} beyond it, 95% "
        f"CI [{pp_text(ci[0], '')}, {pp_text(ci[1], '')}] (the leaderboard's cell)."
        if a1.get("excess") is not None and ci
        else ""
    )
    return out + (
        f'<p class="note">The verdict\'s tests on the other {plural(rest["n_items"], "item")} '
        f"(Bonferroni: each at p ≤ {level:.3g}, 5% overall):{excess}</p>"
        '<table class="stats"><tr><th>test</th><th>p-value (one-sided)</th>'
        f"<th>rejects H0</th></tr>{body}</table>"
    )


def _subject_section(block: dict[str, Any]) -> Section:
    """Which subjects stand out: each subject's tests, Bonferroni-combined p and BH q-value."""
    flagged = block["n_flagged"]
    few = f" {esc(few_items_text(block))}." if few_items_text(block) else ""
    head = (
        f'<p class="note">H0 {esc(block["null_hypothesis"])}. p: '
        f"{esc(block['p_value'])}. q: {esc(block['adjustment'])}. "
        f"<b>{flagged} of {plural(block['n_tested'], 'subject')} flagged</b> (q ≤ "
        f"{block['level']:g}).{few}</p>"
    )
    body = []
    for r in block["subjects"]:
        ps = r.get("p_values") or {}
        cls = ' class="flag"' if r["flagged"] else ""
        body.append(
            f"<tr{cls}><td>{esc(r['subject'])}</td><td>{r['n_tested']} / {r['n_items']}</td>"
            f"<td>{fmt_pct(r['alg1_rate'])}</td><td>{fmt_pct(r['alg1_chance'])}</td>"
            f"<td>{fmt_pct(r['rank_rate'])}</td>"
            + "".join(f"<td>{fmt_p(ps.get(k))}</td>" for k in ("alg1", "rank", "gap"))
            + f"<td>{fmt_p(r['p_value'])}</td><td>{fmt_p(r.get('p_floor'))}</td>"
            f"<td>{fmt_p(r['q_value'])}</td><td>{'yes' if r['flagged'] else 'no'}</td></tr>"
        )
    table = (
        '<table class="stats"><tr><th>subject</th><th>items tested / analysed</th>'
        "<th>Algorithm 1</th><th>chance</th><th>rank test</th><th>p Alg. 1</th>"
        "<th>p rank</th><th>p gap</th><th>p (Bonferroni)</th>"
        '<th title="the smallest p its tests could give on its items">smallest p possible</th>'
        f"<th>q (BH)</th><th>flagged</th></tr>{''.join(body)}</table>"
    )
    return Section("subjects", "By subject", head + table)


def _evidence_section(
    ranks: dict[int, Counter[int]], gaps: list[float], stats: dict[str, Any]
) -> Section:
    figs = []
    note = ""
    if ranks:
        n_orders, counter = max(ranks.items(), key=lambda kv: sum(kv[1].values()))
        n = sum(counter.values())
        others = sum(sum(c.values()) for m, c in ranks.items() if m != n_orders)
        with figure(6.4, 3.6) as (fig, ax):
            xs = list(range(1, n_orders + 1))
            ax.bar(xs, [counter.get(x, 0) for x in xs], color=BASE, width=0.85, label="observed")
            ax.axhline(
                n / n_orders,
                color=HIGHLIGHT,
                ls="--",
                lw=2,
                label=f"H0: uniform ({n / n_orders:.3g} items a rank)",
            )
            ax.set(
                xlabel=f"rank of the original order among {n_orders} orders (1 = highest log-prob)",
                ylabel="items",
            )
            ax.set_title(f"Where the original order ranks ({plural(n, 'item')})")
            if n_orders > 30:
                ax.set_xlim(0.5, n_orders + 0.5)
            ax.yaxis.get_major_locator().set_params(integer=True)
            legend_outside(ax)  # inside, it hid a bar wherever one stood under it
            figs.append(to_svg(fig, "histogram of the original order's rank"))
        if others:
            note += (
                f"<p class='note'>The rank histogram shows the {plural(n, 'item')} with {n_orders} "
                f"orders; {plural(others, 'item')} with another number of orders "
                f"{'is' if others == 1 else 'are'} in the table.</p>"
            )
    if gaps:
        g = stats.get("gap") or {}
        with figure(6.4, 3.6) as (fig, ax):
            ax.hist(gaps, bins=min(60, max(10, len(gaps) // 10)), color=BASE, label="items")
            ax.axvline(0, color="#000", ls="--", lw=1.5, label="H0 mean (0)")
            null = g.get("null_range")
            if null:  # where the mean falls when nothing leaked (not the t interval: that one
                # contradicted the exact p-value; docs/statistics.md)
                ax.axvspan(null[0], null[1], color="#888", alpha=0.2, label="95% of H0's means")
            if g.get("mean") is not None:
                ax.axvline(
                    g["mean"], color=HIGHLIGHT, lw=2, label=f"observed mean ({g['mean']:+.2f})"
                )
            ax.set(xlabel="log-prob gap: original − mean of other orders (nats)", ylabel="items")
            ax.yaxis.get_major_locator().set_params(integer=True)
            ax.set_title("Does the original order stand out?")
            legend_outside(ax)
            figs.append(to_svg(fig, "histogram of log-prob gaps"))
    body = (
        '<p class="note">Under H0 the original order\'s rank is uniform over 1..N (ties share a '
        "rank) and the gap averages 0. A leak piles items up at rank 1 and shifts the gaps "
        "right.</p>" + note
    )
    return Section("evidence", "Evidence", body, figs)


def _cases_section(cases: list[_Case], n_items: int) -> Section:
    if not cases:
        why = "none asked for (--top 0)" if n_items else "no analysed item to show"
        return Section("cases", "Most suspicious items", f"<p class='note'>{why.capitalize()}.</p>")
    figs = []
    for c in cases:
        n = len(c.logprobs)
        with figure(6.4, 3.4) as (fig, ax):
            xs = list(range(1, n + 1))
            ax.plot(
                xs,
                c.logprobs,
                "-o",
                color=BASE,
                ms=4 if n <= 60 else 1.5,
                lw=1,
                label="other orders",
            )
            ax.plot(
                [1],
                [c.logprobs[0]],
                "D",
                color=HIGHLIGHT,
                ms=10,
                mec="#000",
                label="original order",
            )
            if n <= 30:
                ax.set_xticks(xs)
                ax.set_xticklabels([_letters(o) for o in c.orders], rotation=90, fontsize=7)
                ax.set_xlabel("option order (letters = original options in shown order)")
            else:
                ax.set_xlabel(f"order index (1 = original; {n} orders)")
            ax.set_ylabel("log p(options | question) (nats)")
            ax.set_title(
                f"{c.id}: rank {c.rank}/{n}, p = {fmt_p_text(c.p_value)}, gap {c.gap:+.2f}",
                fontsize=10,
            )
            legend_outside(ax)
            cap = f"<b>{esc(c.id)}</b>{' (' + esc(c.subject) + ')' if c.subject else ''}: "
            figs.append(
                to_svg(fig, f"log-probs of all orders of {c.id}")
                + f"<figcaption>{cap}{in_lang(c.question)}"
                + (
                    f"<br><b>options</b> (original order): {in_lang(c.options)}"
                    if c.options
                    else ""
                )
                + "</figcaption>"
            )
    body = (
        f"<p class='note'>The {plural(len(cases), 'item')} (of {n_items}) with the smallest rank p-value "
        "(then the largest gap): the log-probability of the option block under every order, the "
        "original order as a diamond. A memorised item shows the original far above the rest.</p>"
    )
    return Section("cases", "Most suspicious items", body, figs)


def _table_section(
    rows: list[list[Any]],
    options: ReportOptions,
    alpha: float,
    d0: str | None,
    labels: bool,
    expected: float | None = None,
    mixed: bool = False,
) -> Section:
    cols = [
        Column("id", "item"),
        Column("subject", "subject"),
        Column(
            "rank",
            "rank",
            "pair",
            help="rank of the original order among the N orders (1 = highest)",
        ),
        Column("p_value", "p-value", "p", help="exact rank p-value under H0"),
        Column("gap", "gap (nats)", "num", help="original log-prob minus the mean of the others"),
        Column("alg1", "Alg. 1", "bool", help="Algorithm 1: the original order is the unique max"),
        Column(
            "alg2",
            f"Alg. 2 (δ {d0})" if d0 and not mixed else "Alg. 2",
            "bool",
            help="paper's flag"
            + (
                ", at each item's own default δ (it depends on the number of options)"
                if mixed
                else ""
            ),
        ),
        Column("alg2_score", "outlier score", "num", help="IsolationForest score of the max"),
        Column(
            "excluded",
            "excluded / set aside because",
            help="excluded: not scored (options refer to each other); set aside: scored, but "
            "its published order is a natural one, which the verdict does not test",
        ),
        Column("question", "question", clip=_CELL),
    ]
    if labels:
        cols.append(Column("label", "known leak", "bool", help="ground-truth label"))
    table = Table("items", cols, rows, page_size=options.page_size, sort=(3, True))
    return Section(
        "items",
        "All items",
        f"<p class='note'>{plural(len(rows), 'item')}; click a header to sort, type to search any column. "
        f"Items with p-value ≤ {alpha:g} are suspicious one by one, but "
        + (f"about {fmt_pct(expected)}" if expected is not None else f"up to {fmt_pct(alpha)}")
        + " of a clean benchmark's items also are (the rank test's rate under H0, above: "
        "a p-value of an item with N orders is a multiple of 1/N).</p>",
        after=table.html(),
    )


def _provenance_section(run: RunData) -> Section:
    s = run.summary
    excluded = [f"{x.get('id')}: {x.get('reason')}" for x in s.get("excluded_items") or []]
    return provenance(
        run,
        ("model", "benchmark", "config", "versions"),
        "model, data, settings, timings",
        [("excluded items", excluded), ("skipped input rows", s.get("skipped_rows") or [])],
    )
