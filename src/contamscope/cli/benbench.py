"""`contamscope benbench`: perplexity and n-gram accuracy vs paraphrased references (Xu et al. 2024)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..detectors.verdict import p_text
from ..errors import ConfigError
from ..executors import Executor, LocalExecutor
from ..wording import plural, pp_text, shell, value
from .common import (
    FAIL_ON_SIGNAL_OPT,
    MODEL_OPTIONS_HELP,
    REPORT_OPT,
    ItemProgress,
    Table,
    check_run_folder,
    console,
    drop_ignored,
    err_console,
    exit_if_skipped,
    has_signal,
    list_skipped,
    open_cache,
    pick_items,
    reading_options,
    refuse_empty,
    say_overlap,
    slug,
    status,
    styled,
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

EPILOG = """
Examples:

  contamscope benbench --model smollm2 --benchmark ../shared/benchdata/gsm8k/test.jsonl --reference ../shared/benchdata/benbench/rewritten/GSM8K_rewritten-test-1.jsonl --limit 20

  contamscope benbench --model hf:./my-model --benchmark gsm8k/test.jsonl --train gsm8k/train.jsonl --paraphraser hf:./instruct-model --sample 200

  contamscope benbench --model smollm2 --benchmark my.jsonl --format qa-jsonl --fields question=prompt,answer=target --reference my_para.jsonl --no-lenient

  contamscope benbench --model hf:./my-model --benchmark gsm8k/test.jsonl --reference para.jsonl --executor ray --ray-address auto --gpus-per-worker 1

A BenBench rewritten file given as --benchmark carries its own paraphrases (used automatically).
Re-running the same command with the same --out resumes. Exit codes: 0 ok, 2 user error,
3 finished but some input rows were skipped (see summary.json), 4 a contamination signal under --fail-on-signal, 130 interrupted
(re-run to resume).
"""


def command(
    model: str = typer.Option(
        "smollm2",
        "--model",
        "-m",
        help="Model spec: smollm2 or gemma3 (bundled), a local model folder or .gguf file, hf:PATH_OR_HUB_ID.",
    ),
    benchmark: str = typer.Option(
        ...,
        "--benchmark",
        "-b",
        help="Test split: GSM8K/MATH/MATH-500/BenBench JSONL, generic JSONL/CSV, hf:DATASET.",
    ),
    reference: list[str] | None = typer.Option(
        None, "--reference", "-r", help="Paraphrased version of the test split (file). Repeatable."
    ),
    train: str | None = typer.Option(
        None,
        "--train",
        help="Training split of the same benchmark (enables Delta_train - Delta_test).",
    ),
    train_reference: list[str] | None = typer.Option(
        None,
        "--train-reference",
        help="Paraphrased version of the training split (file). Repeatable.",
    ),
    paraphraser: str | None = typer.Option(
        None,
        "--paraphraser",
        help="Model that writes one paraphrase per item (chat template), e.g. smollm2.",
    ),
    pairing: str = typer.Option(
        "auto", "--pairing", help="How reference rows match items: auto, question, id, order."
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Run folder (default: runs/benbench-<model>-<benchmark>)."
    ),
    fmt: str | None = typer.Option(
        None,
        "--format",
        help="gsm8k-jsonl, math-jsonl, math500-jsonl, benbench-jsonl, qa-jsonl, qa-csv (detected when omitted).",
    ),
    fields: str | None = typer.Option(
        None,
        "--fields",
        help="Generic files: question=FIELD,answer=FIELD[,id=FIELD,subject=FIELD].",
    ),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Only the first N items of each split."
    ),
    sample: int | None = typer.Option(
        None, "--sample", min=1, help="A seeded random sample of N items per split."
    ),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed for --sample and the bootstrap."),
    n: int = typer.Option(5, "--n", help="n-gram length in tokens, 1-64 (paper: 5)."),
    k: int = typer.Option(
        5, "--k", help="Starting points per text, evenly spaced, 1-100 (paper: 5)."
    ),
    ppl_prefix: str = typer.Option(
        "{question} Answer:", "--ppl-prefix", help="Perplexity layout: conditioning text."
    ),
    ppl_continuation: str = typer.Option(
        " {answer}", "--ppl-continuation", help="Perplexity layout: scored text."
    ),
    ngram_text: str = typer.Option(
        "{question} {answer}", "--ngram-text", help="Text whose n-grams are predicted."
    ),
    lenient: bool = typer.Option(
        True,
        "--lenient/--no-lenient",
        help="Also ROUGE-L / edit-similarity criteria (generates where needed).",
    ),
    rouge_threshold: float = typer.Option(
        0.75, "--rouge-threshold", help="ROUGE-L F threshold (paper 0.75)."
    ),
    edit_threshold: float = typer.Option(
        0.9, "--edit-threshold", help="Edit-similarity threshold (paper text 0.9; its code 0.75)."
    ),
    inclusive: bool = typer.Option(False, "--inclusive", help="Thresholds with >= instead of >."),
    bootstrap: int = typer.Option(
        2000, "--bootstrap", "--n-boot", help="Bootstrap resamples for the 95% CIs."
    ),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:N."),
    dtype: str = typer.Option("auto", "--dtype", help="auto, float32, bfloat16, float16."),
    model_opt: list[str] | None = typer.Option(None, "-M", help=MODEL_OPTIONS_HELP),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="Score cache folder."),
    no_cache: bool = typer.Option(
        False, "--no-cache", help="Do not read or write the score cache."
    ),
    drop_shared: bool = typer.Option(
        False,
        "--drop-shared",
        help="With --train: leave out items whose text both splits hold (kept and named by default).",
    ),
    drop_repeats: bool = typer.Option(
        False,
        "--drop-repeats",
        help="Leave out items repeating the text of an earlier item of the same split (before "
        "--limit/--sample); kept and named by default.",
    ),
    strict: bool = typer.Option(False, "--strict", help="Fail on the first malformed row."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start the run folder afresh."),
    report: bool = REPORT_OPT,
    fail_on_signal: bool = FAIL_ON_SIGNAL_OPT,
    batch_items: int = typer.Option(
        16, "--batch-items", min=1, help="Items per batch (saved after each)."
    ),
    executor: str = EXECUTOR_OPT,
    ray_address: str | None = RAY_ADDRESS_OPT,
    workers: int | None = WORKERS_OPT,
    gpus_per_worker: float = GPUS_PER_WORKER_OPT,
) -> None:
    """Has MODEL seen BENCHMARK? Compares perplexity and n-gram accuracy on original vs paraphrased items."""
    run(**locals())


def _read_split(kw: dict[str, Any], spec: str, name: str) -> Any:
    """The items of one split (its skipped rows listed)."""
    from ..data import FieldMap
    from ..data.qa import load_qa

    fm = FieldMap.parse(kw["fields"]) if kw["fields"] else None
    loaded = load_qa(spec, format=kw["fmt"], field_map=fm, split=name, strict=kw["strict"])
    list_skipped(loaded.problems)
    return loaded


def _reference_names(paths: list[str], option: str) -> list[tuple[str, str]]:
    """Each reference file with the name its columns get: the file's stem, with as many parent
    folders as make it unique (``a/rewritten`` and ``b/rewritten``). A file given twice would
    count its paraphrases twice: refused."""
    seen: dict[Path, str] = {}
    for p in paths:
        key = Path(p).resolve()
        if key in seen:
            raise ConfigError(f"{option} {p}: given twice (as {seen[key]!r} first)")
        seen[key] = p
    if not paths:
        return []
    parts = [Path(p).resolve().parts for p in paths]

    def named(x: tuple[str, ...], depth: int, suffix: bool) -> str:
        return "/".join((*x[-depth:-1], x[-1] if suffix else Path(x[-1]).stem))

    for suffix in (False, True):  # a/x.jsonl and a/x.csv keep their suffixes
        for depth in range(1, max(map(len, parts)) + 1):
            names = [named(x, depth, suffix) for x in parts]
            if len(set(names)) == len(names):
                return list(zip(paths, names))
    raise AssertionError("whole resolved paths, checked to differ above, are unique names")


def _split_input(
    kw: dict[str, Any], loaded: Any, refs: list[str] | None, name: str, drop: set[str]
) -> Any:
    """A read split with its references and selected items (``drop``: ids left out first)."""
    from ..data import FieldMap
    from ..data.qa import load_qa
    from ..pipeline.benbench import SplitInput
    from ..pipeline.benbench_refs import ReferenceSet, pair_reference

    fm = FieldMap.parse(kw["fields"]) if kw["fields"] else None
    references: list[ReferenceSet] = []
    # --format names the benchmark's format; a reference's own is detected (a BenBench rewritten
    # file read as plain GSM8K, or as qa-jsonl, would be its originals), except the generic ones
    # whose columns --fields maps
    ref_fmt = kw["fmt"] if kw["fmt"] in ("qa-jsonl", "qa-csv") and fm is not None else None
    option = "--reference" if name == "test" else "--train-reference"
    for path, ref_name in _reference_names(refs or [], option):
        ref = load_qa(path, format=ref_fmt, field_map=fm, strict=kw["strict"])
        references.append(  # (a --train-reference error said --reference; QA)
            pair_reference(loaded, ref, name=ref_name, pairing=kw["pairing"], option=option)
        )
        list_skipped(ref.problems, f"skipped (reference {references[-1].name})")
        same = [p for p in references[-1].pairs.values() if p.reason.startswith("identical")]
        if same and len(same) == len(references[-1].pairs):
            raise ConfigError(
                f"{option} {path}: every paired row is the original's own text, not a "
                f"paraphrase ({ref.format} read; is it the benchmark itself?)"
            )
    pool = [it for it in loaded.items if it.id not in drop]
    split = SplitInput.build(name, loaded, pick_items(pool, kw, f"split {name}"), references)
    for r in split.references:
        if r.pairing != "inline":
            warning = r.check_pairs([it.id for it in split.items], option)
            if warning:
                err_console.print(styled("yellow", "partly paired", f" {warning}"), highlight=False)
    if not kw["paraphraser"]:
        _refuse_unusable(split, option)
    return split


def _refuse_unusable(split: Any, option: str) -> None:
    """Refuse a split whose given paraphrases, paired by id or position, all fail their
    checks, before the model loads: rows paired with the wrong items; the run had nothing to
    compare and ended "no verdict: ... give the paraphrases with --reference", to a user who
    had (QA). Paraphrases paired by their question text (a rewritten file's own) that fail are
    the data's (one of GSM8K's 1,319 changes its answer): a run of such items goes on, its
    verdict line naming the failures."""
    from collections import Counter

    paired = [
        p for r in split.references for it in split.items if (p := r.pairs.get(it.id)) is not None
    ]
    by_place = all(r.pairing in ("id", "order") for r in split.references)
    if not paired or not by_place or any(p.ok for p in paired):
        return
    why = Counter(p.reason.split(":")[0] for p in paired).most_common(2)
    said = "; ".join(f"{reason}: {n}" for reason, n in why)
    raise ConfigError(
        f"{option}: none of the {plural(len(paired), 'paraphrase')} paired with the selected "
        f"items of split {split.name} is usable ({said}): nothing to compare the originals "
        "with; are the rows paired with the right items (--pairing; a file in another order "
        "changes every final answer)?"
    )


_LENIENT_ONLY = {
    "--rouge-threshold": "--lenient",
    "--edit-threshold": "--lenient",
    "--inclusive": "--lenient",  # (was kept silently, and recorded: QA)
}
"""Options only the lenient criteria read: with --no-lenient, said to be ignored."""


@user_errors
def run(**kw: Any) -> None:
    check_model(kw)  # before the benchmark's messages
    lenient = "--lenient" if kw["lenient"] else "--no-lenient"
    kw = drop_ignored(kw, command, _LENIENT_ONLY, lenient, "{} runs")
    with executor_from(kw) as executor:
        scan(kw, executor)


def scan(kw: dict[str, Any], executor: Executor) -> None:
    """One BenBench run from the command's arguments, scored by ``executor``."""
    from ..backends import parse_model_options
    from ..backends.probe import check_backend
    from ..data.overlap import split_overlap
    from ..pipeline.benbench import BenBenchConfig, run_benbench
    from ..pipeline.benbench_refs import check_pairing
    from ..store import RunDir

    config = BenBenchConfig(
        n=kw["n"],
        k=kw["k"],
        ppl_prefix=kw["ppl_prefix"],
        ppl_continuation=kw["ppl_continuation"],
        ngram_text=kw["ngram_text"],
        lenient=kw["lenient"],
        rouge_threshold=kw["rouge_threshold"],
        edit_threshold=kw["edit_threshold"],
        inclusive=kw["inclusive"],
        n_boot=kw["bootstrap"],
        seed=kw["seed"],
        batch_items=kw["batch_items"],
    )
    if kw["train_reference"] and not kw["train"]:
        raise ConfigError("--train-reference needs --train")
    if kw["drop_shared"] and not kw["train"]:
        raise ConfigError("--drop-shared needs --train: it leaves out items both splits hold")
    check_pairing(kw["pairing"])
    loaded = {"test": _read_split(kw, kw["benchmark"], "test")}
    if kw["train"]:
        loaded["train"] = _read_split(kw, kw["train"], "train")
    overlap = split_overlap({n: x.items for n, x in loaded.items()})
    drop = overlap.left_out(kw["drop_shared"], kw["drop_repeats"])
    splits = [_split_input(kw, loaded["test"], kw["reference"], "test", drop["test"])]
    if kw["train"]:
        splits.append(
            _split_input(kw, loaded["train"], kw["train_reference"], "train", drop["train"])
        )
    chosen = (
        split_overlap({s.name: s.items for s in splits}) if kw["limit"] or kw["sample"] else None
    )
    say_overlap(overlap, kw["drop_shared"], kw["drop_repeats"], chosen)
    refuse_empty({s.name: s.items for s in splits}, kw["drop_shared"])
    if not any(s.references for s in splits) and not kw["paraphraser"]:
        err_console.print(
            styled(
                "yellow",
                "no reference versions",
                " (--reference, --paraphraser or a BenBench rewritten file): only perplexity and "
                "n-gram accuracy are reported, no Delta",
            )
        )
    elif not kw["paraphraser"]:  # one split has some, another none: its Delta is missing
        bare = [s.name for s in splits if not s.references]
        if bare:
            give = {
                "test": "--reference, or a BenBench rewritten file as --benchmark",
                "train": "--train-reference, or a BenBench rewritten file as --train",
            }[bare[0]]
            err_console.print(
                styled(
                    "yellow",
                    "no reference versions",
                    f" for the {bare[0]} split ({give}): it has no Delta, so Delta_train - "
                    "Delta_test is not computed",
                ),
                soft_wrap=True,
            )
    options = parse_model_options(kw["model_opt"])
    out = (
        kw["out"]
        or Path("runs")
        / f"benbench-{slug(kw['model'], stem=True)}-{slug(kw['benchmark'], stem=True)}"
    )
    check_run_folder(out, kw["overwrite"], "benbench")
    cache = open_cache(kw)
    with status(f"loading model {kw['model']} ({executor.config.kind}) ..."):
        scorer = executor.scorer(
            kw["model"], device=kw["device"], dtype=kw["dtype"], options=options, cache=cache
        )
    with status("checking what the model can do ..."):
        check_backend(scorer.backend, prompt_logprobs=True, token_stats=True, method="BenBench")
        if kw["lenient"]:
            check_backend(
                scorer.backend,
                generate=True,
                method="BenBench's lenient n-gram criteria (the default; --no-lenient leaves them out)",
            )
    para = None
    if kw["paraphraser"]:
        if kw["paraphraser"] == kw["model"]:  # the model already loaded, its own counters
            para = executor.scorer(
                kw["model"], device=kw["device"], dtype=kw["dtype"], options=options, cache=cache
            )
        else:  # an executor holds one model at a time: a second one is loaded in this process
            para = LocalExecutor().scorer(
                kw["paraphraser"], device=kw["device"], dtype=kw["dtype"], cache=cache
            )
        check_backend(para.backend, generate=True, method="--paraphraser")
    selection = {
        "limit": kw["limit"],
        "sample": kw["sample"],
        "seed": kw["seed"],
        "n_items": {s.name: len(s.items) for s in splits},
        **reading_options(kw),
        **({"pairing": kw["pairing"]} if kw["pairing"] != "auto" else {}),
        **({"drop_repeats": True} if kw["drop_repeats"] else {}),
    }
    if kw["train"]:
        selection.update(overlap=overlap.counts(), drop_shared=kw["drop_shared"])
    with ItemProgress("scoring", out) as bar:
        outcome = run_benbench(
            splits,
            scorer,
            RunDir(out),
            config,
            paraphraser=para,
            selection=selection,
            overwrite=kw["overwrite"],
            on_start=bar.on_start,
            on_items=bar.on_items,
        )
    print_benbench_summary(outcome.summary)
    console.print(f"run folder: {outcome.run_dir} (summary.json, items.jsonl)")
    written = report_after_run(outcome.run_dir, write=kw["report"])
    console.print(  # what to do next
        f"card:   contamscope card --run {shell(outcome.run_dir)} --out card.md",
        highlight=False,
        soft_wrap=True,
    )
    exit_if_skipped(
        sum(
            c["rows_skipped"] + c.get("reference_rows_skipped", 0)
            for c in outcome.summary["counts"].values()
        ),
        signal=kw["fail_on_signal"] and has_signal(outcome.summary),
        unwritten=not written,
    )


def _diff(x: float | None, pct: bool = False) -> str:
    """A difference: of rates in percentage points (a rate's cells are in %), else a number."""
    return pp_text(x) if pct else value(x)


def _ci(ci: list[float] | None, pct: bool = False) -> str:
    """A difference's interval, in the unit of :func:`_diff`."""
    if not ci:
        return "-"
    if pct:
        return f"[{pp_text(ci[0], '')}, {pp_text(ci[1], '')}] pp"
    return f"[{value(ci[0])}, {value(ci[1])}]"


def print_benbench_summary(summary: dict[str, Any]) -> None:
    """Terminal table of a BenBench summary (reads only the summary dict)."""
    from ..report.benbench import LABELS as _LABELS
    from ..report.benbench import (
        ci_mark,
        ci_notes,
        ci_warnings,
        metric_keys,
        partly_paired,
        thresholds_text,
    )

    cfg = summary["config"]
    console.print(f"model      {summary['model']['spec']}")
    for name, b in summary["benchmark"].items():
        c = summary["counts"][name]
        refs = (
            ", ".join(
                f"{r['name']} ({r['items_paired']} paired: {r['paraphrases_ok']} ok, "
                f"{r['paraphrases_failed']} failed"
                + (f"; {plural(r['rows_skipped'], 'row')} skipped" if r.get("rows_skipped") else "")
                + ")"
                for r in b["references"]
            )
            # (it said "none" beside a --paraphraser whose replies had all failed; QA)
            or ("none usable from --paraphraser" if summary.get("paraphraser") else "none")
        )
        console.print(
            f"{name:10} {b['source']} ({b['format']}): {c['items_analysed']} analysed of "
            f"{c['items_selected']}{excluded_clause(c)}; rows skipped {c['rows_skipped']}; "
            f"references: {refs}",
            highlight=False,
        )
    for name, st in summary["statistics"]["splits"].items():
        t = Table(
            title=f"BenBench, {name} split: original vs paraphrase (Delta = original - paraphrase; "
            f"n={cfg['n']}, k={cfg['k']}"
            + (f"; {thresholds_text(cfg)}" if cfg["lenient"] else "")
            + ")",
            title_justify="left",
        )
        partial = partly_paired(st)  # then the original over the paired items too
        first = [f"original (all {st['n_items']})", f"original ({st['n_paired']})"]
        for col in ("metric", *(first if partial else ["original"]), "paraphrase", "Delta",
                    "95% CI", "p", "relative"):  # fmt: skip
            t.add_column(col, justify="left" if col == "metric" else "right")
        keys = metric_keys(summary)  # the lenient criteria's rows only where they were run
        for key in keys:
            label, pct = _LABELS[key]
            d = st["delta"][key]
            t.add_row(
                label,
                value(st["original"][key], pct),
                *([value(d.get("original"), pct)] if partial else []),
                value((st["reference"] or {}).get(key), pct),
                _diff(d["delta"], pct) if d["n"] else "-",
                _ci(d["ci"], pct) + ci_mark(d),
                p_text(d.get("p_value")),
                pp_text(None if d["relative_pct"] is None else d["relative_pct"] / 100, "%"),
            )
        console.print(t)
        for note in ci_notes(st["delta"].values()):
            console.print(f"no CI where none is shown: {note}", highlight=False)
        for warning in ci_warnings({k: st["delta"][k] for k in keys}):
            console.print(f"*{warning}", highlight=False, markup=False)
        if partial:
            console.print(
                f"original (all {st['n_items']}): mean over every analysed item; original "
                f"({st['n_paired']}), paraphrase, Delta and its CI: over the {st['n_paired']} "
                "with a usable paraphrase",
                highlight=False,
            )
        inst = st["instances"]
        parts = [
            f"{crit.split('_')[0]} {v['count']}/{v['of']} (paraphrases {v['reference_count']}/{v['reference_of']})"
            for crit, v in inst.items()
            if v["of"]
        ]
        console.print(f"items with every n-gram predicted: {'; '.join(parts)}")
    for name, c in summary["counts"].items():
        if c["paraphrase_failures"]:
            # "reason (count)": the reasons are phrases, not nouns to count ("2 reply not in ...")
            fails = ", ".join(f"{k} ({v})" for k, v in c["paraphrase_failures"].items())
            total = sum(c["paraphrase_failures"].values())
            console.print(
                styled(
                    "yellow",
                    f"{name}: {plural(total, 'paraphrase')} not used",
                    f": {fails}; listed in summary.json",
                )
            )
    dtt = summary["statistics"].get("delta_train_test")
    if dtt and any(v["value"] is not None for v in dtt.values()):
        t = Table(
            title="Delta_train - Delta_test (H0: same gap on both splits)", title_justify="left"
        )
        for col in ("metric", "value", "95% CI", "p", "relative", "relative CI"):
            t.add_column(col, justify="left" if col == "metric" else "right")
        for key, (label, pct) in _LABELS.items():
            v = dtt[key]
            if v["value"] is None:
                continue
            t.add_row(
                label,
                _diff(v["value"], pct),
                _ci(v["ci"], pct),
                p_text(v.get("p_value")),
                # a difference of two relative differences (each in %): percentage points
                "-" if v["relative_pct"] is None else f"{v['relative_pct']:+.2f} pp",
                "-"
                if not v["relative_ci"]
                else f"[{v['relative_ci'][0]:+.2f}, {v['relative_ci'][1]:+.2f}] pp",
            )
        console.print(t)
        for note in ci_notes(dtt.values()):
            console.print(f"no CI where none is shown: {note}", highlight=False)
    from ..report.benbench import verdict_line

    line = verdict_line(summary)
    if line is not None and line[0] != "none":  # with no paraphrase there is nothing to read
        console.print(
            styled(
                "dim",
                "Leak direction: perplexity/NLL Delta < 0 and n-gram Delta > 0 (original easier "
                "than its paraphrase). p (one-sided): H0 = each item's original is as familiar "
                "as its paraphrases (randomization over which version is the original). "
                "Rejecting it is evidence of a leak only if the paraphrases are as natural as "
                "the originals; the train-test difference (p two-sided, split-label "
                "permutation) cancels that. relative: Delta as a % of the paraphrase's value.",
            )
        )
    if line is not None:  # the report's verdict: the CI on the leak side of 0 and p <= 0.05
        kind, sentence = line
        style = {"signal": "bold red", "clean": "green"}.get(kind, "yellow")
        console.print(styled(style, sentence), highlight=False)
    tm = summary["timings"]
    if tm.get("items_per_second"):
        console.print(
            styled(
                "dim",
                ("the run that scored them finished " if "reanalysed_records" in tm else "scored ")
                + f"{plural(tm['items_scored_now'], 'item')} in {tm['scoring_seconds']:.1f} s; "
                f"{tm['requests_from_cache']} requests from cache",
            )
        )
