"""Documented contracts of the QA loaders (data/qa.py), each checked on a small file written
here against a value worked out by hand (mutation QA)."""

from __future__ import annotations

from pathlib import Path

from toy_rows import write_jsonl

from contamscope.data.qa import final_answer, load_qa

GSM = {"question": "Tom has 3 apples and buys 4 more. How many?", "answer": "3+4=7\n#### 7"}


def test_final_answer_prefers_gsm8ks_marker_over_boxed() -> None:
    """final_answer: "GSM8K's ``#### N``, else MATH's last ``\\boxed{}``": a solution with
    both gives the ``####`` number; the boxed one only without it (mutation QA)."""
    both = "We get \\boxed{5} apples\n#### 6"
    assert final_answer(both) == "6"
    assert final_answer("We get \\boxed{5} apples") == "5"
    assert final_answer("no final answer here") is None


def test_a_gsm8k_row_with_a_boxed_step_keeps_its_marker(tmp_path: Path) -> None:
    """The same through load_qa: the ``gsm8k-jsonl`` answer "ends with ``#### N`` (the final
    answer)", so a boxed 5 earlier in the solution is not the final answer (mutation QA)."""
    f = write_jsonl(
        tmp_path / "both.jsonl",
        [{"question": "How many?", "answer": "We get \\boxed{5} apples\n#### 6"}],
    )
    r = load_qa(str(f))
    assert r.format == "gsm8k-jsonl"
    assert [i.meta["final_answer"] for i in r.items] == ["6"]


def test_math500_keeps_its_own_answer_over_the_boxed_text(tmp_path: Path) -> None:
    """``math500-jsonl``: "``{problem, solution, answer, subject, unique_id}``": the record's
    own answer ("3.0") is the final answer, not the solution's ``\\boxed{3}`` (mutation
    QA)."""
    f = write_jsonl(
        tmp_path / "math500.jsonl",
        [
            {
                "problem": "Compute x.",
                "solution": "So $x=\\boxed{3}$.",
                "answer": "3.0",
                "unique_id": "test/algebra/1.json",
                "subject": "Algebra",
                "level": 1,
            }
        ],
    )
    r = load_qa(str(f))
    assert r.format == "math500-jsonl"
    [item] = r.items
    assert (item.id, item.meta["final_answer"]) == ("test/algebra/1.json", "3.0")


def test_split_is_read_from_a_whole_word_of_the_file_name(tmp_path: Path) -> None:
    """load_qa: ``split`` defaults to "``train`` / ``test`` ... from the file name": a word of
    the name ("gsm_test", "test", "my-train.v2"), not letters inside another word
    ("contest", "latest", "trainee"), which give no split (mutation QA)."""
    expected = {
        "gsm_test.jsonl": "test",
        "test.jsonl": "test",
        "my-train.v2.jsonl": "train",
        "contest.jsonl": None,
        "latest.jsonl": None,
        "trainee.jsonl": None,
    }
    got = {
        name: load_qa(str(write_jsonl(tmp_path / name, [GSM]))).items[0].split for name in expected
    }
    assert got == expected


def test_a_gsm8k_final_answer_is_the_last_markers_line(tmp_path: Path) -> None:
    """An answer with two ``####`` markers read as ``'4\\n#### 5'`` (the first marker's rest,
    whole), and a line after the number went into the final answer, silently (input QA); GSM8K's
    own reading, ``answer.split("####")[-1]``, takes the last marker's."""
    f = write_jsonl(
        tmp_path / "two.jsonl",
        [
            {"question": "Two markers?", "answer": "#### 4\n#### 5"},
            {"question": "A line after?", "answer": "2+3=5\n#### 5\nSo five."},
        ],
    )
    items = load_qa(str(f)).items
    assert [it.meta["final_answer"] for it in items] == ["5", "5"]
