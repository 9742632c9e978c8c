"""`contamscope cap`: CAP, the Performance Consistency Ratio, train versus test (Zhao et al.)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..errors import CapabilityError, ConfigError
from ..executors import Executor, LocalExecutor
from ..wording import plural
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
    warn,
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

EPILOG = """
Examples:

  contamscope cap --model smollm2 --benchmark ../shared/benchdata/cap/fineval --splits dev,val --limit 20

  contamscope cap --model hf:./fin-model --benchmark cap/finqa --splits train,test --subset samples

  contamscope cap --model openai:http://localhost:8000/v1#my-model --benchmark cap/ectsum --splits train,test --pcr-alpha 0.001

  contamscope cap --model smollm2 --benchmark qa.jsonl --task qa --splits train,test --fields input=question,output=answer,split=part

  contamscope cap --model hf:./fin-model --benchmark cap/fineval --splits dev,val --executor ray --ray-address auto --gpus-per-worker 1

The first split is the one the model may have been fine-tuned on; each other split is compared
with it. Re-running with the same --out resumes. Exit codes: 0 ok, 2 user error, 3 finished but
some input rows were skipped (see summary.json), 4 a contamination signal under --fail-on-signal, 130 interrupted
(re-run to resume).
"""


def command(
    model: str = typer.Option(
        "smollm2",
        "--model",
        "-m",
        help="Model that generates answers: smollm2 or gemma3 (bundled), a local model folder or .gguf file, hf:, "
        "vllm:, openai:BASE_URL#MODEL.",
    ),
    benchmark: str = typer.Option(
        ...,
        "--benchmark",
        "-b",
        help="CAP data folder (ori/mod files), MCQ folder with split subfolders, or JSONL/CSV.",
    ),
    splits: str = typer.Option(
        "train,test",
        "--splits",
        help="Comma-separated splits; the first is the fine-tuning reference.",
    ),
    task: str | None = typer.Option(
        None, "--task", help="mcq, qa or summary (detected when omitted)."
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Run folder (default runs/cap-<model>-<benchmark>)."
    ),
    subset: str | None = typer.Option(
        None,
        "--subset",
        help="File set of a CAP folder: a file prefix (research, report) or 'samples'.",
    ),
    fields: str | None = typer.Option(
        None, "--fields", help="Generic files: input=F,output=F,split=F,id=F,modified=F."
    ),
    fmt: str | None = typer.Option(
        None, "--format", help="MCQ format of split subfolders (see `contamscope formats`)."
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="First N items of each split."),
    sample: int | None = typer.Option(
        None, "--sample", min=1, help="Seeded random N items of each split."
    ),
    seed: int = typer.Option(
        0, "--seed", min=0, help="Seed of modifications, bootstrap and --sample."
    ),
    alpha: float = typer.Option(
        0.01,
        "--pcr-alpha",
        help="PCR smoothing constant, the paper's alpha; the paper used 0.01, and 0.001 for "
        "summaries (give it: the default stays 0.01 for every task).",
    ),
    old_alpha: float | None = typer.Option(
        None, "--alpha", hidden=True, help="Refused: the PCR constant is --pcr-alpha."
    ),
    scale: str = typer.Option("tanh", "--scale", help="PCR scale function: tanh, linear, sigmoid."),
    max_new_tokens: int | None = typer.Option(
        None, "--max-new-tokens", help="Generation length (default 8 mcq, 64 qa, 256 summary)."
    ),
    chat: bool = typer.Option(
        False,
        "--chat",
        help="Use the model's chat template (refused for a model without one, a base model).",
    ),
    year_shift: int | None = typer.Option(
        None, "--year-shift", help="qa: years added (default: seeded +-20..40)."
    ),
    include_answer_changing: bool = typer.Option(
        False, "--include-answer-changing", help="qa: keep items whose answer holds a year."
    ),
    include_unmodified: bool = typer.Option(
        False,
        "--include-unmodified",
        help="Keep items whose modified input equals the original (consistent by construction; "
        "the paper's code kept them). Analysis only.",
    ),
    paraphraser: str | None = typer.Option(
        None, "--paraphraser", help="summary: model spec that paraphrases (default: --model)."
    ),
    paraphrase_threshold: float = typer.Option(
        0.98, "--paraphrase-threshold", help="summary: min cosine of a kept paraphrase."
    ),
    similarity_threshold: float = typer.Option(
        0.95, "--similarity-threshold", help="summary: cosine above which two predictions agree."
    ),
    embedder: Path | None = typer.Option(
        None,
        "--embedder",
        help="Sentence-embedding model folder (default: bundled all-MiniLM-L6-v2).",
    ),
    mcq_metric: str = typer.Option(
        "mapped", "--mcq-metric", help="mcq M: mapped (rules) or strict (output is the letter)."
    ),
    no_loglik: bool = typer.Option(
        False, "--no-loglik", help="mcq: skip the log-likelihood choice."
    ),
    template: str | None = typer.Option(
        None,
        "--template",
        help="mcq: prompt layout (default: FinEval's for FinEval items, else 'Question: ...', "
        "'A. ...', 'Answer:'): paper, paper-script, mmlu, or your own as JSON with an optional "
        "answer cue, e.g. "
        '\'{"question": "问题：{question}\\n", "option": "{label}. {text}\\n", '
        '"answer": "答案："}\', or a .json file holding that.',
    ),
    n_boot: int = typer.Option(
        2000,
        "--bootstrap",
        "--n-boot",
        help="Bootstrap resamples for the CI and relabellings of the split test.",
    ),
    min_diff: float = typer.Option(
        0.0, "--min-diff", help="Smallest |PCR difference| called evidence."
    ),
    plot: bool = typer.Option(
        True, "--plot/--no-plot", help="Write pcr_heatmap.png (needs matplotlib)."
    ),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:N."),
    dtype: str = typer.Option("auto", "--dtype", help="auto, float32, bfloat16, float16."),
    model_opt: list[str] | None = typer.Option(None, "-M", help=MODEL_OPTIONS_HELP),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="Score cache folder."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the cache."),
    drop_shared: bool = typer.Option(
        False,
        "--drop-shared",
        help="Leave out items whose text is in more than one split (kept and named by default).",
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
    batch_items: int = typer.Option(16, "--batch-items", min=1, help="Items per generation batch."),
    executor: str = EXECUTOR_OPT,
    ray_address: str | None = RAY_ADDRESS_OPT,
    workers: int | None = WORKERS_OPT,
    gpus_per_worker: float = GPUS_PER_WORKER_OPT,
) -> None:
    """Fine-tuned on the training split, or contaminated by the test split? CAP's PCR, train vs test."""
    run(**locals())


_TASK_ONLY = {
    "--embedder": "summary",
    "--paraphraser": "summary",
    "--paraphrase-threshold": "summary",
    "--similarity-threshold": "summary",
    "--year-shift": "qa",
    "--include-answer-changing": "qa",
    "--mcq-metric": "mcq",
    "--no-loglik": "mcq",
    "--template": "mcq",
}
"""Options read by one task only: given for another, they are reported as ignored."""


@user_errors
def run(**kw: Any) -> None:
    check_model(kw)  # before the benchmark's messages
    with executor_from(kw) as executor:
        scan(kw, executor)


def scan(kw: dict[str, Any], executor: Executor) -> None:
    """One CAP run from the command's arguments, generated by ``executor``."""
    if kw.get("old_alpha") is not None:  # elsewhere --alpha is a test level: never guess
        raise ConfigError(
            f"--alpha {kw['old_alpha']:g}: cap's PCR smoothing constant is --pcr-alpha (in the "
            "other commands --alpha is a significance level; cap's tests are read at 5%)"
        )
    from ..backends import parse_model_options
    from ..backends.probe import check_backend
    from ..data.cap import CapFields, load_cap
    from ..data.overlap import split_overlap
    from ..perturb import get_template
    from ..pipeline.cap import CapConfig, check_splits, layout_warnings, run_cap
    from ..store import RunDir

    split_names = [s.strip() for s in kw["splits"].split(",") if s.strip()]
    data = load_cap(
        kw["benchmark"],
        split_names,
        task=kw["task"],
        subset=kw["subset"],
        fields=CapFields.parse(kw["fields"]) if kw["fields"] else None,
        mcq_format=kw["fmt"],
        strict=kw["strict"],
    )
    list_skipped(data.problems, notes=data.notes)
    kw = drop_ignored(kw, command, _TASK_ONLY, data.task, "{} tasks")
    supplied = [s for s in split_names if s in data.splits and data.splits[s].modified]
    if data.task == "qa" and kw["year_shift"] is not None and supplied:
        err_console.print(  # the shift makes the modified inputs only where none are supplied
            styled(
                "yellow",
                "ignored",
                f" --year-shift on the items of {', '.join(supplied)} with a modified input in "
                "the data (mod files or a modified field); it shifts the years of the others",
            ),
            highlight=False,
        )
    config = CapConfig(
        task=data.task,  # type: ignore[arg-type]
        alpha=kw["alpha"],
        scale=kw["scale"],
        seed=kw["seed"],
        max_new_tokens=kw["max_new_tokens"],
        chat=kw["chat"],
        year_shift=kw["year_shift"],
        include_answer_changing=kw["include_answer_changing"],
        include_unmodified=kw["include_unmodified"],
        paraphrase_threshold=kw["paraphrase_threshold"],
        similarity_threshold=kw["similarity_threshold"],
        mcq_metric=kw["mcq_metric"],
        loglik=not kw["no_loglik"],
        n_boot=kw["n_boot"],
        min_diff=kw["min_diff"],
        batch_items=kw["batch_items"],
        template=get_template(kw["template"]) if kw["template"] and data.task == "mcq" else None,
    )
    check_splits(data, split_names)
    if data.task_detected:  # after the checks: a refused command's error is its one line (QA)
        err_console.print(f"task: {data.task} (detected; --task overrides)", highlight=False)
    for note in layout_warnings(data, split_names, config):
        warn(note)
    overlap = split_overlap({s: data.splits[s].items for s in split_names})
    gone = overlap.left_out(kw["drop_shared"], kw["drop_repeats"])
    selected = {
        s: pick_items([it for it in data.splits[s].items if it.id not in gone[s]], kw, f"split {s}")
        for s in split_names
    }
    chosen = split_overlap(selected) if kw["limit"] or kw["sample"] else None
    say_overlap(overlap, kw["drop_shared"], kw["drop_repeats"], chosen)
    refuse_empty(selected, kw["drop_shared"])
    options = parse_model_options(kw["model_opt"])
    embedder = None
    if data.task == "summary":
        from ..embed import SentenceEmbedder

        embedder = SentenceEmbedder(kw["embedder"])
    out = kw["out"] or Path("runs") / f"cap-{slug(kw['model'])}-{slug(kw['benchmark'])}"
    check_run_folder(out, kw["overwrite"], "cap")
    cache = open_cache(kw)
    with status(f"loading model {kw['model']} ({executor.config.kind}) ..."):
        scorer = executor.scorer(
            kw["model"], device=kw["device"], dtype=kw["dtype"], options=options, cache=cache
        )
    with status("checking what the model can do ..."):
        check_backend(scorer.backend, generate=True, method="CAP")
        if data.task == "mcq" and config.loglik:
            try:  # optional reader: CAP itself works from generated text only
                check_backend(
                    scorer.backend, prompt_logprobs=True, method="CAP's log-likelihood reader"
                )
            except CapabilityError as exc:
                err_console.print(
                    styled(
                        "yellow",
                        "no log-likelihood reader",
                        f" ({str(exc).split(';')[0]}); CAP goes on from generated text",
                    ),
                    highlight=False,
                )
    para = None
    if kw["paraphraser"] and kw["paraphraser"] != kw["model"] and data.task == "summary":
        # an executor holds one model at a time: a second one is loaded in this process
        para = LocalExecutor().scorer(
            kw["paraphraser"], device=kw["device"], dtype=kw["dtype"], cache=cache
        )
        check_backend(para.backend, generate=True, method="CAP paraphrasing")
    selection = {
        "splits": split_names,
        "limit": kw["limit"],
        "sample": kw["sample"],
        "seed": kw["seed"],
        "subset": kw["subset"],
        "n_items": {s: len(v) for s, v in selected.items()},
        **reading_options(kw, "task"),
        "overlap": overlap.counts(),
        "drop_shared": kw["drop_shared"],
        **({"drop_repeats": True} if kw["drop_repeats"] else {}),
    }
    with ItemProgress("generating", out) as bar:
        outcome = run_cap(
            data,
            selected,
            scorer,
            RunDir(out),
            config,
            paraphraser=para,
            embedder=embedder,
            selection=selection,
            overwrite=kw["overwrite"],
            on_start=bar.on_start,
            on_items=bar.on_items,
        )
    print_cap_summary(outcome.summary)
    if kw["plot"]:
        from ..report.cap_heatmap import plot_pcr_heatmap

        try:
            path = plot_pcr_heatmap([outcome.summary], outcome.run_dir / "pcr_heatmap.png")
            console.print(f"heatmap: {path}")
        except ImportError:
            err_console.print(
                "no heatmap: matplotlib is missing (pip install 'contamscope[report]')"
            )
    console.print(f"run folder: {outcome.run_dir} (summary.json, items.jsonl)")
    written = report_after_run(outcome.run_dir, write=kw["report"])
    exit_if_skipped(
        len(data.problems),
        signal=kw["fail_on_signal"] and has_signal(outcome.summary),
        unwritten=not written,
    )


def _fmt(x: Any, nd: int = 3) -> str:
    if isinstance(x, float) and x != x:
        return "-"  # undefined (no analysed items), not "nan"
    return "-" if x is None else f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def _ci_text(low: Any, high: Any, diff: Any) -> str:
    """A comparison's interval; none where the difference is defined but every resample gave
    it (a zero-width interval would read as a precise measurement)."""
    if low is None and isinstance(diff, float) and diff == diff:
        return "no 95% CI (every resample alike)"
    return f"95% CI [{_fmt(low)}, {_fmt(high)}]"


def print_cap_summary(summary: dict[str, Any], *, work: bool = True) -> None:
    """Terminal table: M, C, PCR and baselines per split, then the comparisons and verdict."""
    a = summary["analysis"]
    for reader, st in summary["statistics"].items():
        role = (
            "the verdict's reader: generated answers"
            if reader == "generate"
            else "reported beside it: the answer letter by log-likelihood"
        )
        t = Table(
            title=f"CAP {reader} ({role}) - {summary['task']}: M = {summary['metric']}, "
            f"C = {summary['consistency']}, PCR = {a['scale']}((M+{a['alpha']:g})/(C+{a['alpha']:g}))"
        )
        for col in ("split", "items", "analysed", "M", "M mod", "C", "PCR", "Delta", "delta"):
            t.add_column(col, justify="right" if col != "split" else "left")
        for s, sc in st["splits"].items():
            cnt = summary["counts"][s]
            t.add_row(
                s,
                str(cnt["items"]),
                str(sc["n"]),
                _fmt(sc["m"]),
                _fmt(sc["m_modified"]),
                _fmt(sc["c"]),
                _fmt(sc["pcr"]),
                _fmt(sc["decline"]),
                _fmt(sc["relative_decline"]),
            )
        console.print(t)
        for c in st["comparisons"]:
            console.print(
                f"  PCR_{c['reference']} - PCR_{c['other']} = {_fmt(c['pcr_diff'])}  "
                f"{_ci_text(c['ci_low'], c['ci_high'], c['pcr_diff'])}  "
                f"p = {_fmt(c['p_value'], 3)}"
                + (
                    ""
                    if c.get("p_adjusted") is None
                    else f" (Holm-adjusted {_fmt(c['p_adjusted'], 3)})"
                )
                + "  "
                f"(baselines: Delta diff {_fmt(c['decline_diff'])}, delta diff {_fmt(c['relative_decline_diff'])})  "
                f"-> {c['verdict']}",
                highlight=False,
            )
            if c.get("excess_diff") is not None:
                adj = c.get("excess_p_adjusted")
                console.print(
                    f"  (M-C)_{c['reference']} - (M-C)_{c['other']} = {_fmt(c['excess_diff'])}  "
                    f"{_ci_text(c['excess_ci_low'], c['excess_ci_high'], c['excess_diff'])}  "
                    f"p = {_fmt(c['excess_p_value'], 3)}"
                    + ("" if adj is None else f" (Holm-adjusted {_fmt(adj, 3)})")
                    + f"  (beyond the paper: no tanh ceiling) -> {c['excess_verdict']}",
                    highlight=False,
                )
    for s, cnt in summary["counts"].items():
        notes = []
        if cnt["excluded"]:
            notes.append("excluded " + ", ".join(f"{v} ({k})" for k, v in cnt["excluded"].items()))
        e = cnt["empty_predictions"]
        if e["original"] or e["modified"]:
            notes.append(f"empty predictions {e['original']} original / {e['modified']} modified")
        if cnt.get("unmapped_rate"):
            notes.append(f"unmapped answers {cnt['unmapped_rate']:.1%}")
        if cnt["no_reference"]:
            notes.append(f"{cnt['no_reference']} without a reference answer")
        if notes:  # (figures of the generations: under the last table, they read as its)
            console.print(f"  {s}, generated answers: " + "; ".join(notes), highlight=False)
    console.print(
        styled(
            "dim",
            "M: performance on the original inputs, M mod: on the modified ones, C: consistency "
            "of the two answers; Delta = M - M mod and delta = Delta / M are the paper's "
            "baselines. PCR_a - PCR_b: H0 = both splits equally exposed (two-sided split-label "
            "permutation p; the verdict needs the 95% CI off 0 and p <= 0.05, or p alone "
            "where every resample gave one difference). Below 0: the "
            "second split shows the higher performance-to-consistency ratio (contamination).",
        )
    )
    v = summary["verdict"]
    console.print(
        styled("bold", f"verdict: {v['label']}", f"  ({v['reasoning']})"), highlight=False
    )
    other = [
        c
        for c in summary["statistics"]["generate"]["comparisons"]
        if c.get("excess_verdict") not in (None, c["verdict"])
    ]
    for c in other:
        console.print(
            f"note: M - C reads {c['reference']} vs {c['other']} otherwise: {c['excess_verdict']} "
            f"(p = {_fmt(c.get('excess_p_adjusted') or c['excess_p_value'], 3)}; beyond the "
            "paper, no tanh ceiling); the verdict above is the paper's PCR",
            highlight=False,
        )
    tm = summary.get("timings") or {}
    if work and tm.get("items_now"):  # (answers from the cache were not said: QA)
        asked = tm["requests_computed"] + tm["requests_from_cache"]
        console.print(
            styled(
                "dim",
                f"answered {plural(tm['items_now'], 'item')} in {tm['seconds']:.1f} s; "
                f"{tm['requests_from_cache']} of {asked} requests from the score cache (not "
                "sent to the model)",
            )
        )
