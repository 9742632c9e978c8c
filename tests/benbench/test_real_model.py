"""BenBench with the bundled SmolLM2 on 2 GSM8K test items and their published paraphrases."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from contamscope.backends.base import GenerateRequest, ScoreRequest
from contamscope.data.qa import load_qa
from contamscope.pipeline.benbench import BenBenchConfig, SplitInput, run_benbench
from contamscope.pipeline.benbench_refs import pair_reference
from contamscope.store import CachedScorer, RunDir

pytestmark = pytest.mark.real_model


def test_gsm8k_two_items_with_paraphrases(tmp_path: Path, benchdata: Path, smollm2_backend) -> None:  # type: ignore[no-untyped-def]
    bench = load_qa(str(benchdata / "gsm8k" / "test.jsonl"))
    refs = [
        pair_reference(
            bench,
            load_qa(str(benchdata / "benbench" / "rewritten" / f"GSM8K_rewritten-test-{i}.jsonl")),
            name=f"rewritten-{i}",
        )
        for i in (1, 2)
    ]
    assert all(r.pairing == "question" for r in refs)
    scorer = CachedScorer(smollm2_backend, None)
    out = run_benbench(
        [SplitInput("test", bench, bench.items[:2], refs)],
        scorer,
        RunDir(tmp_path / "run"),
        BenBenchConfig(n_boot=200),
    )
    st = out.summary["statistics"]["splits"]["test"]
    assert st["n_items"] == 2 and st["n_paired"] == 2
    # a real model: answer perplexity well below the vocabulary size, and finite Deltas
    assert 1.0 < st["original"]["ppl"] < 100 and 1.0 < st["reference"]["ppl"] < 100
    d = st["delta"]["ppl"]
    assert math.isfinite(d["delta"]) and d["ci"] is None and "fewer than 5" in d["ci_note"]
    recs = [r for r in (tmp_path / "run" / "items.jsonl").read_text().splitlines()]
    assert len(recs) == 2
    # teacher-forced exact-match decisions equal real greedy generation from the decoded prefix
    rec = json.loads(recs[0])
    orig = rec["versions"][0]
    assert [v["name"] for v in rec["versions"]] == ["original", "rewritten-1", "rewritten-2"]
    st_ = smollm2_backend.token_stats([ScoreRequest("", orig["ngram"]["text"])])[0]
    prompts = [
        GenerateRequest(smollm2_backend.decode(st_.tokens[:s]), max_new_tokens=5)
        for s in orig["ngram"]["starts"]
    ]
    for res, gen in zip(orig["ngram"]["results"], smollm2_backend.generate(prompts)):
        assert res["exact"] == (gen.text == res["original"])
        assert res["predicted"] is not None
