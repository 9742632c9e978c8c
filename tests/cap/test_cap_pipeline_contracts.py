"""CAP's analysis of stored records, on records built in code (no model): the log-likelihood
reader's M and C, ``--mcq-metric``, the semantic consistency threshold and the summary's counts;
every expected value is worked out by hand from the records written here."""

from __future__ import annotations

from typing import Any

import pytest

from contamscope.pipeline.cap import CapConfig, build_cap_summary, item_readings

OPTIONS = ["10", "20", "30", "40"]
"""The original options; the answer is B ("20")."""
MODIFIED = ["20", "40", "10", "30"]
"""The same options re-ordered (factual modification): the answer "20" is now A."""


def _mcq(
    split: str,
    i: int,
    prediction: str = "B",
    modified_prediction: str = "A",
    *,
    answer: int | None = 1,
    loglik: tuple[list[float], list[float]] | None = None,
    finish: tuple[str, str] = ("stop", "stop"),
) -> dict[str, Any]:
    """A stored multiple-choice record as the pipeline writes it (choices mapped again on
    analysis): original options :data:`OPTIONS`, modified :data:`MODIFIED`."""
    rec: dict[str, Any] = {
        "id": f"{split}/{i}",
        "split": split,
        "item_id": str(i),
        "input": f"Question: item {i}?\nA. 10\nB. 20\nC. 30\nD. 40\nAnswer:",
        "modified_input": f"Question: item {i}?\nA. 20\nB. 40\nC. 10\nD. 30\nAnswer:",
        "modification": {"kind": "factual", "supplied": False},
        "excluded": None,
        "options": list(OPTIONS),
        "answer": answer,
        "modified_options": list(MODIFIED),
        "modified_answer": None if answer is None else 0,
        "prediction": prediction,
        "modified_prediction": modified_prediction,
        "choice": None,
        "finish_reasons": list(finish),
    }
    if loglik is not None:
        rec["loglik"] = {"original": loglik[0], "modified": loglik[1]}
    return rec


def _summary(records: list[dict[str, Any]], cfg: CapConfig) -> dict[str, Any]:
    return build_cap_summary(records, cfg, splits=["train", "test"], provenance={})


# log-probs of the letters A-D whose highest is the given letter
def _top(letter: str) -> list[float]:
    return [-1.0 if x == letter else -5.0 for x in "ABCD"]


def test_the_loglik_reader_reads_m_on_the_original_input_and_c_from_both_choices() -> None:
    """READERS: "for multiple choice the answer letter of highest log-likelihood"; docs/cap.md:
    "M (performance on the original inputs)", "C (consistency ...): identical chosen option
    text (factual)"; item_readings: "An analysed record's (M, C) per reader" (mutation QA)."""
    cfg = CapConfig(task="mcq", n_boot=100)
    # original B = "20" (right); modified C = "10" (wrong there, and another option's text)
    right_then_moved = _mcq("train", 0, loglik=(_top("B"), _top("C")))
    # original B = "20"; modified A = "20": right on both, the same option text
    right_both = _mcq("train", 1, loglik=(_top("B"), _top("A")))
    # original A = "10" (wrong); modified C = "10": wrong, but the same option text
    wrong_consistent = _mcq("train", 2, loglik=(_top("A"), _top("C")))
    assert item_readings(dict(right_then_moved), cfg)["loglik"] == (1.0, 0.0)
    assert item_readings(dict(right_both), cfg)["loglik"] == (1.0, 1.0)
    assert item_readings(dict(wrong_consistent), cfg)["loglik"] == (0.0, 1.0)

    test = [_mcq("test", i, loglik=(_top("B"), _top("A"))) for i in range(3)]
    s = _summary([right_then_moved, right_both, wrong_consistent, *test], cfg)
    train = s["statistics"]["loglik"]["splits"]["train"]
    # M: original choices B, B, A -> 2 of 3 right; modified choices C, A, C -> 1 of 3 right (A);
    # C: "20"/"10" no, "20"/"20" yes, "10"/"10" yes -> 2 of 3
    assert train["n"] == 3
    assert train["m"] == pytest.approx(2 / 3)
    assert train["m_modified"] == pytest.approx(1 / 3)
    assert train["c"] == pytest.approx(2 / 3)
    assert s["statistics"]["loglik"]["splits"]["test"]["c"] == pytest.approx(1.0)


def test_strict_mcq_metric_counts_only_the_bare_letter_and_mapped_the_mapped_choice() -> None:
    """CapConfig.mcq_metric: "mcq M: mapped = the rule-mapped choice is the answer; strict = the
    output is the letter"; map_choice maps a letter "after ... 'The answer is'" (mutation QA)."""
    preds = ["B", "The answer is B", "The answer is B", "A"]
    recs = [_mcq(s, i, p, "A") for s in ("train", "test") for i, p in enumerate(preds)]
    # mapped: B, B, B right and A wrong -> 3/4; strict: only the bare "B" -> 1/4
    mapped = _summary([dict(r) for r in recs], CapConfig(task="mcq", n_boot=100))
    strict = _summary(
        [dict(r) for r in recs], CapConfig(task="mcq", n_boot=100, mcq_metric="strict")
    )
    for split in ("train", "test"):
        assert mapped["statistics"]["generate"]["splits"][split]["m"] == pytest.approx(0.75)
        assert strict["statistics"]["generate"]["splits"][split]["m"] == pytest.approx(0.25)
    verbose = recs[1]
    # its choices: B = "20" and A = "20": consistent whichever metric
    got_mapped = item_readings(dict(verbose), CapConfig(task="mcq", n_boot=100))
    got_strict = item_readings(dict(verbose), CapConfig(task="mcq", mcq_metric="strict"))
    assert got_mapped["generate"] == (1.0, 1.0)
    assert got_strict["generate"] == (0.0, 1.0)


def _semantic(split: str, i: int, similarity: float) -> dict[str, Any]:
    return {
        "id": f"{split}/{i}",
        "split": split,
        "item_id": str(i),
        "input": f"passage {i}",
        "modified_input": f"paraphrased passage {i}",
        "modification": {"kind": "semantic", "supplied": True},
        "excluded": None,
        "reference": "a summary",
        "m": 0.5,
        "similarity": similarity,
    }


def test_semantic_consistency_needs_a_cosine_above_the_threshold_not_at_it() -> None:
    """CapConfig.similarity_threshold: "Semantic C: two predictions agree when their embedding
    cosine is above this (paper 0.95)"; docs/cap.md: "embedding cosine above
    --similarity-threshold 0.95" (mutation QA)."""
    cfg = CapConfig(task="summary", n_boot=100)
    assert item_readings(_semantic("train", 0, 0.95), cfg) == {"generate": (0.5, 0.0)}
    assert item_readings(_semantic("train", 0, 0.96), cfg) == {"generate": (0.5, 1.0)}
    lower = CapConfig(task="summary", n_boot=100, similarity_threshold=0.9)
    assert item_readings(_semantic("train", 0, 0.95), lower) == {"generate": (0.5, 1.0)}
    recs = [_semantic("train", 0, 0.95), _semantic("train", 1, 0.97)]
    recs += [_semantic("test", 0, 0.95), _semantic("test", 1, 0.95)]
    splits = _summary(recs, cfg)["statistics"]["generate"]["splits"]
    assert splits["train"]["c"] == pytest.approx(0.5)  # 0.97 agrees, 0.95 does not
    assert splits["test"]["c"] == pytest.approx(0.0)


def test_counts_are_per_version_and_the_unmapped_rate_is_of_all_answers_generated() -> None:
    """docs/output.md counts[split]: "no_reference; of the answers generated ... per version
    (original, modified): empty_predictions, truncated_by_version (generation stopped at
    --max-new-tokens) ...; mcq unmapped (per version) and unmapped_rate (of all answers
    generated)" (mutation QA)."""
    train = [
        _mcq("train", 0, "B", "A", finish=("length", "stop")),
        _mcq("train", 1, "B", "A", finish=("length", "stop")),
        _mcq("train", 2, "unsure", "A", finish=("stop", "length")),
        _mcq("train", 3, "B", "", answer=None),
    ]
    test = [_mcq("test", i) for i in range(2)]
    c = _summary(train + test, CapConfig(task="mcq", n_boot=100))["counts"]["train"]
    assert c["items"] == 4 and c["analysed"] == 3 and c["no_reference"] == 1
    assert c["empty_predictions"] == {"original": 0, "modified": 1}
    assert c["truncated_predictions"] == 3
    assert c["truncated_by_version"] == {"original": 2, "modified": 1}
    # "unsure" and the empty answer are unmapped: 2 of the 8 answers generated
    assert c["unmapped"] == {"original": 1, "modified": 1}
    assert c["unmapped_rate"] == pytest.approx(2 / 8)
