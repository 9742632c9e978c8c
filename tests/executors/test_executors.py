"""Executor plumbing without a cluster: shard planning, configuration errors, missing Ray."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from contamscope.backends.base import ScoreRequest
from contamscope.errors import ConfigError
from contamscope.executors import ExecutorConfig, make_executor, plan_shards


def _reqs(groups: list[int]) -> list[ScoreRequest]:
    return [ScoreRequest(f"Q{g}", f" o{j}") for g, n in enumerate(groups) for j in range(n)]


@pytest.mark.parametrize(
    ("groups", "n_shards", "max_size"),
    [
        ([24] * 10, 4, None),
        ([24] * 10, 3, 50),
        ([1] * 7, 3, None),
        ([100], 4, None),
        ([5, 3], 9, 2),
    ],
)
def test_shards_cover_every_request_once_in_order(
    groups: list[int], n_shards: int, max_size: int | None
) -> None:
    reqs = _reqs(groups)
    shards = plan_shards(reqs, n_shards, max_size)
    assert [i for s in shards for i in s] == list(range(len(reqs)))
    assert all(s for s in shards)


def test_shards_cut_at_prefix_changes_when_possible() -> None:
    reqs = _reqs([24] * 10)  # 240 requests, 4 shards of about 60 -> cut at multiples of 24
    shards = plan_shards(reqs, 4)
    for s in shards[:-1]:
        assert reqs[s[-1]].prefix != reqs[s[-1] + 1].prefix
    # a single huge prefix group is still split (size bound beats prefix locality)
    assert len(plan_shards(_reqs([100]), 4)) == 4
    assert plan_shards([], 3) == []


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="--executor 'spark'"):
        ExecutorConfig(kind="spark")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="need --executor ray"):
        ExecutorConfig(workers=2)
    with pytest.raises(ConfigError, match="--workers"):
        ExecutorConfig(kind="ray", workers=0)


def test_missing_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ConfigError, match=r"pip install 'contamscope\[ray\]'"):
        make_executor(ExecutorConfig(kind="ray"))


def test_an_address_where_nothing_listens_is_refused_at_once(
    tmp_path: Path, tiny_model_path: Path, write_bench: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray retried such an address for 9.5 minutes and more, printing another address; set in
    $RAY_ADDRESS, the error named '--ray-address None' (QA). Both are one line, before Ray
    starts, naming where the address came from."""
    pytest.importorskip("ray")
    from cli_runner import run_cli

    bench = write_bench(tmp_path / "b_test.csv", 2)
    args = ["permutation", "--model", f"hf:{tiny_model_path}", "--benchmark", str(bench)]
    given = run_cli(*args, "--executor", "ray", "--ray-address", "127.0.0.1:1", cwd=tmp_path)
    assert given.returncode == 2, given.stderr
    assert "--ray-address '127.0.0.1:1': nothing accepts connections at 127.0.0.1:1" in (
        " ".join(given.stderr.split())
    )
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    env = run_cli(*args, "--executor", "ray", cwd=tmp_path)
    assert env.returncode == 2, env.stderr
    assert "$RAY_ADDRESS '127.0.0.1:1' (set in the environment; unset it to start a local" in (
        " ".join(env.stderr.split())
    )


LOAD_FAILS = """
import gc, sys, time
from contamscope.errors import ModelError
from contamscope.executors import ExecutorConfig, make_executor
with make_executor(ExecutorConfig(kind="ray", workers=2)) as ex:
    try:
        ex.scorer("hf:" + sys.argv[1])
    except ModelError as exc:
        print("refused:", exc)
    gc.collect()
    time.sleep(2)
"""


def test_every_worker_failing_to_load_is_one_error_not_tracebacks(tmp_path: Path) -> None:
    """Both workers fail to load a folder without a model: the first error was raised, the
    second left unread, and Ray printed it as an 'Unhandled error' traceback (QA)."""
    pytest.importorskip("ray")
    import subprocess

    (tmp_path / "empty").mkdir()
    res = subprocess.run(
        [sys.executable, "-c", LOAD_FAILS, str(tmp_path / "empty")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert "refused:" in res.stdout and "no config.json" in res.stdout, res.stdout + res.stderr
    assert "Unhandled error" not in res.stderr, res.stderr[-2000:]


class _RecordingRay:
    """Stands in for the ``ray`` module: records ``init`` calls; ``init`` fails with
    ``failure`` (a cluster that would not start) so nothing past it runs."""

    def __init__(self, failure: str = "") -> None:
        self.inits: list[dict[str, Any]] = []
        self.failure = failure

    def is_initialized(self) -> bool:
        return bool(self.inits) and not self.failure

    def init(self, **kwargs: Any) -> None:
        self.inits.append(kwargs)
        if self.failure:
            raise RuntimeError(self.failure)


def test_a_command_checks_its_benchmark_and_folder_before_ray_starts(
    tmp_path: Path, tiny_model_path: Path, write_bench: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing --benchmark file, --out naming a file, or --out a folder of other files was
    refused only after a local Ray cluster had started (about 20 s; QA): the cluster starts at
    the first model asked for, after the command's own checks."""
    from typer.testing import CliRunner

    import contamscope.executors.ray_pool as ray_pool
    from contamscope.cli.main import app

    fake = _RecordingRay("cluster would start here")
    monkeypatch.setattr(ray_pool, "_import_ray", lambda: fake)
    bench = write_bench(tmp_path / "b_test.csv", 2)
    base = ["permutation", "--model", f"hf:{tiny_model_path}", "--executor", "ray", "--no-cache"]
    (tmp_path / "a_file").write_text("x", encoding="utf-8")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x", encoding="utf-8")
    (tmp_path / "bb").mkdir()  # another method's run folder (re-test QA)
    (tmp_path / "bb" / "settings.json").write_text('{"method": "benbench"}', encoding="utf-8")
    for extra, said in (
        (["--benchmark", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o1")], "missing"),
        (["--benchmark", str(bench), "--out", str(tmp_path / "a_file")], "is a file"),
        (["--benchmark", str(bench), "--out", str(tmp_path / "notes")], "not empty"),
        (["--benchmark", str(bench), "--out", str(tmp_path / "bb")], "holds a benbench run"),
    ):
        res = CliRunner().invoke(app, [*base, "--format", "mmlu-csv", *extra])
        assert res.exit_code == 2, res.output
        assert fake.inits == [], res.output
        assert said in " ".join(res.output.split())
    # --overwrite writes into a folder of other files: it goes on to the cluster
    res = CliRunner().invoke(
        app, [*base, "--benchmark", str(bench), "--out", str(tmp_path / "notes"), "--overwrite"]
    )
    assert res.exit_code == 2 and len(fake.inits) == 1, res.output
    fake.inits.clear()
    # with its inputs sound, the same command reaches the cluster (and says why it failed)
    res = CliRunner().invoke(
        app,
        [*base, "--benchmark", str(bench), "--format", "mmlu-csv", "--out", str(tmp_path / "o")],
    )
    assert res.exit_code == 2 and len(fake.inits) == 1, res.output
    assert "cluster would start here" in " ".join(res.output.split())


def test_ray_starts_at_the_first_scorer_not_with_the_executor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import contamscope.executors.ray_pool as ray_pool

    fake = _RecordingRay("no cluster")
    monkeypatch.setattr(ray_pool, "_import_ray", lambda: fake)
    with make_executor(ExecutorConfig(kind="ray", workers=1)) as executor:
        assert fake.inits == []
        with pytest.raises(ConfigError, match="no cluster"):
            executor.scorer("hf:./nowhere")
    assert fake.inits == [{"include_dashboard": False, "log_to_driver": False}]
