"""QA loaders, paraphrase checks and reference pairing (no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toy_rows import write_jsonl

from contamscope.data import FieldMap
from contamscope.data.qa import boxed_answer, gsm8k_final, load_qa
from contamscope.errors import ConfigError, DataError
from contamscope.perturb.paraphrase import Paraphrase, paraphrase_prompt, same_final_answer
from contamscope.pipeline.benbench_refs import inline_reference, pair_reference

GSM = [
    {"question": "Tom has 3 apples and buys 4. How many?", "answer": "3 + 4 = 7\n#### 7"},
    {"question": "A box holds 1,000 pens; 1 is lost.", "answer": "1000 - 1 = 999\n#### 999"},
]


def test_gsm8k_and_bad_rows(tmp_path: Path) -> None:
    rows = [*GSM, {"question": "no answer"}, {"question": "empty", "answer": "  "}, [1]]
    f = write_jsonl(tmp_path / "gsm_test.jsonl", rows)
    r = load_qa(str(f))
    assert r.format == "gsm8k-jsonl" and len(r.items) == 2
    assert r.items[0].id == "gsm_test-0" and r.items[0].split == "test"
    assert r.items[1].meta["final_answer"] == "999"
    reasons = [str(p) for p in r.problems]
    assert reasons == [
        f"{f}:3: missing answer",
        f"{f}:4: empty answer",
        f"{f}:5: expected a JSON object, got list",
    ]
    with pytest.raises(DataError, match=r"gsm_test.jsonl:3: missing answer"):
        load_qa(str(f), strict=True)


def test_an_id_or_subject_0_is_kept(tmp_path: Path) -> None:
    """An id 0 read as no id (``or ""``): the item got a generated id, and pairing
    paraphrases by id missed it (QA)."""
    rows = [{"prompt": f"Q{i}?", "target": str(i), "uid": i, "part": i} for i in range(3)]
    f = write_jsonl(tmp_path / "q.jsonl", rows)
    fm = FieldMap.parse("question=prompt,answer=target,id=uid,subject=part")
    r = load_qa(str(f), format="qa-jsonl", field_map=fm)
    assert [(i.id, i.subject) for i in r.items] == [("0", "0"), ("1", "1"), ("2", "2")]


def test_math_and_math500(tmp_path: Path) -> None:
    m = write_jsonl(
        tmp_path / "math.jsonl",
        [
            {
                "problem": "1+1?",
                "solution": "It is $\\boxed{2}$.",
                "level": "Level 1",
                "type": "Algebra",
            }
        ],
    )
    item = load_qa(str(m)).items[0]
    assert item.subject == "Algebra" and item.meta["final_answer"] == "2"
    m5 = write_jsonl(
        tmp_path / "m500.jsonl",
        [
            {
                "problem": "p",
                "solution": "s \\boxed{\\frac{1}{2}}",
                "answer": "\\frac{1}{2}",
                "subject": "Algebra",
                "level": 2,
                "unique_id": "test/algebra/1.json",
            }
        ],
    )
    r = load_qa(str(m5))
    assert r.format == "math500-jsonl" and r.items[0].id == "test/algebra/1.json"
    assert boxed_answer("x \\boxed{a{b}c} y \\boxed{ 3 }") == "3"
    assert gsm8k_final("#### $1,234") == "$1234"


def test_generic_jsonl_and_csv(tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "my.jsonl", [{"q": "Q1", "a": "A1", "key": "x1"}])
    fm = FieldMap.parse("question=q,answer=a,id=key")
    r = load_qa(str(f), format="qa-jsonl", field_map=fm)
    assert r.items[0].id == "x1" and r.items[0].answer == "A1"
    c = tmp_path / "my.csv"
    c.write_text("question,answer\nWhat?,This.\nEmpty?,\n", encoding="utf-8")
    r = load_qa(str(c))
    assert len(r.items) == 1 and str(r.problems[0]) == f"{c}:3: empty answer"
    with pytest.raises(ConfigError, match="options"):
        load_qa(str(f), field_map=FieldMap.parse("question=q,options=a|b"))
    with pytest.raises(DataError, match="no such file"):
        load_qa(str(tmp_path / "missing.jsonl"))


def test_benbench_rewritten_inline(tmp_path: Path) -> None:
    rows = [
        dict(
            GSM[0],
            rewritten_question="Tom had 3 apples, got 4 more. Total?",
            rewritten_answer="3 + 4 = 7\n#### 7",
        )
    ]
    rows.append(dict(GSM[1], rewritten_question="Pens?", rewritten_answer="it is 998\n#### 998"))
    r = load_qa(str(write_jsonl(tmp_path / "rw-test-1.jsonl", rows)))
    assert r.format == "benbench-jsonl"
    ref = inline_reference(r)
    assert ref is not None
    assert ref.pairs[r.items[0].id].ok
    bad = ref.pairs[r.items[1].id]
    assert not bad.ok and bad.reason == "final answer changed: '999' -> '998'"


def test_pairing_by_question_id_order(tmp_path: Path) -> None:
    bench = load_qa(str(write_jsonl(tmp_path / "b.jsonl", GSM)))
    rw = [
        dict(GSM[1], rewritten_question="P?", rewritten_answer="x\n#### 999"),
        {
            "question": "unrelated",
            "answer": "1\n#### 1",
            "rewritten_question": "u",
            "rewritten_answer": "1\n#### 1",
        },
    ]
    ref = pair_reference(bench, load_qa(str(write_jsonl(tmp_path / "rw.jsonl", rw))), name="rw")
    assert ref.pairing == "question" and list(ref.pairs) == ["b-1"]
    assert ref.unmatched_rows == [f"{tmp_path / 'rw.jsonl'}:2"]
    d = ref.describe(["b-0", "b-1"])
    assert d["items_paired"] == 1 and d["items_unpaired"] == 1
    warning = ref.check_pairs(["b-0", "b-1"], "--reference")
    assert warning is not None and "paraphrases 1 of the 2 selected items" in warning
    assert f"1 of its rows match no benchmark item, first {tmp_path / 'rw.jsonl'}:2" in warning
    assert ref.check_pairs(["b-1"], "--reference") is None
    # its row pairs an item --limit left out: said so, not "is it a version of this benchmark?"
    with pytest.raises(ConfigError, match=r"paraphrases none of the 1 selected items") as err:
        ref.check_pairs(["b-0"], "--reference")
    assert "1 of its rows paraphrases a benchmark item the selection left out" in str(err.value)
    assert "Is it a version" not in str(err.value)
    para = [{"question": "Q0'", "answer": "7\n#### 7"}, {"question": "Q1'", "answer": "#### 999"}]
    ref = pair_reference(bench, load_qa(str(write_jsonl(tmp_path / "p.jsonl", para))), name="p")
    assert ref.pairing == "order" and all(p.ok for p in ref.pairs.values())
    short = load_qa(str(write_jsonl(tmp_path / "s.jsonl", para[:1])))
    with pytest.raises(
        ConfigError, match="^--reference .*cannot pair its 1 usable rows with the 2"
    ):
        pair_reference(bench, short, name="s")
    # the train split's file is named by its own option (it said --reference; QA)
    with pytest.raises(ConfigError, match="^--train-reference .*s.jsonl: cannot pair its 1"):
        pair_reference(bench, short, name="s", option="--train-reference")
    # a malformed row: kept as a skipped row of the reference. The files have as many rows, so
    # row 2 still paraphrases item 2 (the skipped row's item is unpaired, and said); the run
    # was refused after saying the row was skipped (Windows QA)
    (tmp_path / "bad.jsonl").write_text('{"question": oops\n' + json.dumps(para[1]) + "\n")
    bad = load_qa(str(tmp_path / "bad.jsonl"))
    got = pair_reference(bench, bad, name="bad")
    assert list(got.pairs) == ["b-1"] and got.pairs["b-1"].question == "Q1'"
    warning = got.check_pairs(["b-0", "b-1"], "--reference")
    assert warning is not None and "1 of its rows was skipped, first " in warning
    # skipped in both files at other rows: each pairs by its place among the file's rows
    lines = [json.dumps(r) for r in (GSM[0], GSM[1], GSM[1])]
    (tmp_path / "both.jsonl").write_text("\n".join([lines[0], "{oops", lines[2]]) + "\n")
    lines = [json.dumps(r) for r in (para[0], para[0], dict(para[1], question="Q2'"))]
    (tmp_path / "three.jsonl").write_text("\n".join(["{oops", lines[1], lines[2]]) + "\n")
    got = pair_reference(
        load_qa(str(tmp_path / "both.jsonl")), load_qa(str(tmp_path / "three.jsonl")), name="3"
    )
    assert {k: p.question for k, p in got.pairs.items()} == {"both-2": "Q2'"}
    # as many usable rows, but one more row in all: by position it would shift every later
    # row, so order pairing refuses and names the skipped row
    (tmp_path / "bad.jsonl").write_text(
        '{"question": oops\n' + json.dumps(para[0]) + "\n" + json.dumps(para[1]) + "\n"
    )
    bad = load_qa(str(tmp_path / "bad.jsonl"))
    with pytest.raises(ConfigError, match=r"a skipped row shifts the rest: .*bad.jsonl:1: invalid"):
        pair_reference(bench, bad, name="bad")
    # without id fields the ids are "b-0", "bad-1" (file name, row): --pairing id is refused
    with pytest.raises(ConfigError, match=r"--pairing id: .*bad.jsonl has no id field"):
        pair_reference(bench, bad, name="bad", pairing="id")
    with pytest.raises(ConfigError, match="--pairing 'bogus': expected one of auto, question"):
        pair_reference(bench, short, name="s", pairing="bogus")


def test_a_reference_whose_rows_pair_with_other_items_is_said(tmp_path: Path) -> None:
    """Paraphrases in another order than the benchmark's, paired by position: every one failed
    as "final answer changed" and the run ended without a word on the pairing (QA)."""
    from contamscope.errors import ContamscopeWarning

    rows = [{"question": f"Q{i}?", "answer": f"#### {i}"} for i in range(6)]
    bench = load_qa(str(write_jsonl(tmp_path / "b.jsonl", rows)))
    para = [{"question": f"{r['question']}'", "answer": r["answer"]} for r in rows]
    shifted = load_qa(str(write_jsonl(tmp_path / "p.jsonl", para[1:] + para[:1])))
    with pytest.warns(ContamscopeWarning, match=r"p.jsonl: 6 of the 6 rows paired by order chan"):
        ref = pair_reference(bench, shifted, name="p")
    assert not any(p.ok for p in ref.pairs.values())
    # in the right order, or with one paraphrase of six changing its answer: no word
    import warnings

    para[2]["answer"] = "#### 99"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ContamscopeWarning)
        ref = pair_reference(bench, load_qa(str(write_jsonl(tmp_path / "q.jsonl", para))), name="q")
    assert sum(p.ok for p in ref.pairs.values()) == 5


def test_paraphrase_prompt_and_check() -> None:
    prompt = paraphrase_prompt(GSM[0]["question"], GSM[0]["answer"])
    assert "'#### 7'" in prompt and GSM[0]["question"] in prompt
    assert same_final_answer("a\n#### 7", "b\n#### 7.0") == (True, "")
    assert same_final_answer("a\n#### 7", "no marker")[0] is False
    ok, why = same_final_answer("free text", "other text")
    assert ok and why.startswith("unchecked")
    p = Paraphrase.from_reply("Sure! Question: New Q\nAnswer: 3+4=7\n#### 7", "x\n#### 7")
    assert p.ok and p.question == "New Q"
    assert not Paraphrase.from_reply("I cannot do that.", "x\n#### 7").ok
    assert not Paraphrase.from_reply("Question: Q\nAnswer: 8\n#### 8", "x\n#### 7").ok


def test_qa_csv_row_with_another_number_of_cells_is_skipped(tmp_path: Path) -> None:
    """Such a row was mapped with its cells shifted (an id 'here', answer 'cells')."""
    path = tmp_path / "qa.csv"
    path.write_text(
        'question,answer\nWhat is 2+2?,4\n"Broken, row",cells,here,extra\nWhat is 3+3?,6\n',
        encoding="utf-8",
    )
    got = load_qa(str(path))
    assert [i.answer for i in got.items] == ["4", "6"]
    assert [str(p) for p in got.problems] == [f"{path}:3: 4 cells, the header has 2"]


def test_qa_csv_unclosed_quote_keeps_the_rows_after_it(tmp_path: Path) -> None:
    path = tmp_path / "qa.csv"
    path.write_text(
        'question,answer\n"What is 2+2?,4\nWhat is 3+3?,6\n"What is 4+4?",8\n', encoding="utf-8"
    )
    got = load_qa(str(path))
    assert [i.answer for i in got.items] == ["6", "8"]
    assert [p.line for p in got.problems] == [2]
    assert "runs on to line 4" in got.problems[0].reason


def test_files_of_the_same_name_are_not_paired_by_their_made_up_ids(tmp_path: Path) -> None:
    """orig/test.jsonl and para/test.jsonl both got ids test-0, test-1, ...: auto pairing took
    them for real ids and paired by position without the position checks, so a reference
    missing its row 2 paired every later item with the wrong paraphrase, exit 0."""
    rows = [{"question": f"Q{i}?", "answer": f"{i}\n#### {i}"} for i in range(4)]
    para = [{"question": f"Q{i} reworded?", "answer": f"{i}\n#### {i}"} for i in (0, 2, 3)]
    (tmp_path / "orig").mkdir()
    (tmp_path / "para").mkdir()
    bench = load_qa(str(write_jsonl(tmp_path / "orig" / "test.jsonl", rows)))
    ref = load_qa(str(write_jsonl(tmp_path / "para" / "test.jsonl", para)))
    assert {i.id for i in bench.items} & {r.id for r in ref.items}  # the made-up ids overlap
    with pytest.raises(ConfigError, match="cannot pair its 3 usable rows with the 4"):
        pair_reference(bench, ref, name="para")
    # with real ids on both sides, pairing by id is what the user meant
    with_ids = [dict(r, qid=f"k{i}") for i, r in enumerate(rows)]
    para_ids = [dict(p, qid=f"k{i}") for i, p in zip((0, 2, 3), para, strict=True)]
    fm = FieldMap.parse("question=question,answer=answer,id=qid")
    bench = load_qa(str(write_jsonl(tmp_path / "orig" / "ids.jsonl", with_ids)), field_map=fm)
    ref = load_qa(str(write_jsonl(tmp_path / "para" / "ids.jsonl", para_ids)), field_map=fm)
    paired = pair_reference(bench, ref, name="para")
    assert paired.pairing == "id" and sorted(paired.pairs) == ["k0", "k2", "k3"]
    assert paired.pairs["k2"].question == "Q2 reworded?"


def test_a_second_paraphrase_of_one_question_is_named(tmp_path: Path) -> None:
    """The reference's second row for the same question was dropped without a word."""
    bench = load_qa(str(write_jsonl(tmp_path / "b.jsonl", GSM)))
    rw = [
        dict(GSM[1], rewritten_question="P?", rewritten_answer="x\n#### 999"),
        dict(GSM[1], rewritten_question="P again?", rewritten_answer="y\n#### 999"),
    ]
    ref = pair_reference(bench, load_qa(str(write_jsonl(tmp_path / "rw.jsonl", rw))), name="rw")
    assert ref.pairs["b-1"].question == "P?"
    where = tmp_path / "rw.jsonl"
    assert ref.skipped_rows == [
        f"{where}:2: a second paraphrase of the question paired at {where}:1 (that one is used)"
    ]
    assert ref.describe(["b-1"])["rows_skipped"] == 1


def test_a_named_field_no_record_has_is_refused(tmp_path: Path) -> None:
    """--fields id=qidd (a typo) was ignored: the items got made-up ids without a word."""
    rows = [{"q": "Q?", "a": "1\n#### 1", "qid": "k1"}]
    path = write_jsonl(tmp_path / "mine.jsonl", rows)
    with pytest.raises(ConfigError, match=r"--fields id=qidd: no record of .*mine.jsonl has"):
        load_qa(str(path), field_map=FieldMap.parse("question=q,answer=a,id=qidd"))
    ok = load_qa(str(path), field_map=FieldMap.parse("question=q,answer=a,id=qid"))
    assert [it.id for it in ok.items] == ["k1"]


def test_multiple_choice_files_are_not_read_as_question_answer_pairs(tmp_path: Path) -> None:
    """An MMLU CSV was read as question/answer pairs (its answer an option's index, its options
    dropped) by benbench and validate --method benbench, which reported meaningless numbers
    (QA). Option fields in the first record are refused, unless --fields says what to read."""
    csv = tmp_path / "anatomy_test.csv"
    csv.write_text(
        "question,choice0,choice1,choice2,choice3,answer\nWhich bone?,a,b,c,d,1\n",
        encoding="utf-8",
    )
    listed = tmp_path / "mc.jsonl"
    write_jsonl(listed, [{"question": "Which bone?", "choices": ["a", "b"], "answer": 0}])
    lettered = tmp_path / "abcd.jsonl"
    write_jsonl(
        lettered, [{"question": "Q?", "A": "a", "B": "b", "C": "c", "D": "d", "answer": "A"}]
    )
    for path, named in (
        (csv, "choice0, choice1, choice2, choice3"),
        (listed, "choices"),
        (lettered, "A, B, C, D"),
    ):
        with pytest.raises(DataError, match=f"multiple-choice items \\(option fields {named}\\)"):
            load_qa(str(path))
    # an explicit field map reads what it names
    items = load_qa(str(csv), field_map=FieldMap.parse("question=question,answer=choice1")).items
    assert [(it.question, it.answer) for it in items] == [("Which bone?", "b")]


def test_ids_that_share_none_are_not_paired_by_position(tmp_path: Path) -> None:
    """Both files with ids of their own ("003" against 3, as a spreadsheet writes them) and
    none alike were paired by position, silently: every paraphrase with another item (QA)."""
    fm = FieldMap.parse("question=question,answer=answer,id=id")
    rows = [{"id": i, "question": f"Q{i}?", "answer": str(i)} for i in range(3)]
    bench = load_qa(str(write_jsonl(tmp_path / "b.jsonl", rows)), format="qa-jsonl", field_map=fm)
    para = [{"id": f"{i:03d}", "question": f"P{i}?", "answer": str(i)} for i in (2, 0, 1)]
    ref = load_qa(str(write_jsonl(tmp_path / "r.jsonl", para)), format="qa-jsonl", field_map=fm)
    with pytest.raises(ConfigError, match=r"^--reference .*r.jsonl: its ids and .*b.jsonl's "
                       r"share none \(e.g. '000' and '0'\).*--pairing order"):  # fmt: skip
        pair_reference(bench, ref, name="r")
    assert pair_reference(bench, ref, name="r", pairing="order").pairing == "order"


def test_gsm8k_final_reads_in_linear_time() -> None:
    """A lazy `.+?` before `\\s*$`: an answer with 40,000 trailing spaces took 8 s to read
    (security QA). The final answer reads as before."""
    from contamscope.data.qa import gsm8k_final

    assert gsm8k_final("1+1=2\n#### 2" + " " * 400_000 + "y") == "2" + " " * 400_000 + "y"
    assert gsm8k_final("so\n####  1,234 \n") == "1234"
    assert gsm8k_final("no final answer") is None


def test_pairing_advice_names_an_id_field_the_format_does_not_read(tmp_path: Path) -> None:
    """Both files had an "id" key the GSM8K layout does not read; the refusal told the user
    to give both files an id field (QA). It now names the field and the option that reads it."""
    rows = [{"id": f"k{i}", "question": f"Q{i}?", "answer": f"{i}\n#### {i}"} for i in range(3)]
    para = [dict(r, question=f"Q{i} reworded?") for i, r in enumerate(rows)]
    bench = load_qa(str(write_jsonl(tmp_path / "orig.jsonl", rows)))
    ref = load_qa(str(write_jsonl(tmp_path / "para.jsonl", para[:2])))
    with pytest.raises(ConfigError, match="cannot pair its 2 usable rows with the 3") as err:
        pair_reference(bench, ref, name="para")
    said = str(err.value)
    assert (
        "both files have an 'id' field, which the gsm8k-jsonl layout does not read: give " in said
    )
    assert "--fields id=id" in said and "give both files an id field" not in said
    with pytest.raises(ConfigError, match="--pairing id: .* has no id field") as err:
        pair_reference(bench, ref, name="para", pairing="id")
    assert "give --fields id=id or use --pairing order" in str(err.value)
    # only one of them with such a field: give both one
    plain = load_qa(str(write_jsonl(tmp_path / "plain.jsonl", [
        {"question": p["question"], "answer": p["answer"]} for p in para[:2]])))  # fmt: skip
    with pytest.raises(ConfigError, match=r"give both files an id field \(--fields id=\.\.\.\)"):
        pair_reference(bench, plain, name="plain")
    # read with the field: paired by id
    fm = FieldMap.parse("question=question,answer=answer,id=id")
    paired = pair_reference(
        load_qa(str(tmp_path / "orig.jsonl"), field_map=fm),
        load_qa(str(tmp_path / "para.jsonl"), field_map=fm),
        name="para",
    )
    assert paired.pairing == "id" and sorted(paired.pairs) == ["k0", "k1"]
