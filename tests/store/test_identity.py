"""A local model is identified by its files, not where they lie: scores cached for a copy on
another machine are reused, and what an earlier version filed under the path-bearing identity
is still found (and filed anew), as are its run folders."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from contamscope.backends import load_backend
from contamscope.backends.hf import local_identities, path_identities
from contamscope.data import load_benchmark
from contamscope.pipeline import PermutationConfig, run_permutation
from contamscope.store import CachedScorer, RunDir, ScoreCache
from contamscope.store.digests import file_digest

ROWS = (
    "Which city is in France?,Rome,Paris,Oslo,Lima,B\n"
    "Which is a metal?,Wood,Glass,Iron,Clay,C\n"
    "Which animal can fly?,Cow,Eagle,Pig,Goat,B\n"
)


def _earlier_identity(path: Path) -> str:
    """The identity contamscope gave a local model folder before: its resolved path hashed in."""
    h = hashlib.sha256(str(path.resolve()).encode())
    for f in sorted(p for p in path.iterdir() if p.is_file()):
        h.update(f"{f.name}:{f.stat().st_size}:{file_digest(f)}".encode())
    return f"local:{path.name}:{h.hexdigest()[:16]}"


def test_a_copy_elsewhere_is_the_same_model_and_the_earlier_identity_is_kept(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    a = shutil.copytree(tiny_model_path, tmp_path / "a" / "tiny")
    b = shutil.copytree(tiny_model_path, tmp_path / "b" / "tiny")
    (now_a, then_a), (now_b, then_b) = path_identities(a), path_identities(b)
    assert now_a == now_b and now_a.startswith("local:tiny:")
    assert then_a == _earlier_identity(a) != then_b == _earlier_identity(b)
    assert local_identities(f"hf:{a}") == (now_a, then_a)
    (b / "config.json").write_text("{}", encoding="utf-8")  # other files: another model
    assert path_identities(b)[0] != now_a


def _permute(bench: Path, backend, cache: ScoreCache, out: Path):  # type: ignore[no-untyped-def]
    loaded = load_benchmark(str(bench))
    scorer = CachedScorer(backend, cache)
    outcome = run_permutation(loaded, loaded.items, scorer, RunDir(out), PermutationConfig())
    return scorer, outcome


def test_scores_and_run_folders_of_the_earlier_identity_are_reused(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    model = shutil.copytree(tiny_model_path, tmp_path / "models" / "tiny")
    spec = f"hf:{model}"
    bench = tmp_path / "toy_test.csv"
    bench.write_text(ROWS, encoding="utf-8")
    cache = ScoreCache(tmp_path / "cache" / "scores.sqlite")

    # what an earlier version did: the same model under its path-bearing identity
    earlier = load_backend(spec, device="cpu", options={"bos": "<|endoftext|>"})
    now_identity = earlier.identity
    earlier.identity, earlier.legacy_identities = _earlier_identity(model), ()
    earlier._fingerprint = None
    old_fp = earlier.fingerprint()
    scorer, first = _permute(bench, earlier, cache, tmp_path / "run")
    assert scorer.computed == 3 * 24 and scorer.reused == 0
    settings = json.loads((tmp_path / "run" / "settings.json").read_text(encoding="utf-8"))
    assert settings["model_fingerprint"] == old_fp
    shutil.copytree(tmp_path / "run", tmp_path / "run-then")  # as the earlier version left it

    backend = load_backend(spec, device="cpu", options={"bos": "<|endoftext|>"})
    assert backend.identity == now_identity and backend.legacy_fingerprints() == (old_fp,)
    # its run folder resumes (nothing to score), its settings now name the model as it is now
    scorer, again = _permute(bench, backend, cache, tmp_path / "run")
    assert scorer.computed == 0 and again.summary["statistics"] == first.summary["statistics"]
    settings = json.loads((tmp_path / "run" / "settings.json").read_text(encoding="utf-8"))
    assert settings["model_fingerprint"] == backend.fingerprint() != old_fp
    # a new run finds the earlier scores, and files them under the fingerprint of now
    scorer, fresh = _permute(bench, backend, cache, tmp_path / "fresh")
    assert scorer.computed == 0 and scorer.reused == 3 * 24
    assert fresh.summary["statistics"] == first.summary["statistics"]
    entries = {m.fingerprint: m.entries for m in cache.models()}
    assert entries == {old_fp: 3 * 24, backend.fingerprint(): 3 * 24}
    # compare knows the two runs are of one model (its same_model note did not fire)
    assert fresh.summary["model"]["legacy_fingerprints"] == [old_fp]
    from contamscope.pipeline.compare import compare_runs

    assert compare_runs(tmp_path / "run-then", tmp_path / "fresh")["same_model"] is True


def test_a_copy_of_the_model_on_another_machine_reuses_the_exported_scores(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """Export from one machine's cache, import into another's where the model lies elsewhere:
    the run there scores nothing."""
    from cli_runner import run_cli

    bench = tmp_path / "toy_test.csv"
    bench.write_text(ROWS, encoding="utf-8")
    here = shutil.copytree(tiny_model_path, tmp_path / "gpu-host" / "tiny")
    there = shutil.copytree(tiny_model_path, tmp_path / "laptop" / "models" / "tiny")
    for model, cache_dir in ((here, "gpu-cache"), (there, "laptop-cache")):
        args = ["permutation", "--model", f"hf:{model}", "--benchmark", str(bench), "-M",
                "bos=<|endoftext|>", "--cache-dir", cache_dir, "--out", f"run-{cache_dir}"]  # fmt: skip
        if cache_dir == "laptop-cache":
            res = run_cli("cache", "export", "moved.sqlite", "--cache-dir", "gpu-cache",
                          cwd=tmp_path)  # fmt: skip
            assert res.returncode == 0, res.stderr
            res = run_cli("cache", "import", "moved.sqlite", "--cache-dir", cache_dir, cwd=tmp_path)
            assert res.returncode == 0, res.stderr
        res = run_cli(*args, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
    summary = json.loads((tmp_path / "run-laptop-cache" / "summary.json").read_text("utf-8"))
    assert summary["timings"]["scores_computed"] == 0, summary["timings"]
    assert summary["timings"]["scores_from_cache"] == 3 * 24


@pytest.mark.parametrize("spec", ["smollm2", "hf:HuggingFaceTB/SmolLM2-135M", "openai:x#y"])
def test_models_not_in_a_local_folder_have_no_local_identity(spec: str) -> None:
    assert local_identities(spec) is None
