"""Synthetic permutation run folders with the pipeline's record layout (no model needed).

Leaked items get their original order lifted above the others by ``lift`` nats, so the statistics
and plots have something to show. ``exact_alg2=True`` runs the real IsolationForest per item
(about 0.1-0.3 s each); otherwise the Algorithm-2 fields are placeholders (flag False, score 0),
which keeps a 14,042-item run quick to make.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contamscope.detectors import (
    Algorithm1,
    gap,
    item_score_from_dict,
    rank_p_value,
    score_item,
    summarize,
)
from contamscope.pipeline.cap import CapConfig, build_cap_summary
from contamscope.pipeline.permutation_summary import subject_summary

MakeRun = Callable[..., Path]


def _record(i: int, lp: np.ndarray, exact_alg2: bool, alg1: Algorithm1) -> dict[str, Any]:
    orders = [list(o) for o in itertools.permutations(range(4))]
    rec: dict[str, Any] = {
        "id": f"subj{i % 7}-{i}",
        "subject": f"subj{i % 7}",
        "n_options": 4,
        "source": "synthetic.csv",
        "line": i + 1,
        "answer": i % 4,
        "prefix": f"Synthetic question number {i} <b>&amp;</b> </script> about topic {i % 13}?:\n",
        "orders": orders,
        "exhaustive": True,
        "continuations": ["A:x\nB:y\nC:z\nD:w\n"] * len(orders),
        "logprobs": [float(x) for x in lp],
        "n_tokens": [12] * len(orders),
        "excluded": None,
    }
    if exact_alg2:
        rec.update(score_item(lp, n_options=4, exhaustive=True).to_dict())
        return rec
    a1 = alg1.score(lp)
    rec.update(
        {
            "n_orders": len(lp),
            "rank": a1.rank,
            "n_tied": a1.n_tied,
            "p_value": rank_p_value(lp, exhaustive=True),
            "gap": gap(lp),
            "alg1": a1.leaked,
            "alg1_null": 1 / len(lp),  # continuous values: no ties
            "alg2_score": 0.0,
            "alg2_argmax": int(np.argmax(lp)),
            "alg2": {"-0.2": False},
            "alg2_anchored": {"-0.2": False},
            "null_anchored": {"-0.2": 0.0},
        }
    )
    return rec


def write_run(
    path: Path,
    n_items: int = 30,
    *,
    leaked_every: int = 3,
    lift: float = 4.0,
    n_excluded: int = 2,
    exact_alg2: bool = False,
    labels_in_records: bool = False,
    seed: int = 0,
    leak_only: str | None = None,
) -> Path:
    """Write settings.json, items.jsonl and summary.json like ``contamscope permutation`` does.

    Items ``subj{i % 7}-{i}``; every ``leaked_every``-th one is leaked (its original order lifted
    to the top), only within subject ``leak_only`` when given."""
    rng = np.random.default_rng(seed)
    alg1 = Algorithm1()
    path.mkdir(parents=True, exist_ok=True)
    records = []
    for i in range(n_items):
        if i < n_excluded:
            records.append(
                {
                    "id": f"excl-{i}",
                    "subject": "logic",
                    "n_options": 4,
                    "source": "synthetic.csv",
                    "line": i + 1,
                    "excluded": "options not exchangeable: option D refers to other options: 'All of the above'",
                }
            )
            continue
        lp = rng.normal(-40.0, 1.5, 24)
        leaked = i % leaked_every == 0 and leak_only in (None, f"subj{i % 7}")
        if leaked:
            lp[0] = lp.max() + lift * rng.uniform(0.2, 1.0)
        rec = _record(i, lp, exact_alg2, alg1)
        if labels_in_records:
            rec["leak_label"] = leaked
        records.append(rec)
    with open(path / "items.jsonl", "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    included = [r for r in records if not r.get("excluded")]
    stats = summarize([item_score_from_dict(r) for r in included]).to_dict()
    settings = {"method": "permutation", "run_schema": 1, "model": "hf:synthetic-model"}
    (path / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    summary = {
        "schema": "contamscope.permutation.summary/1",
        "contamscope_version": "0.1.0",
        "git_commit": None,
        "created": "2026-01-01T00:00:00Z",
        "model": {"spec": "hf:synthetic-model", "fingerprint": "synthetic"},
        "benchmark": {"source": "synthetic.csv", "format": "mmlu-csv", "content_hash": "0"},
        "config": {"alpha": 0.05},
        "counts": {
            "items_loaded": n_items,
            "items_selected": n_items,
            "items_analysed": len(included),
            "excluded": {"options not exchangeable": n_items - len(included)},
            "rows_skipped": 0,
        },
        "skipped_rows": [],
        "excluded_items": [
            {"id": r["id"], "reason": r["excluded"]} for r in records if r.get("excluded")
        ],
        "statistics": stats,
        "by_subject": subject_summary(included, set(), 0.05),
        "timings": {},
        "versions": {},
    }
    (path / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return path


@pytest.fixture()
def make_run(tmp_path: Path) -> MakeRun:
    """``make_run(name, n_items=30, **kw)`` -> a run folder under tmp_path."""

    def make(name: str = "run", n_items: int = 30, **kw: Any) -> Path:
        return write_run(tmp_path / name, n_items, **kw)

    return make


# --------------------------------------------------------------------------- CAP runs
# Records as ``contamscope cap`` writes them; the summary is computed by the pipeline's own
# build_cap_summary. ``contaminated=True`` makes the model right but inconsistent on the test
# split (M high, C low), the pattern CAP attributes to training on that split.


def _mcq_record(split: str, i: int, right: bool, consistent: bool, rng: Any) -> dict[str, Any]:
    opts = [f"opt{i}-{k} <b>&amp;</b>" for k in range(4)]
    answer = int(rng.integers(0, 4))
    order = [3, 2, 1, 0]
    mod_opts = [opts[k] for k in order]
    mod_answer = order.index(answer)
    choice = answer if right else (answer + 1) % 4
    # consistent: the same option text is chosen on the modified input
    mod_choice = (
        mod_opts.index(opts[choice]) if consistent else (mod_opts.index(opts[choice]) + 1) % 4
    )
    m = float(choice == answer)
    mm = float(mod_choice == mod_answer)
    c = float(opts[choice] == mod_opts[mod_choice])
    letter, mod_letter = chr(65 + choice), chr(65 + mod_choice)
    return {
        "id": f"{split}/q{i}",
        "split": split,
        "item_id": f"q{i}",
        "source": f"{split}.jsonl",
        "line": i + 1,
        "input": f"Question {i} about </script> topic {i % 5}?\nA: {opts[0]}\nAnswer:",
        "modified_input": f"Question {i} about </script> topic {i % 5}?\nA: {mod_opts[0]}\nAnswer:",
        "modification": {"kind": "factual", "supplied": False, "order": order},
        "excluded": None,
        "options": opts,
        "answer": answer,
        "modified_options": mod_opts,
        "modified_answer": mod_answer,
        "prediction": letter,
        "modified_prediction": mod_letter,
        "finish_reasons": ["stop", "stop"],
        "n_tokens": [1, 1],
        "choice": choice,
        "modified_choice": mod_choice,
        "strict_m": m,
        "strict_m_modified": mm,
        "m": m,
        "m_modified": mm,
        "c": c,
    }


def write_cap_run(
    path: Path,
    n_per_split: int = 40,
    *,
    contaminated: bool = True,
    model: str = "hf:/models/synthetic-cap",
    source: str = "/data/finbench",
    seed: int = 0,
    splits: tuple[str, ...] = ("train", "test"),
    blank: str | None = None,
) -> Path:
    """A finished CAP run folder (mcq, ``splits``: train and test by default; the first is the
    reference). ``blank``: a split answered all wrong and inconsistently (M = C = 0: its
    comparison is inconclusive)."""
    rng = np.random.default_rng(seed)
    records = []
    for split in splits:
        for i in range(n_per_split):
            if split == blank:
                right = consistent = False
            elif split == "test" and contaminated:
                right, consistent = rng.random() < 0.9, rng.random() < 0.3
            else:
                right, consistent = rng.random() < 0.5, rng.random() < 0.8
            records.append(_mcq_record(split, i, right, consistent, rng))
    records.append(
        {**_mcq_record("test", n_per_split, True, True, rng), "excluded": "no reference"}
    )
    path.mkdir(parents=True, exist_ok=True)
    with open(path / "items.jsonl", "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    provenance = {
        "contamscope_version": "0.1.0",
        "git_commit": None,
        "created": "2026-01-01T00:00:00Z",
        "model": {"spec": model, "fingerprint": f"synthetic:{model}"},
        "benchmark": {"source": source, "format": "jsonl", "content_hash": "0", "task": "mcq"},
        "config": {"task": "mcq", "seed": seed},
        "skipped_rows": ["train.jsonl:7: missing field 'output'"],
        "timings": {},
        "versions": {},
    }
    summary = build_cap_summary(
        records, CapConfig(task="mcq", n_boot=500, seed=seed), splits=list(splits),
        provenance=provenance,
    )  # fmt: skip
    (path / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    (path / "settings.json").write_text(json.dumps({"method": "cap", "model": model}))
    return path


@pytest.fixture()
def make_cap_run(tmp_path: Path) -> MakeRun:
    """``make_cap_run(name, n_per_split=40, contaminated=True, **kw)`` -> a CAP run folder."""

    def make(name: str = "cap", n_per_split: int = 40, **kw: Any) -> Path:
        return write_cap_run(tmp_path / name, n_per_split, **kw)

    return make


@pytest.fixture(scope="session")
def tiny_cap_run(tiny_backend: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ``run_cap`` run of the tiny random model on 3 + 3 multiple-choice items (both the
    generate and the loglik readers)."""
    from contamscope.data.cap import load_cap
    from contamscope.pipeline.cap import run_cap
    from contamscope.store import CachedScorer, RunDir, ScoreCache

    root = tmp_path_factory.mktemp("tinycap")
    rows = [
        "What is 1+1 in {s}?,1,2,3,4,B",
        "What is 2+2 in {s}?,4,5,6,7,A",
        "What colour is the sky in {s}?,red,blue,green,black,B",
    ]
    for s in ("train", "test"):
        (root / "data" / s).mkdir(parents=True)
        text = "\n".join(r.format(s=s) for r in rows) + "\n"
        (root / "data" / s / "arith_test.csv").write_text(text, encoding="utf-8")
    data = load_cap(str(root / "data"), ["train", "test"])
    selected = {s: data.splits[s].items for s in ("train", "test")}
    scorer = CachedScorer(tiny_backend, ScoreCache(root / "cache.sqlite"))
    cfg = CapConfig(task="mcq", n_boot=200, max_new_tokens=4)
    run_cap(data, selected, scorer, RunDir(root / "run"), cfg)
    return root / "run"


# --------------------------------------------------------------------------- BenBench runs
BENBENCH_ROWS = [
    {
        "question": "Tom has 3 apples and buys 4 more apples at the shop.",
        "answer": "He has 3 + 4 = 7 apples in total now.\n#### 7",
        "rewritten_question": "At the shop Tom buys 4 apples; he already had 3.",
        "rewritten_answer": "In total 3 + 4 = 7 apples.\n#### 7",
    },
    {
        "question": "A box holds 12 pens and 5 are taken out of it <b>now</b>.",
        "answer": "12 - 5 = 7 pens remain in the box.\n#### 7",
        "rewritten_question": "Five pens leave a box of twelve.",
        "rewritten_answer": "The box keeps 12 - 5 = 8 pens.\n#### 8",
    },  # the paraphrase changes the final answer: reported, not scored
    {
        "question": "Ann reads 10 pages a day for 3 days in a row.",
        "answer": "She reads 10 * 3 = 30 pages.\n#### 30",
        "rewritten_question": "For three days Ann reads ten pages daily.",
        "rewritten_answer": "Ann reads 3 * 10 = 30 pages.\n#### 30",
    },
]


@pytest.fixture(scope="session")
def tiny_benbench_run(tiny_backend: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ``run_benbench`` run of the tiny random model: test (3 items) and train (2 items),
    inline paraphrases as references."""
    from contamscope.data.qa import load_qa
    from contamscope.pipeline.benbench import BenBenchConfig, SplitInput, run_benbench
    from contamscope.pipeline.benbench_refs import inline_reference
    from contamscope.store import CachedScorer, RunDir, ScoreCache

    root = tmp_path_factory.mktemp("tinybb")
    splits = []
    for name, rows in (("test", BENBENCH_ROWS), ("train", BENBENCH_ROWS[:2])):
        path = root / f"toy-{name}.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
        bench = load_qa(str(path))
        ref = inline_reference(bench)
        assert ref is not None
        splits.append(SplitInput(name, bench, bench.items, [ref]))
    scorer = CachedScorer(tiny_backend, ScoreCache(root / "cache.sqlite"))
    run_benbench(splits, scorer, RunDir(root / "run"), BenBenchConfig(n_boot=200))
    return root / "run"


def _bb_version(name: str, q: str, a: str, nll: float, hits: list[bool]) -> dict[str, Any]:
    results = [
        {
            "start": 2 + 6 * j,
            "original": f" true gram {j}",
            "predicted": f" true gram {j}" if h else f" other {j} </script>",
            "exact": h,
            "mismatch_at": None if h else 0,
            "rouge_l": 1.0 if h else 0.2,
            "edit_sim": 1.0 if h else 0.3,
            "generated": not h,
        }
        for j, h in enumerate(hits)
    ]
    acc = sum(hits) / len(hits)
    return {
        "name": name,
        "question": q,
        "answer": a,
        "ppl": {"prefix": q, "continuation": a, "n_tokens": 20, "nll": nll, "ppl": math.exp(nll)},
        "ngram": {
            "text": f"{q} {a}",
            "n_tokens": 40,
            "starts": [x["start"] for x in results],
            "exact": acc,
            "rouge": acc,
            "edit": acc,
            "all_exact": all(hits),
            "all_rouge": all(hits),
            "all_edit": all(hits),
            "results": results,
        },
    }


def write_benbench_run(
    path: Path, n_per_split: int = 30, *, leaked: bool = True, seed: int = 0
) -> Path:
    """A BenBench run folder: records shaped like run_benbench's, the summary from the pipeline's
    own build_summary. ``leaked``: test originals are predicted far better than paraphrases."""
    from types import SimpleNamespace

    from contamscope.pipeline.benbench import (
        BenBenchConfig,
        SplitInput,
        _item_metrics,
        build_summary,
    )

    rng = np.random.default_rng(seed)
    records: list[dict[str, Any]] = []
    splits = []
    for split in ("test", "train"):
        ids = []
        for i in range(n_per_split):
            q, a = f"{split} question {i} <b>bold</b>?", f"The answer is {i}.\n#### {i}"
            p_hit = 0.9 if (leaked and split == "test") else 0.3
            orig_hits = [bool(rng.random() < p_hit) for _ in range(5)]
            para_hits = [bool(rng.random() < 0.3) for _ in range(5)]
            nll_o = 2.0 - (1.0 if leaked and split == "test" else 0.0) + rng.normal(0, 0.3)
            nll_p = 2.0 + rng.normal(0, 0.3)
            rec: dict[str, Any] = {
                "id": f"{split}/item-{i}",
                "item_id": f"item-{i}",
                "split": split,
                "source": f"{split}.jsonl",
                "line": i + 1,
                "subject": None,
                "final_answer": str(i),
                "excluded": None,
                "reference_failures": [],
                "references_unchecked": [],
                "versions": [
                    _bb_version("original", q, a, nll_o, orig_hits),
                    _bb_version("inline", f"Reworded {q}", a, nll_p, para_hits),
                ],
            }
            if i == 0:  # one paraphrase that changed the answer: reported, not scored
                rec["versions"] = rec["versions"][:1]
                rec["reference_failures"] = [
                    {"reference": "inline", "reason": "final answer changed: '0' -> '1'"}
                ]
            _item_metrics(rec)
            records.append(rec)
            ids.append(SimpleNamespace(id=f"item-{i}"))
        loaded = SimpleNamespace(
            items=ids, problems=[], source=f"/data/gsm8k_{split}.jsonl", format="jsonl",
            content_hash="0", files=[f"{split}.jsonl"],
        )  # fmt: skip
        splits.append(SplitInput(split, loaded, ids, []))  # type: ignore[arg-type]
    cfg = BenBenchConfig(n_boot=400, seed=seed)
    scorer = SimpleNamespace(backend=SimpleNamespace(describe=lambda: {"spec": "hf:/m/bb-model"}))
    settings = {"selection": {}, "config": {"n": 5, "k": 5, "lenient": True, "n_boot": 400}}
    summary = build_summary(splits, records, settings, cfg, scorer, None, {})  # type: ignore[arg-type]
    path.mkdir(parents=True, exist_ok=True)
    with open(path / "items.jsonl", "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    (path / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    (path / "settings.json").write_text(json.dumps({"method": "benbench"}), encoding="utf-8")
    return path


@pytest.fixture()
def make_benbench_run(tmp_path: Path) -> MakeRun:
    """``make_benbench_run(name, n_per_split=30, leaked=True)`` -> a BenBench run folder."""

    def make(name: str = "bb", n_per_split: int = 30, **kw: Any) -> Path:
        return write_benbench_run(tmp_path / name, n_per_split, **kw)

    return make


# --------------------------------------------------------------------------- membership runs
# Records as ``contamscope membership`` writes them, with each statistic drawn at random (the
# benchmark's ``shift`` higher: more familiar); the p-values, flags and summary come from the
# pipeline's own analyse and _analysis_part.


def write_membership_run(
    path: Path,
    *,
    shift: float = 0.0,
    n_bench: int = 30,
    n_ref: int = 60,
    statistic: str = "loss",
    fdr: bool = False,
    seed: int = 0,
    model: str = "hf:/models/tiny",
    fingerprint: str | None = "",
) -> Path:
    """``fingerprint``: "" for one made from ``model``, None for none (the model is then
    told by its spec, as the synthetic BenBench runs' is)."""
    from contamscope.detectors.membership import STATISTICS
    from contamscope.pipeline.membership import MembershipConfig, _analysis_part, analyse

    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    for role, n, mu in (("benchmark", n_bench, shift), ("reference", n_ref, 0.0)):
        for i in range(n):
            records.append(
                {
                    "id": f"{role}/item-{i}",
                    "item_id": f"item-{i}",
                    "role": role,
                    "subject": ["anatomy", "law"][i % 2],
                    "n_options": 4,
                    "n_tokens": int(rng.integers(20, 80)),
                    "excluded": None,
                    "statistics": {s: float(rng.normal(mu, 1.0)) for s in STATISTICS},
                }
            )
    config = MembershipConfig(statistic=statistic, fdr=fdr, n_boot=200, seed=seed)
    test = analyse(records, config)
    loaded = {role: {"items_loaded": 100, "rows_skipped": 0} for role in ("benchmark", "reference")}
    summary = {
        "schema": "contamscope.membership.summary/1",
        "method": "membership",
        "model": {"spec": model}
        | ({} if fingerprint is None else {"fingerprint": fingerprint or f"synthetic:{model}"}),
        "benchmark": {"source": "bench_test.csv", "format": "mmlu-csv", "content_hash": "b"},
        "reference": {"source": "fresh.csv", "format": "mmlu-csv", "content_hash": "r"},
        "selection": {},
        **_analysis_part(records, config, test, loaded),
        "skipped_rows": {"benchmark": [], "reference": []},
        "excluded_items": [],
        "timings": {},
        "versions": {},
    }
    settings = {"method": "membership", "model": model, "config": config.scoring_settings()}
    (path / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    (path / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    lines = "".join(json.dumps(r) + "\n" for r in records)
    (path / "items.jsonl").write_text(lines, encoding="utf-8")
    return path


@pytest.fixture()
def make_membership_run(tmp_path: Path) -> MakeRun:
    """``make_membership_run(name, shift=0.0, **kw)`` -> a membership run folder."""

    def make(name: str = "mem", **kw: Any) -> Path:
        return write_membership_run(tmp_path / name, **kw)

    return make
