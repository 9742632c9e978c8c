"""`contamscope permutation --report`, `report` and `leaderboard` as a user runs them."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run_cli

ROWS = [
    "What is 2+2?,3,4,5,6,B",
    "Which planet is largest?,Mars,Venus,Jupiter,Earth,C",
    "Pick the colour of the sky,blue,green,red,yellow,A",
    "Which of these are mammals?,Whale,Bat,Dog,All of the above,D",
]


def test_permutation_report_flag_writes_the_report(tmp_path: Path, tiny_model_path: Path) -> None:
    bench = tmp_path / "toy_test.csv"
    bench.write_text("\n".join(ROWS) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    args = ["permutation", "--model", f"hf:{tiny_model_path}", "--benchmark", str(bench)]
    res = run_cli(*args, "--out", str(out), "--device", "cpu", "--report", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    report = out / "report.html"
    assert f"report: {report}" in res.stdout
    html = report.read_text(encoding="utf-8")
    assert "Which planet is largest?" in html and "not exchangeable" in html
    assert html.count('<svg role="img" class="fig"') == 2 + 3  # rank, gap, 3 scored items

    # a re-run with another analysis setting rewrites the report in the folder (it kept
    # showing the earlier analysis; journey)
    before = report.stat().st_mtime_ns
    again = run_cli(*args, "--out", str(out), "--device", "cpu", "--alpha", "0.2", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "report.html was in the folder: written again" in again.stderr
    assert f"report: {report}" in again.stdout and report.stat().st_mtime_ns > before
    assert "rank p-value ≤ 0.2" in report.read_text(encoding="utf-8")
    # its date is the analysis's, said as such ("run created" was the last re-analysis's)
    assert "(analysis of 20" in report.read_text(encoding="utf-8")
    # without one and without --report, the run says how to make it
    report.unlink()
    again = run_cli(*args, "--out", str(out), "--device", "cpu", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"report: contamscope report {out}" in again.stdout

    # a report asked for that cannot be written: said, the run saved, exit code 2 (it was 0;
    # a script did not notice)
    (out / "summary.json").unlink()
    report.mkdir()
    res = run_cli(*args, "--out", str(out), "--device", "cpu", "--report", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "report not written:" in res.stderr and "(the run is saved; exit code 2)" in res.stderr
    assert (out / "summary.json").is_file()
    res = run_cli("reanalyse", str(out), "--alpha", "0.1", "--report", cwd=tmp_path)
    assert res.returncode == 2 and "report not written:" in res.stderr, res.stderr
    report.rmdir()

    custom = tmp_path / "custom.html"
    res = run_cli("report", str(out), "--out", str(custom), "--top", "1", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"report: {custom}"
    assert custom.read_text().count('<svg role="img" class="fig"') == 3

    res = run_cli("leaderboard", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("| model | toy_test.csv |")
    res = run_cli("leaderboard", str(out), "--out", str(tmp_path / "lb.md"), cwd=tmp_path)
    assert res.returncode == 0 and (tmp_path / "lb.md").read_text().startswith("| model |")
    # --format over the extension: written as asked, and said (CSV went into .html unsaid; QA)
    res = run_cli("leaderboard", str(out), "--format", "csv", "--out", "lb.html", cwd=tmp_path)
    assert res.returncode == 0 and (tmp_path / "lb.html").read_text().startswith("model,")
    assert "--format csv into lb.html, whose extension says html: the file holds csv" in (
        " ".join(res.stderr.split())
    )
    res = run_cli("leaderboard", str(out), "run", cwd=tmp_path)  # the same run twice
    assert res.returncode == 0 and res.stdout.startswith("| model | toy_test.csv |\n")
    assert res.stderr.strip() == "left out run: given twice (one cell)"

    # an output named like one of the run's own files is refused (it overwrote them, exit 0)
    before = {f: (out / f).read_bytes() for f in ("summary.json", "items.jsonl")}
    for args in (
        ["report", str(out), "--out", str(out / "items.jsonl")],
        ["leaderboard", str(out), "--format", "csv", "--out", str(out / "summary.json")],
    ):
        res = run_cli(*args, cwd=tmp_path)
        assert res.returncode == 2 and "is a file of the run in" in res.stderr, res.stderr
    assert {f: (out / f).read_bytes() for f in before} == before


def test_user_errors_are_one_line(tmp_path: Path) -> None:
    res = run_cli("report", str(tmp_path / "nope"), cwd=tmp_path)
    assert res.returncode == 2
    assert "no such run folder" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("leaderboard", str(tmp_path), "--format", "pdf", cwd=tmp_path)
    assert res.returncode == 2 and "--format 'pdf'" in res.stderr
    labels = tmp_path / "empty.txt"
    labels.write_text("\n# nothing\n")
    res = run_cli("report", str(tmp_path), "--labels", str(labels), cwd=tmp_path)
    assert res.returncode == 2 and "no item ids" in res.stderr


def test_report_and_leaderboard_output_and_encoding_errors_are_one_line(
    make_run, tmp_path: Path
) -> None:
    """A folder or a path under a file as --out, a summary.json that is not UTF-8 and a binary
    --labels file: one line on stderr, exit 2, no traceback and no temporary file left."""
    run = make_run("good", n_items=8)
    (tmp_path / "folder").mkdir()
    (tmp_path / "board.html").mkdir()
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    utf16 = make_run("utf16", n_items=8)
    summary = utf16 / "summary.json"
    summary.write_bytes(summary.read_text(encoding="utf-8").encode("utf-16"))
    (tmp_path / "labels.bin").write_bytes(b"\xff\xfe\x00bad")
    cut = make_run("cut", n_items=8)  # a summary.json cut short inside a string
    text = (cut / "summary.json").read_text(encoding="utf-8")
    (cut / "summary.json").write_text(text[: text.index('"created"') + 5], encoding="utf-8")
    empty = make_run("empty", n_items=8)  # valid JSON, but no run in it (it read as 0 items)
    (empty / "summary.json").write_text("{}", encoding="utf-8")
    cases = [
        (["report", str(empty)], "summary.json: no 'statistics', not a finished permutation run"),
        (["card", "--run", str(empty)], "no run summary of contamscope"),
        (["report", str(run), "--out", "folder"], "--out folder: is a folder"),
        (["report", str(run), "--out", "afile/x.html"], "afile is a file, not a folder"),
        (["leaderboard", str(run), "--out", "board.html"], "--out board.html: is a folder"),
        # a folder without an extension: said to be a folder, not to have no extension (QA)
        (["leaderboard", str(run), "--out", "folder"], "--out folder: is a folder"),
        (["report", str(utf16)], "summary.json: not UTF-8 text"),
        # JSON's message ends in "at": the column followed it (it was cut short there)
        (["report", str(cut)], "not valid JSON (Unterminated string starting at column "),
        (["card", "--run", str(cut)], "not JSON (Unterminated string starting at line "),
        (["report", str(run), "--labels", "labels.bin"], "--labels labels.bin: not UTF-8"),
    ]
    for args, needle in cases:
        res = run_cli(*args, cwd=tmp_path)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.returncode == 2 and len(lines) == 1 and needle in lines[0], (args, res.stderr)
    # among several run folders (``runs/*``), an unreadable one is left out: the board of the
    # others is written, the bad one named, exit 3
    res = run_cli("leaderboard", str(run), str(utf16), str(empty), "--out", "lb.md", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    assert f"left out {empty}: {empty / 'summary.json'}: no 'statistics'" in " ".join(
        res.stderr.split()
    )
    assert f"left out {utf16}: {summary}: not UTF-8 text" in " ".join(res.stderr.split())
    assert "2 unreadable or unfinished run folders left out (exit code 3)" in res.stderr
    assert "hf:synthetic-model" in (tmp_path / "lb.md").read_text()
    # an unfinished run is missed too: exit 3 (it was 0, as for a file a glob matched; QA)
    unfinished = make_run("unfinished", n_items=8)
    (unfinished / "summary.json").unlink()
    (tmp_path / "notes.txt").write_text("not a run", encoding="utf-8")
    res = run_cli("leaderboard", str(run), "notes.txt", "--out", "lb2.md", cwd=tmp_path)
    assert res.returncode == 0, res.stderr  # a file: what runs/* matches, not a run missed
    # the count of run folders missed said which of the lines above it counts (QA)
    res = run_cli("leaderboard", str(run), str(unfinished), "notes.txt", "--out", "lb4.md",
                  cwd=tmp_path)  # fmt: skip
    assert res.returncode == 3 and (
        "2 left out, 1 of them an unreadable or unfinished run folder (exit code 3)"
    ) in " ".join(res.stderr.split())
    res = run_cli("leaderboard", str(run), str(unfinished), "--out", "lb3.md", cwd=tmp_path)
    assert res.returncode == 3 and "1 unreadable or unfinished run folder left out" in (
        " ".join(res.stderr.split())
    )
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
    assert list((tmp_path / "folder").iterdir()) == []


def test_report_labels_of_other_items_and_a_run_without_items(make_run, tmp_path: Path) -> None:
    run = make_run("r", n_items=8)  # item ids excl-0, excl-1, subj{i % 7}-{i} for i >= 2
    some = tmp_path / "some.txt"
    some.write_text("subj3-3\nsubj2-2\nnot-an-item\n", encoding="utf-8")
    res = run_cli("report", str(run), "--labels", str(some), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "1 of its 3 item ids is not an item of" in res.stderr and "'not-an-item'" in res.stderr
    other = tmp_path / "other.txt"
    other.write_text("q1\nq2\n", encoding="utf-8")
    res = run_cli("report", str(run), "--labels", str(other), cwd=tmp_path)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1
    assert "none of its 2 item ids is an item of" in lines[0] and "(first: 'q1')" in lines[0]
    (run / "items.jsonl").unlink()
    res = run_cli("report", str(run), cwd=tmp_path)
    assert res.returncode == 0 and "items.jsonl is missing: the report has" in res.stderr
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "items.jsonl is missing: the statistics below come from summary.json" in page
    assert "No analysed item to show." in page


def test_labels_of_a_method_without_curves_and_a_wrong_typed_summary_are_one_line(
    make_run, make_benbench_run, tmp_path: Path
) -> None:
    """`report --labels` on a BenBench run drew nothing and said nothing; a summary.json with
    a text where a number belongs was a traceback (exit 1)."""
    import json

    bb = make_benbench_run("bb")
    labels = tmp_path / "leaked.txt"
    labels.write_text("test/test-2\n", encoding="utf-8")
    res = run_cli("report", str(bb), "--labels", str(labels), cwd=tmp_path)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "curves of known leaks are drawn for permutation runs" in res.stderr
    assert "is a benbench run" in res.stderr

    run = make_run("odd", n_items=12)
    s = json.loads((run / "summary.json").read_text())
    s["statistics"]["alg1"]["rate"] = "abc"
    (run / "summary.json").write_text(json.dumps(s))
    res = run_cli("report", str(run), cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert f"{run}: its summary.json or a record of its items.jsonl is not complete" in res.stderr
    assert not (run / "report.html").exists()


def test_a_hand_edited_run_is_one_line_for_compare_and_reanalyse(make_run, tmp_path: Path) -> None:
    """A record with "gap": null, a benchmark given as a string, a config of null: tracebacks
    (exit 1) in compare and reanalyse."""
    import json
    import shutil

    a = make_run("a", n_items=10)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    s = json.loads((b / "summary.json").read_text())
    s["benchmark"] = "b.csv"
    (b / "summary.json").write_text(json.dumps(s))
    res = run_cli("compare", str(a), str(b), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert (
        f"{a} and {b}: a summary.json, settings.json or items.jsonl there is not as" in res.stderr
    )
    st = json.loads((b / "settings.json").read_text())
    st["config"] = None
    (b / "settings.json").write_text(json.dumps(st))
    res = run_cli("reanalyse", str(b), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_report_out_ending_in_a_slash_is_a_folder(make_run, tmp_path: Path) -> None:
    """`--out newdir/` wrote an HTML file named newdir (QA); it writes newdir/report.html."""
    run = make_run("r", n_items=8)
    res = run_cli("report", str(run), "--out", "newdir/", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "newdir" / "report.html").is_file()
    assert "report: newdir/report.html" in res.stdout


def test_report_says_when_items_jsonl_holds_fewer_records_than_the_summary(
    make_run, make_membership_run, tmp_path: Path
) -> None:
    """An empty or cut items.jsonl gave a page of 'No analysed item to show' under '8 items
    analysed', and nothing said (QA)."""
    run = make_run("r", n_items=8)
    member = make_membership_run("m")
    for folder in (run, member):  # whole: nothing said
        res = run_cli("report", str(folder), cwd=tmp_path)
        assert res.returncode == 0 and "warning" not in res.stderr, res.stderr
    items = run / "items.jsonl"
    lines = items.read_text(encoding="utf-8").splitlines(keepends=True)
    items.write_text("".join(lines[:3]), encoding="utf-8")
    res = run_cli("report", str(run), cwd=tmp_path)
    said = " ".join(res.stderr.split())
    assert res.returncode == 0 and f"{items} holds 3 of the 8 item records" in said, said
    items.write_text("", encoding="utf-8")
    res = run_cli("report", str(run), cwd=tmp_path)
    assert "holds 0 of the 8 item records" in res.stderr and "show none" in res.stderr


def test_a_labels_error_shows_a_long_id_cut() -> None:
    """A 200 kB one-line labels file was said whole in the error (QA): the id is cut."""
    from contamscope.cli.report import _check_labels
    from contamscope.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        _check_labels(["[" * 200_000], {"q1"}, Path("labels.json"), Path("run"))
    assert len(str(err.value)) < 300 and "(first: '" + "[" * 60 + "'...)" in str(err.value)
