"""`contamscope sweep` contracts that need no model: the order pairs run in, what OUT/sweep.json
says of each pair, which analysis settings count as changed, and the dry run's count of what a
resumed pair has left to score (mutation QA)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contamscope.cli.sweep import (
    Job,
    _analysis_changes,
    _record_pairs,
    _with_references,
    plan_jobs,
    reference_jobs,
)


def _summary(run_dir: Path, signal: bool | None, config: dict[str, Any] | None = None) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    label = "leakage signal" if signal else "no evidence"
    summary = {"verdict": {"label": label, "signal": signal}, "config": config or {}}
    (run_dir / "summary.json").write_text(json.dumps(summary), encoding="utf-8")


def test_each_models_reference_run_comes_before_its_pairs(tmp_path: Path) -> None:
    """_with_references: "The jobs with each model's reference job first (its pairs are
    analysed with it)" (mutation QA)."""
    jobs = plan_jobs(["m1", "m2"], ["b1", "b2"], tmp_path)
    refs = reference_jobs(["m1", "m2"], "clean.csv", tmp_path)
    got = [(j.model, j.benchmark) for j in _with_references(jobs, refs)]
    assert got == [
        ("m1", "clean.csv"),
        ("m1", "b1"),
        ("m1", "b2"),
        ("m2", "clean.csv"),
        ("m2", "b1"),
        ("m2", "b2"),
    ]


def test_sweep_json_marks_every_failure_and_a_reference_runs_signal_is_no_pairs(
    tmp_path: Path,
) -> None:
    """_record_pairs: OUT/sweep.json says of each pair whether it ``failed`` (any status the
    table says as failed) and its verdict; the pairs whose verdict found a signal are returned
    (--fail-on-signal), not a reference run, which is off the board (mutation QA)."""
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"options": {}}), encoding="utf-8")
    ok, changed = plan_jobs(["m1"], ["b1", "b2"], out)
    ref = Job("m1", "clean.csv", out / "reference" / "m1__clean", reference=True)
    _summary(ok.run_dir, True)
    _summary(changed.run_dir, False)
    _summary(ref.run_dir, True)
    status = {
        ref: "done",
        ok: "finished earlier (skipped)",
        changed: "failed: the benchmark changed since this pair ran (--overwrite runs it again)",
    }
    signalled = _record_pairs(out, [ref, ok, changed], status)
    assert signalled == ["m1 on b1"]
    pairs = json.loads((out / "sweep.json").read_text(encoding="utf-8"))["pairs"]
    assert [(p["benchmark"], p["failed"]) for p in pairs] == [
        ("clean.csv", False),
        ("b1", False),
        ("b2", True),
    ]
    assert pairs[1]["verdict"] == "leakage signal" and pairs[1]["signal"] is True
    assert "verdict" not in pairs[2]


def test_a_summary_that_names_no_analysis_setting_ran_with_the_defaults(tmp_path: Path) -> None:
    """_DEFAULTS: the analysis settings' "values in a summary that does not name them"; a pair
    analysed with the defaults is not re-analysed by a sweep with the defaults, and is by one
    with another --alpha (mutation QA)."""
    job = Job("m1", "b1", tmp_path / "m1__b1")
    _summary(job.run_dir, False, config={})
    kw = {"ties": "not_leaked", "deltas": None, "alpha": 0.05}
    assert _analysis_changes(job, kw) is None
    assert _analysis_changes(job, {**kw, "alpha": 0.01}) == "--alpha 0.05 -> 0.01"


def test_a_sweep_shrunk_to_one_of_two_same_named_values_keeps_its_pair_folders(
    tmp_path: Path,
) -> None:
    """A sweep of models/a/tiny and models/b/tiny re-run with models/a/tiny alone named its
    pairs tiny__q.csv, ran them again, and called its finished tiny-<hash>__q.csv pairs "of
    models not in this sweep" (docs QA); likewise for benchmarks."""
    out = tmp_path / "sweep"
    models = ["hf:models/a/tiny", "hf:models/b/tiny"]
    benches = ["bench/x/q.csv", "bench/y/q.csv"]
    both = plan_jobs(models, benches, out)
    assert len({j.run_dir for j in both}) == 4
    for job in both:  # the pairs as that sweep left them
        job.run_dir.mkdir(parents=True)
        settings = {"model": job.model, "benchmark": job.benchmark}
        (job.run_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    by_pair = {(j.model, j.benchmark): j.run_dir for j in both}
    for ms, bs in (([models[1]], benches), (models, [benches[0]]), ([models[0]], [benches[1]])):
        for job in plan_jobs(ms, bs, out):
            assert job.run_dir == by_pair[(job.model, job.benchmark)], (ms, bs)
    # a value no earlier pair was run with keeps the plain name
    (fresh,) = plan_jobs(["hf:models/c/tiny"], ["bench/z/q.csv"], out)
    assert fresh.run_dir.name == "tiny__q.csv"
    # where the plain name already holds the value (a sweep of one, grown, then shrunk), it stays
    plain = out / "tiny__q.csv"
    plain.mkdir()
    (plain / "settings.json").write_text(
        json.dumps({"model": models[0], "benchmark": benches[0]}), encoding="utf-8"
    )
    (job,) = plan_jobs([models[0]], [benches[0]], out)
    assert job.run_dir == plain
