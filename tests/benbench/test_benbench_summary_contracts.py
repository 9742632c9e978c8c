"""Documented contracts of BenBench's per-item metrics and summary numbers
(pipeline/benbench.py), each checked against a value derived here from synthetic records
(docs/output.md, "Output of `contamscope benbench`"; mutation QA)."""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from toy_rows import write_jsonl

from contamscope.data.qa import load_qa
from contamscope.detectors.benbench import NgramResult
from contamscope.pipeline.benbench import (
    BenBenchConfig,
    SplitInput,
    _aggregate,
    _item_metrics,
    _summary,
    run_benbench,
)
from contamscope.store import CachedScorer, RunDir

SHORT = "text shorter than n + 2 = 7 tokens: no n-gram"
"""An excluded item's reason, as the pipeline writes it (docs/output.md)."""

Point = tuple[bool, float | None, float | None]
"""A starting point: (exact, ROUGE-L F, edit similarity); None scores: no predicted text."""


def _ngram(points: list[Point], cfg: BenBenchConfig) -> dict[str, Any]:
    """A version's stored ``ngram`` part, aggregated as the pipeline does under ``cfg``."""
    results = [
        NgramResult(
            start=2 + i,
            original="the cat sat on the",
            predicted=None if rouge is None else "the cat sat on a",
            exact=exact,
            mismatch_at=None if exact else 0,
            rouge_l=rouge,
            edit_sim=edit,
            generated=False,
        )
        for i, (exact, rouge, edit) in enumerate(points)
    ]
    ngram: dict[str, Any] = {"text": "t", "n_tokens": 30, "starts": [r.start for r in results]}
    _aggregate(ngram, results, cfg)
    ngram["results"] = [asdict(r) for r in results]
    return ngram


def _version(
    name: str, nll: float, n_tokens: int, points: list[Point], cfg: BenBenchConfig
) -> dict[str, Any]:
    return {
        "name": name,
        "question": f"question {name} {nll}",
        "answer": "answer",
        "ppl": {"n_tokens": n_tokens, "nll": nll, "ppl": math.exp(nll)},
        "ngram": _ngram(points, cfg),
    }


def _record(
    split: str,
    i: int,
    versions: list[dict[str, Any]],
    *,
    excluded: str | None = None,
    unchecked: tuple[str, ...] = (),
) -> dict[str, Any]:
    if excluded is not None:
        versions = [{"name": "original", "question": "q", "answer": "a", "excluded": excluded}]
    rec: dict[str, Any] = {
        "id": f"{split}/item-{i}",
        "item_id": f"item-{i}",
        "split": split,
        "excluded": excluded,
        "versions": versions,
        "reference_failures": [],
        "references_unchecked": list(unchecked),
    }
    _item_metrics(rec)
    return rec


def _summarise(records: list[dict[str, Any]], cfg: BenBenchConfig) -> dict[str, Any]:
    """The summary of ``records`` as a run (or re-analysis) writes it."""
    splits = list(dict.fromkeys(r["split"] for r in records))
    facts = {
        "benchmark": {
            s: {
                "source": f"{s}.jsonl",
                "format": "qa-jsonl",
                "content_hash": "h",
                "files": 1,
                "references": [],
            }
            for s in splits
        },
        "read": {
            s: {
                "items_loaded": sum(r["split"] == s for r in records),
                "rows_skipped": 0,
                "reference_rows_skipped": 0,
            }
            for s in splits
        },
        "skipped_rows": {s: [] for s in splits},
    }
    settings = {"selection": {}, "config": cfg.settings()}
    return _summary(facts, records, settings, cfg, {"spec": "toy"}, None, {})


CFG = BenBenchConfig(n_boot=200)
HIT: Point = (True, 1.0, 1.0)
"""A starting point predicted exactly (and so by every criterion)."""


def test_item_metrics_are_the_original_against_the_mean_of_its_usable_paraphrases() -> None:
    """docs/output.md, items.jsonl ``metrics``: "``original`` and ``reference`` (mean over the
    usable paraphrases) values of ppl, nll, ngram_exact, ngram_rouge, ngram_edit;
    ``n_references``; ``delta`` = original - reference per metric"; ``flags``: "exact_all,
    rouge_all, edit_all of the original". A paraphrase excluded on its own is not usable
    (mutation QA)."""
    # the original: one point exact, both above ROUGE-L 0.75, neither above edit 0.9
    orig = _version("original", 0.5, 4, [(True, 0.8, 0.5), (False, 0.8, 0.5)], CFG)
    p1 = _version("p1", 1.0, 4, [(False, 0.0, 0.0), (False, 0.0, 0.0)], CFG)
    p2 = _version("p2", 2.0, 4, [HIT, (False, 0.0, 0.95)], CFG)
    gone = {"name": "p3", "question": "q", "answer": "a", "excluded": "no answer tokens"}
    rec = _record("test", 0, [orig, p1, gone, p2])
    m = rec["metrics"]
    assert m["n_references"] == 2
    assert m["original"] == {
        "ppl": pytest.approx(math.exp(0.5)),
        "nll": 0.5,
        "ngram_exact": 0.5,
        "ngram_rouge": 1.0,
        "ngram_edit": 0.0,
    }
    ref = {"ppl": (math.exp(1.0) + math.exp(2.0)) / 2, "nll": 1.5, "ngram_exact": 0.25,
           "ngram_rouge": 0.25, "ngram_edit": 0.5}  # fmt: skip
    assert m["reference"] == pytest.approx(ref)
    assert m["delta"] == pytest.approx({k: m["original"][k] - ref[k] for k in ref})
    assert m["delta"]["ppl"] < 0 < m["delta"]["ngram_rouge"]  # (original - paraphrase)
    assert rec["flags"] == {"exact_all": False, "rouge_all": True, "edit_all": False}


def test_thresholds_are_each_criterions_own_and_inclusive_compares_with_ge() -> None:
    """BenBenchConfig: ``rouge_threshold`` is the ROUGE-L F threshold, ``edit_threshold`` the
    edit-similarity one, ``inclusive`` "thresholds with >= instead of the paper's text's strict
    >" (mutation QA)."""
    loose = BenBenchConfig(rouge_threshold=0.5, edit_threshold=0.9, n_boot=200)
    ng = _ngram([(False, 0.6, 0.6), (False, 0.6, 0.95)], loose)
    assert (ng["rouge"], ng["edit"]) == (1.0, 0.5)
    assert (ng["all_rouge"], ng["all_edit"]) == (True, False)
    at = [(False, 0.5, 0.9)]  # exactly at both thresholds
    strict = _ngram(at, loose)
    assert (strict["rouge"], strict["edit"]) == (0.0, 0.0)
    ge = _ngram(at, BenBenchConfig(rouge_threshold=0.5, edit_threshold=0.9, inclusive=True))
    assert (ge["rouge"], ge["edit"], ge["all_rouge"], ge["all_edit"]) == (1.0, 1.0, True, True)


def _counting_records() -> list[dict[str, Any]]:
    """Items of the test split: two paraphrased, one without a paraphrase, one with a single
    paraphrase used unchecked, one excluded."""
    return [
        _record(  # 2 usable paraphrases, both unchecked
            "test",
            0,
            [
                _version("original", 0.5, 4, [(True, 0.8, 0.95), (False, 0.8, 0.5)], CFG),
                _version("p1", 1.0, 4, [HIT, HIT], CFG),
                _version("p2", 1.2, 4, [(False, 0.8, 0.2), (False, 0.1, 0.95)], CFG),
            ],
            unchecked=("p1", "p2"),
        ),
        _record("test", 1, [_version("original", 2.0, 1, [HIT, HIT], CFG)]),  # no paraphrase
        _record(  # its original has a point without a predicted text: no lenient flags
            "test",
            2,
            [
                _version("original", 1.0, 3, [HIT, (False, None, None)], CFG),
                _version("p1", 1.5, 3, [HIT, HIT], CFG),
            ],
        ),
        _record("test", 3, [], excluded=SHORT),
    ]


def test_split_counts_and_token_weighted_perplexity() -> None:
    """docs/output.md, summary.json: ``counts.{split}`` holds ``items_analysed``, ``excluded``
    (by reason), ``items_without_reference``, ``paraphrases_unchecked`` ("references used
    without a final-answer check", one per paraphrase); ``statistics.splits.{split}`` holds
    ``n_items``, ``n_paired`` and ``ppl_token_weighted``, exp(total NLL / total tokens) over
    the analysed items' originals (docs/benbench.md) (mutation QA)."""
    s = _summarise(_counting_records(), CFG)
    c = s["counts"]["test"]
    assert c["items_selected"] == 4 and c["items_analysed"] == 3
    assert c["excluded"] == {"text shorter than n + 2 = 7 tokens": 1}
    assert c["items_without_reference"] == 1
    assert c["paraphrases_unchecked"] == 2
    st = s["statistics"]["splits"]["test"]
    assert (st["n_items"], st["n_paired"]) == (3, 2)
    total_nll, total_tokens = 0.5 * 4 + 2.0 * 1 + 1.0 * 3, 4 + 1 + 3
    assert st["ppl_token_weighted"] == pytest.approx(math.exp(total_nll / total_tokens))
    assert st["original"]["ppl"] == pytest.approx(
        (math.exp(0.5) + math.exp(2.0) + math.exp(1.0)) / 3
    )
    assert [e["id"] for e in s["excluded_items"]] == ["test/item-3"]


def test_instance_flags_count_the_originals_and_the_paraphrases_apart() -> None:
    """docs/output.md: ``instances.{exact_all,rouge_all,edit_all}`` = ``{count, of, items,
    reference_count, reference_of}``: the analysed items whose original has every n-gram
    predicted by that criterion, of those where the criterion could be read (a lenient one
    needs every point's predicted text), and the same of the paraphrases (mutation QA)."""
    inst = _summarise(_counting_records(), CFG)["statistics"]["splits"]["test"]["instances"]
    # originals: item-0 (exact F, rouge T, edit F), item-1 (all T), item-2 (exact F, lenient None)
    # paraphrases: item-0 p1 (all T), p2 (exact F, rouge F, edit F), item-2 p1 (all T)
    assert inst["exact_all"] == {"count": 1, "of": 3, "items": ["test/item-1"],
                                 "reference_count": 2, "reference_of": 3}  # fmt: skip
    assert inst["rouge_all"] == {"count": 2, "of": 2, "items": ["test/item-0", "test/item-1"],
                                 "reference_count": 2, "reference_of": 3}  # fmt: skip
    assert inst["edit_all"] == {"count": 1, "of": 2, "items": ["test/item-1"],
                                "reference_count": 2, "reference_of": 3}  # fmt: skip
    # a paraphrase passing ROUGE-L but not edit similarity counts for the one criterion only
    recs = _counting_records()
    recs[0]["versions"][2] = _version("p2", 1.2, 4, [(False, 0.8, 0.2)], CFG)
    _item_metrics(recs[0])
    inst = _summarise(recs, CFG)["statistics"]["splits"]["test"]["instances"]
    assert (inst["rouge_all"]["reference_count"], inst["edit_all"]["reference_count"]) == (3, 2)


def _paired_records(split: str, origs: list[float], refs: list[float]) -> list[dict[str, Any]]:
    """One item per value: its original's and its one paraphrase's NLL (n-grams all missed)."""
    miss: list[Point] = [(False, 0.0, 0.0)]
    return [
        _record(
            split,
            i,
            [_version("original", o, 3, miss, CFG), _version("p", r, 3, miss, CFG)],
        )
        for i, (o, r) in enumerate(zip(origs, refs, strict=True))
    ]


def test_paraphrase_test_reads_a_lower_perplexity_on_every_original_as_the_leak_side() -> None:
    """summary ``delta.{metric}.p_value``: "one-sided randomization test of which version is
    the original"; the leak direction is "perplexity/NLL Delta < 0". Six items whose original
    has the lower NLL than its one paraphrase: only the observed labelling of the 2^6 reaches
    the observed statistic, p = 1/64 (mutation QA)."""
    origs = [0.5, 0.9, 1.1, 0.7, 1.4, 0.6]
    refs = [o + d for o, d in zip(origs, [0.3, 0.5, 0.2, 0.9, 0.4, 0.6], strict=True)]
    d = _summarise(_paired_records("test", origs, refs), CFG)["statistics"]["splits"]["test"]
    assert d["delta"]["nll"]["p_value"] == pytest.approx(1 / 64)
    assert d["delta"]["ppl"]["p_value"] == pytest.approx(1 / 64)
    assert d["delta"]["nll"]["test"] == "randomization (exact)"


def test_delta_train_test_is_the_train_gap_minus_the_test_gap() -> None:
    """docs/output.md ``statistics.delta_train_test``: "per metric {n_train, n_test, value,
    ...} = Delta_train - Delta_test" (mutation QA)."""
    train = _paired_records("train", [1.0, 1.2, 0.8, 1.1], [2.0, 2.1, 2.0, 2.2])
    test = _paired_records("test", [1.0, 1.3, 0.9], [1.1, 1.5, 1.0])
    dtt = _summarise(test + train, CFG)["statistics"]["delta_train_test"]["nll"]
    d_train = (1.0 + 1.2 + 0.8 + 1.1 - 2.0 - 2.1 - 2.0 - 2.2) / 4
    d_test = (1.0 + 1.3 + 0.9 - 1.1 - 1.5 - 1.0) / 3
    assert (dtt["n_train"], dtt["n_test"]) == (4, 3)
    assert dtt["value"] == pytest.approx(d_train - d_test)
    assert dtt["value"] < 0  # the train split's originals the more familiar


def test_the_seed_is_the_bootstraps() -> None:
    """BenBenchConfig.seed: "Seed of the bootstrap" (``--seed``: "Seed for --sample and the
    bootstrap"): the same seed gives the same interval, another seed other resamples
    (mutation QA)."""
    origs = [0.5, 0.9, 1.1, 0.7, 1.4, 0.6, 1.0, 0.8]
    refs = [1.0, 1.0, 1.3, 1.5, 1.5, 0.9, 1.9, 1.2]
    recs = _paired_records("test", origs, refs)

    def ci(seed: int) -> list[float]:
        cfg = BenBenchConfig(n_boot=200, seed=seed)
        return _summarise(recs, cfg)["statistics"]["splits"]["test"]["delta"]["nll"]["ci"]

    assert ci(0) == ci(0)
    assert ci(3) != ci(0)


def test_answer_shorter_than_n_means_fewer_tokens_than_n(tmp_path: Path, tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """docs/output.md, items.jsonl: ``answer_shorter_than_n`` is "present (true) when the
    answer has fewer than n tokens": an answer of exactly n tokens is not, one of n - 1 is
    (mutation QA)."""
    rows = [{"question": "Tom has three red apples and two green pears in a basket.",
             "answer": "He has five pieces of fruit"}]  # fmt: skip
    bench = load_qa(str(write_jsonl(tmp_path / "b.jsonl", rows)))
    scorer = CachedScorer(tiny_backend, None)

    def record(n: int, name: str) -> dict[str, Any]:
        cfg = BenBenchConfig(n=n, lenient=False, n_boot=100)
        split = SplitInput("test", bench, bench.items)
        out = run_benbench([split], scorer, RunDir(tmp_path / name), cfg)
        assert out.summary["counts"]["test"]["items_analysed"] == 1
        import json

        line = (tmp_path / name / "items.jsonl").read_text(encoding="utf-8").splitlines()[0]
        rec: dict[str, Any] = json.loads(line)
        return rec

    n_answer = record(1, "one")["versions"][0]["ppl"]["n_tokens"]
    assert n_answer >= 2
    same = record(n_answer, "same")
    assert "answer_shorter_than_n" not in same
    longer = record(n_answer + 1, "longer")
    assert longer.get("answer_shorter_than_n") is True
