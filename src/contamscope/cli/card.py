"""`contamscope card`: a Benchmark Transparency Card (Xu et al. 2024) from BenBench run folders.

The card lists which benchmarks and splits were checked and the measured signals, and leaves the
fields only the model developer can fill in (was benchmark data used in training, augmented ...).
Written as Markdown (``--out``) and as JSON next to it (same name, ``.json``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from ..detectors.verdict import p_text
from ..errors import ConfigError, DataError
from ..paths import check_output_file, write_text_atomic
from .common import console, user_errors

EPILOG = """
Examples:

  contamscope card --run runs/benbench-smollm2-test --out card.md

  contamscope card --run runs/gsm8k --run runs/math --model-name "My-7B" --out my-7b-card.md
"""

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


def _read(run: Path) -> dict[str, Any]:
    path = run / "summary.json" if run.is_dir() else run
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if run.is_dir():
            raise DataError(f"{run}: no summary.json (finish the run first)") from None
        raise DataError(f"{run}: no such run folder or summary.json") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(summary, dict) or summary.get("method") != "benbench":
        method = None
        if isinstance(summary, dict):  # the permutation summary names its method in its schema
            schema = str(summary.get("schema") or "").split(".")
            method = summary.get("method") or (schema[1] if len(schema) > 2 else None)
        what = f"a {method} run" if method else "no run summary of contamscope"
        raise DataError(f"{path}: {what}, not a BenBench run (the card needs `benbench` runs)")
    missing = [k for k in ("model", "benchmark", "statistics") if k not in summary]
    if missing:
        raise DataError(f"{path}: no {missing[0]!r} (not a complete BenBench summary.json)")
    return summary


def build_card(summaries: list[dict[str, Any]], model_name: str | None) -> dict[str, Any]:
    """The card as a dict: model, checks per benchmark split, and empty developer fields."""
    models = sorted({s["model"]["spec"] for s in summaries})
    if len(models) > 1:
        raise ConfigError(
            f"--run: the runs are of {len(models)} models ({', '.join(models[:3])}); a card "
            "describes one model: give the runs of one model"
        )
    checks = []
    for s in summaries:
        for split, st in s["statistics"]["splits"].items():
            b = s["benchmark"][split]
            checks.append(
                {
                    "benchmark": b["source"],
                    "split": split,
                    "content_hash": b["content_hash"],
                    "items": st["n_items"],
                    "references": [r["name"] for r in b["references"]],
                    "original": st["original"],
                    "paraphrase": st["reference"],
                    "delta": {
                        k: {"value": v["delta"], "ci": v["ci"], "p_value": v.get("p_value")}
                        for k, v in st["delta"].items()
                    },
                    "instances_all_ngrams_exact": st["instances"]["exact_all"]["count"],
                    "n": (s.get("config") or {}).get("n"),
                    "model_fingerprint": s["model"].get("fingerprint"),
                    "run_created": s.get("created"),
                }
            )
        dtt = s["statistics"].get("delta_train_test")
        if dtt:
            checks.append(
                {
                    "benchmark": s["benchmark"]["test"]["source"],
                    "split": "train - test",
                    "delta_train_test": {
                        k: {
                            "value": v["value"],
                            "ci": v["ci"],
                            "p_value": v.get("p_value"),
                            "relative_pct": v["relative_pct"],
                        }
                        for k, v in dtt.items()
                    },
                }
            )
    return {
        "schema": "contamscope.transparency_card/1",
        "model": model_name or ", ".join(models),
        "model_specs": models,
        "method": "BenBench (Xu et al. 2024): perplexity and n-gram accuracy, original vs paraphrase",
        "checks": checks,
        "developer_fields": {key: None for key, _ in DEVELOPER_FIELDS},
    }


def _ci(v: dict[str, Any], pct: bool = False) -> str:
    ci = "" if not v["ci"] else f" [{_f(v['ci'][0], pct)}, {_f(v['ci'][1], pct)}]"
    return ci + ("" if v.get("p_value") is None else f", p {p_text(v['p_value'])}")


def _f(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}%" if pct else f"{x:.3f}"


def render_markdown(card: dict[str, Any]) -> str:
    ns = {c.get("n") for c in card["checks"] if "delta_train_test" not in c}
    gram = f"{ns.pop()}-gram" if len(ns) == 1 and None not in ns else "n-gram"
    lines = [
        f"# Benchmark Transparency Card: {card['model']}",
        "",
        f"Signals measured by contamscope ({card['method']}).",
        "",
        "## Benchmarks checked",
        "",
        "| benchmark | split | items | references | ppl orig / para | Delta ppl [95% CI], p | "
        f"{gram} acc orig / para | Delta acc [95% CI], p | items with all n-grams exact |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in card["checks"]:
        if "delta_train_test" in c:
            continue
        d = c["delta"]
        para = c["paraphrase"] or {}
        lines.append(
            f"| {c['benchmark']} | {c['split']} | {c['items']} | {', '.join(c['references']) or '-'} | "
            f"{_f(c['original']['ppl'])} / {_f(para.get('ppl'))} | {_f(d['ppl']['value'])}{_ci(d['ppl'])} | "
            f"{_f(c['original']['ngram_exact'], True)} / {_f(para.get('ngram_exact'), True)} | "
            f"{_f(d['ngram_exact']['value'], True)}{_ci(d['ngram_exact'], True)} | "
            f"{c['instances_all_ngrams_exact']} |"
        )
    dtts = [c for c in card["checks"] if "delta_train_test" in c]
    if dtts:
        lines += [
            "",
            "## Training split vs test split (Delta_train - Delta_test)",
            "",
            "| benchmark | metric | value | 95% CI | p (two-sided) |",
            "|---|---|---|---|---|",
        ]
        for c in dtts:
            for k, v in c["delta_train_test"].items():
                if v["value"] is None:
                    continue
                ci = "-" if not v["ci"] else f"[{v['ci'][0]:.4g}, {v['ci'][1]:.4g}]"
                lines.append(
                    f"| {c['benchmark']} | {k} | {v['value']:.4g} | {ci} | "
                    f"{p_text(v.get('p_value'))} |"
                )
    lines += [
        "",
        "Leak direction: Delta ppl < 0 and Delta accuracy > 0 (the original is easier for the "
        "model than its paraphrase). p (one-sided): H0 = each item's original is as familiar to "
        "the model as its paraphrases. A clean model can reject it when the paraphrases read "
        "less naturally; Delta_train - Delta_test cancels that. These are signals, not proof; "
        "see docs/benbench.md.",
        "",
        "## To be filled in by the model developer",
        "",
    ]
    for _, question in DEVELOPER_FIELDS:
        lines += [f"- **{question}**", "  - answer: _not stated_", ""]
    return "\n".join(lines).rstrip() + "\n"


def command(
    run: list[Path] = typer.Option(
        ..., "--run", help="BenBench run folder (or its summary.json). Repeatable."
    ),
    out: Path = typer.Option(
        Path("card.md"), "--out", "-o", help="Markdown card; the JSON goes next to it."
    ),
    model_name: str | None = typer.Option(
        None, "--model-name", help="Model name shown on the card."
    ),
) -> None:
    """Write a Benchmark Transparency Card (Markdown + JSON) from BenBench runs."""
    _write(run, out, model_name)


@user_errors
def _write(runs: list[Path], out: Path, model_name: str | None) -> None:
    if not runs:
        raise ConfigError("--run: give at least one BenBench run folder")
    if out.suffix.lower() == ".json":  # the Markdown would be overwritten by the JSON
        raise ConfigError(f"--out {out}: name the Markdown card (.md); the JSON goes next to it")
    check_output_file(out)
    check_output_file(out.with_suffix(".json"))
    # the same run given twice would make two identical rows
    unique = list({Path(r).resolve(): r for r in runs}.values())
    card = build_card([_read(r) for r in unique], model_name)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, render_markdown(card))
    write_text_atomic(
        out.with_suffix(".json"), json.dumps(card, indent=2, ensure_ascii=False) + "\n"
    )
    console.print(f"wrote {out} and {out.with_suffix('.json')}")
