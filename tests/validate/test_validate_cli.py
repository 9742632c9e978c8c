"""`contamscope validate` end to end on the tiny random model (real CLI, real files)."""

from __future__ import annotations

import json
import re
import shlex
from html import escape as html_escape
from pathlib import Path

import pytest
from cli_runner import run_cli

QUESTIONS = [
    ("Which gas do plants absorb", "CO2", "oxygen", "nitrogen", "helium"),
    ("What is the capital of France", "Rome", "Paris", "Oslo", "Bern"),
    ("Which metal is liquid at room temperature", "iron", "mercury", "tin", "lead"),
    ("How many legs has a spider", "six", "eight", "ten", "four"),
    ("Which planet is largest", "Mars", "Venus", "Jupiter", "Earth"),
    ("What colour is the sky on a clear day", "blue", "green", "red", "yellow"),
    ("Which animal is a mammal", "whale", "shark", "trout", "eel"),
    ("What do bees make", "honey", "milk", "silk", "wax paper"),
    ("Which of these are prime", "4", "6", "7", "None of the above"),
]


@pytest.fixture()
def bench(tmp_path: Path) -> Path:
    path = tmp_path / "toy_test.csv"
    rows = [",".join([*q, "A"]) for q in QUESTIONS]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_validate_trains_scores_and_reports_then_reuses(
    tmp_path: Path, bench: Path, tiny_model_path: Path
) -> None:
    out = tmp_path / "val run"  # (a space: the report's commands quote the path)
    args = [
        "validate",
        "--model",
        f"hf:{tiny_model_path}",
        "-M",
        "bos=<|endoftext|>",
        "--benchmark",
        str(bench),
        "--n-items",
        "8",
        "--epochs",
        "1,2",
        "--lr",
        "3e-3",
        "--out",
        str(out),
        "--device",
        "cpu",
    ]
    first = run_cli(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "Traceback" not in first.stderr
    assert "training a copy on 4 leaked items" in first.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema"] == "contamscope.validate.summary/1"
    assert summary["method"] == "validate"
    assert summary["git_commit"] is None or len(summary["git_commit"]) == 40
    # 1 item is left outside the 8: too few references for alpha 0.05, so none are drawn
    assert summary["split"] == {
        "n_items": 8,
        "n_leaked": 4,
        "n_clean": 4,
        "n_reference": 0,
        "file": "split.json",
    }
    assert [r["epochs"] for r in summary["results"]] == [0, 1, 2]
    assert [t["epoch"] for t in summary["training"]] == [1, 2]
    names = list(summary["results"][0]["detectors"])
    assert names == [
        "alg1",
        "alg2@-0.2",
        "alg2-anchored@-0.2",
        "alg2@-0.17",
        "alg2-anchored@-0.17",
        "alg2@-0.15",
        "alg2-anchored@-0.15",
        "rank@0.05",
    ]
    for res in summary["results"]:
        for m in res["detectors"].values():
            assert m["n"] == 8 and m["tp"] + m["fn"] == 4 and m["fp"] + m["tn"] == 4
            assert 0 <= m["accuracy"] <= 1 and 0 <= m["auc"] <= 1
    split = json.loads((out / "split.json").read_text())
    leaked = {x["id"] for x in split["leaked"]}
    assert len(leaked) == 4 and not leaked & set(split["clean"])
    assert all(x["training_order"] == [0, 1, 2, 3] for x in split["leaked"])
    # the non-exchangeable item ('None of the above') is never drawn
    records = [json.loads(x) for x in (out / "epoch-2" / "items.jsonl").read_text().splitlines()]
    assert len(records) == 8 and not any(r.get("excluded") for r in records)
    # training raised the leaked items' original-order log-probs far more than the clean ones'
    d0, d2 = summary["results"][0]["diagnostics"], summary["results"][2]["diagnostics"]
    rise_leaked = d2["leaked"]["mean_original_logprob"] - d0["leaked"]["mean_original_logprob"]
    rise_clean = d2["clean"]["mean_original_logprob"] - d0["clean"]["mean_original_logprob"]
    assert rise_leaked > rise_clean + 5
    assert (out / "checkpoints" / "epoch-2" / "config.json").is_file()
    assert (out / "validation.png").stat().st_size > 1000
    assert "alg2-anchored@-0.17" in first.stdout

    # a re-run that drops the baseline and epoch 1 reuses the checkpoints and scores
    # (with no COLUMNS, as when a user pipes the output to a log: the table's numbers are kept
    # whole, not cut to "0.3…" for 80 columns)
    again = run_cli(
        *args[:-8], "--epochs", "2", "--no-baseline", *args[-6:], cwd=tmp_path, columns=None
    )
    assert again.returncode == 0, again.stderr
    assert "…" not in again.stdout
    fpr = summary["results"][2]["detectors"]["rank@0.05"]["fpr"]
    assert f"{fpr:.3f} [" in again.stdout
    assert "training a copy" not in again.stderr
    summary2 = json.loads((out / "summary.json").read_text())
    assert summary2["results"] == summary["results"][2:]
    assert summary2["training"] == summary["training"]
    # a run that trains only a missing early checkpoint keeps the later epochs' logs (the log
    # held epoch 1 only while epoch 2 was evaluated; helper audit)
    import shutil

    shutil.rmtree(out / "checkpoints" / "epoch-1")
    third = run_cli(*args, cwd=tmp_path)
    assert third.returncode == 0, third.stderr
    assert "training a copy on 4 leaked items for 1 epoch ..." in third.stderr
    # training is deterministic: the retrained checkpoint is the same model (files, identity),
    # so its folder resumes and nothing is scored again (docs/validation.md, re-runs)
    timings = json.loads((out / "epoch-1" / "summary.json").read_text())["timings"]
    assert timings["items_scored_now"] == 0 and timings["items_resumed"] == 8
    summary3 = json.loads((out / "summary.json").read_text())
    assert [t["epoch"] for t in summary3["training"]] == [1, 2]
    assert json.loads((out / "train_log.json").read_text()) == summary3["training"]
    assert summary2["config"]["baseline"] is False and summary2["config"]["epochs"] == [2]

    # --alpha is analysis only: another level re-analyses the folder (no training, no scoring)
    fourth = run_cli(*args, "--alpha", "0.1", cwd=tmp_path)
    assert fourth.returncode == 0, fourth.stderr
    assert "training a copy" not in fourth.stderr
    summary4 = json.loads((out / "summary.json").read_text())
    assert summary4["config"]["permutation"]["alpha"] == 0.1
    assert "alpha" not in json.loads((out / "settings.json").read_text())["config"]["permutation"]
    assert "rank@0.1" in summary4["results"][1]["detectors"]
    for e in (0, 1, 2):
        timings = json.loads((out / f"epoch-{e}" / "summary.json").read_text())["timings"]
        assert timings["items_scored_now"] == 0 and timings["items_resumed"] == 8
    # the folder copied and given relative to the working folder resumes: each epoch's folder
    # recorded its checkpoint as typed (hf:/abs/val run/checkpoints/...) and was refused as a
    # run with other settings (QA); the checkpoint's fingerprint, its content, is the same
    shutil.copytree(out, tmp_path / "copied")
    moved = [a if a != str(out) else "copied" for a in args]
    fifth = run_cli(*moved, "--alpha", "0.1", cwd=tmp_path)
    assert fifth.returncode == 0, fifth.stderr
    assert "training a copy" not in fifth.stderr
    for e in (0, 1, 2):
        epoch = tmp_path / "copied" / f"epoch-{e}"
        timings = json.loads((epoch / "summary.json").read_text())["timings"]
        assert timings["items_scored_now"] == 0 and timings["items_resumed"] == 8
    assert json.loads((epoch / "settings.json").read_text())["model"] == (
        "hf:copied/checkpoints/epoch-2"
    )
    # the folder's report shows the results per epoch ("0 of 0 rows" before), and the
    # leaderboard says why it has no cell (it pointed at that empty report; journey)
    from contamscope.errors import ConfigError
    from contamscope.report import build_report
    from contamscope.report.leaderboard import collect

    html = build_report(out).read_text(encoding="utf-8")
    assert "Detector accuracy vs training epochs" in html and "items.jsonl is missing" not in html
    assert "How accurate are the detectors" in html and "<h1>Validation run: " in html
    f1 = f"{summary4['results'][1]['detectors']['alg1']['f1']:.3f}"
    assert re.search(rf'\["1","alg1",("[^"]*",){{3}}"{f1}"', html)  # the table, as printed
    quoted = [html_escape(shlex.quote(str(out / f"epoch-{e}"))) for e in (0, 1, 2)]
    assert all(f"<code>contamscope report {q}</code>" in html for q in quoted)
    said = run_cli("report", str(out), cwd=tmp_path)  # its items are its epochs': no warning
    assert said.returncode == 0 and "missing" not in said.stderr, said.stderr
    with pytest.raises(ConfigError, match="validate run, it measures the detectors' accuracy"):
        collect([out])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--epochs", "3,1"], "--epochs must be increasing"),
        (["--epochs", "1,x"], "--epochs '1,x'"),
        (["--n-items", "50"], "--n-items 50: only 8 usable items"),
        (["--scenario", "c"], "--scenario 'c'"),
        (["--method", "mink"], "--method 'mink': expected one of permutation, benbench, cap"),
        # detectors that could never fire, and a declared statistic whose test went missing
        (["--reference-items", "10"], "--reference-items 10: with alpha 0.05 the membership"),
        (["--statistic", "combined"], "--statistic 'combined': validate declares one of"),
        # an unknown one was told to choose among gap and combined too, which are refused
        (["--statistic", "nope"], "'nope': validate declares one of min_k_pp, min_k, loss, zlib ("),
        # the model is checked before the benchmark is read ('loading model ./nope ...' came
        # first, after the benchmark's messages)
        (["--model", "./nope"], "error: --model ./nope: no such file or folder"),
    ],
)
def test_user_errors_are_one_line(
    tmp_path: Path, bench: Path, tiny_model_path: Path, extra: list[str], message: str
) -> None:
    model = ["--model", f"hf:{tiny_model_path}"]
    res = run_cli("validate", *model, "--benchmark", str(bench), *extra, cwd=tmp_path)
    assert res.returncode == 2
    assert message in res.stderr
    assert "Traceback" not in res.stderr
    assert [ln for ln in res.stderr.splitlines() if ln.strip()] == [res.stderr.strip()]


def test_skipped_rows_are_listed_and_exit_3(tmp_path: Path, tiny_model_path: Path) -> None:
    """validate printed the skipped rows but exited 0 and left them out of summary.json."""
    path = tmp_path / "bad_test.csv"
    rows = [",".join([*q, "A"]) for q in QUESTIONS[:6]] + ["only,three,cells"]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    res = run_cli(
        "validate", "--model", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>",
        "--benchmark", str(path), "--n-items", "4", "--epochs", "1", "--no-baseline",
        "--reference-items", "0", "--out", str(tmp_path / "v"), "--device", "cpu",
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 3, res.stderr
    summary = json.loads((tmp_path / "v" / "summary.json").read_text())
    assert [s.split(": ", 1)[0] for s in summary["skipped_rows"]] == [f"{path}:7"]


def test_a_rerun_that_draws_other_items_is_refused(tmp_path: Path) -> None:
    """A folder's scores and checkpoints belong to its split: a re-run whose draw differs (only
    the automatic reference count can, through --alpha) is refused and the folder kept."""
    from contamscope.errors import ConfigError
    from contamscope.validate.pipeline import _check_same_split

    path = tmp_path / "split.json"
    old = {"leaked": [{"id": "a", "training_order": [0, 1]}], "clean": ["b"], "reference": []}
    _check_same_split(path, old, overwrite=False)  # no folder yet
    path.write_text(json.dumps(old), encoding="utf-8")
    _check_same_split(path, json.loads(json.dumps(old)), overwrite=False)  # the same draw
    more_refs = {**old, "reference": ["c", "d"]}
    with pytest.raises(
        ConfigError, match="this run draws 2 reference items, the folder's run drew 0"
    ):
        _check_same_split(path, more_refs, overwrite=False)
    with pytest.raises(ConfigError, match="drew other items than this one"):
        _check_same_split(path, {**old, "clean": ["e"]}, overwrite=False)
    _check_same_split(path, more_refs, overwrite=True)  # --overwrite starts again
    assert json.loads(path.read_text()) == old


def test_unequal_halves_are_said(tmp_path: Path) -> None:
    """Items sharing one option set go to one side whole: 9 such items of 10 made the halves
    1 and 9, every rate resting on one item, without a word (QA). (The model is not one: the
    run stops once the split is drawn.)"""
    rows = [f"Which number is item {i}?,one,two,three,four,A" for i in range(9)]
    bench = tmp_path / "block_test.csv"
    bench.write_text("\n".join([*rows, "Capital of France?,Rome,Paris,Oslo,Bern,B"]) + "\n")
    (tmp_path / "no-model").mkdir()
    (tmp_path / "no-model" / "config.json").write_text("{}")
    args = ["--model", f"hf:{tmp_path / 'no-model'}", "--benchmark", str(bench), "--n-items", "10"]
    res = run_cli("validate", *args, "--out", str(tmp_path / "v"), cwd=tmp_path)
    assert res.returncode == 2
    said = [ln for ln in res.stderr.splitlines() if "halves are unequal" in ln]
    assert len(said) == 1 and said[0].startswith("note: the halves are unequal: 9 leaked and 1 ")
    assert said[0].endswith("clean items (items sharing one option set go to one side whole); "
                            "the rates rest on the smaller half: more --n-items or another "
                            "--seed evens them")  # fmt: skip
    # an odd --n-items splits 1 and 2 whatever the seed: nothing to say (QA)
    odd = tmp_path / "odd_test.csv"
    odd.write_text("2+2?,3,4,5,6,B\nSky?,blue,red,green,pink,A\nSun?,hot,cold,wet,dry,A\n")
    args = ["--model", f"hf:{tmp_path / 'no-model'}", "--benchmark", str(odd), "--n-items", "3"]
    res = run_cli("validate", *args, "--out", str(tmp_path / "w"), cwd=tmp_path)
    assert res.returncode == 2 and "halves are unequal" not in res.stderr, res.stderr
