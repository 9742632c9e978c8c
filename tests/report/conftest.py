"""Synthetic permutation run folders with the pipeline's record layout (no model needed).

Leaked items get their original order lifted above the others by ``lift`` nats, so the statistics
and plots have something to show. ``exact_alg2=True`` runs the real IsolationForest per item
(about 0.1-0.3 s each); otherwise the Algorithm-2 fields are placeholders (flag False, score 0),
which keeps a 14,042-item run quick to make.
"""

from __future__ import annotations

import itertools
import json
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
) -> Path:
    """Write settings.json, items.jsonl and summary.json like ``contamscope permutation`` does."""
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
        leaked = i % leaked_every == 0
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
) -> Path:
    """A finished CAP run folder (mcq, splits train and test)."""
    rng = np.random.default_rng(seed)
    records = []
    for split in ("train", "test"):
        for i in range(n_per_split):
            if split == "test" and contaminated:
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
        "model": {"spec": model, "fingerprint": "synthetic"},
        "benchmark": {"source": source, "format": "jsonl", "content_hash": "0", "task": "mcq"},
        "config": {"task": "mcq", "seed": seed},
        "skipped_rows": ["train.jsonl:7: missing field 'output'"],
        "timings": {},
        "versions": {},
    }
    summary = build_cap_summary(
        records, CapConfig(task="mcq", n_boot=500, seed=seed), splits=["train", "test"],
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
