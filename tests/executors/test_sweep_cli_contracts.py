"""`contamscope sweep` contracts of its help text and docs/scaling.md, on the real command line:
a model that does not load fails once for all its runs, a failed reference run is no pair of
the board, a failed pair's exit code 2 comes before --fail-on-signal's 4, and a dry run never
counts more stored items than a pair has (mutation QA)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli
from toy_rows import word_rows

from contamscope.cli.sweep import plan_jobs


@pytest.fixture(scope="module")
def broken_model_sweep(
    tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory, write_bench: Any
) -> dict[str, Any]:
    """One sweep of the tiny model and of a model folder that does not load (no tokenizer, no
    weights) on two benchmarks, with a reference benchmark; then the same sweep again with
    --fail-on-signal, after the tiny model's first pair was given a leakage signal."""
    root = tmp_path_factory.mktemp("sweep-cli")
    bad = root / "bad-model"
    bad.mkdir()
    (bad / "config.json").write_text('{"model_type": "llama"}', encoding="utf-8")
    models = [f"hf:{tiny_model_path}", f"hf:{bad}"]
    benches = [write_bench(root / f"b{i}_test.csv", 3) for i in range(2)]
    clean = root / "clean_test.csv"
    clean.write_text("\n".join(word_rows(4)) + "\n", encoding="utf-8")
    out = root / "sweep"
    args = [
        "sweep",
        "--models",
        ",".join(models),
        "--benchmarks",
        ",".join(map(str, benches)),
        "--reference-benchmark",
        str(clean),
        "--format",
        "mmlu-csv",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--out",
        str(out),
    ]
    first = run_cli(*args, cwd=root, columns="400")
    board = (out / "leaderboard.md").read_text(encoding="utf-8")
    pairs = json.loads((out / "sweep.json").read_text(encoding="utf-8"))["pairs"]
    # the tiny model's first pair as a run whose verdict found a leakage signal records it
    signalled = plan_jobs(models, [str(b) for b in benches], out)[0].run_dir
    summary = json.loads((signalled / "summary.json").read_text(encoding="utf-8"))
    summary["verdict"].update(label="leakage signal", signal=True)
    (signalled / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    gated = run_cli(*args, "--fail-on-signal", cwd=root, columns="400")
    return {
        "models": models,
        "benches": benches,
        "clean": clean,
        "first": first,
        "board": board,
        "pairs": pairs,
        "gated": gated,
    }


def test_a_model_that_does_not_load_fails_once_for_all_its_runs(
    broken_model_sweep: dict[str, Any],
) -> None:
    """docs/scaling.md: "a model that does not load" is "reported and the others go on (exit
    code 2 at the end)"; the sweep loads each model once for all its benchmarks, so its
    failure is said once and names the load error for each of its runs, which are not tried
    again (mutation QA)."""
    s = broken_model_sweep
    res, bad = s["first"], s["models"][1]
    assert res.returncode == 2, res.stderr
    assert res.stderr.count(f"pair failed ({bad} on ") == 1, res.stderr
    runs = [p for p in s["pairs"] if p["model"] == bad]
    assert len(runs) == 3  # its reference run and its two pairs
    assert all(p["failed"] and "could not load model" in p["status"] for p in runs), runs
    assert not any(p["failed"] for p in s["pairs"] if p["model"] != bad)


def test_a_failed_reference_run_is_not_named_as_a_left_out_pair(
    broken_model_sweep: dict[str, Any],
) -> None:
    """docs/scaling.md: the board's "failed pairs are named under the board ("left out", with
    the reason)"; a reference run is no pair ("off the board", --help: OUT/reference/), so
    the broken model's two pairs are left out, and its reference run is not (mutation QA)."""
    s = broken_model_sweep
    bad = s["models"][1]
    left = [ln for ln in s["board"].splitlines() if ln.startswith("- left out:")]
    assert len(left) == 2, left
    for bench in s["benches"]:
        assert sum(f"{bad} on {bench}:" in ln for ln in left) == 1, left
    assert not any(s["clean"].name in ln for ln in left), left


def test_a_failed_pairs_exit_code_comes_before_the_signals(
    broken_model_sweep: dict[str, Any],
) -> None:
    """--fail-on-signal: "Exit with code 4 when a pair's verdict finds a leakage signal (...
    a failed pair's 2 comes before it)"; the epilog: "2 some pairs failed" (mutation QA)."""
    s = broken_model_sweep
    res, tiny = s["gated"], s["models"][0]
    assert res.returncode == 2, (res.stdout, res.stderr)
    said = " ".join(res.stderr.split())
    assert f"leakage signal: {tiny} on {s['benches'][0]} (exit code 2: a pair failed;" in said


def test_a_dry_run_counts_the_distinct_items_a_pair_has_stored(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """--dry-run: "each pair's state, items and orders to score"; a killed pair's items.jsonl
    may hold a record more than once, a blank or torn line, or a record of no selected item:
    the items stored are the distinct selected ones, and the orders left are those of the
    others (it counted lines: "4 of 4 items stored" of one item's record written 4 times, and
    the run scored 3; mutation QA)."""
    bench = tmp_path / "b_test.csv"
    rows = [f"Question {i}?,red {i},blue {i},green {i},pink {i},A" for i in range(4)]
    bench.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "sweep"
    model = f"hf:{tiny_model_path}"
    (job,) = plan_jobs([model], [str(bench)], out)
    job.run_dir.mkdir(parents=True)
    (job.run_dir / "settings.json").write_text("{}", encoding="utf-8")
    lines = ['{"id": "b_test-0"}'] * 4 + ['{"id": "b_test-1"}', "", '{"id": "x"}', "{torn"]
    (job.run_dir / "items.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    res = run_cli(
        "sweep",
        "--models",
        model,
        "--benchmarks",
        str(bench),
        "--out",
        str(out),
        "--dry-run",
        cwd=tmp_path,
        columns="400",
    )
    assert res.returncode == 0, res.stderr
    rows_out = [ln.split("│")[1:-1] for ln in res.stdout.splitlines() if ln.startswith("│")]
    (row,) = [r for r in rows_out if r and r[0].strip() == model]
    assert row[2].strip() == "resumes: 2 of 4 items stored", row
    assert row[4].strip() == "48", row  # 2 items x 4! orders left
    said = " ".join(res.stdout.split())
    assert "about 48 option orders to score" in said, said
