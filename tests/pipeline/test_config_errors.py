"""Config errors name the command-line flag and, where it is spelt otherwise, the Python field:
a Python user who set ``n_boot=50`` was told about ``--bootstrap``, which they never wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contamscope.detectors.membership import MembershipTest
from contamscope.errors import ConfigError
from contamscope.pipeline.benbench import BenBenchConfig
from contamscope.pipeline.cap import CapConfig
from contamscope.pipeline.permutation import PermutationConfig


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda: BenBenchConfig(n_boot=50), "--bootstrap (n_boot) 50: must be at least 100"),
        (lambda: MembershipTest(n_boot=50), "--bootstrap (n_boot) 50: must be at least 100"),
        (lambda: CapConfig(task="qa", similarity_threshold=2.0), "similarity_threshold)"),
        (lambda: CapConfig(task="qa", n_boot=5), "--bootstrap (n_boot) 5: must be at least 100"),
        # nan and inf passed every check and wrote NaN into summary.json (not JSON)
        (lambda: CapConfig(task="qa", alpha=float("nan")), "--pcr-alpha (alpha) nan: must be"),
        (lambda: CapConfig(task="qa", alpha=float("inf")), "--pcr-alpha (alpha) inf: must be"),
        (lambda: CapConfig(task="qa", min_diff=float("nan")), "--min-diff nan: must be a number"),
        (lambda: CapConfig(task="qa", min_diff=-1.0), "--min-diff -1: must be a number >= 0"),
        (lambda: CapConfig(task="qa", year_shift=0), "--year-shift 0: shifts no year"),
        # one wording for --alpha, with the value given (QA: three wordings, one without it)
        (lambda: MembershipTest(alpha=2.0), "--alpha 2.0: must be between 0 and 1"),
        (lambda: PermutationConfig(alpha=0.0), "--alpha 0.0: must be between 0 and 1"),
        (
            lambda: CapConfig(task="qa", paraphrase_threshold=float("nan")),
            "--paraphrase-threshold (paraphrase_threshold) nan: must be in (0, 1]",
        ),
    ],
)
def test_config_errors_name_flag_and_field(make: Any, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        make()
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_an_installed_package_inside_another_repository_records_no_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wheel in a project's .venv recorded the project's commit as contamscope's."""
    import shutil
    import subprocess

    from contamscope.pipeline import provenance

    if shutil.which("git") is None:
        pytest.skip("git not installed")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.txt").write_text("a\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=proj, check=True)
    subprocess.run(["git", "add", "a.txt"], cwd=proj, check=True)
    subprocess.run([*git, "commit", "-qm", "a"], cwd=proj, check=True)
    installed = proj / ".venv" / "lib" / "site-packages" / "contamscope" / "pipeline"
    installed.mkdir(parents=True)
    (installed / "provenance.py").write_text("")
    monkeypatch.setattr(provenance, "__file__", str(installed / "provenance.py"))
    assert provenance.git_commit() is None
    checkout = proj / "src" / "contamscope" / "pipeline"  # the project's own source tree
    checkout.mkdir(parents=True)
    monkeypatch.setattr(provenance, "__file__", str(checkout / "provenance.py"))
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=proj, capture_output=True, text=True)
    assert provenance.git_commit() == head.stdout.strip()
