"""`contamscope permutation --executor ray` end to end (subprocesses, each starting its own local
Ray cluster): same records as the local executor, and a driver killed with SIGKILL resumes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="Ray not installed (pip install 'contamscope[ray]')")


def _cmd(model: Path, bench: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "contamscope",
        "permutation",
        "--model",
        f"hf:{model}",
        "-M",
        "bos=<|endoftext|>",
        "--benchmark",
        str(bench),
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


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "items.jsonl").read_text(encoding="utf-8").splitlines()]


def _wait_for_records(proc: subprocess.Popen[Any], out: Path, n: int) -> None:
    """Until the run ``proc`` has written ``n`` records to ``out`` (or ended; 300 s at most)."""
    items = out / "items.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if items.exists() and items.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.02)


def _kill_orphans(driver_pid: int) -> None:
    """SIGKILL what the killed driver's local Ray cluster left behind (its session folder's name
    ends with the driver's pid); Ray's helper agents do not always notice their node is gone."""
    mark = f"_{driver_pid}/"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "session_" in cmd and mark in cmd:
            with contextlib.suppress(OSError):
                os.kill(int(proc.name), signal.SIGKILL)


def test_ray_options_without_ray_executor_are_refused(tmp_path: Path, write_bench: Any) -> None:
    bench = write_bench(tmp_path / "opt_test.csv", 2)
    r = subprocess.run(
        _cmd(Path("x"), bench, tmp_path / "o", "--workers", "2"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "need --executor ray" in r.stderr and "Traceback" not in r.stderr


def test_cli_ray_then_driver_sigkill_resumes_to_local_results(
    tmp_path: Path, tiny_model_path: Path, write_bench: Any
) -> None:
    n = 24
    bench = write_bench(tmp_path / "cli_test.csv", n)
    env_a = dict(os.environ, CONTAMSCOPE_CACHE_DIR=str(tmp_path / "cache-a"))
    env_b = dict(os.environ, CONTAMSCOPE_CACHE_DIR=str(tmp_path / "cache-b"))
    ref = subprocess.run(
        _cmd(tiny_model_path, bench, tmp_path / "ref"),
        env=env_a,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ref.returncode == 0, ref.stderr

    out = tmp_path / "ray"
    ray_args = ("--executor", "ray", "--workers", "2", "--batch-items", "1")
    proc = subprocess.Popen(
        _cmd(tiny_model_path, bench, out, *ray_args),
        env=env_b,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_for_records(proc, out, 5)
    assert proc.poll() is None, "run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    _kill_orphans(proc.pid)
    assert not (out / "summary.json").exists()
    done_before = len(_records(out))
    assert 0 < done_before < n

    final = subprocess.run(
        _cmd(tiny_model_path, bench, out, *ray_args),
        env=env_b,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert final.returncode == 0, final.stderr
    got, want = _records(out), _records(tmp_path / "ref")
    assert [r["id"] for r in got] == [r["id"] for r in want]  # none missing, none duplicated
    for g, w in zip(got, want):
        assert g["continuations"] == w["continuations"]
        assert g["logprobs"] == pytest.approx(w["logprobs"], abs=1e-4)
        assert (g["rank"], g["alg1"]) == (w["rank"], w["alg1"])
    s_got = json.loads((out / "summary.json").read_text())
    s_want = json.loads((tmp_path / "ref" / "summary.json").read_text())
    assert s_got["statistics"]["alg1"] == s_want["statistics"]["alg1"]
    assert s_got["timings"]["items_resumed"] >= done_before
    # shards written to the cache before the kill were not scored again
    assert s_got["timings"]["scores_computed"] < (n - done_before) * 24 + 24 * 2


def test_cli_ray_run_stopped_by_sigterm_says_interrupted(
    tmp_path: Path, tiny_model_path: Path, write_bench: Any
) -> None:
    """README: exit 130 "interrupted (Ctrl-C, SIGTERM ...)". ray.init put its own SIGTERM
    handler in the command's place: a Ray run exited 15 with a C++ stack dump (Ray QA)."""
    bench = write_bench(tmp_path / "term_test.csv", 40)
    out = tmp_path / "ray"
    env = dict(os.environ, CONTAMSCOPE_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen(
        _cmd(
            tiny_model_path, bench, out, "--executor", "ray", "--workers", "2", "--batch-items", "1"
        ),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_records(proc, out, 2)
        assert proc.poll() is None, "run finished before it could be stopped"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_orphans(proc.pid)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err and "SIGTERM received" not in err, err[-2000:]
    assert not (out / "summary.json").exists() and len(_records(out)) >= 2


def test_contradicting_cache_flags_are_refused_before_ray_starts(
    tmp_path: Path, write_bench: Any
) -> None:
    """`--no-cache --cache-dir X --executor ray` was refused after a local Ray cluster had
    started (10 s; Ray QA): the flags are checked first."""
    bench = write_bench(tmp_path / "flags_test.csv", 2)
    r = subprocess.run(
        _cmd(Path("x"), bench, tmp_path / "o", "--executor", "ray", "--no-cache")
        + ["--cache-dir", str(tmp_path / "c")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert (
        r.stderr.strip()
        .splitlines()[-1]
        .startswith("error: --no-cache and --cache-dir contradict each other")
    )
    assert "Ray" not in r.stderr and not (tmp_path / "o").exists()
