"""`contamscope inspect`: the real command on files, the bundled MMLU and the real sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run_cli
from toy_rows import sorted_and_shuffled

ROWS = [
    "How many legs has a spider?,4,6,8,10,C",
    "Which planet is largest?,Mars,Venus,Jupiter,Earth,C",
    "Which of these are mammals?,Whale,Bat,Dog,All of the above,D",
    "a row with too few fields,1,2",
    "Pick the colour of the sky,blue,green,red,yellow,A",
]


def _bench(tmp_path: Path) -> Path:
    path = tmp_path / "toy_test.csv"
    path.write_text("\n".join(ROWS) + "\n", encoding="utf-8")
    return path


def test_text_output_names_what_a_run_reads_and_exits_3_on_a_skipped_row(tmp_path: Path) -> None:
    bench = _bench(tmp_path)
    got = run_cli("inspect", "--benchmark", str(bench), cwd=tmp_path)
    assert got.returncode == 3, got.stderr
    assert f"{bench}:4" in got.stderr  # the skipped row, by file and line
    out = got.stdout
    assert "4 selected of 4 loaded in 1 subject; rows skipped: 1" in out
    assert "1 whose options refer to each other ('all of the above' 1)" in out
    assert "1 scored but left out of the verdict" in out and "numbers in increasing order" in out
    assert "the verdict's tests read 2 items" in out
    assert "72 to score (24 per 4-option item)" in out
    assert "tokens" not in out  # no --model: no token counts
    assert "Option-order conventions of all 4 loaded items" in out
    assert not (tmp_path / "runs").exists()  # nothing is scored or written


def test_json_output_with_token_counts_from_a_models_tokenizer(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    bench = _bench(tmp_path)
    got = run_cli(
        "inspect",
        "--benchmark",
        str(bench),
        "--model",
        str(tiny_model_path),
        "-M",
        "bos=<|endoftext|>",
        "--json",
        cwd=tmp_path,
    )
    assert got.returncode == 3, got.stderr
    found = json.loads(got.stdout)
    assert found["schema"] == "contamscope.inspect/1"
    assert found["skipped_rows"] and "toy_test.csv:4" in found["skipped_rows"][0]
    assert found["counts"]["items_tested"] == 2
    tokens = found["tokens"]
    assert tokens["model"] == f"hf:{tiny_model_path}" and tokens["bos"] is True
    assert tokens["reference"] > 2 * tokens["prefix_tree"] > 0
    # the selection as a run's summary holds it: the ids' digest tells a planned run's items
    # from an earlier run's (it had only the options given; QA)
    run = run_cli(
        "permutation", "--model", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>",
        "--benchmark", str(bench), "--out", "run", "--device", "cpu", cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 3, run.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    digest = summary["benchmark"]["selection"]["item_ids_sha256"]
    assert found["benchmark"]["selection"]["item_ids_sha256"] == digest
    assert (
        found["benchmark"]["selection"]["n_items"] == summary["benchmark"]["selection"]["n_items"]
    )


def test_user_errors_are_one_line_with_exit_2(tmp_path: Path) -> None:
    bench = _bench(tmp_path)
    got = run_cli("inspect", "-b", str(bench), "-M", "bos=none", cwd=tmp_path)
    assert got.returncode == 2 and "-M needs --model" in got.stderr
    assert "Traceback" not in got.stderr
    served = run_cli(
        "inspect", "-b", str(bench), "-m", "openai:http://localhost:1/v1#m", cwd=tmp_path
    )
    assert served.returncode == 2 and "tokenizer is not available here" in served.stderr
    missing = run_cli("inspect", "-b", str(tmp_path / "nope.csv"), cwd=tmp_path)
    assert missing.returncode == 2 and "nope.csv" in missing.stderr
    assert "Traceback" not in served.stderr + missing.stderr
    # --limit 3 --sample 3 ran 3 random items, read as "the first 3" (QA): give one; the
    # same check guards every command with both options (cli.common.user_errors)
    for command in ("inspect", "permutation", "benbench", "cap", "membership"):
        more = ["-r", str(bench)] if command == "membership" else []
        both = run_cli(command, "-b", str(bench), *more, "--limit", "3", "--sample", "3",
                       cwd=tmp_path)  # fmt: skip
        assert both.returncode == 2, (command, both.stderr)
        assert "--limit 3 and --sample 3: give one" in both.stderr, (command, both.stderr)


def test_the_bundled_mmlu_is_ordered_by_convention(tmp_path: Path) -> None:
    got = run_cli("inspect", "--limit", "20", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert "20 selected of 14,042 loaded" in got.stdout
    assert "ordered by convention" in got.stdout
    whole = run_cli("inspect", "--subjects", "moral_scenarios,virology", cwd=tmp_path)
    assert "not scored: moral_scenarios (895 items)" in whole.stdout
    assert "sorted numbers" in got.stdout and "sets these items aside" in got.stdout


def test_cmmlu_options_look_shuffled(tmp_path: Path, benchdata: Path) -> None:
    got = run_cli(
        "inspect", "-b", str(benchdata / "cmmlu"), "--split", "test", "--json", cwd=tmp_path
    )
    assert got.returncode == 0, got.stderr
    conventions = json.loads(got.stdout)["conventions"]
    assert conventions["ordered_by_convention"] is False
    assert all(r["p_value"] > conventions["level"] for r in conventions["conventions"])


def test_help_has_examples(tmp_path: Path) -> None:
    got = run_cli("inspect", "--help", cwd=tmp_path)
    assert got.returncode == 0 and "Examples" in got.stdout and "--json" in got.stdout
    assert "inspect" in run_cli("--help", cwd=tmp_path).stdout


def test_measure_loads_the_model_and_estimates_the_time(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    bench = _bench(tmp_path)
    args = ["inspect", "-b", str(bench), "-m", str(tiny_model_path), "-M", "bos=<|endoftext|>"]
    got = run_cli(*args, "--measure", "2", "--device", "cpu", "--json", cwd=tmp_path)
    assert got.returncode == 3, got.stderr  # the skipped row
    timed = json.loads(got.stdout)["time"]
    assert timed["items"] == 2 and timed["orders"] == 48 and timed["device"] == "cpu"
    assert timed["basis"] == "prefix-tree tokens" and timed["estimate_seconds"] > 0
    text = run_cli(*args, "--measure", "1", cwd=tmp_path)
    assert "on cpu: scoring" in text.stdout and "(1 sampled item, 24 orders, took" in text.stdout
    assert "of per-item detectors" in text.stdout
    alone = run_cli("inspect", "-b", str(bench), "--measure", "2", cwd=tmp_path)
    assert alone.returncode == 2 and "--measure needs --model" in alone.stderr


def test_reference_check_before_a_membership_run(tmp_path: Path) -> None:
    """References of the benchmark's kind but ordered otherwise: named before any scoring."""
    bench, ref = tmp_path / "sorted_test.csv", tmp_path / "fresh.csv"
    rows, refs = sorted_and_shuffled(20, seed=2)
    refs.append(rows[0])  # a benchmark item among the references: left out, as membership does
    bench.write_text("\n".join(rows) + "\n", encoding="utf-8")
    ref.write_text("\n".join(refs) + "\n", encoding="utf-8")
    got = run_cli("inspect", "-b", str(bench), "-r", str(ref), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    text = " ".join(got.stdout.split())
    assert "Benchmark against 20 reference items" in text
    # the reference left out is said, as membership says it (it was dropped without a word)
    said = " ".join(got.stderr.split())
    assert "reference overlap 1 of the 21 reference items is a benchmark item too" in said
    # the benchmark itself, or a copy of it, as references: refused as membership refuses them
    # (it compared against 0 references and said "references alike")
    copy = tmp_path / "copy.csv"
    copy.write_text(bench.read_text(encoding="utf-8"), encoding="utf-8")
    for reference, needle in (
        (bench, "--reference is the benchmark itself"),
        (copy, "all 20 of its items are benchmark items too"),
    ):
        res = run_cli("inspect", "-b", str(bench), "-r", str(reference), cwd=tmp_path)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.returncode == 2 and len(lines) == 1 and needle in lines[0], res.stderr
    assert (
        "references unlike the benchmark: natural option order 100.0% of benchmark items, 0.0% of references"
        in text
    )
    missing = run_cli(
        "inspect", "-b", str(bench), "-r", str(bench.with_name("b2.csv")), cwd=tmp_path
    )
    assert missing.returncode == 2 and "b2.csv" in missing.stderr  # a missing file: one line
    # a generic JSONL reference beside an MMLU CSV: --fields maps the reference alone (it was
    # applied to the benchmark too, which has no such columns; QA)
    generic = tmp_path / "fresh.jsonl"
    generic.write_text(
        "".join(
            json.dumps(dict(zip(("stem", "a", "b", "c", "d", "label"), r.split(",")))) + "\n"
            for r in refs[:-1]
        ),
        encoding="utf-8",
    )
    fields = "question=stem,options=a|b|c|d,answer=label"
    args = ["-r", str(generic), "--reference-format", "jsonl", "--fields", fields]
    res = run_cli("inspect", "-b", str(bench), *args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Benchmark against 20 reference items" in " ".join(res.stdout.split())
    bad = run_cli(
        "inspect", "-b", str(bench), "-r", str(generic), "--reference-format", "nope", cwd=tmp_path
    )
    assert bad.returncode == 2 and "--reference-format 'nope': unknown format" in bad.stderr
    same = tmp_path / "more_sorted.csv"
    same.write_text("\n".join(r.replace("case", "box") for r in rows[:12]) + "\n", encoding="utf-8")
    ok = run_cli("inspect", "-b", str(bench), "-r", str(same), "--json", cwd=tmp_path)
    check = json.loads(ok.stdout)["reference_check"]
    assert check["alike"] is True and check["items"] == 12


def test_options_carrying_their_own_labels_are_said_to_lose_them(tmp_path: Path) -> None:
    bench = tmp_path / "pre.csv"
    bench.write_text("Q1?,A. one,B. two,C. three,D. four,B\nQ2?,x,y,z,w,A\n", encoding="utf-8")
    got = run_cli("inspect", "--benchmark", str(bench), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert got.stderr.startswith('note: options beginning with their own labels ("A. ...", "(A)')
    assert f"in 1 of the 2 items read (first: {bench}:1): the labels were removed" in " ".join(
        got.stderr.split()
    )
    got = run_cli("inspect", "--benchmark", str(bench), "--json", cwd=tmp_path)
    assert "the labels were removed" in json.loads(got.stdout)["notes"][0]


def test_repeated_options_are_said_as_such(tmp_path: Path) -> None:
    """An item with two identical options was counted under the text of its reason's tail:
    "(orders that swap them are one text 1)" (Chinese QA)."""
    bench = tmp_path / "rep_test.csv"
    rows = ["首都是?,北京,北京,上海,广州,A", "Largest?,Mars,Venus,All of the above,Earth,C"]
    bench.write_text("\n".join(rows) + "\n", encoding="utf-8")
    got = run_cli("inspect", "--benchmark", str(bench), "--json", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    texts = json.loads(got.stdout)["excluded"]["texts"]
    assert texts == {"'all of the above'": 1, "two identical options": 1}


def test_json_parses_under_force_color(
    tmp_path: Path, tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under FORCE_COLOR (CI services set it) rich drew its spinners on stdout, before the
    JSON ('\\x1b[?25l⠋ reading the tokenizer ...'), and a live bar's carriage returns filled
    the log (CI QA)."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    bench = _bench(tmp_path)
    args = ["--benchmark", str(bench), "--model", str(tiny_model_path), "-M", "bos=<|endoftext|>"]
    got = run_cli("inspect", *args, "--json", cwd=tmp_path)
    assert got.returncode == 3, got.stderr
    assert json.loads(got.stdout)["counts"]["items_loaded"] == 4
    got = run_cli("permutation", *args, "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert got.returncode == 3, got.stderr
    assert "\r" not in got.stdout + got.stderr and "scoring: 4/4" in got.stderr


def test_own_references_in_a_generic_or_mmlu_style_layout_beside_cmmlu(tmp_path: Path) -> None:
    """One's own references headed question,A,B,C,D,answer read as MMLU's CSV layout and were
    refused beside CMMLU ("format 'mmlu-csv'", after "or a generic csv file"; re-test QA);
    another benchmark's own layout still is."""
    bench = tmp_path / "anatomy.csv"
    rows = [f"{i},问题{i}是什么,甲{i},乙,丙,丁,A" for i in range(6)]
    bench.write_text(",Question,A,B,C,D,Answer\n" + "\n".join(rows) + "\n", encoding="utf-8")
    own = tmp_path / "fresh.csv"
    own.write_text(
        "question,A,B,C,D,answer\n"
        + "".join(f"新问题{i}是什么,子{i},丑,寅,卯,B\n" for i in range(6)),
        encoding="utf-8",
    )
    res = run_cli("inspect", "-b", str(bench), "-r", str(own), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    cmb = tmp_path / "cmb.json"  # CMB's own layout beside CMMLU: another benchmark's file
    cmb.write_text(
        json.dumps(
            [{"question": "问?", "option": {"A": "a", "B": "b", "C": "c", "D": "d"}, "answer": "A"}]
        ),  # fmt: skip
        encoding="utf-8",
    )
    bad = run_cli("inspect", "-b", str(bench), "-r", str(cmb), cwd=tmp_path)
    assert bad.returncode == 2 and "format 'cmb-json', the benchmark's is 'cmmlu-csv'" in bad.stderr
