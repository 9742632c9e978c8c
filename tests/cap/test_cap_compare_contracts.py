"""CAP contracts read from stored records, without a model: which items are read, the ablation
table, the top-line verdict, the kept paraphrases, and `compare` of two synthetic run folders
(counts, the items whose excess grew, the verdict's wording)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contamscope.pipeline import compare_runs
from contamscope.pipeline.cap import CapConfig, build_cap_summary, item_readings, overall_verdict

OPTS = ["10", "20", "30", "40"]
MOD_OPTS = ["20", "40", "10", "30"]  # the answer "20" (B) moves to A

# (prediction, modified prediction) -> performance M and consistency C of the item:
# M: the original answer is "20" (B); C: the same option text chosen on both inputs
EXCESS_1 = ("B", "B")  # M 1, C 0 ("20" then "40"): M - C = 1
EXCESS_0 = ("B", "A")  # M 1, C 1 ("20" both times): 0
EXCESS_M1 = ("A", "C")  # M 0, C 1 ("10" both times): -1
WRONG = ("A", "A")  # M 0, C 0 ("10" then "20"): 0


def _mcq(split: str, i: str, answers: tuple[str, str], text: str = "Q") -> dict[str, Any]:
    return {
        "id": f"{split}/{i}",
        "split": split,
        "item_id": i,
        "input": f"{text}{split}{i}",
        "modified_input": f"{text}{split}{i}'",
        "excluded": None,
        "options": OPTS,
        "answer": 1,
        "modified_options": MOD_OPTS,
        "modified_answer": 0,
        "prediction": answers[0],
        "modified_prediction": answers[1],
        "choice": None,
        "finish_reasons": ["stop", "stop"],
        "modification": {},
    }


def _summary(recs: list[dict[str, Any]], name: str, splits: list[str]) -> dict[str, Any]:
    provenance = {
        "benchmark": {"source": "toy"},
        "model": {"spec": name},
        "config": {"task": "mcq", "seed": 0},
    }
    cfg = CapConfig(task="mcq", n_boot=200)
    return build_cap_summary([dict(r) for r in recs], cfg, splits=splits, provenance=provenance)


def _write(path: Path, recs: list[dict[str, Any]]) -> Path:
    path.mkdir()
    (path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    summary = _summary(recs, path.name, ["dev", "test"])
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def test_item_readings_leave_out_unmodified_items_unless_included() -> None:
    """item_readings: "empty for an item it leaves out (excluded, unmodified unless
    cfg.include_unmodified ...)"; included, the right and consistent answer reads (1, 1)
    (mutation QA)."""
    rec = _mcq("test", "1", ("B", "B"))
    rec["modified_options"], rec["modified_answer"] = list(OPTS), 1
    rec["modified_input"] = rec["input"]
    assert item_readings(dict(rec), CapConfig(task="mcq", include_unmodified=False)) == {}
    read = item_readings(dict(rec), CapConfig(task="mcq", include_unmodified=True))
    assert read == {"generate": (1.0, 1.0)}


def test_ablation_is_pcr_of_the_splits_m_over_c() -> None:
    """pcr: "Performance Consistency Ratio: scale((m + alpha) / (c + alpha))"; the linear
    ablation at alpha 0 of M 3/4 over C 1/4 is 3 (mutation QA)."""
    test = [EXCESS_1, EXCESS_1, EXCESS_0, WRONG]  # M 3/4, C 1/4
    train = [EXCESS_0, EXCESS_0, EXCESS_M1, WRONG]  # M 1/2, C 3/4
    recs = [_mcq("test", str(i), a) for i, a in enumerate(test)]
    recs += [_mcq("train", str(i), a) for i, a in enumerate(train)]
    stats = _summary(recs, "m", ["train", "test"])["statistics"]["generate"]
    assert stats["splits"]["test"]["m"] == 0.75 and stats["splits"]["test"]["c"] == 0.25
    linear = stats["ablation"]["linear/alpha=0"]
    assert linear["test"] == pytest.approx(3.0)
    assert linear["train"] == pytest.approx(0.5 / 0.75)
    assert stats["ablation"]["linear/alpha=0.1"]["test"] == pytest.approx(0.85 / 0.35)


def test_fine_tuned_verdict_names_the_reference_split() -> None:
    """overall_verdict: "contamination of any compared split first, then fine-tuning": a
    fine-tuned reading names the split the model was fine-tuned on, the reference (mutation
    QA)."""
    comp = {
        "reference": "train",
        "other": "test",
        "verdict": "fine-tuned on train",
        "reasoning": "PCR(train) above PCR(test)",
    }
    assert overall_verdict([comp]) == ("likely fine-tuned on train", "PCR(train) above PCR(test)")


def test_a_paraphrase_at_the_threshold_is_kept() -> None:
    """docs/cap.md: "the paraphrase is kept only if its ... cosine to the original is >=
    --paraphrase-threshold (0.98 ...)": similarities 0.98, 0.99 and 0.5 keep 2 (mutation QA)."""
    recs = []
    for s in ("train", "test"):
        for i, sim in enumerate([0.98, 0.99, 0.5]):
            recs.append(
                {
                    "id": f"{s}/{i}",
                    "split": s,
                    "item_id": str(i),
                    "excluded": None if sim >= 0.98 else "paraphrase similarity 0.5 below 0.98",
                    "input": "x",
                    "modified_input": "y",
                    "reference": "r",
                    "prediction": "r",
                    "modified_prediction": "r",
                    "finish_reasons": ["stop", "stop"],
                    "modification": {"similarity": sim},
                }
            )
    cfg = CapConfig(task="summary", n_boot=100)
    summary = build_cap_summary(recs, cfg, splits=["train", "test"], provenance={})
    assert summary["counts"]["test"]["paraphrases"] == {"generated": 3, "kept": 2}


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    """A and B on 4 dev items (alike) and 4 test items; A has 3 items of its own, B 1.

    test items, excess M - C in A -> B: 0: -1 -> 1 (+2), 1: 0 -> 1 (+1), 2: 0 -> 0, 3: 0 -> -1.
    """
    dev = [_mcq("dev", str(i), EXCESS_0 if i % 2 else WRONG) for i in range(4)]
    a_test = [EXCESS_M1, WRONG, EXCESS_0, EXCESS_0]
    b_test = [EXCESS_1, EXCESS_1, EXCESS_0, EXCESS_M1]
    a = dev + [_mcq("test", str(i), x) for i, x in enumerate(a_test)]
    a += [_mcq("dev", f"xa{k}", EXCESS_0, text="X") for k in range(3)]
    b = dev + [_mcq("test", str(i), x) for i, x in enumerate(b_test)]
    b += [_mcq("dev", f"xb{k}", EXCESS_0, text="X") for k in range(1)]
    return _write(tmp_path / "A", a), _write(tmp_path / "B", b)


def test_compare_counts_items_of_one_run_only(runs: tuple[Path, Path]) -> None:
    """docs/output.md: `counts` (`paired`, `only_a`, `only_b`, ...): A's 3 items of its own and
    B's 1 (mutation QA)."""
    counts = compare_runs(*runs)["counts"]
    assert counts["paired"] == 8
    assert (counts["only_a"], counts["only_b"]) == (3, 1)


def test_largest_excess_increase_lists_increases_largest_first(runs: tuple[Path, Path]) -> None:
    """_excess: "An item's performance minus its consistency under one model (what PCR
    rewards)"; `largest_excess_increase` lists the items whose excess grew from A to B, the
    largest increase first: item 0 (-1 -> 1), then item 1 (0 -> 1); item 2 (0 -> 0) did not
    grow (mutation QA)."""
    listed = compare_runs(*runs)["items"]["largest_excess_increase"]
    assert (listed["reader"], listed["split"]) == ("generate", "test")
    assert listed["items"] == [
        {"id": "test/0", "a": -1.0, "b": 1.0},
        {"id": "test/1", "a": 0.0, "b": 1.0},
    ]


def test_verdict_names_no_family_for_a_single_paired_test(runs: tuple[Path, Path]) -> None:
    """lean_verdict: "smallest of m paired tests x m" is the Bonferroni note of several paired
    tests; one test (mcq read by generation only, one tested split) has no family to name
    (mutation QA)."""
    result = compare_runs(*runs)
    assert result["statistics"]["tested"] == ["generate/test"]
    assert "smallest of" not in result["verdict"]["text"]
