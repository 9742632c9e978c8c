"""Benchmark Transparency Card (Xu et al. 2024) from one model's run folders.

The card lists which benchmarks and splits were checked, the measured signals with their 95%
intervals and p-values, instance counts, and leaves the fields only the model developer can fill
in (was benchmark data used in training, augmented ...). BenBench runs give the paper's rows;
runs of the other methods (permutation, membership, CAP) add one row each, their leaderboard
estimate with its interval and p-value (``other_checks``), so one card holds every signal
measured on the model. ``write_card(runs, "card.md")`` writes
it as Markdown and as JSON next to it (``contamscope.transparency_card/2``); ``build_card`` and
``render_markdown`` are its two halves.

Every number is read from the runs' ``summary.json``: a split's original / paraphrase means and
its Delta are over the same items, the ones with a usable paraphrase (a card once put the mean
over all items beside a Delta over the paired ones, so "original > paraphrase" sat beside a
negative Delta).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..detectors.cap import holm
from ..detectors.verdict import p_text
from ..errors import ConfigError, DataError, StoreError
from ..paths import check_output_file, relative_name, write_text_atomic
from ..store.run import RunFolder, folder_path
from ..wording import first_few, json_error, md_cell, number, plural, value
from .benbench import NO_HITS, PRIMARY, ci_mark, ci_warnings, no_hits
from .compare import md_code
from .leaderboard import short_name
from .rundata import (
    answered_by_others,
    check_statistics,
    once_per_measurement,
    refuse_interrupted,
    same_records,
)

__all__ = [
    "CARD_SCHEMA",
    "DEVELOPER_FIELDS",
    "build_card",
    "read_summary",
    "render_markdown",
    "write_card",
]

CARD_SCHEMA = "contamscope.transparency_card/2"
SUMMARY_SCHEMA = "contamscope.benbench.summary/1"
"""The BenBench summary this module reads."""

DEVELOPER_FIELDS = [
    (
        "benchmark_data_in_training",
        "Was any split of this benchmark used in (pre-)training or fine-tuning? (no / train split / test split / both / unknown)",
    ),
    (
        "splits_used",
        "Which splits, and in which training stage (pre-training, continued pre-training, SFT, RL)?",
    ),
    (
        "augmentation",
        "Was benchmark data augmented (paraphrased, reformatted, synthetic variants) before use?",
    ),
    (
        "decontamination",
        "Was training data decontaminated against this benchmark? How (n-gram overlap, embedding)?",
    ),
    (
        "evaluation_details",
        "Evaluation settings used for reported scores (prompt, shots, decoding, answer extraction).",
    ),
]
"""(key, question) of the card's fields the model developer fills in."""

BENBENCH = "BenBench (Xu et al. 2024): perplexity and n-gram accuracy, original vs paraphrase"
"""The card's name of BenBench's checks (``method``)."""

_METRICS = {  # key: (name on the card, a rate shown in percentage points)
    "ppl": ("perplexity", False),
    "nll": ("NLL (nats/token)", False),
    "ngram_exact": ("n-gram accuracy, exact", True),
    "ngram_rouge": ("n-gram accuracy, ROUGE-L", True),
    "ngram_edit": ("n-gram accuracy, edit similarity", True),
}


_NGRAMS = tuple(k for k, (_, pp) in _METRICS.items() if pp)

OTHER_METHODS = ("permutation", "membership", "cap")
"""Methods whose runs the card takes besides BenBench (one row each)."""


def read_summary(run: Path | str) -> tuple[Path, dict[str, Any]]:
    """(path of summary.json, its contents) of a finished BenBench run folder (or the file)."""
    path, summary, method = _read_run(run)
    if method != "benbench":
        what = f"a {method} run" if method else "no run summary of contamscope"
        raise DataError(f"{path}: {what}, not a BenBench run")
    return path, summary


def _read_run(run: RunFolder) -> tuple[Path, dict[str, Any], str | None]:
    """(path of summary.json, its contents, its method) of a finished run folder (or the file)
    of a method the card takes; a BenBench summary of another schema version is refused."""
    run = folder_path(run)
    path = run / "summary.json" if run.is_dir() else run
    records = f"{run}: a records file; give its run folder (or its summary.json)"
    if path.suffix.lower() == ".jsonl":  # (read as one JSON document: "Extra data"; QA)
        raise DataError(records)
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if run.is_dir():
            raise DataError(f"{run}: no summary.json (finish the run first)") from None
        raise DataError(f"{run}: no such run folder or summary.json") from None
    except json.JSONDecodeError as e:
        if e.msg == "Extra data" and e.lineno > 1:  # one object per line: items.jsonl.bak
            raise DataError(records) from None
        raise DataError(f"{path}: not JSON ({json_error(e)})") from None
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read it ({e.strerror or e})") from None
    method = None
    if isinstance(summary, dict):  # the permutation summary names its method in its schema
        schema = str(summary.get("schema") or "").split(".")
        method = summary.get("method") or (schema[1] if len(schema) > 2 else None)
    if method not in ("benbench", *OTHER_METHODS):
        what = f"a {method} run" if method else "no run summary of contamscope"
        raise DataError(f"{path}: {what}; the card takes benbench, {', '.join(OTHER_METHODS)} runs")
    try:
        check_statistics(summary, method, path)
        refuse_interrupted(path.parent)  # (its summary may not be the analysis asked for)
    except StoreError as exc:
        raise DataError(str(exc)) from None
    # (a summary without one is read as this version's, as report, leaderboard and compare do)
    if method == "benbench" and summary.get("schema", SUMMARY_SCHEMA) != SUMMARY_SCHEMA:
        raise DataError(
            f"{path}: schema {summary.get('schema')!r}; this contamscope reads "
            f"{SUMMARY_SCHEMA!r} (a run of another version: re-run it, or use that version)"
        )
    return path.resolve(), summary, method


def _other_check(
    path: Path, s: dict[str, Any], where: str
) -> tuple[dict[str, Any] | None, str | None]:
    """One run of another method as a card row (its leaderboard estimate) and a note when its
    number may mislead, or no row and a note saying why it has none (``where``: the run folder
    as the card names it)."""
    from .methods import method_module, unranked_reason
    from .rundata import RunData

    run = RunData(path=path.parent, summary=s, settings={})
    module = method_module(run)
    try:
        est = module.estimate(run)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        raise DataError(f"{path}: not a complete summary.json ({exc})") from None
    subjects = run.subjects
    bench = run.benchmark + (f" ({first_few(subjects)})" if subjects else "")
    if est is None or est.value is None:
        why = unranked_reason(module, run)
        return None, f"{bench} ({module.TITLE}, {where}): no estimate: {why}"
    return {
        "method": module.TITLE,
        "benchmark": bench,
        "content_hash": _content_hash(s),
        "statistic": est.statistic,
        "value": est.value,
        "ci": list(est.ci) if est.ci else None,
        "p_value": est.p_value,
        "n_items": est.n_items,
        "percent": est.percent,
        "text": est.text(),
        "legend": est.legend,
        "run": where,
        "run_created": s.get("created"),
    }, _note(f"{bench} ({module.TITLE}, {where})", est)


def _content_hash(s: dict[str, Any]) -> str | None:
    """The SHA-256 of the benchmark a run read, as its summary records it (None where it
    does not)."""
    b = s.get("benchmark")
    h = b.get("content_hash") if isinstance(b, dict) else None
    return h if isinstance(h, str) else None


def _note(who: str, est: Any) -> str | None:
    """What the card says beside a run's row: its estimate's warning, and where its p-value
    rejects H0, the writers' conventions the benchmark's option orders follow (the verdict's
    caveat: conventions no rule detects favour the published order without a leak)."""
    from .leaderboard import caveat_text

    parts = [est.warning] if est.warning else []
    if est.caveat and est.p_value is not None and est.p_value <= 0.05:
        parts.append(caveat_text(est.caveat))
    return f"{who}: {'; '.join(parts)}" if parts else None


def _checks(path: Path, s: dict[str, Any], where: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The card's rows of one run and notes about them (``where``: the run folder as the card
    names it); a summary without a field the card needs is a DataError naming the run, not a
    KeyError."""
    notes: list[str] = []
    try:
        splits = s["statistics"]["splits"]
        if not splits:
            raise DataError(f"{path}: no split has statistics (a run of no items)")
        rows = []
        idle: dict[str, set[str]] = {}  # per split: the n-gram metrics with no hit at all
        for split, st in splits.items():
            idle[split] = {k for k, v in st["delta"].items() if _no_hits(k, v)}
            b = s["benchmark"][split]
            inst = st["instances"]["exact_all"]
            paired = int(st.get("n_paired", st["delta"]["ppl"]["n"]))
            if not paired:
                give = "--reference" if split == "test" else "--train-reference"
                failed = sum((s["counts"][split].get("paraphrase_failures") or {}).values())
                how = (  # (it said "or --paraphraser" to a run whose paraphraser failed)
                    f"{plural(failed, 'paraphrase')} failed the checks "
                    f"(summary.json's paraphrase_failures); give the paraphrases with {give}"
                    if s.get("paraphraser") and failed
                    else f"give the paraphrases with {give}, or --paraphraser"
                )
                notes.append(  # (it said -r, the test split's option, for the train split too)
                    f"{b['source']} ({split}, {where}): no item has a usable paraphrase, so "
                    f"no signal ({how})"
                )
            rows.append(
                {
                    "benchmark": b["source"],
                    "split": split,
                    "content_hash": b["content_hash"],
                    "items": st["n_items"],
                    "items_paired": paired,
                    "references": [
                        {
                            "name": r["name"],
                            "source": r.get("source"),
                            "content_hash": r.get("content_hash"),
                            "paraphrases_ok": r.get("paraphrases_ok"),
                            "paraphrases_failed": r.get("paraphrases_failed"),
                        }
                        for r in b["references"]
                    ],
                    "delta": {  # original and paraphrase over the same (paired) items
                        k: {
                            "original": v["original"],
                            "paraphrase": v["reference"],
                            "value": v["delta"],
                            "ci": v["ci"],
                            "p_value": v.get("p_value"),
                            "test": v.get("test"),
                            "n": v["n"],
                            "relative_pct": v.get("relative_pct"),
                        }
                        | ({"inconclusive": NO_HITS} if k in idle[split] else {})
                        | ({"ci_warning": v["ci_warning"]} if v.get("ci_warning") else {})
                        for k, v in st["delta"].items()
                    },
                    "original_all_items": st["original"],
                    "instances_all_ngrams_exact": {
                        "count": inst["count"],
                        "of": inst["of"],
                        "paraphrase_count": inst.get("reference_count"),
                        "paraphrase_of": inst.get("reference_of"),
                    },
                    "n": s["config"]["n"],
                    "model_fingerprint": s["model"].get("fingerprint"),
                    "run": where,
                    "run_created": s.get("created"),
                }
            )
            notes.extend(
                f"{b['source']} ({split}, {where}): Delta of {w} (its interval is marked *)"
                for w in ci_warnings({k: v for k, v in st["delta"].items() if k not in idle[split]})
            )
            if PRIMARY in idle[split]:  # as the report's verdict and the leaderboard say
                notes.append(
                    f"{b['source']} ({split}, {where}): Delta of exact n-gram accuracy "
                    f"inconclusive: {NO_HITS}; its p-value is not counted among the card's tests"
                )
        dtt = s["statistics"].get("delta_train_test")
        if dtt and all(v["value"] is None for v in dtt.values()):
            notes.append(  # (the card wrote the section's heading over an empty table)
                f"{s['benchmark']['train']['source']} / {s['benchmark']['test']['source']} "
                f"({where}): train vs test not compared (a split has no item with a "
                "usable paraphrase)"
            )
        elif dtt:
            rows.append(
                {
                    "benchmark": s["benchmark"]["test"]["source"],
                    "train_benchmark": s["benchmark"]["train"]["source"],
                    "split": "train - test",
                    "n": s["config"]["n"],
                    "run": where,
                    "delta_train_test": {
                        k: {
                            "value": v["value"],
                            "ci": v["ci"],
                            "p_value": v.get("p_value"),
                            "relative_pct": v.get("relative_pct"),
                            "n_train": v.get("n_train"),
                            "n_test": v.get("n_test"),
                        }
                        # neither split predicted one n-gram: a difference of two zeros
                        | ({"inconclusive": NO_HITS} if all(k in i for i in idle.values()) else {})
                        for k, v in dtt.items()
                    },
                }
            )
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        what = f"no {exc.args[0]!r}" if isinstance(exc, KeyError) and exc.args else str(exc)
        raise DataError(f"{path}: not a complete BenBench summary.json ({what})") from None
    return rows, notes


def build_card(
    runs: Sequence[RunFolder], model_name: str | None = None, base: Path | str | None = None
) -> dict[str, Any]:
    """The card as a dict: the model, the checks per benchmark split (and train - test), notes,
    and the empty developer fields. One model (by fingerprint: the same spec in another dtype
    is another set of numbers); a run given twice counts once; two runs checking the same
    split of the same benchmark with the same references are refused (one row each, which?).
    ``base``: the folder the card is written to; run folders are named relative to it (a card
    published with its runs keeps working links, and tells no one the local folders)."""
    if not runs:
        raise ConfigError("--run: give at least one run folder")
    read: dict[Path, dict[str, Any]] = {}
    methods: dict[Path, str | None] = {}
    for r in runs:
        path, summary, method = _read_run(r)
        read.setdefault(path, summary)  # a folder and its summary.json are one run
        methods[path] = method
    models: dict[str, str] = {}
    for path, s in read.items():
        m = s.get("model")
        if not isinstance(m, dict) or not isinstance(m.get("spec"), str):
            raise DataError(f"{path}: not a complete summary.json (no 'model' spec)")
        models.setdefault(str(m.get("fingerprint") or m["spec"]), m["spec"])
    if len(models) > 1:
        named = [f"{spec} ({fp})" if list(models.values()).count(spec) > 1 else spec
                 for fp, spec in models.items()]  # fmt: skip
        raise ConfigError(
            f"--run: the runs are of {len(models)} models ({', '.join(named[:3])}); a card "
            "describes one model: give the runs of one model"
        )
    checks: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    notes: list[str] = []
    rowed: dict[Path, dict[str, Any]] = {}  # other methods' runs with a row
    seen: dict[tuple[Any, ...], str] = {}
    for path, s in read.items():
        where = str(path.parent) if base is None else relative_name(path.parent, base)
        other = answered_by_others(s)
        notes += [f"{where}: {other}"] if other is not None else []
        if methods[path] != "benbench":
            row, note = _other_check(path, s, where)
            if row is not None:
                others.append(row)
                rowed[path] = row
            notes += [note] if note is not None else []
            continue
        rows, said = _checks(path, s, where)
        notes += said
        for row in rows:
            if "delta_train_test" in row:
                key: tuple[Any, ...] = ("train - test", row["benchmark"], row["train_benchmark"])
            else:
                refs = tuple(r["content_hash"] for r in row["references"])
                key = (row["split"], row["content_hash"], refs, row["n"])
            if key in seen:
                raise ConfigError(
                    f"--run: {seen[key]} and {where} both check the {row['split']} "
                    f"split of {row['benchmark']} with the same references; give one of them"
                )
            seen[key] = where
            checks.append(row)
    paths = list(rowed)  # (BenBench copies are refused above; runs without a row are named)
    repeated: set[int] = set()  # rows of a copy with its original's p: not counted again
    for same in same_records([(str(methods[p]), p.parent) for p in paths]):
        copies = " and ".join(rowed[paths[i]]["run"] for i in same)
        again = once_per_measurement([rowed[paths[i]].get("p_value") for i in same])
        repeated |= {id(rowed[paths[i]]) for i, dup in zip(same, again, strict=True) if dup}
        tested = sum(rowed[paths[i]].get("p_value") is not None for i in same) - sum(again)
        counted = f" and counted as {plural(tested, 'test')} in Holm's correction" if tested else ""
        notes.append(  # (the leaderboard said so; the card counted them silently; QA)
            f"{copies} hold the same item records (copies of one run?): one measurement, "
            f"shown as {len(same)} rows{counted}"
        )
    spec = next(iter(models.values()))
    shown = [  # the p-values the Markdown shows: perplexity, NLL and exact accuracy per split
        # (NLL's was shown, and recommended, but not counted; QA), and every train - test
        # metric with a value
        v
        for c in checks
        for k, v in (c.get("delta") or c.get("delta_train_test") or {}).items()
        if "delta_train_test" in c or k in ("ppl", "nll", "ngram_exact")
    ]
    ps = [  # an inconclusive Delta (no n-gram predicted right) tests nothing: left out
        v["p_value"]
        for v in [*shown, *(o for o in others if id(o) not in repeated)]
        if v.get("value") is not None and v.get("p_value") is not None and not v.get("inconclusive")
    ]
    family = {
        "p_values": len(ps),
        "copies": len(repeated),  # rows of copies not counted again (the notes name them)
        "below_5pct": sum(p <= 0.05 for p in ps),
        "below_5pct_after_holm": sum(q <= 0.05 for q in holm(ps)),
    }
    return {
        "schema": CARD_SCHEMA,
        "model": model_name or short_name(spec),
        "model_spec": spec,
        "model_fingerprint": next(iter(models)),
        "method": "; ".join(
            ([BENBENCH] if checks else []) + list(dict.fromkeys(o["method"] for o in others))
        ),
        "checks": checks,
        "other_checks": others,
        "notes": notes,
        "family": family,
        "developer_fields": {key: None for key, _ in DEVELOPER_FIELDS},
    }


def _no_hits(key: str, v: dict[str, Any]) -> bool:
    """Whether a split's Delta of an n-gram accuracy ``key`` is inconclusive: items paired, but
    no n-gram predicted right on the originals nor on the paraphrases (a Delta of 0 in
    [0, 0], p 1, that measures nothing)."""
    return key in _NGRAMS and bool(v.get("n")) and no_hits(v)


def _delta(v: dict[str, Any], pp: bool) -> str:
    """Signed difference with its CI and p-value: accuracies in percentage points."""
    if v.get("value") is None:
        return "-"
    if v.get("inconclusive"):  # "+0.0 pp [+0.0, +0.0], p 1.000" read as a precise no-leak
        return "inconclusive (no n-gram predicted right)"

    def f(x: float) -> str:
        return f"{100 * x:+.1f}" if pp else number(x, signed=True)

    ci = "" if not v.get("ci") else f" [{f(v['ci'][0])}, {f(v['ci'][1])}]{ci_mark(v)}"
    return f"{f(v['value'])}{' pp' if pp else ''}{ci}, p {p_text(v.get('p_value'))}"


def _refs(row: dict[str, Any]) -> str:
    out = []
    for r in row["references"]:
        failed = r.get("paraphrases_failed") or 0
        total = failed + (r.get("paraphrases_ok") or 0)
        name = "inline (paraphrases in the benchmark file)" if r["name"] == "inline" else r["name"]
        out.append(name + (f" ({failed} of {total} set aside: answer changed)" if failed else ""))
    return "; ".join(out) or "none"


def render_markdown(card: dict[str, Any]) -> str:
    """The card as Markdown (the JSON holds every number at full precision)."""

    ns = {c.get("n") for c in card["checks"]}
    gram = f"{ns.pop()}-gram" if len(ns) == 1 and None not in ns else "n-gram"
    lines = [
        f"# Benchmark Transparency Card: {md_cell(card['model'])}",
        "",
        f"Model: {md_code(short_name(card['model_spec']))} (fingerprint "
        f"`{card['model_fingerprint']}`).",
        f"Signals measured by contamscope ({card['method']})."
        if card["method"]
        else "Signals measured by contamscope: none with an estimate (see the notes).",
    ]
    if card["checks"]:
        lines += _benbench_lines(card, gram)
    lines += _other_lines(card.get("other_checks") or [], alone=not card["checks"])
    fam = card.get("family") or {}
    once = " (copies of one run counted once: see the notes)" if fam.get("copies") else ""
    if fam.get("p_values") == 1:  # "after Holm's correction over all 1": none needed
        at_most = "is" if fam["below_5pct"] else "is not"
        lines += ["", f"The card has one p-value{once}; it {at_most} at most 0.05."]
    elif fam.get("p_values"):
        lines += [
            "",
            f"Every p-value above is its own test{once}: {fam['below_5pct']} of "
            f"{fam['p_values']} are at most 0.05, {fam['below_5pct_after_holm']} after Holm's "
            f"correction over all {fam['p_values']} (the chance of any false signal on the card "
            "at most 5%).",
        ]
    if card.get("notes"):
        lines += ["", "Notes:", ""] + [f"- {md_cell(n)}" for n in card["notes"]]
    if card["checks"]:
        lines += [
            "",
            "These are signals, not proof: a clean model can reject H0 when its paraphrases read "
            "less naturally than the originals; Delta_train - Delta_test cancels that. Nor is "
            "their absence proof of a clean model: few items test little (5 items of one "
            "paraphrase each give no p below 1/32), and n-gram accuracy and perplexity see a "
            "benchmark trained on in its own wording only, not rewritten or translated. See "
            "docs/benbench.md.",
        ]
    else:  # (the caveat was the BenBench rows' alone: a permutation-only card dropped it; QA)
        lines += [
            "",
            "These are signals, not proof; nor is their absence proof of a clean model: few "
            "items test little, and each method sees its own kind of exposure only. See "
            "docs/methods.md.",
        ]
    lines += ["", "## To be filled in by the model developer", ""]
    answers = card.get("developer_fields") or {}
    for key, question in DEVELOPER_FIELDS:
        answer = answers.get(key)
        shown = " ".join(str(answer).split()) if answer not in (None, "") else NOT_STATED
        lines += [f"- **{question}**", f"  - answer: {shown}", ""]
    return "\n".join(lines).rstrip() + "\n"


NOT_STATED = "_not stated_"
"""The Markdown card's answer to a developer field nobody filled in."""


def _answers(out: Path, old: dict[str, Any]) -> dict[str, str]:
    """The developer's answers in the card at ``out`` (``old``: its JSON): each field the JSON
    holds a value for, and each answer line edited in the Markdown (which wins: the file
    people edit)."""
    found: dict[str, str] = {}
    fields = old.get("developer_fields")
    for key, given in fields.items() if isinstance(fields, dict) else []:
        if key in dict(DEVELOPER_FIELDS) and given not in (None, ""):
            found[key] = str(given)
    with contextlib.suppress(OSError, ValueError):
        lines = out.read_text(encoding="utf-8").splitlines()
        by_question = {f"- **{q}**": key for key, q in DEVELOPER_FIELDS}
        for line, after in zip(lines, lines[1:]):
            key = by_question.get(line.strip())
            answer = after.strip().removeprefix("- answer:").strip()
            if key and after.strip().startswith("- answer:") and answer not in ("", NOT_STATED):
                found[key] = answer
    return found


def _rows_left_out(old: dict[str, Any], card: dict[str, Any]) -> list[str]:
    """Benchmarks the card ``old`` had a row for that ``card`` has not (its runs were not
    given again)."""
    try:
        before = _row_names(old)
    except (AttributeError, TypeError):  # a card written by hand: no rows to compare
        return []
    now = set(_row_names(card))
    return [name for name in dict.fromkeys(before) if name not in now]


def _row_names(card: dict[str, Any]) -> list[str]:
    names = []
    for row in [*(card.get("checks") or []), *(card.get("other_checks") or [])]:
        label = f"{row.get('benchmark')}"
        if row.get("split"):
            label += f" ({row['split']})"
        names.append(f"{row.get('method') or BENBENCH}: {label}")
    return names


def _other_lines(others: Sequence[dict[str, Any]], alone: bool = False) -> list[str]:
    """The rows of the other methods' runs, and how to read each method's number (``alone``:
    no BenBench table before them, so they are not 'other')."""
    if not others:
        return []
    lines = [
        "",
        "## Detection methods" if alone else "## Other detection methods",
        "",
        "One row per run: the method's leakage estimate (its leaderboard number) with its 95% "
        "interval and p-value, each under its own method's H0 (the notes below the table).",
        "",
        "| method | benchmark | statistic | estimate [95% CI] | p | items | run |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in others:
        p = "-" if o.get("p_value") is None else p_text(o["p_value"])
        lines.append(
            f"| {md_cell(o['method'])} | {md_cell(o['benchmark'])} | {md_cell(o['statistic'])} | "
            f"{md_cell(o['text'])} | {p} | {o['n_items']} | {md_cell(o['run'])} |"
        )
    legends = dict.fromkeys(
        f"{o['method']} ({o['statistic']}): {o['legend']}" for o in others if o.get("legend")
    )
    return lines + [""] + [f"- {md_cell(text)}" for text in legends]


def _benbench_lines(card: dict[str, Any], gram: str) -> list[str]:
    """The paper's table of BenBench's checks, and its train - test one."""
    lines = [
        "",
        "## Benchmarks checked",
        "",
        "Original / paraphrase and Delta (original - paraphrase) are over the items with a "
        "usable paraphrase (paired). Leak direction: Delta perplexity and Delta NLL < 0, Delta "
        "accuracy > 0. Read Delta NLL's interval rather than Delta perplexity's: where the two "
        "sides' perplexities differ in shape, its interval covers only 78-88% (docs/benbench.md). "
        "p: one-sided randomization test, H0 = each item's original is as familiar to the model "
        "as its paraphrases. Intervals: 95% studentized bootstrap over items, none below 5 items "
        "(where a bootstrap cannot reach beyond the items' own range; the p-value holds its "
        "level at any number).",
        "",
        "| benchmark | split | sha256 | items (paired) | references | perplexity orig / para | "
        f"Delta perplexity [95% CI], p | Delta NLL [95% CI], p | {gram} acc orig / para | "
        "Delta acc [95% CI], p | items with all n-grams exact: orig / para |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in card["checks"]:
        if "delta_train_test" in c:
            continue
        d = c["delta"]
        ppl, nll, acc = d.get("ppl", {}), d.get("nll", {}), d.get("ngram_exact", {})
        inst = c["instances_all_ngrams_exact"]
        para_inst = (
            f"{inst['paraphrase_count']} of {inst['paraphrase_of']}"
            if inst.get("paraphrase_of")
            else "-"
        )
        lines.append(
            f"| {md_cell(c['benchmark'])} | {md_cell(c['split'])} | `{c['content_hash'][:12]}` | "
            f"{c['items']} ({c['items_paired']}) | {md_cell(_refs(c))} | "
            f"{value(ppl.get('original'), False)} / {value(ppl.get('paraphrase'), False)} | "
            f"{_delta(ppl, False)} | {_delta(nll, False)} | "
            f"{value(acc.get('original'), True)} / {value(acc.get('paraphrase'), True)} | "
            f"{_delta(acc, True)} | {inst['count']} of {inst['of']} / {para_inst} |"
        )
    dtts = [c for c in card["checks"] if "delta_train_test" in c]
    if dtts:
        lines += [
            "",
            "## Training split vs test split (Delta_train - Delta_test)",
            "",
            "The difference of the two splits' Deltas cancels how natural the paraphrases read. "
            "Leak direction towards the training split: < 0 for perplexity and NLL, > 0 for "
            "accuracy (the model knows the training split's originals better, relative to "
            "their paraphrases, than the test split's). Near 0 also arises when both splits "
            "leaked. p: two-sided split-label permutation test, H0 = the per-item gap has the "
            "same distribution on both splits; intervals: Welch's t 95% over the per-item "
            "Deltas of the two splits, none below 3 items a split.",
            "",
            "| train / test | metric | Delta_train - Delta_test [95% CI], p | relative | "
            "items train / test |",
            "|---|---|---|---|---|",
        ]
        for c in dtts:
            for k, v in c["delta_train_test"].items():
                if v["value"] is None:
                    continue
                name, pp = _METRICS.get(k, (k, False))
                name = name.replace("n-gram", gram)
                rel = "-" if v.get("relative_pct") is None else f"{v['relative_pct']:+.2f} pp"
                lines.append(
                    f"| {md_cell(c['train_benchmark'])} / {md_cell(c['benchmark'])} | {name} | "
                    f"{_delta(v, pp)} | {rel} | {v.get('n_train')} / {v.get('n_test')} |"
                )
    return lines


def write_card(
    runs: Sequence[RunFolder],
    out: Path | str,
    model_name: str | None = None,
    *,
    overwrite: bool = False,
    said: list[str] | None = None,
) -> tuple[Path, Path, dict[str, Any]]:
    """Write the card as Markdown to ``out`` and as JSON beside it; returns (markdown path,
    JSON path, the card).

    A card of the same model at ``out`` is updated: its numbers are the runs given now, the
    developer's answers (edited in the Markdown, or set in the JSON) are kept; another model's
    card, or a file that is no card, is replaced only with ``overwrite``: a second
    ``contamscope card`` for another model replaced the first one's ``card.md`` without a word.
    ``said``: where given, what the update kept and dropped is appended to it.
    """
    out = Path(out)
    if out.suffix.lower() == ".json":  # the Markdown would be overwritten by the JSON
        raise ConfigError(f"--out {out}: name the Markdown card (.md); the JSON goes next to it")
    js = card_json_path(out)
    check_output_file(out)
    check_output_file(js)
    card = build_card(runs, model_name, base=out.parent)
    old = None if overwrite else _refuse_other_card(out, card)
    if old is not None:  # this model's card, updated: the developer's answers are kept
        named = old.get("model")
        spec = str(old.get("model_spec"))
        if model_name is None and isinstance(named, str) and named not in (spec, short_name(spec)):
            card["model"] = named  # a --model-name given before, not again
            if said is not None:
                said.append(f"kept the model name {named!r} from {out} (--model-name changes it)")
        kept = _answers(out, old)
        card["developer_fields"].update(kept)
        if kept and said is not None:
            said.append(f"kept the developer's {plural(len(kept), 'answer')} from {out}")
        gone = _rows_left_out(old, card)
        if gone and said is not None:
            said.append(
                f"{out} also had {'; '.join(gone)}: not on the card now (give its runs again "
                "with --run to keep them)"
            )
    out.parent.mkdir(parents=True, exist_ok=True)
    # the JSON first: it says whose card this is, so a command killed between the two files
    # leaves a card the next one updates (the Markdown first left a card.md the next refused
    # as no card; kill QA), with the developer's answers in the JSON and the Markdown kept
    write_text_atomic(js, json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    write_text_atomic(out, render_markdown(card))
    return out, js, card


def card_json_path(out: Path) -> Path:
    """Where the JSON of the Markdown card ``out`` goes: ``card.md`` (or ``card``) ->
    ``card.json``; any other name gets ``.json`` appended (``card.txt`` -> ``card.txt.json``:
    ``card.json`` there was the JSON of another card, ``card.md``, replaced by this one's; QA).

    >>> card_json_path(Path("c/card.md")).as_posix(), card_json_path(Path("card.txt")).name
    ('c/card.json', 'card.txt.json')
    """
    if out.suffix.lower() in (".md", ""):
        return out.with_suffix(".json")
    return out.with_name(out.name + ".json")


def _card_heading(path: Path) -> bool:
    """Whether ``path`` begins as :func:`render_markdown` begins a card."""
    try:
        with path.open(encoding="utf-8") as f:
            return f.readline().startswith("# Benchmark Transparency Card")
    except (OSError, ValueError):
        return False


def _refuse_other_card(out: Path, card: dict[str, Any]) -> dict[str, Any] | None:
    """Refuse to write over a file that is not this model's card (see :func:`write_card`);
    the card's JSON already there (None: no card yet)."""
    js = card_json_path(out)
    if not out.exists() and not js.exists():
        return None
    try:
        old = json.loads(js.read_text(encoding="utf-8"))
        old_model = old["model_fingerprint"], str(old.get("model") or old["model_spec"])
        ok = str(old["schema"]).startswith("contamscope.transparency_card/")
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        ok, old_model = False, ("", "")
    if not ok and out.exists() and not js.exists() and _card_heading(out):
        raise ConfigError(
            f"--out {out}: {out} is a card without its {js.name} (which says whose card it is; "
            "an earlier version's card command stopped between the two?); give another --out "
            "(--overwrite replaces it, and the answers edited in it)"
        )
    if not ok:
        held = f"{out}" if out.exists() else f"{js}"
        raise ConfigError(
            f"--out {out}: {held} exists and is not a contamscope card; give another --out "
            "(--overwrite replaces it)"
        )
    if old_model[0] != card["model_fingerprint"]:
        where = "holds" if out.exists() else f"{js.name} beside it holds"  # the file it is
        raise ConfigError(
            f"--out {out}: {where} the card of another model ({old_model[1]}); give another "
            "--out, e.g. card-MODEL.md (--overwrite replaces it)"
        )
    return dict(old)
