"""`contamscope sweep`: every (model, benchmark) pair a run, finished pairs skipped on re-run,
failures isolated, the leaderboard at the end; and the same sweep on Ray gives the same records."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from contamscope.cli.sweep import plan_jobs


def _sweep(models: list[str], benches: list[Path | str], out: Path, *extra: str) -> Any:
    cmd = [
        sys.executable,
        "-m",
        "contamscope",
        "sweep",
        "--models",
        ",".join(models),
        "--benchmarks",
        ",".join(str(b) for b in benches),
        "--format",
        "mmlu-csv",
        "--out",
        str(out),
        "--device",
        "cpu",
        "--dtype",
        "float32",
        *extra,
    ]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ, COLUMNS="400")
    )


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "items.jsonl").read_text(encoding="utf-8").splitlines()]


def test_plan_jobs_is_model_major_with_unique_folders(tmp_path: Path) -> None:
    jobs = plan_jobs(["hf:/a/model", "hf:/b/model"], ["mmlu", "x/cmb.json"], tmp_path)
    assert [(j.model, j.benchmark) for j in jobs] == [
        ("hf:/a/model", "mmlu"),
        ("hf:/a/model", "x/cmb.json"),
        ("hf:/b/model", "mmlu"),
        ("hf:/b/model", "x/cmb.json"),
    ]
    assert len({j.run_dir for j in jobs}) == 4
    assert jobs[0].run_dir.name.startswith("model-") and jobs[0].run_dir.name.endswith("__mmlu")


@pytest.fixture(scope="module")
def two_models(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("models")
    for name in ("tiny-a", "tiny-b"):
        shutil.copytree(tiny_model_path, d / name)
    return [f"hf:{d / 'tiny-a'}", f"hf:{d / 'tiny-b'}"]


def test_sweep_skips_finished_pairs_isolates_failures_and_builds_the_leaderboard(
    tmp_path: Path, two_models: list[str], write_bench: Any
) -> None:
    benches = [write_bench(tmp_path / f"b{i}_test.csv", 4 + i) for i in range(2)]
    out = tmp_path / "sweep"
    first = _sweep(two_models, benches, out)
    assert first.returncode == 0, first.stderr
    runs = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(runs) == 4 and all((r / "summary.json").exists() for r in runs)
    lb = (out / "leaderboard.md").read_text(encoding="utf-8")
    assert "tiny-a" in lb and "tiny-b" in lb
    assert (out / "leaderboard.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    mtimes = {r: (r / "summary.json").stat().st_mtime_ns for r in runs}

    # a benchmark that does not exist is refused before any model loads
    missing = _sweep(two_models, [*benches, tmp_path / "missing_test.csv"], out)
    assert missing.returncode == 2 and "to run" not in missing.stdout
    assert (
        missing.stderr.strip()
        == f"error: --benchmarks {tmp_path / 'missing_test.csv'}: no such file or folder"
    )
    # the reference benchmark's error names its option too (it named none; QA)
    res = _sweep(two_models, benches, out, "--reference-benchmark", str(tmp_path / "nope.csv"))
    assert res.returncode == 2 and res.stderr.strip() == (
        f"error: --reference-benchmark {tmp_path / 'nope.csv'}: no such file or folder"
    )

    # re-run with one more benchmark that has no usable row: 4 skipped, 2 failed, exit 2
    broken = tmp_path / "broken_test.csv"
    broken.write_text("only a question,\n", encoding="utf-8")
    again = _sweep(two_models, [*benches, broken], out)
    assert again.returncode == 2, again.stderr
    assert "4 finished earlier, 2 to run" in again.stdout
    assert again.stdout.count("finished earlier (skipped)") == 4
    assert "broken_test.csv" in again.stderr and "Traceback" not in again.stderr
    # each pair's outcome is in sweep.json for scripts, and a failed pair's line names it
    # (it was in the printed table only, after a bare "error:"; CI QA)
    pairs = json.loads((out / "sweep.json").read_text(encoding="utf-8"))["pairs"]
    assert [(p["benchmark"], p["failed"]) for p in pairs] == [
        (str(b), b == broken) for _ in two_models for b in [*benches, broken]
    ]
    done = [p for p in pairs if not p["failed"]]
    assert all(p["status"] == "finished earlier (skipped)" for p in done)
    for p in done:
        summary = json.loads((out / p["run_dir"] / "summary.json").read_text(encoding="utf-8"))
        assert (p["verdict"], p["signal"]) == (
            summary["verdict"]["label"],
            summary["verdict"]["signal"],
        )
    assert again.stderr.count(f"pair failed ({two_models[0]} on {broken}):") == 1
    assert {r: (r / "summary.json").stat().st_mtime_ns for r in runs} == mtimes
    assert (out / "leaderboard.md").exists()

    # changed shared options are refused (results would mix settings)
    changed = _sweep(two_models, benches, out, "--sample", "2")
    assert (
        changed.returncode == 2
        and "other options (--sample (not given) -> 2); use another --out, or --overwrite"
        in changed.stderr
    )

    # a benchmark file edited since: its finished pairs are not passed off as done (they were
    # skipped with the old file's numbers, exit 0)
    with benches[1].open("a", encoding="utf-8") as fh:
        fh.write("A new question?,w,x,y,z,A\n")
    edited = _sweep(two_models, benches, out)
    assert edited.returncode == 2, edited.stderr
    table = edited.stdout.split("| model |")[0]  # the status table, before the board
    assert table.count("the benchmark changed since this pair ran") == 2
    assert edited.stdout.count("finished earlier (skipped)") == 2
    assert {r: (r / "summary.json").stat().st_mtime_ns for r in runs} == mtimes
    lb = (out / "leaderboard.md").read_text(encoding="utf-8")
    assert benches[0].name in lb and benches[1].name not in lb.split("left out")[0]
    # ... and named under the board with the reason (they were silently absent)
    stale = [ln for ln in lb.splitlines() if ln.startswith("- left out:")]
    assert len(stale) == 2 and all(
        benches[1].name in ln and "the benchmark changed since this pair ran" in ln for ln in stale
    )
    html = (out / "leaderboard.html").read_text(encoding="utf-8")
    assert html.count("left out: ") == 2

    # a sweep none of whose pairs finishes leaves no board of another sweep's pairs behind
    only_broken = _sweep(two_models, [broken], out)
    assert only_broken.returncode == 2, only_broken.stderr
    assert "no pair finished: the earlier board (leaderboard.md, leaderboard.html) is removed" in (
        " ".join(only_broken.stdout.split())
    )
    assert not (out / "leaderboard.md").exists() and not (out / "leaderboard.html").exists()


def test_sweep_on_ray_equals_local(
    ray_cluster: Any, tmp_path: Path, two_models: list[str], write_bench: Any
) -> None:
    benches = [write_bench(tmp_path / f"r{i}_test.csv", 5) for i in range(2)]
    local = _sweep(two_models[:1], benches, tmp_path / "local")
    assert local.returncode == 0, local.stderr
    ray = _sweep(two_models[:1], benches, tmp_path / "ray", "--executor", "ray", "--workers", "2")
    assert ray.returncode == 0, ray.stderr
    for run in sorted(p for p in (tmp_path / "local").iterdir() if p.is_dir()):
        got, want = _records(tmp_path / "ray" / run.name), _records(run)
        assert [r["id"] for r in got] == [r["id"] for r in want]
        for g, w in zip(got, want):
            assert g["logprobs"] == pytest.approx(w["logprobs"], abs=1e-4)
            assert g["rank"] == w["rank"]


def test_a_finished_pair_whose_model_weights_changed_is_not_passed_off_as_done(
    tmp_path: Path, tiny_model_path: Path, write_bench: Any
) -> None:
    """New weights written over the old ones with the same size and modification time (as
    ``cat new > model.safetensors; touch -r old ...`` or an ``rsync -a`` leaves them): the
    sweep skipped the pair as finished and built the board from the old model's numbers."""
    model = tmp_path / "tiny-w"
    shutil.copytree(tiny_model_path, model)
    bench = write_bench(tmp_path / "w_test.csv", 4)
    out = tmp_path / "sweep"
    first = _sweep([f"hf:{model}"], [bench], out)
    assert first.returncode == 0, first.stderr
    weights = model / "model.safetensors"
    st = weights.stat()
    data = bytearray(weights.read_bytes())
    data[-64:] = bytes(64)  # same size: the last weights zeroed
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert weights.stat().st_size == st.st_size and weights.stat().st_mtime_ns == st.st_mtime_ns
    again = _sweep([f"hf:{model}"], [bench], out)
    assert again.returncode == 2, again.stdout
    assert "the model's files changed since this pair ran" in again.stdout
    assert "finished earlier (skipped)" not in again.stdout


def test_a_second_sweep_on_the_same_folder_is_refused(tmp_path: Path, write_bench: Any) -> None:
    """Two sweeps on one --out each ran a pair and reported the other as failed, and the board
    written last listed one of the two."""
    from contamscope.store import RunDir

    bench = write_bench(tmp_path / "s_test.csv", 3)
    out = tmp_path / "sweep"
    held = RunDir(out).hold()  # as a sweep in another process holds it
    try:
        second = _sweep(["hf:no-such-model"], [bench], out)  # a hub id: never loaded
    finally:
        held.close()
    assert second.returncode == 2
    assert "another contamscope process is writing this run folder" in second.stderr
    assert not (out / "sweep.json").exists()


def test_subjects_missing_from_a_benchmark_are_refused_before_any_model_runs(
    tmp_path: Path, write_bench: Any
) -> None:
    """--subjects anatomy over mmlu and CMB ran every mmlu pair, then failed each CMB pair
    with 'has no subjects to filter on' (journey audit)."""
    benches = [write_bench(tmp_path / f"{name}_test.csv", 3) for name in ("s0", "s1")]
    out = tmp_path / "sweep"
    r = _sweep(["hf:no-such-model"], benches, out, "--subjects", "s0")
    assert r.returncode == 2 and "to run" not in r.stdout, r.stdout
    assert "s0" in r.stderr and "unknown subject" in r.stderr.lower(), r.stderr
    assert not list(out.glob("*/items.jsonl"))


def test_pairs_run_with_other_options_are_not_put_on_one_board(
    tmp_path: Path, tiny_model_path: Path, write_bench: Any
) -> None:
    """A re-run with --overwrite on some pairs and other options rewrote sweep.json; the next
    sweep skipped the other pairs as finished and put --limit 4 and --limit 2 runs side by side
    (sweep audit)."""
    benches = [write_bench(tmp_path / f"o{i}_test.csv", 4) for i in range(2)]
    out, model = tmp_path / "sweep", [f"hf:{tiny_model_path}"]
    first = _sweep(model, benches, out, "--limit", "4")
    assert first.returncode == 0, first.stderr
    redo = _sweep(model, benches[:1], out, "--limit", "2", "--overwrite")
    assert redo.returncode == 0, redo.stderr
    # the pair this sweep did not name stays on disk, off its board, and it says so
    assert "1 other finished run in" in redo.stdout and "not in this sweep" in redo.stdout
    assert benches[1].name not in (out / "leaderboard.md").read_text(encoding="utf-8")
    both = _sweep(model, benches, out, "--limit", "2", "--batch-items", "5")  # speed: no matter
    assert both.returncode == 2, both.stdout
    assert "failed: it ran with other options (--limit 4 -> 2" in both.stdout
    assert both.stdout.count("finished earlier (skipped)") == 1
    board, left = (out / "leaderboard.md").read_text(encoding="utf-8").split("- left out:")
    assert benches[0].name in board and benches[1].name not in board
    assert benches[1].name in left and "other options (--limit 4 -> 2" in left


def test_dry_run_names_each_pairs_state_and_orders_and_writes_nothing(
    tmp_path: Path, two_models: list[str], write_bench: Any
) -> None:
    bench, more = (write_bench(tmp_path / f"{n}_test.csv", k) for n, k in (("b", 3), ("c", 4)))
    out = tmp_path / "sweep"
    first = _sweep(two_models, [bench], out)
    assert first.returncode == 0, first.stderr
    jobs = {
        (j.model, j.benchmark): j.run_dir
        for j in plan_jobs(two_models, [str(bench), str(more)], out)
    }
    cut = jobs[(two_models[1], str(bench))]  # killed after its first item
    (cut / "summary.json").unlink()
    records = (cut / "items.jsonl").read_text(encoding="utf-8").splitlines()
    (cut / "items.jsonl").write_text(records[0] + "\n", encoding="utf-8")
    before = sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*"))
    dry = _sweep(two_models, [bench, more], out, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    rows = [ln.split("│")[1:-1] for ln in dry.stdout.splitlines() if ln.startswith("│")]
    state = {(r[0].strip(), r[1].strip()): (r[2].strip(), r[4].strip()) for r in rows}
    a, b = two_models
    assert state[(a, str(bench))] == ("finished earlier (skipped)", "-")
    assert state[(b, str(bench))] == ("resumes: 1 of 3 items stored", "48")  # 2 items x 24
    assert state[(a, str(more))] == state[(b, str(more))] == ("to run", "96")
    assert "3 pairs to run of 4, about 240 option orders to score" in dry.stdout
    assert sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*")) == before
    # options a real run would refuse are refused here too
    other = _sweep(two_models, [bench], out, "--dry-run", "--limit", "2")
    assert other.returncode == 2 and "other options" in other.stderr


def test_baseline_compares_every_other_model_with_it_per_benchmark(
    tmp_path: Path, two_models: list[str], write_bench: Any
) -> None:
    """--baseline: after the pairs, each other model is compared with the baseline on each
    benchmark (compare.md, one page per comparison). The two folders hold the same weights, so
    every paired difference is 0 and the comparison finds none."""
    benches = [write_bench(tmp_path / f"b{i}_test.csv", 5) for i in range(2)]
    with benches[0].open("a", encoding="utf-8") as f:  # one item the verdicts set aside
        f.write("How many legs do two birds have?,2,4,6,8,B\n")
    out = tmp_path / "sweep"
    wrong = _sweep(two_models, benches, out, "--baseline", "smollm2")
    assert wrong.returncode == 2 and "--baseline smollm2: not one of --models" in wrong.stderr
    assert not out.exists()

    dry = _sweep(two_models, benches, out, "--baseline", two_models[0], "--dry-run")
    assert dry.returncode == 0 and "then compares 1 other model with the baseline" in dry.stdout
    assert not out.exists()

    res = _sweep(two_models, benches, out, "--baseline", two_models[0])
    assert res.returncode == 0, res.stderr
    table = (out / "compare.md").read_text(encoding="utf-8")
    rows = [ln for ln in table.splitlines() if ln.startswith(f"| {two_models[1]} |")]
    assert len(rows) == 2 and all("| no difference |" in r for r in rows)
    # 5 items each: the table reads the items its pages' verdicts read, without the naturally
    # ordered one (it tested all 6 and gave another p than its own linked page; journey)
    assert all(
        f"| {b} | 5 | +0.0 pp | +0.000 | 1.000 | 1.000 |" in t for b, t in zip(benches, rows)
    )
    pages = sorted((out / "compare").glob("*.html"))
    assert [p.stem for p in pages] == sorted(
        p.name for p in out.iterdir() if p.is_dir() and p.name.startswith("tiny-b")
    )
    assert "Compared with the baseline" in res.stdout
    # the board lists the comparisons under it, each linked to its page
    board = (out / "leaderboard.md").read_text(encoding="utf-8")
    assert f"## Compared with the baseline {two_models[0]}" in board
    assert sum(f"[compare/{p.name}](compare/{p.name})" in board for p in pages) == 2
    from contamscope.report.browser import check_page, find_chromium

    if find_chromium() is None:
        return  # (the links are checked in a browser where Chromium is installed)
    seen = check_page(
        out / "leaderboard.html",
        probes={
            "links": "Array.from(document.querySelectorAll('#baseline a'))"
            ".map(a => a.href.split('/').slice(-2).join('/'))",
            "verdicts": "Array.from(document.querySelectorAll('#baseline td'))"
            ".filter(td => td.textContent === 'no difference').length",
        },
    )
    assert seen.errors == []
    assert sorted(seen.probes["links"]) == [f"compare/{p.name}" for p in pages]
    assert seen.probes["verdicts"] == 2


def test_a_re_run_without_the_baseline_removes_its_earlier_comparisons(
    tmp_path: Path, two_models: list[str], write_bench: Any
) -> None:
    """compare.md and compare/*.html of a run with --baseline stayed beside the board of a
    re-run without it, which no longer links them (QA): they are removed, and it says so."""
    bench = write_bench(tmp_path / "b_test.csv", 5)
    out = tmp_path / "sweep"
    res = _sweep(two_models, [bench], out, "--baseline", two_models[0])
    assert res.returncode == 0, res.stderr
    assert (out / "compare.md").is_file() and len(list((out / "compare").glob("*.html"))) == 1
    again = _sweep(two_models, [bench], out)
    assert again.returncode == 0, again.stderr
    assert not (out / "compare.md").exists() and not (out / "compare").exists()
    assert "removed the comparisons of an earlier run with --baseline" in again.stdout
    assert "Compared with the baseline" not in (out / "leaderboard.md").read_text()


def test_baseline_comparison_of_naturally_ordered_items_only_is_named_not_a_crash(
    tmp_path: Path, two_models: list[str], write_bench: Any
) -> None:
    """Every paired item of a benchmark with a natural option order: that comparison's verdict
    tests nothing (p None), and the sweep crashed on it after its pairs, with no board or
    compare.md written (docs journey). It is named and left out; the others are compared."""
    natural = tmp_path / "n_test.csv"
    natural.write_text(
        "".join(
            f"How many legs do {k} birds have?,{2 * k},{2 * k + 1},{2 * k + 2},9,A\n"
            for k in (1, 2)
        ),
        encoding="utf-8",
    )
    benches = [natural, write_bench(tmp_path / "b_test.csv", 3)]
    out = tmp_path / "sweep"
    res = _sweep(two_models, benches, out, "--baseline", two_models[0])
    assert res.returncode == 0, res.stderr
    said = " ".join(res.stderr.split())
    assert f"not compared: {two_models[1]} on {natural}: every paired item has a natural" in said
    assert len(list((out / "compare").glob("*.html"))) == 2  # its page is written all the same
    rows = [
        ln
        for ln in (out / "compare.md").read_text(encoding="utf-8").splitlines()
        if ln.startswith("| ")
    ]
    assert [str(benches[1]) in r for r in rows[1:]] == [True]  # the header, then one comparison
    assert "## Compared with the baseline" in (out / "leaderboard.md").read_text(encoding="utf-8")


def test_other_analysis_settings_re_analyse_finished_pairs(
    tmp_path: Path, two_models: list[str], write_bench: Any
) -> None:
    """--ties, --deltas and --alpha are analysis only: a finished pair analysed otherwise is
    re-analysed from its records (no model scores anything), not skipped with its old
    analysis nor refused as run with other options; the board shows the new analysis, and
    the pair's report.html is written again (it showed the old verdict)."""
    bench = write_bench(tmp_path / "b_test.csv", 4)
    out = tmp_path / "sweep"
    assert _sweep(two_models[:1], [bench], out, "--report").returncode == 0
    run = next(p for p in out.iterdir() if p.is_dir())
    assert "rank p-value ≤ 0.05" in (run / "report.html").read_text(encoding="utf-8")
    records = (run / "items.jsonl").read_text(encoding="utf-8")
    again = _sweep(two_models[:1], [bench], out, "--ties", "leaked", "--alpha", "0.2")
    assert again.returncode == 0, again.stderr
    assert (
        "finished earlier (re-analysed: --ties not_leaked -> leaked; --alpha 0.05 -> 0.2; "
        "nothing scored)" in again.stdout
    )
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert (summary["config"]["ties"], summary["config"]["alpha"]) == ("leaked", 0.2)
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "rank p-value ≤ 0.2" in page and "rank p-value ≤ 0.05" not in page
    assert summary["timings"]["scores_computed"] > 0  # the first run's timings: kept
    assert [r["logprobs"] for r in _records(run)] == [
        json.loads(x)["logprobs"] for x in records.splitlines()
    ]
    assert "tied for the maximum as leaked (--ties leaked) in every permutation run" in (
        (out / "leaderboard.md").read_text(encoding="utf-8")
    )
    dry = _sweep(two_models[:1], [bench], out, "--deltas=-0.1", "--dry-run")
    assert (
        "would be re-analysed: --ties leaked -> not_leaked; --deltas (not given) -> -0.1"
        in dry.stdout
    )
    same = _sweep(two_models[:1], [bench], out, "--ties", "leaked", "--alpha", "0.2")
    assert same.returncode == 0 and "finished earlier (skipped)" in same.stdout
    bad = _sweep(two_models[:1], [bench], out, "--ties", "maybe")
    assert bad.returncode == 2 and "--ties 'maybe': expected not_leaked or leaked" in bad.stderr
    bad = _sweep(two_models[:1], [bench], out, "--deltas=", "--dry-run")
    assert bad.returncode == 2 and "--deltas '': expected comma-separated numbers" in bad.stderr
    # a pair report that cannot be written: said, the board built, exit code 2 (it was 0)
    (run / "report.html").unlink()
    (run / "report.html").mkdir()
    board = (out / "leaderboard.md").stat().st_mtime_ns
    unwritten = _sweep(two_models[:1], [bench], out, "--alpha", "0.1", "--report")
    assert unwritten.returncode == 2, unwritten.stderr
    assert "report not written:" in unwritten.stderr
    assert "1 pair report not written (named above; exit code 2)" in unwritten.stderr
    assert "report not written; nothing scored" in unwritten.stdout
    assert (out / "leaderboard.md").stat().st_mtime_ns > board


def test_reference_benchmark_gives_every_pair_a_measured_false_positive_rate(
    tmp_path: Path, two_models: list[str], write_bench: Any
) -> None:
    """--reference-benchmark: each model is run on the clean items too (OUT/reference/, off the
    board), every pair's Algorithm 2 gets its false-positive rate there; a later sweep without
    it re-analyses the finished pairs without it, scoring nothing."""
    from toy_rows import word_rows

    bench = write_bench(tmp_path / "b_test.csv", 4)
    clean = tmp_path / "clean_test.csv"
    clean.write_text("\n".join(word_rows(6)) + "\n", encoding="utf-8")
    out = tmp_path / "sweep"
    refuse = _sweep(two_models, [bench], out, "--reference-benchmark", str(bench))
    assert refuse.returncode == 2 and "one of --benchmarks" in refuse.stderr
    dry = _sweep(two_models, [bench], out, "--reference-benchmark", str(clean), "--dry-run")
    assert dry.returncode == 0 and f"{clean} (reference)" in dry.stdout
    assert "4 of 4 runs to do (pairs and reference runs)" in dry.stdout
    # the clean items are read whole: --sample cuts the benchmarks only (it cut both; QA)
    cut = _sweep(two_models, [bench], out, "--reference-benchmark", str(clean), "--dry-run",
                 "--sample", "3")  # fmt: skip
    rows = [ln.replace("│", " ").split() for ln in cut.stdout.splitlines() if "│" in ln]
    counts = [r[r.index("run") + 1] for r in rows if "to" in r and "run" in r]
    assert cut.returncode == 0 and sorted(counts) == ["3", "3", "6", "6"], cut.stdout
    res = _sweep(two_models, [bench], out, "--reference-benchmark", str(clean))
    assert res.returncode == 0, res.stderr
    assert "1 benchmark = 2 pairs (and 2 reference runs), 0 finished earlier" in res.stdout
    refs = sorted((out / "reference").iterdir())
    pairs = sorted(p for p in out.iterdir() if "__" in p.name)
    assert len(refs) == len(pairs) == 2
    # sweep.json names each run's folder under OUT, the reference runs' under reference/
    recorded = json.loads((out / "sweep.json").read_text(encoding="utf-8"))["pairs"]
    assert sorted(p["run_dir"] for p in recorded if p["reference"]) == [
        f"reference/{r.name}" for r in refs
    ]
    for pair, ref in zip(pairs, refs, strict=True):
        assert pair.name.split("__")[0] == ref.name.split("__")[0]  # the pair's own model
        summary = json.loads((pair / "summary.json").read_text(encoding="utf-8"))
        assert summary["reference_run"]["run"] == str(ref.resolve())
        measured = [d["reference"] for d in summary["statistics"]["alg2"].values()]
        assert measured and all(m["reference_n"] == 6 for m in measured)
        # the sweep says it per model (it was in each pair's summary only; journey)
        model, r = summary["model"]["spec"], measured[0]
        assert (
            f"Algorithm 2's false-positive rate on {model}'s clean reference items: delta "
            f"{next(iter(summary['statistics']['alg2']))}: {r['reference_count']} of 6 ("
        ) in " ".join(res.stdout.split())
    assert "clean_test" not in (out / "leaderboard.md").read_text(encoding="utf-8")
    again = _sweep(two_models, [bench], out)
    assert again.returncode == 0, again.stderr
    assert "none; nothing scored)" in again.stdout and "re-analysed: reference run" in again.stdout
    for pair in pairs:
        assert "reference_run" not in json.loads((pair / "summary.json").read_text())
    # what OUT/*/ matches: the pairs and the reference runs' folder, which is not a run
    from cli_runner import run_cli

    folders = [str(p) for p in sorted(out.iterdir()) if p.is_dir()]
    assert str(out / "reference") in folders
    re = run_cli("reanalyse", *folders, "--alpha", "0.1", cwd=tmp_path)
    assert re.returncode == 0, re.stderr
    assert f"{out / 'reference'}: a sweep's reference runs, skipped" in re.stderr
    board = run_cli("leaderboard", *folders, cwd=tmp_path)
    assert board.returncode == 0, board.stderr
    assert "a sweep's reference runs (clean items)" in " ".join(
        (board.stdout + board.stderr).split()
    )


def test_sweep_out_must_be_a_sweep_folder_or_empty_even_in_a_dry_run(
    tmp_path: Path, two_models: list[str], write_bench: Any
) -> None:
    """A dry run did not check --out (a file passed); a sweep wrote its board beside the
    user's own files (QA). Both are refused with one line, nothing written."""
    bench = write_bench(tmp_path / "b_test.csv", 3)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "foo.txt").write_text("my notes", encoding="utf-8")
    for out, extra, needle in (
        (mine / "foo.txt", ("--dry-run",), "is a file, not a folder"),
        (mine, ("--dry-run",), "not a sweep folder and not empty (it holds foo.txt)"),
        (mine, (), "not a sweep folder and not empty (it holds foo.txt)"),
    ):
        res = _sweep(two_models[:1], [bench], out, *extra)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.returncode == 2 and len(lines) == 1 and needle in lines[0], res.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["foo.txt"]


def test_one_file_by_two_paths_is_listed_twice(
    tmp_path: Path, two_models: list[str], write_bench: Any
) -> None:
    """A benchmark given by two paths (relative and absolute) ran twice and counted twice in
    the board's correction, a model folder with and without hf: too; both are refused as
    listed twice, nothing written (QA)."""
    bench = write_bench(tmp_path / "b_test.csv", 2)
    out = tmp_path / "sweep"
    rel = os.path.relpath(bench)  # (from pytest's working directory)
    res = _sweep(two_models[:1], [bench, rel], out, "--dry-run")
    assert res.returncode == 2, res.stderr
    assert f"--benchmarks: {bench} and {rel} are the same (listed twice)" in res.stderr
    folder = os.path.relpath(two_models[0].removeprefix("hf:"))
    res = _sweep([two_models[0], folder], [bench], out, "--dry-run")
    assert res.returncode == 2, res.stderr
    assert f"--models: {two_models[0]} and hf:{folder} are the same (listed twice)" in res.stderr
    assert not out.exists()


def test_executor_settings_are_checked_before_any_pair_and_a_cluster_too_small_said_once(
    tmp_path: Path, two_models: list[str], write_bench: Any
) -> None:
    """An unknown --executor was refused after the sweep wrote its manifest (a dry run passed
    it); workers that do not fit the cluster were refused once per pair, 4 times for 2 x 2 (a
    35 x 4 sweep would say it 140 times; QA)."""
    benches = [write_bench(tmp_path / f"e{i}_test.csv", 2) for i in range(2)]
    out = tmp_path / "sweep"
    for extra in (["--dry-run"], []):
        bogus = _sweep(two_models, benches, out, "--executor", "bogus", *extra)
        assert bogus.returncode == 2 and "--executor 'bogus': expected one of" in bogus.stderr
        assert not out.exists(), extra
    pytest.importorskip("ray")
    many = _sweep(two_models, benches, out, "--executor", "ray", "--workers", "999")
    assert many.returncode == 2, many.stderr
    assert many.stderr.count("do not fit") == 1, many.stderr


def test_a_benchmark_added_under_the_same_folder_name_leaves_the_finished_pairs_theirs(
    tmp_path: Path, two_models: list[str], write_bench: Any
) -> None:
    """Adding b/test beside a/test renamed a/test's finished pairs (both got a hash), so they
    ran again and the old folders stayed beside them, counted twice by OUT/*/ (QA)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = write_bench(tmp_path / "a" / "test.csv", 2)
    second = write_bench(tmp_path / "b" / "test.csv", 3)
    out = tmp_path / "sweep"
    assert _sweep(two_models[:1], [first], out).returncode == 0
    before = sorted(p.name for p in out.iterdir() if p.is_dir())
    plan = plan_jobs(two_models[:1], [str(first), str(second)], out)
    assert [j.run_dir.name for j in plan][0] == before[0]  # the finished pair keeps its name
    assert plan[1].run_dir.name.startswith(before[0] + "-")  # the new one gets a hash
    both = _sweep(two_models[:1], [first, second], out, "--dry-run")
    assert both.stdout.count("finished earlier (skipped)") == 1, both.stdout


def test_pair_folders_keep_their_names_when_the_sweep_moves(tmp_path: Path) -> None:
    """Models (or benchmarks) whose names collide were told apart by a hash of the path as
    typed, so a sweep moved with its models to another folder named every pair anew and ran
    them all again (publishing QA). The part below their common folder names them now; a
    folder a sweep named the old way is still found."""
    import hashlib

    def names(root: str, out: Path) -> list[str]:
        models = [f"hf:{root}/models/a/tiny", f"hf:{root}/models/b/tiny"]
        return [j.run_dir.name for j in plan_jobs(models, ["mmlu", f"{root}/x/q.csv"], out)]

    here = names("/srv/one", tmp_path / "out")
    assert here == names("/home/two/moved", tmp_path / "out")
    # a sweep grown by a model from another folder keeps the names too (review QA: the part
    # below the common folder changed with it)
    models = ["hf:/srv/one/models/a/tiny", "hf:/srv/one/models/b/tiny", "hf:/elsewhere/c/tiny"]
    grown = [j.run_dir.name for j in plan_jobs(models, ["mmlu", "/srv/one/x/q.csv"], tmp_path)]
    assert grown[:4] == here and len(set(grown)) == 6
    assert len(set(here)) == 4 and all(n.startswith("tiny-") for n in here)
    old = "tiny-" + hashlib.sha256(b"hf:/srv/one/models/b/tiny").hexdigest()[:6]
    (tmp_path / "old" / f"{old}__mmlu").mkdir(parents=True)
    assert names("/srv/one", tmp_path / "old")[2:] == [f"{old}__mmlu", f"{old}__q.csv"]


def test_a_pairs_skipped_rows_say_no_exit_code_of_their_own(
    tmp_path: Path, two_models: list[str], write_bench: Any
) -> None:
    """A pair with a skipped row said "(exit code 3; see summary.json)" while the sweep, with
    another pair failed, exited 2 (CI QA); the sweep's own code comes at its end."""
    bench = write_bench(tmp_path / "ok_test.csv", 4)
    with bench.open("a", encoding="utf-8") as fh:
        fh.write("a row with too few cells,1\n")
    broken = tmp_path / "broken_test.csv"
    broken.write_text("only a question,\n", encoding="utf-8")
    res = _sweep(two_models[:1], [bench, broken], tmp_path / "sw")
    assert res.returncode == 2, res.stderr
    assert "1 input row was skipped (see summary.json)" in res.stderr
    assert "exit code 3" not in res.stderr
    pairs = json.loads((tmp_path / "sw" / "sweep.json").read_text(encoding="utf-8"))["pairs"]
    assert [p["status"] for p in pairs][0] == "done (input rows skipped)"
    alone = _sweep(two_models[:1], [bench], tmp_path / "sw")  # only that pair: its 3
    assert alone.returncode == 3, alone.stderr


def test_links_among_a_sweeps_own_files_are_replaced_or_read_as_unreadable(
    tmp_path: Path, tiny_model_path: Path, write_bench: Any
) -> None:
    """Its leaderboard linked to /dev/null was refused as an --out the user never gave ("not
    fully written", exit 0); a pair's options file linked to a named pipe hung the sweep."""
    bench = write_bench(tmp_path / "l_test.csv", 4)
    out = tmp_path / "sweep"
    first = _sweep([f"hf:{tiny_model_path}"], [bench], out)
    assert first.returncode == 0, first.stderr
    board = out / "leaderboard.html"
    board.unlink()
    board.symlink_to(os.devnull)
    (pair,) = [p for p in out.iterdir() if (p / "settings.json").is_file()]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (pair / "sweep-options.json").unlink()
    (pair / "sweep-options.json").symlink_to(fifo)
    again = _sweep([f"hf:{tiny_model_path}"], [bench], out)  # (a hang ends in the timeout)
    assert "not fully written" not in again.stderr, again.stderr
    assert not board.is_symlink() and board.read_text().startswith("<!DOCTYPE html>")
    # the pair's options file, unreadable there or gone (a kill after the pair's summary),
    # is written again: the pair's own guard against a sweep with other options (kill QA)
    assert not (pair / "sweep-options.json").is_symlink()  # (before a read: the pipe hangs)
    options = json.loads((pair / "sweep-options.json").read_text(encoding="utf-8"))["options"]
    assert options["sample"] is None
    (pair / "sweep-options.json").unlink()
    assert _sweep([f"hf:{tiny_model_path}"], [bench], out).returncode == 0
    again_options = json.loads((pair / "sweep-options.json").read_text(encoding="utf-8"))
    assert again_options["options"] == options


def test_a_board_that_cannot_be_written_is_a_failed_sweep_with_its_pairs_kept(
    tmp_path: Path, tiny_model_path: Path, write_bench: Any
) -> None:
    """It said "leaderboard not fully written" and exited 0: a CI job took the sweep as done."""
    bench = write_bench(tmp_path / "w_test.csv", 4)
    out = tmp_path / "sweep"
    first = _sweep([f"hf:{tiny_model_path}"], [bench], out)
    assert first.returncode == 0, first.stderr
    (out / "leaderboard.html").unlink()
    (out / "leaderboard.html").mkdir()  # a folder where the board goes
    (out / "leaderboard.md").unlink()
    again = _sweep([f"hf:{tiny_model_path}"], [bench], out)
    assert again.returncode == 2, again.stderr
    said = " ".join(again.stderr.split())
    assert f"leaderboard not fully written: {out / 'leaderboard.html'}: is a folder" in said
    assert not (out / "leaderboard.md").exists()  # not one page of two (review QA)
    assert "`contamscope leaderboard` writes a board of them" in again.stderr
    pairs = json.loads((out / "sweep.json").read_text(encoding="utf-8"))["pairs"]
    assert [p["failed"] for p in pairs] == [False]  # the pair itself is done, and kept
