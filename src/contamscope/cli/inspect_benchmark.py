"""`contamscope inspect`: what a permutation run would read in a benchmark, with no model."""

from __future__ import annotations

import json
from typing import Any

import typer

from ..detectors.verdict import p_text, pct_text
from ..wording import plural
from .common import (
    Table,
    console,
    exit_if_skipped,
    list_skipped,
    pick_items,
    reading_options,
    status,
    styled,
    subject_list,
    user_errors,
)
from .permutation import (
    BENCHMARK_OPT,
    DEVICE_OPT,
    DROP_REPEATS_OPT,
    DTYPE_OPT,
    FIELDS_OPT,
    FORMAT_OPT,
    MAX_EXHAUSTIVE_OPT,
    MC_ORDERS_OPT,
    SAMPLE_OPT,
    SEED_OPT,
    SPLIT_OPT,
    STRICT_OPT,
    SUBJECTS_OPT,
    TEMPLATE_OPT,
)

EPILOG = """
Examples:

  contamscope inspect --benchmark mmlu

  contamscope inspect --benchmark ../data/cmmlu --split test --model smollm2

  contamscope inspect --benchmark cmb.json --format cmb-json --sample 500 --json > cmb.inspect.json

  contamscope inspect --benchmark mmlu --model hf:Qwen/Qwen2.5-0.5B --measure 64 --device cuda

Nothing is scored and nothing written: the counts come from the benchmark's text (and, with
--model, from the model's tokenizer alone; the weights are not loaded). --measure N loads the
model and scores N sampled items to estimate the run's time. Exit codes: 0 ok, 2 user error, 3
some input rows were skipped.
"""


def command(
    benchmark: str = BENCHMARK_OPT,
    fmt: str | None = FORMAT_OPT,
    fields: str | None = FIELDS_OPT,
    split: str | None = SPLIT_OPT,
    subjects: str | None = SUBJECTS_OPT,
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Only the first N items (what a run's --limit scores)."
    ),
    sample: int | None = SAMPLE_OPT,
    seed: int = SEED_OPT,
    template: str = TEMPLATE_OPT,
    max_exhaustive: int = MAX_EXHAUSTIVE_OPT,
    mc_orders: int = MC_ORDERS_OPT,
    include_non_exchangeable: bool = typer.Option(
        False,
        "--include-non-exchangeable",
        help="Count items whose options refer to each other ('All of the above') as scored.",
    ),
    drop_repeats: bool = DROP_REPEATS_OPT,
    reference: str | None = typer.Option(
        None,
        "--reference",
        "-r",
        help="Items the model never saw, as `membership --reference` takes them: are they "
        "written like the benchmark's, in what their option orders show?",
    ),
    reference_format: str | None = typer.Option(
        None, "--reference-format", help="Format of --reference (default: the benchmark's)."
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        "-m",
        help="Count the tokens a run costs with this model's tokenizer (smollm2, gemma3, a "
        "folder, hf:PATH_OR_HUB_ID; only the tokenizer is read).",
    ),
    model_opt: list[str] | None = typer.Option(
        None,
        "-M",
        help="Model option key=value, repeatable: for the counts bos=TOKEN|none and "
        "revision=REV matter; with --measure, all of `permutation --help`'s.",
    ),
    measure: int | None = typer.Option(
        None,
        "--measure",
        min=1,
        help="Also load --model, score a seeded sample of N items (no cache) and extrapolate "
        "the run's scoring time from it (on a GPU give 256 or more, a run's batch there, or "
        "the estimate runs high).",
    ),
    device: str = DEVICE_OPT,
    dtype: str = DTYPE_OPT,
    strict: bool = STRICT_OPT,
    as_json: bool = typer.Option(
        False, "--json", help="Print the whole inspection as JSON (ids of every item set aside)."
    ),
) -> None:
    """What would a permutation run read in BENCHMARK? Nothing is scored.

    Counts, orders, tokens and the benchmark's option-order conventions."""
    run(**locals())


@user_errors
def run(**kw: Any) -> None:
    from ..backends import parse_model_options
    from ..perturb import get_template
    from ..pipeline import PermutationConfig
    from ..pipeline.survey import survey_permutation
    from .membership import load_benchmark_beside_reference

    config = PermutationConfig(
        template=get_template(kw["template"]),
        max_exhaustive=kw["max_exhaustive"],
        mc_orders=kw["mc_orders"],
        seed=kw["seed"],
        include_non_exchangeable=kw["include_non_exchangeable"],
    )
    options = parse_model_options(kw["model_opt"])
    if not kw["model"] and (options or kw["measure"]):
        from ..errors import ConfigError

        given = "--measure" if kw["measure"] else "-M"
        raise ConfigError(f"{given} needs --model (the model to count or score with)")
    if kw["model"]:  # a mistyped spec fails before the benchmark is read
        from ..backends import check_model_spec

        check_model_spec(kw["model"], kw["dtype"])
    loaded = load_benchmark_beside_reference(kw)  # --fields may be the reference's
    list_skipped(loaded.problems, listed="the --json output", notes=loaded.notes)
    items = loaded.items
    if kw["drop_repeats"]:
        from ..data.overlap import repeats

        repeated = repeats(items)
        items = [it for it in items if it.id not in repeated]
    items = pick_items(items, kw, kw["benchmark"])
    selection = {
        "subjects": subject_list(kw),
        "limit": kw["limit"],
        "sample": kw["sample"],
        "seed": kw["seed"],
        "split": kw["split"],
        **({"drop_repeats": True} if kw["drop_repeats"] else {}),
        **reading_options(kw),
    }
    references = None
    if kw["reference"]:
        from .membership import load_reference, refuse_the_benchmark_as_reference, usable_references

        refuse_the_benchmark_as_reference(kw)  # as membership refuses them, with its warnings
        ref = load_reference(kw, loaded)
        list_skipped(
            ref.problems, "skipped (reference)", listed="the --json output", notes=ref.notes
        )
        references, _, _ = usable_references(kw, loaded.items, ref.items)
    tokenizer = backend = None
    if kw["measure"]:
        from ..backends import load_backend
        from ..backends.probe import check_backend
        from ..backends.tokenizer import tokenizer_of

        with status(f"loading model {kw['model']} ..."):
            backend = load_backend(
                kw["model"], device=kw["device"], dtype=kw["dtype"], options=options
            )
            check_backend(backend, prompt_logprobs=True, method="the permutation test")
        tokenizer = tokenizer_of(backend)
    elif kw["model"]:
        from ..backends.tokenizer import load_tokenizer

        with status(f"reading the tokenizer of {kw['model']} ..."):
            tokenizer = load_tokenizer(kw["model"], options)
    with status("counting ..."):
        found = survey_permutation(
            loaded,
            items,
            config,
            tokenizer=tokenizer,
            selection=selection | {"n_items": len(items)},
        )
    if references is not None:
        from ..pipeline.membership import reference_likeness

        found["reference_check"] = reference_likeness(items, references) | {
            "source": kw["reference"],
            "items": len(references),
        }
    if backend is not None:
        from ..pipeline.survey import measure_permutation

        with status(f"scoring {plural(kw['measure'], 'sampled item')} ..."):
            found["time"] = measure_permutation(
                found,
                backend,
                items,
                config,
                n_items=kw["measure"],
                seed=kw["seed"],
                tokenizer=tokenizer,
            )
    if kw["as_json"]:
        typer.echo(json.dumps(found, indent=1, ensure_ascii=False))
    else:
        print_inspection(found)
    skipped = len(loaded.problems) + (len(ref.problems) if kw["reference"] else 0)
    exit_if_skipped(skipped, "input row")


def _duration(seconds: float | None) -> str:
    """``42 s``, ``12 min``, ``3.4 h``, ``2.1 days``.

    >>> _duration(42.4), _duration(725), _duration(12_300), _duration(200_000)
    ('42 s', '12 min', '3.4 h', '2.3 days')
    """
    if seconds is None:
        return "an unknown time"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172_800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86_400:.1f} days"


def print_inspection(found: dict[str, Any]) -> None:
    """The inspection as a few lines and the conventions table."""
    c = found["counts"]
    bench = found["benchmark"]
    head = Table.grid(padding=(0, 2))
    head.add_column(no_wrap=True)
    head.add_column(overflow="fold")
    head.add_row(
        "benchmark",
        f"{bench['source']}; format {bench['format']}, {plural(bench['files'], 'file')}, "
        f"sha256 {bench['content_hash'][:12]}",
    )
    options = ", ".join(
        f"{plural(k, 'item')} with {n} options" for n, k in c["options_histogram"].items()
    )
    head.add_row(
        "items",
        f"{c['items_selected']:,} selected of {c['items_loaded']:,} loaded"
        + (f" in {plural(c['subjects'], 'subject')}" if c["subjects"] else "")
        + f"; rows skipped: {c['rows_skipped']}; {options or 'no items'}",
    )
    excluded = found["excluded"]
    texts = ", ".join(f"{t} {k}" for t, k in list(excluded["texts"].items())[:4])
    refer = c["items_excluded"] - c.get("items_too_long", 0)
    head.add_row(
        "set aside",
        (f"{refer:,}" if refer else "no items")
        + " whose options refer to each other"
        + (f" ({texts}{', ...' if len(excluded['texts']) > 4 else ''})" if texts else "")
        + (": not scored (--include-non-exchangeable scores them)" if refer else "")
        + (
            f"; {plural(c['items_too_long'], 'item')} longer than the model's context"
            if c.get("items_too_long")
            else ""
        ),
    )
    natural = found["natural_order"]
    reasons = "; ".join(f"{r}: {k:,}" for r, k in natural["reasons"].items())
    n_natural = c["items_natural_order"]
    head.add_row(
        "natural order",
        f"{n_natural:,} scored but left out of the verdict: "
        f"{'its' if n_natural == 1 else 'their'} published order is a natural one, for which H0 "
        "fails without a leak" + (f" ({reasons})" if reasons else "")
        if n_natural
        else "none: no scored item has a natural option order",
    )
    head.add_row(
        "tested",
        f"the verdict's tests read {plural(c['items_tested'], 'item')}"
        + (
            f"; {c['repeats']} repeat an earlier item's question and options"
            if c["repeats"]
            else ""
        ),
    )
    untestable = {k: v for k, v in found.get("by_subject", {}).items() if not v["tested"]}
    if untestable:
        named = ", ".join(
            f"{name} ({plural(v['items'], 'item')})" for name, v in list(untestable.items())[:5]
        )
        more = f" and {len(untestable) - 5} more" if len(untestable) > 5 else ""
        head.add_row(
            "",
            f"nothing to test in {plural(len(untestable), 'subject')}, every item set aside "
            f"or not scored: {named}{more}",
        )
    orders = found["orders"]
    per = ", ".join(f"{k:,} per {n}-option item" for n, k in orders["per_item"].items())
    head.add_row(
        "orders",
        f"{orders['total']:,} to score ({per})"
        + (
            f"; {orders['sampled_items']:,} items above --max-exhaustive get a Monte Carlo sample"
            if orders["sampled_items"]
            else ""
        ),
    )
    tokens = found.get("tokens")
    if tokens:
        ratio = f", {tokens['ratio']:.2f}x fewer" if tokens["ratio"] else ""
        long = (
            f"; {plural(tokens['items_too_long'], 'item')} longer than the model's context "
            f"({tokens['context']:,} tokens) would be left out"
            if tokens["items_too_long"]
            else ""
        )
        head.add_row(
            "tokens",
            f"{tokens['prefix_tree']:,} run by the prefix-tree engine, "
            f"{tokens['reference']:,} by the reference code's one sequence per order{ratio} "
            f"({tokens['model']}'s tokenizer){long}",
        )
    timed = found.get("time")
    if timed:
        detectors = (
            f" plus {_duration(timed['detector_seconds'])} of per-item detectors"
            if timed["detectors_inline"]
            else f"; the per-item detectors ({_duration(timed['detector_seconds'])} in one "
            "process) run beside it"
        )
        head.add_row(
            "time",
            f"about {_duration(timed['estimate_seconds'])} on {timed['device']}: scoring "
            f"{_duration(timed['scoring_seconds'])} ({plural(timed['items'], 'sampled item')}, "
            f"{timed['orders']:,} orders, took {timed['seconds']:.1f} s; scaled by "
            f"{timed['basis']}, {timed['run_cost']:,} for the run and {timed['sample_cost']:,} "
            f"in the sample){detectors}",
        )
    console.print(head, highlight=False)
    _print_conventions(found["conventions"], c["items_loaded"])
    if found.get("reference_check"):
        _print_likeness(found["reference_check"])


def _print_conventions(block: dict[str, Any], loaded: int) -> None:
    rows = block["conventions"]
    if not rows:
        console.print(
            styled(
                "dim",
                "conventions: no item has a structure a convention orders (numbers, "
                "statement labels, 2 x 2 blocks, words)",
            )
        )
        return
    t = Table(
        title=f"Option-order conventions of all {loaded:,} loaded items "
        "(H0: the published orders are shuffled)",
        title_justify="left",
    )
    for col in ("convention", "items with it", "published in it", "if shuffled", "p-value"):
        t.add_column(col, justify="left" if col == "convention" else "right")
    t.add_column("the verdict")
    for r in rows:
        t.add_row(
            r["convention"],
            f"{r['items']:,}",
            f"{pct_text(r['rate'])} ({r['published']:,})",
            pct_text(r["chance"]),
            p_text(r["p_value"]),
            "sets these items aside" if r.get("set_aside", True) else "counts them",
        )
    console.print(t)
    if block["ordered_by_convention"]:
        console.print(
            styled(
                "yellow",
                "ordered by convention:",
                f" at least one convention beyond chance (p <= {block['level']:.3g}, Bonferroni). "
                "The rules set aside the conventional orders they read, but a model may favour "
                "published orders through conventions they miss (stages, scales); read a "
                "leakage signal on this benchmark beside `contamscope membership --reference`.",
            ),
            highlight=False,
        )
    else:
        console.print(
            styled(
                "green",
                "no convention beyond chance:",
                f" no p-value at or below {block['level']:.3g} (Bonferroni), so nothing here says "
                "the published orders are other than shuffled.",
            ),
            highlight=False,
        )


def _print_likeness(check: dict[str, Any]) -> None:
    from .membership import likeness_text

    t = Table(
        title=f"Benchmark against {plural(check['items'], 'reference item')} ({check['source']}; "
        "H0: both have each feature at the same rate)",
        title_justify="left",
    )
    for col in ("feature", "benchmark", "references", "Fisher p"):
        t.add_column(col, justify="left" if col == "feature" else "right")
    for r in check["rows"]:
        b, f = r["benchmark"], r["reference"]
        t.add_row(
            r["feature"],
            f"{pct_text(b['rate'])} ({b['count']:,} of {b['of']:,})",
            f"{pct_text(f['rate'])} ({f['count']:,} of {f['of']:,})",
            p_text(r["p_value"]),
        )
    console.print(t)
    unlike = likeness_text(check)
    if unlike:
        console.print(styled("yellow", "references unlike the benchmark:", f" {unlike}"))
    else:
        console.print(
            styled(
                "green",
                "references alike:",
                f" no feature differs at p <= {check['level']:.3g} (Bonferroni); with few "
                "references that is weak evidence of likeness",
            ),
            highlight=False,
        )
