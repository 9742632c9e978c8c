"""Documented contracts of the CLI layer (cli/*.py): how flags become settings, the
--fail-on-signal gate, --sample's seed, options said to be ignored, reanalyse's options. Each
command runs in this process with the pipeline step replaced by a recorder, so nothing is
scored (mutation QA)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from toy_rows import QA_ROWS, write_jsonl
from typer.testing import CliRunner

from contamscope.cli.common import EXIT_SIGNAL, drop_ignored, pick_items
from contamscope.cli.main import app


class _Stop(Exception):
    """Raised by a recorder: the command went as far as building its settings."""


def _recorder(seen: dict[str, Any]) -> Any:
    def record(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise _Stop

    return record


def _model(tiny_model_path: Path) -> list[str]:
    return ["--model", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>", "--device", "cpu"]


def _benbench(
    tmp_path: Path, tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[Any, dict[str, Any]]:
    """``contamscope benbench`` on the toy rows with ARGS; returns the command's result and the
    config its run was given (the run itself replaced: it returns a summary with nothing
    skipped)."""
    import contamscope.cli.benbench as cli_benbench
    import contamscope.pipeline.benbench as pipeline

    seen: dict[str, Any] = {}

    def run_benbench(splits: Any, scorer: Any, run_dir: Any, config: Any, **kw: Any) -> Any:
        seen["config"] = config
        summary = {"counts": {"test": {"rows_skipped": 0, "reference_rows_skipped": 0}}}
        return SimpleNamespace(summary=summary, run_dir=run_dir.path)

    monkeypatch.setattr(pipeline, "run_benbench", run_benbench)
    monkeypatch.setattr(cli_benbench, "print_benbench_summary", lambda summary: None)
    monkeypatch.setattr(cli_benbench, "report_after_run", lambda *a, **k: True)  # written
    bench = write_jsonl(tmp_path / "toy-test.jsonl", QA_ROWS)
    argv = ["benbench", *_model(tiny_model_path), "--benchmark", str(bench)]
    argv += ["--out", str(tmp_path / "run"), "--no-cache", *args]
    return CliRunner().invoke(app, argv), seen


def test_benbench_flags_become_the_runs_config(
    tmp_path: Path, tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``contamscope benbench --help``: --k "Starting points per text", --rouge-threshold
    "ROUGE-L F threshold", --edit-threshold "Edit-similarity threshold", --inclusive
    "Thresholds with >= instead of >", --bootstrap "Bootstrap resamples": each reaches the
    run's BenBenchConfig as given; without them, the paper's defaults (docs/benbench.md:
    ``--edit-threshold 0.9 --rouge-threshold 0.75``, strict ``>``) (mutation QA)."""
    res, seen = _benbench(tmp_path, tiny_model_path, monkeypatch)
    assert res.exit_code == 0, res.output
    cfg = seen["config"]
    assert (cfg.n, cfg.k, cfg.rouge_threshold, cfg.edit_threshold) == (5, 5, 0.75, 0.9)
    assert (cfg.inclusive, cfg.n_boot, cfg.seed) == (False, 2000, 0)
    given = ["--n", "3", "--k", "4", "--rouge-threshold", "0.6", "--edit-threshold", "0.8"]
    given += ["--inclusive", "--bootstrap", "300", "--seed", "7"]
    res, seen = _benbench(tmp_path, tiny_model_path, monkeypatch, *given, "--overwrite")
    assert res.exit_code == 0, res.output
    cfg = seen["config"]
    assert (cfg.n, cfg.k, cfg.rouge_threshold, cfg.edit_threshold) == (3, 4, 0.6, 0.8)
    assert (cfg.inclusive, cfg.n_boot, cfg.seed) == (True, 300, 7)


def test_a_signal_sets_the_exit_code_only_under_fail_on_signal(
    tmp_path: Path, tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """benbench's epilog: "4 a contamination signal under --fail-on-signal"; common.EXIT_SIGNAL:
    "without it a verdict never sets the exit code" (mutation QA)."""
    import contamscope.cli.benbench as cli_benbench

    monkeypatch.setattr(cli_benbench, "has_signal", lambda summary: True)
    res, _ = _benbench(tmp_path, tiny_model_path, monkeypatch)
    assert res.exit_code == 0, res.output
    res, _ = _benbench(tmp_path, tiny_model_path, monkeypatch, "--fail-on-signal")
    assert res.exit_code == EXIT_SIGNAL, res.output


def test_permutation_flags_become_the_runs_config(
    tmp_path: Path, tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``contamscope permutation --help``: --alpha "Level of the per-item calibrated rank
    test", --ties (Algorithm 1), --mc-orders "Random orders scored above --max-exhaustive",
    --seed: each reaches the run's PermutationConfig as given (mutation QA)."""
    import contamscope.pipeline as pipeline

    seen: dict[str, Any] = {}
    monkeypatch.setattr(pipeline, "PermutationConfig", _recorder(seen))
    args = ["--alpha", "0.01", "--ties", "leaked", "--mc-orders", "50", "--seed", "3"]
    res = CliRunner().invoke(app, ["permutation", *_model(tiny_model_path), *args])
    assert isinstance(res.exception, _Stop), res.output
    assert (seen["alpha"], seen["ties"], seen["mc_orders"], seen["seed"]) == (
        0.01,
        "leaked",
        50,
        3,
    )


def test_permutation_subjects_keeps_only_the_named_subjects(tmp_path: Path) -> None:
    """``--subjects``: "Comma-separated subjects to keep" (the benchmark as the command reads
    it; mutation QA)."""
    from contamscope.cli.permutation import load_for

    folder = tmp_path / "bench"
    folder.mkdir()
    (folder / "anatomy_test.csv").write_text("Bone?,a,b,c,d,A\nMuscle?,a,b,c,d,B\n")
    (folder / "virology_test.csv").write_text("Virus?,a,b,c,d,C\n")
    kw = {"benchmark": str(folder), "fmt": None, "split": None, "fields": None}
    kw |= {"strict": False, "subjects": "virology"}
    loaded = load_for(kw)
    assert [it.subject for it in loaded.items] == ["virology"]
    assert len(load_for(kw | {"subjects": None}).items) == 3


def test_membership_seed_reaches_the_bootstrap(
    tmp_path: Path, tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``contamscope membership --seed`` and ``--bootstrap`` reach the run's MembershipConfig
    (docs: ``reanalyse``'s membership ``--seed`` is "the bootstrap's"; mutation QA)."""
    import contamscope.pipeline.membership as pipeline

    seen: dict[str, Any] = {}
    monkeypatch.setattr(pipeline, "MembershipConfig", _recorder(seen))
    bench = tmp_path / "toy_test.csv"
    bench.write_text("Sky?,blue,green,red,pink,A\n")
    args = ["membership", *_model(tiny_model_path), "--benchmark", str(bench)]
    args += ["--reference", str(bench), "--seed", "5", "--bootstrap", "300"]
    res = CliRunner().invoke(app, args)
    assert isinstance(res.exception, _Stop), res.output
    assert (seen["seed"], seen["n_boot"]) == (5, 300)


def test_sample_is_drawn_with_the_seed_and_said_only_when_too_large(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--sample``: "A seeded random sample of N items", ``--seed``: "Seed for --sample";
    pick_items says so "when --sample asks for more items than there are" (mutation QA)."""
    items = list(range(40))
    drawn = {seed: pick_items(items, {"sample": 5, "seed": seed}) for seed in range(4)}
    assert drawn[2] == pick_items(items, {"sample": 5, "seed": 2})
    assert len({tuple(d) for d in drawn.values()}) > 1  # another seed, another sample
    capsys.readouterr()
    assert pick_items(items, {"sample": 40, "seed": 0}) == items
    assert "--sample" not in capsys.readouterr().err
    assert pick_items(items, {"sample": 41, "seed": 0}) == items
    assert "--sample 41 is more than the 40 items" in capsys.readouterr().err


def test_lenient_only_options_are_ignored_only_when_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """cli/benbench.py ``_LENIENT_ONLY`` with drop_ignored: an option "that was given but is not
    read ... said to be ignored ... and set back to command's default: ignored as said, not
    checked, not recorded"; one not given is not said (mutation QA)."""
    from contamscope.cli.benbench import _LENIENT_ONLY, command

    kw = {"rouge_threshold": 0.75, "edit_threshold": 0.9, "inclusive": False}
    assert drop_ignored(kw, command, _LENIENT_ONLY, "--no-lenient", "{} runs") == kw
    assert "ignored" not in capsys.readouterr().err
    given = kw | {"rouge_threshold": 0.5, "inclusive": True}
    out = drop_ignored(given, command, _LENIENT_ONLY, "--no-lenient", "{} runs")
    assert out == kw
    said = " ".join(capsys.readouterr().err.split())
    assert "ignored --rouge-threshold: it applies to --lenient runs; this is --no-lenient" in said
    assert "--edit-threshold" not in said


def test_reanalyse_refuses_an_alpha_of_one_before_reading_any_folder(tmp_path: Path) -> None:
    """``reanalyse --alpha``: a test level, "must be between 0 and 1" (exit 2, said first:
    no folder is read; mutation QA)."""
    res = CliRunner().invoke(app, ["reanalyse", str(tmp_path / "missing"), "--alpha", "1"])
    assert res.exit_code == 2
    assert "--alpha 1.0: must be between 0 and 1" in res.output


def test_reanalyse_refuses_a_false_flag_of_another_method(tmp_path: Path) -> None:
    """reanalyse's epilog: "What each method takes (the others are refused)": --no-inclusive
    (a BenBench setting, given as False) on a permutation run is refused in one line
    (mutation QA)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "settings.json").write_text(json.dumps({"method": "permutation"}))
    res = CliRunner().invoke(app, ["reanalyse", str(run), "--no-inclusive"])
    assert res.exit_code == 2
    said = " ".join(res.output.split())
    assert "--inclusive/--no-inclusive: not a setting of a permutation run" in said


def test_reanalyse_takes_a_benbench_runs_seed_and_bootstrap(
    tmp_path: Path, tiny_backend: Any
) -> None:
    """reanalyse's epilog: "benbench --rouge-threshold, --edit-threshold, --inclusive/
    --no-inclusive ..., --bootstrap, --seed (the bootstrap's)": each is taken and recorded
    in the run's config (mutation QA)."""
    from contamscope.data.qa import load_qa
    from contamscope.pipeline import BenBenchConfig, SplitInput, run_benbench
    from contamscope.pipeline.benbench_refs import inline_reference
    from contamscope.store import CachedScorer, RunDir

    loaded = load_qa(str(write_jsonl(tmp_path / "toy-test.jsonl", QA_ROWS[:1])))
    split = SplitInput("test", loaded, loaded.items, [inline_reference(loaded)])  # type: ignore[list-item]
    cfg = BenBenchConfig(n_boot=200)
    run_benbench([split], CachedScorer(tiny_backend, None), RunDir(tmp_path / "run"), cfg)
    args = ["reanalyse", str(tmp_path / "run"), "--seed", "4", "--bootstrap", "300"]
    res = CliRunner().invoke(app, [*args, "--edit-threshold", "0.5"])
    assert res.exit_code == 0, res.output
    config = json.loads((tmp_path / "run" / "summary.json").read_text())["config"]
    assert (config["seed"], config["n_boot"], config["edit_threshold"]) == (4, 300, 0.5)


def test_compare_alpha_reaches_the_comparison(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``contamscope compare --alpha``: "Level of the verdict (false-positive rate)": the
    level given is the one the comparison is made at (mutation QA)."""
    import contamscope.pipeline.compare as pipeline

    seen: dict[str, Any] = {}
    monkeypatch.setattr(pipeline, "compare_runs", _recorder(seen))
    res = CliRunner().invoke(
        app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--alpha", "0.01"]
    )
    assert isinstance(res.exception, _Stop), res.output
    assert seen["alpha"] == 0.01


def test_help_texts_keep_their_square_brackets() -> None:
    """`--ray-address`'s help said "pip install 'ray'": Rich read "[client]" as markup and
    dropped it (docs QA). No help text of any command holds an unescaped "[word]", and the
    two install hints render whole."""
    import re

    import typer

    markup = re.compile(r"(?<!\\)\[[a-zA-Z/][^\]]*\]")
    found = []

    def walk(command: Any, name: str) -> None:
        for p in getattr(command, "params", []):
            found.extend(f"{name} {p.name}: {m}" for m in markup.findall(p.help or ""))
        found.extend(f"{name}: {m}" for m in markup.findall(command.help or ""))
        for sub, c in getattr(command, "commands", {}).items():
            walk(c, f"{name} {sub}")

    walk(typer.main.get_command(app), "contamscope")
    assert found == []
    res = CliRunner().invoke(app, ["permutation", "--help"], env={"COLUMNS": "250"})
    text = " ".join(res.output.split())
    assert "pip install 'ray[client]'" in text and "pip install 'contamscope[ray]'" in text


def test_a_records_file_given_for_a_run_folder_is_named_as_such(tmp_path: Path) -> None:
    """`reanalyse RUN/items.jsonl` said "no such run folder" of a file that exists, and
    `card --run RUN/items.jsonl` "not JSON (Extra data at line 2 column 1)" (cross-reader
    QA): both say it is a file and what to give instead."""
    items = tmp_path / "run" / "items.jsonl"
    items.parent.mkdir()
    items.write_text('{"id": "a"}\n{"id": "b"}\n', encoding="utf-8")
    res = CliRunner().invoke(app, ["reanalyse", str(items)])
    assert res.exit_code == 2
    assert "items.jsonl: a file, not a run folder (give the folder that holds it)" in " ".join(
        res.output.split()
    )
    res = CliRunner().invoke(app, ["card", "--run", str(items), "-o", str(tmp_path / "c.md")])
    assert res.exit_code == 2
    said = " ".join(res.output.split())
    assert "a records file; give its run folder (or its summary.json)" in said
    assert "Extra data" not in said and not (tmp_path / "c.md").exists()
    backup = items.with_name("items.jsonl.bak")  # not named .jsonl (re-test QA)
    backup.write_text(items.read_text(encoding="utf-8"), encoding="utf-8")
    res = CliRunner().invoke(app, ["card", "--run", str(backup), "-o", str(tmp_path / "c.md")])
    assert res.exit_code == 2 and "a records file" in " ".join(res.output.split())
