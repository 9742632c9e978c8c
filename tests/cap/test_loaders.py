"""CAP loaders: FinEval ori/mod pairs, generic files with a split field, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contamscope.data.cap import CapFields, load_cap, parse_fineval
from contamscope.data.items import MCQItem, QAItem
from contamscope.data.overlap import split_overlap
from contamscope.errors import ConfigError, DataError


def test_fineval_pairs(fineval_dir: Path) -> None:
    data = load_cap(str(fineval_dir), ["dev", "val"])
    assert data.task == "mcq" and data.task_detected and data.format == "cap-pairs+fineval"
    dev = data.splits["dev"]
    assert [it.answer for it in dev.items] == [1, 0, 2]
    it = dev.items[0]
    assert isinstance(it, MCQItem) and it.options == ("1", "2", "3", "4")
    assert it.question == "dev 1+1=____。" and it.line == 1
    mod = dev.modified[it.id]  # type: ignore[index]
    assert mod.options == ("4", "3", "2", "1") and mod.options[mod.answer] == "2"
    assert mod.meta["input"].endswith("答案：")


def test_split_without_answers_or_mod(fineval_dir: Path) -> None:
    data = load_cap(str(fineval_dir / "data"), ["dev", "test"])
    test = data.splits["test"]
    assert test.modified is None and all(it.answer is None for it in test.items)


def test_missing_split_names_what_exists(fineval_dir: Path) -> None:
    with pytest.raises(ConfigError, match=r"split 'train'.*splits there: dev, test, val"):
        load_cap(str(fineval_dir), ["train", "test"])
    with pytest.raises(ConfigError, match="two or more"):
        load_cap(str(fineval_dir), ["dev", "dev"])


def test_malformed_rows_are_counted_and_strict_fails(fineval_dir: Path) -> None:
    path = fineval_dir / "data" / "ori_val.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    rows[1]["input"] = "not a FinEval prompt"
    rows[2]["output"] = "Z"
    path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    data = load_cap(str(fineval_dir), ["dev", "val"])
    reasons = [str(p) for p in data.problems]
    assert len(data.splits["val"].items) == 1
    # a list on one line: each named by that line and its number in the list
    assert any("ori_val.json:1: record 2 of the list: input is not a FinEval" in r for r in reasons)
    assert any("ori_val.json:1: record 3 of the list: answer 'Z'" in r for r in reasons)
    with pytest.raises(DataError, match="ori_val.json:1: record 2 of the list"):
        load_cap(str(fineval_dir), ["dev", "val"], strict=True)


@pytest.mark.parametrize(
    ("value", "reason"), [(None, "missing input"), (7, "input is not text (int)")]
)
def test_a_first_record_without_text_input_is_a_row_problem(
    fineval_dir: Path, value: object, reason: str
) -> None:
    """The task detection read the first record's input: null or a number was a TypeError."""
    path = fineval_dir / "data" / "ori_dev.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    rows[0]["input"] = value
    path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    data = load_cap(str(fineval_dir), ["dev", "val"])
    assert data.task == "mcq"  # detected from the next record
    assert any(
        str(p).endswith(f"ori_dev.json:1: record 1 of the list: {reason}") for p in data.problems
    ), [str(p) for p in data.problems]
    assert len(data.splits["dev"].items) == len(rows) - 1


def test_mod_file_must_pair(fineval_dir: Path) -> None:
    path = fineval_dir / "data" / "mod_dev.json"
    path.write_text(json.dumps(json.loads(path.read_text(encoding="utf-8"))[:2]), encoding="utf-8")
    with pytest.raises(DataError, match="2 records but ori_dev.json has 3"):
        load_cap(str(fineval_dir), ["dev", "val"])


def test_not_json(tmp_path: Path) -> None:
    d = tmp_path / "x"
    d.mkdir()
    (d / "ori_train.json").write_text("{oops", encoding="utf-8")
    (d / "ori_test.json").write_text("[]", encoding="utf-8")
    with pytest.raises(DataError, match="ori_train.json: not JSON"):
        load_cap(str(d), ["train", "test"])
    # an empty file and an empty list, each said as such (they read the other way round; QA)
    (d / "ori_train.json").write_text("", encoding="utf-8")
    with pytest.raises(DataError, match=r"ori_train.json: no records \(empty file\)"):
        load_cap(str(d), ["train", "test"])
    (d / "ori_train.json").write_text('[{"input": "a", "output": "b"}]', encoding="utf-8")
    with pytest.raises(DataError, match=r"ori_test.json: no records \(an empty JSON list\)"):
        load_cap(str(d), ["train", "test"])
    # JSON Lines in a CAP file: "use --format jsonl" led to a refusal of --format (QA)
    (d / "ori_train.json").write_text('{"input": "a"}\n{"input": "b"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"Extra data .*\); CAP's .json files hold one JSON list"):
        load_cap(str(d), ["train", "test"])


def test_generic_jsonl_with_split_field(qa_file: Path) -> None:
    fields = CapFields.parse("input=question,output=answer,split=part")
    data = load_cap(str(qa_file), ["train", "test"], fields=fields)
    assert data.task == "qa" and data.format == "generic"
    assert [len(data.splits[s].items) for s in ("train", "test")] == [3, 2]
    it = data.splits["test"].items[0]
    assert isinstance(it, QAItem) and it.split == "test" and it.line == 4
    with pytest.raises(ConfigError, match="split 'val': no items"):
        load_cap(str(qa_file), ["train", "val"], fields=fields)
    with pytest.raises(ConfigError, match="--fields 'nope=x'"):
        CapFields.parse("nope=x")


def test_one_file_with_every_split_reports_each_bad_row_once(qa_file: Path) -> None:
    lines = qa_file.read_text(encoding="utf-8").splitlines()
    lines[1:1] = [
        "{not json",
        json.dumps({"question": "No split here?", "answer": "1"}),
        # a null split became the split "None": the row vanished without a word
        json.dumps({"question": "Null split?", "answer": "1", "part": None}),
    ]
    qa_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fields = CapFields.parse("input=question,output=answer,split=part")
    data = load_cap(str(qa_file), ["train", "test"], fields=fields)
    assert [p.line for p in data.problems] == [2, 3, 4]  # once each, not once per split
    assert data.problems[1].reason == "missing split field 'part'"
    assert data.problems[2].reason == "missing split field 'part'"
    assert [len(data.splits[s].items) for s in ("train", "test")] == [3, 2]


def test_generic_folder_one_file_per_split(tmp_path: Path) -> None:
    for s in ("train", "test"):
        (tmp_path / f"{s}.csv").write_text(f"input,output\nQ {s} 2019?,A\nQ2,\n", encoding="utf-8")
    data = load_cap(str(tmp_path), ["train", "test"], task="qa")
    assert [it.answer for it in data.splits["train"].items] == ["A", None]
    (tmp_path / "test.jsonl").write_text('{"input": "Q", "output": "A"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"split 'test': test.jsonl and test.csv in .*keep one"):
        load_cap(str(tmp_path), ["train", "test"], task="qa")  # the CSV was ignored


def test_csv_unclosed_quote_keeps_the_rows_after_it(tmp_path: Path) -> None:
    for s in ("train", "test"):
        (tmp_path / f"{s}.csv").write_text(
            f'input,output\n"Q1 {s},A\nQ2 {s},B\n"Q3 {s}",C\n', encoding="utf-8"
        )
    data = load_cap(str(tmp_path), ["train", "test"], task="qa")
    assert [it.answer for it in data.splits["train"].items] == ["B", "C"]
    assert [(p.line, "runs on to line 4" in p.reason) for p in data.problems] == [(2, True)] * 2


def test_parse_fineval_rejects_other_text() -> None:
    with pytest.raises(ValueError):
        parse_fineval("hello")


def test_parse_fineval_reads_as_the_readme_expression_without_backtracking() -> None:
    """FinEval's README expression (five DOTALL ``.*`` groups) took 13 s on a 1,351-character
    row of repeated option lists (security QA). The parser finds the same groups from the
    right: equal to the expression on generated prompts, linear on the hostile row."""
    import random
    import re

    readme = re.compile(
        r"^请回答选择题，从选项A，B，C，D中选择，回答问题。\n问题: (?P<q>.*)\n ?选项：\['A': ?(?P<A>.*), "
        r"'B': ?(?P<B>.*), 'C': ?(?P<C>.*), 'D': ?(?P<D>.*)\]\n ?答案： ?$",
        re.DOTALL,
    )
    head = "请回答选择题，从选项A，B，C，D中选择，回答问题。\n问题: "
    pieces = ["x", " ", "\n", "\n选项：['A':", "\n 选项：['A':", ", 'B':", ", 'C':", ", 'D':",
              "]\n答案：", "]\n 答案： ", "]", "'", ":", "\n "]  # fmt: skip
    lists = ["", "\n选项：['A': a, 'B': b, 'C':c, 'D': d", "\n 选项：['A':a, 'B':b, 'C':c, 'D':d"]
    ends = ["]\n答案：", "]\n 答案： ", "]\n答案： \n", "]\n答案：\n\n", ""]
    rng = random.Random(0)
    read = 0
    for _ in range(20_000):
        text = (head if rng.random() < 0.9 else "x") + "".join(
            rng.choice(pieces) for _ in range(rng.randint(0, 8))
        )
        text += rng.choice(lists) + rng.choice(pieces[:4]) * rng.randint(0, 1) + rng.choice(ends)
        m = readme.match(text)
        want = m and (m["q"], (m["A"], m["B"], m["C"], m["D"]))
        try:
            got = parse_fineval(text)
        except ValueError:
            got = None
        assert got == want, repr(text)
        read += got is not None
    assert read > 2_000
    hostile = head + "\n选项：['A': , 'B': , 'C': , 'D': ]\n" * 5_000  # (hours for the expression)
    assert parse_fineval(hostile + "]\n答案：")[1] == ("", "", "", "]\n")
    with pytest.raises(ValueError):  # (no answer cue: the expression tried every split)
        parse_fineval(hostile)


def test_real_cap_folders(benchdata: Path) -> None:
    cap = benchdata / "cap"
    fe = load_cap(str(cap / "fineval"), ["dev", "val"])
    assert (len(fe.splits["dev"].items), len(fe.splits["val"].items)) == (170, 1151)
    assert not fe.problems and len(fe.splits["val"].modified or {}) == 1151
    # the mod files hold the same options re-ordered, answer re-mapped
    for it in fe.splits["dev"].items[:20]:
        mod = fe.splits["dev"].modified[it.id]  # type: ignore[index]
        assert sorted(o.strip() for o in mod.options) == sorted(o.strip() for o in it.options)
        assert mod.options[mod.answer].strip() == it.options[it.answer].strip()
    # FinEval's dev and val share 8 questions, and each repeats some of its own
    ov = split_overlap({s: fe.splits[s].items for s in ("dev", "val")})
    assert ov.shared_with == {"dev": {"val": 8}, "val": {"dev": 8}}
    assert ov.duplicates == {"dev": 2, "val": 12}
    fq = load_cap(str(cap / "finqa"), ["train", "test"], subset="samples")
    assert fq.task == "qa" and len(fq.splits["train"].items) == 100
    ec = load_cap(str(cap / "ectsum"), ["train", "test"])
    assert ec.task == "summary"
    with pytest.raises(ConfigError, match="--subset"):
        load_cap(str(cap / "alphafin"), ["train", "eval"])


def test_options_this_kind_of_data_never_reads_are_refused(
    fineval_dir: Path, qa_file: Path
) -> None:
    fields = CapFields.parse("input=question,output=answer,split=part")
    with pytest.raises(ConfigError, match=r"--format is read only for a folder of multiple-choice"):
        load_cap(str(qa_file), ["train", "test"], fields=fields, mcq_format="mmlu-csv")
    with pytest.raises(ConfigError, match=r"--subset is read only for a CAP folder.*one file"):
        load_cap(str(qa_file), ["train", "test"], fields=fields, subset="samples")
    with pytest.raises(ConfigError, match=r"--format .* is a CAP folder of ori/mod files"):
        load_cap(str(fineval_dir), ["dev", "val"], mcq_format="bogus")


def test_split_overlap_matches_multiple_choice_items_in_any_option_order() -> None:
    a = MCQItem("a", "Which is a fruit?", ("apple", "stone", "car", "sky"))
    b = MCQItem("b", "which is  a fruit?", ("car", "Apple", "sky", "stone"))
    c = MCQItem("c", "Which is a fruit?", ("apple", "stone", "car", "sea"))  # another option
    ov = split_overlap({"train": [a], "test": [b, c]})
    assert ov.shared == {"train": ["a"], "test": ["b"]}
    assert ov.shared_with == {"train": {"test": 1}, "test": {"train": 1}}
    assert ov.duplicates == {"train": 0, "test": 0}
    none = split_overlap({"train": [a], "test": [c]})
    assert none.shared == {"train": [], "test": []} and none.shared_with == {
        "train": {},
        "test": {},
    }


QA_TEXTS = [
    "Revenue rose from 120 in 2018 to 150 in 2019. By how much did revenue grow?",
    "The company paid dividends of 3.5 per share in 2020. What was the total payout?",
    "Operating margin fell to 12% in 2021 as costs climbed. What drove the decline?",
    "Debt was refinanced at 4% in 2017, saving interest. How much interest was saved?",
    "Inventory turnover improved in 2016 after a warehouse closed. Why did it improve?",
]


def _qa_pairs(folder: Path, mods: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    ori = [{"input": t, "output": "10"} for t in QA_TEXTS]
    (folder / "ori_train.json").write_text(json.dumps(ori), encoding="utf-8")
    (folder / "ori_test.json").write_text(json.dumps(ori), encoding="utf-8")
    for split in ("train", "test"):
        rows = [{"input": t, "output": "10"} for t in mods]
        (folder / f"mod_{split}.json").write_text(json.dumps(rows), encoding="utf-8")


def test_mod_records_that_are_not_their_originals_modifications(tmp_path: Path) -> None:
    """mod files pair with ori files by position: a mod file in another order paired every
    item with another item's text, silently."""
    shifted = [t.replace("20", "21", 1) for t in QA_TEXTS]  # a year shift of each input
    _qa_pairs(tmp_path / "ok", shifted)
    data = load_cap(str(tmp_path / "ok"), ["train", "test"])
    assert not data.problems and len(data.splits["train"].modified or {}) == 5
    # two records swapped: those two items use a generated modification, named
    _qa_pairs(tmp_path / "swap", shifted[:3] + shifted[4:] + shifted[3:4])
    data = load_cap(str(tmp_path / "swap"), ["train", "test"])
    reasons = [str(p) for p in data.problems if "mod_train" in p.source]
    assert reasons == [
        f"{tmp_path / 'swap' / 'mod_train.json'}:1: record 4 of the list: modified record is "
        "more like original record 5 than its own (paired by position); item uses a generated "
        "modification",
        f"{tmp_path / 'swap' / 'mod_train.json'}:1: record 5 of the list: modified record is "
        "more like original record 4 than its own (paired by position); item uses a generated "
        "modification",
    ]
    assert sorted(data.splits["train"].modified or {}) == [
        "ori_train-1",
        "ori_train-2",
        "ori_train-3",
    ]
    # a mod file in another order altogether is an error naming the first misplaced record
    _qa_pairs(tmp_path / "rev", shifted[::-1])
    with pytest.raises(DataError, match=r"do not pair with ori_train.json by position \(4 of 5"):
        load_cap(str(tmp_path / "rev"), ["train", "test"])


def test_an_unusable_mod_record_is_one_problem(tmp_path: Path) -> None:
    """It was named twice: once when read, once when its item took a generated modification."""
    shifted = [t.replace("20", "21", 1) for t in QA_TEXTS]
    _qa_pairs(tmp_path, shifted)
    rows = json.loads((tmp_path / "mod_train.json").read_text(encoding="utf-8"))
    rows[1] = {"output": "10"}  # no input
    (tmp_path / "mod_train.json").write_text(json.dumps(rows), encoding="utf-8")
    data = load_cap(str(tmp_path), ["train", "test"])
    assert [
        (p.line, p.reason.endswith("item uses a generated modification")) for p in data.problems
    ] == [(1, True)]  # the list's one line
    assert data.problems[0].reason.startswith("record 2 of the list: ")
    assert "input" in data.problems[0].reason
    assert sorted(data.splits["train"].modified or {}) == [f"ori_train-{k}" for k in (1, 3, 4, 5)]


def test_a_fields_name_no_row_has_says_so_not_only_no_items(tmp_path: Path) -> None:
    """`--fields input=nope` said "split 'train': no items ... with split=train"; the cause
    showed only under --strict."""
    rows = [{"input": "Revenue rose from 10 to 14 million. By how much?", "output": "4 million",
             "split": s} for s in ("train", "train", "test")]  # fmt: skip
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_cap(str(path), ["train", "test"], fields=CapFields.parse("input=nope"))
    assert str(err.value) == f"--fields input=nope: no record of {path} has that field"
    # a field some rows lack: those rows are skipped, and the error names the first
    rows[2]["question"] = rows[2].pop("input")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_cap(str(path), ["train", "test"], fields=CapFields.parse("input=question"))
    assert str(err.value).endswith(f"(2 rows skipped; first: {path}:1: missing field 'question')")


@pytest.mark.parametrize("key", ["modified", "id", "output", "split"])
def test_a_fields_name_no_record_has_is_refused_not_ignored(tmp_path: Path, key: str) -> None:
    """`--fields modified=modified_inptu` (a typo) ran with exit 0, every item modified by
    contamscope instead of the user's column; `id=ident` ran with generated ids; `output=answer`
    said the split had no reference answers (QA)."""
    rows = [{"input": f"Sales were {i} in 2019 and {i + 2} in 2020. Change?", "output": "2",
             "split": s, "id": f"q{i}", "modified_input": f"Sales were {i} in 2018?"}
            for i, s in enumerate(["train"] * 3 + ["test"] * 3)]  # fmt: skip
    path = tmp_path / "all.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_cap(str(path), ["train", "test"], fields=CapFields.parse(f"{key}=typo"))
    assert str(err.value) == f"--fields {key}=typo: no record of {path} has that field"
    # in the Python API too, where a name other than the default is a name given
    with pytest.raises(ConfigError, match=f"--fields {key}=typo: no record"):
        load_cap(str(path), ["train", "test"], fields=CapFields(**{key: "typo"}))  # type: ignore[arg-type]
    # the right names read; the defaults a file lacks are not errors
    good = load_cap(str(path), ["train", "test"], fields=CapFields.parse("modified=modified_input"))
    assert len(good.splits["train"].modified or {}) == 3
    for r in rows:
        del r["id"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert len(load_cap(str(path), ["train", "test"]).splits["test"].items) == 3


def test_ori_mod_folders_refuse_fields_they_do_not_read(fineval_dir: Path) -> None:
    """A CAP folder of ori/mod files reads --fields input and output; split, id and modified
    were dropped without a word."""
    for spec in ("modified=mod", "id=key", "split=part"):
        with pytest.raises(ConfigError, match="whose --fields reads input and output only"):
            load_cap(str(fineval_dir), ["dev", "val"], fields=CapFields.parse(spec))
    with pytest.raises(ConfigError, match="--fields output=answer: no record of"):
        load_cap(str(fineval_dir), ["dev", "val"], fields=CapFields.parse("output=answer"))
    assert load_cap(str(fineval_dir), ["dev", "val"], fields=CapFields.parse("input=input")).splits


def test_a_task_the_records_cannot_have_is_refused(fineval_dir: Path) -> None:
    """--task summary on FinEval's multiple-choice prompts ran and ended "no evidence" with
    M = ROUGE-2 of single letters, 0 whatever the model said (QA)."""
    from contamscope.errors import ConfigError

    for task in ("summary", "qa"):
        with pytest.raises(ConfigError, match=f"--task {task}: .*ori_dev.json holds multiple-ch"):
            load_cap(str(fineval_dir), ["dev", "val"], task=task)
    assert load_cap(str(fineval_dir), ["dev", "val"], task="mcq").task == "mcq"


def test_field_pairs_run_together_are_named() -> None:
    """'input=question output=answer' (a space for a comma) was read as one field name and
    reported as a missing split field (QA); --embedder at no path said 'no config.json'."""
    from contamscope.data.cap import CapFields
    from contamscope.data.records import FieldMap
    from contamscope.embed import SentenceEmbedder
    from contamscope.errors import ConfigError

    with pytest.raises(ConfigError, match=r"'input=question output=answer': a field name with '='"):
        CapFields.parse("input=question output=answer")
    with pytest.raises(ConfigError, match=r"'question=q answer=a' has a field name with '='"):
        FieldMap.parse("question=q answer=a")
    with pytest.raises(ConfigError, match=r"--embedder /no/such/embedder: no such folder"):
        SentenceEmbedder("/no/such/embedder")


def test_a_row_that_is_not_utf8_is_a_row_problem(qa_file: Path) -> None:
    """One stray byte in a CAP JSON Lines file refused the whole file: that row is left out,
    named, and the others read."""
    lines = qa_file.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"Costs", "Coûts".encode("latin-1"))
    qa_file.write_bytes(b"\n".join(lines))
    fields = CapFields.parse("input=question,output=answer,split=part")
    data = load_cap(str(qa_file), ["train", "test"], fields=fields)
    assert [len(data.splits[s].items) for s in ("train", "test")] == [2, 2]
    assert [str(p) for p in data.problems] == [
        f"{qa_file}:2: not UTF-8 text (byte 17 of the line; it reads as Windows-1252 "
        "(Latin-1)); re-save the file as UTF-8"
    ]


def test_mcq_folders_say_the_labels_their_options_lose(tmp_path: Path) -> None:
    """The labels were removed silently in cap's multiple-choice folders (the permutation test
    said so; review QA)."""
    for split in ("dev", "test"):
        rows = "".join(f"Question {i}?,A. Paris,B. Rome,C. Oslo,D. Bern,A\n" for i in range(6))
        (tmp_path / split).mkdir()
        (tmp_path / split / f"geo_{split}.csv").write_text(rows, encoding="utf-8")
    data = load_cap(str(tmp_path), ["dev", "test"])
    assert data.splits["dev"].items[0].options == ("Paris", "Rome", "Oslo", "Bern")
    assert [n.split(": ")[0] for n in data.notes] == ["split dev", "split test"]
    assert "in 6 of the 6 items read" in data.notes[0]


def test_split_values_are_read_whatever_their_case(tmp_path: Path) -> None:
    """Rows with split "Test" or "TRAIN" were dropped silently when --splits said test,train
    (QA); another value ("testing") names the file's values when a split is left empty."""
    rows = [{"input": f"Sales were {i} in 2019 and {i + 2} in 2020. Change?", "output": "2",
             "split": s} for i, s in enumerate(["train", "TRAIN", "test", "Test ", "testing"])]  # fmt: skip
    path = tmp_path / "all.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    data = load_cap(str(path), ["train", "test"])
    assert [len(data.splits[s].items) for s in ("train", "test")] == [2, 2]
    with pytest.raises(ConfigError, match=r"with split=dev \(its values: test, testing, train\)"):
        load_cap(str(path), ["train", "dev"])


def test_a_modified_field_given_for_some_items_only_is_said(tmp_path: Path) -> None:
    """Items without a modified value got contamscope's year shift, the others the user's:
    a split's C mixed both kinds, silently (QA)."""
    rows = [{"input": f"Sales were {i} in 2019 and {i + 2} in 2020. Change?", "output": "2",
             "split": s, **({"mod": f"Sales were {i} in 2018 and {i + 2} in 2019. Change?"}
                            if i != 3 else {})} for i, s in enumerate(["train"] * 3 + ["test"] * 3)]  # fmt: skip
    path = tmp_path / "all.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    data = load_cap(str(path), ["train", "test"], fields=CapFields.parse("modified=mod"))
    assert data.notes == [
        "split test: 1 of 3 items have no 'mod' value; contamscope modifies those itself, the "
        "others are yours: the split's C and PCR mix both kinds of modification"
    ]


def test_a_record_giving_a_key_twice_is_a_row_problem(tmp_path: Path) -> None:
    for s in ("train", "test"):
        text = f'[{{"input": "Q1 {s}", "output": "1", "output": "2"}}, {{"input": "Q2", "output": "3"}}]'
        (tmp_path / f"{s}.json").write_text(text, encoding="utf-8")
    data = load_cap(str(tmp_path), ["train", "test"], task="qa")
    assert [it.answer for it in data.splits["test"].items] == ["3"]
    assert [(p.line, p.reason) for p in data.problems][0] == (
        1,
        "record 1 of the list: key 'output' given twice with different values; keep one",
    )


def test_copies_differing_in_what_a_reader_cannot_see_are_one_item() -> None:
    """A zero-width character pasted into one copy, or full-width punctuation and digits, does
    not make a second question: both are one item in the split overlap and the repeats."""
    a = MCQItem("a", "1+1等于多少?", ("2", "3", "4", "5"))
    b = MCQItem("b", "\u200b1+1等于多少？", ("２", "3", "4", "5\ufeff"))
    ov = split_overlap({"train": [a], "test": [b]})
    assert ov.shared == {"train": ["a"], "test": ["b"]}
    same = split_overlap({"test": [a, b]})
    assert same.repeated == {"test": {"b": "a"}}
    # what a reader does see stays: 10² is not 102 (Unicode's NFKC read them as one; review QA)
    sup = MCQItem("s", "Simplify 10²", ("100", "20", "12", "1"))
    flat = MCQItem("f", "Simplify 102", ("100", "20", "12", "1"))
    assert split_overlap({"test": [sup, flat]}).repeated == {"test": {}}
    # CMMLU writes some ideographs as the Kangxi radicals they look like (U+2F00 for 一)
    kangxi = MCQItem("k", "已知\u2f00个等差数列的\u2fb8项", ("1", "2", "3", "4"))
    plain = MCQItem("p", "已知一个等差数列的首项", ("1", "2", "3", "4"))
    assert split_overlap({"dev": [kangxi], "test": [plain]}).shared == {"dev": ["k"], "test": ["p"]}


def test_a_folder_of_split_files_refuses_a_split_field(tmp_path: Path) -> None:
    """A folder of train.jsonl/test.jsonl takes each file's name as its split: --fields
    split=... was read nowhere, silently (an ori/mod folder refused it; re-test QA)."""
    for s in ("train", "test"):
        row = {"input": f"What is {s}?", "output": s}
        (tmp_path / f"{s}.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="--fields split=part: .* is a folder of split files"):
        load_cap(str(tmp_path), ["train", "test"], fields=CapFields.parse("split=part"))
    assert len(load_cap(str(tmp_path), ["train", "test"]).splits["test"].items) == 1


def test_file_sets_are_named_as_subset_takes_them(tmp_path: Path) -> None:
    """Two prefixed sets (as AlphaFin's report_* and research_*), one with a samples set too:
    the error named them report_full and research_full, which --subset refused, and a subset
    without the split listed the splits of every set (QA)."""
    ori = json.dumps([{"input": t, "output": "10"} for t in QA_TEXTS])
    for name in (
        "report_ori_train.json",
        "report_mod_train.json",
        "research_ori_train.json",
        "research_ori_eval.json",
        "research_ori_train_samples.json",
    ):
        (tmp_path / name).write_text(ori, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_cap(str(tmp_path), ["train"])
    assert "(report, research, research_samples); pick one with --subset NAME" in str(err.value)
    for subset, read in (  # each name it gave is taken
        ("report", "report_ori_train.json"),
        ("research", "research_ori_train.json"),
        ("research_samples", "research_ori_train_samples.json"),
    ):
        data = load_cap(str(tmp_path), ["train"], subset=subset)
        assert Path(data.splits["train"].files[0]).name == read
    with pytest.raises(ConfigError, match=r"--subset report \(splits there: train\)"):
        load_cap(str(tmp_path), ["train", "eval"], subset="report")
