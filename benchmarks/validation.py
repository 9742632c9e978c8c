"""Injected-contamination validation: permutation (the paper's Tables 1 and 2), BenBench, CAP.

permutation: draws N MMLU items with a seed, continues training a copy of the model on half of
them for each epoch count, scores all N under every option order per checkpoint, and prints
accuracy, precision, recall, F1, AUC and the clean-half false-positive rate per detector and
epoch, then checks the issue's targets. benbench: the same on GSM8K test items (instance-level
n-gram flags, perplexity AUC, leaked-vs-clean gaps). cap: N items from each of two MMLU splits,
trained on one; prints PCR per split and whether the verdict names the trained split. The run
folder resumes (finished checkpoints and scores are reused).

    python benchmarks/validation.py                                  # SmolLM2, N=100, epochs 1,3,5
    python benchmarks/validation.py --n-items 200 --epochs 1,2,3,5 --scenario b
    python benchmarks/validation.py --method benbench --n-items 100 --epochs 1,3
    python benchmarks/validation.py --method cap --n-items 20 --epochs 1,3   # dev vs test, trains test
    python benchmarks/validation.py --from-summary runs/validate-x/summary.json   # table only
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from contamscope.data import load_benchmark
from contamscope.data.cap import load_cap
from contamscope.data.qa import load_qa
from contamscope.paths import default_score_db
from contamscope.pipeline.benbench import BenBenchConfig
from contamscope.pipeline.cap import CapConfig
from contamscope.store import ScoreCache
from contamscope.validate import (
    BenBenchValidation,
    CapValidation,
    PermutationValidation,
    TrainConfig,
    ValidateConfig,
    ValidationMethod,
    markdown_table,
    plot_summary,
    run_validation,
)
from contamscope.validate.report import plot_roc

BENCHDATA = Path(__file__).resolve().parents[1].parent / "shared" / "benchdata"


def check_targets(summary: dict[str, Any], alpha: float = 0.05) -> list[str]:
    """The issue's targets, each as a PASS/FAIL line (scenario a)."""
    lines = []
    res = {r["epochs"]: r["detectors"] for r in summary["results"]}
    trained = sorted(res)  # from the untrained model (epoch 0) where it was scored (QA)
    accs = [res[e]["alg1"]["accuracy"] for e in trained]
    rising = len(accs) > 1 and all(b >= a for a, b in zip(accs, accs[1:]))
    lines.append(
        f"{'PASS' if rising else 'FAIL'} Algorithm 1 accuracy rises with epochs: "
        + ", ".join(f"{e}: {a:.3f}" for e, a in zip(trained, accs))
    )
    if 5 in res:
        f1 = res[5]["alg1"]["f1"] or 0.0
        lines.append(
            f"{'PASS' if f1 >= 0.85 else 'FAIL'} Algorithm 1 F1 at 5 epochs >= 0.85: {f1:.3f}"
        )
    rank = f"rank@{alpha:g}"
    n_clean = summary["split"]["n_clean"]
    bound = alpha + 2 * math.sqrt(alpha * (1 - alpha) / n_clean)  # nominal + 2 binomial SE
    for e in sorted(res):
        fpr = res[e][rank]["fpr"]
        ok = fpr is not None and fpr <= bound
        lines.append(
            f"{'PASS' if ok else 'FAIL'} {rank} false-positive rate at {e} epochs <= "
            f"{alpha} + 2 SE ({bound:.3f}, n_clean={n_clean}): {fpr:.3f}"
        )
    comb = f"combined@{alpha:g}"
    if all(comb in res[e] for e in res):
        lines += _combined_targets(summary, res, comb, alpha)
    return lines


def _combined_targets(
    summary: dict[str, Any], res: dict[int, Any], comb: str, alpha: float
) -> list[str]:
    """Issue 10: the combined test at one exposure, against Algorithm 1 later, and the
    dataset-level verdicts."""
    lines = []
    if 1 in res:
        m = res[1][comb]
        n_clean = summary["split"]["n_clean"]  # as the rank test's: nominal + 2 binomial SE
        bound = alpha + 2 * math.sqrt(alpha * (1 - alpha) / n_clean)
        ok = (m["f1"] or 0) >= 0.55 and m["fpr"] is not None and m["fpr"] <= bound
        lines.append(
            f"{'PASS' if ok else 'FAIL'} {comb} at 1 epoch: F1 {m['f1'] or 0:.3f} >= 0.55 with "
            f"FPR {m['fpr'] or 0:.3f} <= {alpha} + 2 SE ({bound:.3f}, n_clean={n_clean}) "
            f"(recall {m['recall']:.3f})"
        )
    for e in (3, 5):
        if e in res:
            a, c = res[e]["alg1"]["f1"] or 0, res[e][comb]["f1"] or 0
            lines.append(
                f"{'PASS' if c >= a else 'FAIL'} {comb} F1 at {e} epochs >= Algorithm 1's: "
                f"{c:.3f} vs {a:.3f}"
            )
    for r in summary["results"]:
        d = (r.get("dataset") or {}).get("combined")
        if not d:
            continue
        if r["epochs"] == 0:
            ok, want = d["p_value"] > 0.05, "not contaminated (p > 0.05)"
        else:
            ok, want = d["p_value"] < 1e-3, "contaminated (p < 0.001)"
        lines.append(
            f"{'PASS' if ok else 'FAIL'} dataset-level combined test at {r['epochs']} epochs "
            f"says {want}: p = {d['p_value']:.2e}, AUC {d['auc']:.3f}"
        )
    return lines


def clean_false_positives(run_dir: Path, summary: dict[str, Any]) -> list[str]:
    """Clean items flagged by Algorithm 1 in the last evaluated model, with their option block
    (to see WHY a never-trained item is flagged; exchangeability violations show up here)."""
    last = summary["results"][-1]
    clean = set(json.loads((run_dir / "split.json").read_text())["clean"])
    out = []
    with open(run_dir / last["run"] / "items.jsonl", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if r["id"] in clean and r.get("alg1"):
                block = r["continuations"][0].replace("\n", " | ").strip(" |")
                out.append(f"  {r['id']}: {block[:110]}")
    return out


def dataset_line(result: dict[str, Any]) -> str:
    """One evaluated model's dataset-level verdicts: Algorithm 1 against chance on all items and
    without the naturally ordered ones, and the reference-calibrated tests."""
    d = result.get("dataset") or {}
    parts = [f"epoch {result['epochs']} dataset:"]
    nat = d.get("permutation_natural_order")
    rest = (d.get("permutation_without_natural_order") or {}).get("alg1")
    if nat:
        rate = nat["alg1_rate"]
        parts.append(
            f"{nat['n_items']} naturally ordered items, Algorithm 1 flags "
            f"{nat['alg1_count']} ({'-' if rate is None else f'{rate:.2f}'}, chance "
            f"{nat['alg1_chance'] or 0:.3f});"
        )
    if rest:
        parts.append(
            f"the other items: Algorithm 1 rate {rest['rate']:.3f} vs chance {rest['chance']:.3f}, "
            f"p = {rest['p_value']:.2e};"
        )
    for key in ("membership", "combined"):
        if key in d:
            t = d[key]
            name = t["statistic"] if t["statistic"].startswith(key) else f"{key} ({t['statistic']})"
            parts.append(f"{name} vs reference: AUC {t['auc']:.3f}, p = {t['p_value']:.2e};")
    return " ".join(parts).rstrip(";")


def print_method_report(summary: dict[str, Any]) -> None:
    """BenBench and CAP runs: training log, the tables, timings and the verdict lines."""
    split = summary["split"]
    print(
        f"model {summary['model']['spec']} | benchmark {summary['benchmark']['source']} | "
        f"method {summary['validated_method']} | {split['n_leaked']} leaked + "
        f"{split['n_clean']} clean | lr {summary['config']['train']['lr']}"
    )
    for log in summary["training"]:
        print(
            f"  training epoch {log['epoch']}: loss {log['mean_loss']:.3f} nats/token, "
            f"{log['steps']} steps, {log['tokens']} tokens, {log['seconds']:.0f} s"
        )
    print()
    print(markdown_table(summary))
    print()
    print("timings (s):", json.dumps(summary["timings"]))
    if summary["validated_method"] == "cap":
        for r in summary["results"]:
            for reader, v in r["readers"].items():
                ok = "PASS" if v["names_trained_split"] else ("-" if r["epochs"] == 0 else "FAIL")
                print(
                    f"{ok} epoch {r['epochs']} {reader}: verdict '{v['verdict']}' "
                    f"(expected after training: '{summary['expected_verdict']}')"
                )


def print_report(summary: dict[str, Any], run_dir: Path | None = None) -> None:
    if summary.get("validated_method", "permutation") != "permutation":
        print_method_report(summary)
        return
    split = summary["split"]
    print(
        f"model {summary['model']['spec']} | benchmark {summary['benchmark']['source']} | "
        f"{split['n_leaked']} leaked + {split['n_clean']} clean | scenario "
        f"{summary['config']['scenario']} | lr {summary['config']['train']['lr']}"
    )
    for log in summary["training"]:
        print(
            f"  training epoch {log['epoch']}: loss {log['mean_loss']:.3f} nats/token, "
            f"{log['steps']} steps, {log['tokens']} tokens, {log['seconds']:.0f} s"
        )
    for r in summary["results"]:
        d = r["diagnostics"]
        print(
            f"  epoch {r['epochs']}: mean original-order log-prob leaked "
            f"{d['leaked']['mean_original_logprob']:.2f} / clean {d['clean']['mean_original_logprob']:.2f}; "
            f"mean gap leaked {d['leaked']['mean_gap']:.2f} / clean {d['clean']['mean_gap']:.2f}"
        )
    print()
    print(markdown_table(summary))
    print()
    for r in summary["results"]:
        print(dataset_line(r))
    print("timings (s):", json.dumps(summary["timings"]))
    if summary["config"]["scenario"] == "a":
        print("\n".join(check_targets(summary)))
    if run_dir is not None:
        fps = clean_false_positives(run_dir, summary)
        print(
            f"clean items flagged by alg1 after {summary['results'][-1]['epochs']} epochs: {len(fps)}"
        )
        print("\n".join(fps))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--method", default="permutation", choices=["permutation", "benbench", "cap"])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument(
        "--benchmark",
        default=None,
        help="default: shared MMLU (permutation, cap) or GSM8K test (benbench)",
    )
    ap.add_argument("--splits", default="dev,test", help="cap: the two splits (first = reference)")
    ap.add_argument("--train-split", default="test", help="cap: the split trained on")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="cap: generation length")
    ap.add_argument("--n-items", type=int, default=100)
    ap.add_argument("--epochs", default="1,3,5")
    ap.add_argument("--scenario", default="a", choices=["a", "b"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=TrainConfig.lr)
    ap.add_argument("--no-baseline", action="store_true", help="skip the untrained model")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--from-summary", type=Path, default=None, help="print an existing run")
    args = ap.parse_args(argv)
    if args.from_summary:
        print_report(json.loads(args.from_summary.read_text()), args.from_summary.parent)
        return 0
    method: ValidationMethod
    if args.method == "benbench":
        bench = args.benchmark or str(BENCHDATA / "gsm8k" / "test.jsonl")
        method = BenBenchValidation(load_qa(bench, split="test"), BenBenchConfig(seed=args.seed))
    elif args.method == "cap":
        bench = args.benchmark or str(BENCHDATA / "mmlu")
        data = load_cap(bench, args.splits.split(","))
        cap = CapConfig(task=data.task, seed=args.seed, max_new_tokens=args.max_new_tokens)  # type: ignore[arg-type]
        method = CapValidation(data, args.train_split, cap)
    else:
        bench = args.benchmark or str(BENCHDATA / "mmlu")
        if bench == str(BENCHDATA / "mmlu") and not BENCHDATA.is_dir():
            bench = "mmlu"  # the bundled copy
        method = PermutationValidation(load_benchmark(bench), args.scenario, seed=args.seed)
    config = ValidateConfig(
        n_items=args.n_items,
        epochs=tuple(int(x) for x in args.epochs.split(",")),
        seed=args.seed,
        baseline=not args.no_baseline,
        train=TrainConfig(lr=args.lr, seed=args.seed),
    )
    name = args.scenario if args.method == "permutation" else args.method
    out = args.out or Path("runs") / f"bench-validate-n{args.n_items}-{name}"
    outcome = run_validation(
        method,
        args.model,
        config,
        out,
        device=args.device,
        cache=ScoreCache(default_score_db()),
        on_phase=lambda text: print(f"[{text}]", file=sys.stderr, flush=True),
    )
    plot_summary(outcome.summary, out / "validation.png")
    plot_roc(outcome.summary, out / "validation-roc.png")
    print_report(outcome.summary, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
