"""Documented contracts of the leaderboard's numbers (report/leaderboard.py): the headline
count of runs that reject H0 alone and after Holm's correction, copies of one run counted
once, ranking within a method, the CSV's columns and the lines under the board, each checked
against values derived here (mutation QA)."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

from contamscope.report.leaderboard import (
    LeaderboardEntry,
    caveat_lines,
    collect,
    copies_lines,
    flagged_lines,
    significance_line,
    to_csv,
    to_markdown,
)
from contamscope.report.methods import Estimate


def _entry(
    tmp_path: Path,
    name: str,
    p: float | None,
    value: float | None = 0.05,
    *,
    model: str = "hf:m",
    method: str = "permutation test",
    records: str | None = None,
    **est: object,
) -> LeaderboardEntry:
    """A cell of run folder ``tmp_path / name``, whose items.jsonl holds ``records`` (default:
    the folder's own name, so no two runs are copies)."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "items.jsonl").write_text((records or name) + "\n", encoding="utf-8")
    estimate = Estimate(
        "Algorithm-1 excess over chance",
        value,
        (-0.01, 0.12),
        p,
        40,
        **est,  # type: ignore[arg-type]
    )
    return LeaderboardEntry(model, f"bench-{name}", method, estimate, folder)


def test_the_headline_counts_rejections_at_5_percent_alone_and_after_holm(
    tmp_path: Path,
) -> None:
    """docs/output.md: the headline "counts the runs whose p-value rejects their own method's
    H0 (no leakage) at 5% ..., alone and after Holm's correction over every p-value on the
    board". p = 0.01, 0.02, 0.05, 0.5: alone, 3 reject (p <= 0.05); Holm over 4 multiplies the
    smallest by 4 (0.04: rejects) and the next by 3 (0.06: stops), so 1 (mutation QA)."""
    entries = [
        _entry(tmp_path, name, p) for name, p in (("a", 0.05), ("b", 0.01), ("c", 0.5), ("d", 0.02))
    ]
    line = significance_line(entries)
    assert line.startswith("3 of 4 runs with a p-value reject H0 (no leakage) at 5%;"), line
    assert "; 1 after Holm's correction over all 4 " in line, line


def test_copies_of_one_run_are_one_test_and_a_copy_analysed_otherwise_is_its_own(
    tmp_path: Path,
) -> None:
    """docs/output.md: "two folders holding the same item records, a copied run, are one
    measurement: said under the board, and counted once when they read the same p-value";
    rundata.once_per_measurement: "A copy analysed otherwise (another p) stays a test of its
    own". Three folders of one record file with p = 0.01, 0.01, 0.03 are 2 tests: both reject
    alone and after Holm over 2 (0.02, 0.03) (mutation QA)."""
    entries = [
        _entry(tmp_path, name, p, records="same records")
        for name, p in (("a", 0.01), ("b", 0.01), ("c", 0.03))
    ]
    line = significance_line(entries)
    assert line.startswith(
        "2 of 2 runs with a p-value (copies of one run counted once) reject H0"
    ), line
    assert "; 2 after Holm's correction over all 2 " in line, line
    (said,) = copies_lines(entries)
    assert "shown as 3 cells and counted as 2 tests in the line on significance" in said, said


def _csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_runs_of_a_method_are_ranked_most_leakage_first_in_its_own_direction(
    tmp_path: Path,
) -> None:
    """_ranked / docs/output.md: the runs table (and the CSV, "ranked as the html's runs
    table") lists each method's runs "most leakage first in its own direction": CAP's
    PCR_train - PCR_test, below 0 = test contamination (``leak_sign`` -1), so -0.3 before -0.1
    before +0.1; a permutation excess, above 0 = leak, so +0.08 before +0.02; a run without a
    number last (mutation QA)."""
    entries = [
        _entry(tmp_path, "p1", 0.2, 0.02),
        _entry(tmp_path, "c1", 0.2, -0.1, method="CAP", leak_sign=-1, percent=False),
        _entry(tmp_path, "p2", 0.01, 0.08),
        _entry(tmp_path, "c2", 0.2, 0.1, method="CAP", leak_sign=-1, percent=False),
        _entry(tmp_path, "c3", 0.01, -0.3, method="CAP", leak_sign=-1, percent=False),
        _entry(tmp_path, "p3", None, None),
    ]
    order = [Path(r["run_dir"]).name for r in _csv_rows(to_csv(entries))]
    assert order == ["p2", "p1", "p3", "c3", "c1", "c2"]


def test_board_rows_are_ranked_by_the_first_column_most_leakage_first(tmp_path: Path) -> None:
    """to_markdown: "rows: ranked by <the first column>, most leakage first" (a model without
    a cell there last). Excess +0.10 ranks above +0.02 (mutation QA)."""
    entries = [
        _entry(tmp_path, "low", 0.3, 0.02, model="hf:low"),
        _entry(tmp_path, "high", 0.01, 0.10, model="hf:high"),
    ]
    entries = [e.__class__(**{**e.__dict__, "benchmark": "mmlu"}) for e in entries]
    text = to_markdown(entries)
    rows = [line for line in text.splitlines() if line.startswith("| hf:")]
    assert [r.split("|")[1].strip() for r in rows] == ["hf:high", "hf:low"], text


def test_csv_columns_hold_their_own_numbers(tmp_path: Path) -> None:
    """docs/output.md: CSV is one row per run with ``estimate``, ``ci_low``, ``ci_high``,
    ``p_value``, ``n_items``, ``raw_rate`` and ``chance`` ("for permutation, the Algorithm-1
    rate and its chance level"), numbers unformatted (mutation QA)."""
    e = _entry(tmp_path, "a", 0.004, 0.05, raw={"rate": 0.0917, "chance": 0.0417})
    (row,) = _csv_rows(to_csv([e]))
    got = {k: float(row[k]) for k in ("estimate", "ci_low", "ci_high", "p_value", "n_items")}
    assert got == {"estimate": 0.05, "ci_low": -0.01, "ci_high": 0.12, "p_value": 0.004,
                   "n_items": 40}  # fmt: skip
    assert (float(row["raw_rate"]), float(row["chance"])) == (0.0917, 0.0417)


def test_a_caveat_is_said_for_a_cell_that_rejects_at_exactly_5_percent(tmp_path: Path) -> None:
    """caveat_lines: "One line per benchmark with a cell that rejects H0 at level", as the
    headline counts a rejection: p <= 0.05 (p = 0.05 rejects; p = 0.051 does not)
    (mutation QA)."""
    at = _entry(tmp_path, "at", 0.05, caveat="sorted numbers")
    above = _entry(tmp_path, "above", 0.051, caveat="sorted numbers")
    assert len(caveat_lines([at])) == 1
    assert caveat_lines([above]) == []
    assert significance_line([at]).startswith("1 of 1 run")


def test_the_chance_count_of_runs_with_a_flagged_subject_is_5_percent_of_the_runs_tested(
    tmp_path: Path,
) -> None:
    """flagged_lines: "each run's flags keep a 5% chance of any false one when its model saw
    no subject, so over R runs up to R x 5% runs with a flag are expected by chance": 4 runs
    tested, 1 with a flag: at most 0.2 (mutation QA)."""
    entries = [
        _entry(tmp_path, f"r{i}", 0.5, n_parts=12, flagged=("anatomy",) if i == 0 else ())
        for i in range(4)
    ]
    last = flagged_lines(entries)[-1]
    assert "in 4 runs" in last and "1 with a flagged subject" in last, last
    assert last.endswith("is at most 0.2"), last


def test_runs_of_one_method_with_other_statistics_are_columns_not_replicates(
    make_membership_run,  # type: ignore[no-untyped-def]
) -> None:
    """collect: "runs of one method with other statistics (membership's loss and Min-K%++,
    CAP's scales) are other measurements: columns and charts of their own, no replicates":
    one model's loss run and min_k run on one benchmark are two methods' titles, each named
    by its statistic, and neither gets a replicate label (mutation QA)."""
    runs = [
        make_membership_run("a", shift=1.5, model="hf:/models/seen", statistic="loss"),
        make_membership_run("b", shift=1.5, model="hf:/models/seen", statistic="min_k"),
    ]
    entries = collect(runs)
    methods = [e.method for e in entries]
    assert len(set(methods)) == 2, methods
    assert all(e.estimate.statistic in e.method for e in entries), methods
    assert entries[0].benchmark == entries[1].benchmark == entries[0].source


def test_a_caveat_is_said_once_per_benchmark_not_per_replicate(tmp_path: Path) -> None:
    """docs/statistics.md: the leaderboard says the writers'-conventions caveat "once under the
    board for each such benchmark"; two replicates of one benchmark (labelled apart) said it
    twice (mutation QA)."""
    entries = []
    for name in ("runA", "runB"):
        e = _entry(tmp_path, name, 0.01, caveat="sorted numbers: 10 of 20 items")
        entries.append(replace(e, benchmark=f"synthetic.csv [{name}]", source="synthetic.csv"))
    lines = caveat_lines(entries)
    assert len(lines) == 1 and lines[0].startswith("synthetic.csv: its published option orders")
