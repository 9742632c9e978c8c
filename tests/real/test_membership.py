"""The membership test with the bundled SmolLM2-135M on 4 MMLU anatomy items.

The reference set is the same items with the words of each question shuffled (seeded): text the
model has certainly not seen as such and finds less natural, so every statistic must call the
real items more familiar. This checks the direction of each statistic and the vocabulary
statistics on a real model (not the size of a real-world leak effect).
"""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import pytest

pytestmark = pytest.mark.real_model


def test_smollm2_real_items_more_familiar_than_shuffled(
    benchdata: Path, smollm2_backend, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from contamscope.data import load_benchmark
    from contamscope.pipeline.membership import MembershipConfig, run_membership
    from contamscope.store import CachedScorer, RunDir

    loaded = load_benchmark(str(benchdata / "mmlu" / "test" / "anatomy_test.csv"))
    items = loaded.items[:4]
    rng = random.Random(0)
    shuffled = []
    for it in items:
        for j in range(2):
            words = it.question.split()
            rng.shuffle(words)
            shuffled.append(dataclasses.replace(it, id=f"{it.id}-s{j}", question=" ".join(words)))
    ref = dataclasses.replace(loaded, items=shuffled, source="shuffled", problems=[])
    out = run_membership(
        loaded,
        items,
        ref,
        shuffled,
        CachedScorer(smollm2_backend, None),
        RunDir(tmp_path / "run"),
        MembershipConfig(statistic="loss", alpha=0.2, n_boot=200),
    )
    st = out.summary["statistics"]
    assert st["n_items"] == 4 and st["n_reference"] == 8
    for name in ("loss", "min_k", "min_k_pp", "zlib"):
        d = st["by_statistic"][name]
        assert d["benchmark_n"] == 4 and d["reference_n"] == 8
        # real text more likely than its shuffle. Min-K%++ is left out: it standardises each
        # token by the model's own uncertainty at that position, which a word shuffle raises
        # too, so it need not separate the two (measured AUC: 0.56; loss, Min-K% 0.94; zlib 1.0)
        if name != "min_k_pp":
            assert d["auc"] >= 0.75, (name, d)
    assert st["dataset_test"]["auc"] == st["by_statistic"]["loss"]["auc"]
    # a real model's next-token distributions: finite Min-K%++ of a sensible size
    recs = [r for r in (tmp_path / "run" / "items.jsonl").read_text().splitlines()]
    assert len(recs) == 12
    import json

    for r in map(json.loads, recs):
        mkpp = r["statistics"]["min_k_pp"]
        assert math.isfinite(mkpp) and -20 < mkpp < 5
        if r["role"] == "benchmark":
            assert r["p_value"] >= 1 / 9 and isinstance(r["flag"], bool)
