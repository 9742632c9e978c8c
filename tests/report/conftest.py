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
